from __future__ import annotations

import re
from typing import Iterator, Optional

import libcst as cst

from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic import Module, Scope, arg, literal_str
from tfpar_lint.semantic.lifecycle import (constant_path, mentions_task, mwms_state, path_text, save_calls, task_tests,
                                           worker_zero_as_chief)

# Storage every machine of a cluster sees: object stores and distributed file systems (URL
# schemes), and the mounts platforms give them (Vertex AI's Cloud Storage FUSE, Databricks' DBFS).
SHARED_SCHEMES = ("gs://", "s3://", "s3a://", "s3n://", "hdfs://", "viewfs://", "abfs://", "abfss://", "wasb://",
                  "wasbs://", "az://", "adl://", "oss://", "cos://", "obs://")
SHARED_MOUNTS = ("/gcs/", "/dbfs/")
# Environment variables a training platform sets to a shared location, the same on every worker
# (Vertex AI custom training: Cloud Storage URIs under the job's base output directory).
CLUSTER_DIRS = frozenset({"AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR"})
_LOCAL_ADDRESS = re.compile(r"""["'](?:localhost|127\.0\.0\.1|\[::1\]|0\.0\.0\.0)(?::|["'])""")
_REMOTE_ADDRESS = re.compile(r"""["'](?!localhost|127\.0\.0\.1|\[::1\]|0\.0\.0\.0)[\w.-]+:\d{2,5}["']""")
_ENV_READERS = frozenset({"os.environ.get", "os.getenv", "os.environ.__getitem__"})


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


def workers_on_this_machine(m: Module) -> bool:
    """The module writes a TF_CONFIG whose cluster addresses are all on this machine (``localhost``,
    ``127.0.0.1``): its workers share this machine's file system."""
    if "TF_CONFIG" not in m.source or not m.env_writes("TF_CONFIG"):
        return False
    return bool(_LOCAL_ADDRESS.search(m.source)) and not _REMOTE_ADDRESS.search(m.source)


class SharedSavePath(Rule):
    CODE = "TFP604"
    NAME = "shared-save-path"
    SUMMARY = "every MultiWorkerMirroredStrategy worker saves to the same path on storage they share"
    FIX_HINT = ("Give each non-chief worker its own temporary path (e.g. `<dir>/workertemp_<task_id>`) and delete "
                "it after saving; only the chief writes the real path.")
    DEFAULT_ENABLED = True
    SEVERITY = "warning"
    PROBE = "lifecycle"
    MARKERS = (("MultiWorkerMirroredStrategy",), ("save", "write", "export"))

    def check(self) -> Iterator[Report]:
        m = self.module
        local_cluster: Optional[bool] = None
        reported: set[int] = set()
        for sc in save_calls(m):
            if not mwms_state(m, sc.obj):
                continue
            for test, scope, order in task_tests(m, sc):
                part = worker_zero_as_chief(m, test, scope, order)
                if part is None or id(part) in reported:
                    continue
                reported.add(id(part))
                yield Report(
                    part,
                    f"`{m.code(part)}` counts worker 0 as the chief, and the test also passes the `chief` task: "
                    f"when TF_CONFIG has a `chief` task, the chief and worker 0 both take the chief's side of "
                    f"`{m.code(test)}` and both run `{sc.what}(...)` (line {{line}}) to the real path, overwriting "
                    f"each other's files; TensorFlow counts worker 0 as the chief only when the cluster has no "
                    f"chief task (`strategy.extended.should_checkpoint` says which task it is)",
                    {"path": path_text(m, sc.path)},
                    related=sc.site.node,
                )
            if sc.path is None or sc.path_site is None:
                continue
            if mentions_task(m, sc.site):
                continue
            scope, order = sc.path_site.scope, sc.path_site.order
            shared = shared_storage(m, sc.path, scope, order)
            if shared is None:
                # a local path: separate machines each write their own disk; it collides only when
                # the workers share this machine
                if not constant_path(m, sc.path, scope, order):
                    continue
                if local_cluster is None:
                    local_cluster = workers_on_this_machine(m)
                if not local_cluster:
                    continue
                shared = "a local path, and the TF_CONFIG written here puts every worker on this machine"
            elif not constant_path(m, sc.path, scope, order, env=CLUSTER_DIRS):
                continue  # shared storage, but maybe a path of its own per worker
            related = sc.path if sc.path_site is not sc.site else None
            yield Report(
                sc.site.node,
                f"every worker of the MultiWorkerMirroredStrategy runs `{sc.what}(...)` to the same path "
                f"`{m.code(sc.path)}`{' (line {line})' if related is not None else ''} ({shared}): the workers "
                f"overwrite each other's files (checkpoint saves fail in `MergeV2Checkpoints` with `NotFoundError` / "
                f"`InvalidArgumentError`, or leave mixed files); non-chief workers should write to a temporary "
                f"path of their own",
                {"path": m.code(sc.path)},
                related=related,
            )
