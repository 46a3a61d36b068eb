"""The engine every entry point calls: read -> pre-filter -> parse -> model -> rules -> report.

* The pre-filter is a substring test against the markers of the enabled rules
  (plus user markers): a file that cannot match is never parsed.
* One libcst parse, one traversal (:class:`tfpar_lint.semantic.Module`) shared
  by all rules; positions (libcst ``PositionProvider``) are computed only for
  files that have a finding.
* Never imports TensorFlow.
* Files are parsed in supervised worker processes (:mod:`tfpar_lint.workers`),
  also at ``-j1``: a file that crashes libcst, runs past the per-file timeout
  or exhausts memory gets an E903 error of its own and the run goes on.  Files
  that are not regular files (FIFOs, devices) or are over the size limit are
  skipped with an E902 error, before anything reads them.
* Every libcst parse goes through :func:`tfpar_lint.deep.parse_module`: a file
  with a suspiciously long logical line is parsed by Python first; what Python
  rejects is E999 with Python's message (libcst never sees it), and an
  expression deeper than libcst copes with is analysed as an unknown value
  (the result's ``notes`` say so; the CLI prints them on standard error).
"""
from __future__ import annotations

import ast
import functools
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Optional, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from tfpar_lint import deep, versions
from tfpar_lint.codetext import code_text
from tfpar_lint.files import read_bounded, read_regular
from tfpar_lint.finding import GRAPH_KEY, FileError, FileResult, Finding  # noqa: F401 (re-exported)
from tfpar_lint.registry import all_rules, default_codes
from tfpar_lint.rule import STRATEGY_MARKERS, Rule
from tfpar_lint.semantic import Module
from tfpar_lint.workers import DEFAULT_MAX_FILE_SIZE, GC_THRESHOLD, _tune_gc  # noqa: F401


@dataclass(frozen=True)
class AnalysisOptions:
    strategy_factories: tuple[str, ...] = ()
    dataset_distributors: tuple[str, ...] = ()
    extra_markers: tuple[str, ...] = ()
    # the TensorFlow the code targets (the tf-version setting), or None: inferred for each file
    # from the project's files and the code's APIs (tfpar_lint.versions)
    tf_version: Optional[str] = None
    project: bool = True  # follow names into the project's other files (whole-project analysis)
    src: tuple[str, ...] = ()  # folders the project's modules live in (default: the root and root/src)
    # where the per-module summaries are kept (the result cache's folder; None: in memory only).
    # Not part of the result cache's key: a summary is the same wherever it is kept.
    summary_dir: Optional[str] = None
    # bytes of other project files each worker process of a run of many files may parse beyond its
    # files' own budgets, set by lint_paths: that process's share of the run's budgets (issue 28).
    # Not part of the result cache's key, like summary_dir.
    project_pool: int = 0


# One Project per (folders, options) per process: the project's modules are parsed once.
_PROJECTS: dict[tuple, Any] = {}


def project_for(path: str, options: AnalysisOptions) -> Optional[Any]:
    """The project ``path`` belongs to (whole-project analysis), or None (stdin, notebooks
    run alone, ``--no-project``)."""
    from tfpar_lint.semantic import summary
    from tfpar_lint.semantic.project import Project
    from tfpar_lint.semantic.project import project_root_memo as project_root

    if not options.project or not path or path == "<stdin>" or not os.path.isfile(path):
        return None
    root = project_root(path)
    if options.src:
        roots = [os.path.abspath(x) for x in options.src]
    elif root:
        roots = [root, os.path.join(root, "src")]
    else:  # a folder of scripts: `python train.py` imports its neighbours; a module of a package
        # (`pkg/dist.py` beside `pkg/__init__.py`) is imported from the folder above the package
        top = os.path.dirname(os.path.abspath(path))
        while os.path.isfile(os.path.join(top, "__init__.py")) and os.path.dirname(top) != top:
            top = os.path.dirname(top)
        roots = [top]
    key = (tuple(roots), root, options)
    if not path.endswith(".py"):  # a notebook is outside the scan for importers: a project of its own,
        key += (os.path.abspath(path),)  # whose modules' callers count the notebook's calls
    project = _PROJECTS.get(key)
    if project is None:
        def build(fpath: str, src: str) -> Module:
            tree, opaque, fixed = deep.parse(src, key=os.path.abspath(fpath))
            mod = Module(tree, fixed.text if fixed is not None else src, fpath, options.strategy_factories,
                         options.dataset_distributors, tf_version=options.tf_version, project=project)
            mod.opaque = opaque  # the note, should this module be linted itself
            mod.normalised = fixed  # its indentation, rewritten for libcst (columns map back)
            mod.original_source = src
            mod.pieces = deep.take_pieces(tree)  # parsed in pieces: where they start (positions)
            mod.kinds.enabled = False  # kinds from use: only for the module being linted (analyse)
            return mod

        store = summary.SummaryStore(options.summary_dir) if summary.enabled() else None
        project = _PROJECTS[key] = Project(roots, build, root=root, summaries=store, pool=options.project_pool)
    return project


def _dep_digests(project: Any, module: Module) -> dict[str, str]:
    import hashlib

    out = {}
    for p in sorted(project.dependencies(module)):
        try:
            out[p] = hashlib.sha256(read_regular(p)).hexdigest()  # never blocks on a FIFO
        except OSError:
            out[p] = ""
    return out


def _version_digests(module: Module) -> dict[str, str]:
    import hashlib

    from tfpar_lint import versions

    from tfpar_lint.semantic import clusters

    out = {}
    for p in versions.dependency_paths(module) + clusters.dependency_paths(module):
        try:
            out[p] = hashlib.sha256(read_regular(p)).hexdigest()
        except OSError:
            out[p] = ""
    return out


def _rules_for(enabled: Optional[Collection[str]]) -> list[type[Rule]]:
    codes = default_codes() if enabled is None else frozenset(enabled)
    return [r for r in all_rules() if r.CODE in codes]


def candidate_rules(source: str, rules: Sequence[type[Rule]], options: AnalysisOptions,
                    path: Optional[str] = None, consulted: Optional[list] = None) -> list[type[Rule]]:
    """The pre-filter: rules whose markers occur in the text (no parsing).

    Two stages: the markers anywhere in the text (most files stop here, at the
    cost of a few substring searches); then, for the rules that passed, the
    markers again in the text with comments and docstrings blanked
    (:func:`code_text`), since a rule only ever matches code.  User markers
    (``extra_markers``) are searched in the whole text.
    """
    rules = [r for r in rules if not getattr(r, "TEXT_ONLY", False)]  # the noqa rules: see _noqa_findings
    if options.extra_markers and any(m in source for m in options.extra_markers):
        return list(rules)
    # whole-project analysis: a file imported by a file that uses a strategy (steps.py, whose
    # train_step train.py runs with strategy.run) may hold a strategy's code without naming one
    related = _related_text(path, source, options, consulted) if path else None
    passed = _marker_rules(source, rules, options, related)
    if passed:
        code = code_text(source)
        if code is not source:
            passed = _marker_rules(code, passed, options, related)
    return passed


def _related_text(path: str, source: str, options: AnalysisOptions,
                  consulted: Optional[list] = None) -> Optional[Callable[[], str]]:
    """Whole-project analysis: the text of the project files this one imports
    (``from utils.dist import make_strategy``) and of those that import it (``train.py``, which
    runs ``steps.train_step``), read only when a marker group is missing from the file itself:
    a group found there counts too (the strategy, the ``strategy.run`` or the ``Thread`` that
    makes this file's code a replica function or a thread target lives next door)."""
    if not options.project:
        return None
    got: list[str] = []

    def text() -> str:
        if not got:
            project = project_for(path, options)
            related = [] if project is None else (project.imported_texts(path, source)
                                                   + project.importer_texts(path))
            # and what the importers import (train.py runs steps.train_step with the strategy
            # that utils/dist.py makes)
            if project is not None:
                for p, t in list(related[len(related) - len(project.importer_texts(path)):]):
                    related += project.imported_texts(p, t)
            got.append("\n".join(t for _p, t in related))
            if consulted is not None:  # the result now depends on these files (who imports it: ASKED)
                consulted.extend(p for p, _t in related)
        return got[0]
    return text


def cache_graph(options: AnalysisOptions):
    """The ``graph(path, deps)`` a result cache checks its entries with: :func:`graph_digest`, each
    folder's project found once during the run."""
    projects: dict[tuple, Any] = {}  # (folder, notebook) -> its project, during this run

    def graph(p: str, deps: list) -> str:
        folder, name = os.path.split(os.path.abspath(p))
        where = (folder, None if name.endswith(".py") else name)
        if where not in projects:
            projects[where] = project_for(p, options)
        return _importers_fingerprint(projects[where], deps)

    return graph


def graph_digest(path: str, options: AnalysisOptions, deps) -> str:
    """The fingerprint of who imports each project file among ``deps`` in ``path``'s project ("" without
    one)."""
    return _importers_fingerprint(project_for(path, options), deps)


def _importers_fingerprint(project: Optional[Any], deps) -> str:
    return project.importers_digest([d for d in deps if d != GRAPH_KEY]) if project is not None else ""


def _with_consulted(deps: dict, consulted: list, path: str, options: AnalysisOptions) -> dict:
    """``deps`` plus the digests of the files the pre-filter read, and, when the answers asked who
    imports a module, those modules and the fingerprint of their importers."""
    import hashlib

    from tfpar_lint.semantic import project as project_mod

    asked = sorted(project_mod.ASKED)
    project_mod.ASKED.clear()
    for p in consulted + asked:
        if p in deps:
            continue
        try:
            deps[p] = hashlib.sha256(read_regular(p)).hexdigest()
        except OSError:
            deps[p] = ""
    if asked:  # last: who imports each dependency (the cache checks it over the same list)
        deps[GRAPH_KEY] = graph_digest(path, options, list(deps))
    return deps


def _marker_rules(source: str, rules: Sequence[type[Rule]], options: AnalysisOptions,
                  related: Optional[Callable[[], str]] = None) -> list[type[Rule]]:
    factory_markers = tuple(q.rsplit(".", 1)[-1] for q in options.strategy_factories)
    hits: dict[tuple[str, ...], bool] = {}
    present: dict[str, bool] = {}  # each marker is searched for once (several groups share markers)

    def group_ok(group: tuple[str, ...]) -> bool:
        ok = hits.get(group)
        if ok is None:
            alts = group + factory_markers if group is STRATEGY_MARKERS else group
            ok = False
            for m in alts:
                found = present.get(m)
                if found is None:
                    found = present[m] = m in source
                if found:
                    ok = True
                    break
            if not ok and related is not None:
                other = related()
                ok = any(m in other for m in alts)
            hits[group] = ok
        return ok

    return [r for r in rules if all(group_ok(g) for g in r.MARKERS)]


class NestingTooDeep(Exception):
    """Parsing the file hit Python's recursion limit (the nesting itself is too deep)."""


def recursion_reason(exc: BaseException) -> str:
    """The E903 reason of a RecursionError raised after the parse: an internal error of the
    analysis (no file nesting causes it), named by the functions that recursed."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)[-60:]
    counts: dict[str, int] = {}
    for fr in frames:
        where = f"{os.path.basename(os.path.dirname(fr.filename))}/{os.path.basename(fr.filename)}:{fr.name}"
        counts[where] = counts.get(where, 0) + 1
    loop = [w for w, _ in sorted(counts.items(), key=lambda kv: -kv[1])[:3]]
    return ("internal error: RecursionError (Python's recursion limit) in the analysis, recursing through "
            + ", ".join(loop) + "; please report it")


def gave_up(path: str, reason: str) -> FileError:
    """The E903 error of a file whose analysis gave up."""
    return FileError(path, f"analysis gave up: {reason}", code="E903")


def _first_line(msg: str) -> str:
    lines = [ln.strip() for ln in str(msg).splitlines() if ln.strip()]
    return " ".join(lines[:2])[:200] if lines else "no reason given"


def _syntax_error(path: str, exc: Exception, line_map=None, source: Optional[str] = None) -> FileError:
    line = getattr(exc, "raw_line", 0) or 0
    col = (getattr(exc, "raw_column", 0) or 0) + 1
    msg = getattr(exc, "message", None) or str(exc).splitlines()[0]
    if source is not None:
        # CPython's own parser names the line users expect (libcst's recovery point can be later).
        try:
            compile(source, path, "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
        except SyntaxError as py_exc:
            if py_exc.lineno:
                line, col, msg = py_exc.lineno, py_exc.offset or 1, py_exc.msg
        except (ValueError, RecursionError, MemoryError):
            pass
        else:  # Python accepts it: a limit of libcst's parser, not the user's syntax error
            return gave_up(path, f"libcst cannot parse this file, though Python can ({_first_line(msg)})")
    if line_map is not None and line:
        cell, cline = line_map(line)
        return FileError(path, f"syntax error in cell {cell}: {msg}", line=cline, col=col)
    return FileError(path, f"syntax error: {msg}", line=line, col=col)


def analyse(source: str, path: str, rules: Sequence[type[Rule]], options: AnalysisOptions,
            with_fixes: bool = True, deps: Optional[dict] = None, notes: Optional[list] = None) -> list[Finding]:
    """Parse ``source`` once (:func:`tfpar_lint.deep.parse_module`) and run ``rules`` on it.  Raises
    libcst.ParserSyntaxError, or deep.PythonRejects (Python's own verdict on a suspicious file).
    ``deps``, when given, receives the other project files the answers read (path -> sha256);
    ``notes`` the notes for the user (expressions analysed as unknown values)."""
    project = project_for(path, options)
    if project is not None:
        project.begin(source)
    known = project.modules.get(os.path.abspath(path)) if project is not None else None
    if known is not None and getattr(known, "original_source", known.source) == source:
        module, tree = known, known.tree  # already built as another file's import: the same object
        opaque = getattr(known, "opaque", 0)
        fixed = getattr(known, "normalised", None)
    else:
        try:
            tree, opaque, fixed = deep.parse(source, key=os.path.abspath(path) if path != "<stdin>" else None)
        except RecursionError as exc:  # the parse itself: the nesting is the reason
            raise NestingTooDeep() from exc
        module = Module(tree, fixed.text if fixed is not None else source, path, options.strategy_factories,
                        options.dataset_distributors, tf_version=options.tf_version, project=project)
        module.normalised, module.original_source = fixed, source
        module.pieces = deep.take_pieces(tree)
    module.kinds.enabled = True  # built as an import before, it is the one linted now
    if opaque and notes is not None:
        notes.append(deep.note(opaque))
    try:
        # mixed tabs and spaces that libcst refused: the tree is of the normalised text; columns are
        # mapped back to the file's, and no fix is offered (its edits would be the other text's)
        module.version_withheld = {}
        findings = _analyse(module, tree, rules, with_fixes and fixed is None, path,
                            deep.statement_offsets(os.path.abspath(path) if path != "<stdin>" else None, source, tree)
                            if fixed is None else None)
        if module.version_withheld and notes is not None:
            notes.append(versions.withheld_note(module.version_withheld))
        if fixed is not None:
            for f in findings:
                f.col = fixed.column(f.line, f.col)
                f.end_col = fixed.column(f.end_line, f.end_col)
        return findings
    finally:
        if deps is not None:
            deps.update(_version_digests(module))  # the requirements file its version was read from
        if project is not None:
            if deps is not None:
                deps.update(_dep_digests(project, module))
            if known is None:
                # a linted file is kept only while it is linted (a file imported later is read
                # again): holding every parsed tree made each garbage collection slower
                project.forget(module)


def _analyse(module: Module, tree: cst.Module, rules: Sequence[type[Rule]], with_fixes: bool,
             path: str, starts: Optional[list[int]] = None) -> list[Finding]:
    source = module.source
    reports = []
    instances = []
    for rule_cls in rules:
        rule = rule_cls(module)
        instances.append(rule)
        for rep in rule.check():
            reports.append((rule, rep))
    if not reports:
        return []
    fixes = _propose_fixes(reports) if with_fixes else {}
    wanted = [rep.node for _, rep in reports] + [rep.related for _, rep in reports if rep.related is not None]
    for fx in fixes.values():
        wanted.extend(fx.nodes())
    positions = node_positions(tree, wanted, source, getattr(module, "pieces", None), starts)
    table = None
    findings = []
    seen = set()
    for rule, rep in reports:
        rule_cls = type(rule)
        rng = positions.get(rep.node)
        if rng is None:  # pragma: no cover - every reported node is in the tree
            continue
        key = (rule_cls.CODE, rng.start.line, rng.start.column)
        if key in seen:
            continue
        seen.add(key)
        message = rep.message
        data = dict(rep.data)
        if rep.related is not None:
            rel = positions.get(rep.related)
            if rel is not None:
                # "{line}" stays until the caller knows how to name lines (notebooks: cell and line)
                data.setdefault("related_line", rel.start.line)
                data.setdefault("related_col", rel.start.column + 1)
            else:  # the related place is in another file of the project
                where = _place_in_project(module, rep.related)
                message = message.replace("{line}", where)
        fix_json = None
        fx = fixes.get(id(rep))
        if fx is not None:
            from tfpar_lint.fix import LineTable, resolve

            table = table or LineTable(source)
            fix_json = resolve(fx, positions, table)
        findings.append(
            Finding(
                code=rule_cls.CODE, name=rule_cls.NAME, message=message, path=path,
                line=rng.start.line, col=rng.start.column + 1,
                end_line=rng.end.line, end_col=rng.end.column + 1,
                severity=rule_cls.SEVERITY, fix_hint=rule_cls.FIX_HINT, data=data, fix=fix_json,
            )
        )
    findings.sort(key=Finding.sort_key)
    return findings


def _propose_fixes(reports) -> dict[int, Any]:
    """id(report) -> the rule's Fix, for rules that offer one (a fix that fails is no fix)."""
    out: dict[int, Any] = {}
    for rule, rep in reports:
        if not type(rule).FIXABLE:
            continue
        try:
            fx = rule.fix(rep)
        except Exception:  # a bug in a fix must not lose the finding
            fx = None
        if fx is not None and fx.edits:
            out[id(rep)] = fx
    return out


def _place_in_project(module: Module, node: cst.CSTNode) -> str:
    """``steps.py:12`` for a node of another project module (whole-project analysis)."""
    project = module.project
    others: list = []
    if project is not None:
        # the project's modules, and the importers it handed out earlier: one of those may have been
        # forgotten since (Project.forget) while this module's answers still point into its tree
        others = list(project.modules.values()) + [m for ms in project._importers.values() for m in ms]
    seen: set[int] = set()
    for other in others:
        if other is None or other is module or id(other) in seen:
            continue
        seen.add(id(other))
        try:
            pos = node_positions(other.tree, [node], other.source, getattr(other, "pieces", None)).get(node)
        except Exception:  # not in that tree  # pragma: no cover
            pos = None
        if pos is not None:
            rel = os.path.relpath(other.path, os.path.dirname(os.path.abspath(module.path)))
            return f"{rel}:{pos.start.line}"
    return "another file of the project"


def _name_related_line(message: str, where: str) -> str:
    """Fill a rule message's ``{line}`` (written "line {line}" or "{line}") with ``where``."""
    return message.replace("line {line}", where).replace("{line}", where)


class _PositionsDone(Exception):
    pass


@functools.lru_cache(maxsize=None)
def _counting_state() -> type:
    """libcst's position-providing code generation state, counting lines and columns without its
    regex on tokens that hold no newline, and keeping no generated text (ImportError with a libcst
    whose internals are not these)."""
    from libcst.metadata.position_provider import NEWLINE_RE, PositionProvidingCodegenState

    class _Counting(PositionProvidingCodegenState):
        def add_token(self, value: str) -> None:
            if "\n" in value or "\r" in value:
                segments = NEWLINE_RE.split(value)
                self.line += len(segments) - 1
                self.column = len(segments[-1])
            else:
                self.column += len(value)

        def add_indent_tokens(self) -> None:
            for token in self.indent_tokens:
                self.add_token(token)

    return _Counting


def node_positions(tree: cst.Module, nodes: Sequence[cst.CSTNode], source: Optional[str] = None,
                   pieces: Optional[Sequence[tuple[int, int]]] = None, starts: Optional[list[int]] = None) -> Any:
    """libcst ``PositionProvider`` ranges of ``nodes`` (a mapping with ``.get``).

    Same numbers as ``MetadataWrapper(tree).resolve(PositionProvider)``, about
    3x cheaper: the provider's code generation stops once the last wanted node
    has its range, and a token without a newline skips the provider's regex.
    With ``source`` (the text ``tree`` was parsed from), only the top-level
    statements that hold a wanted node are generated, each starting at the line
    CPython's parser gives it (:func:`_statement_positions`): a finding at the end
    of a long module no longer costs the code generation of the whole module.  With ``starts``
    (where each top-level statement starts in ``source``, as the language server's incremental
    parser keeps them), CPython parses only the statements that hold wanted nodes.
    Falls back to the public API if libcst's internals are not what we expect.
    """
    if pieces:
        # a module parsed in pieces: only the pieces that hold wanted nodes are generated, each
        # from the line it starts on (no ast of the whole module: it would cost twice the memory
        # of libcst's tree)
        got = _piece_positions(tree, nodes, pieces)
        if got is not None:
            return got
    elif source is not None and len(tree.body) > 1:
        got = _statement_positions(tree, nodes, source, starts)
        if got is not None:
            return got
    try:
        counting = _counting_state()
        wanted = {id(n) for n in nodes}

        class _State(counting):
            done = False

            def after_codegen(self, node: cst.CSTNode) -> None:
                counting.after_codegen(self, node)
                if id(node) in wanted:
                    wanted.discard(id(node))
                    if not wanted:  # every wanted range is final: stop generating code
                        self.done = True
                        raise _PositionsDone

        provider = PositionProvider()
        state = _State(default_indent=tree.default_indent, default_newline=tree.default_newline, provider=provider)
        try:
            tree._codegen(state)
        except Exception:  # _PositionsDone, or what the unwinding raised after it
            if not state.done:
                raise
        computed = provider._computed
        if all(n in computed for n in nodes):
            return computed
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - another libcst
        pass
    return MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)


def _piece_positions(tree: cst.Module, nodes: Sequence[cst.CSTNode],
                     pieces: Sequence[tuple[int, int]]) -> Optional[dict]:
    """:func:`node_positions` of a tree parsed in pieces (``pieces``: :func:`deep.take_pieces`): the
    top-level statements from the start of each piece that holds wanted nodes to the last one
    holding them are generated, from the line the piece starts on; None when a node is not found."""
    import bisect

    from tfpar_lint.semantic.walk import syntax_children

    try:
        _State = _counting_state()
    except ImportError:  # pragma: no cover - another libcst
        return None
    wanted = {id(n) for n in nodes}
    left = set(wanted)
    last_in_piece: dict[int, int] = {}  # piece -> the last statement index holding a wanted node
    firsts = [p[0] for p in pieces]
    for k, stmt in enumerate(tree.body):
        if not left:
            break
        stack: list[cst.CSTNode] = [stmt]
        hit = False
        while stack:
            x = stack.pop()
            if id(x) in left:
                left.discard(id(x))
                hit = True
            stack.extend(syntax_children(x))
        if hit:
            p = bisect.bisect_right(firsts, k) - 1
            if p < 0:
                return None
            last_in_piece[p] = k
    if left:
        return None
    provider = PositionProvider()
    try:
        for p, last in sorted(last_in_piece.items()):
            first, line = pieces[p]
            state = _State(default_indent=tree.default_indent, default_newline=tree.default_newline,
                           provider=provider)
            state.line, state.column = line, 0
            for stmt in tree.body[first:last + 1]:
                stmt._codegen(state)
    except (AttributeError, TypeError):  # pragma: no cover - libcst's internals changed
        return None
    computed = provider._computed
    return computed if all(n in computed for n in nodes) else None


def _statement_positions(tree: cst.Module, nodes: Sequence[cst.CSTNode], source: str,
                         starts: Optional[list[int]] = None) -> Optional[dict]:
    """:func:`node_positions` by statement, or None (then the caller generates the whole module).

    The line each statement starts on comes from CPython's parser (``ast``: a ``;``-line is one
    libcst statement and several ``ast`` ones; a decorated definition starts at its first
    decorator).  Each top-level statement that holds a wanted node is generated from there; a
    ``class``/``def``/``with``/``for``/``while``/``if`` whose wanted nodes all lie in its indented
    body is not generated itself but its body's statements are, the same way, with the block's
    indentation.  The line and column each generated statement's first token gets must be those
    ``ast`` gives, else the shortcut is dropped."""
    try:
        _State = _counting_state()
    except ImportError:  # pragma: no cover - another libcst
        return None
    from tfpar_lint.semantic.walk import syntax_children

    from libcst.metadata import CodePosition, CodeRange

    wanted = {id(n) for n in nodes}
    want_nodes = set(nodes)
    extra: list[cst.CSTNode] = []  # last statements of bodies whose statement's range is synthesized
    synthesized: list[tuple] = []
    found_total = 0

    def holding(stmts) -> list[tuple[int, int]]:
        """(index, how many wanted nodes) of the statements that hold wanted nodes."""
        out = []
        for k, stmt in enumerate(stmts):
            n = 0
            stack: list[cst.CSTNode] = [stmt]
            while stack:
                x = stack.pop()
                if id(x) in wanted:
                    n += 1
                stack.extend(syntax_children(x))
            if n:
                out.append((k, n))
        return out

    def ast_index(stmts, body) -> Optional[list[int]]:
        first, j = [], 0
        for stmt in stmts:
            first.append(j)
            j += len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
        return first if j == len(body) else None

    # (statements, their ast statements, indentation, how deep) still to place
    work: list[tuple[Sequence[cst.BaseStatement], list, list, int]] = []
    if starts is not None and len(starts) == len(tree.body):
        # only the top-level statements holding wanted nodes, each parsed alone from its text
        ends = starts[1:] + [len(source)]
        for k, _n in holding(tree.body):
            chunk = source[starts[k]:ends[k]]
            try:
                part = compile(chunk, "<positions>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                work = []
                break
            ast.increment_lineno(part, source.count("\n", 0, starts[k]))
            work.append(([tree.body[k]], part.body, [], 0))
    if not work:
        try:
            tree_ast = compile(source, "<positions>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True).body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        work = [(tree.body, tree_ast, [], 0)]

    provider = PositionProvider()
    try:
        while work:
            stmts, body, indents, depth = work.pop()
            first = ast_index(stmts, body)
            if first is None:
                return None
            for k, n in holding(stmts):
                stmt, node = stmts[k], body[first[k]]
                block = getattr(stmt, "body", None)
                if depth < 8 and isinstance(block, cst.IndentedBlock) and block.body \
                        and isinstance(getattr(node, "body", None), list):
                    inner = sum(c for _, c in holding(block.body))
                    indent = block.indent if block.indent is not None else tree.default_indent
                    if id(stmt) not in wanted and inner == n:
                        work.append((block.body, node.body, indents + [indent], depth + 1))
                        continue
                    if id(stmt) in wanted and inner == n - 1 and not any(
                            getattr(stmt, f, None) for f in ("orelse", "handlers", "finalbody")):
                        # the statement itself is wanted (a fix inserts before a class): it starts
                        # at its keyword, where ast says, and ends where its body's last statement
                        # ends (checked on every compound statement of this project's files)
                        last = block.body[-1]
                        if id(last) not in wanted:
                            wanted.add(id(last))
                            extra.append(last)
                        synthesized.append((stmt, node, last))
                        found_total += 1
                        work.append((block.body, node.body, indents + [indent], depth + 1))
                        continue
                start = node.lineno - len(stmt.leading_lines)
                decorators = getattr(stmt, "decorators", ())
                if decorators:
                    deco = getattr(node, "decorator_list", None)
                    if not deco:
                        return None
                    start = deco[0].lineno - len(stmt.leading_lines) - len(decorators[0].leading_lines)
                state = _State(default_indent=tree.default_indent, default_newline=tree.default_newline,
                               provider=provider)
                state.line, state.column = start, 0
                state.indent_tokens = list(indents)
                stmt._codegen(state)
                found_total += n
                check = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else stmt
                got = provider._computed.get(check)
                if got is None or got.start.line != node.lineno or got.start.column != node.col_offset \
                        or got.start.column != len("".join(indents)):
                    return None
    except (AttributeError, TypeError):  # pragma: no cover - libcst's internals changed
        return None
    computed = provider._computed
    for stmt, node, last in reversed(synthesized):  # inner ones first: an outer one may end with one
        end = computed.get(last)
        if end is None:
            return None
        computed[stmt] = CodeRange(CodePosition(node.lineno, node.col_offset), end.end)
    if found_total != len(wanted) or not all(n in computed for n in nodes):
        return None  # a wanted node outside the statements (the module's header), or a token
    for x in extra:
        if x not in want_nodes:
            computed.pop(x, None)
    return computed


_NOQA_ANY_CASE = re.compile("noqa", re.IGNORECASE)
_TFP_ANY_CASE = re.compile("tfp", re.IGNORECASE)


def _apply_noqa(findings: list[Finding], source: str) -> list[Finding]:
    if not findings or not _NOQA_ANY_CASE.search(source):
        return findings
    from tfpar_lint.noqa import NoqaMap

    nmap = NoqaMap.from_source(source)
    return [f for f in findings if not nmap.is_suppressed(f.line, f.code, f.name)]


# A file the pre-filter rejects is not parsed by libcst; if it mentions TensorFlow or Keras it is
# still syntax-checked (CPython's parser, several times cheaper) so that a broken training script
# gives E999 and exit 2 rather than silence.
_TF_MENTIONS = re.compile(r"\b(?:tensorflow|keras|tf_keras)\b")


def _syntax_check(source: str, path: str, always: bool = False) -> Optional[FileError]:
    if not always and not _TF_MENTIONS.search(source):
        return None
    try:
        deep.check_syntax(source)
    except deep.PythonRejects as exc:  # the verdict the analysis would give (deep.parse_module)
        return FileError(path, f"syntax error: {exc.message}", line=exc.line, col=exc.col or (1 if exc.line else 0))
    return None


def _relevant_rules(source: str, path: str, rules: list[type[Rule]], options: AnalysisOptions) -> list[type[Rule]]:
    """The relevance stage (:mod:`tfpar_lint.relevance`): the candidate rules whose needs the code meets."""
    from tfpar_lint import relevance

    if not relevance.enabled():
        return rules
    project = project_for(path, options) if path.endswith(".py") else None
    return relevance.relevant_rules(source, rules, options, path, project)


def lint_source(source: str, path: str = "<stdin>", enabled: Optional[Collection[str]] = None,
                options: AnalysisOptions = AnalysisOptions(), apply_noqa: bool = True,
                check_syntax: bool = True) -> FileResult:
    if path.endswith(".ipynb"):
        return _lint_notebook(source, path, enabled, options, apply_noqa)
    enabled_rules = _rules_for(enabled)
    consulted: list = []
    from tfpar_lint.semantic import project as project_mod

    project_mod.ASKED.clear()  # which modules' importers this file's answers ask for
    rules = candidate_rules(source, [r for r in enabled_rules if not getattr(r, "TEXT_ONLY", False)], options,
                            path, consulted)
    passed = bool(rules)
    if rules:
        rules = _relevant_rules(source, path, rules, options)
    if not rules:
        # a file the relevance stage leaves (the pre-filter passed it) is checked whatever it mentions,
        # as libcst would have checked it
        err = (_syntax_check(source, path, always=passed) if check_syntax else None)
        if err is not None:
            return FileResult(path, error=err)
        extra = _noqa_findings(source, path, enabled_rules, []) if apply_noqa else []
        return FileResult(path, findings=extra, skipped=not extra,
                          deps=_with_consulted({}, consulted, path, options) if options.project else {})
    deps: dict[str, str] = {}
    notes: list[str] = []
    try:
        findings = analyse(source, path, rules, options, deps=deps, notes=notes)
    except deep.PythonRejects as exc:
        return FileResult(path, error=FileError(path, f"syntax error: {exc.message}", line=exc.line, col=exc.col))
    except cst.ParserSyntaxError as exc:
        return FileResult(path, error=_syntax_error(path, exc, source=source))
    except NestingTooDeep:
        return FileResult(path, error=gave_up(path, "file too deeply nested (Python's recursion limit)"))
    except RecursionError as exc:
        return FileResult(path, error=gave_up(path, recursion_reason(exc)))
    except MemoryError:
        return FileResult(path, error=gave_up(path, "out of memory"))
    except Exception as exc:  # an engine bug must not lose the other files
        return FileResult(path, error=gave_up(path, f"internal error: {type(exc).__name__}: {exc}"))
    if apply_noqa:
        raw = findings
        findings = _apply_noqa(findings, source)
        findings = sorted(findings + _noqa_findings(source, path, enabled_rules, raw), key=Finding.sort_key)
    for f in findings:
        if "related_line" in f.data:
            f.message = _name_related_line(f.message, f"line {f.data['related_line']}")
    # a file that read no other module may still have been refused one by the budget (capped)
    project = project_for(path, options) if options.project else None
    capped = bool(project is not None and project.capped)
    deps = _with_consulted(deps, consulted, path, options) if options.project else deps
    return FileResult(path, findings, deps=deps, capped=capped, notes=notes)


def _noqa_findings(source: str, path: str, enabled_rules: Sequence[type[Rule]], raw: list[Finding]) -> list[Finding]:
    """TFP900 (unused-noqa) and TFP901 (noqa-rule-name), judged from the text and the raw findings."""
    wanted = {r.CODE: r for r in enabled_rules if getattr(r, "TEXT_ONLY", False)}
    if not wanted or not _NOQA_ANY_CASE.search(source):
        return []
    from tfpar_lint.registry import rule_names, rules_by_code, rules_by_name

    if not _TFP_ANY_CASE.search(source) and not any(name in source for name in rule_names()):
        return []  # both judge only our codes and rule names (other tools' codes never)
    by_code, by_name = rules_by_code(), rules_by_name()
    from tfpar_lint import noqa
    from tfpar_lint.fix import SAFE
    enabled = frozenset(r.CODE for r in enabled_rules)
    lines = source.splitlines()
    out: list[Finding] = []

    def finding(rule, d, message, new_codes: list[str]) -> Finding:
        text = lines[d.line - 1] if d.line - 1 < len(lines) else ""
        if new_codes:
            edit = {"content": ", ".join(new_codes), "location": {"row": d.line, "column": d.codes_start + 1},
                    "end_location": {"row": d.line, "column": d.end + 1}}
            what = "Remove unused codes" if rule.CODE == "TFP900" else "Write rule codes instead of names"
        else:  # the whole directive goes, with the spaces before it
            start = d.start
            while start > 0 and text[start - 1] in " \t":
                start -= 1
            rest = text[d.end:]
            end = d.end if rest.strip() else len(text)
            if rest.strip() and not rest.lstrip().startswith("#"):
                end = d.end  # a free-text reason after the codes stays
            edit = {"content": "", "location": {"row": d.line, "column": start + 1},
                    "end_location": {"row": d.line, "column": end + 1}}
            what = "Remove unused `noqa` directive"
        return Finding(code=rule.CODE, name=rule.NAME, message=message, path=path, line=d.line,
                       col=d.start + 1, end_line=d.line, end_col=d.end + 1, severity=rule.SEVERITY,
                       fix_hint=rule.FIX_HINT,
                       fix={"applicability": SAFE, "message": what, "edits": [edit]})

    def silenced(d, code: str, name: str) -> bool:
        return code in d.codes or name in d.codes

    if "TFP900" in wanted:
        rule = wanted["TFP900"]
        for d, judged in noqa.unused_report(source, raw, frozenset(), enabled, by_code, by_name):
            if silenced(d, rule.CODE, rule.NAME):
                continue
            parts = [f"{k}: {', '.join(f'`{c}`' for c in v)}" for k, v in judged.items() if v]
            bad = {c for v in judged.values() for c in v}
            keep = [c for c in d.codes if c not in bad]
            out.append(finding(rule, d, f"Unused `noqa` directive ({'; '.join(parts)})", keep))
    if "TFP901" in wanted:
        rule = wanted["TFP901"]
        for d, names in noqa.name_directives(source, by_name):
            if silenced(d, rule.CODE, rule.NAME):
                continue
            first = d.codes[0] in names
            how = ("takes this comment as a bare `# noqa` that hides every code on the line" if first
                   else "ignores the name")
            listed = ", ".join(f"`{n}`" for n in names)
            codes = [by_name[c].CODE if c in names else c for c in d.codes]
            out.append(finding(rule, d, f"`# noqa` names {listed}: flake8 reads only codes after `noqa:`, so it "
                                        f"{how}; write {', '.join(f'`{by_name[n].CODE}`' for n in names)}",
                               codes))
    return out


def _lint_notebook(text: str, path: str, enabled, options, apply_noqa) -> FileResult:
    from tfpar_lint.notebook import code_cells

    try:
        cells = code_cells(text)
    except ValueError as exc:
        return FileResult(path, error=FileError(path, str(exc)))
    # All code cells form one module (later cells use names of earlier ones).
    parts: list[str] = []
    starts: list[tuple[int, int]] = []  # (first line of the cell in the joined source, cell number)
    line = 1
    for number, src in cells:
        if not src.endswith("\n"):
            src += "\n"
        starts.append((line, number))
        parts.append(src)
        line += src.count("\n")
    source = "".join(parts)

    def where(joined_line: int) -> tuple[int, int]:
        cell_start, cell = starts[0] if starts else (1, 1)
        for s, n in starts:
            if s <= joined_line:
                cell_start, cell = s, n
        return cell, joined_line - cell_start + 1

    rules = candidate_rules(source, _rules_for(enabled), options, path)
    if not rules:
        return FileResult(path, skipped=True)
    notes: list[str] = []
    try:
        findings = analyse(source, path, rules, options, with_fixes=False, notes=notes)  # fixes: joined cells
    except deep.PythonRejects as exc:
        if exc.line:
            cell, cline = where(exc.line)
            return FileResult(path, error=FileError(path, f"syntax error in cell {cell}: {exc.message}",
                                                    line=cline, col=exc.col))
        return FileResult(path, error=FileError(path, f"syntax error: {exc.message}"))
    except cst.ParserSyntaxError as exc:
        return FileResult(path, error=_syntax_error(path, exc, where, source))
    except NestingTooDeep:
        return FileResult(path, error=gave_up(path, "notebook too deeply nested (Python's recursion limit)"))
    except RecursionError as exc:
        return FileResult(path, error=gave_up(path, recursion_reason(exc)))
    except MemoryError:
        return FileResult(path, error=gave_up(path, "out of memory"))
    except Exception as exc:
        return FileResult(path, error=gave_up(path, f"internal error: {type(exc).__name__}: {exc}"))
    if apply_noqa:
        findings = _apply_noqa(findings, source)
    positions: list = []
    for f in findings:
        f.cell, f.line = where(f.line)
        cell_end, f.end_line = where(f.end_line)
        if "related_line" in f.data:
            rcell, rline = where(f.data["related_line"])
            f.data["related_line"], f.data["related_cell"] = rline, rcell
            f.message = _name_related_line(f.message, f"cell {rcell}, line {rline}")
        _add_ipynb_region(f, cell_end, text, positions)
    return FileResult(path, findings, notes=notes)


def _add_ipynb_region(f: Finding, cell_end: int, text: str, positions: list) -> None:
    """``f.data["ipynb_region"]``: the finding's place in the .ipynb JSON text (SARIF, github)."""
    from tfpar_lint.notebook import NotebookPositions

    if not positions:
        positions.append(NotebookPositions(text))
    npos = positions[0]
    start = npos.position(f.cell, f.line, f.col)
    end = npos.position(cell_end, f.end_line, f.end_col)
    if start is not None and end is not None and end >= start:
        f.data["ipynb_region"] = {"line": start[0], "col": start[1], "end_line": end[0], "end_col": end[1]}


def read_source(path: str, max_size: int = DEFAULT_MAX_FILE_SIZE) -> tuple[Optional[str], Optional[FileError]]:
    data, err = read_bytes(path, max_size)
    if data is None:
        return None, err
    return decode_source(path, data)


def format_size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{n} bytes"


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"  # pragma: no cover


def check_file(path: str, st: os.stat_result, max_size: int) -> Optional[FileError]:
    """The E902 error that skips ``path`` (not a regular file, over ``max_size`` bytes), or None."""
    if stat.S_ISDIR(st.st_mode):
        return FileError(path, "is a directory", code="E902")
    if not stat.S_ISREG(st.st_mode):
        return FileError(path, f"skipped: not a regular file ({_file_kind(st.st_mode)})", code="E902")
    if max_size and st.st_size > max_size:
        return too_large(path, st.st_size, max_size)
    return None


def too_large(path: str, size: Optional[int], max_size: int) -> FileError:
    what = f"{format_size(size)}, " if size is not None else ""
    return FileError(path, f"skipped: {what}over the size limit of {format_size(max_size)} "
                           "(max-file-size, --max-file-size)", code="E902")


def read_bytes(path: str, max_size: int = DEFAULT_MAX_FILE_SIZE,
               stat_out: Optional[list] = None) -> tuple[Optional[bytes], Optional[FileError]]:
    """The bytes of ``path``, or the error that says why not.

    Never blocks and never reads without bound: what is not a regular file
    (a FIFO, a device, a symlink to one) is skipped before it is opened, and
    checked again on the open descriptor; a file over ``max_size`` bytes
    (0: no limit) is skipped, also when it grows while being read.  With
    ``stat_out`` (a list), the status of the open file, taken before it was
    read, is appended to it.
    """
    try:
        err = check_file(path, os.stat(path), max_size)
        if err is not None:
            return None, err
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
        fd = os.open(path, flags)
        with open(fd, "rb") as fh:
            st = os.fstat(fd)
            err = check_file(path, st, max_size)
            if err is not None:
                return None, err
            data = read_bounded(fh, max_size)
        if max_size and len(data) > max_size:
            return None, too_large(path, None, max_size)
        if stat_out is not None:
            stat_out.append(st)
        return data, None
    except IsADirectoryError:
        return None, FileError(path, "is a directory")
    except FileNotFoundError:
        return None, FileError(path, "no such file")
    except PermissionError:
        return None, FileError(path, "permission denied")
    except OSError as exc:
        return None, FileError(path, f"cannot read: {exc.strerror or exc}")
    except MemoryError:
        return None, FileError(path, "cannot read: out of memory", code="E902")


def decode_source(path: str, data: bytes) -> tuple[Optional[str], Optional[FileError]]:
    """The text of a file's bytes: UTF-8 (BOM dropped), else the PEP 263 coding cookie's encoding.

    Files and standard input both go through here, so the same bytes give
    the same result whichever way they come.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        # honour a PEP 263 coding cookie before giving up
        import io
        import tokenize

        try:
            enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            if enc.lower().replace("_", "-") not in ("utf-8", "utf-8-sig"):
                return data.decode(enc), None
        except (SyntaxError, LookupError, UnicodeDecodeError):
            pass
        return None, FileError(path, f"not valid UTF-8 (byte {exc.start}: {exc.reason})")


def lint_file(path: str, enabled: Optional[Collection[str]] = None,
              options: AnalysisOptions = AnalysisOptions(), apply_noqa: bool = True,
              max_size: int = DEFAULT_MAX_FILE_SIZE) -> FileResult:
    """Lint one file in this process (no supervision: see :func:`lint_paths`)."""
    source, err = read_source(path, max_size)
    if err is not None:
        return FileResult(path, error=err)
    return lint_source(source, path, enabled, options, apply_noqa)


def _worker(args) -> FileResult:
    path, enabled, options, apply_noqa, max_size = args
    return lint_file(path, enabled, options, apply_noqa, max_size)


def _worker_digest(args) -> tuple[FileResult, Optional[str], Optional[list]]:
    """lint_file, plus the SHA-256 of the bytes it linted (None if unreadable) and the file's
    status key when it may be trusted (:meth:`tfpar_lint.cache.DigestIndex.key`), for the cache."""
    path, enabled, options, apply_noqa, max_size = args
    st: list = []
    data, err = read_bytes(path, max_size, st)
    if data is None:
        return FileResult(path, error=err), None, None
    from tfpar_lint.cache import DigestIndex, digest

    key = DigestIndex.key(st[0]) if st else None
    source, err = decode_source(path, data)
    if source is None:
        return FileResult(path, error=err), digest(data), key
    return lint_source(source, path, enabled, options, apply_noqa), digest(data), key


def _source_task(args) -> FileResult:
    source, path, enabled, options, apply_noqa = args
    return lint_source(source, path, enabled, options, apply_noqa)


# Most worker processes one run may start (each can hold a few hundred MB).
MAX_JOBS = 64


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def effective_jobs(jobs: Optional[int]) -> int:
    """Worker processes to start: ``jobs`` (default: the CPUs), at most the CPUs and MAX_JOBS."""
    cpus = cpu_count()
    return max(1, min(jobs or cpus, cpus, MAX_JOBS))


def worker_memory_limit(max_file_size: int) -> Optional[int]:
    """Address-space cap of a worker: 4 GiB, or 400 bytes per byte of the largest file allowed."""
    if not max_file_size:
        return None
    return max(4 << 30, 400 * max_file_size)


def lint_source_supervised(source: str, path: str = "<stdin>", enabled: Optional[Collection[str]] = None,
                           options: AnalysisOptions = AnalysisOptions(), apply_noqa: bool = True,
                           timeout: Optional[float] = None,
                           max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> FileResult:
    """:func:`lint_source` in a supervised worker (a crash or a hang costs only this result)."""
    from tfpar_lint import workers

    out: list[FileResult] = []
    enabled_f = None if enabled is None else frozenset(enabled)
    workers.run_tasks(
        _source_task, [(source, path, enabled_f, options, apply_noqa)], jobs=1,
        timeout=workers.DEFAULT_TIMEOUT if timeout is None else timeout,
        memory_limit=worker_memory_limit(max_file_size),
        on_result=lambda k, r: out.append(r),
        on_failure=lambda k, why: out.append(FileResult(path, error=gave_up(path, why))))
    return out[0]


def lint_paths(paths: Sequence[str], enabled: Optional[Collection[str]] = None,
               options: AnalysisOptions = AnalysisOptions(), jobs: Optional[int] = None,
               apply_noqa: bool = True,
               progress: Optional[Callable[[int, int], None]] = None,
               cache_dir: Optional[str] = None,
               timeout: Optional[float] = None,
               max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> list[FileResult]:
    """Lint files in supervised worker processes (:mod:`tfpar_lint.workers`), also at ``jobs=1``.

    Every path gets a result: findings, or a per-file error (E902 skipped or
    unreadable, E999 syntax error, E903 the analysis gave up: the worker
    crashed, ran past ``timeout`` seconds (default
    ``workers.DEFAULT_TIMEOUT``; 0: no limit) or ran out of memory).
    ``jobs`` is capped at the CPUs (:func:`effective_jobs`).  With
    ``cache_dir`` the on-disk cache (:mod:`tfpar_lint.cache`) is asked first,
    in this process; only the misses are linted, and their results are
    stored.  Results come back in the order of ``paths``.
    """
    from tfpar_lint import workers

    paths = list(paths)
    total = len(paths)
    jobs = effective_jobs(jobs)
    if timeout is None:
        timeout = workers.DEFAULT_TIMEOUT
    enabled_f = None if enabled is None else frozenset(enabled)
    from tfpar_lint.semantic import project as project_mod

    project_mod.ROOTS.clear()  # pyproject.toml files may have come or gone since the last run
    results: list[Optional[FileResult]] = [None] * total
    done = 0
    cache = None
    todo = list(range(total))
    if cache_dir:
        from tfpar_lint.cache import Cache

        if options.project and options.summary_dir is None:  # the modules' summaries live there too
            from dataclasses import replace

            options = replace(options, summary_dir=os.path.abspath(cache_dir))
        cache = Cache(cache_dir, enabled_f, options, apply_noqa, max_file_size=max_file_size,
                      graph=cache_graph(options))
        todo = []
        for i, p in enumerate(paths):
            hit = cache.get(p)
            if hit is None:
                todo.append(i)
                continue
            results[i] = hit
            done += 1
            if progress:
                progress(done, total)
    worker = _worker if cache is None else _worker_digest
    if options.project and len(todo) > 1:
        # the run's budget for whole-project analysis, the sum of its files' budgets, shared by the
        # files that need it: each worker starts with its share (the largest files, linted first,
        # are those that import most)
        from dataclasses import replace

        share = sum(project_mod.BUDGET_BASE + int(project_mod.BUDGET_FACTOR * _file_size(paths[i])) for i in todo)
        options = replace(options, project_pool=min(project_mod.POOL_MAX, share // min(jobs, len(todo))))
    work = [(paths[i], enabled_f, options, apply_noqa, max_file_size) for i in todo]

    def record(k: int, out) -> None:
        nonlocal done
        i = todo[k]
        if cache is not None:
            out, file_digest, stat_key = out
            if file_digest is not None:
                cache.put(paths[i], file_digest, out, stat_key)
        results[i] = out
        done += 1
        if progress:
            progress(done, total)

    def failed(k: int, reason: str) -> None:
        nonlocal done
        i = todo[k]
        results[i] = FileResult(paths[i], error=gave_up(paths[i], reason))
        done += 1
        if progress:
            progress(done, total)

    if not work:
        if cache is not None:
            cache.flush()
        return results  # type: ignore[return-value]
    # Largest files first (longest-processing-time-first, roughly: the few big
    # files that reach the parser start early instead of landing last and
    # leaving the other workers idle); results are put back in order.
    order = sorted(range(len(work)), key=lambda k: -_file_size(work[k][0]))
    workers.run_tasks(worker, work, jobs=jobs, timeout=timeout,
                      memory_limit=worker_memory_limit(max_file_size), order=order,
                      on_result=record, on_failure=failed)
    if cache is not None:
        cache.flush()
    return results  # type: ignore[return-value]


def _file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


# -- fixing ------------------------------------------------------------------------

@dataclass
class FixOutcome:
    """What :func:`fix_source` did to one text."""

    source: str  # the fixed text (the input when nothing was fixed)
    fixed: list[Finding]  # the findings whose fixes were applied, every pass
    result: FileResult  # the lint of the fixed text
    reverted: Optional[str] = None  # why the last pass was undone (its fixes broke the parse)


def fix_source(source: str, path: str, enabled: Optional[Collection[str]] = None,
               options: AnalysisOptions = AnalysisOptions(), unsafe: bool = False) -> FixOutcome:
    """Apply the applicable fixes, re-lint, and repeat until stable (ruff's loop, at most MAX_PASSES).

    A pass whose fixes leave the text unparsable is undone (the findings stay reported).
    """
    from tfpar_lint.fix import MAX_PASSES, applicable, apply_fixes

    fixed: list[Finding] = []
    current = source
    result = lint_source(current, path, enabled, options)
    if path.endswith(".ipynb") or result.error is not None:
        return FixOutcome(source, [], result)
    for _ in range(MAX_PASSES):
        todo = [f for f in result.findings if applicable(f.fix, unsafe)]
        if not todo:
            break
        new, applied = apply_fixes(current, [f.fix for f in todo])
        if new == current or not applied:
            break
        after = lint_source(new, path, enabled, options)
        if after.error is not None:
            return FixOutcome(current, fixed, result,
                              reverted=f"fixes of {', '.join(sorted({todo[i].code for i in applied}))} "
                                       f"made the file unparsable ({after.error.message}); they were not applied")
        fixed.extend(todo[i] for i in applied)
        current, result = new, after
    return FixOutcome(current, fixed, result)

