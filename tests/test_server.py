"""``tfpar-lint server`` driven by a real LSP client over stdio (pytest-lsp), as an editor drives it.

One project on disk: ``train.py`` builds a model outside the scope with a strategy it gets from
``dist.py``, a second module.  The client opens, edits and saves files, opens a notebook, applies the
quick fixes the server offers, and edits ``dist.py`` so that the cross-file finding in ``train.py``
goes away and comes back.
"""
from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pygls", reason="the language server needs the [lsp] extra")
pytest_lsp = pytest.importorskip("pytest_lsp", reason="tests/test_server.py needs pytest-lsp (the dev extra)")
from lsprotocol import types  # noqa: E402
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

DIST = textwrap.dedent("""\
    import tensorflow as tf


    def make_strategy():
        return tf.distribute.MirroredStrategy()
""")
NOT_A_STRATEGY = textwrap.dedent("""\
    def make_strategy():
        return None
""")
TRAIN = textwrap.dedent("""\
    import tensorflow as tf

    from dist import make_strategy

    strategy = make_strategy()
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    with strategy.scope():
        model.compile(optimizer="sgd", loss="mse")
""")
THREADS = textwrap.dedent("""\
    import threading
    import tensorflow as tf

    counter = tf.Variable(0.0)


    def work():
        for _ in range(10):
            counter.assign(counter + 1.0)


    threads = [threading.Thread(target=work) for _ in range(4)]
""")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lsp")
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n\n[tool.tfpar-lint]\nignore = ["TFP9"]\n')
    (root / "dist.py").write_text(DIST)
    (root / "train.py").write_text(TRAIN)
    (root / "threads.py").write_text(THREADS)
    return root


@pytest_lsp.fixture(config=ClientServerConfig(
    server_command=[sys.executable, "-m", "tfpar_lint", "server"],
    server_env={"PYTHONPATH": str(ROOT / "src")}))
async def client(lsp_client: LanguageClient, workspace: Path):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="demo")]))
    yield
    await lsp_client.shutdown_session()


async def _diagnostics(client: LanguageClient, uri: str, want=None, seconds: float = 60.0):
    """The diagnostics of ``uri`` once published (and, with ``want``, once ``want(codes)`` holds)."""
    end = asyncio.get_event_loop().time() + seconds
    while True:
        got = client.diagnostics.get(uri)
        if got is not None and (want is None or want([d.code for d in got])):
            return got
        left = end - asyncio.get_event_loop().time()
        if left <= 0:
            raise AssertionError(f"no such diagnostics for {uri}: {got}")
        try:
            await asyncio.wait_for(client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS), left)
        except asyncio.TimeoutError:
            pass


def _open(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="python", version=version, text=path.read_text() if text is None else text)))
    return uri


@pytest.mark.asyncio(loop_scope="function")
async def test_open_edit_and_the_cross_file_finding(client: LanguageClient, workspace: Path):
    train = _open(client, workspace / "train.py")
    diags = await _diagnostics(client, train, lambda codes: "TFP101" in codes)
    d = next(d for d in diags if d.code == "TFP101")
    assert d.range.start == types.Position(line=5, character=8)  # `model = tf.keras...` of line 6
    assert d.code_description.href.endswith("/rules/TFP101.md") and d.source == "tfpar-lint"

    # an edit in the editor, not saved: the model moves into the scope, the finding goes
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=train, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=TRAIN.replace(
            "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nwith strategy.scope():\n",
            "with strategy.scope():\n    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"))]))
    await _diagnostics(client, train, lambda codes: "TFP101" not in codes)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=train, version=3),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=TRAIN)]))
    await _diagnostics(client, train, lambda codes: "TFP101" in codes)

    # the other module changes: make_strategy() no longer returns a strategy, so train.py has no
    # scope mistake; then back.  The server is told of dist.py's edit only.
    dist = _open(client, workspace / "dist.py")
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=dist, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=NOT_A_STRATEGY)]))
    await _diagnostics(client, train, lambda codes: "TFP101" not in codes)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=dist, version=3),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=DIST)]))
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=dist)))
    await _diagnostics(client, train, lambda codes: "TFP101" in codes)


@pytest.mark.asyncio(loop_scope="function")
async def test_quick_fixes(client: LanguageClient, workspace: Path):
    uri = _open(client, workspace / "threads.py")
    diags = await _diagnostics(client, uri, lambda codes: "TFP301" in codes)
    d = next(d for d in diags if d.code == "TFP301")
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=d.range,
        context=types.CodeActionContext(diagnostics=[d])))
    titles = [a.title for a in actions]
    assert any(t.startswith("TFP301: add `# noqa: TFP301`") for t in titles), titles
    fix = next(a for a in actions if "noqa" not in a.title)
    assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
    # apply the rule's fix as an editor would, then lint the result: the finding is gone
    text = _apply(THREADS, fix.edit.changes[uri])
    assert "counter.assign_add(1.0)" in text and "counter + 1.0" not in text, text
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    await _diagnostics(client, uri, lambda codes: "TFP301" not in codes)
    # the noqa action's edit silences it too
    noqa = next(a for a in actions if "noqa" in a.title)
    silenced = _apply(THREADS, noqa.edit.changes[uri])
    assert "counter.assign(counter + 1.0)  # noqa: TFP301" in silenced
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=3),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=THREADS)]))
    await _diagnostics(client, uri, lambda codes: "TFP301" in codes)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=4),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=silenced)]))
    await _diagnostics(client, uri, lambda codes: "TFP301" not in codes)


@pytest.mark.asyncio(loop_scope="function")
async def test_notebook_cells(client: LanguageClient, workspace: Path):
    nb_uri = (workspace / "nb.ipynb").as_uri()
    cells_src = ["import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n",
                 "# Training\n",
                 "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nwith strategy.scope():\n"
                 "    model.compile(optimizer='sgd', loss='mse')\n"]
    kinds = [types.NotebookCellKind.Code, types.NotebookCellKind.Markup, types.NotebookCellKind.Code]
    uris = [f"{nb_uri}#cell{i}" for i in range(3)]
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=nb_uri, notebook_type="jupyter-notebook", version=1,
            cells=[types.NotebookCell(kind=k, document=u) for k, u in zip(kinds, uris)]),
        cell_text_documents=[types.TextDocumentItem(uri=u, language_id="python" if k == types.NotebookCellKind.Code
                                                    else "markdown", version=1, text=t)
                             for u, k, t in zip(uris, kinds, cells_src)]))
    diags = await _diagnostics(client, uris[2], lambda codes: "TFP101" in codes)
    d = next(d for d in diags if d.code == "TFP101")
    assert d.range.start.line == 0  # line 1 of the third cell
    assert not [x for x in client.diagnostics.get(uris[0], []) if x.code == "TFP101"]


def _apply(text: str, edits: list) -> str:
    lines = text.splitlines(keepends=True)

    def offset(pos) -> int:
        return sum(len(ln) for ln in lines[:pos.line]) + pos.character

    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(e.range.start)] + e.new_text + text[offset(e.range.end):]
        lines = text.splitlines(keepends=True)
    return text


# ---------------------------------------------------------------- edits of comments only
TRAIN_COMMENTED = TRAIN.replace("import tensorflow as tf\n", "import tensorflow as tf  # one\n", 1)


@pytest.mark.asyncio(loop_scope="function")
async def test_comment_edits(client: LanguageClient, workspace: Path):
    """An edit of comments away from every finding keeps the findings (not linted again); a comment
    that adds a noqa on the finding's line is linted: the finding goes, and comes back."""
    train = _open(client, workspace / "train.py", TRAIN_COMMENTED, version=10)
    await _diagnostics(client, train, lambda codes: "TFP101" in codes)
    versions = iter(range(11, 20))

    def edit(text: str) -> None:
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=train, version=next(versions)),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    edit(TRAIN_COMMENTED.replace("# one", "# two"))
    edit(TRAIN_COMMENTED.replace("# one", "# two").replace(
        "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])",
        "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])  # noqa: TFP101"))
    await _diagnostics(client, train, lambda codes: "TFP101" not in codes)
    edit(TRAIN_COMMENTED.replace("# one", "# three"))
    d = await _diagnostics(client, train, lambda codes: "TFP101" in codes)
    assert next(x for x in d if x.code == "TFP101").range.start == types.Position(line=5, character=8)


def test_same_findings():
    """Which texts keep their findings without a lint (tfpar_lint.server.same_findings)."""
    from tfpar_lint import engine
    from tfpar_lint.server import same_findings

    src = TRAIN_COMMENTED
    found = engine.lint_source(src, "train.py", options=engine.AnalysisOptions(project=False)).findings
    assert [f.code for f in found] == ["TFP101"]
    assert same_findings(src, src.replace("# one", "# two, longer"), found)
    assert same_findings(src, src.replace("# one", "# a '#' and a \"quote\""), found)
    assert not same_findings(src, src.replace("# one", "# noqa: E501"), found)  # a noqa: judged again
    assert not same_findings(src, "# one more line\n" + src, found)  # the lines move
    assert not same_findings(src, src.replace("import tensorflow as tf", "import tensorflow as tf2"), found)
    # a comment inside the finding (here: on its line) may be in its message or its fix: linted again
    inside = src.replace("model = tf.keras.Sequential([tf.keras.layers.Dense(1)])",
                         "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])  # x")
    assert not same_findings(src, inside, found)
    # a string that looks like a comment is code
    s2 = src.replace("# one", "\nX = '# not a comment'")
    assert not same_findings(s2, s2.replace("# not a comment", "# still not"), found)
