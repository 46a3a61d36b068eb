"""Whole-project analysis against per-file analysis, file by file (issue 20: "project mode costs at
most 1.5x the per-file time on any file").

    .venv/bin/python benchmarks/project_per_file.py [--top N] [--runs R]

Project: the tfcopy project of ``benchmarks/project_mode.py`` (the installed
``tensorflow/python/distribute`` and ``tensorflow/python/training``, ``tensorflow.python`` renamed
``tfcopy.python`` so that their imports of each other are project imports: 133 files of real code,
deep class hierarchies across modules).  For each of the ``--top`` largest files that the
pre-filter passes, one fresh process ``tfpar-lint --no-cache FILE`` (whole-project analysis, the
default) and one ``tfpar-lint --no-cache --no-project FILE``, each ``--runs`` times, alternating;
CPU time of the process and its children (``os.wait4``), median.  Prints one markdown row per file
and the largest ratio, and the E9xx errors seen (there must be none).
"""
from __future__ import annotations

import argparse
import os
import site
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from project_mode import tf_project  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def cpu(cmd: list[str], cwd: str) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    out = p.stdout.read()
    _pid, _status, ru = os.wait4(p.pid, 0)
    return ru.ru_utime + ru.ru_stime, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    sp = next(p for p in site.getsitepackages() if os.path.isdir(os.path.join(p, "tensorflow")))
    from tfpar_lint.engine import AnalysisOptions, candidate_rules
    from tfpar_lint.registry import all_rules

    rules = [r for r in all_rules() if r.DEFAULT_ENABLED]
    with tempfile.TemporaryDirectory() as tmp:
        proj = tf_project(sp, tmp)
        files = []
        for p in Path(proj).rglob("*.py"):
            text = p.read_text(encoding="utf-8")
            if candidate_rules(text, rules, AnalysisOptions(project=False)):
                files.append((len(text), p))
        files.sort(reverse=True)
        print("| file | lines | whole-project CPU s | per-file CPU s | ratio |")
        print("|---|---:|---:|---:|---:|")
        worst = 0.0
        errors = []
        for _size, p in files[: a.top]:
            rel = str(p.relative_to(proj))
            proj_t, flat_t = [], []
            for _ in range(a.runs):
                t, out = cpu([sys.executable, "-m", "tfpar_lint", "--no-cache", "--exit-zero", rel], proj)
                proj_t.append(t)
                errors += [ln for ln in out.splitlines() if " E9" in ln]
                t, out = cpu([sys.executable, "-m", "tfpar_lint", "--no-cache", "--exit-zero", "--no-project", rel],
                             proj)
                flat_t.append(t)
                errors += [ln for ln in out.splitlines() if " E9" in ln]
            pm, fm = statistics.median(proj_t), statistics.median(flat_t)
            ratio = pm / fm if fm else 0.0
            worst = max(worst, ratio)
            lines = p.read_text(encoding="utf-8").count("\n")
            print(f"| `{rel}` | {lines} | {pm:.2f} | {fm:.2f} | {ratio:.2f}x |")
        print(f"\nlargest ratio: {worst:.2f}x; E9xx errors: {len(errors)}")
        for e in errors:
            print("  ", e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
