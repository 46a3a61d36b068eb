"""The fallback without namespaces (``TFPAR_VERIFY_SANDBOX=none``) redirects writes, copy-on-write
(issue 10 part 3): a script that writes into its folder through TensorFlow's file layer, Keras saving,
``open`` and ``os`` runs to its end, reads back what it wrote, and the folder is byte-identical."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import textwrap

import pytest

HAVE_TF = importlib.util.find_spec("tensorflow") is not None
pytestmark = [
    pytest.mark.verify,
    pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not importable (bash scripts/dev.sh setup installs it)"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fallback is tested on Linux"),
]

SCRIPT = """
import os
import numpy as np
import tensorflow as tf

print("READ existing", tf.io.read_file("existing.txt").numpy().decode())
tf.io.write_file("existing.txt", "tf-overwritten")
print("READ write_file", tf.io.read_file("existing.txt").numpy().decode(), open("existing.txt").read())

@tf.function
def write_then_read():  # traced: the paths are mapped when the graph is built
    wrote = tf.io.write_file("traced.txt", "in a graph")
    with tf.control_dependencies([wrote]):  # ReadFile is not stateful: without this TF may run it first
        return tf.io.read_file("traced.txt")


print("READ tf.function", write_then_read().numpy().decode(), open("traced.txt").read())

v = tf.Variable(3.0)
ckpt = tf.train.Checkpoint(v=v)
path = ckpt.save("ckpt/c")
v.assign(-1.0)
ckpt.restore(path)
print("READ checkpoint", path, float(v.numpy()), tf.train.latest_checkpoint("ckpt"), sorted(os.listdir("ckpt")))
mgr = tf.train.CheckpointManager(ckpt, "ckpt_mgr", max_to_keep=1)
mgr.save()
mgr.save()
print("READ manager", [os.path.basename(p) for p in mgr.checkpoints], tf.train.latest_checkpoint("ckpt_mgr"))

model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1, kernel_initializer="ones")])
model.save("model.keras")
loaded = tf.keras.models.load_model("model.keras")
print("READ model.keras", loaded.predict(np.ones((1, 2)), verbose=0).tolist())
model.save_weights("w.weights.h5")
model.layers[0].kernel.assign(np.zeros((2, 1)))
model.load_weights("w.weights.h5")
print("READ weights.h5", model.predict(np.ones((1, 2)), verbose=0).tolist())

m = tf.Module()
m.v = tf.Variable(7.0)
m.f = tf.function(lambda: m.v * 2, input_signature=[])
tf.saved_model.save(m, "sm")
restored = tf.saved_model.load("sm")
print("READ saved_model", float(restored.f().numpy()))

w = tf.summary.create_file_writer("logs")
with w.as_default():
    tf.summary.write("loss", 1.0, step=0)
w.flush()
print("READ summaries", len(tf.io.gfile.listdir("logs")))

with open("notes.txt", "w") as f:
    f.write("w")
with open("notes.txt", "a") as f:
    f.write("+a")
with open("log.txt", "a") as f:
    f.write("+appended")
print("READ open", open("notes.txt").read(), open("log.txt").read())

with open("tmp_new.txt", "w") as f:
    f.write("replaced")
os.replace("tmp_new.txt", "target.txt")
print("READ replace", open("target.txt").read(), os.path.exists("tmp_new.txt"))
os.remove("victim.txt")
print("READ remove", os.path.exists("victim.txt"), "victim.txt" in os.listdir("."))
os.symlink("existing.txt", "alias")
with open("alias", "a") as f:  # through the link: to the file it names
    f.write("+via link")
print("READ symlink", open("existing.txt").read(), os.readlink("alias"))
print("END", flush=True)
"""

USER_FILES = {"existing.txt": "original", "log.txt": "log", "target.txt": "target", "victim.txt": "victim",
              "ckpt/README": "the user's checkpoint folder"}


def snapshot(top: str) -> dict:
    """Names, kinds, sizes, modes, mtimes (ns) and sha256 of everything under ``top``."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            digest = None
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(p, top)] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out


def test_fallback_redirects_writes_and_the_script_runs_to_its_end(tmp_path, monkeypatch):
    from tfpar_lint.verify import verify_findings

    monkeypatch.setenv("TFPAR_VERIFY_SANDBOX", "none")
    proj = tmp_path / "proj"
    proj.mkdir()
    for rel, text in USER_FILES.items():
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(text)
    (proj / "saver.py").write_text(textwrap.dedent(SCRIPT))
    monkeypatch.chdir(proj)
    before = snapshot(str(tmp_path))
    (run,) = verify_findings(["saver.py"], [], devices="cpu:2", timeout=240)
    why = f"{run.summary()}\nstdout: {run.stdout[-3000:]}\nstderr: {run.stderr[-3000:]}"
    assert run.sandbox == "none", why
    assert run.outcome == "ok" and run.exit_status == 0, why
    assert run.stdout.rstrip().endswith("END"), why
    assert run.runtime_findings == [], why  # no finding
    read = {ln.split()[1]: ln.split(None, 2)[2] for ln in run.stdout.splitlines() if ln.startswith("READ ")}
    assert read == {
        "existing": "original",
        "write_file": "tf-overwritten tf-overwritten",
        "tf.function": "in a graph in a graph",
        "checkpoint": "ckpt/c-1 3.0 ckpt/c-1 ['README', 'c-1.data-00000-of-00001', 'c-1.index', 'checkpoint']",
        "manager": "['ckpt-3'] ckpt_mgr/ckpt-3",
        "model.keras": "[[2.0]]",
        "weights.h5": "[[2.0]]",
        "saved_model": "14.0",
        "summaries": "1",
        "open": "w+a log+appended",
        "replace": "replaced False",
        "remove": "False False",
        "symlink": "tf-overwritten+via link existing.txt",
    }, why
    assert snapshot(str(tmp_path)) == before  # the user's folder and its parent: byte-identical


OS_SCRIPT = r"""
import errno, os, shutil, sys
from tfpar_lint.verify import sandbox

sandbox.install_python_guard([sys.argv[1]], tf_too=False)
out = []
os.rename("d", "d2")  # a real folder renamed: copied to its mirror, the real one hidden
out.append(sorted(os.listdir("d2")) + [os.path.exists("d")])
try:
    os.rmdir("d2")
except OSError as e:
    out.append(errno.errorcode[e.errno])
try:
    os.mkdir("d2")
except FileExistsError:
    out.append("EEXIST")
try:
    os.close(os.open("f.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
except FileExistsError:
    out.append("EEXIST")
os.truncate("f.txt", 2)
out.append(open("f.txt").read())
with open(b"new.bin", "xb") as f:
    f.write(b"\x00\x01")
out.append(sorted(os.listdir(b".")))
os.utime("f.txt", (0, 0))
out.append(os.stat("f.txt").st_mtime)
shutil.copy("f.txt", "copy.txt")
shutil.move("copy.txt", "moved.txt")
out.append(sorted(e.name for e in os.scandir(".")))
os.remove("moved.txt")
shutil.rmtree("d2")
os.makedirs("d2/again")  # over the removed folder: its old files stay hidden
out.append([sorted(x) for _, x, y in os.walk("d2")] + sorted(os.listdir(".")))
print(repr(out))
"""


def test_overlay_semantics(tmp_path):
    """rename of a real folder, rmdir of a non-empty one, O_EXCL/mkdir over existing names, truncate,
    bytes paths, utime, shutil copy/move, scandir and walk over the union, a folder removed and made again."""
    import subprocess

    proj, run = tmp_path / "proj", tmp_path / "run"
    (proj / "d" / "sub").mkdir(parents=True)
    run.mkdir()
    (proj / "d" / "a.txt").write_text("a")
    (proj / "d" / "sub" / "b.txt").write_text("b")
    (proj / "f.txt").write_text("hello")
    before = snapshot(str(proj))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "-c", OS_SCRIPT, str(run)], cwd=proj, capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=os.path.join(root, "src")))
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == repr([
        ["a.txt", "sub", False], "ENOTEMPTY", "EEXIST", "EEXIST", "he",
        [b"d2", b"f.txt", b"new.bin"], 0.0,
        ["d2", "f.txt", "moved.txt", "new.bin"],
        [["again"], [], "d2", "f.txt", "new.bin"],
    ]), p.stdout + p.stderr[-3000:]
    assert snapshot(str(proj)) == before
    assert (run / "overlay").is_dir()  # the writes are there
