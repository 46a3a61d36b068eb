"""Core child-side patches shared by every probe.

* strategy constructors: give device-less strategies the configured devices,
  keep the verifier's ``TF_CONFIG`` for ``MultiWorkerMirroredStrategy``,
  record every strategy created;
* ``Strategy.run``: record each call (site, strategy, eager or traced), let
  probes wrap the replica function, count steps;
* ``tf.function`` calls: count calls of functions that contain
  ``strategy.run`` (custom training steps) and stop after ``max_steps``;
* Keras ``fit``/``evaluate``/``predict``: one epoch of at most ``max_steps``
  steps;
* AutoGraph: remember the source map of converted script functions so stack
  frames in generated code map back to script lines.
"""
from __future__ import annotations

import inspect
import os
import threading
from typing import Any, Callable

from tfpar_lint.verify.runtime import Recorder, VerifierStop, patch, try_import, when_imported

# Probes append callables ``wrap(fn, call) -> fn`` applied to each replica fn.
RUN_WRAPPERS: list[Callable[[Callable, dict], Callable]] = []


def install(R: Recorder, tf_config: str | None, split_gpu: bool) -> None:
    _install_autograph_map(R)
    _install_strategies(R, tf_config, split_gpu)
    _install_run(R)
    _install_function_steps(R)
    _install_iterator_bounds(R)
    when_imported("keras.src.backend.tensorflow.trainer", lambda m: _install_keras3_bounds(R, m))
    when_imported("tf_keras.src.engine.training", lambda m: _install_tf_keras_bounds(R, m))


# ---------------------------------------------------------------- autograph
def _install_autograph_map(R: Recorder) -> None:
    from tensorflow.python.autograph.impl import api

    def make(orig):
        def _convert_actual(entity, program_ctx):
            out = orig(entity, program_ctx)
            sm = getattr(out, "ag_source_map", None) or {}
            try:
                for loc, origin in sm.items():
                    if os.path.realpath(origin.loc.filename) == R.script:
                        R.ag_map[(loc.filename, loc.lineno)] = origin.loc.lineno
                        R.ag_files.add(loc.filename)
            except Exception:  # pragma: no cover
                pass
            return out

        return _convert_actual

    patch(api, "_convert_actual", make)


# --------------------------------------------------------------- strategies
def _install_strategies(R: Recorder, tf_config: str | None, split_gpu: bool) -> None:
    from tensorflow.python.distribute import mirrored_strategy

    def make_mirrored(orig):
        def __init__(self, container_strategy, devices=None, cross_device_ops=None):
            if R.devices and not R.worker_mode:
                if devices is None:
                    devices = list(R.devices)
                    R.note(f"MirroredStrategy() given the verifier's devices {_short(devices)}")
                else:
                    devices = _remap_devices(R, devices)
                if cross_device_ops is None and split_gpu:
                    import tensorflow as tf

                    cross_device_ops = tf.distribute.HierarchicalCopyAllReduce()
            orig(self, container_strategy, devices=devices, cross_device_ops=cross_device_ops)

        return __init__

    patch(mirrored_strategy.MirroredExtended, "__init__", make_mirrored)

    cs = try_import("tensorflow.python.distribute.central_storage_strategy")
    if cs is not None:
        def make_central(orig):
            def __init__(self, compute_devices=None, parameter_device=None):
                if R.devices and not R.worker_mode and compute_devices is None:
                    compute_devices = list(R.devices)
                    R.note(f"CentralStorageStrategy() given the verifier's devices {_short(compute_devices)}")
                orig(self, compute_devices=compute_devices, parameter_device=parameter_device)
                R.register_strategy(self)

            return __init__

        patch(cs.CentralStorageStrategy, "__init__", make_central)

    from tensorflow.python.distribute import distribute_lib

    # Register every non-default strategy once constructed (its creation line).
    def make_strategy_init(orig):
        def __init__(self, extended):
            orig(self, extended)
            try:
                R.register_strategy(self, R.script_lines(2))
            except Exception:  # pragma: no cover
                pass

        return __init__

    patch(distribute_lib.Strategy, "__init__", make_strategy_init)
    patch(distribute_lib.StrategyV1, "__init__", make_strategy_init)

    car = try_import("tensorflow.python.distribute.collective_all_reduce_strategy")
    if car is not None and tf_config:
        def make_mwms(orig):
            def __init__(self, cluster_resolver=None, communication_options=None):
                # What TF_CONFIG the strategy is created under: the verifier's (set before the script),
                # the script's own (replaced by the verifier's local cluster), or none yet (a script that
                # writes its own TF_CONFIG runs without the verifier's: created before that write, the
                # strategy is a single worker, as it would be without the verifier).
                own = os.environ.get("TF_CONFIG")
                R.tf_config_at_creation.append({"lines": R.script_lines(2)[:4], "script_tf_config": own != tf_config
                                                and own is not None, "unset": own is None})
                if cluster_resolver is None and own is not None and own != tf_config:
                    os.environ["TF_CONFIG"] = tf_config
                    R.note("the script's TF_CONFIG was replaced by the verifier's local cluster")
                orig(self, cluster_resolver=cluster_resolver, communication_options=communication_options)

            return __init__

        patch(car.CollectiveAllReduceStrategy, "__init__", make_mwms)
        if R.load_scale > 1:
            _scale_coordination(R.load_scale)


COORDINATION_DEFAULT_MS = 10_000  # TensorFlow's shutdown-barrier time-out (the TSL default)


def _scale_coordination(scale: float) -> None:
    """On a busy machine a worker reaches the end of a correct script later than its peer waits for
    it at the shutdown barrier (the work after the last collective stretches with the load), and the
    cluster falls apart: the local cluster's coordination service gets that time-out scaled with the
    load (where the strategy leaves it at TensorFlow's default).  The heartbeat time-out is left as it
    is: a busy machine delays a thread by milliseconds, not by 10 s, and a longer one would only make
    every worker whose peer has gone wait longer."""
    from tensorflow.python.eager import context as context_mod

    ms = int(COORDINATION_DEFAULT_MS * scale)
    order = ("service_type", "service_leader", "enable_health_check", "cluster_register_timeout_in_ms",
             "heartbeat_timeout_in_ms", "shutdown_barrier_timeout_in_ms")

    def make(orig):
        def configure_coordination_service(self, *args, **kwargs):
            for name in ("shutdown_barrier_timeout_in_ms",):
                if len(args) <= order.index(name) and not kwargs.get(name):
                    kwargs[name] = ms
            return orig(self, *args, **kwargs)

        return configure_coordination_service

    patch(context_mod.Context, "configure_coordination_service", make)


def _short(devs) -> str:
    return "[" + ", ".join(str(d).split("device:")[-1] for d in devs) + "]"


def _remap_devices(R: Recorder, devices):
    """Explicit GPU devices on a machine configured with CPUs only: use the
    configured devices instead (same count when available) and say so."""
    try:
        devs = [str(d) for d in (devices if isinstance(devices, (list, tuple)) else [devices])]
    except Exception:  # pragma: no cover
        return devices
    if any("GPU" in d.upper() for d in devs) and not any("GPU" in d.upper() for d in R.devices):
        new = list(R.devices[: max(1, len(devs))])
        R.note(f"MirroredStrategy devices {devs} are not available; used {_short(new)}")
        return new
    return devices


# ---------------------------------------------------------------- strategy.run
class _FnStack(threading.local):
    def __init__(self):
        self.stack: list[Any] = []  # the tf.function calls in progress, outermost first
        self.fed: list[bool] = []  # whether each was called with elements of a tf.data dataset


_FN = _FnStack()


_CLONES = None  # weakref.WeakKeyDictionary: tf.function -> {id(strategy): wrapped clone}


def _wrapped_function(strategy, fn, call, ag_api, ag_ctx):
    import weakref

    global _CLONES
    if _CLONES is None:
        _CLONES = weakref.WeakKeyDictionary()
    per = _CLONES.setdefault(fn, {})
    clone = per.get(id(strategy))
    if clone is None:
        # Like TensorFlow's own lifting, the replicas call the Python function
        # unconverted (converting Keras internals would put merge_call in a cond).
        inner = fn.python_function
        for w in RUN_WRAPPERS:
            inner = w(inner, call)
        from tensorflow.python.util import tf_decorator

        # Built like tf.function's result (a tf_decorator around the Function) so
        # that strategy.run's tf_convert re-wraps it and keeps it a Function.
        clone = tf_decorator.make_decorator(inner, fn._clone(python_function=inner))  # noqa: SLF001
        per[id(strategy)] = clone
    return clone


def _install_run(R: Recorder) -> None:
    from tensorflow.python.autograph.core import ag_ctx
    from tensorflow.python.autograph.impl import api as ag_api
    from tensorflow.python.distribute import distribute_lib
    from tensorflow.python.eager import context
    from tensorflow.python.eager.polymorphic_function import polymorphic_function as pf

    def make(orig):
        def run(self, fn, args=(), kwargs=None, options=None):
            if isinstance(self, distribute_lib._DefaultDistributionStrategy):  # noqa: SLF001
                return orig(self, fn, args=args, kwargs=kwargs, options=options)
            eager = context.executing_eagerly()
            with R.lock:
                R.run_calls += 1
                call = {
                    "arg_kind": _arg_kind(args, kwargs),
                    # the replicas got elements of a tf.data dataset (tagged where it was iterated), not a
                    # value the script built: known by where the objects came from, not by their values
                    "from_data": R.from_data((args, kwargs)) or _from_iterator_op(args, kwargs) or bool(
                        _FN.stack and _FN.fed and _FN.fed[0]),
                    "index": R.run_calls,
                    "strategy": R.strategy_index(self),
                    "lines": R.script_lines(2),
                    "eager": eager,
                    "keras": bool(R.keras_loop_depth),
                    "name": getattr(fn, "__name__", type(fn).__name__),
                }
            site = str(call["lines"][0]) if call["lines"] else "?"
            with R.lock:
                counts = R.run_sites.setdefault(site, {"eager": 0, "traced": 0, "keras": 0, "trains": 0})
                counts["keras" if call["keras"] else ("eager" if eager else "traced")] += 1
            grads = R.replica_gradients
            user_fn = fn
            if RUN_WRAPPERS and isinstance(fn, pf.Function):
                # TensorFlow lifts a tf.function passed to strategy.run around the
                # whole per-replica call (a nested tf.function cannot merge_call);
                # keep that: clone it with the wrapped Python function (cached).
                fn = _wrapped_function(self, fn, call, ag_api, ag_ctx)
            elif RUN_WRAPPERS:
                fn = ag_api.tf_convert(fn, ag_ctx.control_status_ctx(), convert_by_default=False)
                for w in RUN_WRAPPERS:
                    fn = w(fn, call)
                fn = ag_api.do_not_convert(fn)
            stack = _FN.stack
            key = ("run", getattr(getattr(user_fn, "__code__", None), "co_filename", ""),
                   getattr(getattr(user_fn, "__code__", None), "co_firstlineno", id(user_fn)))
            if stack:
                R.step_functions.add(id(stack[0]))
                before, R.tracing_step = R.tracing_step, stack[0]  # seen from the replica threads
                try:
                    out = orig(self, fn, args=args, kwargs=kwargs, options=options)
                except Exception as e:
                    R.record_caught(e, "strategy.run")
                    raise
                finally:
                    R.tracing_step = before
                if R.replica_gradients > grads:
                    with R.lock:
                        counts["trains"] += 1
                return out
            if eager:
                R.before_step(key, f"strategy.run({call['name']})")
            try:
                out = orig(self, fn, args=args, kwargs=kwargs, options=options)
            except Exception as e:
                R.record_caught(e, "strategy.run")
                raise
            if R.replica_gradients > grads:  # the replica function computed gradients: a training step
                with R.lock:
                    counts["trains"] += 1
            if eager:
                R.after_step(key, f"strategy.run({call['name']})")
            return out

        return run

    patch(distribute_lib.StrategyBase, "run", make)

    from tensorflow.python.eager import backprop

    def make_gradient(orig):
        def gradient(self, *a, **k):
            if R.in_replica_fn():
                with R.lock:
                    R.replica_gradients += 1
            return orig(self, *a, **k)

        return gradient

    patch(backprop.GradientTape, "gradient", make_gradient)

    def make_enter(orig):
        def __enter__(self):
            try:
                return orig(self)
            except Exception as e:
                R.record_caught(e, "strategy.scope()")
                raise

        return __enter__

    patch(distribute_lib._CurrentDistributionContext, "__enter__", make_enter)  # noqa: SLF001


_ITERATOR_OPS = ("IteratorGetNext", "IteratorGetNextSync", "OptionalGetValue")


def _from_iterator_op(args, kwargs) -> bool:
    """A traced argument produced by an iterator's get-next op (``next(iter(ds))`` inside the tf.function)."""
    import tensorflow as tf

    try:
        flat = tf.nest.flatten((args, kwargs or {}), expand_composites=False)
        return any(isinstance(x, tf.Tensor) and not hasattr(x, "numpy") and getattr(getattr(x, "op", None), "type",
                                                                                    "") in _ITERATOR_OPS for x in flat)
    except Exception:  # pragma: no cover
        return False


def _arg_kind(args, kwargs) -> str:
    import tensorflow as tf

    try:
        flat = tf.nest.flatten((args, kwargs or {}), expand_composites=False)
    except Exception:  # pragma: no cover
        return "none"
    if any(isinstance(x, tf.distribute.DistributedValues) for x in flat):
        return "distributed"
    if any(isinstance(x, tf.Tensor) or hasattr(x, "__array__") for x in flat):
        return "plain"
    return "none"


def _install_function_steps(R: Recorder) -> None:
    from tensorflow.python.eager.polymorphic_function import polymorphic_function as pf

    def make(orig):
        def __call__(self, *args, **kwds):
            stack = _FN.stack
            outer = not stack
            key = ("fn", id(self))
            name = getattr(self, "_name", None) or getattr(self, "__name__", "tf.function")
            if outer and id(self) in R.step_functions:
                R.before_step(key, name)
            stack.append(self)
            _FN.fed.append(R.from_data((args, kwds)) if outer else False)
            try:
                out = orig(self, *args, **kwds)
            except Exception as e:
                if outer and R.in_main_thread():
                    R.record_fn_error(e, str(name))
                raise
            finally:
                stack.pop()
                _FN.fed.pop()
            if outer and id(self) in R.step_functions:
                R.after_step(key, name)
            return out

        return __call__

    patch(pf.Function, "__call__", make)


# --------------------------------------------------------- iterator bounds
MAX_LOOP_CUTS = 10


def _install_iterator_bounds(R: Recorder) -> None:
    """Python loops of the script over a (distributed) dataset end after
    ``max_steps`` elements, so code after a loop still runs (a mistake there is seen
    whether or not the linter flagged it); after ``MAX_LOOP_CUTS`` cut loops (epochs)
    the script is stopped once no flagged line is pending."""
    from tensorflow.python.data.ops import dataset_ops, iterator_ops
    from tensorflow.python.distribute import input_lib
    from tensorflow.python.eager import context

    def make_iter(orig):
        def __iter__(self):
            it = orig(self)
            try:
                if isinstance(it, iterator_ops.OwnedIterator) and context.executing_eagerly():
                    # elements are tagged (dataset, position, line of the iter()) by identity
                    it._tfpar_origin = [id(self), 0, R.direct_caller_line(2, own_is_transparent=True)]
                    R.keep(self)
                if (context.executing_eagerly() and not R.keras_loop_depth and R.in_main_thread()
                        and R.direct_caller_line(2) is not None):
                    it._tfpar_budget = R.max_steps
            except Exception:  # pragma: no cover
                pass
            return it

        return __iter__

    def make_next(orig):
        def __next__(self):
            b = getattr(self, "_tfpar_budget", None)
            if b is not None and R.in_main_thread():
                if b <= 0:
                    # Cut the loop, so that the code after it (and any mistake there) still runs;
                    # a script that keeps looping (epochs of cut loops) is stopped after
                    # MAX_LOOP_CUTS of them, or at once when a flagged line is still to come later.
                    R.loop_cuts = getattr(R, "loop_cuts", 0) + 1
                    if R.loop_cuts > MAX_LOOP_CUTS and R.agree(f"cut-{R.loop_cuts}", not R.pending()):
                        R.stop_reason = f"stopped after {MAX_LOOP_CUTS} dataset loops cut at {R.max_steps} elements"
                        raise VerifierStop(R.stop_reason)
                    R.note(f"dataset loops cut after {R.max_steps} elements")
                    raise StopIteration
                self._tfpar_budget = b - 1
            out = orig(self)
            if isinstance(self, iterator_ops.OwnedIterator):  # an element of a plain (not distributed) dataset
                origin = getattr(self, "_tfpar_origin", None)
                if origin is not None:
                    origin[1] += 1
                R.tag_data(out, tuple(origin) if origin is not None else None)
            return out

        return __next__

    for cls in (input_lib.DistributedDataset, input_lib.DistributedDatasetsFromFunction, dataset_ops.DatasetV2):
        if "__iter__" in cls.__dict__:
            patch(cls, "__iter__", make_iter)
    for cls in (input_lib.DistributedIteratorBase, iterator_ops.OwnedIterator):
        if "__next__" in cls.__dict__:
            patch(cls, "__next__", make_next)


# -------------------------------------------------------------- keras bounds
def _bounded(R: Recorder, orig, kind: str):
    sig = inspect.signature(orig)

    def wrapper(self, *args, **kwargs):
        try:
            ba = sig.bind(self, *args, **kwargs)
        except TypeError:
            return orig(self, *args, **kwargs)
        a = ba.arguments
        n = R.max_steps
        # With arrays and no batch_size, Keras derives the batch size from the
        # number of steps (ceil(samples / steps)): pin Keras' default first.
        if a.get("batch_size") is None and _array_like(a.get("x")):
            a["batch_size"] = 32
        if kind == "fit":
            initial = a.get("initial_epoch", 0) or 0
            epochs = a.get("epochs", 1) or 1
            # Every epoch still runs (callbacks that write one file per epoch,
            # code that reads the last one), each cut to max_steps steps.
            if epochs - initial > MAX_EPOCHS:
                a["epochs"] = initial + MAX_EPOCHS
                R.note(f"Keras fit cut to {MAX_EPOCHS} epochs")
            spe = a.get("steps_per_epoch")
            if spe is None or spe > n:
                a["steps_per_epoch"] = n
            if a.get("validation_data") is not None or (a.get("validation_split") or 0) > 0:
                vs = a.get("validation_steps")
                if vs is None or vs > n:
                    a["validation_steps"] = n
                if a.get("validation_batch_size") is None and _array_like(a.get("validation_data")):
                    a["validation_batch_size"] = a["batch_size"] or 32
            R.note(f"Keras fit bounded to {n} steps per epoch")
        else:
            st = a.get("steps")
            if st is None or st > n:
                a["steps"] = n
        R.keras_loop_depth += 1
        try:
            return orig(*ba.args, **ba.kwargs)
        finally:
            R.keras_loop_depth -= 1
            R.keras_steps = getattr(R, "keras_steps", 0) + (n if kind == "fit" else 0)

    return wrapper


MAX_EPOCHS = 10


def _array_like(x) -> bool:
    """numpy arrays / tensors (or tuples, lists, dicts of them): not a dataset or generator."""
    if x is None:
        return False
    if isinstance(x, (list, tuple)):
        return bool(x) and all(_array_like(v) for v in x)
    if isinstance(x, dict):
        return bool(x) and all(_array_like(v) for v in x.values())
    return hasattr(x, "shape") and hasattr(x, "dtype") and not hasattr(x, "element_spec")


def _install_keras3_bounds(R: Recorder, mod) -> None:
    cls = getattr(mod, "TensorFlowTrainer", None)
    if cls is None:
        return
    for kind in ("fit", "evaluate", "predict"):
        patch(cls, kind, lambda orig, k=kind: _bounded(R, orig, k))


def _install_tf_keras_bounds(R: Recorder, mod) -> None:
    cls = getattr(mod, "Model", None)
    if cls is None:
        return
    for kind in ("fit", "evaluate", "predict"):
        patch(cls, kind, lambda orig, k=kind: _bounded(R, orig, k))
