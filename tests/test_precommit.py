"""pre-commit integration: the hook manifest, and `pre-commit try-repo` really installing and running it.

`try-repo` builds a fresh virtualenv and pip-installs this project into it (hatchling and libcst
come from the package index).  Offline, point TFPAR_PRECOMMIT_WHEELHOUSE at a folder of wheels
(hatchling, libcst and their dependencies): the install then runs with PIP_NO_INDEX and
PIP_FIND_LINKS.  Without either, the test is skipped with the pip error as the reason.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import NETWORK_ERRORS, snapshot_repo

pytestmark = pytest.mark.slow  # builds environments or wheels, or downloads: handed out first under xdist

REPO_ROOT = Path(__file__).resolve().parents[1]
MANIFEST = REPO_ROOT / ".pre-commit-hooks.yaml"


def test_manifest_is_valid_and_as_documented():
    clientlib = pytest.importorskip("pre_commit.clientlib")
    hooks = clientlib.load_manifest(str(MANIFEST))
    hook = {h["id"]: h for h in hooks}["tfpar-lint"]
    assert hook["entry"] == "tfpar-lint"
    assert hook["language"] == "python"
    assert sorted(hook["types_or"]) == ["jupyter", "python"]
    assert hook["require_serial"] is False
    assert "--force-exclude" in hook["args"]


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=cwd,
                   check=True, capture_output=True)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    wheelhouse = env.get("TFPAR_PRECOMMIT_WHEELHOUSE")
    if wheelhouse:
        env["PIP_NO_INDEX"] = "1"
        env["PIP_FIND_LINKS"] = wheelhouse
    return env


def _try_repo(tool: Path, user: Path, *files: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(tool), "tfpar-lint",
                           "--files", *files], cwd=user, capture_output=True, text=True, env=_env(),
                          timeout=900)


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    pytest.importorskip("pre_commit")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    tool = snapshot_repo(tmp_path_factory.mktemp("tool"))
    user = tmp_path_factory.mktemp("user")
    _git("init", "-q", cwd=user)
    return tool, user


def _skip_if_offline(proc: subprocess.CompletedProcess) -> None:
    out = proc.stdout + proc.stderr
    if proc.returncode != 0 and any(e in out for e in NETWORK_ERRORS):
        pytest.skip("pre-commit could not pip-install the hook's environment (no package index "
                    "reachable; set TFPAR_PRECOMMIT_WHEELHOUSE): "
                    + next(ln for ln in out.splitlines() if any(e in ln for e in NETWORK_ERRORS))[:200])


def test_try_repo_reports_findings(repos, snippets, tfp101_notebook):
    tool, user = repos
    (user / "bad.py").write_text(snippets.tfp101)
    (user / "ok.py").write_text(snippets.clean)
    (user / "nb.ipynb").write_text(tfp101_notebook)
    (user / "legacy").mkdir()
    (user / "legacy" / "old.py").write_text(snippets.tfp101)
    (user / "pyproject.toml").write_text("[tool.tfpar-lint]\nextend-exclude = ['legacy']\n")
    _git("add", "-A", cwd=user)
    proc = _try_repo(tool, user, "bad.py", "ok.py", "nb.ipynb", "legacy/old.py", "pyproject.toml")
    _skip_if_offline(proc)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "tfpar-lint" in out and "Failed" in out
    assert "bad.py:3:9: TFP101" in out
    assert "nb.ipynb:cell_3:2:9: TFP101" in out
    assert "ok.py:" not in out
    assert "legacy/old.py" not in out  # --force-exclude honours the project's excludes


def test_try_repo_zero_files_passes(repos):
    tool, user = repos
    (user / "notes.md").write_text("# nothing to lint\n")
    _git("add", "-A", cwd=user)
    proc = _try_repo(tool, user, "notes.md")
    _skip_if_offline(proc)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "(no files to check)Skipped" in out or "Passed" in out


def test_hook_entry_with_no_tf_files_exits_0(project, tfpar):
    project.write("plain.py", "print('hello')\n")
    r = tfpar("--force-exclude", "plain.py")
    assert (r.rc, r.out) == (0, "")


def test_readme_snippet_with_a_path_and_a_commit_runs(repos, snippets):
    """The README's pre-commit snippet (repo: a path, rev: a commit) works with `pre-commit run`."""

    tool, user = repos
    readme = (REPO_ROOT / "README.md").read_text()
    start = readme.index("### pre-commit")
    section = readme[start:readme.index("\n#", start + 1)]  # up to the next heading
    yaml = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tool, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert "/abs/path/to/tfpar-lint" in yaml and re.search(r"rev: [0-9a-f]{40}", yaml)
    config = re.sub(r"rev: [0-9a-f]{40}", f"rev: {sha}", yaml.replace("/abs/path/to/tfpar-lint", str(tool)))
    (user / ".pre-commit-config.yaml").write_text(config)
    (user / "snippet_bad.py").write_text(snippets.tfp101)
    _git("add", "-A", cwd=user)
    proc = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--files", "snippet_bad.py"], cwd=user,
                          capture_output=True, text=True, env=_env(), timeout=900)
    _skip_if_offline(proc)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "snippet_bad.py:3:9: TFP101" in out, out


# ---------------------------------------------------------------------------------------------
# Whole-project analysis through the real `pre-commit run` (issue 9): a git repository holding a
# copy of fixtures/project/bad (or good) with a .pre-commit-config.yaml that names a committed
# snapshot of this repository, so pre-commit installs the package and runs the hook exactly as
# .pre-commit-hooks.yaml defines it, on the staged files only.

PROJECT = REPO_ROOT / "fixtures" / "project"
_FINDING = re.compile(r"^(?P<path>[^\s:]+\.py):(?P<line>\d+):\d+: (?P<code>TFP\d+) ", re.M)


def _findings(text: str) -> set[tuple[str, int, str]]:
    return {(m["path"], int(m["line"]), m["code"]) for m in _FINDING.finditer(text)}


def _labels(folder: Path) -> set[tuple[str, int, str]]:
    from tfpar_lint.expectations import expected_in_source

    return {(p.relative_to(folder).as_posix(), line, code) for p in sorted(folder.rglob("*.py"))
            for line, code in expected_in_source(p.read_text(encoding="utf-8"))}


def _cli_whole_folder(folder: Path) -> set[tuple[str, int, str]]:
    """What the CLI reports when it lints the whole folder (every file at once)."""
    proc = subprocess.run([sys.executable, "-m", "tfpar_lint", "--no-cache", "--format", "json", "."], cwd=folder,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    return {(Path(f["path"]).as_posix().removeprefix("./"), f["line"], f["code"])
            for f in json.loads(proc.stdout or "[]")}


@pytest.fixture(scope="module")
def project_repo(repos, tmp_path_factory):
    """A function making a git repository with fixtures/project/<twin> committed and a
    .pre-commit-config.yaml naming the snapshot of this repository at its commit."""
    tool, _user = repos
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tool, capture_output=True, text=True,
                         check=True).stdout.strip()
    env = _env()
    env["PRE_COMMIT_HOME"] = str(tmp_path_factory.mktemp("pre-commit-home"))  # one hook install for these tests

    def make(twin: str) -> tuple[Path, dict[str, str]]:
        user = tmp_path_factory.mktemp(f"user_{twin}")
        shutil.copytree(PROJECT / twin, user, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        (user / ".pre-commit-config.yaml").write_text(
            f"repos:\n-   repo: {tool}\n    rev: {sha}\n    hooks:\n    -   id: tfpar-lint\n")
        _git("init", "-q", cwd=user)
        _git("add", "-A", cwd=user)
        _git("commit", "-q", "-m", "the project", cwd=user)
        return user, env

    return make


def _run_staged(user: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`pre-commit run`: the hook gets the staged files only."""
    proc = subprocess.run([sys.executable, "-m", "pre_commit", "run"], cwd=user, capture_output=True, text=True,
                          env=env, timeout=900)
    _skip_if_offline(proc)
    return proc


def _edit(user: Path, *names: str) -> None:
    """Change the files (a comment appended: no line moves) and stage them."""
    for name in names:
        with open(user / name, "a", encoding="utf-8") as f:
            f.write("# edited\n")
    _git("add", *names, cwd=user)


def test_pre_commit_run_on_one_changed_file_reports_the_whole_projects_findings(project_repo):
    """One file of the split project changed: its findings, the cross-file ones whose evidence
    lives in unchanged files included, are what the CLI reports for it over the whole folder
    (and what its `# expect:` labels say); no other file is reported."""
    user, env = project_repo("bad")
    labels = _labels(user)
    whole = _cli_whole_folder(user)
    assert whole == labels
    for name in ("train.py", "steps.py", "workers.py", "mw_train.py", "pkg/checkpoints.py"):
        _edit(user, name)
        proc = _run_staged(user, env)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 1, out  # pre-commit fails when the hook does
        assert "tfpar-lint" in out and "Failed" in out and "- exit code: 1" in out, out
        want = {x for x in whole if x[0] == name}
        assert want, name
        assert _findings(out) == want, (name, out)
        _git("commit", "-q", "-m", f"edit {name}", cwd=user)


def test_pre_commit_run_on_many_changed_files_matches_the_cli(project_repo):
    """Every Python file staged (pre-commit may split them over several hook processes): the
    findings are the CLI's over the folder."""
    user, env = project_repo("bad")
    names = sorted(p.relative_to(user).as_posix() for p in user.rglob("*.py"))
    _edit(user, *names)
    proc = _run_staged(user, env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert _findings(out) == _cli_whole_folder(user) == _labels(user)


def test_pre_commit_run_passes_when_the_staged_fix_removes_the_finding(project_repo):
    """The replica step fixed (its replica-ness comes from train.py, unchanged): the hook
    passes and pre-commit exits 0."""
    user, env = project_repo("bad")
    steps = user / "steps.py"
    steps.write_text(steps.read_text(encoding="utf-8").replace("    tf.random.set_seed(7)  # expect: TFP401\n", ""),
                     encoding="utf-8")
    _git("add", "steps.py", cwd=user)
    proc = _run_staged(user, env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "tfpar-lint" in out and "Passed" in out and not _findings(out)


def test_pre_commit_run_on_the_correct_twin_passes(project_repo):
    user, env = project_repo("good")
    names = sorted(p.relative_to(user).as_posix() for p in user.rglob("*.py"))
    for name in ("train.py", "steps.py", "workers.py", "mw_train.py", "pkg/checkpoints.py"):
        _edit(user, name)
        proc = _run_staged(user, env)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0 and "Passed" in out and not _findings(out), (name, out)
        _git("commit", "-q", "-m", f"edit {name}", cwd=user)
    _edit(user, *names)
    proc = _run_staged(user, env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Passed" in out and not _findings(out), out
