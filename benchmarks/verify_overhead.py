"""The cost of ``tfpar-lint --verify script.py`` against a plain ``python script.py``, one script at a
time, as a user runs them.

::

    PYTHONPATH=src .venv/bin/python benchmarks/verify_overhead.py [--repeat 3] [SCRIPT ...]

Default scripts: a few fixtures (a custom loop in a tf.function, an eager loop, a Keras fit, a thread
race).  Each is run ``--repeat`` times both ways, alternating; the median wall time of each is printed
with the ratio.  Plain runs get the same environment the verifier's children get on a CPU machine
(``CUDA_VISIBLE_DEVICES=""``, ``TF_CPP_MIN_LOG_LEVEL=2``) and a scratch working directory; the
verifier runs with its defaults (``--devices auto``: 2 logical CPU devices here, ``--max-steps 3``,
the sandbox), so its run also includes the lint, the instrumentation, the probes and the report.
Nothing is asserted: the numbers go to ``benchmarks/results.md``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = ["fixtures/tutorials/custom_loop_mirrored.py", "fixtures/TFP701/bad.py", "fixtures/TFP101/good.py",
           "fixtures/TFP301/bad.py"]


def _time(cmd: list[str], env: dict, cwd: str, timeout: float) -> tuple[float, int]:
    t = time.perf_counter()
    try:
        rc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        rc = -1
    return time.perf_counter() - t, rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scripts", nargs="*")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    scripts = [os.path.join(ROOT, s) if not os.path.isabs(s) else s for s in (args.scripts or DEFAULT)]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.path.join(ROOT, "src"))
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; median of {args.repeat} runs each")
    print(f"{'script':45} {'plain s':>8} {'verify s':>9} {'ratio':>6}  verify exit")
    for s in scripts:
        plain, ver, rcs = [], [], set()
        for _ in range(args.repeat):
            cwd = tempfile.mkdtemp(prefix="tfpar-overhead-")
            try:
                plain.append(_time([sys.executable, s], env, cwd, args.timeout)[0])
                t, rc = _time([sys.executable, "-m", "tfpar_lint", "--verify", "--no-cache", "--no-config", s], env,
                              cwd, args.timeout)
                ver.append(t)
                rcs.add(rc)
            finally:
                shutil.rmtree(cwd, ignore_errors=True)
        p, v = statistics.median(plain), statistics.median(ver)
        print(f"{os.path.relpath(s, ROOT):45} {p:8.2f} {v:9.2f} {v / p:6.2f}  {sorted(rcs)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
