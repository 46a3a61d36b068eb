"""``--verify`` on the runnable scripts with known truth: ``../realcode/runnable/RUNNABLE.tsv``
(files of the realcode set, read where they are) and its ``seeds/NNN_exK.py`` rows (code block K
of the seed document ``../shared/seeds/NNN_*.txt``, extracted at run time into a temporary folder).
Nothing is copied into the repository.

::

    PYTHONPATH=src .venv/bin/python benchmarks/verify_runnable.py --realcode /work/realcode [--seeds DIR]

Each script is verified on its own (``tfpar-lint --verify --devices cpu:2 --format json``); one line
per script: the truth (bad/good), the exit code, each finding's code, line and verdict, and whether
the row meets the bar (bad: a CONFIRMED or RUNTIME finding and exit 1; good: exit 0 and none).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def seed_block(seeds: str, prefix: str, n: int) -> str:
    (name,) = [f for f in os.listdir(seeds) if f.startswith(prefix + "_") and f.endswith(".txt")]
    with open(os.path.join(seeds, name), encoding="utf-8") as f:
        blocks = re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)
    return blocks[n - 1]


def rows(realcode: str, seeds: str, tmp: str):
    with open(os.path.join(realcode, "runnable", "RUNNABLE.tsv"), encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            rel = row["file"]
            m = re.match(r"seeds/(\d+)_ex(\d+)\.py$", rel)
            if m:
                path = os.path.join(tmp, f"seed{m.group(1)}_ex{m.group(2)}.py")
                with open(path, "w", encoding="utf-8") as out:
                    out.write(seed_block(seeds, m.group(1), int(m.group(2))))
            else:
                path = os.path.join(realcode, rel)
            yield rel, row["kind"], path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--realcode", default=os.path.join(os.path.dirname(ROOT), "realcode"))
    ap.add_argument("--seeds", default=os.path.join(os.path.dirname(ROOT), "shared", "seeds"))
    ap.add_argument("--timeout", default="180")
    ap.add_argument("--only", default="", help="substring of the rows to run")
    ap.add_argument("--select", default="", help="passed to tfpar-lint (e.g. TFP900: no static finding, so every "
                                                 "mistake must be seen at runtime, RUNTIME)")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    ok_rows = 0
    total = 0
    with tempfile.TemporaryDirectory(prefix="tfpar-runnable-") as tmp:
        for rel, kind, path in rows(args.realcode, args.seeds, tmp):
            if args.only and args.only not in rel:
                continue
            t0 = time.time()
            p = subprocess.run([sys.executable, "-m", "tfpar_lint", "--verify", "--devices", "cpu:2", "--no-cache",
                                "--no-config", "--timeout", args.timeout, "--format", "json",
                                *(["--select", args.select] if args.select else []), path],
                               capture_output=True, text=True, env=env, cwd=tmp)
            try:
                found = json.loads(p.stdout or "[]")
            except ValueError:
                found = []
            verdicts = [f"{d['code']}:{d['line']}:{(d.get('verification') or {}).get('status', '-')}" for d in found]
            seen = any((d.get("verification") or {}).get("status") in ("CONFIRMED", "RUNTIME") for d in found)
            good = (seen and p.returncode == 1) if kind == "bad" else (p.returncode == 0 and not seen)
            total += 1
            ok_rows += good
            print(f"{'ok  ' if good else 'MISS'} {kind:4} exit {p.returncode} {time.time() - t0:5.1f}s {rel}: "
                  f"{' '.join(verdicts) or 'no finding'}", flush=True)
            if not good:
                for ln in p.stderr.strip().splitlines()[-6:]:
                    print("      " + ln)
    print(f"{ok_rows}/{total} rows as their truth says")
    return 0 if ok_rows == total else 1


if __name__ == "__main__":
    sys.exit(main())
