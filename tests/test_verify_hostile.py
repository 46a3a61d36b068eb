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
    # A correct script in the same call: its verdict must be kept.
    "good.py": """
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        with strategy.scope():
            v = tf.Variable(1.0)
        print("GOOD", float(v.numpy()), flush=True)
    """,
}


@pytest.fixture(scope="module", params=["auto", "python"], ids=["sandbox", "no-sandbox"])
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
    before = tree_digest(top)
    was = sandbox.set_subreaper()  # every orphan of the runs comes back here, where the test looks for it
    env = {"TFPAR_VERIFY_SANDBOX": request.param, "TFPAR_VERIFY_EXPOSED_CLUSTER": "0"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    old = os.getcwd()
    os.chdir(project)
    try:
        runs = verify_findings(list(SCRIPTS), [], devices="cpu:2", max_steps=3, timeout=90, jobs=3)
    finally:
        os.chdir(old)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield {"mode": request.param, "runs": {r.path: r for r in runs}, "before": before, "after": tree_digest(top),
           "project": project, "survivors": settled(live_descendants)}
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
    if hostile["mode"] != "python":  # the sandbox lets it run on; the fallback stops it at the call
        assert run.outcome == "ok", _why(run)
        assert run.sandbox == "namespaces", _why(run)


def test_inherited_descriptors_reach_nothing(hostile):
    walk = hostile["runs"]["fd_walk.py"]
    if hostile["mode"] != "python":
        assert "WROTE []" in walk.stdout, _why(walk)
        assert walk.outcome == "ok", _why(walk)
    reopen = hostile["runs"]["fd_reopen.py"]
    assert reopen.outcome in ("ok", "error"), _why(reopen)


def test_a_nested_namespace_changes_nothing(hostile):
    run = hostile["runs"]["nested_userns.py"]
    assert {"unshare", "umount2"} & set(run.sandbox_refused), _why(run)
    if hostile["mode"] != "python":
        assert "unshare -1 1" in run.stdout, _why(run)  # EPERM from the seccomp filter


def test_the_correct_script_keeps_its_verdict(hostile):
    run = hostile["runs"]["good.py"]
    assert run.outcome == "ok" and "GOOD 1.0" in run.stdout, _why(run)
    assert not run.sandbox_refused and not run.runtime_findings, _why(run)


def test_no_process_survives(hostile):
    assert hostile["survivors"] == [], hostile["survivors"]
