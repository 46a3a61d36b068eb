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


# ------------------------------------------------- the digest index (files hashed only when changed)
def _same_size(text: str, size: int) -> str:
    """``text`` padded with a comment to ``size`` bytes."""
    pad = size - len(text.encode()) - 1
    assert pad >= 1
    return text + "#" * pad + "\n"


def test_unchanged_files_are_not_read_again(project, monkeypatch):
    """A file whose status (device, inode, size, times) is the one remembered is not read: its
    digest comes from the index; the result is the same."""
    monkeypatch.setattr(cache_mod, "RACY_NS", 0)  # trust files just written
    cdir = str(project / "cache")
    files = files_of(project)
    first = lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)  # the index learns every file
    index = json.loads((project / "cache" / "digests" / "v1.json").read_bytes().split(b"\n", 1)[1])
    assert set(files) <= set(index)
    reads: list[str] = []
    real = cache_mod.read_regular_stat
    monkeypatch.setattr(cache_mod, "read_regular_stat", lambda p, m=0: (reads.append(p), real(p, m))[1])
    counter = Counter(monkeypatch)
    third = lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    assert counter.take() == [] and reads == []
    assert dicts(first) == dicts(third)


def test_an_edit_that_keeps_size_and_mtime_is_a_miss(project, monkeypatch):
    """The status-change time is part of the key: content replaced by other content of the same
    size, with the modification time set back, is read and linted again."""
    monkeypatch.setattr(cache_mod, "RACY_NS", 0)
    counter = Counter(monkeypatch)
    cdir = str(project / "cache")
    files = files_of(project)
    bad = project / "src" / "bad.py"
    size = max(len(BAD.encode()), len(GOOD.encode())) + 2
    bad.write_text(_same_size(BAD, size))
    for _ in range(2):
        res = lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    assert res[files.index(str(bad))].findings
    counter.take()
    st = os.stat(bad)
    bad.write_text(_same_size(GOOD, size))
    os.utime(bad, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = os.stat(bad)
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    res = lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    assert counter.take() == [str(bad)]
    assert not res[files.index(str(bad))].findings


def test_recently_changed_files_are_not_trusted_by_status(project):
    """A file changed within RACY_NS of being read is hashed on every run (a write in the same
    clock tick would leave its times as they were)."""
    cdir = str(project / "cache")
    files = files_of(project)
    old = project / "src" / "plain.py"
    t = os.stat(old).st_mtime_ns - 10 * cache_mod.RACY_NS
    os.utime(old, ns=(t, t))  # its ctime is still now: not trusted either
    for _ in range(2):
        lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    index_file = project / "cache" / "digests" / "v1.json"
    index = json.loads(index_file.read_bytes().split(b"\n", 1)[1]) if index_file.exists() else {}
    assert not set(files) & set(index)


@pytest.mark.parametrize("how", ["garbage", "checksum", "fifo"])
def test_corrupt_digest_index_is_ignored(project, monkeypatch, how):
    monkeypatch.setattr(cache_mod, "RACY_NS", 0)
    cdir = str(project / "cache")
    files = files_of(project)
    cold = lint_paths(files, enabled=ALL, jobs=1)
    lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    index_file = project / "cache" / "digests" / "v1.json"
    data = index_file.read_bytes()
    index_file.unlink()
    if how == "garbage":
        index_file.write_bytes(b"\x00not json")
    elif how == "checksum":  # every file mapped to the digest of another, the checksum left as it was
        head, body = data.split(b"\n", 1)
        index = json.loads(body)
        digests = [v[5] for v in index.values()]
        for v, d in zip(index.values(), digests[1:] + digests[:1]):
            v[5] = d
        index_file.write_bytes(head + b"\n" + json.dumps(index).encode())
    else:
        os.mkfifo(index_file)
    counter = Counter(monkeypatch)
    res = lint_paths(files, enabled=ALL, jobs=1, cache_dir=cdir)
    assert counter.take() == []  # every file hashed again: all hits
    assert dicts(res) == dicts(cold)


# ------------------------------------------------- the project's import index, kept between runs
def test_import_index_is_kept_and_updated_file_by_file(tmp_path, monkeypatch):
    """The index of who imports whom is kept in the cache folder: a run that finds the project's
    folders and files unchanged reads no file; an edited file is the only one read again; a file
    added or removed (its folder changed) is seen.  Each time the index equals one built afresh."""
    import time

    from tfpar_lint.semantic import project as project_mod
    from tfpar_lint.semantic.summary import SummaryStore

    monkeypatch.setattr(cache_mod, "RACY_NS", 0)
    src = tmp_path / "proj"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "steps.py").write_text("def train_step(x):\n    return x\n")
    (src / "train.py").write_text("from steps import train_step\n")
    (src / "pkg" / "util.py").write_text("import os\n")
    (src / "other.py").write_text("x = 1\n")
    cache = str(tmp_path / "cache")
    steps = str(src / "steps.py")
    reads: list[str] = []
    real = project_mod._read_regular
    monkeypatch.setattr(project_mod, "_read_regular", lambda p: (reads.append(p), real(p))[1])

    def index(kept: bool) -> dict:
        proj = project_mod.Project([str(src)], None, summaries=SummaryStore(cache if kept else None))
        return {k: sorted(v) for k, v in proj._import_index().items()}

    def settle():
        time.sleep(0.05)  # the next change gets other times than the last (a coarse clock's tick)

    first = index(kept=True)
    assert first[steps] == [str(src / "train.py")]
    reads.clear()
    assert index(kept=True) == first and reads == []  # nothing changed: nothing read
    settle()
    (src / "other.py").write_text("import steps\n")
    reads.clear()
    got = index(kept=True)
    assert reads == [str(src / "other.py")]
    assert got[steps] == sorted([str(src / "train.py"), str(src / "other.py")])
    reads.clear()
    assert got == index(kept=False)
    settle()
    (src / "pkg" / "new.py").write_text("from steps import train_step\n")  # pkg/ gains a file
    got = index(kept=True)
    assert str(src / "pkg" / "new.py") in got[steps] and got == index(kept=False)
    settle()
    (src / "train.py").unlink()
    got = index(kept=True)
    assert str(src / "train.py") not in got[steps] and got == index(kept=False)
