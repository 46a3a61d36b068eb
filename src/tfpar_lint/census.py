"""``tfpar-lint --explain-silence``: where the rules' questions about a value got no kind, and why
(the census of lost values, :mod:`tfpar_lint.semantic.census`), for the files the rules would
analyse (those the pre-filter passes), in project mode as linting does."""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional

from tfpar_lint import deep
from tfpar_lint.engine import AnalysisOptions, _rules_for, candidate_rules, node_positions, project_for, read_source
from tfpar_lint.semantic import Module
from tfpar_lint.semantic import census


@dataclass
class Silence:
    path: str
    line: int
    col: int
    role: str
    reason: str
    text: str

    def format(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.role}: {self.reason}: `{self.text}`"


def explain(paths: Iterable[str], options: AnalysisOptions, enabled=None, answered: bool = False) -> Iterator[Silence]:
    rules = _rules_for(enabled)
    for path in paths:
        source, err = read_source(path)
        if source is None or err is not None or not path.endswith(".py"):
            continue
        if not candidate_rules(source, rules, options, path):
            continue
        yield from _explain_one(path, source, options, answered)


def _explain_one(path: str, source: str, options: AnalysisOptions, answered: bool = False) -> list[Silence]:
    project = project_for(path, options)
    if project is not None:
        project.begin(source)
    try:
        tree, _opaque, fixed = deep.parse(source, key=os.path.abspath(path))
    except Exception:  # noqa: BLE001 - a file the linter cannot parse has no census
        return []
    module = Module(tree, fixed.text if fixed is not None else source, path, options.strategy_factories,
                    options.dataset_distributors, tf_version=options.tf_version, project=project)
    module.pieces = deep.take_pieces(tree)
    try:
        qs = census.questions(module, answered)
    except RecursionError:
        qs = []
    finally:
        if project is not None:
            project.forget(module)
    mine = [q for q in qs if q.module is module]
    pos = node_positions(tree, [q.node for q in mine], module.source, module.pieces)
    out = []
    for q in mine:
        rng = pos.get(q.node)
        if rng is None:
            continue
        out.append(Silence(path, rng.start.line, rng.start.column + 1, q.role, q.reason, module.code(q.node)))
    return out


def table(silences: Iterable[Silence]) -> Counter:
    return Counter(s.reason for s in silences)


def summary(silences: list[Silence], out) -> None:
    counts = table(silences)
    out.write(f"{len(silences)} question(s) got no kind\n")
    for reason, n in counts.most_common():
        out.write(f"{n:6d}  {reason}\n")


def main_lines(files: list[str], options: AnalysisOptions, enabled, out, err: Optional[object] = None) -> int:
    # TFPAR_CENSUS_ANSWERED=1 (benchmarks/census.py): the questions that got a kind are listed too
    answered = os.environ.get("TFPAR_CENSUS_ANSWERED") == "1"
    got = list(explain(files, options, enabled, answered))
    for s in got:
        out.write(s.format() + "\n")
    summary([s for s in got if s.reason != census.ANSWERED], err or out)
    return 0
