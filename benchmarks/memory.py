"""Peak memory per source byte (issue 20): tfpar-lint on generated modules of 0.5, 1 and 3 MB and on
the largest modules of the installed tensorflow package.

    .venv/bin/python benchmarks/memory.py [--sizes 0.5,1,3] [--runs 1] [--src DIR]

Each module is linted alone, `tfpar-lint --no-config --no-cache -j1 --select ALL`, in a fresh
process (`--src DIR` puts another copy of the package first on PYTHONPATH, to measure a version
against another).  The peak is `ru_maxrss` of the process tree (`os.wait4`: the largest single
process, here the worker that parses the file); "per source byte" is that peak divided by the
file's size, and "above a one-line file" subtracts the peak of the same command on a one-line
file (the interpreter, libcst and tfpar-lint imported).  Generated modules hold a strategy, 40
functions and 40 Keras layer classes per 10 KB, and end with a model built outside the strategy's
scope and compiled in it (one TFP101 finding at the end: the positions of a finding are computed
too).  Standard library only.
"""
from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def generated(size: int) -> str:
    out = ["import tensorflow as tf", "strategy = tf.distribute.MirroredStrategy()", ""]
    total = sum(len(x) + 1 for x in out)
    i = 0
    while total < size:
        block = [
            f"def layer_{i}(x, scale={i}.0):",
            f'    """Block {i}."""',
            f"    y = tf.keras.layers.Dense({i % 64 + 1}, name='dense_{i}')(x)",
            "    z = tf.nn.relu(y) * scale + tf.reduce_mean(y, axis=-1, keepdims=True)",
            f"    return {{'out': z, 'index': {i}, 'names': ['a{i}', 'b{i}', 'c{i}']}}",
            "",
            f"class Block{i}(tf.keras.layers.Layer):",
            "    def call(self, inputs, training=None):",
            "        if training:",
            f"            inputs = tf.nn.dropout(inputs, rate=0.{i % 9 + 1})",
            f"        return layer_{i}(inputs)['out']",
            "",
        ]
        out += block
        total += sum(len(x) + 1 for x in block)
        i += 1
    out += ["model = tf.keras.Sequential([Block0(), Block1()])",
            "with strategy.scope():",
            "    model.compile(optimizer='sgd', loss='mse')", ""]
    return "\n".join(out)


def run(path: str, src: str) -> tuple[float, float, int, str]:
    """(wall s, CPU s, peak RSS bytes, the output's first line)."""
    env = dict(os.environ, PYTHONPATH=src)
    t = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "tfpar_lint", "--no-config", "--no-cache", "-j1", "--select",
                             "ALL", "--output-format", "concise", path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    out, _err = b"", b""
    _pid, _status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t
    out = proc.stdout.read() if proc.stdout else b""
    proc.stdout.close() if proc.stdout else None
    proc.stderr.close() if proc.stderr else None
    first = out.decode(errors="replace").splitlines()[:1]
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, first[0] if first else ""


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0.5,1,3", help="generated module sizes in MB (comma-separated)")
    ap.add_argument("--src", default=str(REPO / "src"), help="the src/ folder to measure")
    ap.add_argument("--largest", type=int, default=3, help="how many of tensorflow's largest modules")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tiny = os.path.join(tmp, "tiny.py")
        Path(tiny).write_text("import tensorflow as tf\n")
        base = run(tiny, args.src)[2]
        cases: list[tuple[str, str]] = []
        for mb in (float(x) for x in args.sizes.split(",") if x):
            p = os.path.join(tmp, f"generated_{mb:g}MB.py")
            Path(p).write_text(generated(int(mb * 1024 * 1024)))
            cases.append((f"generated, {mb:g} MB", p))
        try:
            import importlib.util

            spec = importlib.util.find_spec("tensorflow")
            tf_dirs = list(spec.submodule_search_locations or []) if spec else []
        except (ImportError, ValueError):
            tf_dirs = []
        largest = sorted((f for d in tf_dirs for f in glob.glob(d + "/**/*.py", recursive=True)),
                         key=os.path.getsize, reverse=True)[:args.largest]
        for f in largest:
            cases.append((f"tensorflow/{os.path.relpath(f, tf_dirs[0])}", f))
        for name, p in cases:
            size = os.path.getsize(p)
            wall, cpu, peak, first = run(p, args.src)
            rows.append((name, size, wall, cpu, peak, first))
            print(f"{name}: {size / 1048576:.2f} MB, wall {wall:.1f} s, CPU {cpu:.1f} s, peak {peak / 1048576:.0f} MB, "
                  f"{peak / size:.0f} B/B ({(peak - base) / size:.0f} above a one-line file); {first[:80]}",
                  file=sys.stderr)
    print(f"one-line file: peak {base / 1048576:.0f} MB\n")
    print("| module | size MB | wall s | CPU s | peak RSS MB | bytes per source byte | above a one-line file | output |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, size, wall, cpu, peak, first in rows:
        print(f"| {name} | {size / 1048576:.2f} | {wall:.1f} | {cpu:.1f} | {peak / 1048576:.0f} | {peak / size:.0f} | "
              f"{(peak - base) / size:.0f} | {first.split(': ', 1)[-1][:40] or '(none)'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
