"""Shared fixtures: TF snippets, notebook builder, in-process and subprocess CLI runners."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SARIF_SCHEMA = REPO_ROOT.parent / "shared" / "data" / "sarif-schema-2.1.0.json"

# Where the test machine has no user/network namespaces, --verify refuses to start a local cluster
# (its gRPC servers would listen on every interface) unless this is set; the cluster tests opt in
# (a CI runner), and tests/test_verify_contain.py checks the refusal with it unset.
os.environ.setdefault("TFPAR_VERIFY_EXPOSED_CLUSTER", "1")
# The verifier's time-outs are the tests' own (sized for the suite's parallel modules, tests/README.md),
# not scaled with the load the suite itself makes; tests/test_verify_load.py measures the scaling.
os.environ.setdefault("TFPAR_VERIFY_LOAD_SCALE", "1")

# TFP101: the model is built outside the scope (line 3, col 9) and compiled under it.
TFP101_SRC = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
with strategy.scope():
    model.compile(optimizer="sgd", loss="mse")
"""
TFP101_LINE, TFP101_COL = 3, 9

# The same program done right: no finding.
CLEAN_TF_SRC = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
"""

# Mentions TensorFlow and a strategy (so the pre-filter lets it through) but does not parse:
# Python (and flake8's E999) put the error at line 3, column 5.
SYNTAX_ERROR_SRC = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
x = = 2
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    strategy.run(model)
"""
SYNTAX_ERROR_LINE = 3


@dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return [ln for ln in self.out.splitlines() if ln.strip()]


@pytest.fixture
def snippets():
    class S:
        tfp101 = TFP101_SRC
        tfp101_line = TFP101_LINE
        tfp101_col = TFP101_COL
        clean = CLEAN_TF_SRC
        syntax_error = SYNTAX_ERROR_SRC
        syntax_error_line = SYNTAX_ERROR_LINE
    return S


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A temp folder as cwd, with a helper to write files (parents created)."""
    monkeypatch.chdir(tmp_path)

    class P:
        root = tmp_path

        @staticmethod
        def write(rel: str, text: str | bytes) -> Path:
            p = tmp_path / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):
                p.write_bytes(text)
            else:
                p.write_text(text, encoding="utf-8")
            return p
    return P


@pytest.fixture
def cli(capsys, monkeypatch) -> Callable[..., Result]:
    """Run ``tfpar_lint.cli.main`` in-process; ``stdin`` feeds standard input."""
    from tfpar_lint.cli import main

    def run(*args: str, stdin: Optional[bytes] = None) -> Result:
        if stdin is not None:
            import io

            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        capsys.readouterr()
        rc = main(list(args))
        cap = capsys.readouterr()
        return Result(rc, cap.out, cap.err)
    return run


# What pip prints when no package index can be reached (a test that pip-installs skips on these).
NETWORK_ERRORS = ("Could not find a version", "No matching distribution", "NewConnectionError",
                  "Temporary failure in name resolution", "Network is unreachable", "ProxyError",
                  "Failed to establish a new connection", "Read timed out", "SSLError")


def snapshot_repo(dest: Path, leave_out: tuple[str, ...] = ("tests/", "fixtures/", "benchmarks/")) -> Path:
    """A git repository at ``dest`` holding one commit: this working tree as it is (tracked and untracked
    files, minus ignored ones and the folders in ``leave_out``), for tests that install from git."""
    import shutil

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=dest,
                       check=True, capture_output=True)

    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = REPO_ROOT / rel
        if not src.is_file() or src.is_symlink() or rel.startswith(leave_out):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "snapshot")
    return dest


def default_signals() -> None:
    """``preexec_fn`` for a child that a test sends SIGINT or SIGTERM: both do what they do by default.
    A suite run under `nohup` in the background, or in the background of a non-interactive shell,
    inherits SIGINT ignored, and a child keeps an ignored signal ignored, so a test that interrupts a
    child installs the signals explicitly instead of relying on what it inherited."""
    import signal

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_DFL)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``bash scripts/dev.sh test`` runs ``-n 2 --dist loadfile
    --no-loadscope-reorder``), the modules that take long (marked ``verify`` or ``slow``) are handed
    out first, those with the most such tests first, and the many quick modules fill the gaps at the
    end, so no worker is left with one long module after the other has finished.  Each module stays
    whole on one worker (loadfile): its module-scoped fixtures, which run many TensorFlow scripts at
    once, run once.  A run without xdist keeps pytest's order."""
    if not hasattr(config, "workerinput"):
        return
    from collections import Counter

    slow = Counter(item.path for item in items
                   if item.get_closest_marker("verify") is not None or item.get_closest_marker("slow") is not None)
    items.sort(key=lambda item: -slow[item.path])  # stable: pytest's order within a module and among equals


def _package_root() -> str:
    """The folder holding the tfpar_lint this process imported (the worktree's src/ or site-packages)."""
    import tfpar_lint

    return str(Path(tfpar_lint.__file__).resolve().parents[1])


def run_subprocess(args: Sequence[str], cwd: Path | str, stdin: Optional[bytes] = None,
                   env: Optional[dict] = None, timeout: int = 300) -> Result:
    e = dict(os.environ)
    # the subprocess (tfpar-lint, flake8 and its plugin) imports the same tfpar_lint as the tests
    e["PYTHONPATH"] = _package_root()
    if env:
        e.update(env)
    p = subprocess.run(list(args), cwd=str(cwd), input=stdin, capture_output=True, env=e, timeout=timeout)
    return Result(p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"))


@pytest.fixture
def proc():
    """``proc(argv, cwd, stdin=None, env=None)`` -> Result of a real subprocess."""
    return run_subprocess


@pytest.fixture
def tfpar(project) -> Callable[..., Result]:
    """Run ``python -m tfpar_lint`` in a subprocess (real exit code, real streams)."""
    def run(*args: str, stdin: Optional[bytes] = None, cwd: Optional[Path] = None) -> Result:
        return run_subprocess([sys.executable, "-m", "tfpar_lint", *args], cwd or project.root, stdin)
    return run


def make_notebook(cells: Sequence[tuple[str, str]], language: str = "python") -> str:
    """``[("code"|"markdown", source), ...]`` -> nbformat 4 JSON text (sources as line lists)."""
    out = []
    for kind, src in cells:
        cell = {"cell_type": kind, "metadata": {}, "source": src.splitlines(keepends=True)}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        out.append(cell)
    nb = {"cells": out, "metadata": {"kernelspec": {"language": language, "name": "python3",
                                                    "display_name": "Python 3"}},
          "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=1)


@pytest.fixture
def notebook():
    return make_notebook


@pytest.fixture
def tfp101_notebook(notebook) -> str:
    """TFP101 across cells: the model is built in cell 3 line 2 col 9, compiled in cell 5."""
    return notebook([
        ("markdown", "# Training\n"),
        ("code", "%matplotlib inline\nimport tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"),
        ("code", "!pip install nothing\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"),
        ("code", "%%bash\necho this cell is not python (\n"),
        ("code", "with strategy.scope():\n    model.compile(optimizer='sgd', loss='mse')\n"),
    ])


@pytest.fixture(scope="session")
def pypi_corpus(tmp_path_factory):
    """The PyPI precision corpus (tests/pypi_wheels.py), extracted once per session.

    Skips, with pip's reason, only when the package index cannot be reached and a wheel is not cached;
    every other download problem fails."""
    import pypi_wheels

    try:
        return pypi_wheels.build(tmp_path_factory.mktemp("pypi-corpus"))
    except pypi_wheels.NetworkUnavailable as exc:
        pytest.skip(f"network unavailable, PyPI corpus not downloaded: {exc}")
