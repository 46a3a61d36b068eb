"""A crash that is a distribution mistake's own symptom is a finding of its rule (issue 31).

The table is ``src/tfpar_lint/verify/symptoms.py``.  For every symptom a crash can show, a script
(a bad fixture, or ``data_verify/symptoms/``) that dies with that error runs on real TensorFlow
(2 logical CPU devices; a local cluster of two workers for the multi-worker ones):

* with no static finding (as ``--select TFP900``): a RUNTIME finding of one of the symptom's rules,
  whose evidence quotes the error and names the line where it was raised; the script's verdict is
  CONFIRMED and the exit status 1, never COULD_NOT_RUN;
* with the static findings of its ``# expect:`` lines: those of the symptom's rules are CONFIRMED
  and no RUNTIME finding repeats one of them.

A crash that matches no symptom stays COULD_NOT_RUN (``data_verify/symptoms/unmatched_shape.py``: a
shape error whose sizes are not a batch and that batch times the replicas).
"""
from __future__ import annotations

import importlib.util
import os
import re

import pytest

from tfpar_lint import registry
from tfpar_lint.finding import CONFIRMED, COULD_NOT_RUN, RUNTIME
from tfpar_lint.verify import symptoms
from tfpar_lint.verify.testing import expected_findings

HAVE_TF = importlib.util.find_spec("tensorflow") is not None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OWN = os.path.join("tests", "data_verify", "symptoms")

# symptom -> a script that crashes with it
SCRIPTS = {
    "colocate": "fixtures/TFP101/bad.py",
    "not-in-scope": "fixtures/TFP101/bad_tf_keras.py",
    "update-assert": "fixtures/TFP101/bad_ctl.py",
    "mixing": "fixtures/TFP102/bad.py",
    "slot": f"{OWN}/slot_restore.py",
    "metric": "fixtures/TFP103/bad.py",
    "need-scope": "fixtures/TFP106/bad.py",
    "handle-outside-replica": "fixtures/TFP111/bad.py",
    "sync-on-read-cross-replica": "fixtures/TFP111/bad_metric.py",
    "cross-replica-call": f"{OWN}/cross_replica_apply.py",
    "lazy-slots-placeholder": "fixtures/TFP113/bad.py",
    "shadow-variables": "fixtures/TFP112/bad.py",
    "auto-shard": f"{OWN}/auto_shard.py",
    "global-batch-shape": "fixtures/TFP209/bad.py",
    "keras2-loss-reduction": f"{OWN}/keras2_loss.py",
    "per-replica-outside-replica-context": f"{OWN}/per_replica_op.py",
    "per-replica-as-tensor": f"{OWN}/per_replica_numpy.py",
    "collectives-configured-late": "fixtures/TFP601/bad.py",
    "keras3-fit-per-replica": "fixtures/TFP606/bad.py",
    "shared-save-path": f"{OWN}/shared_save_path.py",
    "shared-h5-file": f"{OWN}/shared_h5_file.py",  # deterministic: TFP610/bad_cli.py races (it crashes on some runs)
    "gradients-outside-replicas": f"{OWN}/gradients_outside.py",
    "collective-mismatch": f"{OWN}/collective_shape.py",
    "collective-peer-ended": "fixtures/TFP608/bad.py",
    "tape-reused": "fixtures/TFP702/bad.py",
    "optimizer-unknown-variable": "fixtures/TFP703/bad.py",
    "numpy-while-tracing": "fixtures/TFP705/bad.py",
}
UNMATCHED = f"{OWN}/unmatched_shape.py"
CRASHING = [s for s in symptoms.SYMPTOMS if s.alone or s.when]  # the ones a crash alone can show


def _norm(text: str) -> str:
    return " ".join(str(text).split())


# ------------------------------------------------------------ the table (no TensorFlow)
def test_every_crash_symptom_has_a_script():
    assert sorted(SCRIPTS) == sorted(s.key for s in CRASHING)
    for path in list(SCRIPTS.values()) + [UNMATCHED]:
        assert os.path.isfile(os.path.join(ROOT, path)), path


def test_every_symptom_names_rules_and_conditions_that_exist():
    rules = registry.rules_by_code()
    for s in symptoms.SYMPTOMS:
        re.compile(s.pattern)
        assert s.codes and s.codes[0] in rules, s
        assert set(s.when) <= set(symptoms.CONDITIONS), s
        assert s.quote.strip(), s  # what the pages quote (the real runs check that the error has it)


@pytest.mark.parametrize("sym", CRASHING, ids=lambda s: s.key)
def test_rule_pages_name_the_symptom(sym):
    """The "How --verify confirms it" section of each (current) rule of the symptom quotes it."""
    rules = registry.rules_by_code()
    for code in sym.codes:
        if code not in rules:
            continue  # a retired code keeps its page as it was
        with open(os.path.join(ROOT, "rules", f"{code}.md"), encoding="utf-8") as f:
            page = f.read()
        m = re.search(r"^## How --verify confirms it\n(.*?)(?=^## )", page, re.S | re.M)
        assert m and _norm(sym.quote) in _norm(m.group(1)), f"rules/{code}.md does not quote {sym.quote!r}"


def test_the_probes_take_their_error_texts_from_the_table():
    from tfpar_lint.verify.probes import execution, input as input_probe, lifecycle, loss, scope

    table = {s.pattern for s in symptoms.SYMPTOMS}
    used = {p for ps in scope.SYMPTOMS.values() for p in ps} | set(scope._CROSS_REPLICA_STEP)
    used |= {scope._PLACEHOLDER, scope._SHADOW_TYPE, input_probe._SHARD_ERRORS, *input_probe.SHAPE_ERRORS}
    used |= set(lifecycle._PEER_FAILED)
    for mod in (execution, lifecycle, loss):
        used |= {p for ps in mod.ERRORS.values() for p in ps}
    assert used <= table, used - table


class _Run:
    """What the conditions read of a run: its strategies and workers."""

    def __init__(self, replicas=2, workers=None):
        self.replicas = replicas
        self.workers = workers or [{}]

    def strategies(self):
        return [{"replicas": self.replicas}]


@pytest.mark.parametrize("message, replicas, expected", [
    ("Dimensions must be equal, but are 4 and 8 for '{{node add}}' with input shapes: [4,3], [8,3].", 2, True),
    ("Cannot reshape a tensor with 12 elements to shape [8,3,1] (24 elements) for '{{node Reshape}}'", 2, True),
    ("Dimensions must be equal, but are 3 and 5 for '{{node add}}' with input shapes: [3], [5].", 2, False),
    ("Dimensions must be equal, but are 4 and 8 for '{{node add}}' with input shapes: [4,3], [8,3].", 1, False),
])
def test_a_shape_error_is_tfp209_only_when_its_sizes_are_a_batch_and_the_global_batch(message, replicas, expected):
    err = {"type": "ValueError", "message": message, "frames": []}
    s = symptoms.match(err, _Run(replicas), crash=True)
    assert (s is not None and s.key == "global-batch-shape") is expected


def test_a_collective_abort_is_a_finding_only_when_a_peer_ran_to_its_end():
    err = {"type": "UnavailableError", "message": "Collective ops is aborted by: Socket closed", "frames": [],
           "worker": 1}
    ended = _Run(workers=[{"outcome": "ok"}, {"outcome": "error"}])
    stopped = _Run(workers=[{"outcome": "stopped"}, {"outcome": "error"}])  # the verifier's step bound
    crashed = _Run(workers=[{"outcome": "error"}, {"outcome": "error"}])
    assert symptoms.match(err, ended, crash=True).key == "collective-peer-ended"
    assert symptoms.match(err, stopped, crash=True) is None
    assert symptoms.match(err, crashed, crash=True) is None


# ------------------------------------------------------------ real TensorFlow
requires_tf = pytest.mark.skipif(not HAVE_TF, reason="tensorflow is not importable (bash scripts/dev.sh setup "
                                                      "installs it)")


def _verify(paths, static: bool):
    from tfpar_lint.verify import verify_findings

    findings = {p: (expected_findings(p) if static else []) for p in paths}
    runs = verify_findings(paths, [f for p in paths for f in findings[p]], devices="cpu:2", timeout=180.0)
    return {os.path.realpath(r.path): r for r in runs}, findings


@pytest.fixture(scope="module")
def crashed():
    paths = sorted({os.path.join(ROOT, p) for p in SCRIPTS.values()} | {os.path.join(ROOT, UNMATCHED)})
    return _verify(paths, static=False)[0]


# With their static findings, only the symptom scripts of this folder run again: the bad fixtures'
# findings are verified by tests/test_verify.py, which requires them CONFIRMED.
STATIC = sorted(k for k, p in SCRIPTS.items() if p.startswith(OWN) and expected_findings(os.path.join(ROOT, p)))


@pytest.fixture(scope="module")
def crashed_static():
    paths = sorted({os.path.join(ROOT, SCRIPTS[k]) for k in STATIC})
    return _verify(paths, static=True)


@pytest.mark.verify
@requires_tf
@pytest.mark.parametrize("key", sorted(SCRIPTS), ids=str)
def test_crash_with_the_symptom_is_a_runtime_finding(crashed, key):
    from tfpar_lint.cli import exit_code

    sym = symptoms.BY_KEY[key]
    run = crashed[os.path.realpath(os.path.join(ROOT, SCRIPTS[key]))]
    said = _norm(run.error + "\n" + run.stderr)
    assert _norm(sym.quote) in said, f"{SCRIPTS[key]} did not crash with {sym.quote!r}: {run.summary()}"
    found = run.new_findings()
    mine = [f for f in found if f.code in sym.codes and f.verification.status == RUNTIME]
    assert mine, (f"{SCRIPTS[key]}: no RUNTIME finding of {sym.codes}: "
                  f"{[(f.code, f.line, f.verification.evidence) for f in found]}\n{run.summary()}")
    ev = mine[0].verification.evidence
    # the error, its type, and the line where it was raised
    assert run.error.split(":")[0] in ev, ev
    assert run.error_line and (f"line {run.error_line}" in ev or f":{run.error_line})" in ev), (run.error_line, ev)
    assert run.status == CONFIRMED and not run.unverified, run.summary()
    assert exit_code(found, [], verified=True, exit_zero=False, not_run=0) == 1


@pytest.mark.verify
@requires_tf
def test_crash_that_matches_no_symptom_stays_could_not_run(crashed):
    run = crashed[os.path.realpath(os.path.join(ROOT, UNMATCHED))]
    assert run.outcome in ("error", "failed") and "Incompatible shapes" in run.error, run.summary()
    assert run.status == COULD_NOT_RUN and run.runtime_findings == [], run.summary()
    assert run.reason.startswith("crash"), run.reason


@pytest.mark.verify
@requires_tf
@pytest.mark.parametrize("key", STATIC, ids=str)
def test_static_finding_of_the_symptom_is_confirmed_not_repeated(crashed_static, key):
    runs, findings = crashed_static
    path = os.path.join(ROOT, SCRIPTS[key])
    run = runs[os.path.realpath(path)]
    static = findings[path]
    for f in static:
        if f.code in symptoms.BY_KEY[key].codes:
            assert f.verification.status == CONFIRMED, (f.code, f.line, f.verification.evidence, run.summary())
    again = [(g.code, g.line) for g in run.new_findings() if (g.code, g.line) in {(f.code, f.line) for f in static}]
    assert not again, f"RUNTIME findings repeat static ones: {again}"

