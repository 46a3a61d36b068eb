"""``tfpar-lint server``: a Language Server Protocol server (on pygls), for editors.

What it gives an editor (any LSP client: VS Code's generic client, Neovim, JupyterLab's
jupyterlab-lsp):

* diagnostics on open, change and save of ``.py`` files and of notebook cells (the notebook
  document sync of LSP 3.17: every cell of a notebook is linted as one module, as the CLI lints an
  ``.ipynb``, and each finding is published on its cell);
* each diagnostic's code linked to its rule page (``codeDescription.href``);
* quick fixes: the rule's own fix where it has one, and "add ``# noqa: CODE``" for every finding;
* whole-project analysis kept warm: the project's modules stay parsed in this process between
  edits; a change to a file (an edit in the editor, or a save) forgets only that module and the
  modules whose answers read it, and the open files are linted again, so a cross-file finding
  follows the other module's change.  What is open in the editor wins over the disk;
* settings from ``[tool.tfpar-lint]`` of the nearest ``pyproject.toml`` (read again when it is
  saved), the rule selection included;
* an edit that changes only comments, away from every finding and without a ``noqa``, keeps the
  file's findings without linting it again (:func:`same_findings`: the code, and every code
  character's place, is the same); any other edit is linted (the edited statements parsed again).

The linting itself is the CLI's engine (:func:`tfpar_lint.engine.lint_source`); this module only
speaks the protocol.  Install with the ``lsp`` extra (pygls).
"""
from __future__ import annotations

import json
import os
from typing import Any, Optional
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from tfpar_lint import __version__, config, engine
from tfpar_lint.finding import Finding
from tfpar_lint.noqa import add_noqa
from tfpar_lint.output.sarif import help_uri
from tfpar_lint.semantic import project as project_mod

SOURCE = "tfpar-lint"
NOTEBOOK_SYNC = lsp.NotebookDocumentSyncOptions(
    notebook_selector=[lsp.NotebookDocumentFilterWithCells(
        notebook="*", cells=[lsp.NotebookCellLanguage(language="python")])],
    save=True,
)


def uri_to_path(uri: str) -> Optional[str]:
    parsed = urlparse(uri)
    if parsed.scheme not in ("file", ""):
        return None
    return os.path.abspath(unquote(parsed.path))


class TfparServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(SOURCE, __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=NOTEBOOK_SYNC)
        self._settings: dict[str, config.Settings] = {}  # folder -> settings found from it
        self.published: dict[str, list[lsp.Diagnostic]] = {}  # uri -> what was last published
        self.generation = 0  # changes seen (an edit, a save, a file changed on disk)
        self.last_changed: Optional[str] = None  # the uri of the last change
        self._linted: dict[str, "_Linted"] = {}  # uri -> its last lint

    # -------------------------------------------------------------- settings
    def settings_for(self, path: str) -> config.Settings:
        folder = os.path.dirname(path)
        got = self._settings.get(folder)
        if got is None:
            try:
                got = config.load_settings(None, cwd=folder)
            except config.ConfigError as e:
                self.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=str(e)))
                got = config.Settings(root=folder)
            self._settings[folder] = got
        return got

    def forget_settings(self) -> None:
        self._settings.clear()
        self._linted.clear()

    # -------------------------------------------------------------- linting
    def lint_text(self, path: str, text: str) -> tuple[list[Finding], Optional[Any]]:
        settings = self.settings_for(path)
        options = settings.analysis_options()
        result = engine.lint_source(text, path, enabled=settings.enabled_for(path), options=options)
        return result.findings, result.error

    def lint_document(self, uri: str) -> None:
        doc = self.workspace.get_text_document(uri)
        path = uri_to_path(uri)
        if path is None or not path.endswith((".py", ".pyi")):
            return
        last = self._linted.get(uri)
        settings = self.settings_for(path)
        if last is not None and last.settings is settings and last.error is None \
                and last.generation == self.generation - 1 and self.last_changed == uri \
                and same_findings(last.text, doc.source, last.findings):
            findings, error = last.findings, None  # only comments changed, away from every finding
        else:
            findings, error = self.lint_text(path, doc.source)
        self._linted[uri] = _Linted(doc.source, findings, error, settings, self.generation)
        diags = [to_diagnostic(f, doc.lines) for f in findings]
        if error is not None:
            diags.append(error_diagnostic(error))
        self.publish(uri, diags, doc.version)

    def lint_notebook(self, notebook_uri: str) -> None:
        nb = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        path = uri_to_path(notebook_uri)
        if nb is None or path is None:
            return
        cells, uris, lines = [], [], []
        for cell in nb.cells:
            doc = self.workspace.get_text_document(cell.document)
            code = cell.kind == lsp.NotebookCellKind.Code
            cells.append({"cell_type": "code" if code else "markdown", "metadata": {},
                          "source": doc.source, **({"outputs": [], "execution_count": None} if code else {})})
            uris.append(cell.document)
            lines.append(doc.lines)
        text = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
        if not path.endswith(".ipynb"):
            path += ".ipynb"
        findings, error = self.lint_text(path, text)
        per_cell: dict[str, list[lsp.Diagnostic]] = {u: [] for u in uris}
        for f in findings:
            i = (f.cell or 1) - 1
            if 0 <= i < len(uris):
                per_cell[uris[i]].append(to_diagnostic(f, lines[i]))
        if error is not None and uris:
            per_cell[uris[0]].append(error_diagnostic(error))
        for u, diags in per_cell.items():
            self.publish(u, diags, None)

    def lint_open(self, except_uri: Optional[str] = None) -> None:
        """Lint every open file and notebook again (a file they may read changed)."""
        notebook_cells = set()
        for nb_uri, nb in list(self.workspace.notebook_documents.items()):
            notebook_cells.update(c.document for c in nb.cells)
            if nb_uri != except_uri:
                self.lint_notebook(nb_uri)
        for uri in list(self.workspace.text_documents):
            if uri not in notebook_cells and uri != except_uri:
                self.lint_document(uri)

    def publish(self, uri: str, diags: list[lsp.Diagnostic], version: Optional[int]) -> None:
        self.published[uri] = diags
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diags,
                                                                            version=version))

    # -------------------------------------------------------------- changes
    def changed(self, uri: str, text: Optional[str]) -> None:
        """The file behind ``uri`` now reads ``text`` (None: the editor closed it; the disk
        counts again).  The warm projects forget what depended on it."""
        path = uri_to_path(uri)
        if path is None:
            return
        self.generation += 1
        self.last_changed = uri
        if text is None:
            project_mod.OVERLAY.pop(path, None)
        else:
            project_mod.OVERLAY[path] = text
        for proj in list(engine._PROJECTS.values()):
            proj.invalidate(path)
        if os.path.basename(path) == "pyproject.toml":
            self.forget_settings()


class _Linted:
    """A document's last lint: its text, findings and error, under which settings, at which change."""

    __slots__ = ("text", "findings", "error", "settings", "generation")

    def __init__(self, text: str, findings: list[Finding], error: Any, settings: Any, generation: int) -> None:
        self.text, self.findings, self.error = text, findings, error
        self.settings, self.generation = settings, generation


def _without_comments(text: str) -> str:
    """``text`` with every comment cut (strings kept: a ``#`` in a string is no comment)."""
    from tfpar_lint.codetext import _COMMENT_OR_STRING

    if "#" not in text:
        return text
    parts, last = [], 0
    for m in _COMMENT_OR_STRING.finditer(text):
        if text[m.start()] == "#":
            parts.append(text[last:m.start()])
            last = m.end()
    parts.append(text[last:])
    return "".join(parts)


def same_findings(old: str, new: str, findings: list[Finding]) -> bool:
    """Whether ``new`` has ``old``'s findings without linting it again: the two differ only in
    comments (the code, and every code character's line and column, is the same), no changed line
    holds a ``noqa`` (which hides findings and is judged by TFP900/TFP901), and no changed line lies
    within a finding, its related place or its fix (whose text may carry the comment)."""
    if old == new:
        return True
    if _without_comments(old) != _without_comments(new):
        return False
    a, b = old.splitlines(), new.splitlines()
    if len(a) != len(b):  # pragma: no cover - same code, same line breaks
        return False
    changed = {i + 1 for i, (x, y) in enumerate(zip(a, b)) if x != y}
    if any("noqa" in (a[i - 1] + b[i - 1]).lower() for i in changed):
        return False
    for f in findings:
        spans = [(f.line, f.end_line or f.line)]
        if "related_line" in f.data:
            spans.append((f.data["related_line"], f.data["related_line"]))
        for e in (f.fix or {}).get("edits", ()):
            spans.append((e["location"]["row"], e["end_location"]["row"]))
        if any(lo <= i <= hi for lo, hi in spans for i in changed):
            return False
    return True


def to_diagnostic(f: Finding, lines: Any) -> lsp.Diagnostic:
    start = _position(lines, f.line, f.col)
    end = _position(lines, f.end_line, f.end_col) if f.end_line else start
    data = {"code": f.code, "line": f.line, "fix": f.fix}
    return lsp.Diagnostic(
        range=lsp.Range(start=start, end=end),
        message=f.message,
        severity=lsp.DiagnosticSeverity.Error if f.severity == "error" else lsp.DiagnosticSeverity.Warning,
        code=f.code,
        code_description=lsp.CodeDescription(href=help_uri(f.code)),
        source=SOURCE,
        data=data,
    )


def error_diagnostic(err: Any) -> lsp.Diagnostic:
    from tfpar_lint.output import error_code

    line = max(int(getattr(err, "line", 1) or 1) - 1, 0)
    col = max(int(getattr(err, "col", 1) or 1) - 1, 0)
    pos = lsp.Position(line=line, character=col)
    return lsp.Diagnostic(range=lsp.Range(start=pos, end=pos), message=err.message, code=error_code(err),
                          severity=lsp.DiagnosticSeverity.Error, source=SOURCE)


def _position(lines: Any, line: int, col: int) -> lsp.Position:
    """A finding's 1-based line and 1-based column (in characters) as an LSP position (0-based,
    in UTF-16 code units, the protocol's default encoding)."""
    row = max(line - 1, 0)
    text = lines[row] if row < len(lines) else ""
    chars = max(col - 1, 0)
    return lsp.Position(line=row, character=len(text[:chars].encode("utf-16-le")) // 2)


def code_actions(ls: TfparServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    uri = params.text_document.uri
    doc = ls.workspace.get_text_document(uri)
    actions: list[lsp.CodeAction] = []
    for diag in params.context.diagnostics:
        if diag.source != SOURCE or not isinstance(diag.data, dict):
            continue
        code = diag.data.get("code") or diag.code
        fix = diag.data.get("fix")
        if fix and fix.get("edits"):
            edits = [lsp.TextEdit(range=lsp.Range(
                start=_position(doc.lines, e["location"]["row"], e["location"]["column"]),
                end=_position(doc.lines, e["end_location"]["row"], e["end_location"]["column"])),
                new_text=e["content"]) for e in fix["edits"]]
            actions.append(lsp.CodeAction(
                title=f"{code}: {fix.get('message') or 'apply the fix'}"
                      + (" (unsafe: review it)" if fix.get("applicability") == "unsafe" else ""),
                kind=lsp.CodeActionKind.QuickFix, diagnostics=[diag], is_preferred=fix.get("applicability") == "safe",
                edit=lsp.WorkspaceEdit(changes={uri: edits})))
        noqa = _noqa_edit(doc.source, int(diag.data.get("line") or diag.range.start.line + 1), str(code))
        if noqa is not None:
            actions.append(lsp.CodeAction(title=f"{code}: add `# noqa: {code}`", kind=lsp.CodeActionKind.QuickFix,
                                          diagnostics=[diag], edit=lsp.WorkspaceEdit(changes={uri: [noqa]})))
    return actions


def _noqa_edit(source: str, line: int, code: str) -> Optional[lsp.TextEdit]:
    """The one-line edit that ``--add-noqa`` would make for a finding of ``code`` on ``line``."""

    class _F:
        cell = None

    f = _F()
    f.line, f.code = line, code
    new, n = add_noqa(source, [f])
    if not n:
        return None
    old_lines, new_lines = source.splitlines(keepends=True), new.splitlines(keepends=True)
    for i, (a, b) in enumerate(zip(old_lines, new_lines)):
        if a != b:
            body_a = a.rstrip("\r\n")
            return lsp.TextEdit(range=lsp.Range(start=lsp.Position(line=i, character=0),
                                                end=lsp.Position(line=i, character=len(body_a.encode("utf-16-le")) // 2)),
                                new_text=b.rstrip("\r\n"))
    return None


def make_server() -> TfparServer:
    from tfpar_lint import deep

    if deep.INCREMENTAL is None:  # an edited file is parsed again only where it changed
        deep.INCREMENTAL = deep.Incremental()
    from tfpar_lint.workers import _tune_gc

    _tune_gc()  # the workers' thresholds: a full collection of the warm trees every few edits cost ~80 ms
    server = TfparServer()

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TfparServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.changed(params.text_document.uri, params.text_document.text)
        ls.lint_document(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TfparServer, params: lsp.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.changed(uri, ls.workspace.get_text_document(uri).source)
        ls.lint_document(uri)
        ls.lint_open(except_uri=uri)  # the others may read this module

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: TfparServer, params: lsp.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.changed(uri, ls.workspace.get_text_document(uri).source)
        ls.lint_open()

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TfparServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.changed(params.text_document.uri, None)
        ls.publish(params.text_document.uri, [], None)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched(ls: TfparServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:  # a file changed on disk (another tool, git)
            path = uri_to_path(change.uri)
            if path is not None and path not in project_mod.OVERLAY:
                ls.changed(change.uri, project_mod.OVERLAY.get(path))
        ls.lint_open()

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)
    def nb_open(ls: TfparServer, params: lsp.DidOpenNotebookDocumentParams) -> None:
        ls.lint_notebook(params.notebook_document.uri)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def nb_change(ls: TfparServer, params: lsp.DidChangeNotebookDocumentParams) -> None:
        ls.lint_notebook(params.notebook_document.uri)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_SAVE)
    def nb_save(ls: TfparServer, params: lsp.DidSaveNotebookDocumentParams) -> None:
        ls.lint_notebook(params.notebook_document.uri)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def nb_close(ls: TfparServer, params: lsp.DidCloseNotebookDocumentParams) -> None:
        for cell in params.cell_text_documents:
            ls.publish(cell.uri, [], None)

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))
    def code_action(ls: TfparServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        return code_actions(ls, params)

    return server


def main() -> int:
    """``tfpar-lint server``: speak LSP on stdin/stdout until the client shuts it down."""
    make_server().start_io()
    return 0
