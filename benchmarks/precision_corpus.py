"""Precision on whole code bases: lint each checkout as a project, with default settings.

    python benchmarks/precision_corpus.py --trees /work/corpus/trees [--commits benchmarks/precision_commits.tsv]

``--trees`` holds one folder per code base (``owner+repo``); ``--commits`` is a TSV with the
columns ``repo`` (``owner/repo``), ``commit``, ``files``, ``lines`` (``--count`` fills ``files`` and
``lines`` in from the checkouts: ``.py`` and ``.ipynb`` files, lines of ``.py`` files plus the lines
of notebooks' code cells).  Each checkout is linted the way a user runs the tool on their project,
from the checkout's own folder so that its ``pyproject.toml`` is read:

    python -m tfpar_lint --exit-zero --no-cache --output-format json .

Every finding and every per-file error (``E9xx``) goes to ``--out`` (a TSV: repo, commit, path,
line, code, message, verdict, reason).  Verdicts already written there are kept for the same
repo, commit, path, line and code, so the triage survives a re-run; a finding with no verdict yet
gets an empty one.  Verdicts: ``true`` / ``false`` / ``unsure`` for findings, ``bogus`` /
``genuine`` for E9xx records.  Prints the counts: findings, verdicts, precision =
true / (true + false), E9xx by code and verdict, and a table of the code bases.

``--only owner/repo`` (repeatable) re-lints just those code bases (the others' rows are kept).
``--linter`` replaces the command (default: this interpreter with ``src/`` of this checkout first
on ``PYTHONPATH``).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ["repo", "commit", "path", "line", "code", "message", "verdict", "reason"]
FINDING_VERDICTS = ("true", "false", "unsure")
ERROR_VERDICTS = ("bogus", "genuine")


def tree_dir(trees: Path, repo: str) -> Path:
    return trees / repo.replace("/", "+")


def read_commits(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return [row for row in csv.DictReader(f, delimiter="\t") if row.get("repo")]


def write_tsv(path: Path, fields: list[str], rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, delimiter="\t", lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if row.get(k) is None else str(row.get(k))).replace("\t", " ").replace("\n", " ")
                        for k in fields})


def count_tree(root: Path) -> tuple[int, int]:
    """(files, lines): .py and .ipynb files below root; .py lines plus notebook code-cell lines."""
    files = lines = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = Path(dirpath, name)
            if name.endswith(".py"):
                files += 1
                try:
                    lines += p.read_bytes().count(b"\n")
                except OSError:
                    pass
            elif name.endswith(".ipynb"):
                files += 1
                try:
                    nb = json.loads(p.read_text(encoding="utf-8", errors="replace"))
                    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
                        if isinstance(cell, dict) and cell.get("cell_type") == "code":
                            src = cell.get("source", "")
                            text = "".join(src) if isinstance(src, list) else str(src)
                            lines += text.count("\n") + (1 if text and not text.endswith("\n") else 0)
                except (OSError, ValueError):
                    pass
    return files, lines


def default_linter() -> list[str]:
    return [sys.executable, "-m", "tfpar_lint"]


def lint(checkout: Path, linter: list[str], timeout: float) -> tuple[list[dict], str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = linter + ["--exit-zero", "--no-cache", "--output-format", "json", "."]
    try:
        proc = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [], f"timed out after {timeout:.0f} s"
    try:
        data = json.loads(proc.stdout or "[]")
    except ValueError:
        return [], f"exit {proc.returncode}, output not JSON: {proc.stderr.strip()[-300:]}"
    note = "" if proc.returncode in (0, 2) else f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
    return data, note


def record_path(item: dict) -> str:
    path = item.get("path") or item.get("filename") or ""
    if path.startswith("./"):
        path = path[2:]
    cell = item.get("cell")
    if cell not in (None, ""):
        path = f"{path}:cell_{cell}"
    return path


def key(row: dict) -> tuple:
    return (row["repo"], row["commit"], row["path"], str(row["line"]), row["code"])


def is_error(row: dict) -> bool:
    return row["code"].startswith("E9")


def summarise(rows: list[dict], commits: list[dict]) -> str:
    out = []
    findings = [r for r in rows if not is_error(r)]
    errors = [r for r in rows if is_error(r)]
    verdicts = Counter(r["verdict"] or "untriaged" for r in findings)
    tp, fp = verdicts.get("true", 0), verdicts.get("false", 0)
    out.append(f"code bases: {len(commits)}")
    out.append(f"findings: {len(findings)}  " + "  ".join(f"{k}: {verdicts.get(k, 0)}" for k in
                                                            (*FINDING_VERDICTS, "untriaged")))
    out.append("precision = true/(true+false): " + (f"{tp / (tp + fp):.3f} ({tp}/{tp + fp})" if tp + fp else "n/a"))
    by_code = Counter(r["code"] for r in findings)
    out.append("findings by code: " + ", ".join(f"{c} {n}" for c, n in sorted(by_code.items())))
    ev = Counter((r["code"], r["verdict"] or "untriaged") for r in errors)
    out.append(f"E9xx: {len(errors)}" + ("  " + ", ".join(f"{c} {v}: {n}" for (c, v), n in sorted(ev.items()))
                                         if ev else ""))
    per_repo = Counter(r["repo"] for r in findings)
    per_repo_err = Counter(r["repo"] for r in errors)
    out.append("")
    out.append("| code base | commit | files | lines | findings | E9xx |")
    out.append("|---|---|---:|---:|---:|---:|")
    for c in commits:
        out.append(f"| {c['repo']} | `{c['commit'][:12]}` | {c.get('files', '')} | {c.get('lines', '')} | "
                   f"{per_repo.get(c['repo'], 0)} | {per_repo_err.get(c['repo'], 0)} |")
    return "\n".join(out)


def markdown_tables(rows: list[dict]) -> str:
    """The per-finding triage table and the E9xx table, for benchmarks/precision.md."""
    out = ["| code base | commit | file:line | code | verdict | reason |", "|---|---|---|---|---|---|"]
    for r in rows:
        if not is_error(r):
            out.append(f"| {r['repo']} | `{r['commit'][:12]}` | `{r['path']}:{r['line']}` | {r['code']} | "
                       f"{r['verdict'] or '?'} | {r['reason'].replace('|', '/')} |")
    out += ["", "| code base | commit | file:line | code | verdict | reason |", "|---|---|---|---|---|---|"]
    for r in rows:
        if is_error(r):
            out.append(f"| {r['repo']} | `{r['commit'][:12]}` | `{r['path']}:{r['line']}` | {r['code']} | "
                       f"{r['verdict'] or '?'} | {r['reason'].replace('|', '/')} |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", type=Path, default=Path("/work/corpus/trees"))
    ap.add_argument("--commits", type=Path, default=ROOT / "benchmarks" / "precision_commits.tsv")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "precision_findings.tsv")
    ap.add_argument("--linter", help="command that runs tfpar-lint (default: this Python, -m tfpar_lint)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per code base")
    ap.add_argument("--only", action="append", default=[], help="lint only this owner/repo (repeatable)")
    ap.add_argument("--count", action="store_true", help="fill the files and lines columns of --commits first")
    ap.add_argument("--summary-only", action="store_true", help="lint nothing: print the counts of --out")
    ap.add_argument("--markdown", action="store_true", help="with --summary-only: also print the triage tables")
    args = ap.parse_args(argv)

    commits = read_commits(args.commits)
    if args.count:
        for c in commits:
            c["files"], c["lines"] = count_tree(tree_dir(args.trees, c["repo"]))
        write_tsv(args.commits, ["repo", "commit", "files", "lines"], commits)

    old: list[dict] = []
    if args.out.exists():
        with args.out.open(newline="") as f:
            old = list(csv.DictReader(f, delimiter="\t"))
    triage = {key(r): (r.get("verdict", ""), r.get("reason", "")) for r in old}

    if args.summary_only:
        print(summarise(old, commits))
        if args.markdown:
            print()
            print(markdown_tables(old))
        return 0

    linter = shlex.split(args.linter) if args.linter else default_linter()
    only = set(args.only)
    rows: list[dict] = [r for r in old if only and r["repo"] not in only]
    for c in commits:
        if only and c["repo"] not in only:
            continue
        checkout = tree_dir(args.trees, c["repo"])
        if not checkout.is_dir():
            print(f"{c['repo']}: no checkout at {checkout}", file=sys.stderr)
            continue
        t = time.perf_counter()
        items, note = lint(checkout, linter, args.timeout)
        n = 0
        for item in items:
            row = {"repo": c["repo"], "commit": c["commit"], "path": record_path(item),
                   "line": item.get("line", ""), "code": item.get("code", ""),
                   "message": item.get("message", "")}
            row["verdict"], row["reason"] = triage.get(key(row), ("", ""))
            rows.append(row)
            n += 1
        print(f"{c['repo']}: {n} records, {time.perf_counter() - t:.1f} s{'  ' + note if note else ''}",
              file=sys.stderr)
    order = {c["repo"]: i for i, c in enumerate(commits)}
    rows.sort(key=lambda r: (order.get(r["repo"], 1 << 30), r["path"], int(r["line"] or 0) if str(r["line"]).isdigit()
                             else 0, r["code"]))
    kept = {key(r) for r in rows}
    lost = [k for k, v in triage.items() if v[0] and k not in kept and (not only or k[0] in only)]
    if lost:
        print(f"{len(lost)} triaged rows no longer reported (dropped): "
              + "; ".join(f"{k[0]} {k[2]}:{k[3]} {k[4]}" for k in lost[:10]), file=sys.stderr)
    write_tsv(args.out, FIELDS, rows)
    print(summarise(rows, commits))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
