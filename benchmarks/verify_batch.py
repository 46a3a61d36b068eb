"""Time ``--verify`` on many scripts in one call (what ``tests/test_verify.py`` runs), against
the same scripts run one by one with plain ``python``.

::

    .venv/bin/python benchmarks/verify_batch.py            # every fixture script (bad, good, tutorials)
    .venv/bin/python benchmarks/verify_batch.py --smoke    # three scripts

Prints one line per measurement: scripts, wall seconds of the batch, seconds per script, and
the sum of the plain runs (each bounded by ``--timeout``).  The verifier shares TensorFlow's
start-up between runs (a fork server) and runs scripts in parallel, so the batch should take
well under one plain run per script; this is measured here, never asserted in tests/.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))


def scripts(smoke: bool) -> list[str]:
    fx = os.path.join(ROOT, "fixtures")
    out = sorted(glob.glob(os.path.join(fx, "TFP[1-7][0-9][0-9]", "*.py")))
    out += sorted(glob.glob(os.path.join(fx, "tutorials", "*.py")))
    if smoke:
        want = ("TFP201/bad.py", "TFP201/good.py", "TFP301/bad.py")
        out = [p for p in out if p.endswith(want)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--no-plain", action="store_true", help="skip the plain python runs")
    args = ap.parse_args()
    from tfpar_lint.verify import verify_findings
    from tfpar_lint.verify.testing import expected_findings

    paths = scripts(args.smoke)
    findings = [f for p in paths for f in expected_findings(p)]
    t0 = time.time()
    runs = verify_findings(paths, findings, devices="cpu:2", max_steps=3, timeout=args.timeout)
    wall = time.time() - t0
    print(f"verify batch: {len(runs)} scripts in {wall:.1f} s ({wall / max(1, len(runs)):.2f} s per script), "
          f"cpu:2, max-steps 3, {os.cpu_count()} cores")
    if not args.no_plain:
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
        total = 0.0
        for p in paths:
            cwd = tempfile.mkdtemp(prefix="tfpar-plain-")  # what the script writes lands there
            t = time.time()
            try:
                subprocess.run([sys.executable, p], cwd=cwd, env=env, capture_output=True, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                pass
            total += time.time() - t
            shutil.rmtree(cwd, ignore_errors=True)
        print(f"plain python, one by one: {len(paths)} scripts in {total:.1f} s; batch / plain = {wall / total:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
