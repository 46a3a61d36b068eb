"""Runtime verifier: run training scripts under instrumentation on several
(logical) devices and confirm or refute the linter's findings.

Entry point for the CLI::

    verify_findings(scripts, findings, devices="auto", max_steps=3, timeout=120.0,
                    script_args=(), jobs=None, workdir=None) -> list[ScriptRun]

Layout (driver, sandbox, probes, report):

* ``select.py``      - what ``--verify`` runs (entry points that use a strategy; what is skipped and why)
* ``driver.py``      - child processes, timeouts, local clusters, interrupts (``zygote.py``: the fork server)
* ``sandbox.py``     - containment: user/mount/PID namespaces with overlays (``redirect.py``: the Python-level
  fallback); ``procs.py``: process trees, marker sweeps, kills, capped output relays
* ``child.py``       - the instrumented child (``python -m tfpar_lint.verify.child``); ``instrument.py`` (core
  patches: strategy devices, strategy.run, step bounds, dataset element tags), ``runtime.py`` (the recorder,
  stack helpers, patch/import hooks), ``source.py`` (line markers), ``devices.py``, ``synthetic.py``
* ``probes/``        - one module per rule family: ``install``/``collect`` in the child, ``seen(run)`` in the
  parent (``probes/__init__.py`` turns what was seen into verdicts the same way for every family)
* ``report.py``      - verdicts of findings and scripts (CONFIRMED, RUNTIME, NOT_REPRODUCED, INCONCLUSIVE,
  COULD_NOT_RUN); ``result.py``: :class:`ScriptRun` / :class:`FamilyObservation`

Importing this package does not import TensorFlow.
"""
from __future__ import annotations

from typing import Optional, Sequence

from tfpar_lint.finding import Finding
from tfpar_lint.verify.result import FamilyObservation, ScriptRun, family_of

__all__ = ["verify_findings", "ScriptRun", "FamilyObservation", "family_of"]


def verify_findings(scripts: list[str], findings: list[Finding], *, devices: str = "auto",
                    max_steps: int = 3, timeout: float = 120.0, script_args: Sequence[str] = (),
                    jobs: Optional[int] = None, workdir: Optional[str] = None,
                    sandbox: Optional[str] = None) -> list[ScriptRun]:
    """Run each script under instrumentation and set finding.verification on every finding
    whose finding.path is one of the scripts. Returns one ScriptRun per script run (path,
    exit status, seconds, replicas, devices, notes such as 'keras.datasets replaced by synthetic
    arrays', hang location if killed).  ``sandbox``: "auto" (the default; raises
    ``tfpar_lint.verify.sandbox.Unavailable`` where the sandbox cannot be set up) or "none"."""
    from tfpar_lint.verify.driver import verify_findings as _run

    return _run(scripts, findings, devices=devices, max_steps=max_steps, timeout=timeout,
                script_args=script_args, jobs=jobs, workdir=workdir, sandbox=sandbox)
