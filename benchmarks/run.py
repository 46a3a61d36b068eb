"""Benchmark tfpar-lint against its peers and floors, on the same files, in one run.

::

    .venv/bin/python benchmarks/run.py                 # full corpus, 3 runs -> benchmarks/results.md
    .venv/bin/python benchmarks/run.py --runs 5
    .venv/bin/python benchmarks/run.py --smoke         # fixtures/ + a handful of files, 1 run (CI)
    .venv/bin/python benchmarks/run.py --only tfpar    # only the cases whose key starts with "tfpar"

Corpus: every ``.py`` file of the installed ``tensorflow``, ``keras`` and
``tf_keras`` packages (found with ``importlib.util.find_spec``, without
importing them) plus ``fixtures/``.  The list is written once to a file and
every tool gets the same files as explicit arguments.

Each case is a separate process; its wall time, CPU time (user + system of
the whole process tree) and peak RSS (of the largest single process in the
tree: ``wait4``'s ``ru_maxrss``) are recorded.  Cases run round-robin (run 1
of every case, then run 2, ...) so that changes in background load hit all
tools alike; the table shows medians.  A case whose first run takes longer
than ``--repeat-limit`` seconds is not repeated (the table says so) to keep
a full run near 15 minutes on a 2-core machine.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PACKAGES = ("tensorflow", "keras", "tf_keras")
SMOKE_EXTRA = 8  # corpus files added to fixtures/ in --smoke
# results.md from this line on is written by other scripts (j1_timing.py, pathological.py) and kept
KEEP_MARKER = "<!-- measured by other scripts; benchmarks/run.py keeps what follows -->"

# ----------------------------------------------------------------------------- corpus


def package_dirs(name: str) -> list[str]:
    """Folders of an installed package, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [str(p) for p in spec.submodule_search_locations]


def py_files(folder: str) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for f in sorted(filenames):
            if f.endswith(".py"):
                out.append(os.path.join(dirpath, f))
    return out


def build_corpus(smoke: bool, snapshot: Optional[Path] = None) -> tuple[list[str], dict[str, int]]:
    """The files to lint.  With ``snapshot``, fixtures/ is copied there first and
    the copies are used (others may edit fixtures/ while the benchmark runs)."""
    files: list[str] = []
    per_source: dict[str, int] = {}
    pkg_files: list[str] = []
    for name in PACKAGES:
        found = [f for d in package_dirs(name) for f in py_files(d)]
        per_source[name] = len(found)
        pkg_files.extend(found)
    if smoke:
        # a handful of real files that reach the parser: small distribute/ modules
        cands = [f for f in pkg_files if f"{os.sep}distribute{os.sep}" in f and not f.endswith("__init__.py")]
        cands.sort(key=lambda f: (os.path.getsize(f) < 2000, os.path.getsize(f), f))
        pkg_files = sorted(cands[:SMOKE_EXTRA])
        per_source = {"tensorflow/keras/tf_keras (smoke sample)": len(pkg_files)}
    files.extend(pkg_files)
    fix_dir = ROOT / "fixtures"
    if snapshot is not None and fix_dir.is_dir():
        shutil.copytree(fix_dir, snapshot / "fixtures", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        fix_dir = snapshot / "fixtures"
    fixtures = py_files(str(fix_dir)) if fix_dir.is_dir() else []
    per_source["fixtures"] = len(fixtures)
    files.extend(fixtures)
    return files, per_source


def count_lines(files: list[str]) -> tuple[int, int]:
    lines = size = 0
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        lines += data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        size += len(data)
    return lines, size


def freeze_package(tmp: Path) -> dict[str, str]:
    """Copy src/tfpar_lint into the temp folder and return an environment that imports that copy.

    Other people may edit the tree while a benchmark runs; every tfpar-lint
    process of one run must see the same code (and the cache's fingerprint of
    tfpar-lint's own files must not change between the cache-writing run and
    the warm runs).
    """
    env = dict(os.environ)
    env.setdefault("NO_COLOR", "1")
    env.pop("TFPAR_LINT_DEBUG", None)
    src = ROOT / "src" / "tfpar_lint"
    if src.is_dir():
        dst = tmp / "src" / "tfpar_lint"
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        env["PYTHONPATH"] = os.pathsep.join([str(tmp / "src")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def git_state() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=str(ROOT), timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src/tfpar_lint"], capture_output=True,
                               text=True, cwd=str(ROOT), timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return head + (" + uncommitted changes in src/tfpar_lint" if dirty else "") if head else ""


def parsed_subset(listfile: Path, env: dict[str, str]) -> list[str]:
    """The files tfpar-lint's pre-filter lets through (default rules, default options).

    Computed in a child process so that this one stays small: a child starts
    with its parent's peak RSS as its own (``ru_maxrss`` survives fork+exec).
    """
    out = subprocess.run([sys.executable, str(HERE / "floors.py"), "subset", str(listfile)],
                         capture_output=True, text=True, check=True, cwd=str(ROOT), env=env).stdout
    return [line for line in out.splitlines() if line]


# ----------------------------------------------------------------------------- machine


def versions() -> dict[str, str]:
    out = {}
    dists = md.packages_distributions()
    for mod, label in (("tfpar_lint", "tfpar-lint"), ("libcst", "libcst"), ("flake8", "flake8"),
                       ("bugbear", "flake8-bugbear"), ("pycodestyle", "pycodestyle"), ("pyflakes", "pyflakes"),
                       ("ruff", "ruff"), ("torchfix", "TorchFix"), ("tensorflow", "tensorflow"),
                       ("keras", "keras"), ("tf_keras", "tf_keras")):
        for dist in dists.get(mod, []) or [label]:
            try:
                out[label] = f"{md.version(dist)}" + (f" ({dist})" if dist.lower().replace("_", "-") not in
                                                      (label.lower().replace("_", "-"),) else "")
                break
            except md.PackageNotFoundError:
                continue
    return out


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            kb = int(fh.readline().split()[1])
            mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cores": os.cpu_count() or 1,
        "cpu": cpu or platform.processor() or platform.machine(),
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }


def loadavg() -> Optional[float]:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


# ----------------------------------------------------------------------------- running


@dataclass
class Case:
    key: str
    label: str
    kind: str  # tfpar | peer | floor
    jobs: Optional[int]  # None: not a -j setting (threads, see note)
    files: int
    cmd: Optional[list[str]] = None
    skip: str = ""
    note: str = ""
    out_json: bool = False  # writes a tfpar-lint JSON report we compare
    stdout_json: bool = False  # floors print a JSON summary on stdout
    samples: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    capped: bool = False
    failed: str = ""

    def med(self, what: str) -> Optional[float]:
        vals = [s[what] for s in self.samples if s.get(what) is not None]
        return statistics.median(vals) if vals else None


GNU_TIME = "/usr/bin/time" if os.path.exists("/usr/bin/time") else None


def run_process(cmd: list[str], stdout_path: str, stderr_path: str, env: dict[str, str]) -> dict[str, Any]:
    """Run ``cmd``; wall, CPU (user+sys of the tree) and peak RSS of its largest process.

    With GNU time the command runs under ``/usr/bin/time -f %M`` (a small
    process), so that the peak RSS is not floored at this script's own RSS.
    """
    load = loadavg()
    rss_file = stdout_path + ".rss"
    if GNU_TIME:
        cmd = [GNU_TIME, "-f", "%M", "-o", rss_file] + cmd
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        t0 = time.perf_counter()
        if hasattr(os, "wait4"):
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=str(ROOT))
            _, status, ru = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
            cpu = ru.ru_utime + ru.ru_stime
            rss_mb = ru.ru_maxrss / 1024  # Linux: KiB
        else:  # pragma: no cover - no wait4 (not Linux/macOS): children's totals
            import resource

            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=str(ROOT))
            proc.wait()
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            rss_mb = after.ru_maxrss / 1024
    if GNU_TIME:
        try:
            with open(rss_file, encoding="utf-8") as fh:
                rss_mb = int(fh.read().strip().splitlines()[-1]) / 1024
        except (OSError, ValueError, IndexError):
            pass
    return {"wall": wall, "cpu": cpu, "rss_mb": rss_mb, "rc": proc.returncode, "load": load}


def tail(path: str, n: int = 400) -> str:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return ""
    return data[-n:].decode("utf-8", "replace").strip().replace("\n", " | ")


def tool(name: str) -> Optional[str]:
    """An executable next to this interpreter first, then on PATH."""
    cand = Path(sys.executable).parent / name
    if cand.is_file() and os.access(cand, os.X_OK):
        return str(cand)
    return shutil.which(name)


def cli_has(flag: str, env: dict[str, str]) -> bool:
    try:
        out = subprocess.run([sys.executable, "-m", "tfpar_lint", "--help"], capture_output=True, text=True,
                             timeout=60, cwd=str(ROOT), env=env).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return flag in out


def make_cases(files: list[str], subset: list[str], tmp: Path, jobs: int, env: dict[str, str]) -> list[Case]:
    n = len(files)
    lst = str(tmp / "files.txt")
    sub = str(tmp / "parsed.txt")
    out = tmp / "out"
    cases: list[Case] = []
    tfpar = [sys.executable, "-m", "tfpar_lint", "--no-config", "--no-progress", "--format", "json"]
    has_cache = cli_has("--no-cache", env)
    nocache = ["--no-cache"] if has_cache else []
    parsed_note = f"parses {len(subset)} of {n} files (pre-filter)"
    cases.append(Case("tfpar_cold_j1", "tfpar-lint, cold (`--no-cache`)", "tfpar", 1, n,
                      tfpar + ["-j1"] + nocache + ["-o", str(out / "tfpar_cold_j1.json")] + files,
                      note=parsed_note, out_json=True))
    cases.append(Case("tfpar_cold_jN", "tfpar-lint, cold (`--no-cache`)", "tfpar", jobs, n,
                      tfpar + [f"-j{jobs}"] + nocache + ["-o", str(out / "tfpar_cold_jN.json")] + files,
                      note=parsed_note, out_json=True))
    if has_cache:
        cdir = str(tmp / "cache")
        cases.append(Case("tfpar_warm_jN", "tfpar-lint, warm (cache, nothing changed)", "tfpar", jobs, n,
                          tfpar + [f"-j{jobs}", "--cache-dir", cdir, "-o", str(out / "tfpar_warm_jN.json")] + files,
                          note="every file a cache hit", out_json=True,
                          info={"prime": tfpar + [f"-j{jobs}", "--cache-dir", cdir, "-o",
                                                  str(out / "tfpar_prime.json")] + files}))
    else:
        cases.append(Case("tfpar_warm_jN", "tfpar-lint, warm", "tfpar", jobs, n,
                          skip="this tfpar-lint has no `--no-cache`/`--cache-dir` (no cache)"))

    # flake8 + bugbear
    f8_reason = ""
    if importlib.util.find_spec("flake8") is None:
        f8_reason = "flake8 not installed (pip install 'tfpar-lint[bench]')"
    elif importlib.util.find_spec("bugbear") is None:
        f8_reason = "flake8-bugbear not installed (pip install 'tfpar-lint[bench]')"
    f8 = [sys.executable, str(HERE / "flake8_only.py"), "--without", "tfpar-lint,torchfix", "--",
          "--isolated", "--select", "B"]
    f8_note = "pyflakes, pycodestyle, mccabe run too (flake8 runs every plugin); TorchFix/tfpar-lint plugins unloaded"
    for j, key in ((1, "flake8_j1"), (jobs, "flake8_jN")):
        cases.append(Case(key, "flake8 --select B (flake8-bugbear)", "peer", j, n,
                          None if f8_reason else f8 + [f"-j{j}"] + files, skip=f8_reason, note=f8_note))

    ruff = tool("ruff")
    r_reason = "" if ruff else "ruff not installed (pip install 'tfpar-lint[bench]')"
    base = [ruff or "ruff", "check", "--no-cache", "--isolated", "--exit-zero", "--output-format", "concise"]
    cases.append(Case("ruff_all", "ruff check --no-cache --select ALL", "peer", None, n,
                      None if r_reason else base + ["--select", "ALL"] + files, skip=r_reason,
                      note=f"ruff's own threads (all {jobs} cores)"))
    cases.append(Case("ruff_default", "ruff check --no-cache (default rules)", "peer", None, n,
                      None if r_reason else base + files, skip=r_reason,
                      note=f"ruff's own threads (all {jobs} cores)"))

    tfx = tool("torchfix")
    t_reason = "" if tfx else "TorchFix not installed (pip install 'tfpar-lint[bench]')"
    cases.append(Case("torchfix_jN", "TorchFix (`torchfix`, libcst)", "peer", jobs, n,
                      None if t_reason else [tfx or "torchfix", f"-j{jobs}"] + files, skip=t_reason,
                      note="parses only files that contain \"torch\""))

    fl = [sys.executable, str(HERE / "floors.py")]
    cases.append(Case("floor_ast", "floor: `ast.parse`, every file", "floor", 1, n, fl + ["ast", lst],
                      stdout_json=True))
    cases.append(Case("floor_cst", "floor: `libcst.parse_module`, every file", "floor", 1, n, fl + ["cst", lst],
                      stdout_json=True))
    cases.append(Case("floor_sem_sub", "floor: libcst parse + `semantic.Module` (the one traversal), "
                      "the files tfpar-lint parses, tfpar-lint's GC settings", "floor", 1, len(subset),
                      fl + ["semantic", sub],
                      stdout_json=True))
    cases.append(Case("plugin", "flake8 plugin on files the pre-filter rejects (in-process)", "floor", 1, n,
                      fl + ["plugin", lst], stdout_json=True))
    return cases


def execute(cases: list[Case], runs: int, repeat_limit: float, tmp: Path, verbose: bool,
            env: dict[str, str]) -> None:
    for case in cases:
        prime = case.info.get("prime")
        if case.cmd is None or not prime:
            continue
        s = run_process(prime, str(tmp / "out" / f"{case.key}-prime.out"), str(tmp / "out" / f"{case.key}-prime.err"), env)
        case.info["prime_sample"] = s
        if verbose:
            print(f"  prime {case.key}: {s['wall']:.2f}s wall", file=sys.stderr)
    for r in range(runs):
        for case in cases:
            if case.cmd is None or case.failed or (r > 0 and case.capped):
                continue
            so = str(tmp / "out" / f"{case.key}-{r}.out")
            se = str(tmp / "out" / f"{case.key}-{r}.err")
            s = run_process(case.cmd, so, se, env)
            ok_rcs = (0, 1) if case.kind != "floor" else (0,)
            if s["rc"] not in ok_rcs:
                case.failed = f"exit status {s['rc']}: {tail(se)}"
                if verbose:
                    print(f"  {case.key}: FAILED {case.failed}", file=sys.stderr)
                continue
            if case.stdout_json:
                try:
                    with open(so, encoding="utf-8") as fh:
                        s["result"] = json.loads(fh.read().strip().splitlines()[-1])
                except (OSError, ValueError, IndexError):
                    s["result"] = None
            case.samples.append(s)
            if r == 0 and repeat_limit and s["wall"] > repeat_limit and runs > 1:
                case.capped = True
            if verbose:
                print(f"  run {r + 1}/{runs} {case.key}: {s['wall']:.2f}s wall {s['cpu']:.2f}s cpu "
                      f"{s['rss_mb']:.0f} MB (load {s['load']})", file=sys.stderr)


# ----------------------------------------------------------------------------- findings


def load_report(path: Path) -> Optional[list]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return sorted(json.dumps(d, sort_keys=True) for d in data)


def compare_findings(tmp: Path) -> dict[str, Any]:
    out = tmp / "out"
    cold = load_report(out / "tfpar_cold_j1.json")
    res: dict[str, Any] = {"cold_findings": None if cold is None else len(cold)}
    for key in ("tfpar_cold_jN", "tfpar_prime", "tfpar_warm_jN"):
        other = load_report(out / f"{key}.json")
        res[key] = None if (cold is None or other is None) else (other == cold)
    return res


# ----------------------------------------------------------------------------- report


def fmt(x: Optional[float], nd: int = 2) -> str:
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{nd}f}"


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def targets(by: dict[str, Case], jobs: int, findings: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []

    def w(k: str) -> Optional[float]:
        c = by.get(k)
        return c.med("wall") if c else None

    def c(k: str) -> Optional[float]:
        cs = by.get(k)
        return cs.med("cpu") if cs else None

    def verdict(ok: Optional[bool], gap: str = "") -> str:
        if ok is None:
            return "not measured"
        return "met" if ok else f"missed{(': ' + gap) if gap else ''}"

    r = ratio(w("tfpar_cold_jN"), w("flake8_jN"))
    rc = ratio(c("tfpar_cold_jN"), c("flake8_jN"))
    rows.append((f"cold -j{jobs} ≤ 0.5 × flake8+bugbear -j{jobs}",
                 f"wall {fmt(w('tfpar_cold_jN'))} s vs {fmt(w('flake8_jN'))} s = **{fmt(r)}×** (CPU {fmt(rc)}×)",
                 verdict(None if r is None else r <= 0.5, f"{fmt(r)}× > 0.5×")))
    r1 = ratio(w("tfpar_cold_j1"), w("flake8_j1"))
    rows.append(("(same at -j1, for reference)",
                 f"wall {fmt(w('tfpar_cold_j1'))} s vs {fmt(w('flake8_j1'))} s = {fmt(r1)}×", ""))
    sub = by.get("floor_sem_sub")
    nsub = sub.files if sub else 0
    r = ratio(w("tfpar_cold_j1"), w("floor_sem_sub"))
    per = (lambda x: None if x is None or not nsub else 1000 * x / nsub)
    rows.append(("per parsed file ≤ 1.3 × libcst floor (parse + the traversal), -j1",
                 f"{fmt(per(w('tfpar_cold_j1')))} ms vs {fmt(per(w('floor_sem_sub')))} ms per parsed file "
                 f"({nsub} files) = **{fmt(r)}×** (CPU {fmt(ratio(c('tfpar_cold_j1'), c('floor_sem_sub')))}×)",
                 verdict(None if r is None else r <= 1.3, f"{fmt(r)}× > 1.3×")))
    rw = ratio(w("tfpar_warm_jN"), w("tfpar_cold_jN"))
    rows.append(("warm ≤ 5% of cold",
                 f"{fmt(w('tfpar_warm_jN'))} s vs {fmt(w('tfpar_cold_jN'))} s = **{fmt(None if rw is None else 100 * rw, 1)}%**",
                 verdict(None if rw is None else rw <= 0.05, f"{fmt(None if rw is None else 100 * rw, 1)}% > 5%")))
    for k, name in (("ruff_default", "default rules"), ("ruff_all", "--select ALL")):
        rr = ratio(w("tfpar_warm_jN"), w(k))
        rows.append((f"warm faster than `ruff check --no-cache` ({name})",
                     f"{fmt(w('tfpar_warm_jN'))} s vs {fmt(w(k))} s = **{fmt(rr)}×**",
                     verdict(None if rr is None else rr < 1.0, f"{fmt(rr)}× ≥ 1×")))
    p = by.get("plugin")
    res = [s["result"] for s in (p.samples if p else []) if s.get("result")]
    if res:
        def m(key: str) -> float:
            return statistics.median(r.get(key, 0.0) for r in res)

        n_all, over = int(m("rejected")), int(m("over_1ms"))
        measured = (f"all {n_all} rejected files: mean **{fmt(m('mean_ms'), 3)} ms**, p99 {fmt(m('p99_ms'), 3)} ms, "
                    f"worst {fmt(m('max_ms'), 3)} ms; rejected by the substring test "
                    f"({int(m('stage1_rejected'))}): mean {fmt(m('stage1_mean_ms'), 3)} ms, worst "
                    f"{fmt(m('stage1_max_ms'), 3)} ms ({int(m('stage1_over_1ms'))} files ≥ 1 ms); by the "
                    f"comment/docstring test ({int(m('stage2_rejected'))}): mean {fmt(m('stage2_mean_ms'), 3)} ms, "
                    f"worst {fmt(m('stage2_max_ms'), 3)} ms")
        if over == 0:
            v = "met"
        elif m("mean_ms") < 1.0:
            v = (f"met on average; missed on {over} of {n_all} files "
                 f"({100 * over / max(n_all, 1):.1f}%, the largest modules; worst {fmt(m('max_ms'), 3)} ms)")
        else:
            v = f"missed: mean {fmt(m('mean_ms'), 3)} ms"
        rows.append(("flake8 plugin on a rejected file < 1 ms", measured, v))
    else:
        rows.append(("flake8 plugin on a rejected file < 1 ms", "–", "not measured"))
    rss = [s["rss_mb"] for k in ("tfpar_cold_j1", "tfpar_cold_jN", "tfpar_warm_jN") if k in by for s in by[k].samples]
    mx = max(rss) if rss else None
    rows.append(("peak memory < 300 MB per worker", f"largest tfpar-lint process: **{fmt(mx, 0)} MB**",
                 verdict(None if mx is None else mx < 300, f"{fmt(mx, 0)} MB")))
    ident = [findings.get(k) for k in ("tfpar_warm_jN", "tfpar_cold_jN")]
    rows.append(("cache gives identical findings to a cold run",
                 f"{findings.get('cold_findings')} findings; warm identical: {findings.get('tfpar_warm_jN')}, "
                 f"cache-writing run identical: {findings.get('tfpar_prime')}, -j{jobs} identical: "
                 f"{findings.get('tfpar_cold_jN')}",
                 verdict(None if None in ident else all(ident))))
    return rows


def render(cases: list[Case], meta: dict[str, Any], findings: dict[str, Any]) -> str:
    by = {c.key: c for c in cases}
    jobs = meta["jobs"]
    L: list[str] = []
    L.append("# tfpar-lint benchmark")
    L.append("")
    L.append(f"Generated by `{meta['command']}` on {meta['date']} (total {meta['total_s']:.0f} s).")
    L.append("")
    m = meta["machine"]
    L.append(f"- **Machine**: {m['cores']} cores ({m['cpu']}), {m['memory']} RAM, {m['os']}, {m['python']}; "
             f"load average {meta['load_start']} at the start, {meta['load_end']} at the end "
             f"(the machine is shared: wall times include other people's work, CPU times much less).")
    L.append("- **Versions**: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
             + (f"; tfpar-lint code at {meta['git']}" if meta.get("git") else "") + ".")
    src = ", ".join(f"{k} {v}" for k, v in meta["per_source"].items())
    L.append(f"- **Corpus**: {meta['files']} files, {meta['lines']:,} lines, {meta['bytes'] / 1e6:.1f} MB "
             f"({src}); tfpar-lint's pre-filter passes {meta['parsed']} files "
             f"({meta['parsed_lines']:,} lines) to the parser.")
    L.append("")
    L.append("| what | -j | files | wall s | CPU s | files/s | peak RSS MB | tfpar-lint ÷ this | runs | note |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for c in cases:
        j = "" if c.jobs is None else str(c.jobs)
        if c.skip or c.failed:
            L.append(f"| {c.label} | {j} | {c.files} | – | – | – | – | – | 0 | "
                     f"{'skipped: ' + c.skip if c.skip else 'failed: ' + c.failed} |")
            continue
        wall, cpu = c.med("wall"), c.med("cpu")
        rss = max((s["rss_mb"] for s in c.samples), default=None)
        # compare with tfpar-lint cold at the same parallelism (floors: -j1)
        ref = by.get("tfpar_cold_j1") if c.jobs == 1 else by.get("tfpar_cold_jN")
        if c.key == "tfpar_warm_jN":
            ref = by.get("tfpar_warm_jN")
        rel = ratio(ref.med("wall") if ref else None, wall)
        note = c.note
        if c.capped:
            note = (note + "; " if note else "") + f"not repeated: first run > {meta['repeat_limit']:.0f} s"
        if c.key == "plugin" and c.samples and c.samples[0].get("result"):
            res = c.samples[0]["result"]
            note = (f"mean {res['mean_ms']:.3f} ms, max {res['max_ms']:.3f} ms per rejected file "
                    f"({res['rejected']} files; see the targets)")
        if c.key in ("floor_sem_sub",) and c.samples and c.samples[0].get("result"):
            res = [s["result"] for s in c.samples if s.get("result")]
            p = statistics.median(r["parse_s"] for r in res)
            b = statistics.median(r["build_s"] for r in res)
            note = f"in-process: parse {p:.1f} s + traversal {b:.1f} s"
        L.append(f"| {c.label} | {j} | {c.files} | {fmt(wall)} | {fmt(cpu)} | "
                 f"{fmt(None if not wall else c.files / wall, 0)} | {fmt(rss, 0)} | "
                 f"{fmt(rel)} | {len(c.samples)} | {note} |")
    prime = by.get("tfpar_warm_jN")
    if prime and prime.info.get("prime_sample"):
        s = prime.info["prime_sample"]
        L.append(f"| tfpar-lint, cold, writing the cache | {jobs} | {prime.files} | {fmt(s['wall'])} | "
                 f"{fmt(s['cpu'])} | {fmt(prime.files / s['wall'], 0)} | {fmt(s['rss_mb'], 0)} | – | 1 | "
                 f"the run that fills the cache for the warm runs |")
    L.append("")
    L.append("\"tfpar-lint ÷ this\": wall time of tfpar-lint cold at the same parallelism (-j1 for the floors) "
             "divided by the row's; below 1 means tfpar-lint is faster.")
    L.append("")
    L.append("## Targets")
    L.append("")
    L.append("| target | measured | verdict |")
    L.append("|---|---|---|")
    for t, v, ok in targets(by, jobs, findings):
        L.append(f"| {t} | {v} | {ok} |")
    L.append("")
    L.append("## How it was measured")
    L.append("")
    L.append(f"- One command: `{meta['command']}`. The file list is built once (every `.py` under the "
             "packages' `find_spec(...).submodule_search_locations`, plus a copy of `fixtures/` taken at the "
             "start) and every tool gets exactly those files as arguments. tfpar-lint runs from a copy of "
             "`src/tfpar_lint` taken at the start too (`PYTHONPATH`), so edits made to the tree meanwhile "
             "do not change the code measured.")
    L.append("- Each row is its own process started from this script; wall time is measured around it; CPU "
             "time is user + system time of the process and all its children (`os.wait4`); peak RSS is "
             "`ru_maxrss`, i.e. the largest single process of the tree (for `-jN` runs: the largest worker "
             "or the parent).")
    L.append(f"- Runs are round-robin over all cases (run 1 of each, then run 2, ...); the table shows the "
             f"median of the runs (`runs` column). Cases slower than {meta['repeat_limit']:.0f} s on their first "
             "run are run once (`--repeat-limit`).")
    L.append("- tfpar-lint runs with `--no-config --format json`; cold runs pass `--no-cache`; the warm rows use "
             "a fresh `--cache-dir` filled by one untimed run of the same command (its time is the "
             "\"writing the cache\" row) and then changed nothing. The JSON reports of the cold -j1, cold "
             "-jN, cache-writing and warm runs are compared finding by finding (see the last target).")
    L.append("- flake8 runs through `benchmarks/flake8_only.py`, which unloads the TorchFix and tfpar-lint "
             "flake8 plugins installed in the same environment (flake8 runs every installed plugin whatever "
             "`--select` says); pyflakes, pycodestyle and mccabe still run, as for any flake8 user.")
    L.append("- ruff runs with `--no-cache --isolated --exit-zero --output-format concise` (its own thread "
             "pool uses every core). TorchFix runs its CLI on the same files (`-jN`).")
    L.append("- Floors (`benchmarks/floors.py`, one process, -j1): `ast.parse` and `libcst.parse_module` of "
             "every file; libcst parse + `tfpar_lint.semantic.Module` (the one traversal all rules share) of "
             "exactly the files tfpar-lint's pre-filter lets through, with the same cyclic-GC thresholds as "
             "tfpar-lint uses (`engine.GC_THRESHOLD`), which is the like-for-like floor for \"per parsed "
             "file\" (its note splits the in-process time into parse and traversal; the every-file floors run "
             "with Python's default GC settings, as any tool would). The plugin row times `Plugin(tree, lines, filename).run()` "
             "in-process on every corpus file the pre-filter rejects, with every rule enabled as in flake8 "
             "(best of 5 per file), split by the stage that rejects it: the substring test, or the second test "
             "on the text without comments and docstrings.")
    L.append("- The runtime verifier (`--verify`, which imports TensorFlow and runs scripts) is not part of "
             "this benchmark; its cost is measured separately.")
    L.append("")
    return "\n".join(L)


# ----------------------------------------------------------------------------- main


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=None, help="runs per case (default 3; 1 with --smoke)")
    ap.add_argument("--smoke", action="store_true", help="tiny corpus (fixtures/ + a handful of files), for CI")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="N for the -jN rows (default: cores)")
    ap.add_argument("--repeat-limit", type=float, default=60.0,
                    help="do not repeat a case whose first run took longer (seconds; 0: always repeat)")
    ap.add_argument("--only", action="append", default=[], help="run only cases whose key starts with this")
    ap.add_argument("--exclude", action="append", default=[],
                    help="leave out corpus files whose path contains this (the header counts them)")
    ap.add_argument("--skip", action="append", default=[], help="leave out cases whose key starts with this "
                    "(keys: tfpar_cold_j1, tfpar_cold_jN, tfpar_warm_jN, flake8_j1, flake8_jN, ruff_all, "
                    "ruff_default, torchfix_jN, floor_ast, floor_cst, floor_sem_sub, plugin)")
    ap.add_argument("--out", default=None, help="Markdown output (default benchmarks/results.md; "
                                                "with --smoke: benchmarks/results/raw/smoke.md)")
    ap.add_argument("--json", default=None, help="also write the raw measurements here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (file lists, outputs)")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    runs = args.runs if args.runs is not None else (1 if args.smoke else 3)
    if runs < 1:
        ap.error("--runs must be >= 1")
    out_md = Path(args.out) if args.out else (HERE / "results" / "raw" / "smoke.md" if args.smoke else HERE / "results.md")
    t_start = time.perf_counter()
    load_start = loadavg()

    tmp = Path(tempfile.mkdtemp(prefix="tfpar-bench-"))
    (tmp / "out").mkdir()
    try:
        files, per_source = build_corpus(args.smoke, snapshot=tmp)
        if args.exclude:  # files a tool cannot lint (one E903 fails the run: exit status 2)
            left = [f for f in files if not any(x in f for x in args.exclude)]
            per_source["left out (--exclude)"] = len(left) - len(files)
            files = left
        if not files:
            print("no files to benchmark (no fixtures/, no tensorflow/keras installed)", file=sys.stderr)
            return 2
        (tmp / "files.txt").write_text("\n".join(files) + "\n", encoding="utf-8")
        env = freeze_package(tmp)
        subset = parsed_subset(tmp / "files.txt", env)
        (tmp / "parsed.txt").write_text("\n".join(subset) + ("\n" if subset else ""), encoding="utf-8")
        lines, size = count_lines(files)
        sub_lines, _ = count_lines(subset)
        cases = make_cases(files, subset, tmp, args.jobs, env)
        if args.only:
            cases = [c for c in cases if any(c.key.startswith(o) for o in args.only)]
        if args.skip:
            cases = [c for c in cases if not any(c.key.startswith(o) for o in args.skip)]
        if not args.quiet:
            print(f"{len(files)} files ({lines:,} lines), {len(subset)} pass the pre-filter; "
                  f"{len(cases)} cases x {runs} runs; temp {tmp}", file=sys.stderr)
        execute(cases, runs, args.repeat_limit, tmp, verbose=not args.quiet, env=env)
        findings = compare_findings(tmp)
        meta = {
            "command": "benchmarks/run.py" + (" --smoke" if args.smoke else "") + f" --runs {runs}"
                       + "".join(f" --only {o}" for o in args.only) + "".join(f" --skip {o}" for o in args.skip) + "".join(f" --exclude {o}" for o in args.exclude),
            "date": _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
            "machine": machine(), "versions": versions(), "jobs": args.jobs, "git": git_state(),
            "files": len(files), "lines": lines, "bytes": size, "per_source": per_source,
            "parsed": len(subset), "parsed_lines": sub_lines, "repeat_limit": args.repeat_limit,
            "load_start": None if load_start is None else round(load_start, 1),
            "load_end": None if loadavg() is None else round(loadavg() or 0, 1),
            "total_s": time.perf_counter() - t_start,
        }
        text = render(cases, meta, findings)
        out_md.parent.mkdir(parents=True, exist_ok=True)
        if out_md.is_file():  # sections measured by other scripts, below KEEP_MARKER, survive a rerun
            old = out_md.read_text(encoding="utf-8")
            if KEEP_MARKER in old:
                text = text.rstrip("\n") + "\n\n" + old[old.index(KEEP_MARKER):]
        out_md.write_text(text, encoding="utf-8")
        raw = {"meta": meta, "findings": findings,
               "cases": [{"key": c.key, "label": c.label, "jobs": c.jobs, "files": c.files, "skip": c.skip,
                          "failed": c.failed, "capped": c.capped, "samples": c.samples,
                          "prime": c.info.get("prime_sample")} for c in cases]}
        json_path = Path(args.json) if args.json else HERE / "results" / "raw" / (
            ("smoke-" if args.smoke else "") + time.strftime("%Y%m%d-%H%M%S") + ".json")
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(raw, indent=1, default=str), encoding="utf-8")
        if not args.quiet:
            print(text)
            print(f"wrote {out_md} and {json_path}", file=sys.stderr)
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
