"""``--verify`` as the machine is and under an artificial CPU load: the verdicts must not change.

::

    PYTHONPATH=src .venv/bin/python benchmarks/verify_load.py [--realcode ../shared/realcode] [--seeds ../shared/seeds]
        [--fixtures multiworker|all|none] [--load 2]

Verifies the runnable truth set (``REALCODE/runnable/RUNNABLE.tsv``, seed rows extracted as in
``verify_runnable.py``) and the fixtures (the multi-worker ones, or every ``bad*``/``good*`` fixture
and tutorial), each set in one ``tfpar-lint --verify --devices cpu:2 --format json`` call: once as the
machine is, then while ``--load`` x CPUs processes spin on the CPUs.  Prints the scripts whose
findings or verdicts differ, the rows that miss their truth, and both runs' wall times and load
averages.  ``tests/test_verify_load.py`` uses the same functions.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verify_runnable import rows  # noqa: E402  (the truth set's rows, seed blocks extracted)

MULTIWORKER = re.compile(r"MultiWorkerMirroredStrategy|CollectiveAllReduceStrategy")


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@contextlib.contextmanager
def cpu_load(n: int):
    """``n`` processes that spin on the CPUs until the block ends (killed by their own ids).  Each in a
    session of its own, as separate programs are: with the kernel's autogroup scheduling
    (/proc/sys/kernel/sched_autogroup_enabled) the CPU is shared between sessions, so spinners in one
    session would weigh as one program however many they are."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass"], stdin=subprocess.DEVNULL,
                                 start_new_session=True) for _ in range(n)]
    try:
        yield spinners
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait()


def readable_folder(prefix: str) -> str:
    """A new temporary folder that every user can read: run as root, the verifier runs a script as
    the owner of its folder or as an unprivileged user, who must be able to read it."""
    folder = tempfile.mkdtemp(prefix=prefix)
    os.chmod(folder, 0o755)
    return folder


def truth_rows(realcode: str, seeds: str, folder: str) -> list[tuple[str, str]]:
    """(script path, bad|good) per row of the truth set; seed rows are written into ``folder``."""
    out = [(path, kind) for _rel, kind, path in rows(realcode, seeds, folder)]
    for path, _kind in out:
        if os.path.dirname(path) == folder:
            os.chmod(path, 0o644)
    return out


def fixtures(which: str) -> list[str]:
    """``multiworker``: the fixtures that run as a local cluster; ``all``: every bad/good fixture and
    tutorial; ``none``."""
    out = []
    if which == "none":
        return out
    for dirpath, _dirs, files in os.walk(os.path.join(ROOT, "fixtures")):
        folder = os.path.basename(dirpath)
        if not (re.fullmatch(r"TFP[1-7]\d\d", folder) or folder == "tutorials"):
            continue  # the rule families the verifier runs (as tests/test_verify.py), and the tutorials
        for name in files:
            path = os.path.join(dirpath, name)
            if not (name.endswith(".py") and (name.startswith(("bad", "good")) or folder == "tutorials")):
                continue
            with open(path, encoding="utf-8") as f:
                if which == "all" or MULTIWORKER.search(f.read()):
                    out.append(path)
    return sorted(out)


def verdicts(paths: list[str], cwd: str) -> tuple[dict, dict]:
    """One ``tfpar-lint --verify`` of ``paths``: real path -> sorted (code, line, verdict) of its findings
    (E904: the script could not run), and the run (exit status, seconds, load averages, stderr, evidence)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    env.pop("TFPAR_VERIFY_LOAD_SCALE", None)  # measured, as a user's run would
    load0 = os.getloadavg()[0]
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "tfpar_lint", "--verify", "--devices", "cpu:2", "--no-cache",
                        "--no-config", "--format", "json", *paths], capture_output=True, text=True, env=env, cwd=cwd)
    found: dict[str, list] = {os.path.realpath(x): [] for x in paths}
    evidence = {}
    for d in json.loads(p.stdout or "[]"):
        v = d.get("verification") or {}
        key = os.path.realpath(d["path"])
        found.setdefault(key, []).append((d["code"], d["line"], v.get("status", "")))
        evidence[f"{key}:{d['line']}:{d['code']}"] = v.get("evidence", "")
    return ({k: sorted(v) for k, v in found.items()},
            {"exit": p.returncode, "seconds": round(time.time() - t0, 1), "load_start": round(load0, 2),
             "load_end": round(os.getloadavg()[0], 2), "stderr": p.stderr[-3000:], "evidence": evidence})


def misses_truth(found: list, kind: str) -> bool:
    seen = any(status in ("CONFIRMED", "RUNTIME") for _c, _l, status in found)
    return not seen if kind == "bad" else bool(found)


def idle_and_loaded(paths: list[str], cwd: str, load: float = 2.0) -> dict:
    idle, idle_run = verdicts(paths, cwd)
    n = max(1, round(load * cpu_count()))
    with cpu_load(n):
        time.sleep(1.0)  # the spinners are running before the verifier measures the machine
        loaded, loaded_run = verdicts(paths, cwd)
    return {"paths": paths, "idle": idle, "loaded": loaded, "idle_run": idle_run, "loaded_run": loaded_run,
            "spinners": n}


def differences(res: dict) -> dict:
    return {p: (res["idle"][os.path.realpath(p)], res["loaded"][os.path.realpath(p)]) for p in res["paths"]
            if res["idle"][os.path.realpath(p)] != res["loaded"][os.path.realpath(p)]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shared = os.path.join(os.path.dirname(ROOT), "shared")
    ap.add_argument("--realcode", default=os.path.join(shared, "realcode"))
    ap.add_argument("--seeds", default=os.path.join(shared, "seeds"))
    ap.add_argument("--fixtures", choices=("multiworker", "all", "none"), default="multiworker")
    ap.add_argument("--load", type=float, default=2.0, help="spinning processes per CPU during the loaded run")
    args = ap.parse_args()
    tmp = readable_folder("tfpar-load-")
    try:
        truth = truth_rows(args.realcode, args.seeds, tmp) if os.path.isdir(os.path.join(args.realcode, "runnable")) \
            else []
        paths = [p for p, _ in truth] + fixtures(args.fixtures)
        res = idle_and_loaded(paths, tmp, args.load)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for which in ("idle_run", "loaded_run"):
        r = res[which]
        print(f"{which[:-4]:6}: exit {r['exit']}, {r['seconds']:.0f} s, load average {r['load_start']} at the start, "
              f"{r['load_end']} at the end ({cpu_count()} CPUs" +
              (f", {res['spinners']} spinning processes)" if which == "loaded_run" else ")"))
    bad = 0
    for path, kind in truth:
        for which in ("idle", "loaded"):
            got = res[which][os.path.realpath(path)]
            if misses_truth(got, kind):
                bad += 1
                print(f"MISS {which} {kind} {os.path.basename(path)}: {got}")
    diff = differences(res)
    for p, (a, b) in diff.items():
        print(f"DIFF {os.path.relpath(p, ROOT) if p.startswith(ROOT) else os.path.basename(p)}: idle {a} loaded {b}")
    print(f"{len(paths)} scripts ({len(truth)} truth rows): {len(paths) - len(diff)} with the same verdicts idle and "
          f"loaded; truth rows missed: {bad}")
    return 0 if not diff and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
