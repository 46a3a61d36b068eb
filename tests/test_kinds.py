"""The kinds module (semantic/kinds.py): what a value is, from its origin where the analysis knows it
and from its uses where it does not.  These tests ask about kinds, never about rule codes."""
from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import Module


def module(src: str) -> Module:
    src = textwrap.dedent(src)
    return Module(cst.parse_module(src), src)


def kinds_of(m: Module, call_text: str, which: str = "recv") -> set[str]:
    """Kinds of the receiver (``which="recv"``), the callee (``"func"``) or argument N of the first
    call whose text starts with ``call_text``."""
    for cs in m.calls:
        if m.tree.code_for_node(cs.node).startswith(call_text):
            f = cs.node.func
            e = f.value if which == "recv" else f if which == "func" else cs.node.args[int(which)].value
            return {v.kind for v in m.infer_at(e, cs)}
    raise AssertionError(f"no call {call_text!r}")


def test_a_network_trained_through_the_tape_and_apply_gradients_is_a_model_and_its_stepper_an_optimizer():
    m = module("""
        import tensorflow as tf
        from zoo import build, make_opt
        net = build()
        opt = make_opt()
        def step(x):
            with tf.GradientTape() as tape:
                loss = net(x)
            grads = tape.gradient(loss, net.trainable_variables)
            opt.apply_gradients(zip(grads, net.trainable_variables))
        use(net, opt)
    """)
    assert kinds_of(m, "use(", "0") == {api.MODEL}
    assert kinds_of(m, "use(", "1") == {api.OPTIMIZER}


def test_a_callable_given_gradient_variable_pairs_is_an_optimizer():
    m = module("""
        from wrappers import Stepper
        stepper = Stepper(cfg)
        def step(model, grads):
            stepper(zip(grads, model.trainable_variables))
        use(stepper)
    """)
    assert kinds_of(m, "use(", "0") == {api.OPTIMIZER}


@pytest.mark.parametrize("meth", ["with_options(opts)", "batch(32)", "shuffle(1024)", "prefetch(2)"])
def test_tf_data_methods_make_a_dataset(meth):
    m = module(f"""
        from loaders import load
        ds = load("train")
        ds = ds.{meth}
        use(ds)
    """)
    assert kinds_of(m, "use(", "0") == {api.DATASET}


def test_a_callable_whose_result_is_distributed_returns_datasets():
    m = module("""
        import tensorflow as tf
        from data import Loader
        strategy = tf.distribute.MirroredStrategy()
        loader = Loader(cfg)
        dist = strategy.experimental_distribute_dataset(loader("train", 32))
        plain = loader("train", 64)
        use(plain)
    """)
    assert kinds_of(m, "use(", "0") == {api.DATASET}


def test_metric_and_variable_by_their_uses():
    m = module("""
        from lib import make_metric, make_counter
        acc = make_metric()
        n = make_counter()
        def step(y, p):
            acc.update_state(y, p)
            n.assign_add(1)
        use(acc, n)
    """)
    assert kinds_of(m, "use(", "0") == {api.METRIC}
    assert kinds_of(m, "use(", "1") == {api.VARIABLE}


def test_a_name_bound_nowhere_is_a_value_whose_kind_comes_from_use():
    """``from helpers import *``: the names it brings are unknown values with an identity."""
    m = module("""
        from helpers import *
        with strategy.scope():
            pass
        it = iter(make_data())
        use(strategy, next(it))
    """)
    assert kinds_of(m, "use(", "0") == {api.STRATEGY}
    assert kinds_of(m, "use(", "1") == {api.BATCH}  # drawn from what a call made, as with an explicit import


def test_an_attribute_of_an_object_of_unknown_class_gets_its_kind_from_use():
    m = module("""
        import tensorflow as tf
        class Trainer(Base):
            def step(self, x):
                with tf.GradientTape() as tape:
                    loss = self.net(x)
                grads = tape.gradient(loss, self.net.trainable_variables)
                self.opt.apply_gradients(zip(grads, self.net.trainable_variables))
                use(self.net, self.opt)
    """)
    assert kinds_of(m, "use(", "0") == {api.MODEL}
    assert kinds_of(m, "use(", "1") == {api.OPTIMIZER}


def test_an_object_used_as_two_kinds_stays_unknown():
    m = module("""
        import lib
        both = lib.make()
        both.batch(32)
        both.apply_gradients([])
        use(both)
    """)
    assert kinds_of(m, "use(", "0") == {api.UNKNOWN}


def test_a_parameter_distributed_somewhere_is_not_made_a_dataset_everywhere():
    """A parameter (or another object's attribute) that some method distributes may be distributed
    before every use: being distributed does not make it a plain dataset."""
    m = module("""
        class T:
            def __init__(self, dataset, strategy):
                self.dataset = dataset
                self.strategy = strategy
            def go(self):
                self.dataset = self.strategy.experimental_distribute_dataset(self.dataset)
            def loop(self):
                use(self.dataset)
    """)
    assert api.DATASET not in kinds_of(m, "use(", "0")


def test_a_numpy_batch_keeps_its_kind_through_slicing_and_astype():
    m = module("""
        import numpy as np
        x = np.load("x.npy")
        part = x[:32].astype("float32")
        use(part)
    """)
    cs = next(c for c in m.calls if m.tree.code_for_node(c.node).startswith("use("))
    assert all(m.kinds.is_array(v) for v in m.infer_at(cs.node.args[0].value, cs))


def test_the_values_of_a_dict_iterated_by_items():
    m = module("""
        import tensorflow as tf
        s = tf.distribute.MirroredStrategy()
        d = {"clean": s.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(2))}
        for name, ds in d.items():
            use(ds)
    """)
    assert kinds_of(m, "use(", "0") == {api.DIST_DATASET}


def test_items_of_containers_taken_from_a_loop_over_a_list_of_them():
    """``for t, metrics in zip(ts, all_metrics): metrics["acc"].update_state(...)`` where each element of
    ``all_metrics`` is a dict literal appended in another loop: the dict's entry."""
    m = module("""
        import tensorflow as tf
        all_metrics = []
        for _ in range(3):
            metrics = {"acc": tf.keras.metrics.Mean()}
            all_metrics.append(metrics)
        for t, metrics in zip(range(3), all_metrics):
            use(metrics["acc"])
    """)
    assert kinds_of(m, "use(", "0") == {api.METRIC}


_EPOCH = textwrap.dedent("""
    import tensorflow as tf
    s = tf.distribute.MirroredStrategy()
    dist = s.experimental_distribute_dataset(tf.data.Dataset.range(8).batch(4))
    def epoch(ds):
        for batch in ds:
            s.run(step, args=(batch,))
""")


def _batch_kinds(m: Module) -> set[str]:
    """Kinds of what ``s.run`` hands the replicas in the module above."""
    for cs in m.calls:
        if m.tree.code_for_node(cs.node).startswith("s.run("):
            el = cs.node.args[1].value.elements[0].value
            return {v.kind for v in m.infer_at(el, cs)}
    raise AssertionError("no s.run")


@pytest.mark.parametrize("wrap", ["fast = tf.function(epoch)\nfast(dist)",
                                  "if flag:\n    epoch = tf.function(epoch)\nepoch(dist)",
                                  "epoch = tf.function(epoch, jit_compile=True)\nepoch(dist)"])
def test_a_function_called_through_its_tf_function_wrapper_gets_the_callers_arguments(wrap):
    assert _batch_kinds(module(_EPOCH + wrap + "\n")) == {api.DIST_VALUES}


def test_a_tf_function_wrapper_handed_to_unseen_code_leaves_the_parameter_unknown():
    m = module(_EPOCH + "fast = tf.function(epoch)\nfast(dist)\nregister(fast)\n")
    assert api.DIST_VALUES not in _batch_kinds(m)


@pytest.mark.parametrize("make", ["s.make_dataset_iterator(tf.data.Dataset.range(8).batch(4))",
                                  "s.make_input_fn_iterator(lambda ctx: tf.data.Dataset.range(8))"])
def test_a_strategys_own_iterator_is_a_distributed_iterator(make):
    m = module(f"""
        import tensorflow as tf
        s = tf.compat.v1.distribute.MirroredStrategy()
        it = {make}
        use(it)
    """)
    assert kinds_of(m, "use(", "0") == {api.DIST_ITERATOR}


def test_minimize_over_a_networks_variables_makes_a_model_and_an_optimizer():
    m = module("""
        import tensorflow as tf
        from zoo import build, make_opt
        net = build()
        opt = make_opt()
        def step(x):
            with tf.GradientTape() as tape:
                loss = net(x)
            opt.minimize(loss=loss, var_list=net.trainable_variables, tape=tape)
        use(net, opt)
    """)
    assert kinds_of(m, "use(", "0") == {api.MODEL}
    assert kinds_of(m, "use(", "1") == {api.OPTIMIZER}


def test_reset_states_of_a_network_whose_variables_are_trained_leaves_it_a_model():
    m = module("""
        import tensorflow as tf
        from zoo import build, make_metric
        net = build()
        acc = make_metric()
        def step(x):
            with tf.GradientTape() as tape:
                loss = net(x)
            grads = tape.gradient(loss, net.trainable_variables)
        net.reset_states()
        acc.reset_states()
        use(net, acc)
    """)
    assert kinds_of(m, "use(", "0") == {api.MODEL}
    assert kinds_of(m, "use(", "1") == {api.METRIC}


def test_a_base_class_method_named_through_super_is_that_function():
    m = module("""
        import tensorflow as tf
        class Trainer:
            def _step(self, x):
                return x
        class MirroredTrainer(Trainer):
            def __init__(self):
                self._strategy = tf.distribute.MirroredStrategy()
            def _step(self, x):
                return self._strategy.run(super()._step, args=(x,))
    """)
    for cs in m.calls:
        if m.tree.code_for_node(cs.node).startswith("self._strategy.run("):
            fns = m.resolve_function(cs.node.args[0].value, cs.scope, cs.order)
            assert [(f.name, f.cls.name) for f in fns] == [("_step", "Trainer")]
            break
    else:
        raise AssertionError("no run")


def test_a_function_a_coordinator_schedules_gets_each_workers_distributed_batches():
    m = module("""
        import tensorflow as tf
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        def dataset_fn():
            return strategy.distribute_datasets_from_function(make)
        per_worker = coordinator.create_per_worker_dataset(dataset_fn)
        it = iter(per_worker)
        @tf.function
        def step_fn(iterator):
            batch, labels = next(iterator)
            return strategy.run(replica_fn, args=(batch, labels))
        coordinator.schedule(step_fn, args=(it,))
        use(per_worker, it)
    """)
    assert kinds_of(m, "use(", "0") == {api.DIST_DATASET}
    assert kinds_of(m, "use(", "1") == {api.DIST_ITERATOR}
    for cs in m.calls:
        if m.tree.code_for_node(cs.node).startswith("strategy.run("):
            el = cs.node.args[1].value.elements[0].value
            assert {v.kind for v in m.infer_at(el, cs)} == {api.DIST_VALUES}
            break
    else:
        raise AssertionError("no strategy.run")


def test_a_test_cases_framework_methods_are_the_frameworks():
    m = module("""
        import tensorflow as tf
        class Base(tf.test.TestCase):
            pass
        class T(Base):
            def test_x(self):
                self.assertAllEqual(1, 1)
                self.helper(2)
    """)
    assert [v.qname for v in m.infer(cst.parse_expression("self.assertAllEqual"), _method_scope(m, "test_x"), 10**6)] \
        == ["tensorflow.test.TestCase.assertAllEqual"]
    assert kinds_of(m, "self.assertAllEqual(", "func") == {api.API}
    assert api.API not in kinds_of(m, "self.helper(", "func")


def _method_scope(m: Module, name: str):
    return next(f.scope for f in m.functions if f.name == name)
