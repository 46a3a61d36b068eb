"""Where tfpar-lint's time goes, phase by phase, in one process (-j1).

::

    python benchmarks/phases.py [--step K] [--profile] [FILELIST]

FILELIST defaults to the benchmark corpus (every .py of tensorflow, keras,
tf_keras, plus fixtures/); ``--step K`` takes every K-th file (quicker
iterations).  Prints wall and CPU seconds of: reading, the pre-filter, the
relevance stage (``tfpar_lint.relevance``; ``--no-relevance`` leaves it out), the syntax check of
the files the pre-filter or the relevance stage leave (Python's parser), the libcst parse, the semantic model (the one traversal), the rules, positions
and noqa, for the files the pre-filter passes.  CPU seconds
(``time.process_time``) are what to compare on a shared machine.
``--profile`` prints the top of a cProfile of the semantic-model build.

Used for the before/after numbers in benchmarks/optimisations.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


class Clock:
    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)

    def run(self, phase: str, fn, *a, **k):
        w, c = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **k)
        finally:
            self.wall[phase] += time.perf_counter() - w
            self.cpu[phase] += time.process_time() - c


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("filelist", nargs="?")
    ap.add_argument("--step", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--no-relevance", action="store_true", help="leave the relevance stage out (as before it)")
    args = ap.parse_args(argv)
    if args.filelist:
        files = [l.strip() for l in open(args.filelist, encoding="utf-8") if l.strip()]
    else:
        from run import build_corpus

        files, _ = build_corpus(smoke=False)
    files = files[:: args.step]

    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from tfpar_lint import relevance
    from tfpar_lint.engine import AnalysisOptions, _rules_for, _syntax_check, candidate_rules, read_source
    from tfpar_lint.semantic import Module

    rules = _rules_for(None)
    opts = AnalysisOptions()
    clk = Clock()
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
    parsed = lines = nfind = passed = 0
    t0w, t0c = time.perf_counter(), time.process_time()
    for f in files:
        src, err = clk.run("read", read_source, f)
        if src is None:
            continue
        rs = clk.run("prefilter", candidate_rules, src, rules, opts)
        was = bool(rs)
        if rs:
            passed += 1
            if not args.no_relevance:
                rs = clk.run("relevance", relevance.relevant_rules, src, rs, opts)
        if not rs:
            clk.run("syntax", _syntax_check, src, f, was)
            continue
        try:
            tree = clk.run("parse", cst.parse_module, src)
        except Exception:
            continue
        parsed += 1
        lines += src.count("\n")
        if prof is not None:
            prof.enable()
        m = clk.run("semantic", Module, tree, src, f)
        if prof is not None:
            prof.disable()
        reps = clk.run("rules", lambda: [(r, x) for r in rs for x in r(m).check()])
        if reps:
            nfind += len(reps)
            clk.run("positions", lambda: MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider))
    tw, tc = time.perf_counter() - t0w, time.process_time() - t0c
    print(f"{len(files)} files, {passed} passed the pre-filter, {parsed} parsed by libcst ({lines:,} lines), "
          f"{nfind} reports")
    print(f"{'phase':<10} {'wall s':>8} {'CPU s':>8}")
    for ph in ("read", "prefilter", "relevance", "syntax", "parse", "semantic", "rules", "positions"):
        print(f"{ph:<10} {clk.wall[ph]:8.2f} {clk.cpu[ph]:8.2f}")
    print(f"{'total':<10} {tw:8.2f} {tc:8.2f}")
    if prof is not None:
        import pstats

        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
