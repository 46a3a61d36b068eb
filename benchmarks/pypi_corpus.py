"""Measure the PyPI precision corpus: packages, files, lines, findings, precision, run times.

    PYTHONPATH=src .venv/bin/python benchmarks/pypi_corpus.py

Downloads (or re-uses, from the cache of tests/pypi_wheels.py) the pinned wheels of
tests/pypi_corpus/packages.tsv, extracts their tf.distribute files to a temporary folder, lints them with
the default rules and with --select ALL (one CLI process each, all cores), and compares the findings with
tests/pypi_corpus/expected.tsv. The times are wall-clock seconds on this machine, for information only.
"""
from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pypi_wheels import build, cache_dir, finding_key, lint, load_expected  # noqa: E402


def main() -> int:
    """Print the corpus measurements (packages, files, lines, findings, precision, run times)."""
    from tfpar_lint.registry import default_codes

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = build(Path(tmp))
        t_build = time.perf_counter() - t0
        expected = {e.key: e for e in load_expected()}
        print(f"cache: {cache_dir()}")
        for pkg in corpus.packages:
            files = [rel for (p, rel) in corpus.files if p == pkg]
            lines = sum(n for (p, _), n in corpus.files.items() if p == pkg)
            print(f"{pkg.name}=={pkg.version}: {len(files)} files, {lines} lines "
                  f"(of {corpus.extracted[pkg.name]} .py files extracted)")
        print(f"total: {len(corpus.packages)} packages, {len(corpus.files)} files, {corpus.lines} lines; "
              f"download/extract {t_build:.2f} s")
        for select_all in (False, True):
            t = time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            rc, entries = lint(corpus, select_all)
            dt = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            keys = [finding_key(corpus, e) for e in entries if not e.get("error")]
            errors = [e for e in entries if e.get("error")]
            tp = sum(1 for k in keys if k in expected and expected[k].verdict == "TP")
            fp_known = sum(1 for k in keys if k in expected and expected[k].verdict == "FP")
            new = [k for k in keys if k not in expected]
            want = {k for k, e in expected.items() if select_all or e.code in default_codes()}
            gone = sorted(want - set(keys))
            prec = f"{tp / len(keys):.0%}" if keys else "n/a (no finding)"
            print(f"{'--select ALL' if select_all else 'default rules'}: exit {rc}, {len(keys)} findings, "
                  f"{len(errors)} file errors, {tp} accepted true bugs, {fp_known} known false positives, "
                  f"{len(new)} untriaged, {len(gone)} expected but not reported; precision {prec}; "
                  f"lint {dt:.2f} s wall, {cpu:.2f} s CPU")
            for k in new:
                print("  untriaged:", "\t".join(map(str, k)))
            for k in gone:
                print("  not reported:", "\t".join(map(str, k)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
