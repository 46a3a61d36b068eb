"""Time from an edit to its diagnostics with ``tfpar-lint server`` (issue 24), as an editor sees it.

    .venv/bin/python benchmarks/lsp_latency.py [--lines 1000] [--edits 30]

A real LSP client (pygls) starts ``tfpar-lint server`` over stdio, opens a generated training script
of about ``--lines`` lines in a project folder (a strategy from a second module, a model built
outside the scope: one cross-file finding), and then makes ``--edits`` edits, each a one-character
change of a comment line that alternates (``--where code``: a change of a statement in the body of
the middle function, ``axis=-1`` to ``axis=1`` and back), timing each from the moment the didChange notification is
sent to the moment its publishDiagnostics arrives.  The first lint (cold: the server's first parse
of the project) is reported on its own; the edits are the warm case.  Prints the median, 90th
percentile and maximum in milliseconds, and the server process's CPU time per edit (user + system,
from ``/proc``: what the edits cost it, whatever the machine's load).  Our own generated code; nothing is downloaded.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parents[1]

DIST = "import tensorflow as tf\n\n\ndef make_strategy():\n    return tf.distribute.MirroredStrategy()\n"

HEAD = """\
import numpy as np
import tensorflow as tf

from dist import make_strategy

GLOBAL_BATCH = 64
strategy = make_strategy()
model = tf.keras.Sequential([tf.keras.layers.Dense(8), tf.keras.layers.Dense(1)])
with strategy.scope():
    optimizer = tf.keras.optimizers.SGD(0.01)
    model.compile(optimizer=optimizer, loss="mse")
# edit here
"""

BLOCK = """\


def stage_{i}(x, y):
    # stage {i}: a small custom step, as training scripts grow them
    with tf.GradientTape() as tape:
        pred = model(x, training=True)
        per_example = tf.reduce_sum(tf.square(pred - y), axis=-1)
        loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def run_{i}(dist_inputs):
    losses = strategy.run(stage_{i}, args=dist_inputs)
    return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
"""


def script(lines: int) -> str:
    parts = [HEAD]
    i = 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(BLOCK.format(i=i))
        i += 1
    return "".join(parts)


async def measure(n_lines: int, edits: int, where: str = "comment") -> dict:
    folder = Path(tempfile.mkdtemp(prefix="tfpar-lsp-"))
    (folder / "pyproject.toml").write_text('[project]\nname = "bench"\n')
    (folder / "dist.py").write_text(DIST)
    text = script(n_lines)
    (folder / "train.py").write_text(text)
    uri = (folder / "train.py").as_uri()

    client = LanguageClient("bench", "1")
    arrived: dict[int, float] = {}
    waiters: dict[int, asyncio.Future] = {}

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diags(params: types.PublishDiagnosticsParams) -> None:
        if params.uri == uri and params.version in waiters and not waiters[params.version].done():
            arrived[params.version] = time.perf_counter()
            waiters[params.version].set_result(params.diagnostics)

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    await client.start_io(sys.executable, "-m", "tfpar_lint", "server", env=env)
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                         root_uri=folder.as_uri()))
    client.initialized(types.InitializedParams())
    loop = asyncio.get_running_loop()

    async def send(version: int, body: str, open_: bool = False) -> tuple[float, list]:
        waiters[version] = loop.create_future()
        t0 = time.perf_counter()
        if open_:
            client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=version, text=body)))
        else:
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=body)]))
        diags = await asyncio.wait_for(waiters[version], 120)
        return (arrived[version] - t0) * 1000.0, diags

    cold, diags = await send(1, text, open_=True)
    codes = sorted({d.code for d in diags})
    cpu0 = server_cpu(client)
    warm = []
    middle = text.count("def stage_") // 2  # a code edit: a statement of the middle stage's body
    line = "        per_example = tf.reduce_sum(tf.square(pred - y), axis=-1)\n"
    at = text.index(line, text.index(f"def stage_{middle}("))
    for k in range(edits):
        if where == "comment":
            body = text.replace("# edit here", f"# edit here {'x' * (k % 2)}")
        else:
            body = text[:at] + line.replace("axis=-1", "axis=1" if k % 2 else "axis=-1 ") + text[at + len(line):]
        ms, _ = await send(k + 2, body)
        warm.append(ms)
    cpu = (server_cpu(client) - cpu0) / max(edits, 1) * 1000.0 if cpu0 is not None else None
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return {"lines": text.count("\n"), "cold_ms": cold, "codes": codes, "warm": warm, "cpu_ms": cpu}


def server_cpu(client: LanguageClient) -> "float | None":
    """CPU seconds (user + system) the server process has used so far (Linux /proc), or None."""
    proc = getattr(client, "_server", None)
    try:
        with open(f"/proc/{proc.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (AttributeError, OSError, ValueError, IndexError):
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--edits", type=int, default=30)
    ap.add_argument("--where", choices=("comment", "code"), default="comment",
                    help="what each edit changes: a comment line near the top (the default), or a "
                         "statement in the body of the middle function (its code)")
    args = ap.parse_args()
    r = asyncio.run(measure(args.lines, args.edits, args.where))
    warm = sorted(r["warm"])
    p90 = warm[min(len(warm) - 1, int(round(0.9 * (len(warm) - 1))))]
    print(f"script: {r['lines']} lines; findings at open: {', '.join(r['codes']) or 'none'}")
    print(f"open (cold, first parse of the project): {r['cold_ms']:.0f} ms")
    print(f"edit ({args.where}) -> diagnostics, warm, {len(warm)} edits: median {statistics.median(warm):.0f} ms, "
          f"p90 {p90:.0f} ms, max {warm[-1]:.0f} ms"
          + (f"; the server's CPU time per edit {r['cpu_ms']:.0f} ms" if r["cpu_ms"] is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
