"""Are the findings of two versions of tfpar-lint identical, finding by finding?

::

    .venv/bin/python benchmarks/identical.py BASE_COMMIT            # BASE against the working tree
    .venv/bin/python benchmarks/identical.py BASE --head COMMIT      # two commits
    .venv/bin/python benchmarks/identical.py --off                   # the working tree without / with the
                                                                     # relevance stage (TFPAR_LINT_RELEVANCE=0)
    .venv/bin/python benchmarks/identical.py BASE --sets fixtures,data   # some of the sets only

Each version lints the same files (the working tree's fixtures and test data, the real-code sets)
with ``--output-format json --no-cache --exit-zero -j2``, and the two JSON reports are compared
finding by finding (every field: code, place, message, data, fix).  A version is the ``src/`` of a
commit, extracted with ``git archive`` into a temporary folder, or the working tree; both run with
the same Python (this one).

Sets (``--sets``, comma-separated; default all):

* ``fixtures``: ``fixtures/`` as one folder (whole-project analysis across it, ``fixtures/project/``
  included);
* ``data``: ``tests/data_*``;
* ``realcode``: the cases of ``/work/realcode`` v1, v2 (with ``variants/`` and ``xproj/``) and v3,
  one run per folder (``--realcode DIR``);
* ``projects``: project mode, as ``realcode/projlint`` runs it: every manifest row whose source is a
  repository with a mirror is linted inside a checkout of that repository at its commit (kept in
  ``--proj-cache``), from the repository's root, one run per case (slow: about 100 runs per version);
* ``corpus``: the installed ``keras`` package and ``tensorflow/python/distribute`` (the speed corpus
  of ``benchmarks/results.md``).

Prints, per set, the number of findings of each version and every finding that differs; exits 1
when any set differs.  Re-run it after merging other branches (the relevance stage must keep up with
what the rules use).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
REALCODE = Path("/work/realcode")
ALL_SETS = ("fixtures", "data", "realcode", "projects", "corpus")


def extract(commit: str, into: Path) -> Path:
    """The ``src/`` of ``commit``, extracted under ``into``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "src"], check=True, capture_output=True).stdout
    import io

    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        tf.extractall(into, filter="data")
    return into / "src"


class Version:
    def __init__(self, name: str, src: Path, env: Optional[dict] = None) -> None:
        self.name, self.src, self.env = name, src, env or {}

    def lint(self, paths: list[str], cwd: Optional[str] = None) -> list[dict]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TFPAR_LINT_")}
        env.update(PYTHONPATH=str(self.src), **self.env)
        for attempt in range(3):  # a loaded machine: a run that did not complete is run again
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                r = subprocess.run([sys.executable, "-m", "tfpar_lint", "--no-cache", "--exit-zero", "-j2",
                                    "--output-format", "json", "-o", out.name, *paths],
                                   cwd=cwd, env=env, capture_output=True, text=True)
                text = Path(out.name).read_text(encoding="utf-8")
            if r.returncode in (0, 1) and text.strip():
                return json.loads(text)
            print(f"  ({self.name}: exit {r.returncode} on {paths[:2]}, attempt {attempt + 1}: "
                  f"{(r.stderr or r.stdout)[-300:]!r})", flush=True)
        raise RuntimeError(f"{self.name}: no report for {paths[:3]}")


def key(f: dict) -> str:
    return json.dumps(f, sort_keys=True)


def compare(name: str, a: list[dict], b: list[dict], va: str, vb: str) -> bool:
    ca, cb = collections.Counter(map(key, a)), collections.Counter(map(key, b))
    only_a, only_b = ca - cb, cb - ca
    same = not only_a and not only_b
    print(f"{name}: {va} {len(a)} findings, {vb} {len(b)} findings: {'identical' if same else 'DIFFERENT'}",
          flush=True)
    for label, diff in ((va, only_a), (vb, only_b)):
        for k in sorted(diff):
            f = json.loads(k)
            print(f"  only {label}: {f['path']}:{f['line']}:{f['col']} {f['code']} {f['message'][:120]}")
    return same


# ---------------------------------------------------------------- the sets
def set_fixtures() -> list[tuple[list[str], Optional[str]]]:
    return [([str(ROOT / "fixtures")], None)]


def set_data() -> list[tuple[list[str], Optional[str]]]:
    return [([str(p) for p in sorted(ROOT.glob("tests/data_*"))], None)]


def set_realcode(realcode: Path) -> list[tuple[list[str], Optional[str]]]:
    out = []
    for sub in ("v1/cases", "v2/cases", "v2/variants", "v2/xproj", "v3/cases"):
        d = realcode / sub
        if d.is_dir():
            out.append(([str(d)], None))
    return out


def set_corpus() -> list[tuple[list[str], Optional[str]]]:
    import importlib.util

    out = []
    for name in ("keras", "tensorflow"):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        base = Path(list(spec.submodule_search_locations)[0])
        out.append(str(base) if name == "keras" else str(base / "python" / "distribute"))
    return [(out, None)] if out else []


_KEEP = re.compile(r"(\.(py|pyi|ipynb|txt|toml|cfg|ini|lock|ya?ml)|Pipfile|Dockerfile[^/]*|setup\.py)$")


def _gitdir(mirrors: Path, repo: str) -> Optional[str]:
    d = mirrors / repo.replace("/", "+")
    for c in (d / "repo" / ".git", d / "repo", d):
        if c.is_dir() and (c / "HEAD").exists():
            return str(c)
    return None


def _checkout(gd: str, commit: str, dest: Path) -> None:
    """The code and dependency files of the tree at ``commit`` (as realcode/projlint takes them)."""
    ls = subprocess.run(["git", "--git-dir", gd, "ls-tree", "-r", "-z", commit], capture_output=True).stdout
    for ent in ls.split(b"\0"):
        if not ent:
            continue
        meta, path = ent.split(b"\t", 1)
        mode, typ, sha = meta.split()
        p = path.decode("utf-8", "replace")
        if typ != b"blob" or mode == b"120000" or not _KEEP.search(p):
            continue
        r = subprocess.run(["git", "--git-dir", gd, "cat-file", "blob", sha.decode()], capture_output=True)
        if r.returncode:
            continue
        full = dest / p
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(r.stdout)


def set_projects(realcode: Path, cache: Path) -> list[tuple[list[str], Optional[str]]]:
    """(the case's path in its repository, the checkout's root) per manifest row with a mirror."""
    mirrors = realcode / "LINKS"
    out = []
    seen = set()
    for man in sorted(realcode.glob("v*/MANIFEST*.tsv")):
        for line in man.read_text(encoding="utf-8").splitlines()[1:]:
            cols = line.split("\t")
            if len(cols) < 3:
                continue
            m = re.match(r"([^/]+/[^:]+):(.+)@([0-9a-f]{40})$", cols[2])
            if not m or m.group(2).endswith(".ipynb"):
                continue
            repo, path, commit = m.groups()
            gd = _gitdir(mirrors, repo)
            if gd is None or (repo, path, commit) in seen:
                continue
            seen.add((repo, path, commit))
            root = cache / (repo.replace("/", "+") + "@" + commit[:12])
            if not root.is_dir():
                tmp = Path(str(root) + f".tmp{os.getpid()}")
                _checkout(gd, commit, tmp)
                os.replace(tmp, root)
            if (root / path).is_file():
                out.append(([path], str(root)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", nargs="?", help="the commit to compare with (not with --off)")
    ap.add_argument("--head", help="a commit instead of the working tree")
    ap.add_argument("--off", action="store_true",
                    help="compare the working tree (or --head) with the relevance stage turned off")
    ap.add_argument("--sets", default=",".join(ALL_SETS))
    ap.add_argument("--realcode", default=str(REALCODE))
    ap.add_argument("--proj-cache", default="/tmp/tfpar_identical_proj")
    args = ap.parse_args(argv)
    if not args.off and not args.base:
        ap.error("give a BASE commit, or --off")
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    for s in sets:
        if s not in ALL_SETS:
            ap.error(f"unknown set {s!r} (one of {', '.join(ALL_SETS)})")
    with tempfile.TemporaryDirectory(prefix="tfpar_identical_") as tmp:
        head_src = extract(args.head, Path(tmp) / "head") if args.head else ROOT / "src"
        head = Version(args.head or "working tree", head_src)
        if args.off:
            base = Version(f"{head.name} without the relevance stage", head_src, {"TFPAR_LINT_RELEVANCE": "0"})
        else:
            base = Version(args.base, extract(args.base, Path(tmp) / "base"))
        realcode = Path(args.realcode)
        all_same = True
        for s in sets:
            if s == "fixtures":
                runs = set_fixtures()
            elif s == "data":
                runs = set_data()
            elif s == "realcode":
                runs = set_realcode(realcode)
            elif s == "projects":
                cache = Path(args.proj_cache)
                cache.mkdir(parents=True, exist_ok=True)
                runs = set_projects(realcode, cache)
            else:
                runs = set_corpus()
            a: list[dict] = []
            b: list[dict] = []
            for paths, cwd in runs:
                fa, fb = base.lint(paths, cwd), head.lint(paths, cwd)
                if cwd is not None:  # one case per run: name it by its checkout
                    for f in fa + fb:
                        f["path"] = f"{os.path.basename(cwd)}/{f['path']}"
                a += fa
                b += fb
            all_same &= compare(f"{s} ({len(runs)} runs)", a, b, base.name, head.name)
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
