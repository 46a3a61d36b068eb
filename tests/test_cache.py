"""The on-disk result cache (tfpar_lint.cache): hits, misses, corrupt entries, identical findings."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tfpar_lint import cache as cache_mod
from tfpar_lint import engine
from tfpar_lint.cache import Cache
from tfpar_lint.cli import main
from tfpar_lint.engine import AnalysisOptions, lint_paths
from tfpar_lint.registry import all_rules

ROOT = Path(__file__).resolve().parents[1]
ALL = frozenset(r.CODE for r in all_rules())

BAD = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
with strategy.scope():
    model.compile(optimizer="sgd", loss="mse")
"""
GOOD = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
"""
BROKEN = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope(:
    pass
"""


class Counter:
    """Counts the files actually linted (cache misses): the tasks lint_paths hands to its workers."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from tfpar_lint import workers

        self.paths: list[str] = []
        real = workers.run_tasks

        def counting(fn, tasks, **kw):
            if fn is engine._worker_digest:  # runs that use the cache
                self.paths.extend(t[0] for t in tasks)
            return real(fn, tasks, **kw)

        monkeypatch.setattr(workers, "run_tasks", counting)

    def take(self) -> list[str]:
        out, self.paths = self.paths, []
        return out


def dicts(results) -> list:
    return [([f.to_dict() for f in r.findings], None if r.error is None else vars(r.error), r.skipped)
            for r in results]


@pytest.fixture
def project(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "bad.py").write_text(BAD)
    (src / "good.py").write_text(GOOD)
    (src / "plain.py").write_text("x = 1\n")
    (src / "broken.py").write_text(BROKEN)
    return tmp_path


def files_of(project: Path) -> list[str]:
    return sorted(str(p) for p in (project / "src").glob("*.py"))


def test_second_run_is_all_hits_and_identical(project, monkeypatch):
    counter = Counter(monkeypatch)
    cdir = str(project / "cache")
    files = files_of(project)
    cold = lint_paths(files, enabled=ALL, jobs=1)
    first = lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    assert sorted(counter.take()) == files
    second = lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    assert counter.take() == []
    assert dicts(cold) == dicts(first) == dicts(second)
    assert any(r.findings for r in second) and any(r.error for r in second) and any(r.skipped for r in second)
    assert [r.path for r in second] == files


def test_cache_folder_ignores_itself(project):
    cdir = project / "cache"
    lint_paths(files_of(project), enabled=ALL, jobs=1, cache_dir=str(cdir))
    assert (cdir / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (cdir / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")


def test_content_change_is_a_miss(project, monkeypatch):
    counter = Counter(monkeypatch)
    cdir = str(project / "cache")
    files = files_of(project)
    lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    counter.take()
    bad = project / "src" / "bad.py"
    bad.write_text(GOOD)
    res = lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    assert counter.take() == [str(bad)]
    assert not res[files.index(str(bad))].findings
    bad.write_text(BAD)  # back to the old content: a miss again (one entry per file), then the old result
    res = lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    assert counter.take() == [str(bad)]
    assert res[files.index(str(bad))].findings


@pytest.mark.parametrize("change", ["enabled", "options", "noqa"])
def test_config_change_is_a_miss(project, monkeypatch, change):
    counter = Counter(monkeypatch)
    cdir = str(project / "cache")
    files = files_of(project)
    lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    counter.take()
    kw: dict = {"enabled": ALL}
    if change == "enabled":
        kw["enabled"] = ALL - {"TFP101"}
    elif change == "options":
        kw["options"] = AnalysisOptions(strategy_factories=("mylib.make_strategy",))
    else:
        kw["apply_noqa"] = False
    res = lint_paths(files, jobs=1, cache_dir=cdir, **kw)
    assert sorted(counter.take()) == files
    if change == "enabled":
        assert not any(f.code == "TFP101" for r in res for f in r.findings)
    # and the first configuration's entries are still there
    lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    assert counter.take() == []


def test_version_or_code_change_is_a_miss(project, monkeypatch):
    counter = Counter(monkeypatch)
    cdir = str(project / "cache")
    files = files_of(project)
    lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    counter.take()
    monkeypatch.setattr(cache_mod, "_code_fp", None)
    monkeypatch.setattr(cache_mod, "__version__", "999.0")
    lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    assert sorted(counter.take()) == files
    # editing one of tfpar-lint's own modules changes the fingerprint too (on a stand-in package)
    pkg = project / "pkg"
    (pkg / "rules").mkdir(parents=True)
    (pkg / "cache.py").write_text("")
    rule = pkg / "rules" / "tfp999_x.py"
    rule.write_text("A = 1\n")
    monkeypatch.setattr(cache_mod, "__file__", str(pkg / "cache.py"))
    monkeypatch.setattr(cache_mod, "_code_fp", None)
    fp1 = cache_mod.code_fingerprint()
    monkeypatch.setattr(cache_mod, "_code_fp", None)
    assert cache_mod.code_fingerprint() == fp1
    st = rule.stat()
    os.utime(rule, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    monkeypatch.setattr(cache_mod, "_code_fp", None)
    fp2 = cache_mod.code_fingerprint()
    assert fp2 != fp1
    rule.write_text("A = 22\n")
    os.utime(rule, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    monkeypatch.setattr(cache_mod, "_code_fp", None)
    assert cache_mod.code_fingerprint() != fp2  # size changed


CORRUPTIONS = {
    "garbage": lambda p: p.write_bytes(b"\x00\xffnot json"),
    "truncated": lambda p: p.write_text(p.read_text()[: len(p.read_text()) // 2]),
    "empty": lambda p: p.write_text(""),
    "list": lambda p: p.write_text("[1, 2, 3]"),
    "wrong digest": lambda p: p.write_text(json.dumps(dict(json.loads(p.read_text()), digest="0" * 64))),
    "wrong format": lambda p: p.write_text(json.dumps(dict(json.loads(p.read_text()), format=-1))),
    "bad finding": lambda p: p.write_text(json.dumps(dict(json.loads(p.read_text()), findings=[{"code": 1}]))),
    "findings not a list": lambda p: p.write_text(json.dumps(dict(json.loads(p.read_text()), findings=7))),
    "bad error": lambda p: p.write_text(json.dumps(dict(json.loads(p.read_text()), error={"line": "x"}))),
    "directory": lambda p: (p.unlink(), p.mkdir()),
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_corrupt_entries_are_ignored(project, monkeypatch, how):
    counter = Counter(monkeypatch)
    cdir = str(project / "cache")
    files = files_of(project)
    cold = lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    counter.take()
    c = Cache(cdir, ALL, AnalysisOptions(), True)
    bad = str(project / "src" / "bad.py")
    entry = Path(c.entry_path(bad))
    assert entry.is_file()
    CORRUPTIONS[how](entry)
    res = lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    assert counter.take() == [bad]
    assert dicts(res) == dicts(cold)
    if how != "directory":  # the entry was rewritten and is a hit again
        lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
        assert counter.take() == []


def test_unusable_cache_dir_does_not_fail(project):
    blocker = project / "not-a-dir"
    blocker.write_text("x")
    files = files_of(project)
    res = lint_paths(files, enabled=ALL, jobs=1, cache_dir=str(blocker / "cache"))
    assert dicts(res) == dicts(lint_paths(files, enabled=ALL, jobs=1))


def test_unreadable_file_is_not_cached(project, monkeypatch):
    counter = Counter(monkeypatch)
    cdir = str(project / "cache")
    missing = str(project / "src" / "missing.py")
    for _ in range(2):
        res = lint_paths([missing], enabled=ALL, jobs=1, cache_dir=cdir)
        assert res[0].error is not None and "no such file" in res[0].error.message
    assert counter.take() == [missing, missing]


def test_same_content_other_path_gets_its_own_path(project):
    cdir = str(project / "cache")
    a = project / "src" / "bad.py"
    b = project / "src" / "copy.py"
    b.write_text(BAD)
    lint_paths([str(a)], enabled=ALL, jobs=1, cache_dir=cdir)
    lint_paths([str(a), str(b)], enabled=ALL, jobs=1, cache_dir=cdir)
    res = lint_paths([str(a), str(b)], enabled=ALL, jobs=1, cache_dir=cdir)
    assert res[0].findings[0].path == str(a) and res[1].findings[0].path == str(b)


def test_pool_path_uses_and_fills_the_cache(project, monkeypatch):
    cdir = str(project / "cache")
    for i in range(6):
        (project / "src" / f"bad{i}.py").write_text(BAD + f"# {i}\n")
    files = files_of(project)
    cold = lint_paths(files, enabled=ALL, jobs=2)
    first = lint_paths(files, enabled=ALL, jobs=2, cache_dir=cdir)
    counter = Counter(monkeypatch)
    second = lint_paths(files, enabled=ALL, jobs=2, cache_dir=cdir)
    assert counter.take() == []
    assert dicts(cold) == dicts(first) == dicts(second)
    assert [r.path for r in second] == files


def test_fixtures_cold_equals_warm(tmp_path):
    """Every fixture: the cache returns exactly what a cold run finds."""
    files = sorted(str(p) for p in (ROOT / "fixtures").rglob("*.py"))
    assert len(files) >= 30, "fixtures/ is missing"
    cdir = str(tmp_path / "cache")
    cold = lint_paths(files, enabled=ALL, jobs=1)
    lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    warm = lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    assert dicts(cold) == dicts(warm)


def test_cli_flags(project, monkeypatch, capsys):
    monkeypatch.chdir(project)
    src = str(project / "src")
    assert main(["--no-config", "--no-cache", "--format", "json", src]) == 1  # broken.py: a syntax error is a finding (exit 1), as in ruff
    cold = capsys.readouterr().out
    assert not (project / ".tfpar_lint_cache").exists()
    main(["--no-config", "--format", "json", src])
    assert capsys.readouterr().out == cold
    assert (project / ".tfpar_lint_cache" / ".gitignore").is_file()  # default: in the project root
    main(["--no-config", "--format", "json", src])
    assert capsys.readouterr().out == cold
    main(["--no-config", "--cache-dir", str(project / "elsewhere"), "--format", "json", src])
    assert capsys.readouterr().out == cold
    assert (project / "elsewhere" / ".gitignore").is_file()


def test_cli_cache_dir_from_config(project, monkeypatch, capsys):
    (project / "pyproject.toml").write_text('[tool.tfpar-lint]\ncache-dir = "build/lintcache"\n')
    sub = project / "src"
    monkeypatch.chdir(sub)
    main(["--format", "json", "."])
    capsys.readouterr()
    assert (project / "build" / "lintcache" / ".gitignore").is_file()  # relative to the project root
