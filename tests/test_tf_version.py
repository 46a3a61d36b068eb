"""``tf-version``: the TensorFlow the linted code targets (issue 8, part 5).

``tf.keras`` is Keras 3 from TF 2.16 on and Keras 2 before; rules whose truth depends on it
(TFP606 Keras 3 fit under MultiWorkerMirroredStrategy, TFP502 Keras 2 default-reduction loss,
TFP503/TFP505 Keras 3 losses, TFP703 optimizer errors) follow the setting.  Without one the
version is inferred (tests/test_versions.py); where nothing states it, those rules report nothing
and the run says so once (issue 28)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tfpar_lint import config
from tfpar_lint.engine import AnalysisOptions, lint_source

ROOT = Path(__file__).resolve().parents[1]

# Keras 3 fit under MWMS, written with tf.keras: wrong on TF >= 2.16, right on TF <= 2.15.
FIT_MWMS = (ROOT / "fixtures" / "TFP606" / "bad.py").read_text(encoding="utf-8")

# A tf.keras loss with the default reduction in a replica function: wrong on Keras 2 (TF <= 2.15:
# SUM_OVER_BATCH_SIZE is refused / mis-scaled under a strategy), fine on Keras 3.
TF_KERAS_LOSS = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD()
    loss_object = tf.keras.losses.MeanSquaredError()

@tf.function
def step(dist_inputs):
    def replica_fn(inputs):
        features, labels = inputs
        with tf.GradientTape() as tape:
            loss = loss_object(labels, model(features))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return strategy.run(replica_fn, args=(dist_inputs,))
"""


def codes(source: str, tf_version) -> list[str]:
    res = lint_source(source, "t.py", options=AnalysisOptions(tf_version=tf_version))
    assert res.error is None, res.error
    return [f.code for f in res.findings]


def test_default_is_inferred_and_unknown_withholds_and_says_so(tmp_path):
    from tfpar_lint import versions

    assert config.DEFAULT_TF_VERSION is None
    assert versions.UNKNOWN.tf_keras_is_keras3() is None and not versions.UNKNOWN.known
    (tmp_path / ".git").mkdir()  # the search for the project's files stops here
    res = lint_source(FIT_MWMS, str(tmp_path / "t.py"), options=AnalysisOptions())
    # a version finding needs version evidence (issue 28): nothing stated, nothing reported, and said
    assert res.findings == [] and res.notes == [versions.withheld_note({"TFP606": 1})]
    res = lint_source(FIT_MWMS, str(tmp_path / "t.py"), options=AnalysisOptions(tf_version="2.16"))
    assert [f.code for f in res.findings] == ["TFP606"] and res.notes == []
    assert "TensorFlow 2.16 (Keras 3, from the tf-version setting)" in res.findings[0].message


def test_tf_keras_2_targets_turn_keras3_rules_off_and_keras2_rules_on():
    assert "TFP606" not in codes(FIT_MWMS, "2.15")
    assert "TFP606" in codes(FIT_MWMS, "2.21")
    assert "TFP502" in codes(TF_KERAS_LOSS, "2.15")
    assert "TFP502" not in codes(TF_KERAS_LOSS, "2.16")


@pytest.mark.parametrize("value,expected", [("2.15", "2.15"), ("2.15.1", "2.15"), (" 2.16 ", "2.16")])
def test_parse(value, expected):
    assert config.parse_tf_version(value, "x") == expected


@pytest.mark.parametrize("value", ["2", "latest", "2.x", 2.15, "", "0.1"])
def test_parse_rejects(value):
    with pytest.raises(config.ConfigError, match="tf-version"):
        config.parse_tf_version(value, "x")


def _cli(args, cwd):
    return subprocess.run([sys.executable, "-m", "tfpar_lint", "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_cli_flag_and_pyproject(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(FIT_MWMS, encoding="utf-8")
    nothing = _cli(["train.py"], tmp_path)  # nothing assumed: withheld, and said
    assert "TFP606" not in nothing.stdout and "no TensorFlow version stated for train.py" in nothing.stderr
    assert "TFP606" in _cli(["--tf-version", "2.17", "train.py"], tmp_path).stdout
    assert "TFP606" not in _cli(["--tf-version", "2.15", "train.py"], tmp_path).stdout
    (tmp_path / "pyproject.toml").write_text('[tool.tfpar-lint]\ntf-version = "2.15"\n', encoding="utf-8")
    assert "TFP606" not in _cli(["train.py"], tmp_path).stdout
    shown = _cli(["--show-settings"], tmp_path).stdout
    assert "tf-version: 2.15 (the tf-version setting" in shown
    # the command line wins over the file
    assert "TFP606" in _cli(["--tf-version", "2.16", "train.py"], tmp_path).stdout


def test_bad_values_are_usage_errors(tmp_path):
    (tmp_path / "train.py").write_text(FIT_MWMS, encoding="utf-8")
    proc = _cli(["--tf-version", "two", "train.py"], tmp_path)
    assert proc.returncode == 2 and "tf-version" in proc.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.tfpar-lint]\ntf-version = 2.15\n', encoding="utf-8")
    proc = _cli(["train.py"], tmp_path)
    assert proc.returncode == 2 and "tf-version" in proc.stderr


def test_flake8_option(tmp_path):
    pytest.importorskip("flake8")
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(FIT_MWMS, encoding="utf-8")
    base = [sys.executable, "-m", "flake8", "--select", "TFP", "train.py"]
    out = subprocess.run(base, cwd=tmp_path, capture_output=True, text=True, timeout=120).stdout
    assert "TFP606" not in out  # nothing states the version: withheld
    out = subprocess.run(base + ["--tfp-tf-version", "2.17"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120).stdout
    assert "TFP606" in out
    out = subprocess.run(base + ["--tfp-tf-version", "2.15"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120).stdout
    assert "TFP606" not in out
