"""TensorFlow / Keras API knowledge: canonical qualified names and what they create.

Every import spelling is reduced to one canonical name before comparison:
``tensorflow.compat.v2.X`` -> ``tensorflow.X``; ``tensorflow.keras.X``,
``tf_keras.X``, ``keras.api.X``, ``keras._tf_keras.keras.X`` -> ``keras.X``.
The Keras flavour is remembered separately (``keras_flavor``).
"""
from __future__ import annotations

from typing import Optional

# --------------------------------------------------------------------------- kinds
STRATEGY = "strategy"
MODEL = "model"
LAYER = "layer"
OPTIMIZER = "optimizer"
METRIC = "metric"
LOSS = "loss"
CHECKPOINT = "checkpoint"
CHECKPOINT_MANAGER = "checkpoint_manager"
VARIABLE = "variable"
VARIABLES = "variables"  # a list of tf.Variables (``model.trainable_variables``)
LAYERS = "layers"  # ``model.layers``
MODULE = "module"  # another module of the project (``import models``)
NONE = "none"  # the literal None (a placeholder: ``x = None`` before ``x = make()``)
GENERATOR = "generator"
DATASET = "dataset"  # plain tf.data.Dataset
DIST_DATASET = "dist_dataset"  # DistributedDataset
ITERATOR = "iterator"  # iterator over a plain dataset
DIST_ITERATOR = "dist_iterator"
ELEMENT = "element"  # a value drawn from a plain dataset / iterator
DIST_VALUES = "dist_values"  # PerReplica values from a distributed dataset / values fn
PER_REPLICA = "per_replica"  # result of strategy.run
THREAD = "thread"  # threading.Thread
EXECUTOR = "executor"  # ThreadPoolExecutor, multiprocessing.dummy.Pool, ThreadPool
LOCK = "lock"
TAPE = "tape"
FUNCTION = "function"
CLASS = "class"
API = "api"  # an imported module / attribute chain with a qualified name
INPUT_CONTEXT = "input_context"
UNKNOWN = "unknown"

# ------------------------------------------------------------------ canonical names
_PREFIX_REWRITES = (
    ("tensorflow.compat.v2.", "tensorflow."),
    ("tensorflow.compat.v1.", "tensorflow."),
    ("tensorflow._api.v2.", "tensorflow."),
    ("tensorflow.python.keras.", "keras."),
    ("tensorflow.keras.", "keras."),
    ("keras._tf_keras.keras.", "keras."),
    ("keras.api.", "keras."),
    ("keras.src.", "keras."),
    ("tf_keras.src.", "keras."),
    ("tf_keras.", "keras."),
)
_EXACT_REWRITES = {
    "tensorflow.keras": "keras",
    "tf_keras": "keras",
    "tensorflow.compat.v2": "tensorflow",
    "tensorflow.compat.v1": "tensorflow",
}


def canonical(qname: str) -> str:
    if qname in _EXACT_REWRITES:
        return _EXACT_REWRITES[qname]
    for _ in range(3):  # tensorflow.compat.v2.keras.X needs two rewrites
        for old, new in _PREFIX_REWRITES:
            if qname.startswith(old):
                qname = new + qname[len(old):]
                break
        else:
            break
    return qname


def keras_flavor(raw_qname: str) -> str:
    """'tf_keras' (Keras 2), 'tf.keras' (Keras 3 on TF >= 2.16 unless TF_USE_LEGACY_KERAS) or 'keras'."""
    if raw_qname.startswith("tf_keras"):
        return "tf_keras"
    if raw_qname.startswith(("tensorflow.keras", "tensorflow.compat.v2.keras", "tensorflow.compat.v1.keras")):
        return "tf.keras"
    return "keras"


# ----------------------------------------------------------------------- tables
STRATEGY_CLASSES = frozenset(
    "tensorflow.distribute." + n
    for n in (
        "MirroredStrategy",
        "OneDeviceStrategy",
        "MultiWorkerMirroredStrategy",
        "TPUStrategy",
        "Strategy",
        "experimental.MultiWorkerMirroredStrategy",
        "experimental.TPUStrategy",
        "experimental.ParameterServerStrategy",
        "ParameterServerStrategy",
        "experimental.CentralStorageStrategy",
        "CentralStorageStrategy",
    )
)
STRATEGY_GETTERS = frozenset({"tensorflow.distribute.get_strategy"})
MULTI_WORKER_STRATEGIES = frozenset(
    {
        "tensorflow.distribute.MultiWorkerMirroredStrategy",
        "tensorflow.distribute.experimental.MultiWorkerMirroredStrategy",
    }
)
PARAMETER_SERVER_STRATEGIES = frozenset(
    {
        "tensorflow.distribute.experimental.ParameterServerStrategy",
        "tensorflow.distribute.ParameterServerStrategy",
    }
)
TPU_STRATEGIES = frozenset(
    {"tensorflow.distribute.TPUStrategy", "tensorflow.distribute.experimental.TPUStrategy"}
)
# Strategies whose ``run`` goes through ``mirrored_run.call_for_each_replica``: called eagerly
# it warns "Using <Strategy> eagerly has significant overhead" and runs the replicas one by one.
MIRRORED_RUN_STRATEGIES = frozenset(
    {
        "tensorflow.distribute.MirroredStrategy",
        "tensorflow.distribute.MultiWorkerMirroredStrategy",
        "tensorflow.distribute.experimental.MultiWorkerMirroredStrategy",
        "tensorflow.distribute.experimental.CentralStorageStrategy",
        "tensorflow.distribute.CentralStorageStrategy",
    }
)

MODEL_FACTORIES = frozenset(
    {
        "keras.Sequential",
        "keras.Model",
        "keras.models.Sequential",
        "keras.models.Model",
        "keras.models.load_model",
        "keras.saving.load_model",
        "keras.models.clone_model",
        "keras.models.model_from_json",
        "keras.models.model_from_config",
    }
)
MODEL_BASES = frozenset({"keras.Model", "keras.models.Model", "keras.Sequential", "keras.models.Sequential"})
LAYER_BASES = frozenset({"keras.layers.Layer", "keras.Layer"})
CHECKPOINT_CLASSES = frozenset({"tensorflow.train.Checkpoint"})
CHECKPOINT_MANAGER_CLASSES = frozenset({"tensorflow.train.CheckpointManager"})
VARIABLE_CLASSES = frozenset({"tensorflow.Variable", "keras.Variable"})
GENERATOR_FACTORIES = frozenset(
    {
        "tensorflow.random.Generator",
        "tensorflow.random.Generator.from_seed",
        "tensorflow.random.Generator.from_non_deterministic_state",
        "tensorflow.random.Generator.from_state",
        "tensorflow.random.get_global_generator",
        "tensorflow.random.experimental.Generator",
        "tensorflow.random.experimental.Generator.from_seed",
        "tensorflow.random.experimental.Generator.from_non_deterministic_state",
    }
)
# tf.compat.v1 iterators of a dataset (canonical names: compat.v1 reduces to tensorflow.)
V1_ITERATOR_FACTORIES = frozenset({"tensorflow.data.make_one_shot_iterator", "tensorflow.data.make_initializable_iterator"})
V1_ITERATOR_METHODS = frozenset({"make_one_shot_iterator", "make_initializable_iterator"})
DATASET_FACTORIES = frozenset(
    {
        "tensorflow.data.Dataset.from_tensor_slices",
        "tensorflow.data.Dataset.from_tensors",
        "tensorflow.data.Dataset.range",
        "tensorflow.data.Dataset.from_generator",
        "tensorflow.data.Dataset.zip",
        "tensorflow.data.Dataset.list_files",
        "tensorflow.data.Dataset.load",
        "tensorflow.data.Dataset.sample_from_datasets",
        "tensorflow.data.Dataset.choose_from_datasets",
        "tensorflow.data.Dataset.random",
        "tensorflow.data.TFRecordDataset",
        "tensorflow.data.TextLineDataset",
        "tensorflow.data.FixedLengthRecordDataset",
        "tensorflow.data.experimental.make_csv_dataset",
        "tensorflow.data.experimental.CsvDataset",
        "tensorflow.data.experimental.load",
        "keras.utils.image_dataset_from_directory",
        "keras.utils.text_dataset_from_directory",
        "keras.utils.audio_dataset_from_directory",
        "keras.utils.timeseries_dataset_from_array",
        "keras.preprocessing.image_dataset_from_directory",
        "keras.preprocessing.text_dataset_from_directory",
        "keras.preprocessing.timeseries_dataset_from_array",
    }
)
# Dataset -> Dataset transformations (the receiver keeps being a plain dataset).
DATASET_METHODS = frozenset(
    {
        "batch", "map", "shuffle", "repeat", "prefetch", "filter", "take", "skip", "cache",
        "shard", "with_options", "unbatch", "rebatch", "padded_batch", "interleave",
        "flat_map", "apply", "concatenate", "enumerate", "window", "map_with_legacy_function",
        "ragged_batch", "bucket_by_sequence_length", "take_while", "scan", "unique",
        "group_by_window", "rejection_resample", "snapshot", "ignore_errors", "prefetch_to_device",
    }
)
THREAD_CLASSES = frozenset({"threading.Thread"})
EXECUTOR_CLASSES = frozenset(
    {
        "concurrent.futures.ThreadPoolExecutor",
        "concurrent.futures.thread.ThreadPoolExecutor",
        "multiprocessing.dummy.Pool",
        "multiprocessing.pool.ThreadPool",
    }
)
LOCK_CLASSES = frozenset(
    {
        "threading.Lock",
        "threading.RLock",
        "threading.Semaphore",
        "threading.BoundedSemaphore",
        "threading.Condition",
        "tensorflow.CriticalSection",
        "multiprocessing.dummy.Lock",
    }
)
TAPE_CLASSES = frozenset({"tensorflow.GradientTape"})
TF_FUNCTION = frozenset({"tensorflow.function", "tensorflow.autograph.experimental.do_not_convert"})
DEVICE_SCOPE = frozenset({"tensorflow.device"})
# Calls that look at (or constrain) the devices actually present.
DEVICE_QUERIES = frozenset(
    {
        "tensorflow.config.list_physical_devices",
        "tensorflow.config.experimental.list_physical_devices",
        "tensorflow.config.list_logical_devices",
        "tensorflow.config.experimental.list_logical_devices",
        "tensorflow.config.get_visible_devices",
        "tensorflow.config.experimental.get_visible_devices",
        "tensorflow.config.get_logical_device_configuration",
        "tensorflow.config.experimental.get_device_details",
        "tensorflow.config.set_soft_device_placement",
        "tensorflow.test.is_gpu_available",
        "tensorflow.test.gpu_device_name",
        "tensorflow.test.is_built_with_cuda",
        "tensorflow.python.client.device_lib.list_local_devices",
    }
)

SEED_SETTERS = frozenset(
    {
        "tensorflow.random.set_seed",
        "tensorflow.set_random_seed",
        "keras.utils.set_random_seed",
        "tensorflow.keras.utils.set_random_seed",
    }
)
STATEFUL_RNG_OPS = frozenset(
    "tensorflow." + n
    for n in (
        "random.normal", "random.uniform", "random.truncated_normal", "random.shuffle",
        "random.gamma", "random.poisson", "random.categorical", "random.experimental.stateless_shuffle_unused",
        "random.random_gamma", "random_normal", "random_uniform", "random_shuffle",
        "truncated_normal", "multinomial", "random.multinomial",
        "image.random_flip_left_right", "image.random_flip_up_down", "image.random_brightness",
        "image.random_contrast", "image.random_hue", "image.random_saturation", "image.random_crop",
        "image.random_jpeg_quality", "nn.dropout",
    )
)
STATELESS_RNG_PREFIX = "tensorflow.random.stateless_"
STATELESS_RNG_EXTRA = frozenset(
    {
        "tensorflow.image.stateless_random_flip_left_right",
        "tensorflow.image.stateless_random_flip_up_down",
        "tensorflow.image.stateless_random_brightness",
        "tensorflow.image.stateless_random_contrast",
        "tensorflow.image.stateless_random_crop",
        "tensorflow.image.stateless_random_hue",
        "tensorflow.image.stateless_random_saturation",
        "tensorflow.image.stateless_random_jpeg_quality",
        "tensorflow.nn.experimental.stateless_dropout",
    }
)

# strategy methods that run a function on every replica; TF 1.x's ``experimental_run(fn, iterator)``
# hands ``fn`` the iterator's next element instead of ``args=``
RUN_METHODS = frozenset({"run", "experimental_run_v2", "experimental_run"})
DISTRIBUTE_DATASET_METHODS = frozenset({"experimental_distribute_dataset"})
DISTRIBUTE_FN_METHODS = frozenset({"distribute_datasets_from_function", "experimental_distribute_datasets_from_function"})
DISTRIBUTE_VALUES_METHODS = frozenset({"experimental_distribute_values_from_function"})


def is_stateless_rng(q: str) -> bool:
    return q.startswith(STATELESS_RNG_PREFIX) or q in STATELESS_RNG_EXTRA


def _last(q: str) -> str:
    return q.rsplit(".", 1)[-1]


def kind_of_constructor(q: str) -> Optional[str]:
    """What calling the API ``q`` (canonical) creates, or None."""
    if q in STRATEGY_CLASSES or q in STRATEGY_GETTERS:
        return STRATEGY
    if q in MODEL_FACTORIES:
        return MODEL
    if q.startswith("keras.applications.") and _last(q)[:1].isupper():
        return MODEL
    if q.startswith("keras.layers.") and _last(q)[:1].isupper() and _last(q) not in ("Input", "InputSpec"):
        return LAYER
    if q.startswith("keras.optimizers.") and not q.startswith("keras.optimizers.schedules."):
        if _last(q)[:1].isupper() and _last(q) not in ("Optimizer",) or q == "keras.optimizers.get":
            return OPTIMIZER
    if q == "keras.mixed_precision.LossScaleOptimizer":
        return OPTIMIZER
    if q.startswith("keras.metrics.") and _last(q)[:1].isupper() and _last(q) != "Metric":
        return METRIC
    if q.startswith("keras.losses.") and _last(q)[:1].isupper() and _last(q) not in ("Loss", "Reduction"):
        return LOSS
    if q in CHECKPOINT_CLASSES:
        return CHECKPOINT
    if q in CHECKPOINT_MANAGER_CLASSES:
        return CHECKPOINT_MANAGER
    if q in VARIABLE_CLASSES:
        return VARIABLE
    if q in GENERATOR_FACTORIES:
        return GENERATOR
    if q in DATASET_FACTORIES:
        return DATASET
    if q in THREAD_CLASSES:
        return THREAD
    if q in EXECUTOR_CLASSES:
        return EXECUTOR
    if q in LOCK_CLASSES:
        return LOCK
    if q in TAPE_CLASSES:
        return TAPE
    return None


# ------------------------------------------------------------------ runtime initialisation
# Calls that initialise TensorFlow's eager context.  Once it is initialised,
# MultiWorkerMirroredStrategy (with TF_CONFIG) raises "RuntimeError: Collective ops must be
# configured at program startup".  Checked on TF 2.21: tensors, variables, tf.data datasets,
# Keras optimizers/metrics/built models, other strategies, list_logical_devices and summary
# writers initialise it; list_physical_devices, set_logical_device_configuration,
# set_visible_devices, tf.random.set_seed, unbuilt Keras layers/models, losses,
# tf.train.Checkpoint, cluster resolvers and tf.function definitions do not.
RUNTIME_INIT_CALLS = frozenset(
    {
        "tensorflow.config.list_logical_devices",
        "tensorflow.config.experimental.list_logical_devices",
        "tensorflow.summary.create_file_writer",
        "tensorflow.constant",
        "tensorflow.convert_to_tensor",
        "tensorflow.zeros",
        "tensorflow.ones",
        "tensorflow.fill",
        "tensorflow.range",
        "tensorflow.eye",
        "tensorflow.zeros_like",
        "tensorflow.ones_like",
        "tensorflow.one_hot",
        "tensorflow.linspace",
        "tensorflow.cast",
        "tensorflow.reshape",
        "tensorflow.concat",
        "tensorflow.stack",
        "tensorflow.matmul",
        "tensorflow.add",
        "tensorflow.multiply",
        "tensorflow.reduce_sum",
        "tensorflow.reduce_mean",
        "tensorflow.io.read_file",
        "tensorflow.saved_model.load",
    }
)
# Calls that start another process (which inherits os.environ).
PROCESS_LAUNCHERS = frozenset(
    {
        "subprocess.Popen", "subprocess.run", "subprocess.call", "subprocess.check_call",
        "subprocess.check_output", "os.system", "os.popen", "os.execv", "os.execve", "os.execl",
        "os.spawnv", "os.spawnl", "multiprocessing.Process", "multiprocessing.get_context",
    }
)
RUNTIME_INIT_PREFIXES = ("tensorflow.math.", "tensorflow.linalg.", "tensorflow.image.", "keras.ops.")
RUNTIME_INIT_KINDS = frozenset({VARIABLE, DATASET, OPTIMIZER, METRIC, GENERATOR})


def initializes_runtime(q: str) -> bool:
    """Calling the API ``q`` (canonical) initialises the TensorFlow runtime (see above).
    Keras models count only when built, which depends on the arguments: not decided here."""
    if q in RUNTIME_INIT_CALLS or q.startswith(RUNTIME_INIT_PREFIXES) or q in STATEFUL_RNG_OPS:
        return True
    if is_stateless_rng(q):
        return True
    kind = kind_of_constructor(q)
    if kind in RUNTIME_INIT_KINDS:
        return True
    if kind == STRATEGY and q not in MULTI_WORKER_STRATEGIES and q not in STRATEGY_GETTERS \
            and q != "tensorflow.distribute.Strategy":
        return True
    return False

# Attributes of a Keras model or layer that hold its variables.
VARIABLE_LIST_ATTRS = frozenset({"trainable_variables", "variables", "weights", "trainable_weights",
                                 "non_trainable_variables", "non_trainable_weights"})
VARIABLE_ATTRS = frozenset({"kernel", "bias", "embeddings", "gamma", "beta", "moving_mean", "moving_variance"})
