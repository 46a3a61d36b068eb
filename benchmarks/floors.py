"""Floors for benchmarks/run.py: what any linter built on the same parser must pay.

::

    python benchmarks/floors.py ast       FILELIST   # ast.parse of every file
    python benchmarks/floors.py cst       FILELIST   # libcst.parse_module of every file
    python benchmarks/floors.py semantic  FILELIST   # libcst parse + tfpar_lint.semantic.Module
                                                     # (with tfpar-lint's GC thresholds, as it runs)
    python benchmarks/floors.py plugin    FILELIST   # flake8 plugin cost on files the pre-filter rejects
    python benchmarks/floors.py subset    FILELIST   # print the files the pre-filter passes

Runs in one process (-j1), reads FILELIST (one path per line) and prints one
JSON object on stdout with in-process totals (seconds of wall time summed
over the files, by phase).  The process's own wall time, CPU time and peak
RSS are measured by run.py around it, so start-up is counted the same way as
for the linters.
"""
from __future__ import annotations

import json
import sys
import time


def _read(path: str) -> str:
    with open(path, "rb") as fh:
        data = fh.read()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8", errors="replace")


def floor_ast(files: list[str]) -> dict:
    import ast

    parse = 0.0
    errors = 0
    for f in files:
        src = _read(f)
        t = time.perf_counter()
        try:
            ast.parse(src, f)
        except (SyntaxError, ValueError, RecursionError):
            errors += 1
        parse += time.perf_counter() - t
    return {"files": len(files), "errors": errors, "parse_s": parse}


def floor_cst(files: list[str], semantic: bool) -> dict:
    import libcst as cst

    if semantic:
        from tfpar_lint.semantic import Module

        # like for like: tfpar-lint lints with these GC thresholds (engine.lint_paths)
        try:
            from tfpar_lint.engine import GC_THRESHOLD
        except ImportError:
            GC_THRESHOLD = None
        if GC_THRESHOLD:
            import gc

            gc.set_threshold(*GC_THRESHOLD)
    parse = build = 0.0
    errors = 0
    for f in files:
        src = _read(f)
        t0 = time.perf_counter()
        try:
            tree = cst.parse_module(src)
        except Exception:  # syntax errors, too deep nesting: count, go on
            errors += 1
            parse += time.perf_counter() - t0
            continue
        t1 = time.perf_counter()
        parse += t1 - t0
        if semantic:
            try:
                Module(tree, src, f)
            except RecursionError:
                errors += 1
            build += time.perf_counter() - t1
    return {"files": len(files), "errors": errors, "parse_s": parse, "build_s": build}


def plugin_cost(files: list[str], repeats: int = 5) -> dict:
    """Seconds the flake8 plugin adds on files the engine's pre-filter rejects.

    flake8 hands a plugin the file as a list of lines (and an ``ast`` it has
    parsed anyway for pyflakes); the time measured is ``Plugin(...).run()``
    exhausted, best of ``repeats`` per file (after one warm-up call that
    imports the engine).
    """
    from tfpar_lint import engine
    from tfpar_lint.engine import AnalysisOptions, _rules_for, candidate_rules
    from tfpar_lint.flake8_plugin import Plugin

    rules = _rules_for(Plugin._codes())  # the plugin runs every rule (flake8 selects)
    opts = AnalysisOptions()
    rejected: list[tuple[str, list[str]]] = []
    stage2: set[str] = set()  # rejected only by the second stage (markers in comments/docstrings only)
    first_stage = getattr(engine, "_marker_rules", None)
    for f in files:
        src = _read(f)
        if not candidate_rules(src, rules, opts, f):  # with the path: whole-project markers count
            rejected.append((f, src.splitlines(keepends=True)))
            if first_stage is not None and first_stage(src, rules, opts):
                stage2.add(f)
    if rejected:  # warm-up: the first call imports the engine and the rules
        list(Plugin(None, rejected[0][1], rejected[0][0]).run())
    per_file: list[float] = []
    per_file2: list[float] = []
    reported = 0
    for f, lines in rejected:
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            out = list(Plugin(None, lines, f).run())
            best = min(best, time.perf_counter() - t)
        reported += bool(out)
        (per_file2 if f in stage2 else per_file).append(best)

    def stats(xs: list[float], prefix: str) -> dict:
        xs = sorted(xs)
        n = len(xs)
        return {
            f"{prefix}rejected": n,
            f"{prefix}mean_ms": 1000 * sum(xs) / n if n else 0.0,
            f"{prefix}median_ms": 1000 * xs[n // 2] if n else 0.0,
            f"{prefix}p99_ms": 1000 * xs[min(n - 1, int(n * 0.99))] if n else 0.0,
            f"{prefix}max_ms": 1000 * xs[-1] if n else 0.0,
            f"{prefix}over_1ms": sum(1 for x in xs if x >= 0.001),
        }

    out = {"files": len(files), "max_lines": max((len(lines) for _, lines in rejected), default=0),
           "reported": reported}  # reported must be 0: a rejected file yields nothing
    out.update(stats(per_file + per_file2, ""))  # every rejected file
    out.update(stats(per_file, "stage1_"))  # rejected by the substring test
    out.update(stats(per_file2, "stage2_"))  # passed it, rejected by the comment/docstring test
    return out


def subset(files: list[str]) -> list[str]:
    """The files tfpar-lint's pre-filter passes to the parser (default rules and options)."""
    from tfpar_lint.engine import AnalysisOptions, _rules_for, candidate_rules, read_source

    rules = _rules_for(None)
    opts = AnalysisOptions()
    out = []
    for f in files:
        src, _err = read_source(f)
        if src is not None and candidate_rules(src, rules, opts):
            out.append(f)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("ast", "cst", "semantic", "plugin", "subset"):
        sys.stderr.write(__doc__ or "")
        return 2
    what, listfile = argv
    with open(listfile, encoding="utf-8") as fh:
        files = [line.rstrip("\n") for line in fh if line.strip()]
    if what == "subset":
        sys.stdout.write("".join(f + "\n" for f in subset(files)))
        return 0
    t = time.perf_counter()
    if what == "ast":
        out = floor_ast(files)
    elif what == "plugin":
        out = plugin_cost(files)
    else:
        out = floor_cst(files, semantic=(what == "semantic"))
    out["what"] = what
    out["in_process_s"] = time.perf_counter() - t
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
