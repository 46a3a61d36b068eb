"""The semantic model of one module: the only place where names are resolved.

One traversal (:mod:`.builder`, walked iteratively by :mod:`.walk`) records scopes, bindings,
call sites with their ``with``/``if``/``try`` context, stores and name references
(:mod:`.model`).  Everything else is computed lazily, each part with one job:

* :mod:`.bindings` - which binding a name refers to; qualified API names of imports;
* :mod:`.values` - what an expression holds (value inference);
* :mod:`.callgraph` - local callees and callers, callbacks, run-order traces;
* :mod:`.contexts` - strategy scopes, replica functions, thread targets, ``tf.function``;
* :mod:`.flow` - which right-hand sides feed an expression through local names;
* :mod:`.environment` - environment variables the module writes;
* :mod:`.threads` - what Python threads run, what they share, the updates they make (TFP3xx);
* :mod:`.loss` - what a loss is made of and how it is scaled (TFP5xx);
* :mod:`.lifecycle` - multi-worker facts: chief tests, saves and their paths (TFP6xx);
* :mod:`tfpar_lint.tfapi` - what TensorFlow and Keras APIs create and do.

:class:`Module` ties them together; rules query it and never walk the tree themselves.

We deliberately do not use libcst's ``ScopeProvider``/``QualifiedNameProvider``: they cost
~7.5x the parse (see ../shared/design/performance-notes.md); the handful of names the rules
need are resolved here, on demand.
"""
from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic.bindings import Bindings
from tfpar_lint.semantic.builder import Builder
from tfpar_lint.semantic.callgraph import CallGraph
from tfpar_lint.semantic.contexts import Contexts
from tfpar_lint.semantic.environment import Environment
from tfpar_lint.semantic.flow import Flow, names_read  # noqa: F401  (names_read re-exported)
from tfpar_lint.semantic.project import Project, project_root  # noqa: F401  (re-exported)
from tfpar_lint.semantic.model import (  # noqa: F401  (re-exported for rules)
    UNKNOWN, Binding, CallSite, ClassInfo, FunctionInfo, IndirectCall, NameRef, Scope, StoreSite, TraceEvent, Value,
)
from tfpar_lint.semantic.nodes import (  # noqa: F401  (re-exported for rules)
    arg, attr_name, call_method, dotted_name, is_constant, keyword, literal_str, param_names,
)
from tfpar_lint.semantic.inputs import Inputs
from tfpar_lint.semantic.paths import Paths
from tfpar_lint.semantic.threads import Threads
from tfpar_lint.semantic.kinds import Kinds
from tfpar_lint.semantic.values import Inference

# ============================================================================ strategy facts
SINGLE_REPLICA = frozenset({"tensorflow.distribute.OneDeviceStrategy"}) | api.PARAMETER_SERVER_STRATEGIES


def replicated(strategies: list[Value]) -> bool:
    """Every strategy may run several replicas in sync (not OneDevice / parameter server,
    not ``get_strategy()`` (the default strategy unless called in a scope), not
    ``MirroredStrategy(devices=["/gpu:0"])``)."""
    if not strategies:
        return False
    for v in strategies:
        if v.qname in SINGLE_REPLICA or v.qname in api.STRATEGY_GETTERS:
            return False
        o = v.origin
        if isinstance(o, cst.Call):
            devs = keyword(o, "devices")
            if isinstance(devs, (cst.List, cst.Tuple)) and len(devs.elements) <= 1:
                return False
    return True


def one_replica(strategies: list[Value]) -> bool:
    """Every strategy has a single replica by construction: ``OneDeviceStrategy``, the default
    strategy (``get_strategy()`` outside any scope), ``MirroredStrategy(devices=[one])``.  (A
    parameter-server strategy runs a scheduled function on every worker: not one replica.)"""
    if not strategies:
        return False
    for v in strategies:
        if v.qname == "tensorflow.distribute.OneDeviceStrategy" or v.qname in api.STRATEGY_GETTERS:
            continue
        o = v.origin
        if isinstance(o, cst.Call):
            devs = keyword(o, "devices")
            if isinstance(devs, (cst.List, cst.Tuple)) and len(devs.elements) <= 1:
                continue
        return False
    return True


def one_local_replica(m: "Module", strategies: list[Value]) -> bool:
    """Every strategy has a single replica in this process: by construction (:func:`one_replica`),
    or made where the process sees one GPU only (``CUDA_VISIBLE_DEVICES`` set to one device before
    it: one process per GPU, each strategy's one local replica; :meth:`Module.one_device_visible`)."""
    if not strategies:
        return False
    for v in strategies:
        if one_replica([v]):
            continue
        site = v.site
        owner = (site.scope.module or m) if site is not None else None
        if owner is None or not owner.one_device_visible(site):
            return False
    return True


# Module method -> the part that answers it.
_DELEGATES = {
    "bindings": ("lookup", "qualified_name"),
    "values": ("infer_at", "infer", "infer_one", "kinds", "created_within", "class_kind", "binding_values",
               "container_items", "keras_spelling"),
    "callgraph": ("resolve_function", "callers", "callees", "function_refs", "function_attr_refs",
                  "passing_refs", "is_passed_around", "indirect_calls", "handed_over", "enclosing_method", "enclosing_functions", "calls_within", "calls_to",
                  "method_calls", "param_used", "refs_to", "reaching_exprs", "traces"),
    "contexts": ("scope_items", "scope_strategies", "function_scope", "replica_runs", "replica_functions",
                 "replica_strategies", "in_replica_fn", "thread_targets", "in_tf_function", "runs_traced",
                 "strategies", "strategy_method_calls", "exclusive", "caught",
                 "owns_scope", "single_replica_path", "path_text", "strategies_made_in", "scope_entered",
                 "replica_run_sites"),
    "kinds": ("strategy_by_use", "receiver_key"),
    "environment": ("sets_env", "env_writes", "env_unsets", "one_device_visible"),
    "flow": ("feeding_exprs", "constant_exprs", "origin_exprs", "self_attr_bindings", "depends_on_replica_id"),
    "paths": ("together", "value_path", "reaches_with"),
    "inputs": ("made_with_strategy", "forward_calls", "feeds_model", "captured_data"),
}


class Module:
    """The semantic model of one parsed module (a facade over its parts)."""

    def __init__(self, tree: cst.Module, source: str = "", path: str = "<string>",
                 strategy_factories: Sequence[str] = (), dataset_distributors: Sequence[str] = (),
                 tf_version: Optional[str] = None, project: Optional["Project"] = None) -> None:
        self.tree = tree
        # the project's other modules (whole-project analysis), or None: this file alone
        self.project = project
        # the TensorFlow the code targets: the ``tf-version`` setting, or None: inferred from the
        # project's files and the code's APIs (:mod:`tfpar_lint.versions`, on first use)
        self.tf_setting = tf_version
        self._target = None
        self.source = source
        self.path = path
        self.strategy_factories = frozenset(strategy_factories)
        self.dataset_distributors = frozenset(dataset_distributors)
        self.scope = Scope("module", tree, None, module=self)
        # what the traversal records
        self.functions: list[FunctionInfo] = []
        self.classes: list[ClassInfo] = []
        self.calls: list[CallSite] = []
        self.refs: list[NameRef] = []
        self.imports: list[Binding] = []  # every import binding, in source order
        self.project_deps: set[str] = set()  # project files this module's answers read
        self.attr_refs: list[NameRef] = []  # name.attr (``self.model``): node is the Attribute
        self.site_of_call: dict[int, CallSite] = {}
        self.function_of_node: dict[int, FunctionInfo] = {}
        self.module_bindings_in_order: list[Binding] = []
        # [x] * n  and  [f(x) for ...]: (node, scope, order)
        self.sequence_repeats: list[tuple[cst.BinaryOperation, Scope, int]] = []
        # a + b, a / b, ... with a name or attribute operand: (node, scope, order)
        self.arithmetic: list[tuple[cst.BinaryOperation, Scope, int]] = []
        self.comprehensions: list[tuple[cst.BaseExpression, Scope, int]] = []
        # x[i], x[a:b], self.x[k] (a name or attribute indexed): (Subscript, scope, order)
        self.subscripts: list[tuple[cst.Subscript, Scope, int]] = []
        # obj.attr = value (any receiver): (target, value, scope, order)
        self.attr_assigns: list[tuple[cst.Attribute, cst.BaseExpression, Scope, int]] = []
        # {expr[:spec]} inside f-strings: (FormattedStringExpression, scope, order)
        self.fstring_exprs: list[tuple[cst.FormattedStringExpression, Scope, int]] = []
        # x[key] = value, del x[key]
        self.stores: list[StoreSite] = []
        # the enclosing ``if`` branches of the nodes above that have no site of their own
        # (arithmetic, augmented assignments): id(node) -> ((If, in body?), ...)
        self.ifs_at: dict[int, tuple] = {}
        # every ``with`` item: (WithItem, scope, order, enclosing function, if branches)
        self.with_items: list[tuple] = []
        # order -> the enclosing if branches in its function, as (id(If), in body); absent: none
        self.if_context: dict[int, tuple[tuple[int, bool], ...]] = {}
        self.if_nodes: dict[int, cst.If] = {}  # id(If) -> the If (of if_context's ids)
        # id(If) -> (scope, order where its test is read, enclosing loops in its function)
        self.if_where: dict[int, tuple[Scope, int, int]] = {}
        Builder(self).walk(tree)
        # the parts that answer questions about it
        self.bindings = Bindings(self)
        self.kinds = Kinds(self)
        self.values = Inference(self)
        self.callgraph = CallGraph(self)
        self.contexts = Contexts(self)
        self.environment = Environment(self)
        self.flow = Flow(self)
        self.paths = Paths(self)
        self.inputs = Inputs(self)
        self.threads = Threads(self)
        # facts several rules derive from the model, computed once (semantic/scope_use.values_of_kind)
        self.rule_memo: dict[str, dict] = {}
        if project is not None:
            project.add(path, self)

    def module_imports(self) -> list[Binding]:
        return self.imports

    def importers(self) -> list["Module"]:
        """The project's modules that import this one (none without a project)."""
        return self.project.importers(self) if self.project is not None else []

    @property
    def replica_fn_infos(self) -> dict[int, FunctionInfo]:
        self.contexts.replica_functions()
        return self.contexts.replica_fn_infos

    @property
    def thread_fn_infos(self) -> dict[int, FunctionInfo]:
        self.contexts.thread_targets()
        return self.contexts.thread_fn_infos

    def code(self, node: cst.CSTNode) -> str:
        """Source text of a node, on one line, shortened for messages."""
        lines = []
        for line in self.tree.code_for_node(node).splitlines():
            cut = line.find("#")
            while cut >= 0:  # a comment starts at a '#' outside quotes
                before = line[:cut]
                if before.count('"') % 2 == 0 and before.count("'") % 2 == 0:
                    line = before
                    break
                cut = line.find("#", cut + 1)
            lines.append(line)
        text = " ".join(" ".join(lines).split())
        return text if len(text) <= 60 else text[:57] + "..."


def _owner(args) -> Optional["Module"]:
    """The module the first scope-carrying argument belongs to (a Scope, CallSite, FunctionInfo,
    ClassInfo or Binding of another file is answered by that file's model)."""
    for a in args:
        if isinstance(a, Scope):
            return a.module
        if isinstance(a, (CallSite, FunctionInfo, ClassInfo, Binding, StoreSite)):
            return a.scope.module
    return None


def _delegate(part: str, name: str):
    def method(self, *args, **kwargs):
        owner = _owner(args)
        if owner is not None and owner is not self:
            return getattr(owner, name)(*args, **kwargs)
        return getattr(getattr(self, part), name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"See :meth:`{part}.{name}`."
    return method


for _part, _names in _DELEGATES.items():
    for _name in _names:
        setattr(Module, _name, _delegate(_part, _name))
