"""Where a multi-worker save writes, and whether the workers meet there (the TFP604 and TFP610
rules ask it): storage every machine of a cluster sees, a cluster put on one machine, a cluster
the code spreads over separate machines, and paths every worker computes alike (literals, module
constants, the command line every worker is started with).

Names are resolved only through :class:`tfpar_lint.semantic.Module`; what is here reads the text a
path starts with and the cluster addresses a module writes.
"""
from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.semantic import Module, Scope, arg, call_method, literal_str
from tfpar_lint.semantic.lifecycle import SaveCall, constant_path, mentions_task

# Storage every machine of a cluster sees: object stores and distributed file systems (URL
# schemes), and the mounts platforms give them (Vertex AI's Cloud Storage FUSE, Databricks' DBFS).
SHARED_SCHEMES = ("gs://", "s3://", "s3a://", "s3n://", "hdfs://", "viewfs://", "abfs://", "abfss://", "wasb://",
                  "wasbs://", "az://", "adl://", "oss://", "cos://", "obs://")
SHARED_MOUNTS = ("/gcs/", "/dbfs/")
# Environment variables a training platform sets to a shared location, the same on every worker
# (Vertex AI custom training: Cloud Storage URIs under the job's base output directory).
CLUSTER_DIRS = frozenset({"AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR"})
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]", "0.0.0.0")
_LOCAL_ADDRESS = re.compile(r"""["'](?:localhost|127\.0\.0\.1|\[::1\]|0\.0\.0\.0)(?::|["'])""")
_REMOTE_ADDRESS = re.compile(r"""["'](?!localhost|127\.0\.0\.1|\[::1\]|0\.0\.0\.0)[\w.-]+:\d{2,5}["']""")
_ADDRESS = re.compile(r"""["']([\w.-]+|\[[\w:]+\]):(\d{2,5})["']""")
_ENV_READERS = frozenset({"os.environ.get", "os.getenv", "os.environ.__getitem__"})
_CLUSTER_SPECS = frozenset({"tensorflow.train.ClusterSpec",
                            "tensorflow.distribute.cluster_resolver.SimpleClusterResolver"})
_ARG_PARSERS = frozenset({"argparse.ArgumentParser"})
_PARSE_METHODS = frozenset({"parse_args"})


def _path_heads(m: Module, expr: Optional[cst.BaseExpression], scope: Scope, order: int,
                depth: int = 0) -> list[str]:
    """The literal text each value of the path may start with (``"gs://b/run"``, ``f"gs://{b}"``
    -> ``"gs://"``, ``os.path.join("/gcs/b", x)``), or ``"$VAR"`` for a platform variable read from
    the environment; "" where it cannot be told."""
    if expr is None or depth > 12:
        return [""]
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        v = literal_str(expr) if isinstance(expr, cst.SimpleString) else None
        if v is None and isinstance(expr, cst.ConcatenatedString):
            v = literal_str(expr.left) if isinstance(expr.left, cst.SimpleString) else None
        return [v or ""]
    if isinstance(expr, cst.FormattedString):
        first = expr.parts[0] if expr.parts else None
        if isinstance(first, cst.FormattedStringText):
            return [first.value]
        if isinstance(first, cst.FormattedStringExpression):
            return _path_heads(m, first.expression, scope, order, depth + 1)
        return [""]
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Divide)):
        return _path_heads(m, expr.left, scope, order, depth + 1)
    if isinstance(expr, cst.Subscript):
        q, _ = m.qualified_name(expr.value, scope, order)
        if q == "os.environ" and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            var = literal_str(expr.slice[0].slice.value)
            return [f"${var}" if var in CLUSTER_DIRS else ""]
        return [""]
    if isinstance(expr, cst.Call):
        q, _ = m.qualified_name(expr.func, scope, order)
        if q in _ENV_READERS:
            var = literal_str(arg(expr, 0))
            return [f"${var}" if var in CLUSTER_DIRS else ""]
        if q in ("os.path.join", "os.path.expanduser", "os.path.normpath", "pathlib.Path"):
            return _path_heads(m, arg(expr, 0), scope, order, depth + 1)
        return [""]
    if isinstance(expr, cst.Name):
        reaching = m.reaching_exprs(expr, scope, order)
        if not reaching:
            return [""]
        out: list[str] = []
        for e, s, o in reaching:
            out += _path_heads(m, e, s, o, depth + 1)
        return out
    return [""]


def shared_storage(m: Module, expr: Optional[cst.BaseExpression], scope: Scope, order: int) -> Optional[str]:
    """Why ``expr`` is storage every worker's machine sees (for the message), or None."""
    heads = _path_heads(m, expr, scope, order)
    if not heads:
        return None
    whys = []
    for h in heads:
        if h.startswith("$"):
            whys.append(f"`{h[1:]}`, a shared location the platform gives every worker")
        elif h.lower().startswith(SHARED_SCHEMES):
            whys.append(f"`{h.split('://', 1)[0]}://` storage, which every worker's machine sees")
        elif h.startswith(SHARED_MOUNTS):
            whys.append(f"a shared mount (`{h[:5]}...`)")
        else:
            return None
    return whys[0]


def _writes_cluster(m: Module) -> bool:
    """The module writes a ``TF_CONFIG`` or builds a cluster spec itself."""
    if "TF_CONFIG" in m.source and m.env_writes("TF_CONFIG"):
        return True
    return ("ClusterSpec" in m.source or "SimpleClusterResolver" in m.source) and \
        any(True for _ in m.calls_to(_CLUSTER_SPECS))


def workers_on_this_machine(m: Module) -> bool:
    """The module writes a TF_CONFIG whose cluster addresses are all on this machine (``localhost``,
    ``127.0.0.1``): its workers share this machine's file system."""
    if "TF_CONFIG" not in m.source or not m.env_writes("TF_CONFIG"):
        return False
    return bool(_LOCAL_ADDRESS.search(m.source)) and not _REMOTE_ADDRESS.search(m.source)


def separate_machines(m: Module) -> bool:
    """The cluster the module writes (``TF_CONFIG``, ``ClusterSpec``) lists addresses on at least
    two different hosts, none of them this machine: its workers run on separate machines."""
    if not _writes_cluster(m):
        return False
    hosts = {h for h, _port in _ADDRESS.findall(m.source)}
    return len(hosts) >= 2 and not any(h in _LOCAL_HOSTS for h in hosts)


def shared_path_reason(m: Module, sc: SaveCall, local_cluster: Optional[bool] = None) -> Optional[str]:
    """Why every worker's ``sc`` writes one path that the workers share (TFP604's finding), or None:
    a path the same on every worker (a constant, or a platform variable alike on every worker) on
    storage every machine sees, or a constant local path when the module puts every worker on this
    machine.  The save must not be under a task test (the caller checks that)."""
    if sc.path is None or sc.path_site is None:
        return None
    scope, order = sc.path_site.scope, sc.path_site.order
    shared = shared_storage(m, sc.path, scope, order)
    if shared is None:
        # a local path: separate machines each write their own disk; it collides only when
        # the workers share this machine
        if not constant_path(m, sc.path, scope, order):
            return None
        if not (workers_on_this_machine(m) if local_cluster is None else local_cluster):
            return None
        return "a local path, and the TF_CONFIG written here puts every worker on this machine"
    if not constant_path(m, sc.path, scope, order, env=CLUSTER_DIRS):
        return None  # shared storage, but maybe a path of its own per worker
    return shared


# ------------------------------------------------------------------ the command line

def _parsed_arguments(m: Module, expr: cst.BaseExpression, scope: Scope, order: int, depth: int = 0) -> bool:
    """Every value ``expr`` may hold is the namespace ``argparse.ArgumentParser(...).parse_args()``
    returns (through names, parameters and local helpers' returns)."""
    if depth > 6:
        return False
    origins = m.origin_exprs(expr, scope, order)
    if not origins:
        return False
    for e, s, o in origins:
        if not isinstance(e, cst.Call):
            return False
        cm = call_method(e)
        if cm is not None and cm[1] in _PARSE_METHODS:
            parsers = m.origin_exprs(cm[0], s, o)
            if not parsers or not all(isinstance(p, cst.Call) and m.qualified_name(p.func, ps, po)[0] in _ARG_PARSERS
                                      for p, ps, po in parsers):
                return False
            continue
        fns = m.resolve_function(e.func, s, o)
        if not fns or not all(f.returns for f in fns):
            return False
        if not all(_parsed_arguments(m, r, f.scope, ro, depth + 1) for f in fns for r, ro in f.returns):
            return False
    return True


def command_line_value(m: Module, expr: cst.BaseExpression, scope: Scope, order: int) -> bool:
    """``args.model_dir`` of an ``argparse`` namespace, or ``FLAGS.model_dir`` of absl / TF 1 flags:
    a value of the command line, which a cluster launcher gives every worker alike."""
    if not isinstance(expr, cst.Attribute):
        return False
    q, _ = m.qualified_name(expr.value, scope, order)
    if q.endswith("flags.FLAGS"):
        return True
    return _parsed_arguments(m, expr.value, scope, order)


def same_on_every_worker(m: Module, expr: Optional[cst.BaseExpression], scope: Scope, order: int) -> bool:
    """``expr`` is the same path on every worker: literals, module constants, f-strings, joins of
    those, the platform's shared directories and the command line's values."""
    return constant_path(m, expr, scope, order, env=CLUSTER_DIRS,
                         leaf=lambda e, s, o: command_line_value(m, e, s, o))


# ------------------------------------------------------------------ which strategy the save runs under

def _equalities(m: Module, ifs) -> dict[str, tuple[set, set]]:
    """What the ``if`` branches around a site say about pure expressions compared with string
    literals: text of the expression -> (the literals it equals, the literals it differs from)."""
    out: dict[str, tuple[set, set]] = {}
    for if_node, in_body in ifs:
        test = if_node.test
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            continue
        comp = test.comparisons[0]
        if not isinstance(comp.operator, (cst.Equal, cst.NotEqual)):
            continue
        for side, other in ((test.left, comp.comparator), (comp.comparator, test.left)):
            lit = literal_str(other)
            if lit is None or not isinstance(side, (cst.Name, cst.Attribute)):
                continue
            equal = isinstance(comp.operator, cst.Equal) == in_body
            eq, ne = out.setdefault(" ".join(m.code(side).split()), (set(), set()))
            (eq if equal else ne).add(lit)
    return out


def _stable(m: Module, text: str) -> bool:
    """The name a compared expression starts with is bound once, at module level (``args =
    parser.parse_args()``), so every function reads the same value."""
    root = text.split(".", 1)[0]
    bs = m.scope.bindings.get(root, ())
    if len(bs) != 1:
        return False
    for target, _value, _scope, _order in m.attr_assigns:
        while isinstance(target, cst.Attribute):
            target = target.value
        if isinstance(target, cst.Name) and target.value == root:
            return False
    return True


def contradict(m: Module, a_ifs, b_ifs) -> bool:
    """Two sites whose ``if`` branches compare the same stable expression with string literals in a
    way that cannot hold together (``args.distribute == "multiworker"`` builds the strategy,
    ``args.distribute == "tpu"`` saves); or whose branches cannot be taken in one run (:mod:`.paths`)."""
    if not m.together(a_ifs, b_ifs):
        return True
    a, b = _equalities(m, a_ifs), _equalities(m, b_ifs)
    for text, (eq_a, ne_a) in a.items():
        if text not in b or not _stable(m, text):
            continue
        eq_b, ne_b = b[text]
        if (eq_a and eq_b and eq_a.isdisjoint(eq_b)) or (eq_a & ne_b) or (eq_b & ne_a):
            return True
    return False


def under_other_strategy(m: Module, sc: SaveCall) -> bool:
    """The save runs only on branches where the MultiWorkerMirroredStrategy its object was made
    under is not the one made (every such strategy's construction contradicts the save's branch)."""
    if sc.obj.site is None:
        return False
    known, _ = m.scope_strategies(sc.obj.site)
    mw = [v for v in known if v.site is not None and v.kind == api.STRATEGY and v.qname in api.MULTI_WORKER_STRATEGIES]
    return bool(mw) and all(contradict(m, v.site.ifs, sc.site.ifs) for v in mw)


def every_worker_same_path(m: Module, sc: SaveCall) -> bool:
    """``sc`` runs on every worker (no task test around it) and writes a path the same on all."""
    if sc.path is None or sc.path_site is None or mentions_task(m, sc.site):
        return False
    return same_on_every_worker(m, sc.path, sc.path_site.scope, sc.path_site.order)
