#!/usr/bin/env python3
"""The census of lost values over real code: ``tfpar-lint --explain-silence`` run on the labelled
real-code sets (v1, v2, v3: each case folder linted as a project) and on a corpus of real code
bases that use ``tf.distribute`` (each checkout linted from its root, as a user runs the tool),
counted by reason.

usage:
  benchmarks/census.py --realcode /work/realcode --corpus /work/corpus/trees \\
      [--linter "python -m tfpar_lint"] [--label before|after] [--write benchmarks/census.md]

``--write`` adds (or replaces) the section of that label in the markdown file: one table, the
questions that got no kind per reason, for the realcode sets and the corpus, with the command and
commit.  The raw lines go to ``--raw DIR`` (one file per code base) when given."""
from __future__ import annotations

import argparse
import collections
import os
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<role>[^:]+): (?P<reason>[^:]+): `")


def run(linter: list[str], cwd: str, paths: list[str]) -> list[dict]:
    r = subprocess.run(linter + ["--explain-silence", "--no-cache"] + paths, cwd=cwd, capture_output=True, text=True)
    out = []
    for line in r.stdout.splitlines():
        m = LINE.match(line)
        if m:
            out.append({**m.groupdict(), "raw": line})
    if r.returncode not in (0, 1):
        sys.stderr.write(f"{cwd}: exit {r.returncode}: {r.stderr[-500:]}\n")
    return out


def realcode_sets(root: str) -> dict[str, list[tuple[str, list[str]]]]:
    """set name -> [(folder to run in, paths)]"""
    sets = {}
    for name in ("v1", "v2", "v3"):
        base = os.path.join(root, name)
        runs = []
        for sub in ("cases", "variants", "xproj"):
            d = os.path.join(base, sub)
            if os.path.isdir(d):
                runs.append((d, ["."]))
        if runs:
            sets[name] = runs
    return sets


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--realcode", default=None)
    ap.add_argument("--corpus", default=None, help="folder of checkouts, one per code base (owner+repo)")
    ap.add_argument("--commits", default=None, help="owner/repo<TAB>commit lines of the corpus")
    ap.add_argument("--linter", default=f"env PYTHONPATH={os.path.join(REPO, 'src')} {sys.executable} -m tfpar_lint")
    ap.add_argument("--label", default="after")
    ap.add_argument("--write", default=None)
    ap.add_argument("--raw", default=None)
    args = ap.parse_args()
    linter = shlex.split(args.linter)
    groups: dict[str, list[dict]] = {}
    t0 = time.time()
    if args.realcode:
        for name, runs in realcode_sets(args.realcode).items():
            got = []
            for cwd, paths in runs:
                got += run(linter, cwd, paths)
            groups[f"realcode {name}"] = got
    corpus_names = []
    if args.corpus:
        allc = []
        for name in sorted(os.listdir(args.corpus)):
            d = os.path.join(args.corpus, name)
            if not os.path.isdir(d):
                continue
            got = run(linter, d, ["."])
            corpus_names.append(name)
            allc += got
            if args.raw:
                os.makedirs(args.raw, exist_ok=True)
                with open(os.path.join(args.raw, name + ".txt"), "w") as f:
                    f.write("\n".join(x["raw"] for x in got) + "\n")
        groups[f"corpus ({len(corpus_names)} code bases)"] = allc
    elapsed = time.time() - t0
    reasons = collections.Counter()
    for g in groups.values():
        reasons.update(x["reason"] for x in g)
    order = [r for r, _ in reasons.most_common()]
    cols = list(groups)
    lines = ["| reason | " + " | ".join(cols) + " | total |", "|---|" + "---:|" * (len(cols) + 1)]
    for r in order:
        counts = [sum(1 for x in groups[c] if x["reason"] == r) for c in cols]
        lines.append(f"| {r} | " + " | ".join(str(n) for n in counts) + f" | {sum(counts)} |")
    totals = [len(groups[c]) for c in cols]
    lines.append("| **all** | " + " | ".join(str(n) for n in totals) + f" | {sum(totals)} |")
    roles = collections.Counter()
    for g in groups.values():
        roles.update(x["role"] for x in g)
    role_line = "; ".join(f"{r} {n}" for r, n in roles.most_common())
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "src"], capture_output=True,
                           text=True).stdout.strip()
    table = "\n".join(lines)
    section = (f"## {args.label}\n\ntfpar-lint at {commit}{' (with uncommitted changes)' if dirty else ''}, "
               f"`benchmarks/census.py` ({elapsed:.0f} s). By role: {role_line}.\n\n{table}\n")
    print(section)
    if args.write:
        text = open(args.write).read() if os.path.exists(args.write) else ""
        pat = re.compile(rf"^## {re.escape(args.label)}\n.*?(?=^## |\Z)", re.S | re.M)
        if pat.search(text):
            text = pat.sub(section + "\n", text)
        else:
            text = text.rstrip("\n") + "\n\n" + section
        with open(args.write, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
