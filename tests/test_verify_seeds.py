"""The seed documents' runnable bad examples under ``tfpar-lint --verify`` (real TensorFlow,
2 logical CPU devices), through the in-process CLI so that the whole path runs: lint, run,
verdicts, runtime findings, JSON, exit code.

Each bad example must get a CONFIRMED or RUNTIME finding of its family with evidence, and the
run must exit 1, whether or not the static pass reports it; corrected versions (written here)
must get none and exit 0.  The blocks are read from ``../shared/seeds/`` at run time, never
copied into the repository.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re

import pytest

from tfpar_lint.finding import CONFIRMED, RUNTIME

HAVE_TF = importlib.util.find_spec("tensorflow") is not None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# ../shared/seeds beside the checkout (a git worktree one folder deeper looks one level up too),
# or TFPAR_SEEDS.
SEEDS = os.environ.get("TFPAR_SEEDS") or next(
    (p for p in (os.path.join(os.path.dirname(ROOT), "shared", "seeds"),
                 os.path.join(os.path.dirname(os.path.dirname(ROOT)), "shared", "seeds")) if os.path.isdir(p)),
    os.path.join(os.path.dirname(ROOT), "shared", "seeds"))
pytestmark = [
    pytest.mark.verify,
    pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not importable (bash scripts/dev.sh setup installs it)"),
    pytest.mark.skipif(not os.path.isdir(SEEDS), reason=f"the seed documents are not at {SEEDS} (they are not "
                                                        f"part of the repository)"),
]

# (seed file prefix, block, the code family a CONFIRMED or RUNTIME finding must have, what it is)
BAD = [
    ("000", 2, "TFP2", "one dataset replicated by hand, [ds] * n, no strategy"),
    ("001", 1, "TFP3", "five threads read-modify-write one tf.Variable"),
    ("001", 2, "TFP2", "strategy.run(lambda: next(iterator)) on a plain dataset's iterator"),
    ("001", 3, "TFP506", ".numpy() on the PerReplica result of strategy.run"),
]

# Corrected versions of the same programs (ours): no CONFIRMED or RUNTIME finding.
GOOD = {
    "threads_locked.py": """\
import threading
import tensorflow as tf

shared_variable = tf.Variable(0.0)
lock = threading.Lock()


def worker_task():
    with lock:
        local_value = shared_variable.value()
        shared_variable.assign(local_value + 1.0)


threads = [threading.Thread(target=worker_task) for _ in range(5)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(shared_variable.numpy())
""",
    "iterator_distributed.py": """\
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
dataset = tf.data.Dataset.from_tensor_slices(list(range(16))).batch(4).repeat()
iterator = iter(strategy.experimental_distribute_dataset(dataset))


@tf.function
def step(batch):
    return strategy.run(lambda x: x * 2, args=(batch,))


for _ in range(4):
    print(strategy.experimental_local_results(step(next(iterator))))
""",
    "dataset_sharded.py": """\
import numpy as np
import tensorflow as tf

num_devices = 2
features = np.random.normal(size=(100, 5))
labels = np.random.normal(size=(100, 1))
dataset = tf.data.Dataset.from_tensor_slices((features, labels))
shards = [dataset.shard(num_devices, i).batch(16) for i in range(num_devices)]
for i, shard in enumerate(shards):
    for x, y in shard:
        print("device", i, x.shape)
""",
    "perreplica_reduced.py": """\
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    tf.random.set_seed(42)
    per_replica = strategy.run(lambda: tf.random.normal((1, 5)))
    print([t.numpy() for t in strategy.experimental_local_results(per_replica)])
""",
}


def _block(prefix: str, n: int) -> str:
    (name,) = [f for f in os.listdir(SEEDS) if f.startswith(prefix + "_") and f.endswith(".txt")]
    with open(os.path.join(SEEDS, name), encoding="utf-8") as f:
        blocks = re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)
    return blocks[n - 1]


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("seeds")
    bad = {}
    for prefix, n, fam, what in BAD:
        p = folder / f"seed{prefix}_block{n}.py"
        p.write_text(_block(prefix, n))
        bad[str(p)] = (fam, what)
    good = []
    for name, text in GOOD.items():
        p = folder / name
        p.write_text(text)
        good.append(str(p))
    return folder, bad, good


def _verify(cli, folder, paths):
    r = cli("--verify", "--devices", "cpu:2", "--timeout", "180", "--format", "json", "--no-cache", "--no-config",
            *paths)
    findings = json.loads(r.out)
    by_path: dict[str, list] = {}
    for d in findings:
        by_path.setdefault(os.path.realpath(d["path"]), []).append(d)
    return r, by_path


def test_bad_seed_examples_are_found(scripts, cli):
    folder, bad, _good = scripts
    r, by_path = _verify(cli, folder, list(bad))
    assert r.rc == 1, r.out + r.err
    for path, (fam, what) in bad.items():
        got = by_path.get(os.path.realpath(path), [])
        hits = [d for d in got if d["code"].startswith(fam) and (d.get("verification") or {}).get("status")
                in (CONFIRMED, RUNTIME)]
        why = f"{os.path.basename(path)} ({what}): {json.dumps(got, indent=1)}\n{r.err}"
        assert hits, why
        for d in hits:
            assert d["verification"]["evidence"], why
            assert d["line"] >= 1, why


def test_each_bad_seed_example_exits_1_alone(scripts, cli):
    """Exit 1 for each example on its own (including those the static pass is silent on)."""
    folder, bad, _good = scripts
    for path in bad:
        r = cli("--verify", "--devices", "cpu:2", "--timeout", "180", "--no-cache", "--no-config", path)
        assert r.rc == 1, r.out + r.err
        assert re.search(r"\d+ (CONFIRMED|RUNTIME)\n", r.out.splitlines()[0] + "\n"), r.out


def test_runtime_finding_where_the_linter_is_silent(scripts, cli):
    """The thread race: no static finding is needed for a RUNTIME finding at the assign."""
    folder, bad, _good = scripts
    path = next(p for p in bad if p.endswith("seed001_block1.py"))
    r = cli("--verify", "--devices", "cpu:2", "--timeout", "180", "--no-cache", "--no-config", "--select", "TFP101",
            "--format", "json", path)
    assert r.rc == 1, r.out + r.err
    (d,) = json.loads(r.out)
    assert (d["code"], d["line"], d["verification"]["status"]) == ("TFP301", 10, RUNTIME), d
    assert "threads should give 5" in d["verification"]["evidence"], d


def test_corrected_versions_get_nothing(scripts, cli):
    folder, _bad, good = scripts
    r, by_path = _verify(cli, folder, good)
    hits = {os.path.basename(p): [d for d in fs if (d.get("verification") or {}).get("status") in (CONFIRMED, RUNTIME)]
            for p, fs in by_path.items()}
    assert not any(hits.values()), json.dumps(hits, indent=1) + r.err
    assert r.rc == 0, r.out + r.err


@pytest.mark.parametrize("seed, code, line", [
    ("seed001_block1", "TFP301", 8), ("seed001_block1", "TFP301", 10), ("seed001_block1", "TFP301", 15),
    ("seed001_block1", "TFP301", 17), ("seed000_block2", "TFP202", 16), ("seed001_block2", "TFP201", 17),
    ("seed001_block2", "TFP201", 20), ("seed001_block3", "TFP506", 13),
])
def test_static_finding_on_the_mistake_gets_the_verdict(scripts, seed, code, line):
    """A static finding where EXPECTED.tsv puts the mistake (the thread race: the read, the
    write, the thread's creation or start) is CONFIRMED, and no second, RUNTIME finding of
    the same family is added for it."""
    from tfpar_lint.finding import Finding
    from tfpar_lint.verify import verify_findings

    _folder, bad, _good = scripts
    path = next(p for p in bad if p.endswith(f"{seed}.py"))
    f = Finding(code, "", "", path, line, 1, line, 1)
    (run,) = verify_findings([path], [f], devices="cpu:2", timeout=180.0)
    assert f.verification.status == CONFIRMED, (f.verification, run.summary())
    same = [d for d in run.runtime_findings if d["code"][:4] == code[:4]]
    assert same == [], same
