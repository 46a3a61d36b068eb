from __future__ import annotations

from typing import Iterator

from tfpar_lint import tfapi as api
from tfpar_lint.rule import Report, Rule
from tfpar_lint.semantic.lifecycle import mwms_ctor_nodes
from tfpar_lint.semantic import CallSite


def exclusive(a, b) -> bool:
    """Two condition lists take different branches of one ``if``."""
    branch = {id(i): body for i, body in a}
    return any(id(i) in branch and branch[id(i)] != body for i, body in b)


def _call_leading_to(write, ctor):
    """Where the order mistake is written when both the strategy and the write happen in local
    functions called one after the other from the same code (``strategy = make_strategy()``, then
    ``setup_cluster(i)``): the call that leads to the write there.  None otherwise (the write is
    reported where it is)."""
    k = 0
    while k < len(write.via) and k < len(ctor.via) and write.via[k] is ctor.via[k]:
        k += 1
    if k < len(write.via) and k < len(ctor.via):
        return write.via[k]
    return None


class TfConfigAfterStrategy(Rule):
    CODE = "TFP602"
    NAME = "tf-config-after-strategy"
    SUMMARY = "`TF_CONFIG` set after the `MultiWorkerMirroredStrategy` was created (silent single-worker training)"
    FIX_HINT = "Set `os.environ['TF_CONFIG']` before creating the MultiWorkerMirroredStrategy (it reads TF_CONFIG once, in its constructor)."
    DEFAULT_ENABLED = True
    SEVERITY = "warning"
    PROBE = "lifecycle"
    MARKERS = (("MultiWorkerMirroredStrategy",), ("TF_CONFIG",))

    def check(self) -> Iterator[Report]:
        m = self.module
        writes = {id(site): site for site, _ in m.env_writes("TF_CONFIG")}
        if not writes:
            return
        ctors = mwms_ctor_nodes(m)
        if not ctors:
            return
        launchers = {id(cs.node) for cs, _ in m.calls_to(api.PROCESS_LAUNCHERS)}
        done: set[int] = set()
        for trace in m.traces():
            for j, ev in enumerate(trace):
                if id(ev.site) not in writes or id(ev.site) in done:
                    continue
                before = [e for e in trace[:j] if isinstance(e.site, CallSite) and id(e.site.node) in ctors
                          and not exclusive(e.conds, ev.conds)]
                if not before:
                    continue
                after = trace[j + 1:]
                if any(isinstance(e.site, CallSite) and id(e.site.node) in ctors and not exclusive(e.conds, ev.conds)
                       for e in after):
                    continue  # a strategy created afterwards reads it
                if any(isinstance(e.site, CallSite) and id(e.site.node) in launchers for e in after):
                    continue  # written for a child process
                if any(id(e.site) in writes and e is not ev and not exclusive(e.conds, ev.conds) for e in trace):
                    continue  # written several times: configuring worker processes started elsewhere
                done.add(id(ev.site))
                ctor = before[-1].site
                at = _call_leading_to(ev, before[-1])
                what = "TF_CONFIG is set" if at is None else f"`{m.code(at.node)}` sets TF_CONFIG"
                yield Report(
                    ev.site.node if at is None else at.node,
                    f"{what} after `{m.code(ctor.node)}` (line {{line}}) was created: the strategy read "
                    f"TF_CONFIG in its constructor, so every worker trains alone (`num_replicas_in_sync` stays "
                    f"at its single-worker value); set TF_CONFIG before creating the strategy",
                    {},
                    related=ctor.node,
                )

    # -- fix (unsafe: the code between them may be what TF_CONFIG's value depends on at run time):
    #    move the TF_CONFIG statement to just before the statement that creates the strategy
    FIXABLE = "unsafe"

    def fix(self, report: Report):
        from tfpar_lint.fix import UNSAFE, Fix, block_of, line_indent, names_in, statement_of, statement_text

        m = self.module
        cfg = statement_of(m, report.node)
        ctor = statement_of(m, report.related) if report.related is not None else None
        if cfg is None or ctor is None:
            return None
        block, i_cfg = block_of(m, cfg)
        block2, i_ctor = block_of(m, ctor)
        if block is None or block is not block2 or not i_ctor < i_cfg:
            return None
        used = names_in(cfg)
        for stmt in block.body[i_ctor:i_cfg]:  # what runs in between must not feed the value
            if used & names_in(stmt):
                return None
        text = statement_text(m, cfg)
        return (Fix("Set TF_CONFIG before creating the strategy", UNSAFE)
                .delete_statement(cfg, keep_comment=False)
                .insert_lines_before(ctor, line_indent(m, ctor) + text))
