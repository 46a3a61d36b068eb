"""The hostile-script suite of ``--verify`` (issue 22), in both sandbox modes.

Each script here tries to get out of the sandbox and change the user's files.  All of them run in one
``verify_findings`` call together with a correct training script, once with the machine's sandbox
(namespaces) and once with the Python-level fallback.  Every test checks the contract on its part of
that call: the user's folder is byte-identical, no process of the run survives it, the correct
script's verdict is kept, and an attempt to change mounts is reported as refused.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import textwrap
import uuid

import pytest

from test_verify_contain import live_descendants, settled, tree_digest

from tfpar_lint.verify import sandbox

HAVE_TF = importlib.util.find_spec("tensorflow") is not None
pytestmark = [
    pytest.mark.verify,
    pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not importable (bash scripts/dev.sh setup installs it)"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux's"),
]

MARK = "tfparhostile" + uuid.uuid4().hex[:10]

# The escape of issue 22, as filed: peel the run's overlay off, remount the read-only bind below it
# writable, and overwrite a file next to the script.
ESCAPE = """
    import ctypes, os
    import tensorflow as tf
    libc = ctypes.CDLL(None, use_errno=True)
    here = os.path.dirname(os.path.abspath(__file__))
    def mount_of(path):  # the innermost mount point above path
        mps = [l.split()[4] for l in open("/proc/self/mountinfo")]
        return max((m for m in mps if path == m or path.startswith(m.rstrip("/") + "/")), key=len)
    while libc.umount2(mount_of(here).encode(), 2) == 0:  # MNT_DETACH: peel the overlay off
        pass
    libc.mount(None, mount_of(here).encode(), None, 0x20 | 0x1000, None)  # MS_REMOUNT|MS_BIND
    with open(os.path.join(here, "victim.txt"), "w") as f:
        f.write("overwritten by the verified script\\n")
    strategy = tf.distribute.MirroredStrategy()
"""

SCRIPTS = {
    "escape.py": ESCAPE,
    # Every descriptor of a folder the process inherited: ``..`` from it up to the top, then a write.
    "fd_walk.py": """
        import os, stat
        here = os.path.dirname(os.path.abspath(__file__))
        wrote = []
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    continue
                top = os.open("../" * 40, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                t = os.open(here.lstrip("/") + "/victim.txt", os.O_WRONLY | os.O_TRUNC, dir_fd=top)
                os.write(t, b"written through an inherited folder descriptor\\n")
                wrote.append(fd)
            except OSError:
                pass
        print("WROTE", wrote, flush=True)
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
    """,
    # Every regular file the process inherited, opened again for writing through /proc.
    "fd_reopen.py": """
        import os, stat
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode) and fd > 2:
                    with open(f"/proc/self/fd/{fd}", "r+b") as f:
                        f.write(b"clobbered")
            except OSError:
                pass
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
    """,
    # A new user namespace of its own (full capabilities inside), then the same peel-and-remount.
    "nested_userns.py": """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        here = os.path.dirname(os.path.abspath(__file__))
        ok = libc.unshare(0x10000000 | 0x00020000)  # CLONE_NEWUSER | CLONE_NEWNS
        print("unshare", ok, ctypes.get_errno(), flush=True)
        for _ in range(8):
            libc.umount2(here.encode(), 2)
        libc.mount(None, here.encode(), None, 0x20 | 0x1000, None)
        libc.syscall(166, here.encode(), 2)  # umount2 by number (x86_64), past the named symbol
        try:
            with open(os.path.join(here, "victim.txt"), "w") as f:
                f.write("overwritten from a nested namespace\\n")
        except OSError as e:
            print("write", e, flush=True)
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
    """,
    # Item 6: a script that leaves with os._exit(0) ran to its end.
    "exit0.py": """
        import os
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            v = tf.Variable(2.0)
        print("EXIT0", float(v.numpy()), flush=True)
        os._exit(0)
    """,
    # Item 6: a hung script is located at its own line, not in the verifier's child.py.
    "hang.py": """
        import threading
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        def wait_for_ever():
            threading.Event().wait()
        wait_for_ever()
    """,
    # Item 5: a file too deeply nested for Python's compiler, and a script that crashes (SIGSEGV):
    # each costs its own verdict only.
    "deep.py": "import tensorflow as tf\nx = " + "+".join(["1"] * 200000) + "\n",
    "crash.py": """
        import ctypes
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        ctypes.string_at(0)
    """,
    # Item 3: TensorFlow's own writers and tf.data's files, next to the script.
    "tf_writers.py": """
        import os
        import tensorflow as tf
        here = os.path.dirname(os.path.abspath(__file__))
        rec = os.path.join(here, "victim.txt")  # over the user's file
        with tf.io.TFRecordWriter(rec) as w:
            w.write(b"record")
        got = [r.numpy() for r in tf.data.TFRecordDataset(rec)]
        ds = tf.data.Dataset.range(3)
        ds.save(os.path.join(here, "saved_ds"))
        back = [int(x) for x in tf.data.Dataset.load(os.path.join(here, "saved_ds"))]
        cached = [int(x) for x in ds.cache(os.path.join(here, "cache_file"))]
        tf.data.experimental.TFRecordWriter(os.path.join(here, "exp.tfrecord")).write(
            tf.data.Dataset.from_tensor_slices([b"a"]))
        print("WRITERS", got, back, cached, flush=True)
        strategy = tf.distribute.MirroredStrategy()
    """,
    # Item 3: programs started past the audit hook, FIFOs and device nodes.
    "spawn.py": """
        import _posixsubprocess, os, stat, sys
        here = os.path.dirname(os.path.abspath(__file__))
        victim = os.path.join(here, "victim.txt").encode()
        r, w = os.pipe()
        try:
            pid = _posixsubprocess.fork_exec([b"/bin/rm", b"-f", victim], [b"/bin/rm"], True, (w,), None, None,
                                             -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None, -1,
                                             None, *([False] if sys.version_info >= (3, 11) else []))
            os.waitpid(pid, 0)
            print("FORK_EXEC ran", flush=True)
        except PermissionError:
            print("FORK_EXEC refused", flush=True)
        for what, call in (("POSIX_SPAWN", lambda: os.posix_spawn("/bin/rm", ["rm", "-f", victim], {})),
                           ("MKFIFO", lambda: os.mkfifo(os.path.join(here, "pipe"))),
                           ("MKNOD", lambda: os.mknod(os.path.join(here, "node"), 0o600 | stat.S_IFREG))):
            try:
                call()
                print(what, "ran", flush=True)
            except PermissionError:
                print(what, "refused", flush=True)
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
    """,
    # Item 3: setsid, a double fork, PR_SET_PDEATHSIG cleared, execve: an orphan that outlives the script.
    "orphan.py": """
        import ctypes, os, time
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG 0: leave no signal to die by
                try:
                    os.execv("/bin/sleep", ["sleep", "600"])
                except OSError:
                    while True:
                        time.sleep(1)
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(1)
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
    """,
    # Item 3: Keras writes ~/.keras/keras.json when imported; the script writes in ~ too.
    "home.py": """
        import os, tempfile
        import keras
        import tensorflow as tf
        home = os.path.expanduser("~")
        os.makedirs(os.path.join(home, ".keras"), exist_ok=True)
        with open(os.path.join(home, ".keras", "keras.json"), "w") as f:
            f.write("{}")
        with open(os.path.join(tempfile.gettempdir(), "scratch.txt"), "w") as f:
            f.write("x")
        print("HOME", home, "TMP", tempfile.gettempdir(), flush=True)
        strategy = tf.distribute.MirroredStrategy()
    """,
    # Another user's file (created when the suite runs as root): appending to it copies it up.
    "foreign.py": """
        import os
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.path.join(here, "foreign.txt")
        if os.path.exists(path):
            with open(path, "a") as f:
                f.write("appended\\n")
            print("FOREIGN", open(path).read().count("appended"), flush=True)
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
    """,
    # A correct script in the same call: its verdict must be kept.
    "good.py": """
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            v = tf.Variable(1.0)
        print("GOOD", float(v.numpy()), flush=True)
    """,
}


@pytest.fixture(scope="module", params=["auto", "none"], ids=["sandbox", "no-sandbox"])
def hostile(request, tmp_path_factory):
    from tfpar_lint.verify import verify_findings

    top = str(tmp_path_factory.mktemp("hostile"))
    project = os.path.join(top, "project")
    os.makedirs(project)
    for name, text in SCRIPTS.items():
        with open(os.path.join(project, name), "w") as f:
            f.write(textwrap.dedent(text).lstrip() + f"# {MARK}\n")
    with open(os.path.join(project, "victim.txt"), "w") as f:
        f.write("the user's file\n")
    # Item 2: what is not a regular file is not run (nor read without bound, nor waited on).
    os.mkfifo(os.path.join(project, "fifo.py"))
    os.symlink("/dev/zero", os.path.join(project, "zero.py"))
    if os.geteuid() == 0:  # a file of another user and group, writable by all
        with open(os.path.join(project, "foreign.txt"), "w") as f:
            f.write("someone else's file\n")
        os.chown(os.path.join(project, "foreign.txt"), 4242, 4242)
        os.chmod(os.path.join(project, "foreign.txt"), 0o666)
    home = os.path.join(top, "home")  # the user's home for this call: it must stay empty
    os.makedirs(home)
    before = tree_digest(top)
    was = sandbox.set_subreaper()  # every orphan of the runs comes back here, where the test looks for it
    env = {"TFPAR_VERIFY_SANDBOX": request.param, "TFPAR_VERIFY_EXPOSED_CLUSTER": "0", "HOME": home}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    old = os.getcwd()
    os.chdir(project)
    try:
        runs = verify_findings(list(SCRIPTS) + ["fifo.py", "zero.py"], [], devices="cpu:2", max_steps=3,
                               timeout=40, jobs=3)
    finally:
        os.chdir(old)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield {"mode": request.param, "runs": {r.path: r for r in runs}, "before": before, "after": tree_digest(top),
           "project": project, "survivors": settled(live_descendants), "home": home}
    if was:
        sandbox.prctl(sandbox.PR_SET_CHILD_SUBREAPER, 0)


def _why(run) -> str:
    return f"{run.summary()}\nnotes: {run.notes}\nstdout: {run.stdout[-800:]}\nstderr: {run.stderr[-800:]}"


def test_user_files_are_byte_identical(hostile):
    b, a = hostile["before"], hostile["after"]
    assert a == b, sorted(set(a.items()) ^ set(b.items()))[:10]
    with open(os.path.join(hostile["project"], "victim.txt")) as f:
        assert f.read() == "the user's file\n"


def test_escape_is_refused_and_reported(hostile):
    run = hostile["runs"]["escape.py"]
    assert "umount2" in run.sandbox_refused, _why(run)
    assert any("tried to change mounts" in n and "refused" in n for n in run.notes), _why(run)
    from tfpar_lint.output.text import script_header

    assert "refused: umount2" in script_header(run, []), script_header(run, [])
    if hostile["mode"] != "none":  # the sandbox lets it run on; the fallback stops it at the call
        assert run.outcome == "ok", _why(run)
        assert run.sandbox == "namespaces", _why(run)


def test_inherited_descriptors_reach_nothing(hostile):
    walk = hostile["runs"]["fd_walk.py"]
    if hostile["mode"] != "none":
        assert "WROTE []" in walk.stdout, _why(walk)
        assert walk.outcome == "ok", _why(walk)
    reopen = hostile["runs"]["fd_reopen.py"]
    assert reopen.outcome in ("ok", "error"), _why(reopen)


def test_a_nested_namespace_changes_nothing(hostile):
    run = hostile["runs"]["nested_userns.py"]
    assert {"unshare", "umount2"} & set(run.sandbox_refused), _why(run)
    if hostile["mode"] != "none":
        assert "unshare -1 1" in run.stdout, _why(run)  # EPERM from the seccomp filter


def test_the_correct_script_keeps_its_verdict(hostile):
    run = hostile["runs"]["good.py"]
    assert run.outcome == "ok" and "GOOD 1.0" in run.stdout, _why(run)
    assert not run.sandbox_refused and not run.runtime_findings, _why(run)


def test_no_process_survives(hostile):
    assert hostile["survivors"] == [], hostile["survivors"]


# ----------------------------------------------------------------- item 6: smaller faults
def test_exit0_is_a_normal_end(hostile):
    run = hostile["runs"]["exit0.py"]
    assert run.outcome == "ok", _why(run)
    assert "EXIT0 2.0" in run.stdout and run.replicas == 2, _why(run)
    assert any("os._exit(0)" in n for n in run.notes), _why(run)


def test_hang_is_located_at_the_users_line(hostile):
    run = hostile["runs"]["hang.py"]
    assert run.outcome == "hung", _why(run)
    assert run.hang_location.startswith("hang.py:5 in wait_for_ever"), run.hang_location
    assert "child.py" not in run.hang_location, run.hang_location


def test_hang_location_never_names_the_verifier(tmp_path):
    """A dump whose main thread is inside the verifier (its SIGTERM handler) and whose script frame
    is in another thread: the script's line is the place."""
    from tfpar_lint.verify import driver

    script = str(tmp_path / "train.py")
    (tmp_path / "train.py").write_text("x = 1\n" * 20)  # a place must be a line of the script
    child = os.path.join(os.path.dirname(driver.__file__), "child.py")
    dump = tmp_path / "stacks.txt"
    dump.write_text(
        "Thread 0x00007f0000000001 (most recent call first):\n"
        f'  File "{script}", line 12 in worker\n'
        '  File "/usr/lib/python3.11/threading.py", line 975 in run\n'
        "\n"
        "Current thread 0x00007f0000000002 (most recent call first):\n"
        f'  File "{child}", line 150 in _on_sigterm\n'
        f'  File "{child}", line 260 in _run_script\n'
        f'  File "{child}", line 55 in main\n')
    loc = driver._hang_location(str(dump), script)
    assert loc.startswith("train.py:12 in worker"), loc
    only_ours = tmp_path / "ours.txt"
    only_ours.write_text("Current thread 0x00007f0000000002 (most recent call first):\n"
                         f'  File "{child}", line 150 in _setup\n  File "{child}", line 55 in main\n')
    assert "child.py" not in driver._hang_location(str(only_ours), script)


def _cli(*argv, cwd):
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                   "src"))
    return subprocess.run([sys.executable, "-m", "tfpar_lint", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("line, what", [("file-timeout = 1e308", "'file-timeout'"),
                                        ("max-file-size = 100000000000000000000000000", "'max-file-size'"),
                                        ('max-file-size = "1e30G"', "'max-file-size'")])
def test_huge_config_values_are_config_errors(tmp_path, line, what):
    (tmp_path / "pyproject.toml").write_text(f"[tool.tfpar-lint]\n{line}\n")
    (tmp_path / "a.py").write_text("import tensorflow as tf\n")
    r = _cli("--no-cache", "check", ".", cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert what in r.stderr and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


def test_options_before_check(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(
        "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"
        "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "with strategy.scope():\n    model.compile(optimizer='sgd', loss='mse')\n")
    for argv in (["--no-cache", "check", "pkg"], ["--select", "TFP1", "--no-cache", "check", "pkg"],
                 ["--select=TFP1", "check", "pkg"]):
        r = _cli(*argv, cwd=tmp_path)
        assert r.returncode == 1, (argv, r.stdout, r.stderr)
        assert "TFP101" in r.stdout and "check" not in r.stdout and "E902" not in r.stdout, (argv, r.stdout)


# ------------------------------------------------------- item 2: only regular files are run
@pytest.mark.parametrize("name, kind", [("fifo.py", "a FIFO"), ("zero.py", "a character device")])
def test_only_regular_files_are_run(hostile, name, kind):
    run = hostile["runs"][name]
    assert run.outcome == "failed" and f"{name} is {kind}" in run.error, _why(run)
    assert "only regular files are run" in run.error, _why(run)


def test_script_size_is_bounded(tmp_path):
    from tfpar_lint.verify import driver

    big = tmp_path / "big.py"
    with open(big, "wb") as f:
        f.truncate(driver.SCRIPT_MAX_BYTES + 1)  # sparse: nothing is written
    runs = driver.verify_findings([str(big)], [], devices="cpu:1", timeout=30)
    assert runs[0].outcome == "failed" and "larger than" in runs[0].error, runs[0].error


# ------------------------------------------------------------ item 5: isolation
def test_a_deep_file_costs_its_own_verdict_only(hostile):
    run = hostile["runs"]["deep.py"]
    assert run.outcome in ("error", "failed") and "RecursionError" in run.error, _why(run)
    crash = hostile["runs"]["crash.py"]
    assert crash.outcome == "failed" and "-11" in crash.error, _why(crash)
    assert set(hostile["runs"]) == set(SCRIPTS) | {"fifo.py", "zero.py"}


# ------------------------------------------------------------------ item 4: the lint cache
def _tfp401(tmp_path) -> int:
    r = _cli("check", ".", "--output-format", "concise", "--select", "TFP401", cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    return sum(1 for ln in r.stdout.splitlines() if "TFP401" in ln)


def _cross_file_project(tmp_path):
    """steps.py seeds inside a function that train.py runs on every replica (TFP401 in steps.py)."""
    (tmp_path / "steps.py").write_text("import tensorflow as tf\n\n\ndef train_step(x):\n"
                                       "    tf.random.set_seed(7)\n    return x\n")
    (tmp_path / "train.py").write_text("import tensorflow as tf\nfrom steps import train_step\n\n"
                                       "strategy = tf.distribute.MirroredStrategy()\n"
                                       "strategy.run(train_step, args=(1.0,))\n")


@pytest.mark.parametrize("edit", ["importer", "imported"])
def test_cache_follows_the_modules_a_file_depends_on(tmp_path, edit):
    """Edit a module, lint, revert, lint: the cross-file TFP401 comes back (the cache key of
    steps.py covers train.py's content and who imports whom)."""
    _cross_file_project(tmp_path)
    assert _tfp401(tmp_path) == 1
    target = tmp_path / ("train.py" if edit == "importer" else "steps.py")
    original = target.read_bytes()
    if edit == "importer":
        target.write_text(original.decode().replace("from steps import train_step", "train_step = print"))
    else:
        target.write_text(original.decode().replace("def train_step", "def other_step"))
    assert _tfp401(tmp_path) == 0
    target.write_bytes(original)
    assert _tfp401(tmp_path) == 1


def _entries(tmp_path) -> list:
    out = []
    for dirpath, _d, files in os.walk(tmp_path / ".tfpar_lint_cache" / "v2"):
        out += [os.path.join(dirpath, f) for f in files if f.endswith(".json")]
    return out


@pytest.mark.parametrize("tamper", ["edit", "symlink", "fifo", "checksum-kept", "foreign-owner"])
def test_cache_entries_are_checked(tmp_path, tamper):
    """An entry that was edited, replaced by a link or a FIFO is not trusted: the file is linted again."""
    import json

    _cross_file_project(tmp_path)
    assert _tfp401(tmp_path) == 1
    entries = [p for p in _entries(tmp_path) if '"TFP401"' in open(p).read()]
    assert len(entries) == 1, _entries(tmp_path)
    entry = entries[0]
    data = json.load(open(entry))
    forged = dict(data, findings=[])
    os.unlink(entry)
    if tamper == "edit":  # the finding removed, the checksum left as it was
        json.dump(forged, open(entry, "w"))
    elif tamper == "checksum-kept":  # a field of the checksummed body changed
        json.dump(dict(data, notes=["forged"]), open(entry, "w"))
    elif tamper == "symlink":  # a forged entry elsewhere, linked in
        other = tmp_path / "forged.json"
        json.dump(forged, open(other, "w"))
        os.symlink(other, entry)
    elif tamper == "foreign-owner":  # a well-formed forged entry, with its checksum, owned by someone else
        if os.geteuid() != 0:
            pytest.skip("giving a file away needs root")
        from tfpar_lint.cache import _checksum

        body = {k: v for k, v in forged.items() if k != "checksum"}
        json.dump(dict(body, checksum=_checksum(body)), open(entry, "w"))
        os.chown(entry, 4242, 4242)
    else:
        os.mkfifo(entry)
    assert _tfp401(tmp_path) == 1  # recomputed, and the FIFO did not block
    if tamper != "fifo":
        assert os.path.isfile(entry) and not os.path.islink(entry)


# ------------------------------------------------------------- item 3: the fallback sandbox
def test_tensorflow_writers_are_redirected(hostile):
    run = hostile["runs"]["tf_writers.py"]
    assert run.outcome == "ok", _why(run)
    assert "WRITERS [b'record'] [0, 1, 2] [0, 1, 2]" in run.stdout, _why(run)  # it read back what it wrote


def test_programs_fifos_and_nodes(hostile):
    run = hostile["runs"]["spawn.py"]
    assert run.outcome == "ok", _why(run)
    verdict = "refused" if hostile["mode"] == "none" else "ran"  # in the sandbox they run, on its overlay
    for what in ("FORK_EXEC", "POSIX_SPAWN", "MKFIFO", "MKNOD"):
        assert f"{what} {verdict}" in run.stdout, (what, _why(run))


def test_orphans_are_killed(hostile):
    run = hostile["runs"]["orphan.py"]
    assert run.outcome == "ok", _why(run)
    # and no process of it is left: test_no_process_survives


def test_home_and_temp_are_private(hostile):
    run = hostile["runs"]["home.py"]
    assert run.outcome == "ok", _why(run)
    assert os.listdir(hostile["home"]) == [], os.listdir(hostile["home"])
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("HOME "))
    _, home, _, tmp = line.split()
    assert home != hostile["home"] and not home.startswith(hostile["project"]), line
    assert tmp != "/tmp" and os.path.basename(os.path.dirname(home)) == os.path.basename(os.path.dirname(tmp)), line


DAEMON = """
import os, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            time.sleep(1)
    os._exit(0)
os.waitpid(pid, 0)
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
print("READY", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("mode", ["auto", "none"], ids=["sandbox", "no-sandbox"])
def test_sigkill_of_tfpar_lint_takes_the_tree_down(tmp_path, mode):
    """SIGKILL of tfpar-lint during --verify: the fork server, each run's relay, the script and what
    the script left running (setsid, a double fork) all die (PR_SET_PDEATHSIG on every link)."""
    import glob
    import signal
    import subprocess
    import time

    from tfpar_lint.verify import procs

    project = tmp_path / "project"
    project.mkdir()
    (project / "daemon.py").write_text(DAEMON)
    (project / "good.py").write_text(textwrap.dedent(SCRIPTS["good.py"]))
    runs = tmp_path / "runs"
    runs.mkdir()
    env = dict(os.environ, TFPAR_VERIFY_SANDBOX=mode, TMPDIR=str(runs),
               PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
    before = tree_digest(str(project))
    p = subprocess.Popen([sys.executable, "-m", "tfpar_lint", "--no-cache", "--verify", "--timeout", "300", "--devices", "cpu:2",
                          "daemon.py", "good.py"], cwd=project, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        end = time.time() + 240
        while time.time() < end:
            outs = glob.glob(str(runs / "tfpar-verify-*" / "*daemon*" / "stdout.txt"))
            if outs and "READY" in open(outs[0]).read():
                break
            assert p.poll() is None, "tfpar-lint ended before the script was ready"
            time.sleep(0.2)
        else:
            pytest.fail("the script never became ready")
        time.sleep(1)
        tree = procs.identities(procs.descendants([p.pid]) - {p.pid})
        # the fork server, the run's relay, the script, and in the sandbox its daemon (without one, a
        # process the script forks dies with its parent: the double fork's daemon is gone already)
        assert len(tree) >= (4 if mode == "auto" else 3), tree
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)

        def alive():
            return sorted(q for q, t in tree.items() if procs.start_time(q) == t and not _zombie(q))

        assert settled(alive, 15) == []
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert tree_digest(str(project)) == before


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True


def test_files_of_other_owners_can_be_written(hostile):
    """As root, every id is mapped into the sandbox's user namespaces, so the overlay copies up a
    file of another owner (with only the caller's id mapped, that write got EOVERFLOW).  An
    ordinary user can map only their own ids: docs/sandbox.md."""
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    run = hostile["runs"]["foreign.py"]
    assert run.outcome == "ok" and "FOREIGN 1" in run.stdout, _why(run)
