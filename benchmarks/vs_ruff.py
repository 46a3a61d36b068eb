"""A cold lint of tfpar-lint against ``ruff check --select ALL``, paired, in alternating runs.

::

    .venv/bin/python benchmarks/vs_ruff.py --ruff /work/ruffvenv/bin/ruff [--runs 5] [--jobs 2]
    .venv/bin/python benchmarks/vs_ruff.py --ruff RUFF --other-src /tmp/base/src   # a second tfpar-lint

The corpus is issue 30's: every ``.py`` of the installed ``keras`` package and of
``tensorflow/python/distribute`` (found without importing them), given to every tool as the same list
of files.  Commands, each a separate process, in the order A B A B ... (so that the machine's load,
shared with other work, hits both alike):

* tfpar-lint (this tree's ``src``): ``python -m tfpar_lint --no-cache -jN --exit-zero -q FILES``;
* ruff: ``RUFF check --no-cache --select ALL --exit-zero -q FILES`` (install it in a separate
  environment, not the project's);
* with ``--other-src``: the same tfpar-lint command with another ``src`` (a before/after pair).

Wall time, and CPU time of the whole process tree (``wait4``: user + system of the process and the
workers it waited for), per run; the load average (``/proc/loadavg``) before each run; medians, and
the ratio of the medians.  CPU seconds are what to compare on a shared machine; the ratio is taken
within the same session so that the load affects both.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def corpus() -> list[str]:
    files: list[str] = []
    for name, sub in (("keras", ()), ("tensorflow", ("python", "distribute"))):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit(f"{name} is not installed")
        base = Path(list(spec.submodule_search_locations)[0], *sub)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            files += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
    return files


def load() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            return " ".join(fh.read().split()[:3])
    except OSError:
        return "?"


def run(cmd: list[str], env: dict) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=str(ROOT))
    _, status, ru = os.wait4(proc.pid, 0)
    return time.perf_counter() - t0, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ruff", required=True, help="the ruff executable (a separate environment)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--other-src", help="a second tfpar-lint src folder to pair with this tree's")
    args = ap.parse_args(argv)
    files = corpus()
    lines = sum(Path(f).read_bytes().count(b"\n") for f in files)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFPAR_LINT_")}
    tfpar = [sys.executable, "-m", "tfpar_lint", "--no-cache", f"-j{args.jobs}", "--exit-zero", "-q", *files]
    cases = [("tfpar-lint", tfpar, dict(env, PYTHONPATH=str(ROOT / "src")))]
    if args.other_src:
        cases.append(("tfpar-lint (other src)", tfpar, dict(env, PYTHONPATH=str(Path(args.other_src).resolve()))))
    cases.append(("ruff --select ALL", [args.ruff, "check", "--no-cache", "--select", "ALL", "--exit-zero", "-q",
                                        *files], env))
    print(f"{len(files)} files, {lines:,} lines; {args.runs} runs of each, alternating; {os.cpu_count()} CPUs")
    got: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in cases}
    for i in range(args.runs):
        for name, cmd, e in cases:
            before = load()
            wall, cpu, rc = run(cmd, e)
            got[name].append((wall, cpu))
            print(f"run {i + 1} {name:24} wall {wall:6.2f} s  CPU {cpu:6.2f} s  exit {rc}  load before {before}",
                  flush=True)
    med = {n: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for n, v in got.items()}
    print(f"{'':26}{'wall s':>9}{'CPU s':>9}")
    for n, (w, c) in med.items():
        print(f"{n:26}{w:9.2f}{c:9.2f}")
    rw, rc = med["ruff --select ALL"]
    for n, (w, c) in med.items():
        if n.startswith("tfpar"):
            print(f"{n} / ruff: {w / rw:.2f}x wall, {c / rc:.2f}x CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
