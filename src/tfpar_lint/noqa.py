"""``# noqa`` suppression comments, with flake8's exact semantics.

The standalone CLI applies these itself (under flake8 the plugin reports
everything and flake8 applies its own noqa handling).  What matches flake8:

* the comment is found with flake8's ``NOQA_INLINE_REGEXP`` (``# noqa``,
  ``# NOQA:TFP101``, ``# noqa: TFP101,TFP2``...), searched in the text of the
  whole *logical* line, so a ``# noqa`` anywhere in a statement that spans
  several physical lines covers every line of it (flake8's
  ``FileProcessor._noqa_line_mapping``, built with :mod:`tokenize`);
* a bare ``# noqa`` suppresses every code; ``# noqa: X`` suppresses a code
  equal to, or starting with, one of the listed codes (so ``TFP1`` covers
  ``TFP101``); listed codes are case-sensitive, like flake8's;
* a line that starts with ``# flake8: noqa`` turns off the whole file.

What tfpar-lint adds: the list may also name rules by their kebab-case name
(``# noqa: model-created-outside-strategy-scope``; flake8 itself only
understands codes there, so keep codes in files that flake8 also checks), and
``# tfpar-lint: noqa`` on its own line turns off the whole file for this tool
only.  Source that :mod:`tokenize` cannot read falls back to one line per
physical line instead of crashing.
"""
from __future__ import annotations

import io
import re
import tokenize
from typing import Optional

# Identical to flake8.defaults.NOQA_INLINE_REGEXP.
NOQA_INLINE_REGEXP = re.compile(
    r"# noqa(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?",
    re.IGNORECASE,
)
# flake8's regex extended with kebab-case rule names (at least one hyphen, so
# that a plain English word after ``# noqa:`` is not taken as a name).
_NAME = r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+"
NOQA_INLINE_WITH_NAMES = re.compile(
    r"# noqa(?::[\s]?(?P<codes>((?:[A-Z]+[0-9]+|" + _NAME + r")(?:[,\s]+)?)+))?",
    re.IGNORECASE,
)
# Identical to flake8.defaults.NOQA_FILE (used with ``.match``: the comment must start the line).
NOQA_FILE = re.compile(r"\s*# flake8[:=]\s*noqa", re.I)
NOQA_FILE_OWN = re.compile(r"\s*# tfpar-lint[:=]\s*noqa", re.I)

_SPLIT = re.compile(r"[,\s]+")


def parse_codes(codes_str: Optional[str]) -> Optional[frozenset[str]]:
    """``None`` for a bare noqa, else the listed codes/names."""
    if codes_str is None:
        return None
    return frozenset(c for c in _SPLIT.split(codes_str.strip()) if c)


class NoqaMap:
    """Which lines of one source text carry which ``# noqa`` comment."""

    def __init__(self, lines: list[str], logical: dict[int, str], file_noqa: bool) -> None:
        self._lines = lines
        self._logical = logical
        self.file_noqa = file_noqa
        self._cache: dict[int, Optional[frozenset[str]] | bool] = {}
        self._by_text: dict[int, Optional[frozenset[str]] | bool] = {}  # id(logical text) -> result

    @classmethod
    def from_source(cls, source: str) -> "NoqaMap":
        lines = source.splitlines(keepends=True)
        file_noqa = any(NOQA_FILE.match(ln) or NOQA_FILE_OWN.match(ln) for ln in lines)
        if "noqa" not in source.lower():
            return cls(lines, {}, False)
        return cls(lines, _logical_line_mapping(source, lines), file_noqa)

    def line_text(self, line: int) -> str:
        """The text searched for a noqa comment on behalf of ``line`` (1-based)."""
        text = self._logical.get(line)
        if text is None:  # like flake8: fall back to the physical line
            text = self._lines[line - 1] if 0 < line <= len(self._lines) else ""
        return text

    def _codes_for(self, line: int) -> Optional[frozenset[str]] | bool:
        """False: no noqa; None: bare noqa; else the listed codes."""
        got = self._cache.get(line, 0)
        if got != 0:
            return got  # type: ignore[return-value]
        text = self.line_text(line)
        # the lines of one logical line share its text: judged once (a statement of 10,000 lines)
        result: Optional[frozenset[str]] | bool = self._by_text.get(id(text), 0)  # type: ignore[assignment]
        if result == 0:
            if "noqa" not in text.lower():
                result = False
            else:
                m = NOQA_INLINE_WITH_NAMES.search(text)
                result = False if m is None else parse_codes(m.group("codes"))
            self._by_text[id(text)] = result
        self._cache[line] = result
        return result

    def is_suppressed(self, line: int, code: str, name: str = "") -> bool:
        if self.file_noqa:
            return True
        codes = self._codes_for(line)
        if codes is False:
            return False
        if codes is None:
            return True
        assert isinstance(codes, frozenset)
        if code in codes or code.startswith(tuple(codes)):
            return True
        return bool(name) and name in codes


# The last text's logical lines and directives: the CLI asks three times per file (suppression,
# TFP900, TFP901), and tokenizing a large file is most of what noqa costs.  Read-only results.
_LAST: dict[str, tuple[str, object]] = {}


def _remembered(kind: str, source: str, compute):
    got = _LAST.get(kind)
    if got is not None and (got[0] is source or got[0] == source):
        return got[1]
    value = compute()
    _LAST[kind] = (source, value)
    return value


def _logical_line_mapping(source: str, lines: list[str]) -> dict[int, str]:
    """flake8's ``_noqa_line_mapping``: line number -> text of its logical line (``lines`` are
    ``source``'s, with their ends; the answer is shared: do not change it).

    On untokenizable input returns the mapping built so far (the remaining
    lines then fall back to their physical line in :meth:`NoqaMap.line_text`).
    """
    return _remembered("logical", source, lambda: _logical_lines(source, lines))


def _logical_lines(source: str, lines: list[str]) -> dict[int, str]:
    ret: dict[int, str] = {}
    n = len(lines)
    min_line = n + 2
    max_line = -1
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            tp = tok.type
            if tp == tokenize.ENDMARKER or tp == tokenize.DEDENT:
                continue
            s_line, e_line = tok.start[0], tok.end[0]
            min_line = min(min_line, s_line)
            max_line = max(max_line, e_line)
            if tp in (tokenize.NL, tokenize.NEWLINE):
                joined = "".join(lines[min_line - 1:max_line])
                for ln in range(min_line, max_line + 1):
                    ret[ln] = joined
                min_line = n + 2
                max_line = -1
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return ret


# -- unused-noqa (TFP900) and noqa-rule-name (TFP901) -------------------------------

_KEBAB = re.compile(_NAME + r"\Z")


class Directive:
    """One ``# noqa: ...`` comment with a code list, on physical ``line`` (1-based)."""

    def __init__(self, line: int, start: int, end: int, codes_start: int, codes: list[str],
                 covers: range) -> None:
        self.line = line
        self.start = start  # column (0-based) of '#' in the physical line
        self.end = end  # column just after the code list
        self.codes_start = codes_start
        self.codes = codes
        self.covers = covers  # the lines of its logical line


def directives(source: str) -> list[Directive]:
    """Every ``# noqa: CODES`` comment (bare ``# noqa`` is left out: it may serve other tools)."""
    if not re.search("noqa", source, re.IGNORECASE):
        return []
    return list(_remembered("directives", source, lambda: _directives(source)))


def _directives(source: str) -> list[Directive]:
    lines = source.splitlines(keepends=True)
    logical = _logical_line_mapping(source, lines)
    groups: dict[int, range] = {}
    for ln in sorted(logical):
        if ln in groups:
            continue
        text = logical[ln]
        n = text.count("\n") or 1
        span = range(ln, ln + n)
        for k in span:
            groups[k] = span
    out = []
    for i, text in enumerate(lines, start=1):
        if "noqa" not in text.lower():
            continue
        m = _comment_match(text)
        if m is None or m.group("codes") is None:
            continue
        codes = [c for c in _SPLIT.split(m.group("codes").strip()) if c]
        out.append(Directive(i, m.start(), m.end("codes"), m.start("codes"), codes,
                             groups.get(i, range(i, i + 1))))
    return out


def _comment_match(text: str) -> Optional["re.Match[str]"]:
    """The noqa match of a physical line, only where it sits in a comment (not in a string)."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        toks = []
    for tok in toks:
        if tok.type == tokenize.COMMENT:
            m = NOQA_INLINE_WITH_NAMES.search(tok.string)
            if m is None:
                return None
            off = tok.start[1]
            return NOQA_INLINE_WITH_NAMES.search(text, off)
    m = NOQA_INLINE_WITH_NAMES.search(text)  # untokenizable alone (inside a bracket): take the text
    if m is not None and "#" in text[:m.start() + 1]:
        return m
    return None


def unused_report(source: str, raw: list, kept_codes: frozenset[str], enabled: frozenset[str],
                  rules_by_code: dict, rules_by_name: dict) -> list[tuple[Directive, dict[str, list[str]]]]:
    """Directives with TFP codes/names that suppressed nothing.

    ``raw`` are the findings before noqa filtering; a code is *used* when it
    matched one of them on a line the directive covers.  Returns, per
    directive, {"unused": [...], "non-enabled": [...], "unknown": [...]}.
    Codes of other tools (``E501``, ``F401``) are never judged.
    """
    out = []
    by_line: dict[int, list] = {}
    for f in raw:
        by_line.setdefault(f.line, []).append(f)
    in_span: dict[tuple[int, int], list] = {}  # the findings on the lines a directive covers

    def covered(d: Directive) -> list:
        key = (d.covers.start, d.covers.stop)
        got = in_span.get(key)
        if got is None:
            got = in_span[key] = [f for ln in d.covers for f in by_line.get(ln, ())] \
                if len(by_line) > len(d.covers) else [f for f in raw if f.line in d.covers]
        return got

    for d in directives(source):
        judged: dict[str, list[str]] = {"unused": [], "non-enabled": [], "unknown": []}
        for c in d.codes:
            is_name = bool(_KEBAB.match(c))
            if is_name:
                if c not in rules_by_name:
                    continue  # a name of another tool's rule
                codes = {rules_by_name[c].CODE}
            elif c.startswith("TFP"):
                codes = {k for k in rules_by_code if k.startswith(c)}
            else:
                continue
            if c in ("TFP900", "unused-noqa"):
                continue
            used = any(f.code == c or f.code.startswith(c) or f.name == c for f in covered(d))
            if used:
                continue
            if not codes:
                judged["unknown"].append(c)
            elif not (codes & enabled):
                judged["non-enabled"].append(c)
            else:
                judged["unused"].append(c)
        if any(judged.values()):
            out.append((d, judged))
    return out


def name_directives(source: str, rules_by_name: dict) -> list[tuple[Directive, list[str]]]:
    """Directives that name a tfpar-lint rule by its kebab-case name (a blanket noqa for flake8)."""
    out = []
    for d in directives(source):
        names = [c for c in d.codes if _KEBAB.match(c) and c in rules_by_name]
        if names:
            out.append((d, names))
    return out


class NoqaRows:
    """Where a ``# noqa`` for a finding on a line goes: the last physical line of its logical
    line (after a bracket that closes there, never inside a multi-line string).  ruff's JSON
    calls it ``noqa_row``."""

    def __init__(self, source: str, lines: Optional[list[str]] = None) -> None:
        lines = source.splitlines(keepends=True) if lines is None else lines
        self._logical = _logical_line_mapping(source, lines)
        self._firsts: dict[int, int] = {}  # line -> the first line of its logical line
        self._lasts: dict[int, int] = {}  # first line of a logical line -> its last line

    def __call__(self, line: int) -> int:
        logical = self._logical
        text = logical.get(line)
        if text is None:
            return line
        first = line
        while first - 1 in logical and logical[first - 1] is text:
            known = self._firsts.get(first - 1)
            if known is not None:  # walked already (many findings in one long statement)
                break
            first -= 1
        else:
            known = first
        for ln in range(first, line + 1):
            self._firsts[ln] = known
        first = known
        last = self._lasts.get(first)
        if last is None:
            last = self._lasts[first] = (first + text.count("\n") - 1 if text.endswith("\n")
                                         else first + text.count("\n"))
        return max(last, line)


def add_noqa(source: str, findings: list) -> tuple[str, int]:
    """``source`` with ``# noqa: CODES`` added for ``findings`` (ruff's ``--add-noqa``).

    The comment goes at the end of the finding's logical line (:class:`NoqaRows`), merged into
    a ``# noqa: ...`` already there.  Returns the new text and the number of comments added or
    extended.
    """
    lines = source.splitlines(keepends=True)
    rows = NoqaRows(source, lines) if findings else None
    wanted: dict[int, list[str]] = {}
    for f in findings:
        if getattr(f, "cell", None) is not None or rows is None:
            continue
        codes = wanted.setdefault(rows(f.line), [])
        if f.code not in codes:
            codes.append(f.code)
    count = 0
    for ln, codes in sorted(wanted.items()):
        if not 0 < ln <= len(lines):
            continue
        raw = lines[ln - 1]
        body = raw.rstrip("\r\n")
        nl = raw[len(body):]
        m = _comment_match(body)
        if m is not None and m.group("codes") is not None:
            have = [c for c in _SPLIT.split(m.group("codes").strip()) if c]
            add = [c for c in codes if c not in have]
            if not add:
                continue
            body = body[:m.start("codes")] + ", ".join(have + add) + body[m.end("codes"):]
        elif m is not None:
            continue  # a bare noqa already covers everything
        else:
            body = body.rstrip() + "  # noqa: " + ", ".join(codes)
        lines[ln - 1] = body + nl
        count += 1
    return "".join(lines), count
