"""Cold ``-j1`` timing of tfpar-lint on fixtures/ and on the installed tensorflow package.

::

    .venv/bin/python benchmarks/j1_timing.py [--src LABEL=DIR ...] [--runs 3]

Runs ``python -m tfpar_lint --no-config --no-progress --no-cache -j1 --format json``
on each corpus as its own process, once per ``--src`` (``PYTHONPATH=DIR``; default:
this checkout's ``src``), ``--runs`` times round-robin (run 1 of every code and
corpus, then run 2, ...: changes in background load hit every version alike), and
prints the median wall time and CPU time (user + system of the process and its
children, from ``os.wait4``), as ``benchmarks/run.py`` measures its ``-j1`` row.
Used for the cost of the supervised parse worker (benchmarks/results.md, "-j1
with a supervised worker"): ``--src before=COPY_OF_OLD_SRC --src after=src``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import package_dirs, py_files  # noqa: E402


def corpora() -> dict[str, list[str]]:
    fixtures = py_files(str(HERE.parent / "fixtures"))
    tf = [f for d in package_dirs("tensorflow") for f in py_files(d)]
    return {"fixtures/": fixtures, "tensorflow": tf}


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, p.returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", action="append", default=None, metavar="LABEL=DIR")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    srcs = [tuple(x.split("=", 1)) for x in (args.src or [f"this={HERE.parent / 'src'}"])]
    sets = corpora()
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "report.json")
        for _ in range(args.runs):
            for label, src in srcs:
                env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
                for name, files in sets.items():
                    cmd = [sys.executable, "-m", "tfpar_lint", "--no-config", "--no-progress", "--no-cache",
                           "-j1", "--format", "json", "-o", out, *files]
                    wall, cpu, rc = timed(cmd, env)
                    if rc not in (0, 1):
                        print(f"{label} {name}: exit {rc}", file=sys.stderr)
                    times.setdefault((label, name), []).append((wall, cpu))
    for (label, name), rows in times.items():
        w = statistics.median(r[0] for r in rows)
        c = statistics.median(r[1] for r in rows)
        print(f"{label}\t{name}\t{len(sets[name])} files\twall {w:.2f} s\tCPU {c:.2f} s\t"
              f"runs {len(rows)}: " + ", ".join(f"{r[0]:.2f}/{r[1]:.2f}" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
