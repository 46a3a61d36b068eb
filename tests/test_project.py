"""Whole-project analysis (issue 9): values followed across the files of a project.

``fixtures/project/bad/`` is one training job split over six files (strategy helper, model
factory, data module, replica step, thread target, training loop), and a multi-worker job
(``mw_train.py`` and ``pkg/``) that reaches its values through chains of attributes in other
modules (``config.settings.strategy``, ``helpers.factory.build_model()``, ``pkg.dist.is_chief``)
and tests for the chief with a helper of another module; ``bad_single*.py`` are the same programs
in one file each; ``good/`` is the corrected project.  The split programs must give the single
files' findings in every mode (CLI over the folder, one changed file as pre-commit passes it,
flake8), and their twin none."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tfpar_lint import engine
from tfpar_lint.cache import Cache
from tfpar_lint.expectations import expected_in_source
from tfpar_lint.semantic import project as project_mod

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "fixtures" / "project"


def cli(*args: str, cwd: Path = ROOT) -> tuple[int, list[dict], str]:
    proc = subprocess.run([sys.executable, "-m", "tfpar_lint", "--no-cache", "--format", "json", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=300)
    return proc.returncode, json.loads(proc.stdout or "[]"), proc.stderr


def expected(folder: Path) -> set[tuple[str, int, str]]:
    out = set()
    for p in sorted(folder.rglob("*.py")):
        for line, code in expected_in_source(p.read_text(encoding="utf-8")):
            out.add((p.relative_to(folder).as_posix(), line, code))
    return out


def found(items: list[dict], folder: Path) -> set[tuple[str, int, str]]:
    return {(Path(f["path"]).resolve().relative_to(folder.resolve()).as_posix(), f["line"], f["code"])
            for f in items if not f.get("error")}


def test_split_project_gives_the_single_files_findings():
    rc, items, err = cli(str(PROJECT / "bad"))
    assert rc == 1, err
    got = found(items, PROJECT / "bad")
    assert got == expected(PROJECT / "bad")
    # the strategy, the model, the data, the step, the thread target and the chief test each
    # live in another file
    assert {f for f, _l, _c in got} == {"train.py", "steps.py", "workers.py", "mw_train.py", "pkg/checkpoints.py"}
    singles = sorted(PROJECT.glob("bad_single*.py"))
    _rc, single, _err = cli(*map(str, singles))
    assert sorted(c for _f, _l, c in got) == sorted(f["code"] for f in single)
    for path in singles:
        assert {(f["line"], f["code"]) for f in single if Path(f["path"]).name == path.name} == expected_in_source(
            path.read_text(encoding="utf-8"))


def test_chains_of_attributes_and_chief_helpers_of_other_modules():
    """The multi-worker job finds its strategy as ``config.settings.strategy`` (a module-level
    object's attribute), its model as ``helpers.factory.build_model()`` (a module-level
    instance's method) and tells the chief by ``pkg.dist.is_chief(strategy)`` (``import pkg.dist``)
    and ``from .dist import is_chief``: without the other modules none of it is known."""
    rc, items, err = cli(str(PROJECT / "bad" / "mw_train.py"), str(PROJECT / "bad" / "pkg"))
    assert rc == 1, err
    assert found(items, PROJECT / "bad") == {("mw_train.py", 16, "TFP603"), ("pkg/checkpoints.py", 12, "TFP603")}
    _rc, alone, _err = cli("--no-project", str(PROJECT / "bad" / "mw_train.py"), str(PROJECT / "bad" / "pkg"))
    assert alone == []


def test_correct_twin_is_silent():
    rc, items, err = cli(str(PROJECT / "good"))
    assert (rc, items) == (0, []), err


def test_each_file_alone_as_pre_commit_passes_changed_files():
    """pre-commit hands over only the changed files: the unchanged modules they import, or
    that import them, still come from the project on disk."""
    for name in ("steps.py", "workers.py", "train.py", "mw_train.py", "pkg/checkpoints.py"):
        rc, items, err = cli(str(PROJECT / "bad" / name))
        want = {x for x in expected(PROJECT / "bad") if x[0] == name}
        assert found(items, PROJECT / "bad") == want, (name, err)


def test_no_project_reads_each_file_alone():
    _rc, items, _err = cli("--no-project", str(PROJECT / "bad"))
    got = found(items, PROJECT / "bad")
    assert got < expected(PROJECT / "bad")  # the cross-file findings are gone
    assert not any(f == "steps.py" for f, _l, _c in got)


def test_flake8_reports_the_same(tmp_path):
    pytest.importorskip("flake8")
    # a copy: the plugin keeps the modules' summaries in the project's cache folder, and the
    # repository's fixtures must stay untouched (the verifier's tests check that no file appears there)
    work = tmp_path / "bad"
    shutil.copytree(PROJECT / "bad", work, ignore=shutil.ignore_patterns(".tfpar_lint_cache", "__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "TFP", "."], cwd=work,
                          capture_output=True, text=True, timeout=300)
    got = set()
    for line in proc.stdout.splitlines():
        path, lineno, _col, rest = line.split(":", 3)
        got.add((Path(path).as_posix().removeprefix("./"), int(lineno), rest.split()[0]))
    assert got == expected(PROJECT / "bad")


def test_notebook_in_the_folder_imports_the_project(tmp_path):
    proj = tmp_path / "proj"
    shutil.copytree(PROJECT / "good", proj)
    cells = ["from utils.dist import make_strategy\nimport models\n",
             "strategy = make_strategy()\nmodel = models.build_model()\n",
             "with strategy.scope():\n    model.compile(optimizer='sgd', loss='mse')\n"]
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None}
                    for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (proj / "explore.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    _rc, items, err = cli(str(proj / "explore.ipynb"))
    assert [(f["cell"], f["line"], f["code"]) for f in items] == [(2, 2, "TFP101")], err


def test_cache_reanalyses_the_edited_file_and_its_dependents(tmp_path):
    proj = tmp_path / "proj"
    shutil.copytree(PROJECT / "bad", proj)
    (proj / "unrelated.py").write_text("import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"
                                       "model = tf.keras.Sequential()\nwith strategy.scope():\n"
                                       "    model.compile(optimizer='sgd', loss='mse')\n", encoding="utf-8")
    files = sorted(str(p) for p in proj.rglob("*.py"))
    opts = engine.AnalysisOptions()
    cache_dir = str(tmp_path / "cache")

    def fresh() -> set[str]:
        """The files whose cached result is still valid."""
        cache = Cache(cache_dir, None, opts, graph=engine.cache_graph(opts))
        return {Path(p).relative_to(proj).as_posix() for p in files if cache.get(p) is not None}

    cold = engine.lint_paths(files, options=opts, jobs=1, cache_dir=cache_dir)
    assert fresh() == {Path(p).relative_to(proj).as_posix() for p in files}
    warm = engine.lint_paths(files, options=opts, jobs=1, cache_dir=cache_dir)
    assert [[(f.line, f.code) for f in r.findings] for r in warm] == [[(f.line, f.code) for f in r.findings]
                                                                       for r in cold]
    # the thread target becomes atomic: it and the files whose answers read it are stale
    w = proj / "workers.py"
    w.write_text(w.read_text(encoding="utf-8").replace("total.assign(total + v)  # expect: TFP301",
                                                       "total.assign_add(v)"), encoding="utf-8")
    still = fresh()
    assert "workers.py" not in still and "train.py" not in still  # edited, and its importer
    assert "unrelated.py" in still and "utils/__init__.py" in still  # read nothing of it
    after = {Path(r.path).name: r for r in engine.lint_paths(files, options=opts, jobs=1, cache_dir=cache_dir)}
    assert not after["workers.py"].findings
    assert [f.code for f in after["unrelated.py"].findings] == ["TFP101"]
    assert [f.code for f in after["train.py"].findings] == ["TFP101", "TFP201", "TFP701"]


def test_cap_on_files_read_is_reported(monkeypatch, tmp_path):
    monkeypatch.setattr(project_mod, "MAX_MODULES", 1)
    engine._PROJECTS.clear()
    try:
        r = engine.lint_file(str(PROJECT / "bad" / "train.py"))
    finally:
        engine._PROJECTS.clear()
    assert r.capped
    assert len(r.findings) < 2  # imports beyond the cap were not followed


def test_budget_of_bytes_parsed_per_linted_file(monkeypatch):
    """Each linted file may parse at most a budget of the project's other files (issue 20: project
    mode at most 1.5x the per-file time): past it, imports are not followed and the cap is
    reported; a module the budget refused is not remembered as unknown for the next file."""
    engine._PROJECTS.clear()
    monkeypatch.setattr(project_mod, "BUDGET_BASE", 0)
    monkeypatch.setattr(project_mod, "BUDGET_FACTOR", 0.0)
    try:
        r = engine.lint_file(str(PROJECT / "bad" / "train.py"))
        assert r.capped and len(r.findings) < 2
        monkeypatch.setattr(project_mod, "BUDGET_BASE", 64 * 1024)
        again = engine.lint_file(str(PROJECT / "bad" / "train.py"))
    finally:
        engine._PROJECTS.clear()
    assert [f.code for f in again.findings] == ["TFP101", "TFP201", "TFP701"]


def test_show_settings_names_the_project_root():
    proc = subprocess.run([sys.executable, "-m", "tfpar_lint", "--show-settings"], cwd=PROJECT / "bad",
                          capture_output=True, text=True, timeout=120)
    assert f"whole-project analysis: on; root {ROOT}" in proc.stdout


_MWMS_MODEL = ("import tf_keras as keras\n\n\ndef build():\n    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
               "    model.compile(optimizer='sgd', loss='mse', metrics=['mae'])\n    return model\n")
SHAPES = {
    # import pkg.dist, then pkg.dist.make_strategy(): the strategy of a module two names deep
    "import_pkg_mod_call": {
        "pkg/__init__.py": "",
        "pkg/dist.py": "import tensorflow as tf\n\n\ndef make_strategy():\n    return tf.distribute.MirroredStrategy()\n",
        "train.py": "import tensorflow as tf\n\nimport pkg.dist\n\nstrategy = pkg.dist.make_strategy()\n"
                    "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])  # expect: TFP101\n"
                    "with strategy.scope():\n    model.compile(optimizer='sgd', loss='mse')\n",
    },
    # the chief test is a helper of another module, called as utils.is_chief(strategy)
    "module_chief_helper": {
        "utils.py": "def is_chief(strategy):\n    return strategy.cluster_resolver.task_id == 0\n",
        "models.py": _MWMS_MODEL,
        "train.py": "import tensorflow as tf\n\nimport models\nimport utils\n\n"
                    "strategy = tf.distribute.MultiWorkerMirroredStrategy()\nwith strategy.scope():\n"
                    "    model = models.build()\nif utils.is_chief(strategy):\n"
                    "    model.save('/tmp/model.keras')  # expect: TFP603\n",
    },
    # ... imported with `from .utils import is_chief` inside a package, the save in a helper
    # whose model and strategy come from the caller in another module
    "relative_chief_helper": {
        "app/__init__.py": "",
        "app/utils.py": "def is_chief(strategy):\n    r = strategy.cluster_resolver\n"
                        "    return r.task_type in (None, 'chief') or (\n"
                        "        r.task_type == 'worker' and r.task_id == 0 and 'chief' not in r.cluster_spec().as_dict())\n",
        "app/save.py": "from .utils import is_chief\n\n\ndef save(model, strategy):\n    if is_chief(strategy):\n"
                       "        model.save_weights('/tmp/w.weights.h5')  # expect: TFP603\n",
        "models.py": _MWMS_MODEL,
        "train.py": "import tensorflow as tf\n\nimport models\nfrom app.save import save\n\n"
                    "strategy = tf.distribute.MultiWorkerMirroredStrategy()\nwith strategy.scope():\n"
                    "    model = models.build()\nsave(model, strategy)\n",
    },
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_cross_module_shape(shape, tmp_path):
    """Each shape, split over files (in a folder without a project root file, linted whole and
    file by file), gives its `# expect:` labels; each file alone (--no-project) gives none."""
    for rel, text in SHAPES[shape].items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    want = expected(tmp_path)
    assert want
    _rc, items, err = cli(str(tmp_path), cwd=tmp_path)
    assert found(items, tmp_path) == want, err
    for rel in SHAPES[shape]:
        _rc, items, err = cli(str(tmp_path / rel), cwd=tmp_path)
        assert found(items, tmp_path) == {x for x in want if x[0] == rel}, (rel, err)
    _rc, items, _err = cli("--no-project", str(tmp_path), cwd=tmp_path)
    assert found(items, tmp_path) == ALONE.get(shape, set())


# What a file alone still proves: the strategy a helper of another module makes is one by its use
# (its scope entered: semantic/uses.py), so the model built outside that scope is found anyway.
ALONE = {"import_pkg_mod_call": {("train.py", 6, "TFP101")}}


def test_the_budget_a_file_leaves_is_kept_for_the_next_files(monkeypatch, tmp_path):
    """Issue 28: most files of a code base need no other module and a few need many.  What a lint
    leaves of its budget is kept for the next lints of the process (at most POOL_MAX for one), so
    a heavy file follows its imports after light ones, while the run as a whole parses no more than
    the sum of its files' budgets."""
    train = ("import tensorflow as tf\n\nimport steps\n\nstrategy = tf.distribute.MirroredStrategy()\n"
             "strategy.run(steps.step, args=(1.0,))\n")
    train += "".join(f"\n\ndef helper_{i}(x):\n    return x + {i}  # padding the module past one file's budget\n"
                     for i in range(60))
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(train)
    (tmp_path / "steps.py").write_text("import tensorflow as tf\n\n\ndef step(x):\n"
                                       "    tf.random.set_seed(7)\n    return x * 2\n")
    for name in ("a.py", "b.py", "c.py"):  # analysed files that need no other module
        (tmp_path / name).write_text("import tensorflow as tf\n\nstrategy = tf.distribute.MirroredStrategy()\n"
                                     "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
                                     "with strategy.scope():\n    model.compile(optimizer='sgd', loss='mse')\n")
    monkeypatch.setattr(project_mod, "BUDGET_BASE", len(train) // 2)
    monkeypatch.setattr(project_mod, "BUDGET_FACTOR", 0.0)
    engine._PROJECTS.clear()
    try:
        # one file's budget: train.py, which runs the step on every replica, is not read
        alone = engine.lint_file(str(tmp_path / "steps.py"))
        assert alone.capped and not alone.findings
        engine._PROJECTS.clear()
        for name in ("a.py", "b.py", "c.py"):
            assert not engine.lint_file(str(tmp_path / name)).capped
        after = engine.lint_file(str(tmp_path / "steps.py"))
        assert not after.capped and [(f.line, f.code) for f in after.findings] == [(5, "TFP401")]
        # one file may use at most POOL_MAX of what the others left
        engine._PROJECTS.clear()
        monkeypatch.setattr(project_mod, "POOL_MAX", len(train) // 2)
        for name in ("a.py", "b.py", "c.py"):
            engine.lint_file(str(tmp_path / name))
        assert engine.lint_file(str(tmp_path / "steps.py")).capped
    finally:
        engine._PROJECTS.clear()
