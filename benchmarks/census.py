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
commit.  The raw lines go to ``--raw DIR`` (one file per realcode set and per code base) when given;
the run asks the linter for the questions that got a kind too (``TFPAR_CENSUS_ANSWERED=1``, where the
linter knows it), so that the raw lines list every question asked.

``--asked-by RAWDIR`` counts only the questions that the run whose raw lines are in RAWDIR asked
(answered or not): an older linter, whose census asked more questions (every receiver in a replica
function, every argument handed to one), is then counted on the questions the newer census asks,
at the same places of the same code."""
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


ANSWERED = "answered"


def run(linter: list[str], cwd: str, paths: list[str], prefix: str = "") -> list[dict]:
    env = dict(os.environ, TFPAR_CENSUS_ANSWERED="1")
    r = subprocess.run(linter + ["--explain-silence", "--no-cache"] + paths, cwd=cwd, capture_output=True, text=True,
                       env=env)
    out = []
    for line in r.stdout.splitlines():
        m = LINE.match(line)
        if m:
            d = m.groupdict()
            d["path"] = prefix + os.path.normpath(d["path"])
            d["key"] = f"{d['path']}:{d['line']}:{d['col']}:{d['role']}"
            out.append({**d, "raw": line})
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


def _parse_raw(path: str) -> list[dict]:
    out = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if m:
                d = m.groupdict()
                d["key"] = f"{d['path']}:{d['line']}:{d['col']}:{d['role']}"
                out.append({**d, "raw": line.rstrip("\n")})
    return out


def _write_raw(raw: str, name: str, got: list[dict]) -> None:
    os.makedirs(raw, exist_ok=True)
    with open(os.path.join(raw, name + ".txt"), "w") as f:
        f.write("".join(x["raw"] + "\n" for x in got))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--realcode", default=None)
    ap.add_argument("--corpus", default=None, help="folder of checkouts, one per code base (owner+repo)")
    ap.add_argument("--commits", default=None, help="owner/repo<TAB>commit lines of the corpus")
    ap.add_argument("--linter", default=f"env PYTHONPATH={os.path.join(REPO, 'src')} {sys.executable} -m tfpar_lint")
    ap.add_argument("--label", default="after")
    ap.add_argument("--write", default=None)
    ap.add_argument("--raw", default=None, help="write the raw lines here (one file per realcode set and code base)")
    ap.add_argument("--from-raw", default=None, help="count the raw lines of an earlier run instead of running")
    ap.add_argument("--asked-by", default=None,
                    help="count only the questions the run whose raw lines are in this folder asked")
    ap.add_argument("--commit", default=None, help="the linter's commit, for the table (default: this checkout's)")
    args = ap.parse_args()
    linter = shlex.split(args.linter)
    runs: dict[str, list[dict]] = {}  # raw file name -> lines
    t0 = time.time()
    if args.from_raw:
        for fn in sorted(os.listdir(args.from_raw)):
            if fn.endswith(".txt"):
                runs[fn[:-4]] = _parse_raw(os.path.join(args.from_raw, fn))
    else:
        if args.realcode:
            for name, sub_runs in realcode_sets(args.realcode).items():
                got = []
                for cwd, paths in sub_runs:
                    got += run(linter, cwd, paths, prefix=os.path.basename(cwd) + "/")
                runs[f"realcode-{name}"] = got
        if args.corpus:
            for name in sorted(os.listdir(args.corpus)):
                d = os.path.join(args.corpus, name)
                if os.path.isdir(d):
                    runs[f"corpus+{name}"] = run(linter, d, ["."])
                    sys.stderr.write(f"{name}: {len(runs[f'corpus+{name}'])} lines, {time.time() - t0:.0f} s\n")
        if args.raw:
            for name, got in runs.items():
                _write_raw(args.raw, name, got)
    elapsed = time.time() - t0
    asked_note = ""
    if args.asked_by:
        for name in list(runs):
            p = os.path.join(args.asked_by, name + ".txt")
            keys = {x["key"] for x in _parse_raw(p)} if os.path.exists(p) else set()
            runs[name] = [x for x in runs[name] if x["key"] in keys]
        asked_note = (f" Counted on the questions the census of `{args.asked_by}` asks (same place, same role), "
                      f"answered or not.")
    groups: dict[str, list[dict]] = {}
    n_corpus = sum(1 for n in runs if n.startswith("corpus+"))
    for name, got in runs.items():
        lost = [x for x in got if x["reason"] != ANSWERED]
        col = name.replace("realcode-", "realcode ") if name.startswith("realcode-") else \
            f"corpus ({n_corpus} code bases)"
        groups.setdefault(col, []).extend(lost)
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
    commit = args.commit
    dirty = ""
    if commit is None:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "src"], capture_output=True,
                               text=True).stdout.strip()
    table = "\n".join(lines)
    how = f"counted from the raw lines in `{args.from_raw}`" if args.from_raw else f"`benchmarks/census.py` ({elapsed:.0f} s)"
    section = (f"## {args.label}\n\ntfpar-lint at {commit}{' (with uncommitted changes)' if dirty else ''}, "
               f"{how}.{asked_note} By role: {role_line}.\n\n{table}\n")
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
