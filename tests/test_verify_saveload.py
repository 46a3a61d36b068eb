"""A SavedModel saved, then loaded twice (the second time under another MirroredStrategy) and called,
runs under ``--verify`` as it runs under ``python``, in each sandbox mode this machine has (issue 10).

The regression: with the verifier's watchdog thread alive, the threads probe took every script for a
threaded one and measured every ``assign``; ``tf.saved_model.load`` under a strategy restores into
variables it creates uninitialized (they read as an empty array), and the probe's arithmetic on that
empty value raised into the script ("operands could not be broadcast together with shapes (4,8) (0,)").
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from tfpar_lint.verify import sandbox

HAVE_TF = importlib.util.find_spec("tensorflow") is not None
pytestmark = [
    pytest.mark.verify,
    pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not importable (bash scripts/dev.sh setup installs it)"),
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Prints only what a faithful run must reproduce: shapes, the replica count, and whether each load
# gives the saved model's own outputs.  It sets up 2 logical CPUs itself when run with plain python.
SCRIPT = """
    import os
    import sys
    import tempfile

    import numpy as np
    import tensorflow as tf

    args = [a for a in sys.argv[1:] if a != "--thread"]
    done = None
    if "--thread" in sys.argv:  # a thread of the script's own, alive while the model is saved and loaded
        import threading

        done = threading.Event()
        threading.Thread(target=done.wait, daemon=True).start()

    cpu = tf.config.list_physical_devices("CPU")[0]
    try:  # two logical CPUs, as the verifier configures them before the script
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    except RuntimeError:
        pass  # already configured

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(8, activation="relu"),
                                     tf.keras.layers.Dense(2)])
    export = args[0] if args else os.path.join(tempfile.mkdtemp(), "model")
    tf.saved_model.save(model, export)
    x = tf.constant(np.arange(32, dtype="float32").reshape(8, 4) / 32.0)
    want = model(x).numpy()

    loaded = tf.saved_model.load(export)
    out = loaded.signatures["serving_default"](x)
    print("first load:", {k: v.shape.as_list() for k, v in out.items()}, "same values:",
          bool(np.allclose(out["output_0"].numpy(), want)))

    other = tf.distribute.MirroredStrategy()
    with other.scope():
        loaded = tf.saved_model.load(export)
        fn = loaded.signatures["serving_default"]
        dist = other.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(x).batch(8))
        for batch in dist:
            parts = other.experimental_local_results(other.run(fn, args=(batch,)))
            got = np.concatenate([p["output_0"].numpy() for p in parts])
            print("second load:", other.num_replicas_in_sync, "replicas,",
                  [p["output_0"].shape.as_list() for p in parts], "same values:", bool(np.allclose(got, want)))
    print("saved to", "the given folder" if args else "a temporary folder")
    if done is not None:
        done.set()
"""

# What the user's folder holds before the run: an older export at the path the script saves to.
OLD_EXPORT = {"export/saved_model.pb": b"an older model", "export/variables/variables.index": b"older variables"}


def _digest(top: str) -> dict:
    """Every file and folder under ``top``: bytes and modes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames:
            out[os.path.join(dirpath, name)] = ("dir", os.lstat(os.path.join(dirpath, name)).st_mode)
        for name in filenames:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as f:
                out[p] = ("file", os.lstat(p).st_mode, hashlib.sha256(f.read()).hexdigest())
    return out


def _project(folder) -> str:
    os.makedirs(folder)
    with open(os.path.join(folder, "reload.py"), "w") as f:
        f.write(textwrap.dedent(SCRIPT).lstrip())
    for rel, data in OLD_EXPORT.items():
        p = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    return str(folder)


def test_only_threads_other_than_the_verifiers_count():
    """The child's watchdog is the verifier's own thread: it does not make a script threaded."""
    import threading

    from tfpar_lint.verify.runtime import own_thread, script_threads_running

    assert threading.active_count() == 1, [t.name for t in threading.enumerate()]
    assert not script_threads_running()
    stop = threading.Event()
    own = own_thread(threading.Thread(target=stop.wait, daemon=True))
    own.start()
    try:
        assert threading.active_count() == 2 and not script_threads_running()
        theirs = threading.Thread(target=stop.wait, daemon=True)
        theirs.start()
        assert script_threads_running()
    finally:
        stop.set()
        own.join(5)
    theirs.join(5)
    assert not script_threads_running()


def _namespaces_available(tmp_path) -> tuple[bool, str]:
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    env.pop("TFPAR_VERIFY_SANDBOX", None)
    saved = os.environ.pop("TFPAR_VERIFY_SANDBOX", None)
    try:
        sandbox._PROBED.clear()  # noqa: SLF001 - ask the machine, not an earlier answer
        mode, why = sandbox.probe(str(tmp_path / "probe"), env)
    finally:
        if saved is not None:
            os.environ["TFPAR_VERIFY_SANDBOX"] = saved
    return mode == "namespaces", why


@pytest.mark.parametrize("thread", [False, True], ids=["no-thread", "thread"])
@pytest.mark.parametrize("mode", ["namespaces", "none"])
def test_saved_model_loaded_twice_under_strategies_runs_as_under_python(tmp_path, mode, thread):
    """Without a thread of the script's, the threads probe stays out of the way; with one, it watches
    every write, and the restores into uninitialized variables must still go through untouched."""
    if mode == "namespaces":
        ok, why = _namespaces_available(tmp_path)
        if not ok:
            pytest.skip(f"no namespaces sandbox on this machine: {why}")
    # over the older export in the user's folder: the sandbox, or the fallback's mirror, keeps the real one
    args = ["export"] + (["--thread"] if thread else [])

    plain_dir = _project(tmp_path / "plain")
    plain = subprocess.run([sys.executable, "reload.py", *args], cwd=plain_dir, capture_output=True, timeout=400,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert plain.returncode == 0, plain.stderr.decode()[-3000:]
    expected = plain.stdout.decode()
    assert "second load: 2 replicas, [[4, 2], [4, 2]] same values: True" in expected, expected

    proj = _project(tmp_path / "proj")
    before = _digest(proj)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"), TFPAR_VERIFY_SANDBOX="auto" if mode ==
               "namespaces" else "none")
    cli = subprocess.run([sys.executable, "-m", "tfpar_lint", "--verify", "reload.py", "--show-output", "--no-cache",
                          "--devices", "cpu:2", "--timeout", "300", *(["--", *args] if args else [])],
                         cwd=proj, capture_output=True, timeout=400, env=env)
    out = cli.stdout.decode()
    why = (out + cli.stderr.decode())[-4000:]
    assert cli.returncode == 0, why
    header = next((ln for ln in out.splitlines() if ln.startswith("reload.py: ")), "")
    assert "ran to the end" in header and "2 replicas on cpu:0,cpu:1" in header, why
    assert f"sandbox: {mode}" in header and header.endswith("nothing found"), why
    # --show-output prints the script's output after the report, on stderr.
    shown = re.search(r"^---- reload\.py: stdout ----\n(.*?)^---- reload\.py: stderr ----$", cli.stderr.decode(),
                      re.S | re.M)
    assert shown is not None, why
    assert shown.group(1) == expected, why
    assert _digest(proj) == before
    shutil.rmtree(plain_dir, ignore_errors=True)


@pytest.mark.parametrize("mode", ["namespaces", "none"])
def test_save_load_tutorial_verifies(tmp_path, mode):
    """fixtures/tutorials/save_load.py (Keras and tf.saved_model saves, loads under OneDeviceStrategy and
    another MirroredStrategy) runs to its end under --verify: exit 0, nothing found, its own output."""
    if mode == "namespaces":
        ok, why = _namespaces_available(tmp_path)
        if not ok:
            pytest.skip(f"no namespaces sandbox on this machine: {why}")
    tutorials = os.path.join(ROOT, "fixtures", "tutorials")
    before = _digest(tutorials)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"), TFPAR_VERIFY_SANDBOX="auto" if mode ==
               "namespaces" else "none")
    cli = subprocess.run([sys.executable, "-m", "tfpar_lint", "--verify", "fixtures/tutorials/save_load.py",
                          "--show-output", "--no-cache", "--devices", "cpu:2", "--timeout", "300"],
                         cwd=ROOT, capture_output=True, timeout=400, env=env)
    out, err = cli.stdout.decode(), cli.stderr.decode()
    why = (out + err)[-4000:]
    assert cli.returncode == 0, why
    header = next((ln for ln in out.splitlines() if ln.startswith("fixtures/tutorials/save_load.py: ")), "")
    assert "ran to the end" in header and f"sandbox: {mode}" in header and header.endswith("nothing found"), why
    assert "== 1 script run: 0 CONFIRMED, 0 RUNTIME, 0 NOT_REPRODUCED, 0 INCONCLUSIVE ==" in out, why
    assert ("under another strategy: [{'output_0': TensorShape([16, 10])}, {'output_0': TensorShape([16, 10])}]"
            in err), why
    assert _digest(tutorials) == before
