"""Cost of the generated API table (src/tfpar_lint/data/api_table.json.gz) at start-up.

    .venv/bin/python benchmarks/api_table_load.py [--src LABEL=DIR ...] [--runs 10] [FILE]

1. In-process, this checkout: CPU time to read the table's kinds (the first question the analysis
   asks), and to read the public names with their releases (only a version query needs them);
   best of --runs, each in a fresh process.
2. A one-file lint, the start-up a user sees on every save: ``python -m tfpar_lint --no-config
   --no-cache -j1 FILE`` (default: fixtures/TFP101/bad.py, which passes the pre-filter, so the
   table is read) as its own process per ``--src`` (``PYTHONPATH=DIR``), round-robin; median CPU
   time (user + system of the process and its children, ``os.wait4``) and wall time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import time, sys
t0 = time.process_time()
from tfpar_lint import tfapi
t1 = time.process_time()
tfapi.table()
t2 = time.process_time()
tfapi.table().names
t3 = time.process_time()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def in_process(runs: int) -> tuple[float, float, float]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    got = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True)
        got.append(tuple(float(x) for x in out.stdout.split()))
    return tuple(min(g[i] for g in got) for i in range(3))


def one_file(src: str, path: str) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=src)
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "tfpar_lint", "--no-config", "--no-cache", "-j1", "--exit-zero", path],
                         cwd="/tmp", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, _status, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", action="append", default=[], help="LABEL=DIR (a tfpar_lint src folder)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("file", nargs="?", default=str(REPO / "fixtures" / "TFP101" / "bad.py"))
    a = ap.parse_args()
    imp, kinds, names = in_process(a.runs)
    size = os.path.getsize(REPO / "src" / "tfpar_lint" / "data" / "api_table.json.gz")
    print(f"table {size} bytes; import tfapi {imp * 1e3:.1f} ms CPU, kinds {kinds * 1e3:.1f} ms, "
          f"names {names * 1e3:.1f} ms (best of {a.runs})")
    srcs = [s.split("=", 1) for s in a.src] or [["this", str(REPO / "src")]]
    res: dict[str, list] = {}
    for _ in range(a.runs):
        for label, d in srcs:
            res.setdefault(label, []).append(one_file(d, a.file))
    for label, v in res.items():
        print(f"{label}: one-file lint of {os.path.relpath(a.file, REPO)}: CPU {statistics.median(x[1] for x in v):.3f} s,"
              f" wall {statistics.median(x[0] for x in v):.3f} s (median of {len(v)})")


if __name__ == "__main__":
    main()
