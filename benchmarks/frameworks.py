"""Whole frameworks linted in project mode and per file; no E9xx on files Python compiles; two
parallel runs identical (issue 20).

    .venv/bin/python benchmarks/frameworks.py DIR [DIR ...] [--jobs 2] [--src SRC]

Each DIR is a framework's source tree (a snapshot outside this repository, e.g. keras-team/keras:
`git --git-dir=<mirror> archive HEAD | tar -x -C DIR`).  For each, in DIR as the working folder:

* `tfpar-lint --no-cache --exit-zero --output-format json -jN .` in project mode (the default) and
  with `--no-project`: wall time, CPU time (user + system of the process and its workers,
  `os.wait4`), peak RSS (`ru_maxrss`: the largest single process), findings and E9xx errors;
* every E9xx is checked with `compile()`: an E9xx on a file CPython compiles is a bogus error;
* the project-mode run twice more, both at once (the machine busier still), and the three JSON
  reports compared: they must be identical.

Prints a markdown table for benchmarks/results.md.  Standard library only.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def start(folder: str, src: str, jobs: int, extra: list[str]) -> tuple[subprocess.Popen, float]:
    cmd = [sys.executable, "-m", "tfpar_lint", "--no-cache", "--exit-zero", "--output-format", "json",
           f"-j{jobs}", *extra, "."]
    proc = subprocess.Popen(cmd, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONPATH=src))
    return proc, time.monotonic()


def finish(proc: subprocess.Popen, t0: float) -> dict:
    out = proc.stdout.read() if proc.stdout else b""
    _pid, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    if proc.stdout:
        proc.stdout.close()
    report = json.loads(out or b"[]")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "peak": ru.ru_maxrss * 1024,
            "rc": os.waitstatus_to_exitcode(status), "report": report}


def normalised(report: list) -> list:
    return sorted(json.dumps(f, sort_keys=True) for f in report)


def e9xx(folder: str, report: list) -> tuple[int, list[str]]:
    """(E9xx count, those on files CPython compiles)."""
    n, bogus = 0, []
    for f in report:
        code = f.get("code") or ""
        if not code.startswith("E9"):
            continue
        n += 1
        path = os.path.join(folder, f.get("filename") or f.get("path") or "")
        if not path.endswith(".py"):
            bogus.append(f"{code} {f.get('filename') or f.get('path')}: {f.get('message')}")
            continue
        try:
            compile(Path(path).read_bytes(), path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OSError):
            continue
        bogus.append(f"{code} {os.path.relpath(path, folder)}: {f.get('message')}")
    return n, bogus


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--src", default=str(REPO / "src"))
    args = ap.parse_args(argv)
    rows = []
    for d in args.dirs:
        folder = os.path.abspath(d)
        files = sum(1 for p in Path(folder).rglob("*") if p.suffix in (".py", ".ipynb"))
        size = sum(p.stat().st_size for p in Path(folder).rglob("*.py"))
        proj = finish(*start(folder, args.src, args.jobs, []))
        alone = finish(*start(folder, args.src, args.jobs, ["--no-project"]))
        a = start(folder, args.src, args.jobs, [])
        b = start(folder, args.src, args.jobs, [])
        ra, rb = finish(*a), finish(*b)
        same = normalised(proj["report"]) == normalised(ra["report"]) == normalised(rb["report"])
        n9, bogus = e9xx(folder, proj["report"])
        findings = sum(1 for f in proj["report"] if str(f.get("code", "")).startswith("TFP"))
        rows.append((os.path.basename(folder), files, size, proj, alone, findings, n9, bogus, same, ra, rb))
        print(f"{os.path.basename(folder)}: project {proj['wall']:.1f} s wall {proj['cpu']:.1f} s CPU, per file "
              f"{alone['wall']:.1f} s wall {alone['cpu']:.1f} s CPU; {findings} findings, {n9} E9xx, bogus {bogus}; "
              f"parallel runs identical: {same}", file=sys.stderr)
    print("| framework | files | .py MB | project: wall s | CPU s | peak MB | peak B per .py byte | per file "
          "(`--no-project`): wall s | CPU s | project ÷ per file (CPU) | findings | E9xx | E9xx on files Python "
          "compiles | 2 parallel runs (wall s) identical |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, files, size, proj, alone, findings, n9, bogus, same, ra, rb in rows:
        print(f"| {name} | {files} | {size / 1048576:.1f} | {proj['wall']:.1f} | {proj['cpu']:.1f} | "
              f"{proj['peak'] / 1048576:.0f} | {proj['peak'] / size:.1f} | {alone['wall']:.1f} | {alone['cpu']:.1f} | "
              f"{proj['cpu'] / max(alone['cpu'], 1e-9):.2f} | {findings} | {n9} | {len(bogus)} | "
              f"{ra['wall']:.0f} / {rb['wall']:.0f}: {'yes' if same else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
