"""Cold lint time of two trees of tfpar-lint on the same corpus (issue 8 before/after).

    git worktree add /tmp/oldtree aec08d1
    OLD=/tmp/oldtree .venv/bin/python benchmarks/before_after.py
    OLD=/tmp/oldtree .venv/bin/python benchmarks/before_after.py --warm [ROUNDS] [--extend-exclude GLOB]

``--warm``: each tree fills its own cache (one untimed run), then ROUNDS rounds (default 7) each run
both trees warm (nothing changed) and ``ruff check --no-cache`` (default rules) when it is installed,
in turn; the minimum and median of wall and CPU time, and the load average before each round.
``--extend-exclude`` is handed to tfpar-lint (a file that ends in E903 is linted again on every
warm run: it is not cached).

Both trees lint the installed tensorflow, keras and tf_keras plus the OLD tree's fixtures/ (the
same files); 3 rounds alternating, -j1 and -j2; median wall and CPU (``os.wait4`` rusage: the
process and its children), and the CPU per file the pre-filter passed (each tree's own count, from
its ``-v`` log: the trees' rules may pass different files)."""
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


PARSED: dict = {}  # tree -> files the pre-filter passed (parsed), from the -v log


def timed(tree: str, j: int) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=os.path.join(tree, "src"))
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "tfpar_lint", "--no-cache", "-v", "-j", str(j), "--exit-zero", *CORPUS],
                         cwd="/tmp", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = p.stderr.read()
    _pid, _status, ru = os.wait4(p.pid, 0)
    import re

    total = re.search(r"(\d+) file\(s\) to lint", err)
    skipped = re.search(r"(\d+) file\(s\) skipped by the pre-filter", err)
    if total and skipped:
        PARSED[tree] = int(total.group(1)) - int(skipped.group(1))
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime


def timed_cmd(cmd: list[str], env: dict) -> tuple[float, float]:
    t = time.perf_counter()
    p = subprocess.Popen(cmd, cwd="/tmp", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, _status, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime


def warm(rounds: int, extra: list[str]) -> None:
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix="tfpar-warm-")
    cmds = {}
    for name, tree in (("before", OLD), ("after", NEW)):
        env = dict(os.environ, PYTHONPATH=os.path.join(tree, "src"))
        cmd = [sys.executable, "-m", "tfpar_lint", "--no-config", "--format", "json", "-j2", "--exit-zero",
               "--cache-dir", os.path.join(tmp, name), *extra, *CORPUS]
        print(name, "fill the cache: wall %.1f s, CPU %.1f s" % timed_cmd(cmd, env), flush=True)
        cmds[name] = (cmd, env)
    ruff = shutil.which("ruff") or os.path.join(os.path.dirname(sys.executable), "ruff")
    if os.path.exists(ruff):
        cmds["ruff (default rules)"] = ([ruff, "check", "--no-cache", "--isolated", "--exit-zero",
                                         "--output-format", "concise", *CORPUS], dict(os.environ))
    res: dict = {k: [] for k in cmds}
    loads = []
    for _ in range(rounds):
        loads.append(os.getloadavg()[0])
        for name, (cmd, env) in cmds.items():
            res[name].append(timed_cmd(cmd, env))
    print("load average before each round:", " ".join(f"{x:.1f}" for x in loads))
    for name, v in res.items():
        print(f"{name}: wall min {min(x[0] for x in v):.2f} median {statistics.median(x[0] for x in v):.2f} s; "
              f"CPU min {min(x[1] for x in v):.2f} median {statistics.median(x[1] for x in v):.2f} s")
    shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    if "--warm" in sys.argv:
        args = sys.argv[sys.argv.index("--warm") + 1:]
        rounds = int(args[0]) if args and args[0].isdigit() else 7
        extra = []
        if "--extend-exclude" in args:
            extra = ["--extend-exclude", args[args.index("--extend-exclude") + 1]]
        warm(rounds, extra)
        return
    res: dict = {}
    for _ in range(3):
        for tree in (OLD, NEW):
            for j in (1, 2):
                res.setdefault((tree, j), []).append(timed(tree, j))
    for (tree, j), v in res.items():
        n = PARSED.get(tree)
        cpu = statistics.median(x[1] for x in v)
        print(tree, f"-j{j}", "wall", round(statistics.median(x[0] for x in v), 2),
              "cpu", round(cpu, 2), [tuple(round(a, 1) for a in x) for x in v],
              f"parsed {n} files, CPU {1000 * cpu / n:.1f} ms per parsed file" if n else "")
    for j in (1, 2):
        old, new = res.get((OLD, j)), res.get((NEW, j))
        if old and new and PARSED.get(OLD) and PARSED.get(NEW):
            a = statistics.median(x[1] for x in old) / PARSED[OLD]
            b = statistics.median(x[1] for x in new) / PARSED[NEW]
            print(f"-j{j}: CPU per parsed file new/old = {b / a:.2f}x")


if __name__ == "__main__":
    main()
