"""Whole-project analysis against per-file mode, and a warm run after editing one file.

    .venv/bin/python benchmarks/project_mode.py [--runs N] [--jobs J]

Corpus: the installed ``tensorflow``, ``keras`` and ``tf_keras`` packages plus a copy of this
repository's ``fixtures/`` (the benchmark corpus of ``benchmarks/run.py``; the copy is what gets
edited).  Measured, each ``--runs`` times (median reported), with CPU time of the process and its
children (``os.wait4`` rusage) and wall time:

* cold, whole-project analysis (the default) and ``--no-project``;
* the cache filled, then one file edited (a line appended to ``fixtures/project/bad/models.py``,
  imported by two other files of the fixture project), then the warm run.

Then a per-file run of one file of a project, as the flake8 plugin and pre-commit do it: the
project is a copy of the installed ``tensorflow/python/distribute`` and ``tensorflow/python/training``
folders with ``tensorflow.python`` renamed ``tfcopy.python`` in the copy (so that their imports
are the project's own, 133 files of real code; ``tensorflow`` itself is never read).  For each
target file: ``flake8 --select TFP <file>`` (wall and CPU of the flake8 process, median of
``--runs``) and the same lint in-process through the plugin (``Plugin.run``, one fresh process
each) for the number of other project modules parsed with libcst and the summaries computed and
read; with summaries off (``TFPAR_LINT_SUMMARIES=0``: the behaviour before them), cold (no
summary cached: they are computed with ``ast`` and written) and warm (read from the cache folder).

Prints markdown tables for ``benchmarks/results.md``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import site
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], cwd: str, env: Optional[dict] = None) -> tuple[float, float, int]:
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _pid, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    return wall, ru.ru_utime + ru.ru_stime, os.waitstatus_to_exitcode(status)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-flake8", action="store_true", help="skip the per-file (flake8) part")
    ap.add_argument("--only-flake8", action="store_true", help="only the per-file (flake8) part")
    ap.add_argument("--targets", nargs="*", default=["tfcopy/python/training/server_lib.py",
                                                     "tfcopy/python/distribute/distribute_lib.py"])
    args = ap.parse_args(argv)
    sp = next(p for p in site.getsitepackages() if os.path.isdir(os.path.join(p, "tensorflow")))
    if args.only_flake8:
        per_file(sp, args.runs, args.targets)
        return 0
    with tempfile.TemporaryDirectory(prefix="tfpar-proj-bench-") as tmp:
        fixtures = os.path.join(tmp, "fixtures")
        shutil.copytree(ROOT / "fixtures", fixtures)
        corpus = [os.path.join(sp, p) for p in ("tensorflow", "keras", "tf_keras")] + [fixtures]
        base = [sys.executable, "-m", "tfpar_lint", "--exit-zero", "-j", str(args.jobs)]
        rows = []
        for label, extra in (("cold, whole-project analysis", []), ("cold, `--no-project` (per-file)", ["--no-project"])):
            samples = [timed(base + ["--no-cache"] + extra + corpus, tmp) for _ in range(args.runs)]
            rows.append((label, statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)))
        cache = os.path.join(tmp, "cache")
        edited = os.path.join(fixtures, "project", "bad", "models.py")
        warm = []
        for i in range(args.runs):
            timed(base + ["--cache-dir", cache] + corpus, tmp)  # fill / refresh
            with open(edited, "a", encoding="utf-8") as fh:
                fh.write(f"# edit {i}\n")
            warm.append(timed(base + ["--cache-dir", cache] + corpus, tmp))
        rows.append(("warm, after editing one file (`fixtures/project/bad/models.py`)",
                     statistics.median(s[0] for s in warm), statistics.median(s[1] for s in warm)))
    print("| run | wall s | CPU s |\n|---|---:|---:|")
    for label, wall, cpu in rows:
        print(f"| {label} | {wall:.2f} | {cpu:.2f} |")
    print(f"\nratio whole-project / per-file (CPU): {rows[0][2] / rows[1][2]:.2f}x; "
          f"(wall): {rows[0][1] / rows[1][1]:.2f}x; runs={args.runs}, -j{args.jobs}")
    if not args.no_flake8:
        per_file(sp, args.runs, args.targets)
    return 0


# In-process lint of one file through the flake8 plugin, in a fresh process: what it parsed.
_PROBE = """
import json, sys
from tfpar_lint import engine
from tfpar_lint.flake8_plugin import Plugin
path = sys.argv[1]
with open(path, encoding="utf-8") as fh:
    lines = fh.read().splitlines(True)
found = list(Plugin(None, lines, path).run())
ps = list(engine._PROJECTS.values())
s = ps[0].summaries if ps else None
print(json.dumps({"findings": sorted(f[2] for f in found), "parsed": sum(p.read for p in ps),
                  "computed": s.computed if s else 0, "loaded": s.loaded if s else 0,
                  "spared": ps[0].spared if ps else {}}))
"""


def tf_project(sp: str, dest: str) -> str:
    proj = os.path.join(dest, "tp")
    for part in ("distribute", "training"):
        shutil.copytree(os.path.join(sp, "tensorflow", "python", part), os.path.join(proj, "tfcopy", "python", part),
                        ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("pyproject.toml", "tfcopy/__init__.py", "tfcopy/python/__init__.py"):
        open(os.path.join(proj, f), "w").close()
    for p in Path(proj).rglob("*.py"):
        text = p.read_text(encoding="utf-8")
        if "tensorflow.python" in text:
            p.write_text(text.replace("tensorflow.python", "tfcopy.python"), encoding="utf-8")
    return proj


def per_file(sp: str, runs: int, targets: list[str]) -> None:
    import json

    with tempfile.TemporaryDirectory(prefix="tfpar-perfile-bench-") as tmp:
        proj = tf_project(sp, tmp)
        cache = os.path.join(proj, ".tfpar_lint_cache")
        print("\n| target | summaries | flake8 wall s | flake8 CPU s | modules parsed | summaries computed / read | importers spared | names answered |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for target in targets:
            findings = set()
            for label in ("off", "cold", "warm"):
                env = dict(os.environ, TFPAR_LINT_SUMMARIES="0" if label == "off" else "1")
                samples = []
                for _ in range(runs):
                    if label != "warm":
                        shutil.rmtree(cache, ignore_errors=True)
                    samples.append(timed([sys.executable, "-m", "flake8", "--select", "TFP", target], proj, env))
                if label != "warm":
                    shutil.rmtree(cache, ignore_errors=True)
                probe = json.loads(subprocess.run([sys.executable, "-c", _PROBE, target], cwd=proj, env=env,
                                                  capture_output=True, text=True, check=True).stdout)
                findings.add(tuple(probe["findings"]))
                spared = probe["spared"] or {}
                print(f"| `{target}` | {label} | {statistics.median(s[0] for s in samples):.2f} | "
                      f"{statistics.median(s[1] for s in samples):.2f} | {probe['parsed']} | "
                      f"{probe['computed']} / {probe['loaded']} | {spared.get('importers', '-')} | "
                      f"{spared.get('names', '-')} |")
            assert len(findings) == 1, findings  # the same findings every way


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
