"""The TensorFlow version each file targets, inferred from its project (issue 20, part 1).

tests/data_versions/ holds small projects, one per way a project states its TensorFlow (or states
nothing and uses only Keras 2 APIs).  Each has the same train.py: an optimizer made outside the
scope of a MultiWorkerMirroredStrategy, and a tf.keras model trained with ``fit``.  TFP606 (Keras 3
``fit`` under MWMS) must fire exactly where the inferred TensorFlow has Keras 3 (2.16+, without
TF_USE_LEGACY_KERAS), and TFP102 exactly where the optimizer takes the strategy when made (Keras 3,
and Keras 2's optimizers from 2.11 on: keras-team/keras#17187).

A finding that holds only on some versions needs evidence of the version (issue 28): a pin or lock
file, a Dockerfile's image, the tf-version setting, or an API of one Keras only.  An API only bounds
the version: Keras 2 code (``lr=``, ``layers.experimental``) says 2.15 or older, nothing about 2.11,
so TFP102 is silent there; an API that exists since 2.6 says nothing about Keras 3.  Where nothing
tells, those findings are not reported and the run says so once (NOTE_PROJECTS)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tfpar_lint import versions
from tfpar_lint.engine import AnalysisOptions, lint_source

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data_versions"

# project (file) -> (codes, the version the messages name, its source)
EXPECTED = {
    "req_pinned_2_4": ((), None, None),
    "req_include": ((), None, None),
    "req_pinned_2_16": (("TFP102", "TFP606"), "2.16", "requirements.txt"),
    "req_open_range": (("TFP102", "TFP606"), "2.4+", "requirements.txt"),
    "pep621_2_13": (("TFP102",), "2.13", "pyproject.toml"),
    "pep621_extra_2_10": ((), None, None),
    "poetry_2_9": ((), None, None),
    "poetry_lock_2_10": ((), None, None),
    "poetry_3": (("TFP102", "TFP606"), "2.17", "pyproject.toml"),
    "pipfile_2_8": ((), None, None),
    "pipfile_lock_2_15": (("TFP102",), "2.15", "Pipfile.lock"),
    "setup_py_2_10": ((), None, None),
    "setup_cfg_2_17": (("TFP102", "TFP606"), "2.17", "setup.cfg"),
    "conda_2_6": ((), None, None),
    "conda_pip_2_18": (("TFP102", "TFP606"), "2.18", "environment.yml"),
    "docker_from_2_4": ((), None, None),
    "docker_pip_2_11": (("TFP102",), "2.11", "Dockerfile"),
    "docker_latest": (("TFP102", "TFP606"), "2.21+", "Dockerfile"),
    "docker_legacy_env": (("TFP102",), "2.17", "Dockerfile"),
    "keras_pin_2_12": (("TFP102",), "2.12", "requirements.txt"),
    "nested_examples": (("TFP102", "TFP606"), "2.16", "requirements.txt"),
    "nested_examples/examples/old": ((), None, None),
    "setting_wins": (("TFP102", "TFP606"), "2.16", "the tf-version setting"),
    # nothing states a version, or the code's APIs leave the question open: nothing is assumed, the
    # findings that hold only on some versions are withheld, and the run says so once (issue 28)
    "unpinned": ((), None, None),
    "nothing": ((), None, None),
    "unpinned_keras2_preprocessing": ((), None, None),
    "unpinned_keras2_lr": ((), None, None),
    "unpinned_keras2_lr_kwarg": ((), None, None),
    "unpinned_estimator": ((), None, None),
    "code_run_v2": ((), None, None),
    "code_compat_v1_session": ((), None, None),
    "unpinned_api_since_2_6": ((), None, None),
    # a TensorFlow 2.0 preview's strategy methods: Keras 2 code, so its default-reduction loss is TFP502's
    "code_experimental_run": (("TFP502",), "2.15 or older", "the code's APIs (`strategy.make_dataset_iterator`)"),
    # ... which a tf.compat.v1 strategy keeps on every release: no evidence (no TFP502)
    "code_compat_v1_experimental_run": ((), None, None),
    # an API of Keras 2 only, from 2.9 on: the legacy optimizer is not a TFP102 mistake, the model is Keras 2
    "code_optimizers_legacy": ((), None, None),
    "unpinned_keras3_ops": (("TFP102", "TFP606"), "2.16+", "the code's APIs (tf.keras.ops.mean)"),
    "code_legacy_env": ((), None, None),  # TF_USE_LEGACY_KERAS=1: Keras 2, and 2.11 or not is open
    "code_tf_keras": (("TFP102",), "2.14+", "the code's APIs (tf_keras.Input"),  # (2.14+ says 2.11+)
    # the Pipfile at the project's root pins 2.8; the file's own folder names tensorflow unpinned
    "pipfile_root_2_8/src": ((), None, None),
    "pipfile_root_2_17/src": (("TFP102", "TFP606"), "2.17", "Pipfile"),
    # the code's own text: a notebook's pip line (in the notebook, and in its .py export), a job's
    # package list
    "code_pip_2_15": (("TFP102",), "2.15", "the code (tensorflow==2.15.0)"),
    "code_packages_2_8": ((), None, None),
    # the job's packages and image are names defined in another module: a version is stated, out of sight,
    # so the newest is not assumed (held back, and said once)
    "code_packages_by_name": ((), None, None),
    "notebook_pip_2_15": (("TFP102",), "2.15", "the code (tensorflow==2.15.0)"),
}


# The projects where nothing states the version: the run's one note names the findings that rest on the
# assumed newest release, or that were held back where the code's APIs bound the version without settling it.
NOTE_PROJECTS = {
    "unpinned": ("TFP102", "TFP606"),
    "nothing": ("TFP102", "TFP606"),
    "unpinned_keras2_preprocessing": ("TFP102",),
    "unpinned_keras2_lr": ("TFP102",),
    "unpinned_keras2_lr_kwarg": ("TFP102",),
    "unpinned_estimator": ("TFP102",),
    "code_run_v2": ("TFP102",),
    "code_compat_v1_session": ("TFP102",),
    "code_compat_v1_experimental_run": ("TFP502",),  # Keras 2 or 3: nothing says
    "unpinned_api_since_2_6": ("TFP102", "TFP606"),
    "code_legacy_env": ("TFP102",),
    "code_packages_by_name": ("TFP102", "TFP606"),  # held back: stated through names this file cannot read
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A copy of the corpus in which every project is a repository (the search stops at .git)."""
    dst = tmp_path_factory.mktemp("versions") / "corpus"
    shutil.copytree(CORPUS, dst)
    for d in dst.iterdir():
        (d / ".git").mkdir()
    return dst


def _cli(args, cwd):
    return subprocess.run([sys.executable, "-m", "tfpar_lint", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_corpus_covers_every_project():
    have = {p.name for p in CORPUS.iterdir() if p.is_dir()}
    assert have == {k.split("/")[0] for k in EXPECTED}


def test_corpus_findings_follow_the_inferred_version(corpus):
    """One CLI run per project (in the project's folder, so that its settings apply), JSON out."""
    problems = []
    for name, (codes, version, source) in EXPECTED.items():
        top = name.split("/")[0]
        rel = os.path.join(*name.split("/")[1:], "train.py") if "/" in name else "train.py"
        if (corpus / top / "train.ipynb").exists():
            rel = "train.ipynb"
        proc = _cli(["--output-format", "json", "--exit-zero", rel], corpus / top)
        assert proc.returncode == 0, (name, proc.stderr)
        notes = [ln for ln in proc.stderr.splitlines() if "TensorFlow version" in ln and "tf-version" in ln]
        held = NOTE_PROJECTS.get(name)
        if held is None and notes:
            problems.append(f"{name}: a version note where the version is stated: {notes}")
        elif held is not None and (len(notes) != 1 or any(c not in notes[0] for c in held)
                                   or "pin tensorflow or set tf-version" not in notes[0]):
            problems.append(f"{name}: want one note naming {held}, got {notes}")
        found = json.loads(proc.stdout)
        got = tuple(sorted(f["code"] for f in found))
        if got != codes:
            problems.append(f"{name}: {got} != {codes}")
            continue
        for f in found:
            msg = f["message"]
            want_source = f"from {source}"
            if f"TensorFlow {version} (" not in msg or want_source not in msg:
                problems.append(f"{name}: {f['code']} message does not name {version} / {source}: {msg}")
    assert not problems, "\n".join(problems)


def test_show_settings_names_the_inferred_version(corpus):
    out = _cli(["--show-settings"], corpus / "docker_from_2_4").stdout
    assert "inferred TensorFlow 2.4 (Keras 2, from Dockerfile): FROM tensorflow/tensorflow:2.4.1-gpu" in out
    out = _cli(["--show-settings", "examples/old/train.py"], corpus / "nested_examples").stdout
    assert "TensorFlow 2.4 (Keras 2, from requirements.txt): tensorflow==2.4.0" in out
    out = _cli(["--show-settings"], corpus / "nothing").stdout
    assert "the project states no TensorFlow version" in out
    out = _cli(["--show-settings", "src/train.py"], corpus / "pipfile_root_2_8").stdout
    assert "TensorFlow 2.8 (Keras 2, from Pipfile): tensorflow = '==2.8.0'" in out, out
    out = _cli(["--show-settings"], corpus / "setting_wins").stdout
    assert "tf-version: 2.16 (the tf-version setting" in out


def test_result_cache_relints_when_the_requirements_change(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("tensorflow==2.4.1\n", encoding="utf-8")
    shutil.copy(CORPUS / "nothing" / "train.py", tmp_path / "train.py")
    run = lambda: subprocess.run([sys.executable, "-m", "tfpar_lint", "--exit-zero", "train.py"], cwd=tmp_path,
                                 capture_output=True, text=True, timeout=300).stdout
    assert "TFP606" not in run()
    (tmp_path / "requirements.txt").write_text("tensorflow==2.17.0\n", encoding="utf-8")
    assert "TFP606" in run()


def test_result_cache_relints_when_a_pin_appears(tmp_path):
    """The note says "pin tensorflow": a cached result of a file that stated nothing is not served
    once a statement file appears in a folder the search went through."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "src").mkdir()
    shutil.copy(CORPUS / "nothing" / "train.py", tmp_path / "src" / "train.py")
    run = lambda: subprocess.run([sys.executable, "-m", "tfpar_lint", "--exit-zero", "src/train.py"], cwd=tmp_path,
                                 capture_output=True, text=True, timeout=300)
    first = run()
    assert "TFP606" not in first.stdout and "no TensorFlow version stated" in first.stderr
    assert "no TensorFlow version stated" in run().stderr  # the cached result keeps its note
    (tmp_path / "Pipfile").write_text('[packages]\ntensorflow = "==2.17.0"\n', encoding="utf-8")
    again = run()
    assert "TFP606" in again.stdout and "no TensorFlow version stated" not in again.stderr


def test_flake8_reads_the_project_too(tmp_path):
    pytest.importorskip("flake8")
    (tmp_path / ".git").mkdir()
    shutil.copy(CORPUS / "nothing" / "train.py", tmp_path / "train.py")
    base = [sys.executable, "-m", "flake8", "--select", "TFP", "train.py"]
    assert "TFP606" not in subprocess.run(base, cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    (tmp_path / "Dockerfile").write_text("FROM tensorflow/tensorflow:2.17.0-gpu\n", encoding="utf-8")
    assert "TFP606" in subprocess.run(base, cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    (tmp_path / "Dockerfile").write_text("FROM tensorflow/tensorflow:2.4.1-gpu\n", encoding="utf-8")
    assert "TFP606" not in subprocess.run(base, cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout


# ----------------------------------------------------------------------- the parts
@pytest.mark.parametrize("spec,style,expected", [
    ("==2.4.1", "pep440", ((2, 4), (2, 4), True)),
    (">=2.4,<2.16", "pep440", ((2, 4), (2, 15), False)),
    ("<2.16.1", "pep440", (None, (2, 16), False)),
    ("~=2.13.0", "pep440", ((2, 13), (2, 13), True)),
    ("~=2.13", "pep440", ((2, 13), (2, 999), False)),
    ("<3", "pep440", (None, (2, 999), False)),
    ("==2.*", "pep440", ((2, 0), (2, 999), False)),
    ("^2.4", "poetry", ((2, 4), (2, 999), False)),
    ("~2.9", "poetry", ((2, 9), (2, 9), True)),
    ("2.10.1", "poetry", ((2, 10), (2, 10), True)),
    ("=2.6", "conda", ((2, 6), (2, 6), True)),
    ("*", "pep440", None),
    ("", "pep440", None),
])
def test_spec_range(spec, style, expected):
    assert versions.spec_range(spec, style) == expected


@pytest.mark.parametrize("line,expected", [
    ("tensorflow-gpu[and-cuda]>=2.4 ; python_version<'3.9'", ("tensorflow-gpu", ">=2.4")),
    ("TensorFlow_CPU==2.8.0  # pinned", ("tensorflow-cpu", "==2.8.0")),
    ("https://example.invalid/tensorflow-2.4.0-cp38-cp38-linux_x86_64.whl", ("tensorflow", "==2.4.0")),
    ("-e .", None),
    ("# tensorflow==2.4", None),
])
def test_parse_requirement(line, expected):
    assert versions.parse_requirement(line) == expected


@pytest.mark.parametrize("image,expected", [
    ("tensorflow/tensorflow:2.4.1-gpu", ((2, 4), (2, 4))),
    ("tensorflow/tensorflow:latest-gpu-jupyter", (versions._LATEST, None)),
    ("763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.9.1-gpu-py39", ((2, 9), (2, 9))),
    ("gcr.io/deeplearning-platform-release/tf2-gpu.2-6", ((2, 6), (2, 6))),
    ("python:3.9", None),
])
def test_image_spec(image, expected):
    st = versions.image_spec(image)
    assert (None if st is None else (st.low, st.high)) == expected


def test_keras_pin_bounds_tensorflow(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("keras>=3.0\ntensorflow\n", encoding="utf-8")
    versions.clear_cache()
    t = versions.project_target(str(tmp_path / "x.py"))
    assert t.low == (2, 16) and t.tf_keras_is_keras3() and t.keras_major() == 3
    (tmp_path / "requirements.txt").write_text("keras==2.4.3\n", encoding="utf-8")
    versions.clear_cache()
    t = versions.project_target(str(tmp_path / "x.py"))
    assert t.high == (2, 5) and not t.tf_keras_is_keras3() and t.keras_major() == 2


def test_conflicting_statements_the_lock_file_wins(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "Pipfile.lock").write_text('{"default": {"tensorflow": {"version": "==2.9.0"}}}', encoding="utf-8")
    (tmp_path / "Dockerfile").write_text("FROM tensorflow/tensorflow:2.16.1\n", encoding="utf-8")
    versions.clear_cache()
    t = versions.project_target(str(tmp_path / "x.py"))
    assert (t.low, t.high, t.source) == ((2, 9), (2, 9), "Pipfile.lock")


def test_stdin_and_strings_are_not_located():
    src = (CORPUS / "nothing" / "train.py").read_text(encoding="utf-8")
    res = lint_source(src, "<stdin>", options=AnalysisOptions())
    # nothing states the version: the findings that hold only on some versions are withheld, and said
    assert res.findings == [] and res.notes == [versions.withheld_note({"TFP102": 1, "TFP606": 1})]
    res = lint_source(src, "<stdin>", options=AnalysisOptions(tf_version="2.17"))
    assert sorted(f.code for f in res.findings) == ["TFP102", "TFP606"] and res.notes == []
    res = lint_source(src, "<stdin>", options=AnalysisOptions(tf_version="2.10"))
    assert res.findings == [] and res.notes == []


def test_keras2_api_and_a_keras3_api_in_one_file_is_no_evidence(tmp_path):
    (tmp_path / ".git").mkdir()
    src = (CORPUS / "nothing" / "train.py").read_text(encoding="utf-8") + (
        "if hasattr(tf.keras, 'ops'):\n    x = tf.keras.ops.mean(tf.ones(2))\n"
        "else:\n    x = tf.keras.layers.experimental.preprocessing.Rescaling(1.0)\n")
    path = tmp_path / "train.py"
    path.write_text(src, encoding="utf-8")
    res = lint_source(src, str(path), options=AnalysisOptions())
    # a compatibility branch spells both Keras versions: no evidence; nothing is assumed, and that is said
    assert res.findings == [] and res.notes == [versions.withheld_note({"TFP102": 1, "TFP606": 1})]


# ----------------------------------------------------------------------- evidence (issue 28)
def test_an_api_bounds_the_version_and_a_statement_says_what_installs():
    since_2_6 = versions.Target(low=(2, 6), source="the code's APIs (tf.keras.layers.Normalization)", from_apis=True)
    # bounded below only: nothing about 2.11 or Keras 3 (no answer), only what the bound says
    assert since_2_6.tf_keras_is_keras3() is None and since_2_6.at_least((2, 11)) is None
    assert since_2_6.at_least((2, 6)) is True and since_2_6.keras_major() is None
    keras2 = versions.Target(high=(2, 15), source="the code's APIs (an optimizer's `lr`)", from_apis=True,
                             high_from_code=True)
    # written for Keras 2: never Keras 3; 2.11 or not is open (no answer)
    assert keras2.tf_keras_is_keras3() is False and keras2.at_least((2, 11)) is None
    assert keras2.at_least((2, 16)) is False and keras2.keras_major() == 2
    keras3 = versions.Target(low=(2, 16), source="the code's APIs (keras.ops.mean)", from_apis=True)
    assert keras3.tf_keras_is_keras3() is True and keras3.at_least((2, 11)) is True
    # a range the project states runs its newest release: pip installs it
    stated = versions.Target(low=(2, 4), source="requirements.txt")
    assert stated.tf_keras_is_keras3() is True and stated.at_least((2, 11)) is True
    # narrowed by Keras 2 code: 2.4-2.15, Keras 2; 2.11 or not is open
    narrowed = versions.Target(low=(2, 4), high=(2, 15), source="requirements.txt and the code's APIs",
                               high_from_code=True)
    assert narrowed.tf_keras_is_keras3() is False and narrowed.at_least((2, 11)) is None
    # nothing stated at all: no answer, and nothing assumed
    assert versions.UNKNOWN.at_least((2, 11)) is None and versions.UNKNOWN.tf_keras_is_keras3() is None
    assert "nothing in the project states a version" in versions.UNKNOWN.describe(3)
    legacy = versions.Target(known=False, legacy_keras=True)
    assert legacy.tf_keras_is_keras3() is False and legacy.at_least((2, 11)) is None


def test_a_statement_through_names_is_a_version_stated_out_of_sight():
    assert versions.opaque_statement("@component(base_image=IMAGE, packages_to_install=[TF, 'numpy'])\n")
    assert versions.opaque_statement("job = Job(container_uri=cfg.image)\n") == "container_uri=cfg.image"
    # literals are read by code_statements; None and the absence of such keywords state nothing
    assert not versions.opaque_statement("@component(packages_to_install=['tensorflow==2.8.0'])\n")
    assert not versions.opaque_statement("Job(base_image=None)\nfit(x, epochs=EPOCHS)\n")
    since_2_6 = versions.Target(low=(2, 6), source="the code's APIs (tf.keras.layers.Normalization)", from_apis=True,
                                elsewhere="packages_to_install=[TF]")
    assert since_2_6.tf_keras_is_keras3() is None and since_2_6.at_least((2, 11)) is None
    assert since_2_6.at_least((2, 4)) is True  # what the APIs settle still holds
    hidden = versions.Target(known=False, elsewhere="base_image=IMAGE")
    assert hidden.at_least((2, 11)) is None and hidden.keras_major() is None
    # a statement the project makes wins: the names are no longer needed
    stated = versions.Target(low=(2, 17), high=(2, 17), source="requirements.txt", elsewhere="base_image=IMAGE")
    assert stated.tf_keras_is_keras3() is True


def test_withheld_notes_round_trip_and_make_one_line():
    note = versions.withheld_note({"TFP606": 2, "TFP102": 1})
    assert note == "version not stated: TFP102=1, TFP606=2"
    assert versions.parse_withheld(note) == {"TFP102": 1, "TFP606": 2}
    assert versions.parse_withheld("3 expressions too deep for libcst's parser") is None
    line = versions.withheld_summary({"a.py": {"TFP102": 1}, "b.py": {"TFP102": 1, "TFP606": 2}, "c.py": {},
                                      "d.py": {"TFP110": 1}})
    assert "a.py, b.py, c.py and 1 more" in line and "5 findings" in line
    assert "(TFP102 (2), TFP110, TFP606 (2))" in line and "set tf-version" in line and "none is assumed" in line


def test_one_note_for_the_run_and_in_sarif(tmp_path):
    (tmp_path / ".git").mkdir()
    for name in ("a.py", "b.py"):
        shutil.copy(CORPUS / "nothing" / "train.py", tmp_path / name)
    proc = _cli(["--exit-zero", "a.py", "b.py"], tmp_path)
    notes = [ln for ln in proc.stderr.splitlines() if "no TensorFlow version stated" in ln]
    assert "TFP102" not in proc.stdout and "TFP606" not in proc.stdout and len(notes) == 1, proc.stderr
    assert "for a.py, b.py " in notes[0] and "4 findings" in notes[0] and "(TFP102 (2), TFP606 (2))" in notes[0]
    assert "were not reported" in notes[0] and "set tf-version" in notes[0], notes[0]
    sarif = json.loads(_cli(["--exit-zero", "--output-format", "sarif", "a.py", "b.py"], tmp_path).stdout)
    notes = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert [(n["level"], n["descriptor"]["id"]) for n in notes] == [("note", "version-not-stated")]
    assert "4 findings" in notes[0]["message"]["text"]
    # with the version stated, no note and the findings
    (tmp_path / "requirements.txt").write_text("tensorflow==2.17.0\n", encoding="utf-8")
    proc = _cli(["--exit-zero", "a.py", "b.py"], tmp_path)
    assert "no TensorFlow version stated" not in proc.stderr and proc.stdout.count("TFP606") == 2


def test_a_message_names_the_evidence_it_used(corpus):
    """Keras 3 evidence from the code names the API; an API since 2.6 is never named as Keras 3 evidence."""
    proc = _cli(["--output-format", "json", "--exit-zero", "train.py"], corpus / "unpinned_keras3_ops")
    msgs = [f["message"] for f in json.loads(proc.stdout)]
    assert msgs and all("Keras 3, from the code's APIs (tf.keras.ops.mean)" in m for m in msgs), msgs
    proc = _cli(["--output-format", "json", "--exit-zero", "train.py"], corpus / "unpinned_api_since_2_6")
    # the API bounds the version from below and says nothing about Keras 3: no finding rests on it
    assert json.loads(proc.stdout) == [] and "were not reported" in proc.stderr, proc.stderr


def test_a_pipfile_that_is_not_valid_toml_is_read_line_by_line(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "Pipfile").write_text('[packages]\nnumpy = "*"\nnumpy = "*"\ntensorflow-gpu = {version = "==2.7.0"}\n'
                                      '\n[requires]\ntensorflow = "==2.4"\n', encoding="utf-8")
    (tmp_path / "sub").mkdir()
    versions.clear_cache()
    t = versions.project_target(str(tmp_path / "sub" / "x.py"))
    assert (t.low, t.high, t.source, t.known) == ((2, 7), (2, 7), "Pipfile", True), t


@pytest.mark.parametrize("files,expected", [
    # a Dockerfile whose base image's tag is an ARG: its default, or a dev container's argument
    ({"Dockerfile": "ARG TF_VERSION=2.4.1\nFROM tensorflow/tensorflow:${TF_VERSION}-gpu\n"},
     ((2, 4), (2, 4), "Dockerfile")),
    ({".devcontainer/Dockerfile": "ARG VERSION\n\nFROM tensorflow/tensorflow:${VERSION}\n",
      ".devcontainer/devcontainer.json": '{\n "build": {\n  "dockerfile": "Dockerfile",\n  "args": {\n'
                                         '   "VERSION": "2.11.0"\n   // "VERSION": "2.11.0-gpu",\n  }\n }\n}\n'},
     ((2, 11), (2, 11), ".devcontainer/Dockerfile")),
    ({"Dockerfile": "ARG VERSION\nFROM tensorflow/tensorflow:$VERSION\n"}, None),  # no value anywhere
    # a job spec beside the code: an Azure ML curated environment, a Kubernetes / Kubeflow image
    ({"job.yml": "code: src\nenvironment: azureml:AzureML-tensorflow-2.16-cuda12@latest\n"},
     ((2, 16), (2, 16), "job.yml")),
    ({"tfjob.yaml": "spec:\n  containers:\n    - name: tensorflow\n      image: tensorflow/tensorflow:2.6.0-gpu\n"},
     ((2, 6), (2, 6), "tfjob.yaml")),
    ({".github.yml": "environment: production\nimage: python:3.9\n"}, None),
])
def test_images_read_from_build_args_and_job_specs(tmp_path, files, expected):
    (tmp_path / ".git").mkdir()
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    versions.clear_cache()
    t = versions.project_target(str(tmp_path / "src" / "train.py"))
    got = None if t is None or not t.known else (t.low, t.high, t.source)
    assert got == expected, t
