from __future__ import annotations

from typing import Iterator

from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic import CallSite
from tfpar_lint.semantic.lifecycle import initialiser, mwms_ctor_nodes


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
                if any(isinstance(e.site, CallSite) and id(e.site.node) in ctors and set(e.conds) <= conds
                       for e in trace[:i]):
                    continue  # an earlier MultiWorkerMirroredStrategy configured the collectives: that one counts
                last_env = next((e for e in reversed(trace[:i]) if id(e.site) in unsets | writes
                                 and set(e.conds) <= conds), None)
                # TF_CONFIG removed on every path to the constructor (and not written again): the
                # process never has it when the strategy is made, whatever the launcher sets, so the
                # strategy is a single worker and TensorFlow only logs that collectives were not
                # configured at start-up -- the failure cannot happen.  Unless the constructor is
                # given its cluster another way (cluster_resolver=...).
                if last_env is not None and id(last_env.site) in unsets \
                        and not any(id(e.site) in writes for e in trace[trace.index(last_env) + 1:i]) \
                        and not any(a.keyword is None or a.keyword.value == "cluster_resolver"
                                    for a in site.node.args):
                    continue
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
