"""Time tfpar-lint on the pathological inputs of issue 12, one file at a time.

::

    .venv/bin/python benchmarks/pathological.py [--timeout 300] [--only NAME]

Each input is the TFP101 program of the tests followed by the pathological
part, written to a temporary folder and linted with every rule on through
:func:`tfpar_lint.engine.lint_paths` (the supervised worker the CLI uses,
``-j1``, ``--file-timeout`` = ``--timeout``).  Prints one Markdown row per
input: size, wall seconds, and what came out (the finding codes, or the
per-file error, and how many expressions were made opaque: :mod:`tfpar_lint.deep`).
Wall time covers the whole analysis: reading, the guard, the parse, the rules.
The speed target of the issue: no input under 1 MB takes
over 5 s in the analysis; these are timings, not tests (tests/ asserts only
the contract: no hang, no lost results).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from tfpar_lint.engine import lint_paths  # noqa: E402
from tfpar_lint.output import error_code  # noqa: E402
from tfpar_lint.registry import all_rules  # noqa: E402

HEADER = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
with strategy.scope():
    model.compile(optimizer="sgd", loss="mse")
"""


def functions(n: int) -> str:
    """``n`` functions, each a training step in a broad try (TFP704's callers walk)."""
    parts = []
    for i in range(n):
        parts.append(f"def f{i}(x):\n    try: strategy.run(s)\n    except Exception: pass\n")
    return "".join(parts)


INPUTS = {
    "and-chain 7,057 terms": lambda: "z = " + " and ".join(["a"] * 7057) + "\n",
    "a + a + ... 600 terms": lambda: "z = " + " + ".join(["a"] * 600) + "\n",
    "a + a + ... 5,000 terms": lambda: "z = " + " + ".join(["a"] * 5000) + "\n",
    "500 nested lambdas": lambda: "z = " + "lambda: " * 500 + "1\n",
    "10,000 nested parentheses": lambda: "z = " + "(" * 10000 + "1" + ")" * 10000 + "\n",
    "a.b.b... 50,000 deep": lambda: "z = a" + ".b" * 50000 + "\n",
    "'\\\\\\r\\n' (backslash, CR LF)": lambda: "\\\r\n",
    "3,001 adjacent strings": lambda: "z = " + " ".join(["'x'"] * 3001) + "\n",
    "a + a + ... 5,000 terms, one per line in parentheses": lambda: "z = (\n" + " +\n".join(["    a"] * 5000) + "\n)\n",
    "a + a + ... 2,500 terms": lambda: "z = " + " + ".join(["a"] * 2500) + "\n",
    "a + a + ... 2,500 terms, one per line in parentheses": lambda: "z = (\n" + " +\n".join(["    a"] * 2500) + "\n)\n",
    "and-chain 50,000 terms": lambda: "z = " + " and ".join(["a"] * 50000) + "\n",
    "2,800 chains of 90 terms (a + a + ...)": lambda: ("z = " + " + ".join(["a"] * 90) + "\n") * 2800,
    "10,000 functions (TFP704)": lambda: functions(10000),
    "50 MB file": lambda: "x = 1\n" * (50 * 1024 * 1024 // 6 + 1),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    codes = [r.CODE for r in all_rules()]
    print("| input | size | wall s | result |")
    print("|---|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in INPUTS.items():
            if args.only and args.only not in name:
                continue
            path = os.path.join(tmp, "input.py")
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(HEADER + make())
            size = os.path.getsize(path)
            t0 = time.perf_counter()
            [res] = lint_paths([path], enabled=codes, jobs=1, timeout=args.timeout)
            wall = time.perf_counter() - t0
            if res.error is not None:
                out = f"{error_code(res.error)} {res.error.message}"
            else:
                out = ", ".join(sorted({f.code for f in res.findings})) or "clean"
            for note in res.notes:
                out += f"; note: {note.split(' too deep')[0]} opaque"
            print(f"| {name} | {size / 1024:,.0f} KB | {wall:.2f} | {out} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
