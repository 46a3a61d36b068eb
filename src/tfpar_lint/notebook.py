"""Jupyter notebooks: the Python code cells of an ``.ipynb`` file.

:func:`code_cells` returns ``(cell_number, source)`` for every code cell;
``cell_number`` is 1-based and counts *all* cells (markdown and raw ones too),
which is what Jupyter shows when the cells are numbered.  IPython syntax that
is not Python is blanked out line by line, so that line numbers inside the
cell stay the ones the user sees:

* line magics and shell escapes: ``%timeit f()``, ``!pip install x``,
  ``files = !ls``, ``t = %time f()``, help requests ``tf.function?`` / ``??x``
  (with their ``\\``-continued lines); one that opens a block becomes ``pass``
  so that the block still parses;
* a cell magic (``%%bash``, ``%%time``...) on the first line means the cell is
  not Python: the whole cell is left out.
"""
from __future__ import annotations

import json
import re
from typing import Any

_ASSIGN_MAGIC = re.compile(r"^\s*[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*(?:%|!(?!=))")
_HELP = re.compile(r"^\s*(\?\??[\w.]+|[\w.]+\?\??)\s*$")


def _is_ipython_line(stripped: str, line: str) -> bool:
    if not stripped:
        return False
    if stripped[0] in "%!?":
        return True
    if _HELP.match(line):
        return True
    if ("%" in stripped or "!" in stripped) and _ASSIGN_MAGIC.match(line):
        return True  # `files = !ls`, `t = %time f()`
    return False


def _bracket_delta(code: str, in_string: str | None) -> tuple[int, str | None]:
    """Net change of bracket depth over one line of Python, and the string still open at its end
    (only triple-quoted strings span lines).  Comments and string contents are skipped."""
    depth = 0
    i, n = 0, len(code)
    while i < n:
        if in_string:
            if code.startswith(in_string, i):
                i += len(in_string)
                in_string = None
                continue
            i += 2 if code[i] == "\\" else 1
            continue
        c = code[i]
        if c == "#":
            break
        if c in "\"'":
            q = code[i:i + 3] if code[i:i + 3] in ('"""', "'''") else c
            in_string = q
            i += len(q)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        i += 1
    if in_string and len(in_string) == 1:
        in_string = None  # an unterminated one-line string does not continue
    return depth, in_string


def clean_cell(source: str) -> str | None:
    """The cell with IPython-only lines blanked; ``None`` for a cell magic cell."""
    lines = source.splitlines(keepends=True)
    first = next((ln for ln in lines if ln.strip()), "")
    if first.lstrip().startswith("%%"):
        return None
    out: list[str] = []
    continuing = False
    last_code = ""
    depth = 0  # open brackets of the Python code so far
    open_string: str | None = None  # a triple-quoted string still open
    for line in lines:
        body = line.rstrip("\r\n")
        eol = line[len(body):]
        stripped = body.strip()
        inside_python = depth > 0 or open_string is not None or last_code.rstrip().endswith("\\")
        if continuing:
            out.append(eol)
            continuing = body.endswith("\\")
        elif not inside_python and _is_ipython_line(stripped, body):
            indent = body[:len(body) - len(body.lstrip())]
            # a magic opening a block (`if x:` then `    %time f()`) becomes `pass`
            opens_block = bool(indent) and last_code.rstrip().endswith(":")
            out.append((indent + "pass" if opens_block else "") + eol)
            if opens_block:
                last_code = indent + "pass"
            continuing = body.endswith("\\")
        else:
            out.append(line)
            continuing = False
            d, open_string = _bracket_delta(body, open_string)
            depth = max(0, depth + d)
            if stripped and not stripped.startswith("#"):
                last_code = body
    return "".join(out)


def _source_text(src: Any, where: str) -> str:
    if isinstance(src, str):
        return src
    if isinstance(src, list) and all(isinstance(s, str) for s in src):
        return "".join(src)
    raise ValueError(f"invalid notebook: {where} 'source' is neither a string nor a list of strings")


def _is_python(nb: dict[str, Any]) -> bool:
    meta = nb.get("metadata")
    if not isinstance(meta, dict):
        return True
    lang = None
    info = meta.get("language_info")
    if isinstance(info, dict):
        lang = info.get("name")
    if lang is None:
        ks = meta.get("kernelspec")
        if isinstance(ks, dict):
            lang = ks.get("language")
    return lang is None or str(lang).lower() in ("python", "python3", "ipython", "ipython3")


def code_cells(text: str) -> list[tuple[int, str]]:
    """``[(cell_number, python_source), ...]`` for the code cells of a notebook.

    Raises :class:`ValueError` with a one-line reason when ``text`` is not a
    notebook.  A notebook whose kernel is not Python has no code cells here.
    """
    if not text.strip():
        raise ValueError("invalid notebook: the file is empty")
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid notebook JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise ValueError("invalid notebook: its JSON is nested too deeply to read") from None
    except MemoryError:
        raise ValueError("invalid notebook: its JSON does not fit in memory") from None
    if not isinstance(nb, dict):
        raise ValueError("invalid notebook: the top level is not a JSON object")
    cells = nb.get("cells")
    if cells is None and isinstance(nb.get("worksheets"), list):  # nbformat 3
        cells = [c for ws in nb["worksheets"] if isinstance(ws, dict) for c in ws.get("cells", [])]
    if not isinstance(cells, list):
        raise ValueError("invalid notebook: no 'cells' list")
    if not _is_python(nb):
        return []
    out: list[tuple[int, str]] = []
    for i, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            raise ValueError(f"invalid notebook: cell {i} is not a JSON object")
        if cell.get("cell_type") != "code":
            continue
        if "source" in cell:
            src = _source_text(cell["source"], f"cell {i}")
        else:
            src = _source_text(cell.get("input", ""), f"cell {i}")  # nbformat 3
        cleaned = clean_cell(src)
        if cleaned is None:
            continue
        out.append((i, cleaned))
    return out
