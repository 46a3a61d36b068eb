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
                # TF_CONFIG removed first: this run is a single worker (TensorFlow only logs that
                # collectives were not configured at start-up); the order is still the one that fails
                # on a cluster, so it is reported, saying so
                unset = last_env if last_env is not None and id(last_env.site) in unsets else None
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
                    single = ""
                    if unset is not None:
                        single = (f" (here TF_CONFIG is removed first, at `{m.code(unset.site.node)}`: this run is a "
                                  f"single worker and TensorFlow only logs `Collective ops is not configured at "
                                  f"program startup`)")
                    yield Report(
                        site.node,
                        f"`{m.code(site.node)}` is created after `{text}` (line {{line}}{via}) already initialised "
                        f"the TensorFlow runtime: with TF_CONFIG set, TensorFlow raises `RuntimeError: Collective ops "
                        f"must be configured at program startup`{single}; create the strategy first",
                        {"initialiser": text},
                        related=ps.node,
                    )
                    break
