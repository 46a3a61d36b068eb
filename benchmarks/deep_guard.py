"""What the deep-expression guard (:mod:`tfpar_lint.deep`) costs and sees on real code.

::

    .venv/bin/python benchmarks/deep_guard.py [--libcst] [ROOT ...]

ROOT defaults to the installed ``keras/src`` and ``tensorflow/python`` trees.
For every ``.py`` file: the time of the trigger (:func:`deep.suspicious`),
whether it triggers, and, over every file, the highest expression in
libcst's nesting (:func:`deep.heights`; ``ast.parse`` and the heights are
timed too: what a triggered file pays).  Then the files the engine would
parse (the pre-filter passes them with every rule on): the guard's cost on
them against libcst's parse of the same files (``--libcst``; slow, minutes).
Prints Markdown.
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from tfpar_lint import deep  # noqa: E402
from tfpar_lint.engine import AnalysisOptions, candidate_rules  # noqa: E402
from tfpar_lint.registry import all_rules  # noqa: E402


def default_roots() -> list[str]:
    import importlib.util

    out = []
    for pkg, sub in (("keras", "src"), ("tensorflow", "python")):
        spec = importlib.util.find_spec(pkg)
        if spec and spec.submodule_search_locations:
            out.append(os.path.join(list(spec.submodule_search_locations)[0], sub))
    return out


def files(roots: list[str]) -> list[str]:
    out = []
    for root in roots:
        for dirpath, dirnames, names in os.walk(root):
            dirnames.sort()
            out.extend(os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".py"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("roots", nargs="*")
    ap.add_argument("--libcst", action="store_true", help="also time libcst on the files the engine parses")
    args = ap.parse_args()
    roots = args.roots or default_roots()
    paths = files(roots)
    rules = list(all_rules())
    options = AnalysisOptions(project=False)
    t_trigger = t_ast = t_heights = 0.0
    n_trig = n_bytes = 0
    worst: list[tuple[int, str]] = []
    hist = {k: 0 for k in (10, 20, 30, 40, 60, 100, 10**9)}
    parsed: list[str] = []
    sources = {}
    for p in paths:
        try:
            src = Path(p).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        n_bytes += len(src)
        t0 = time.perf_counter()
        trig = deep.suspicious(src)
        t_trigger += time.perf_counter() - t0
        n_trig += trig
        t0 = time.perf_counter()
        try:
            tree = ast.parse(src)
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            continue
        t1 = time.perf_counter()
        h = deep.heights(tree, deep._Lines(src))
        t2 = time.perf_counter()
        t_ast += t1 - t0
        t_heights += t2 - t1
        top = max((h[id(n)] for n in ast.walk(tree) if isinstance(n, ast.expr)), default=0)
        for k in hist:
            if top <= k:
                hist[k] += 1
                break
        worst.append((top, p))
        if candidate_rules(src, rules, options, None):
            parsed.append(p)
            sources[p] = (src, trig)
    worst.sort(reverse=True)
    print(f"roots: {', '.join(roots)}")
    print(f"{len(paths)} files, {n_bytes / 1e6:.1f} MB; trigger: {t_trigger:.3f} s over all files, "
          f"{n_trig} files trigger (TRIGGER_OPS={deep.TRIGGER_OPS}, MIN_SIZE={deep.MIN_SIZE}); "
          f"ast.parse {t_ast:.2f} s, heights {t_heights:.2f} s over all files")
    print()
    print("| highest expression (libcst levels) | files |")
    print("|---|---:|")
    lo = 0
    for k, v in hist.items():
        print(f"| {lo + 1}-{k if k < 10**9 else ''} | {v} |")
        lo = k
    print()
    print("highest: " + "; ".join(f"{h} {os.path.relpath(p, os.path.dirname(os.path.dirname(p)))}"
                                  for h, p in worst[:5]))
    # the files the engine parses: the guard's cost against libcst's parse
    g_trig = g_full = 0.0
    n_ptrig = 0
    for p in parsed:
        src, trig = sources[p]
        t0 = time.perf_counter()
        flagged = deep.flagged_lines(src)  # what deep.parse_module asks
        g_trig += time.perf_counter() - t0
        if flagged:
            n_ptrig += 1
            t0 = time.perf_counter()
            tree = deep.python_tree(src)
            deep.deep_spans(tree, deep._Lines(src), flagged)
            g_full += time.perf_counter() - t0
    print()
    print(f"files the pre-filter passes (every rule on): {len(parsed)}; {n_ptrig} trigger; "
          f"trigger {g_trig:.3f} s, ast.parse + heights of the triggered ones {g_full:.2f} s")
    if args.libcst:
        import libcst as cst

        from tfpar_lint.engine import lint_source

        out = {}
        codes = [r.CODE for r in rules]

        def run() -> None:
            t0 = time.perf_counter()
            for p in parsed:
                cst.parse_module(sources[p][0])
            out["t"] = time.perf_counter() - t0
            os.environ["TFPAR_LINT_DEEP"] = "off"  # the lint without the guard: its cost is measured above
            try:
                t0 = time.perf_counter()
                for p in parsed:
                    lint_source(sources[p][0], p, enabled=codes, options=options)
                out["lint"] = time.perf_counter() - t0
            finally:
                del os.environ["TFPAR_LINT_DEEP"]

        threading.stack_size(64 << 20)
        th = threading.Thread(target=run)
        th.start()
        th.join()
        t = out["t"]
        print(f"libcst.parse_module of the same {len(parsed)} files: {t:.1f} s; guard = "
              f"{100 * (g_trig + g_full) / t:.1f}% of it")
        print(f"lint_source (every rule, no project, guard off) of the same files: {out['lint']:.1f} s; guard = "
              f"{100 * (g_trig + g_full) / out['lint']:.1f}% of it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
