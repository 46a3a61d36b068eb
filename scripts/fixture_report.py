"""Precision and recall of every rule on fixtures/ (the '# expect:' comments are the truth).

    .venv/bin/python scripts/fixture_report.py [--all]

Lints each fixture with the default rules plus its folder's own rule (as tests/test_fixtures.py
does; --all enables every rule everywhere; the bug zoo fixtures/zoo/ is left to scripts/zoo_report.py) and prints, per code, true positives, false positives,
false negatives, precision and recall, as a Markdown table.
"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from tfpar_lint.engine import lint_file
from tfpar_lint.expectations import expected_in_source, fixture_files
from tfpar_lint.registry import all_rules, default_codes

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    every = "--all" in sys.argv
    codes = [r.CODE for r in all_rules()]
    tp: dict[str, int] = defaultdict(int)
    fp: dict[str, int] = defaultdict(int)
    fn: dict[str, int] = defaultdict(int)
    files = fixture_files(ROOT / "fixtures", exclude_dirs=("zoo",))  # the zoo: scripts/zoo_report.py
    for path in files:
        expected = expected_in_source(path.read_text())
        enabled = set(codes) if every else set(default_codes()) | ({path.parent.name} & set(codes))
        expected = {(line, c) for line, c in expected if c in enabled}
        found = {(f.line, f.code) for f in lint_file(str(path), enabled=enabled).findings}
        for _, c in expected & found:
            tp[c] += 1
        for _, c in found - expected:
            fp[c] += 1
        for _, c in expected - found:
            fn[c] += 1
    print(f"{len(files)} fixture files; rules: {'all' if every else 'defaults + folder rule'}\n")
    print("| code | default | TP | FP | FN | precision | recall |")
    print("|---|---|---|---|---|---|---|")
    T = F = N = 0
    for r in all_rules():
        c = r.CODE
        t, f, n = tp[c], fp[c], fn[c]
        T, F, N = T + t, F + f, N + n
        prec = f"{t / (t + f):.2f}" if t + f else "-"
        rec = f"{t / (t + n):.2f}" if t + n else "-"
        print(f"| {c} | {'on' if r.DEFAULT_ENABLED else 'off'} | {t} | {f} | {n} | {prec} | {rec} |")
    print(f"| **all** | | {T} | {F} | {N} | {T / (T + F) if T + F else 0:.2f} | {T / (T + N) if T + N else 0:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
