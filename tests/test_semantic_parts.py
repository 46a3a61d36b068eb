"""Each part of the semantic model on its own (bindings, values, callgraph, contexts, flow,
environment), on small modules built here."""
from __future__ import annotations

import libcst as cst
import pytest

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import Module, names_read
from tfpar_lint.semantic.values import MAX_DEPTH


def module(src: str) -> Module:
    return Module(cst.parse_module(src), src)


def call_site(m: Module, text: str):
    """The first call site whose source text starts with ``text``."""
    for cs in m.calls:
        if m.tree.code_for_node(cs.node).startswith(text):
            return cs
    raise AssertionError(f"no call {text!r}")


def kinds_at(m: Module, text: str, expr_of=lambda call: call) -> set[str]:
    cs = call_site(m, text)
    return {v.kind for v in m.infer_at(expr_of(cs.node), cs)}


# ------------------------------------------------------------------ bindings
def test_lookup_takes_the_binding_before_the_point_and_skips_class_bodies():
    m = module("x = 1\nx = f()\nclass C:\n    x = 2\n    def g(self):\n        return x\n")
    ret = m.functions[0].returns[0]
    # from inside a function, every module-level binding may be the one (the call can come later)
    got = m.lookup("x", m.functions[0].scope, ret[1])
    assert [m.tree.code_for_node(b.value) for b in got] == ["1", "f()"] and all(b.scope is m.scope for b in got)
    before = m.lookup("x", m.scope, m.module_bindings_in_order[1].order)
    assert [m.tree.code_for_node(x.value) for x in before] == ["1"]


def _reaching_values(src: str) -> list[str]:
    """The right-hand sides ``x`` may hold at ``use(x)``."""
    m = module(src)
    cs = call_site(m, "use(")
    return sorted(m.tree.code_for_node(b.value) for b in m.lookup("x", cs.scope, cs.order))


@pytest.mark.parametrize("src,values", [
    # both branches of an if/else (and of an elif chain) reach the use after it
    ("if c:\n    x = a()\nelse:\n    x = b()\nuse(x)\n", ["a()", "b()"]),
    ("if c:\n    x = a()\nelif d:\n    x = b()\nelse:\n    x = e()\nuse(x)\n", ["a()", "b()", "e()"]),
    # a branch without else: the binding before the if reaches too; nothing older does
    ("x = z()\nx = a()\nif c:\n    x = b()\nuse(x)\n", ["a()", "b()"]),
    # a use inside the branch sees that branch's binding only
    ("x = a()\nif c:\n    x = b()\n    use(x)\n", ["b()"]),
    # the other branch of an if the use is in does not reach it
    ("if c:\n    x = a()\nelse:\n    x = b()\n    use(x)\n", ["b()"]),
    # nested: the outer if has no else, so the binding before it reaches too
    ("x = z()\nif c:\n    if d:\n        x = a()\n    else:\n        x = b()\nuse(x)\n", ["a()", "b()", "z()"]),
])
def test_bindings_on_two_paths_both_reach_the_use(src, values):
    assert _reaching_values(src) == values


def test_strategy_chosen_on_two_branches_has_both_values():
    m = module("import tensorflow as tf\n"
               "if n > 1:\n    s = tf.distribute.MirroredStrategy()\n"
               "else:\n    s = tf.distribute.OneDeviceStrategy('/cpu:0')\n"
               "with s.scope():\n    pass\n")
    cs = call_site(m, "s.scope(")
    assert sorted(v.qname for v in m.infer_at(cs.node.func.value, cs)) == [
        "tensorflow.distribute.MirroredStrategy", "tensorflow.distribute.OneDeviceStrategy"]


@pytest.mark.parametrize("imp,expr", [
    ("import tensorflow as tf", "tf.distribute.MirroredStrategy"),
    ("from tensorflow import distribute as d", "d.MirroredStrategy"),
    ("import tensorflow.compat.v2 as tf", "tf.distribute.MirroredStrategy"),
    ("from tensorflow.distribute import MirroredStrategy as MS", "MS"),
])
def test_every_import_spelling_gives_one_canonical_name(imp, expr):
    m = module(f"{imp}\ns = {expr}()\n")
    cs = m.calls[0]
    assert m.qualified_name(cs.node.func, cs.scope, cs.order)[0] == "tensorflow.distribute.MirroredStrategy"


# ------------------------------------------------------------------ values
def test_helper_with_branches_returns_every_branch():
    m = module("import tensorflow as tf\n"
               "def pick(tpu):\n"
               "    if tpu:\n"
               "        return tf.distribute.TPUStrategy(r)\n"
               "    return tf.distribute.MirroredStrategy()\n"
               "s = pick(flag)\n"
               "s.scope()\n"
               "t = pick(False)\n"
               "t.scope()\n")
    cs = call_site(m, "s.scope")
    vals = m.infer_at(cs.node.func.value, cs)
    assert {v.qname for v in vals} == {"tensorflow.distribute.TPUStrategy", "tensorflow.distribute.MirroredStrategy"}
    assert all(v.origin is call_site(m, "pick(flag)").node for v in vals)  # created by the helper call
    # a call whose argument cannot take a branch gets only the other's (issue 28: paths that cannot run)
    cs = call_site(m, "t.scope")
    assert {v.qname for v in m.infer_at(cs.node.func.value, cs)} == {"tensorflow.distribute.MirroredStrategy"}


def test_self_attr_set_in_init_is_read_in_another_method():
    m = module("import tensorflow as tf\n"
               "class T:\n"
               "    def __init__(self):\n"
               "        self.strategy = tf.distribute.MirroredStrategy()\n"
               "    def go(self):\n"
               "        def inner():\n"
               "            return self.strategy.scope()\n"
               "        return inner()\n")
    assert kinds_at(m, "self.strategy.scope", lambda c: c.func.value) == {api.STRATEGY}


def test_container_items_through_subscripts_and_loops():
    m = module("import tensorflow as tf\n"
               "d = {'train': tf.data.Dataset.range(3), 'n': 3}\n"
               "l = [tf.data.Dataset.range(3)] * 2\n"
               "use(d['train'])\nuse(d['n'])\nuse(l[1])\n"
               "for ds in [tf.data.Dataset.range(1), tf.data.Dataset.range(2)]:\n"
               "    use(ds)\n")
    uses = [cs for cs in m.calls if m.tree.code_for_node(cs.node.func) == "use"]
    got = [{v.kind for v in m.infer_at(cs.node.args[0].value, cs)} for cs in uses]
    assert got == [{api.DATASET}, {api.UNKNOWN}, {api.DATASET}, {api.DATASET}]


def test_get_strategy_inside_a_scope_is_that_strategy():
    m = module("import tensorflow as tf\n"
               "strategy = tf.distribute.MirroredStrategy()\n"
               "with strategy.scope():\n"
               "    s = tf.distribute.get_strategy()\n"
               "    s.run(f)\n"
               "t = tf.distribute.get_strategy()\n"
               "t.run(f)\n")
    s_vals = m.infer_at(call_site(m, "s.run").node.func.value, call_site(m, "s.run"))
    assert [v.origin for v in s_vals] == [call_site(m, "tf.distribute.MirroredStrategy").node]
    t_vals = m.infer_at(call_site(m, "t.run").node.func.value, call_site(m, "t.run"))
    assert [v.qname for v in t_vals] == ["tensorflow.distribute.get_strategy"]  # the default strategy


def test_inference_depth_is_bounded():
    chain = "".join(f"x{i + 1} = x{i}\n" for i in range(3 * MAX_DEPTH))
    m = module("import tensorflow as tf\nx0 = tf.distribute.MirroredStrategy()\n" + chain + f"x{3 * MAX_DEPTH}.run(f)\n")
    cs = m.calls[-1]
    assert [v.kind for v in m.infer_at(cs.node.func.value, cs)] == [api.UNKNOWN]  # too deep: unknown, no crash
    short = "".join(f"x{i + 1} = x{i}\n" for i in range(20))
    m2 = module("import tensorflow as tf\nx0 = tf.distribute.MirroredStrategy()\n" + short + "x20.run(f)\n")
    assert [v.kind for v in m2.infer_at(m2.calls[-1].node.func.value, m2.calls[-1])] == [api.STRATEGY]


# ------------------------------------------------------------------ kinds from use
def test_kinds_from_use_of_objects_unknown_code_makes():
    """What a third-party factory or an unknown helper makes gets the kind its uses show: a scope
    taken / a local function run with arguments (strategy), compile (model and its optimizer),
    apply_gradients (optimizer); one item of an unknown call's tuple is an object of its own."""
    m = module("import tensorflow as tf\n"
               "import hwlib, zoo\n"
               "strategy, env = hwlib.detect()\n"
               "with strategy.scope():\n"
               "    net = zoo.models[name](classes=3)\n"
               "opt = zoo.opt.SGD(0.1)\n"
               "net.compile(optimizer=opt, loss='mse')\n"
               "sgd = zoo.make_opt()\n"
               "def step(x):\n"
               "    sgd.apply_gradients([])\n"
               "strategy.run(step, args=(1,))\n"
               "env.describe()\n")
    assert kinds_at(m, "strategy.run", lambda c: c.func.value) == {api.STRATEGY}
    assert kinds_at(m, "net.compile", lambda c: c.func.value) == {api.MODEL}
    assert kinds_at(m, "net.compile", lambda c: c.args[0].value) == {api.OPTIMIZER}
    assert kinds_at(m, "sgd.apply_gradients", lambda c: c.func.value) == {api.OPTIMIZER}
    assert kinds_at(m, "env.describe", lambda c: c.func.value) == {api.UNKNOWN}  # the tuple's other item
    # the model made under the scope is made there: its creation context is the scope
    net = m.infer_at(call_site(m, "net.compile").node.func.value, call_site(m, "net.compile"))[0]
    assert net.site is not None and m.scope_strategies(net.site)[0]


def test_kinds_from_use_leave_other_libraries_and_own_methods_alone():
    """``fit`` of a scikit-learn estimator is not a Keras model's; a local class's own ``fit`` is not
    one either; an object used as two kinds stays unknown."""
    m = module("import tensorflow as tf\n"
               "from sklearn.linear_model import LogisticRegression\n"
               "import lib\n"
               "clf = LogisticRegression()\n"
               "clf.fit(x, y)\n"
               "class Trainer:\n"
               "    def fit(self, ds):\n"
               "        pass\n"
               "t = Trainer()\n"
               "t.fit(ds)\n"
               "both = lib.make()\n"
               "both.fit(x)\n"
               "both.apply_gradients([])\n")
    assert kinds_at(m, "clf.fit", lambda c: c.func.value) == {api.UNKNOWN}
    assert kinds_at(m, "t.fit", lambda c: c.func.value) == {api.UNKNOWN}
    assert kinds_at(m, "both.fit", lambda c: c.func.value) == {api.UNKNOWN}


def test_inference_depth_is_bounded_across_modules(tmp_path):
    """The budget of nested questions counts every module's: a chain that runs through two files
    gives UNKNOWN past the budget, never a RecursionError."""
    from tfpar_lint.engine import AnalysisOptions, lint_file

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    n = 4 * MAX_DEPTH
    (tmp_path / "a.py").write_text("import tensorflow as tf\nimport b\n"
                                   "a0 = tf.distribute.MirroredStrategy()\n"
                                   + "".join(f"a{i + 1} = b.b{i}\n" for i in range(n)))
    (tmp_path / "b.py").write_text("import a\n" + "".join(f"b{i} = a.a{i}\n" for i in range(n))
                                   + f"def f():\n    pass\nb{n - 1}.run(f, args=())\n")
    res = lint_file(str(tmp_path / "b.py"), options=AnalysisOptions())
    assert res.error is None, res.error


def test_a_recursion_error_in_the_analysis_is_an_internal_error_with_its_cause(monkeypatch):
    """Only the parse hitting Python's recursion limit is "too deeply nested"; the analysis hitting
    it is an internal error that names the functions that recursed."""
    from tfpar_lint.engine import lint_source
    from tfpar_lint.semantic.contexts import Contexts

    def runaway(self, n=0):
        return runaway(self, n + 1)

    monkeypatch.setattr(Contexts, "replica_runs", runaway)
    src = "import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\nstrategy.run(f)\n"
    err = lint_source(src, "x.py").error
    assert err is not None and err.code == "E903"
    assert "internal error: RecursionError" in err.message and "runaway" in err.message
    assert "too deeply nested" not in err.message


# ------------------------------------------------------------------ callgraph
def test_instantiation_calls_init_and_passes_its_parameters():
    m = module("import tensorflow as tf\n"
               "class W:\n"
               "    def __init__(self, v):\n"
               "        self.v = v\n"
               "    def bump(self):\n"
               "        self.v.assign_add(1)\n"
               "w = W(tf.Variable(0.0))\n")
    init = next(f for f in m.functions if f.name == "__init__")
    assert [m.tree.code_for_node(c.node) for c in m.callers(init)] == ["W(tf.Variable(0.0))"]
    assert kinds_at(m, "self.v.assign_add", lambda c: c.func.value) == {api.VARIABLE}


def test_is_passed_around_and_calls_within():
    m = module("def a():\n    b()\n    def c():\n        d()\n    return c\n"
               "def b():\n    pass\n"
               "def d():\n    pass\n"
               "register(b)\n")
    fa, fb = m.functions[0], next(f for f in m.functions if f.name == "b")
    assert m.is_passed_around(fb) and not m.is_passed_around(fa)
    assert [m.tree.code_for_node(c.node) for c in m.calls_within(fa)] == ["b()", "d()"]


# ------------------------------------------------------------------ contexts
def test_replica_runs_and_thread_targets():
    m = module("import threading, tensorflow as tf\n"
               "from concurrent.futures import ThreadPoolExecutor\n"
               "s = tf.distribute.MirroredStrategy()\n"
               "def f():\n    g()\n"
               "def g():\n    pass\n"
               "s.extended.call_for_each_replica(f)\n"
               "class T(threading.Thread):\n"
               "    def run(self):\n        pass\n"
               "def work(i):\n    pass\n"
               "T().start()\n"
               "with ThreadPoolExecutor(2) as ex:\n    ex.map(work, range(2))\n")
    assert [meth for _cs, _r, meth, _s in m.replica_runs()] == ["call_for_each_replica"]
    replica = {m.replica_fn_infos[k].name for k in m.replica_functions()}
    assert replica == {"f", "g"}
    threads = {m.thread_fn_infos[k].name for k in m.thread_targets()}
    assert threads == {"run", "work"}


def test_scope_through_every_caller():
    m = module("import tensorflow as tf\n"
               "s = tf.distribute.MirroredStrategy()\n"
               "def build():\n    return make()\n"
               "with s.scope():\n    build()\n"
               "def other():\n    make()\n"
               "other()\n")
    inside = call_site(m, "make()")
    known, maybe = m.scope_strategies(inside)
    assert [v.qname for v in known] == ["tensorflow.distribute.MirroredStrategy"] and not maybe
    outside = [cs for cs in m.calls if m.tree.code_for_node(cs.node) == "make()"][1]
    assert m.scope_strategies(outside) == ([], False)


def test_uncalled_method_is_maybe_in_scope_but_uncalled_function_is_judged_as_written():
    m = module("class C:\n    def __init__(self):\n        make()\n"
               "def main():\n    make()\n")
    in_method, in_main = [cs for cs in m.calls if m.tree.code_for_node(cs.node) == "make()"]
    assert m.scope_strategies(in_method) == ([], True)
    assert m.scope_strategies(in_main) == ([], False)


# ------------------------------------------------------------------ flow
def test_feeding_exprs_follow_augmented_assignments():
    m = module("def w(v):\n    x = v.value()\n    x += 1.0\n    y = x\n    v.assign(y)\n")
    cs = call_site(m, "v.assign")
    fed = {m.tree.code_for_node(e) for e, _s, _o in m.feeding_exprs(cs.node.args[0].value, cs.scope, cs.order)}
    assert {"v.value()", "1.0", "x"} <= fed


def test_origin_exprs_follow_names_parameters_and_self_attributes():
    m = module(
        "BATCH = 8\n"
        "alias = BATCH\n"
        "a, b = 1, alias\n"
        "def use(n):\n"
        "    return n\n"
        "use(b)\n"
        "class T:\n"
        "    def __init__(self, k):\n"
        "        self.k = k\n"
        "    def get(self):\n"
        "        return self.k\n"
        "T(alias)\n"
        "for i in range(3):\n"
        "    pass\n"
        "last = i\n")
    code = m.tree.code_for_node
    use, get = m.functions[0], m.functions[2]
    ret, ret_order = use.returns[0]
    assert [code(e) for e, _s, _o in m.origin_exprs(ret, use.scope, ret_order)] == ["8"]
    ret, ret_order = get.returns[0]
    assert [code(e) for e, _s, _o in m.origin_exprs(ret, get.scope, ret_order)] == ["8"]
    # a loop target cannot be followed to where its value is made
    last = m.module_bindings_in_order[-1]
    assert m.origin_exprs(last.value, m.scope, last.order) is None


def test_names_read_skips_attribute_and_keyword_names():
    expr = cst.parse_expression("f(a.b, key=c, *d) + (lambda e: e)(g)")
    assert sorted(n.value for n in names_read(expr)) == ["a", "c", "d", "f", "g"]


# ------------------------------------------------------------------ environment
def test_env_writes_in_source_order():
    m = module("import os\nos.environ['TF_CONFIG'] = '{}'\nos.environ.update({'TF_CONFIG': x})\n"
               "os.environ.setdefault('OTHER', '1')\n")
    assert [type(site).__name__ for site, _v in m.env_writes("TF_CONFIG")] == ["StoreSite", "CallSite"]
    assert m.sets_env("OTHER") == "1"


def test_parameters_through_apis_that_call_the_function():
    m = module("import threading, functools, tensorflow as tf\n"
               "from concurrent.futures import ThreadPoolExecutor\n"
               "s = tf.distribute.MirroredStrategy()\n"
               "v = tf.Variable(0.0)\n"
               "def a(x):\n    x.assign_add(1)\n"
               "def b(y, z=None):\n    z.assign_add(1)\n"
               "def c(p, q):\n    q.assign_add(1)\n"
               "def d(r):\n    r.assign_add(1)\n"
               "threading.Thread(target=a, args=(v,)).start()\n"
               "ThreadPoolExecutor(2).submit(b, 1, z=v)\n"
               "s.run(functools.partial(c, 1), args=(v,))\n"
               "s.run(d, args=(v,))\n"
               "register(d)\n")  # handed to something we cannot see: d's parameter stays unknown
    got = {}
    for cs in m.calls:
        text = m.tree.code_for_node(cs.node)
        if text.endswith(".assign_add(1)"):
            got[text.split(".")[0]] = {(v.kind, type(v.origin).__name__) for v in m.infer_at(cs.node.func.value, cs)}
    made = ("variable", "Call")
    # d's parameter is the object unseen callers pass: a variable only by its use (assign_add)
    assert got == {"x": {made}, "z": {made}, "q": {made}, "r": {("variable", "Param")}}


def test_model_variables_and_zip_loops():
    m = module("import tensorflow as tf\n"
               "model = tf.keras.Sequential()\n"
               "for g, w in zip(grads, model.trainable_variables):\n    w.assign_sub(g)\n"
               "for i, w2 in enumerate(model.weights):\n    w2.assign(0)\n"
               "model.layers[0].kernel.assign(k)\n")
    cs = call_site(m, "w.assign_sub")
    (v,) = m.infer_at(cs.node.func.value, cs)
    assert v.kind == api.VARIABLE and v.origin is call_site(m, "tf.keras.Sequential").node
    assert kinds_at(m, "w2.assign", lambda c: c.func.value) == {api.VARIABLE}
    cs = call_site(m, "model.layers[0].kernel.assign")
    (k,) = m.infer_at(cs.node.func.value, cs)  # a layer's kernel belongs to the model
    assert k.kind == api.VARIABLE and k.origin is call_site(m, "tf.keras.Sequential").node


def test_none_placeholder_is_dropped_when_the_object_is_made_later():
    m = module("import tensorflow as tf\n"
               "total = None\n"
               "def setup():\n    global total\n    total = tf.Variable(0.0)\n"
               "def use():\n    total.assign_add(1)\n"
               "nothing = None\n"
               "nothing.f()\n")
    assert kinds_at(m, "total.assign_add", lambda c: c.func.value) == {api.VARIABLE}
    assert kinds_at(m, "nothing.f", lambda c: c.func.value) == {api.NONE}


# ------------------------------------------------------------------ strategies by their use
def _run_strategies(src: str) -> list[list[str]]:
    m = module(src)
    return [[v.qname for v in strat] for _cs, _recv, _meth, strat in m.replica_runs()]


@pytest.mark.parametrize("src,runs", [
    # a parameter the module never gets a value for, used as only a strategy is used
    ("def build(model, strategy):\n    def step(x):\n        return x\n"
     "    return strategy.run(step, args=(1,))\n", [[""]]),
    ("class T:\n    def __init__(self, strategy):\n        self.strategy = strategy\n"
     "    def step(self, x):\n        return x\n"
     "    def go(self, x):\n        return self.strategy.experimental_run_v2(self.step, args=(x,))\n", [[""]]),
    # a name a snippet never binds, run TF 1's way: experimental_run(fn, iterator)
    ("def step(x):\n    return x\nout = mirrored.experimental_run(step, it)\n", [[""]]),
    # `run(fn)` alone on an unknown receiver is no evidence; with another strategy use it is
    ("def step():\n    return 1\nrunner.run(step)\n", []),
    ("def step():\n    return 1\nn = s.num_replicas_in_sync\ns.run(step)\n", [[""]]),
    # a receiver the module resolves to something else is not a strategy
    ("import threading\ndef step():\n    return 1\nt = threading.Thread(target=step)\nt.run(step, args=())\n", []),
])
def test_strategy_by_use(src, runs):
    assert _run_strategies(src) == runs


def test_experimental_run_hands_the_function_one_unknown_element():
    m = module("import tensorflow as tf\ns = tf.distribute.MirroredStrategy()\n"
               "def step(inputs):\n    return inputs\nout = s.experimental_run(step, it)\n")
    step = next(f for f in m.functions if f.name == "step")
    assert id(step) in m.replica_functions()
    assert m.values.param_args(step.scope.bindings["inputs"][0]) is None  # the iterator's element: not told


def test_a_function_taking_the_strategy_may_be_called_in_its_scope():
    m = module("import tensorflow as tf\n"
               "def make(model, strategy):\n    opt = tf.keras.optimizers.SGD()\n"
               "    def step(x):\n        opt.apply_gradients([])\n"
               "    return strategy.run(step, args=(1,))\n"
               "def main():\n    s = tf.distribute.MirroredStrategy()\n    v = tf.Variable(1.0)\n")
    make = next(f for f in m.functions if f.name == "make")
    main = next(f for f in m.functions if f.name == "main")
    assert m.function_scope(make) == ([], True)  # its caller is elsewhere, with the strategy
    assert m.function_scope(main) == ([], False)  # judged as written


@pytest.mark.parametrize("expr,kinds", [
    ("s or tf.distribute.get_strategy()", {api.UNKNOWN, api.STRATEGY}),
    ("tf.distribute.MirroredStrategy() if n > 1 else tf.distribute.OneDeviceStrategy('/cpu:0')", {api.STRATEGY}),
])
def test_or_and_conditional_expressions_hold_either_value(expr, kinds):
    m = module(f"import tensorflow as tf\nx = {expr}\nuse(x)\n")
    assert kinds_at(m, "use(", lambda c: c.args[0].value) == kinds


def test_self_attribute_of_a_local_base_class():
    m = module("import tensorflow as tf\n"
               "class Base:\n    def __init__(self):\n        self.opt = tf.keras.optimizers.SGD()\n"
               "    def loss(self, x):\n        return x\n"
               "class Child(Base):\n    def go(self):\n        use(self.opt, self.loss)\n")
    cs = call_site(m, "use(")
    assert [v.kind for v in m.infer_at(cs.node.args[0].value, cs)] == [api.OPTIMIZER]
    assert [v.kind for v in m.infer_at(cs.node.args[1].value, cs)] == [api.FUNCTION]


def test_free_tf_is_tensorflow_but_a_bound_tf_is_what_it_is_bound_to():
    m = module("s = tf.distribute.MirroredStrategy()\n")  # a snippet without its import
    assert m.qualified_name(m.calls[0].node.func, m.scope, 10**9)[0] == "tensorflow.distribute.MirroredStrategy"
    m2 = module("import mylib as tf\ns = tf.distribute.MirroredStrategy()\n")
    assert m2.qualified_name(m2.calls[0].node.func, m2.scope, 10**9)[0] == "mylib.distribute.MirroredStrategy"
    m3 = module("tf = object()\ns = tf.distribute.MirroredStrategy()\n")
    assert m3.qualified_name(m3.calls[0].node.func, m3.scope, 10**9)[0] == ""
