"""Shapes read as mistakes (issue 28 item 4): each an invented minimal program that is correct,
beside its mistaken twin that must still be reported."""
from __future__ import annotations

import textwrap
from pathlib import Path

from tfpar_lint.engine import lint_paths, lint_source


def codes(src: str, select=None, path: str = "snippet.py") -> list[tuple[int, str]]:
    res = lint_source(textwrap.dedent(src), path, enabled=select)
    assert res.error is None, res.error
    return sorted((f.line, f.code) for f in res.findings)


def project_codes(tmp_path: Path, files: dict[str, str], lint: str, select=None) -> list[tuple[int, str]]:
    (tmp_path / ".git").mkdir(parents=True, exist_ok=True)  # the repository's root: the search for job specs stops here
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    res = lint_paths([str(tmp_path / lint)], enabled=select)
    return sorted((f.line, f.code) for r in res for f in r.findings)


# ------------------------------------------------------------------ TFP604: a cluster with no chief
SAVE_WORKER_ZERO = """
    import os
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task_type, task_id = strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id

    def is_lead(kind, index):
        return kind == "chief" or (kind == "worker" and index == 0)

    def write_dir(path, kind, index):
        if not is_lead(kind, index):
            path = os.path.join(path, "workertemp_" + str(index))
        return path

    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(2,))])
        ckpt = tf.train.Checkpoint(model=model)
    ckpt.write(write_dir("/tmp/ckpt", task_type, task_id))
"""

TFJOB = """
    apiVersion: kubeflow.org/v1
    kind: TFJob
    metadata:
      name: train
    spec:
      tfReplicaSpecs:
{replicas}
"""
WORKERS_ONLY = """\
        Worker:
          replicas: 3
          template:
            spec:
              containers:
                - name: tensorflow
                  image: tensorflow/tensorflow:2.12.0
"""
WITH_CHIEF = """\
        Chief:
          replicas: 1
""" + WORKERS_ONLY


def test_tfp604_worker_zero_is_the_chief_of_a_job_of_workers_only(tmp_path):
    """A Kubeflow TFJob of Worker replicas only: TF_CONFIG has no chief task, worker 0 is the chief,
    and `chief or worker 0` is TensorFlow's own rule."""
    files = {"train.py": SAVE_WORKER_ZERO, "k8s/tfjob.yaml": TFJOB.format(replicas=WORKERS_ONLY)}
    assert project_codes(tmp_path / "a", files, "train.py", ["TFP604", "TFP607"]) == []
    # the same job with a Chief replica: the chief and worker 0 both write the real path
    files["k8s/tfjob.yaml"] = TFJOB.format(replicas=WITH_CHIEF)
    assert project_codes(tmp_path / "b", files, "train.py", ["TFP604", "TFP607"]) == [(9, "TFP604")]
    # nothing declares the cluster: reported as before
    assert project_codes(tmp_path / "c", {"train.py": SAVE_WORKER_ZERO}, "train.py", ["TFP604"]) == [(9, "TFP604")]


def test_tfp604_a_worker_only_tf_config_written_for_a_demonstration_is_no_declaration():
    """The multi-worker tutorials write a worker-only TF_CONFIG on localhost to demonstrate; the
    code then meets deployed clusters, which may have a chief: still reported."""
    demo = SAVE_WORKER_ZERO.replace("strategy = tf", 'os.environ["TF_CONFIG"] = \'{"cluster": {"worker": '
                                    '["localhost:1", "localhost:2"]}, "task": {"type": "worker", "index": 0}}\'\n'
                                    "    strategy = tf", 1)
    assert demo != SAVE_WORKER_ZERO
    assert codes(demo, ["TFP604"]) == [(10, "TFP604")]


def test_tfp604_a_job_spec_the_module_builds():
    launcher = SAVE_WORKER_ZERO + textwrap.indent(textwrap.dedent("""
        JOB = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
               "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2}}}}
    """), "    ")
    assert codes(launcher, ["TFP604"]) == []
    assert codes(launcher.replace('{"Worker": {"replicas": 2}}', '{"Chief": {"replicas": 1}, "Worker": {"replicas": 2}}'),
                 ["TFP604"]) == [(9, "TFP604")]


# ------------------------------------------------------------------ TFP107: a per-host counter
HOST_COUNTER = """
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])

    with tf.device("/cpu:0"):
        steps_done = tf.Variable(0, trainable=False)

    def step_fn(x):
        return model(x)

    for x in strategy.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(2)):
        strategy.run(step_fn, args=(x,))
        steps_done.assign_add(1)
"""


def test_tfp107_a_counter_on_the_host_that_the_replicas_never_touch():
    assert codes(HOST_COUNTER, ["TFP107"]) == []
    # read inside the replica function: every replica reads it from the one device
    touched = HOST_COUNTER.replace("return model(x)", "return model(x) + tf.cast(steps_done, tf.float32)")
    assert codes(touched, ["TFP107"]) == [(8, "TFP107")]


# ------------------------------------------------------------------ TFP203: own partitions, unit tests
RAY_ACTORS = """
    import glob

    import ray
    import tensorflow as tf

    @ray.remote
    class Trainer:
        def __init__(self, files):
            self.files = files  # this actor's own files

        def train(self):
            strategy = tf.distribute.MultiWorkerMirroredStrategy()

            def dataset_fn(ctx):
                ds = tf.data.TFRecordDataset(self.files)
                return ds.batch(ctx.get_per_replica_batch_size(64))

            return strategy.distribute_datasets_from_function(dataset_fn)

    files = sorted(glob.glob("data/*.tfrecord"))
    trainers = [Trainer.remote(files[i::4]) for i in range(4)]
    ray.get([t.train.remote() for t in trainers])
"""


def test_tfp203_ray_actors_each_reading_their_own_shard():
    assert codes(RAY_ACTORS, ["TFP203"]) == []
    # every actor gets all the files: every worker reads the same data
    same = RAY_ACTORS.replace("Trainer.remote(files[i::4])", "Trainer.remote(files)")
    assert codes(same, ["TFP203"]) == [(19, "TFP203")]


RAY_TRAIN = """
    import tensorflow as tf
    from ray import train

    def train_func(config):
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        shard = train.get_dataset_shard("train")

        def dataset_fn(ctx):
            return shard.to_tf(feature_columns="x", label_columns="y",
                               batch_size=ctx.get_per_replica_batch_size(64))

        return strategy.distribute_datasets_from_function(dataset_fn)
"""


def test_tfp203_a_ray_train_worker_reads_its_dataset_shard():
    assert codes(RAY_TRAIN, ["TFP203"]) == []
    whole = RAY_TRAIN.replace('train.get_dataset_shard("train")', 'config["dataset"]')
    assert codes(whole, ["TFP203"]) == [(13, "TFP203")]


TPU_TEST = """
    import tensorflow as tf

    class InputTest(tf.test.TestCase):

        def test_per_core_batches(self):
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="")
            strategy = tf.distribute.TPUStrategy(resolver)
            dist = strategy.distribute_datasets_from_function(lambda ctx: tf.data.Dataset.range(16).batch(4))
            for x in dist:
                self.assertEqual(x.values[0].shape[0], 4)
"""


def test_tfp203_a_unit_test_of_a_single_host_tpu():
    assert codes(TPU_TEST, ["TFP203"]) == []
    # the same pipeline in the program itself: a TPU may span several hosts
    program = TPU_TEST.replace("class InputTest(tf.test.TestCase):", "class InputPipeline:").replace(
        "def test_per_core_batches", "def per_core_batches")
    assert codes(program, ["TFP203"]) == [(9, "TFP203")]


# ------------------------------------------------------------------ TFP202: one batch per core in a test
SAME_BATCH_TEST = """
    import tensorflow as tf

    class ReplicaTest(tf.test.TestCase):

        def test_replicas_agree_on_the_same_batch(self):
            strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
            ds = tf.data.Dataset.range(8).batch(4)
            per_core = [iter(ds) for _ in range(strategy.num_replicas_in_sync)]
            firsts = [next(it) for it in per_core]
            self.assertAllEqual(firsts[0], firsts[1])
"""


def test_tfp202_a_test_that_builds_one_batch_per_core_on_purpose():
    assert codes(SAME_BATCH_TEST, ["TFP202"]) == []
    program = SAME_BATCH_TEST.replace("class ReplicaTest(tf.test.TestCase):", "class Replicas:").replace(
        "def test_replicas_agree", "def replicas_agree")
    assert codes(program, ["TFP202"]) == [(9, "TFP202")]


def test_tfp202_a_test_function_pytest_collects():
    src = """
        import tensorflow as tf

        def test_same_batch_on_every_core():
            strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
            ds = tf.data.Dataset.range(8).batch(4)
            per_core = [iter(ds) for _ in range(strategy.num_replicas_in_sync)]
            assert len(per_core) == 2
    """
    assert codes(src, ["TFP202"], path="test_replicas.py") == []
    assert codes(src, ["TFP202"], path="replicas.py") == [(7, "TFP202")]  # not a test module: a program
