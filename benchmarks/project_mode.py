"""Whole-project analysis against per-file mode, and a warm run after editing one file.

    .venv/bin/python benchmarks/project_mode.py [--runs N] [--jobs J]

Corpus: the installed ``tensorflow``, ``keras`` and ``tf_keras`` packages plus a copy of this
repository's ``fixtures/`` (the benchmark corpus of ``benchmarks/run.py``; the copy is what gets
edited).  Measured, each ``--runs`` times (median reported), with CPU time of the process and its
children (``os.wait4`` rusage) and wall time:

* cold, whole-project analysis (the default) and ``--no-project``;
* the cache filled, then one file edited (a line appended to ``fixtures/project/bad/models.py``,
  imported by two other files of the fixture project), then the warm run.

Prints a markdown table for ``benchmarks/results.md``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import site
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], cwd: str) -> tuple[float, float, int]:
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    return wall, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    sp = next(p for p in site.getsitepackages() if os.path.isdir(os.path.join(p, "tensorflow")))
    with tempfile.TemporaryDirectory(prefix="tfpar-proj-bench-") as tmp:
        fixtures = os.path.join(tmp, "fixtures")
        shutil.copytree(ROOT / "fixtures", fixtures)
        corpus = [os.path.join(sp, p) for p in ("tensorflow", "keras", "tf_keras")] + [fixtures]
        base = [sys.executable, "-m", "tfpar_lint", "--exit-zero", "-j", str(args.jobs)]
        rows = []
        for label, extra in (("cold, whole-project analysis", []), ("cold, `--no-project` (per-file)", ["--no-project"])):
            samples = [timed(base + ["--no-cache"] + extra + corpus, tmp) for _ in range(args.runs)]
            rows.append((label, statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)))
        cache = os.path.join(tmp, "cache")
        edited = os.path.join(fixtures, "project", "bad", "models.py")
        warm = []
        for i in range(args.runs):
            timed(base + ["--cache-dir", cache] + corpus, tmp)  # fill / refresh
            with open(edited, "a", encoding="utf-8") as fh:
                fh.write(f"# edit {i}\n")
            warm.append(timed(base + ["--cache-dir", cache] + corpus, tmp))
        rows.append(("warm, after editing one file (`fixtures/project/bad/models.py`)",
                     statistics.median(s[0] for s in warm), statistics.median(s[1] for s in warm)))
    print("| run | wall s | CPU s |\n|---|---:|---:|")
    for label, wall, cpu in rows:
        print(f"| {label} | {wall:.2f} | {cpu:.2f} |")
    print(f"\nratio whole-project / per-file (CPU): {rows[0][2] / rows[1][2]:.2f}x; "
          f"(wall): {rows[0][1] / rows[1][1]:.2f}x; runs={args.runs}, -j{args.jobs}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
