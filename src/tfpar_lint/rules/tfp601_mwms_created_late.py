from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from tfpar_lint import tfapi as api
from tfpar_lint.rule import Report, Rule
from tfpar_lint.rules._lifecycle import mwms_ctor_nodes
from tfpar_lint.semantic import CallSite, Module, keyword

# Keyword arguments that make a Keras layer (and so a Sequential model) build at once.
_SHAPE_KEYWORDS = ("input_shape", "input_dim", "batch_input_shape", "batch_shape")
_INPUT_LAYERS = frozenset({"keras.Input", "keras.layers.Input", "keras.layers.InputLayer", "keras.InputLayer"})


def _builds_model(m: Module, cs: CallSite, q: str) -> bool:
    """A Keras model factory call that creates variables right away."""
    if q in ("keras.Model", "keras.models.Model"):
        return bool(cs.node.args)  # functional model: built from its inputs
    if q in ("keras.Sequential", "keras.models.Sequential"):
        layers = cs.node.args[0].value if cs.node.args else keyword(cs.node, "layers")
        if not isinstance(layers, (cst.List, cst.Tuple)) or not layers.elements:
            return False
        first = layers.elements[0].value
        if not isinstance(first, cst.Call):
            return False
        fq, _ = m.qualified_name(first.func, cs.scope, cs.order)
        return fq in _INPUT_LAYERS or any(keyword(first, k) is not None for k in _SHAPE_KEYWORDS)
    return q in api.MODEL_FACTORIES  # keras.applications.*, load_model, ... (from the API table)


def initialiser(m: Module, cs: CallSite) -> Optional[str]:
    """Source text of ``cs`` when the call initialises the TensorFlow runtime."""
    q, _ = m.qualified_name(cs.node.func, cs.scope, cs.order)
    if not q:
        return None
    if api.kind_of_constructor(q) == api.STRATEGY:
        return None  # several strategies in one program: a demo of alternatives (or TFP109's business)
    if api.initializes_runtime(q):
        return m.code(cs.node)
    if api.kind_of_constructor(q) == api.MODEL and _builds_model(m, cs, q):
        return m.code(cs.node)
    return None


class MwmsCreatedLate(Rule):
    CODE = "TFP601"
    NAME = "mwms-created-late"
    SUMMARY = "`MultiWorkerMirroredStrategy` created after TensorFlow already ran an op (collectives cannot be configured any more)"
    FIX_HINT = ("Create the MultiWorkerMirroredStrategy at program start, right after TF_CONFIG is known and "
                "before any tensor, variable, dataset, model or other strategy.")
    DEFAULT_ENABLED = True
    SEVERITY = "error"
    PROBE = "lifecycle"
    MARKERS = (("MultiWorkerMirroredStrategy",),)

    def check(self) -> Iterator[Report]:
        m = self.module
        ctors = mwms_ctor_nodes(m)
        if not ctors:
            return
        unsets = {id(site) for site in m.env_unsets("TF_CONFIG")}
        writes = {id(site) for site, _ in m.env_writes("TF_CONFIG")}
        done: set[int] = set()
        for trace in m.traces():
            for i, ev in enumerate(trace):
                site = ev.site
                if not isinstance(site, CallSite) or id(site.node) not in ctors or id(site.node) in done:
                    continue
                conds = set(ev.conds)
                last_env = next((e for e in reversed(trace[:i]) if id(e.site) in unsets | writes
                                 and set(e.conds) <= conds), None)
                if last_env is not None and id(last_env.site) in unsets:
                    continue  # TF_CONFIG removed first: a single-worker strategy, collectives not configured
                for prior in trace[:i]:
                    ps = prior.site
                    if not isinstance(ps, CallSite) or id(ps.node) in ctors:
                        continue
                    if not set(prior.conds) <= conds:
                        continue  # may not have run
                    text = initialiser(m, ps)
                    if text is None:
                        continue
                    via = ""
                    extra = [c for c in prior.via if c not in ev.via]
                    if extra:
                        via = f", called through `{m.code(extra[0].node)}`"
                    done.add(id(site.node))
                    yield Report(
                        site.node,
                        f"`{m.code(site.node)}` is created after `{text}` (line {{line}}{via}) already initialised "
                        f"the TensorFlow runtime: with TF_CONFIG set, TensorFlow raises `RuntimeError: Collective ops "
                        f"must be configured at program startup`; create the strategy first",
                        {"initialiser": text},
                        related=ps.node,
                    )
                    break
