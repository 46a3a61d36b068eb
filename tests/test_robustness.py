"""Linting never crashes and never imports TensorFlow."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from tfpar_lint.engine import lint_paths
from tfpar_lint.registry import all_rules

ALL = [r.CODE for r in all_rules()]


def _package_files(names):
    files = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        for root in spec.submodule_search_locations:
            for dirpath, _, filenames in os.walk(root):
                files += [os.path.join(dirpath, f) for f in filenames if f.endswith(".py")]
    return sorted(files)


def test_lint_installed_tensorflow_and_keras_without_error():
    files = _package_files(["tensorflow", "keras"])
    if len(files) < 500:
        pytest.skip(f"tensorflow/keras not installed (found {len(files)} files)")
    results = lint_paths(files, enabled=ALL, jobs=os.cpu_count())
    errors = [r.error.render() for r in results if r.error is not None]
    assert len(results) == len(files)
    assert not errors, "\n".join(errors[:20])


def test_linting_does_not_import_tensorflow(tmp_path):
    src = tmp_path / "train.py"
    src.write_text(
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "with strategy.scope():\n"
        "    model.compile(optimizer='sgd', loss='mse')\n"
    )
    code = (
        "import sys\n"
        "from tfpar_lint.engine import lint_file\n"
        f"r = lint_file({str(src)!r})\n"
        "assert [f.code for f in r.findings] == ['TFP101'], r\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras')]\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
