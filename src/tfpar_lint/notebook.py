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
* automagics: a line that IPython runs as a line magic without its ``%`` (``pip install x``,
  ``cd data``, ``env FOO=1``, ``tensorflow_version 1.x``), by IPython's rule: a magic's name followed by
  neither an assignment (``history = model.fit(x, y,``), a call nor an operator, and not valid
  Python as it stands; only when the cell does not parse with the line kept (IPython itself runs
  automagic only in one-line cells);
* a cell magic whose body is Python (``%%time``, ``%%timeit``, ``%%capture``, ``%%prun``,
  ``%%debug``, ``%%python``, ``%%python3``, ``%%pypy``): its line is blanked and the rest of the
  cell is linted, as ruff does; any other cell magic (``%%bash``, ``%%writefile``...) means the
  cell is not Python here: the whole cell is left out.

As IPython does first, the first line's indentation and the prompts of a pasted session
(``>>> ``, ``In [3]: ``) are removed.

A magic is masked wherever it stands: alone in a block whose header ends with a comment
(``if 'google.colab' in sys.modules:  # Colab only`` then ``%tensorflow_version 1.x``) it
becomes ``pass``.
"""
from __future__ import annotations

import ast
import builtins
import json
import keyword
import re
from typing import Any

_ASSIGN_MAGIC = re.compile(r"^\s*[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*(?:%|!(?!=))")
_HELP = re.compile(r"^\s*(\?\??[\w.]+|[\w.]+\?\??)\s*$")


# Cell magics whose body IPython runs as Python (ruff lints these cells with the magic masked).
TRANSPARENT_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy"})
# IPython's line magics (and Colab's), which automagic runs without their ``%``.
LINE_MAGICS = frozenset("""
alias alias_magic autoawait autocall automagic autoreload autosave bookmark cat cd clear colors conda config
connect_info cp debug dhist dirs doctest_mode ed edit env gui hist history killbgscripts ldir less lf lk ll load
load_ext loadpy logoff logon logstart logstate logstop ls lsmagic lx macro magic mamba man matplotlib micromamba
mkdir more mv notebook page pastebin pdb pdef pdoc pfile pinfo pinfo2 pip popd pprint precision prun psearch
psource pushd pwd pycat pylab qtconsole quickref recall rehashx reload_ext rep rerun reset reset_selective rm rmdir
run save sc set_env shell store sx system tb tensorflow_version time timeit unalias unload_ext uv who who_ls whos
xdel xmode
""".split())
# IPython's split of an unescaped line (IPython.core.splitinput.line_split): the "function part"
# (names, dots, ``*``, up to two leading ``%``), then the rest.
_LINE_SPLIT = re.compile(r"^\s*(%{0,2}[\w.*]*)(.*)$", re.S)
# What follows a magic's name on a line that is Python all the same: IPython's AssignmentChecker (``=``
# or ``,``: ``history = model.fit(...``, ``hist, acc = ...``), and, for a statement that goes on over
# lines (never an automagic: IPython runs automagic in one-line cells only), a call, an index, an
# annotation, an augmented assignment or a comparison.  A path (``ls ./data``, ``cd /content``), a
# glob (``ls *.py``) or a redirection stays a magic's argument.
_PYTHON_AFTER_NAME = re.compile(r"[=,(\[:]|(?:[-+*/%@&|^!]|\*\*|//|<<|>>)=")


def _automagic_candidate(stripped: str) -> bool:
    """IPython's rule for a line that automagic may run as a line magic (``pip install x``, ``cd data``,
    ``env FOO=1``): its function part is exactly a magic's name (``history.append(x)``'s is not), that
    name is not a keyword or a builtin (``is_shadowed``), and what follows does not make the line an
    assignment, a call or an operation."""
    m = _LINE_SPLIT.match(stripped)
    if m is None or m.group(1) not in LINE_MAGICS:
        return False
    name = m.group(1)
    if keyword.iskeyword(name) or hasattr(builtins, name):
        return False
    rest = m.group(2).lstrip()
    return _PYTHON_AFTER_NAME.match(rest) is None


def _is_automagic(stripped: str) -> bool:
    """``pip install x``: an automagic candidate that is not Python as it stands (``ls`` alone is)."""
    if not _automagic_candidate(stripped):
        return False
    try:
        compile(stripped, "<line>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return True
    return False


def _is_ipython_line(stripped: str, line: str, automagic: bool = True) -> bool:
    if not stripped:
        return False
    if stripped[0] in "%!?":
        return True
    if _HELP.match(line):
        return True
    if ("%" in stripped or "!" in stripped) and _ASSIGN_MAGIC.match(line):
        return True  # `files = !ls`, `t = %time f()`
    return automagic and _is_automagic(stripped)


def _code_part(line: str) -> str:
    """``line`` without its comment (a ``#`` outside strings), right-stripped."""
    if "#" not in line:
        return line.rstrip()
    i, n, quote = 0, len(line), None
    while i < n:
        c = line[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if line.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
        elif c == "#":
            return line[:i].rstrip()
        elif c in "\"'":
            quote = line[i:i + 3] if line[i:i + 3] in ('"""', "'''") else c
            i += len(quote)
            continue
        i += 1
    return line.rstrip()


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
    """The cell with IPython-only lines blanked; ``None`` for a cell whose cell magic's body is not
    Python (``%%bash``, ``%%writefile``).

    IPython runs automagic only in a cell of one line (``InteractiveShell.transform_cell`` runs its
    prefilter only then); in a longer cell such a line is a syntax error for IPython too.  So an
    automagic line is blanked only when the cell does not parse with it kept: a cell that IPython runs
    as Python is never changed by this."""
    lines = _cleanup(source.splitlines(keepends=True))
    # the cell magics that open the cell: `%%time` then `%%bash` runs the bash cell under %%time
    magic_lines: set[int] = set()
    k = next((k for k, ln in enumerate(lines) if ln.strip()), None)
    while k is not None and lines[k].lstrip().startswith("%%"):
        name = lines[k].lstrip()[2:].split(None, 1)
        if not name or name[0] not in TRANSPARENT_CELL_MAGICS:
            return None
        magic_lines.add(k)
        k = next((j for j in range(k + 1, len(lines)) if lines[j].strip()), None)
    cleaned, automagics = _clean_lines(lines, magic_lines, automagic=True)
    if automagics:
        as_python, _ = _clean_lines(lines, magic_lines, automagic=False)
        if _parses(as_python):
            return as_python
    return cleaned


# IPython's prompts, which it strips from a pasted cell (inputtransformer2.classic_prompt, ipython_prompt).
_CLASSIC_PROMPT = (re.compile(r"^(>>>|\.\.\.)( |$)"), re.compile(r"^>>>( |$)"))
_IPYTHON_PROMPT = (re.compile(r"^(In \[\d+\]: |\s*\.{3,}: ?)"),) * 2


def _cleanup(lines: list[str]) -> list[str]:
    """IPython's clean-up of a cell before anything else (inputtransformer2's cleanup_transforms, as
    IPython 7 and 8 run them): the first line's indentation is removed from each line that starts with
    it (a cell pasted with its indentation), then the
    prompts of a pasted session (``>>> ``, ``... ``, ``In [3]: ``, ``   ...: ``) when its first line, or
    its second, has one.  The lines stay where they are; such a line's columns are counted without
    what was removed."""
    first = next((k for k, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return lines
    head, body = lines[:first], lines[first:]
    indent = body[0][:len(body[0]) - len(body[0].lstrip(" \t"))]
    if indent:
        body = [ln[len(indent):] if ln.startswith(indent) else ln for ln in body]
    for prompt, initial in (_CLASSIC_PROMPT, _IPYTHON_PROMPT):
        if initial.match(body[0]) or (len(body) > 1 and prompt.match(body[1])):
            body = [prompt.sub("", ln, count=1) for ln in body]
    return head + body


def _parses(code: str) -> bool:
    """Whether IPython's compiler accepts ``code`` (top-level ``await`` included)."""
    try:
        compile(code, "<cell>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _clean_lines(lines: list[str], cell_magic_lines: set[int], automagic: bool) -> tuple[str, bool]:
    """The cell's lines with the IPython ones blanked (automagics too when ``automagic``), and whether
    an automagic line was blanked."""
    out: list[str] = []
    continuing = False
    masked_automagic = False
    last_code = ""
    depth = 0  # open brackets of the Python code so far
    open_string: str | None = None  # a triple-quoted string still open
    for k, line in enumerate(lines):
        body = line.rstrip("\r\n")
        eol = line[len(body):]
        stripped = body.strip()
        if k in cell_magic_lines:
            out.append(eol)  # the transparent cell magic's line (`%%time`, `%%timeit x = f()`)
            continuing = body.endswith("\\")
            continue
        inside_python = depth > 0 or open_string is not None or last_code.rstrip().endswith("\\")
        if continuing:
            out.append(eol)
            continuing = body.endswith("\\")
        elif not inside_python and _is_ipython_line(stripped, body, automagic):
            if not _is_ipython_line(stripped, body, automagic=False):
                masked_automagic = True
            indent = body[:len(body) - len(body.lstrip())]
            # a magic opening a block (`if x:` then `    %time f()`) becomes `pass`
            opens_block = bool(indent) and _code_part(last_code).endswith(":")
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
    return "".join(out), masked_automagic


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


# -- positions in the .ipynb file -------------------------------------------------
#
# Findings in a notebook are counted in cell lines (``path:cell_N:line:col``);
# SARIF viewers and GitHub annotations show the ``.ipynb`` file itself, so
# they need the place in the JSON text.  A small scanner finds the string
# literals of each code cell's ``source`` (its character offsets in the file),
# and a cell position is mapped through them, escapes (``\"``, ``\n``,
# ``\uXXXX``) included.

_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|([{}\[\],:])|([^\s{}\[\],:"]+))', re.S)


def source_literals(text: str) -> dict[int, list[tuple[int, str]]]:
    """cell number (1-based, all cells) -> ``[(offset of the opening quote, raw literal), ...]``
    of its ``source`` string(s), for an nbformat 4 notebook; {} when the text is not one."""
    out: dict[int, list[tuple[int, str]]] = {}
    stack: list[list[Any]] = []  # [kind, key or index, expecting a key]
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            break
        pos = m.end()
        string, punct = m.group(1), m.group(2)
        top = stack[-1] if stack else None
        if punct is None:
            if string is not None and top is not None and top[0] == "obj" and top[2]:
                try:
                    top[1] = json.loads(string)
                except ValueError:
                    return {}
                top[2] = False
                continue
            if string is not None and len(stack) in (3, 4):
                path = [f[1] for f in stack]
                if path[0] == "cells" and isinstance(path[1], int) and path[2] == "source":
                    out.setdefault(path[1] + 1, []).append((m.start(1), string))
            continue
        if punct == "{":
            stack.append(["obj", None, True])
        elif punct == "[":
            stack.append(["arr", 0, False])
        elif punct in "}]":
            if stack:
                stack.pop()
        elif punct == ",":
            if top is not None:
                if top[0] == "obj":
                    top[2] = True
                else:
                    top[1] += 1
    return out


def _raw_offset(raw: str, index: int) -> int:
    """Offset in the literal ``raw`` (quotes included) of its decoded character ``index``."""
    i, k = 1, 0
    end = len(raw) - 1
    while k < index and i < end:
        if raw[i] == "\\":
            if raw[i + 1] == "u":
                code = int(raw[i + 2:i + 6], 16)
                i += 6
                if 0xD800 <= code < 0xDC00 and raw.startswith("\\u", i):
                    i += 6  # a surrogate pair is one character
            else:
                i += 2
        else:
            i += 1
        k += 1
    return min(i, end)


class NotebookPositions:
    """Maps ``(cell, line, col)`` of a notebook's code to ``(line, col)`` in its JSON text (1-based)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.literals = source_literals(text)
        self._line_starts: list[int] | None = None
        self._cells: dict[int, tuple[list[int], list[int]]] = {}

    def _cell(self, cell: int) -> tuple[list[int], list[int]] | None:
        if cell not in self._cells:
            lits = self.literals.get(cell)
            if not lits:
                return None
            cum, line_starts, pos = [], [0], 0
            for _off, raw in lits:
                cum.append(pos)
                piece = json.loads(raw)
                for j, ch in enumerate(piece):
                    if ch == "\n":
                        line_starts.append(pos + j + 1)
                pos += len(piece)
            cum.append(pos)
            self._cells[cell] = (cum, line_starts)
        return self._cells[cell]

    def position(self, cell: int, line: int, col: int) -> tuple[int, int] | None:
        import bisect

        data = self._cell(cell)
        if data is None:
            return None
        cum, cell_lines = data
        if not 1 <= line <= len(cell_lines):
            return None
        index = min(cell_lines[line - 1] + max(col - 1, 0), max(cum[-1] - 1, 0))
        k = max(0, min(bisect.bisect_right(cum, index) - 1, len(self.literals[cell]) - 1))
        off, raw = self.literals[cell][k]
        at = off + _raw_offset(raw, index - cum[k])
        if self._line_starts is None:
            self._line_starts = [0] + [i + 1 for i, ch in enumerate(self.text) if ch == "\n"]
        jline = bisect.bisect_right(self._line_starts, at)
        return jline, at - self._line_starts[jline - 1] + 1
