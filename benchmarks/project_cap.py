"""How often whole-project analysis meets its cap on real code bases, what it costs in time, and
what the cap costs in findings (issue 28 item 5).

    python benchmarks/project_cap.py --tree before=/path/to/old/src --tree after=src [--nocap after] FOLDER...

Each FOLDER is a code base (a checkout); each is linted whole, as a user runs the tool on it:
``tfpar-lint --exit-zero --no-cache -j 2 .`` from the folder, with PYTHONPATH set to each ``--tree``'s
``src``.  ``--nocap NAME`` adds a run of that tree with the budget, the pool and the cap on files
read made unlimited (through a ``sitecustomize`` in a temporary folder: nothing in the product reads
such a setting).  Per code base and run: CPU seconds of the process and its workers (``os.wait4``),
whether the cap note was printed, and the number of findings; then the findings each run has that
the unlimited one lacks and the other way round.  Prints markdown for ``benchmarks/results.md``.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

NOTE = "whole-project analysis read"
UNLIMITED = """\
import tfpar_lint.semantic.project as _p
_p.BUDGET_BASE = 1 << 40
_p.POOL_MAX = 1 << 40
_p.MAX_MODULES = 1 << 30
"""


def cpu_run(folder: str, src: str, extra_path: str = "") -> tuple[float, bool, list[str]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (src, extra_path) if p))
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen([sys.executable, "-m", "tfpar_lint", "--exit-zero", "--no-cache", "-j", "2", "."],
                             cwd=folder, stdout=out, stderr=err, env=env, text=True)
        _pid, _status, ru = os.wait4(p.pid, 0)
        out.seek(0)
        err.seek(0)
        return ru.ru_utime + ru.ru_stime, NOTE in err.read(), sorted(x for x in out.read().splitlines() if x.strip())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", required=True, help="NAME=SRC: a tree's src folder")
    ap.add_argument("--nocap", help="NAME of a --tree to run once more with no cap")
    ap.add_argument("folders", nargs="+")
    args = ap.parse_args()
    trees = [t.split("=", 1) for t in args.tree]
    runs = [(name, str(Path(src).resolve()), "") for name, src in trees]
    tmp = None
    if args.nocap:
        tmp = tempfile.mkdtemp()
        Path(tmp, "sitecustomize.py").write_text(UNLIMITED)
        src = dict(trees)[args.nocap]
        runs.append((f"{args.nocap} unlimited", str(Path(src).resolve()), tmp))
    names = [r[0] for r in runs]
    print("| code base | " + " | ".join(f"{n}: CPU s / cap / findings" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    totals = {n: [0.0, 0, 0] for n in names}
    diffs: dict[str, list[str]] = {}
    for folder in args.folders:
        row = []
        got = {}
        for name, src, extra in runs:
            secs, capped, findings = cpu_run(folder, src, extra)
            got[name] = findings
            totals[name][0] += secs
            totals[name][1] += capped
            totals[name][2] += len(findings)
            row.append(f"{secs:.1f} / {'cap' if capped else '-'} / {len(findings)}")
        print(f"| {os.path.basename(os.path.normpath(folder))} | " + " | ".join(row) + " |", flush=True)
        if args.nocap:
            ref = set(got[names[-1]])
            for name in names[:-1]:
                mine = set(got[name])
                for line in sorted(ref - mine):
                    diffs.setdefault(name, []).append(f"only unlimited: {os.path.basename(folder)}: {line[:160]}")
                for line in sorted(mine - ref):
                    diffs.setdefault(name, []).append(f"only {name}: {os.path.basename(folder)}: {line[:160]}")
    print("| **total** | " + " | ".join(f"{t[0]:.1f} / {t[1]} of {len(args.folders)} / {t[2]}"
                                      for t in totals.values()) + " |")
    for name, lines in diffs.items():
        print(f"\n{name} against unlimited:")
        for line in lines:
            print(f"* {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
