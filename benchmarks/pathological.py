"""Time tfpar-lint on the pathological inputs of issue 12, one file at a time.

::

    .venv/bin/python benchmarks/pathological.py [--timeout 300] [--only NAME] [--split]

Each input is the TFP101 program of the tests followed by the pathological
part, written to a temporary folder and linted with every rule on through
:func:`tfpar_lint.engine.lint_paths` (the supervised worker the CLI uses,
``-j1``, ``--file-timeout`` = ``--timeout``).  Prints one Markdown row per
input: size, wall seconds, and what came out (the finding codes, or the
per-file error, and how many expressions were made opaque: :mod:`tfpar_lint.deep`).
Wall time covers the whole analysis: reading, the guard, the parse, the rules;
``--split`` adds libcst's parse and the analysis after it, timed in this process.
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


# -- large, realistic but hostile files (each under 1 MB): every one has findings whose number
# the tests check on scaled-down versions (tests/test_large_inputs.py)

def methods(n_classes: int = 300, n_methods: int = 40) -> str:
    """Classes whose methods call each other (``self.mJ()``); ``strategy.run(self.m0)`` reaches the
    last method, which sets the global seed: one TFP401 per class."""
    out = []
    for c in range(n_classes):
        out.append(f"class Trainer{c}:\n    def __init__(self):\n        self.strategy = strategy\n")
        for j in range(n_methods):
            nxt = f"self.m{j + 1}(x) + self.m{max(j - 1, 0)}(x)" if j + 1 < n_methods else "x"
            body = "        tf.random.set_seed(1)\n" if j + 1 == n_methods else ""
            out.append(f"    def m{j}(self, x):\n{body}        return {nxt}\n")
        out.append("    def train(self, x):\n        return self.strategy.run(self.m0, args=(x,))\n")
    return "".join(out)


def statements(n: int = 20000) -> str:
    """A long module of module-level statements rebinding one name (``h = h + xN``), then a model
    made outside the scope and compiled in it: one TFP101 (the header's is the other)."""
    out = ["h = 0\n"]
    for i in range(n):
        out.append(f"x{i} = tf.constant({i}) + h\nh = h + x{i}\n")
    out.append("late = tf.keras.Sequential()\nwith strategy.scope():\n    late.compile(optimizer='sgd', loss='mse')\n")
    return "".join(out)


def elif_chains(n_chains: int = 40, n_branches: int = 500) -> str:
    """Replica functions made of one long if/elif chain; the first branch sets the seed: one TFP401
    per chain."""
    out = []
    for c in range(n_chains):
        out.append(f"def step{c}(k):\n    if k == 0:\n        tf.random.set_seed(0)\n")
        for b in range(1, n_branches):
            out.append(f"    elif k == {b}:\n        y = k * {b}\n")
        out.append(f"    return k\nstrategy.run(step{c}, args=(1,))\n")
    return "".join(out)


def threads(n: int = 5000) -> str:
    """``n`` worker functions, each started in two threads, each a read-modify-write of one
    shared variable without a lock: ``n`` TFP301."""
    out = ["import threading\nv = tf.Variable(0)\n"]
    for i in range(n):
        out.append(f"def work{i}():\n    v.assign(v + {i})\nfor _ in range(2):\n"
                   f"    threading.Thread(target=work{i}).start()\n")
    return "".join(out)


def scopes(n: int = 6000) -> str:
    """``n`` ``with strategy.scope():`` blocks building and compiling a model; every tenth model is
    built just before its block: ``n / 10`` TFP101 (each with a fix)."""
    out = []
    for i in range(n):
        if i % 10 == 0:
            out.append(f"m{i} = tf.keras.Sequential([tf.keras.layers.Dense({i % 7 + 1})])\n"
                       f"with strategy.scope():\n    m{i}.compile(optimizer='sgd', loss='mse')\n")
        else:
            out.append(f"with strategy.scope():\n    m{i} = tf.keras.Sequential([tf.keras.layers.Dense({i % 7 + 1})])\n"
                       f"    m{i}.compile(optimizer='sgd', loss='mse')\n")
    return "".join(out)


def literals(n: int = 26000) -> str:
    """One dict literal of ``n / 2`` entries and one list literal of ``n / 2`` tuples."""
    out = ["CONFIG = {\n"]
    for i in range(n // 2):
        out.append(f"    'key{i}': [{i}, {i + 1}, 'v{i}', {{'lr': {i}.5}}],\n")
    out.append("}\nDATA = [\n")
    for i in range(n // 2):
        out.append(f"    ({i}, {i * 3}),\n")
    out.append("]\n")
    return "".join(out)


def imports(n: int = 20000) -> str:
    """``n`` import statements (``import a.b as c`` and ``from a import b, c as d``)."""
    out = []
    for i in range(n):
        if i % 2:
            out.append(f"import pkg{i}.sub{i} as mod{i}\n")
        else:
            out.append(f"from pkg{i}.sub import name{i}, other{i} as alias{i}\n")
    return "".join(out)


def closures(n: int = 2000, depth: int = 6) -> str:
    """``n`` functions, each with ``depth`` nested closures of the same names (``level0`` ...);
    the innermost sets the seed and ``level0`` is run by ``strategy.run``: ``n`` TFP401."""
    out = []
    for i in range(n):
        s = f"def outer{i}(x):\n"
        ind = "    "
        for d in range(depth):
            s += f"{ind}def level{d}(y):\n"
            ind += "    "
        s += f"{ind}tf.random.set_seed({i})\n{ind}return y\n"
        for d in reversed(range(1, depth)):
            ind = ind[:-4]
            s += f"{ind}return level{d}(y)\n"
        s += "    return strategy.run(level0, args=(x,))\n"
        out.append(s)
    return "".join(out)


def replica_chain(n: int = 6000) -> str:
    """``n`` replica functions ``stepN`` each calling ``helperN``, which calls ``helperN-1`` ... down
    to ``helper0``, which sets the seed: one TFP401 (every replica function reaches it)."""
    out = ["def helper0(x):\n    tf.random.set_seed(0)\n    return x\n"]
    for i in range(1, n):
        out.append(f"def helper{i}(x):\n    return helper{i - 1}(x) + 1\n")
    for i in range(n):
        out.append(f"def step{i}(x):\n    return helper{i}(x)\n")
    for i in range(n):
        out.append(f"strategy.run(step{i}, args=(1,))\n")
    return "".join(out)


def noqa_lines(n: int = 16000) -> str:
    """``n`` statements with ``# noqa`` comments: a third suppress a real TFP101, a third name a rule
    (``model-outside-scope``: ``n / 3`` TFP901, and as they suppress nothing ``n / 3`` TFP900
    when TFP900 is on), a third are bare."""
    out = []
    for i in range(n):
        k = i % 3
        if k == 0:
            out.append(f"m{i} = tf.keras.Sequential()  # noqa: TFP101\nwith strategy.scope():\n"
                       f"    m{i}.compile(loss='mse')\n")
        elif k == 1:
            out.append(f"x{i} = {i}  # noqa: model-outside-scope, E501\n")
        else:
            out.append(f"y{i} = {i}  # noqa\n")
    return "".join(out)


def long_function(n: int = 24000) -> str:
    """One replica function of ``2 n`` statements rebinding two names."""
    out = ["def train(ds):\n    total = 0\n"]
    for i in range(n):
        out.append(f"    a = total + {i}\n    total = a * 2\n")
    out.append("    return total\nstrategy.run(train, args=(1,))\n")
    return "".join(out)


# name -> (generator, its arguments in INPUTS); tests/test_large_inputs.py runs them scaled down
HOSTILE = {
    "classes: 300 x 40 methods calling self.m()": (methods, (300, 40)),
    "module of 40,000 statements": (statements, (20000,)),
    "40 if/elif chains of 500 branches": (elif_chains, (40, 500)),
    "5,000 Thread(target=...) starts": (threads, (5000,)),
    "6,000 with strategy.scope() blocks": (scopes, (6000,)),
    "dict and list literals of 13,000 items each": (literals, (26000,)),
    "20,000 imports": (imports, (20000,)),
    "2,000 functions x 6 nested closures": (closures, (2000, 6)),
    "6,000 replica functions down one helper chain": (replica_chain, (6000,)),
    "16,000 lines with # noqa": (noqa_lines, (16000,)),
    "one function of 48,000 statements": (long_function, (24000,)),
}


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
INPUTS.update({name: (lambda g=g, a=a: g(*a)) for name, (g, a) in HOSTILE.items()})


def split_times(source: str, codes: list[str]) -> tuple[float, float, float]:
    """(parse wall s, analysis wall s, analysis CPU s) of ``source`` in this process.  The parse
    is the engine's (:func:`tfpar_lint.deep.parse_module`: the deep-expression guard, then
    libcst); its tree is handed to :func:`tfpar_lint.engine.lint_source`, which would parse
    again, with the garbage collector tuned as in the worker."""
    from tfpar_lint import deep, engine

    t0 = time.perf_counter()
    parsed = deep.parse_module(source)
    parse = time.perf_counter() - t0
    real = deep.parse_module

    def again(text, *a, **k):
        return parsed if text is source else real(text, *a, **k)

    old_gc = engine._tune_gc()
    deep.parse_module = again
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        engine.lint_source(source, "input.py", enabled=codes)
        return parse, time.perf_counter() - t0, time.process_time() - c0
    finally:
        deep.parse_module = real
        import gc

        gc.set_threshold(*old_gc)


def in_worker_thread(fn, *args):
    """``fn(*args)`` in a thread with the worker's stack size (deep trees need it, as there)."""
    import threading

    from tfpar_lint.workers import STACK_SIZE

    out: list = []
    old = threading.stack_size(STACK_SIZE)
    try:
        t = threading.Thread(target=lambda: out.append(fn(*args)))
        t.start()
        t.join()
    finally:
        threading.stack_size(old)
    if not out:
        raise RuntimeError(f"{fn.__name__} failed")
    return out[0]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--only", default=None)
    ap.add_argument("--split", action="store_true",
                    help="two more columns: libcst's parse and the analysis after it (rules, positions, "
                         "fixes, noqa), timed in this process, wall and CPU seconds, for the inputs the "
                         "worker linted without an error")
    args = ap.parse_args()
    codes = [r.CODE for r in all_rules()]
    if args.split:
        print("| input | size | wall s | result | parse s | analysis s (CPU s) |")
        print("|---|---:|---:|---|---:|---:|")
    else:
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
            extra = ""
            if args.split:
                extra = " n/a | n/a |"
                if res.error is None:
                    parse, analysis, cpu = in_worker_thread(split_times, HEADER + make(), codes)
                    extra = f" {parse:.2f} | {analysis:.2f} ({cpu:.2f}) |"
            print(f"| {name} | {size / 1024:,.0f} KB | {wall:.2f} | {out} |{extra}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
