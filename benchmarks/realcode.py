"""Score tfpar-lint on the labelled real-code development set (recall per family, precision).

    .venv/bin/python benchmarks/realcode.py [--realcode DIR] [--linter CMD] [--set NAME ...] [--show] [--append]

The labelled set lives outside this repository (it is third-party code): a rebuilt copy of
../shared/realcode (see its README.md) at DIR, by default ../realcode next to the repository root.
For each set (v1, v2, v1+v2 together, v3, and v3 in project mode) this runs the set's own `DIR/score`
over its manifests with `<linter> --exit-zero --no-cache` (v3 project: through `DIR/projlint`, which lints
each case from a checkout of its repository) and parses the score's last line. It prints one summary line per set;
--show also prints the score's full hit/miss/false-positive listing; --append adds one table row per set
to benchmarks/realcode.md (created with its header if missing). Standard library only.
"""
from __future__ import annotations

import argparse
import datetime
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKDOWN = REPO / "benchmarks" / "realcode.md"

V1 = ["v1/MANIFEST.tsv"]
V2 = ["v2/MANIFEST_good.tsv", "v2/MANIFEST_bad.tsv", "v2/MANIFEST_variants.tsv"]
V3 = ["v3/MANIFEST.tsv"]
# "v3 project": each case linted inside a checkout of its own repository (the set's projlint, as a user
# runs the tool on a checkout); needs the mirrors (--mirrors, default DIR/LINKS)
SETS = {"v1": V1, "v2": V2, "v1+v2": V1 + V2, "v3": V3, "v3 project": V3}
PROJECT_SETS = {"v3 project"}

# exit=0 files=N findings=N precision=0.92 recall_core=13/43 A=5/22 B=3/8 C=5/12 D=0/1 other=5/44
# fp=N good_files_with_fp=N/M missing=N
SUMMARY = re.compile(
    r"exit=(?P<exit>-?\d+) files=(?P<files>\d+) findings=(?P<findings>\d+) precision=(?P<precision>[\d.]+) "
    r"recall_core=(?P<core>\d+/\d+) A=(?P<A>\d+/\d+) B=(?P<B>\d+/\d+) C=(?P<C>\d+/\d+) D=(?P<D>\d+/\d+) "
    r"other=(?P<other>\d+/\d+) fp=(?P<fp>\d+) good_files_with_fp=(?P<good_fp>\d+/\d+) missing=(?P<missing>\d+)"
)

HEADER = """# Real-code development set: recall and precision

What it measures: tfpar-lint on real, third-party TensorFlow code labelled by hand (files from public
repositories at a recorded commit, code blocks from bug reports, correct files from maintained
projects, and small variant programs). Per label family it counts the labelled mistakes hit by a
finding of the matching family (A: TFP1xx, B: TFP2xx, C: TFP3xx, D: TFP4xx; other: any TFP code)
within one line; every other finding is a false positive. `core` is A+B+C+D; `good files with FP` counts
correct files that got at least one false positive; `missing` counts labelled files that were not rebuilt
(they are left out of the score).

The code is not in this repository. Rebuild it into `../realcode` (a copy of `../shared/realcode`, outside
this repository) as described in `../shared/realcode/README.md` (mirror the repositories, run its
`materialize`, save the bug-report blocks, check with `sha256sum -c SHA256SUMS` in `v1/` and `v2/`).

Re-run (from the repository root; `--show` prints every hit, miss and false positive):

    .venv/bin/python benchmarks/realcode.py --append

| date (UTC) | commit | set | A | B | C | D | core | other | precision | good files with FP | missing |
|---|---|---|---|---|---|---|---|---|---|---|---|
"""


def git_commit() -> str:
    """Short HEAD commit of this repository, with '+dirty' when the tree has changes."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if status.strip() else "")


def run_set(realcode: Path, linter: list[str], manifests: list[str], show: bool,
            project: bool = False, mirrors: Path | None = None) -> tuple[dict, str]:
    """Run DIR/score on the manifests; return the parsed summary and the listing printed before it.
    ``project``: through DIR/projlint (each case linted from its repository's checkout)."""
    import os
    import tempfile

    cmd = [str(realcode / "score")]
    for m in manifests:
        cmd += ["--manifest", str(realcode / m)]
    if show:
        cmd.append("--show")
    env = None
    if project:
        env = dict(os.environ, HELD_MANIFEST=str(realcode / manifests[0]), MIRRORS=str(mirrors or realcode / "LINKS"),
                   PROJ_CACHE=os.environ.get("PROJ_CACHE", os.path.join(tempfile.gettempdir(), "tfpar-projlint")),
                   LINTER=shlex.join([*linter, "--exit-zero", "--no-cache"]))
        cmd += ["--", sys.executable, str(realcode / "projlint")]
    else:
        cmd += ["--", *linter, "--exit-zero", "--no-cache"]
    proc = subprocess.run(cmd, cwd=realcode, capture_output=True, text=True, env=env)
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr if proc.stderr.endswith("\n") else proc.stderr + "\n")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    match = SUMMARY.search(lines[-1]) if lines else None
    if proc.returncode != 0 or match is None:
        raise RuntimeError(f"score failed (exit {proc.returncode}): {shlex.join(cmd)}\n{proc.stdout[-2000:]}")
    return match.groupdict(), "\n".join(lines[:-1])


def table_row(date: str, commit: str, name: str, s: dict) -> str:
    cells = [date, commit, name, s["A"], s["B"], s["C"], s["D"], s["core"], s["other"], s["precision"],
             s["good_fp"], s["missing"]]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realcode", type=Path, default=REPO.parent / "realcode",
                        help="the rebuilt copy of shared/realcode (default: ../realcode)")
    parser.add_argument("--linter", default=str(REPO / ".venv" / "bin" / "tfpar-lint"),
                        help="linter command, split like a shell would (default: .venv/bin/tfpar-lint)")
    parser.add_argument("--set", dest="sets", action="append", choices=list(SETS),
                        help="set to score (repeatable; default: v1, v2, v1+v2, v3 and v3 project)")
    parser.add_argument("--mirrors", type=Path, default=None,
                        help="folder of owner+repo links to the repositories' mirrors (v3 project; default: DIR/LINKS)")
    parser.add_argument("--show", action="store_true", help="print the full hit/miss/false-positive listing")
    parser.add_argument("--append", action="store_true", help=f"append the rows to {MARKDOWN.relative_to(REPO)}")
    args = parser.parse_args(argv)

    realcode = args.realcode.resolve()
    if not (realcode / "score").is_file():
        parser.error(f"no score script in {realcode}: rebuild it (see ../shared/realcode/README.md)")
    linter = shlex.split(args.linter)
    names = args.sets or list(SETS)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    commit = git_commit()

    rows = []
    for name in names:
        try:
            summary, listing = run_set(realcode, linter, SETS[name], args.show, name in PROJECT_SETS, args.mirrors)
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 2
        if args.show:
            print(f"=== {name}")
            if listing:
                print(listing)
        if summary["exit"] != "0":
            print(f"warning: the linter exited {summary['exit']} on {name}", file=sys.stderr)
        print(f"{name}: core={summary['core']} A={summary['A']} B={summary['B']} C={summary['C']} "
              f"D={summary['D']} other={summary['other']} precision={summary['precision']} "
              f"findings={summary['findings']} fp={summary['fp']} good_files_with_fp={summary['good_fp']} "
              f"files={summary['files']} missing={summary['missing']}")
        rows.append(table_row(date, commit, name, summary))

    if args.append:
        if not MARKDOWN.exists():
            MARKDOWN.write_text(HEADER, encoding="utf-8")
        text = MARKDOWN.read_text(encoding="utf-8")
        with MARKDOWN.open("a", encoding="utf-8") as fh:
            if text and not text.endswith("\n"):
                fh.write("\n")
            fh.write("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
