"""Cold lint time of two trees of tfpar-lint on the same corpus (issue 8 before/after).

    git worktree add /tmp/oldtree aec08d1
    OLD=/tmp/oldtree .venv/bin/python benchmarks/before_after.py

Both trees lint the installed tensorflow, keras and tf_keras plus the OLD tree's fixtures/ (the
same files); 3 rounds alternating, -j1 and -j2; median wall and CPU (``os.wait4`` rusage: the
process and its children)."""
import os
import site
import statistics
import subprocess
import sys
import time
from pathlib import Path

NEW = str(Path(__file__).resolve().parents[1])
OLD = os.environ.get("OLD", "/tmp/oldtree")
SP = next(p for p in site.getsitepackages() if os.path.isdir(os.path.join(p, "tensorflow")))
CORPUS = [os.path.join(SP, p) for p in ("tensorflow", "keras", "tf_keras")] + [os.path.join(OLD, "fixtures")]


def timed(tree: str, j: int) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=os.path.join(tree, "src"))
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "tfpar_lint", "--no-cache", "-j", str(j), "--exit-zero", *CORPUS],
                         cwd="/tmp", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, _status, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime


def main() -> None:
    res: dict = {}
    for _ in range(3):
        for tree in (OLD, NEW):
            for j in (1, 2):
                res.setdefault((tree, j), []).append(timed(tree, j))
    for (tree, j), v in res.items():
        print(tree, f"-j{j}", "wall", round(statistics.median(x[0] for x in v), 2),
              "cpu", round(statistics.median(x[1] for x in v), 2), [tuple(round(a, 1) for a in x) for x in v])


if __name__ == "__main__":
    main()
