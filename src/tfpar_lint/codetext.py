"""A module's text without its comments and docstrings: what the pre-filter and the version
inference match against (text only: no tokenizer, no ``ast``)."""
from __future__ import annotations

import re

# Comments and string literals, scanned left to right like the tokenizer does
# (so a '#' inside a string is not a comment, and quotes inside a comment do
# not open a string).  Every alternative starts with '#', '"' or "'" so the
# regex engine skips ahead to those; unrolled loops keep it linear.  String
# prefixes (r, b, f, ...) are looked at by hand.
_COMMENT_OR_STRING = re.compile(r'''
  \#[^\r\n]*
| (?P<triple>"""[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*"""
           | \'\'\'[^'\\]*(?:(?:\\[\s\S]|'(?!''))[^'\\]*)*\'\'\')
| "[^"\\\r\n]*(?:\\[\s\S][^"\\\r\n]*)*"
| '[^'\\\r\n]*(?:\\[\s\S][^'\\\r\n]*)*'
''', re.X)


def code_text(source: str) -> str:
    """``source`` without comments and docstrings (returns ``source`` itself when it has none).

    A docstring here is any non-f triple-quoted string alone on its lines
    (only whitespace before it, only whitespace or a comment after it): that
    is every docstring, and otherwise only a bare string statement or a lone
    multi-line string argument, none of which a rule reads.  Short strings and
    f-strings are kept (``os.environ["TF_USE_LEGACY_KERAS"]`` and code inside
    ``{...}`` matter).  Text only: no tokenizer, no ``ast``.
    """
    if "#" not in source and '"""' not in source and "'''" not in source:
        return source
    global _LAST
    last = _LAST
    if last[0] is source:  # the pre-filter, the relevance stage and the version inference ask in turn
        return last[1]
    got = _code_text(source)
    _LAST = (source, got)
    return got


_LAST: tuple = (None, "")


def _code_text(source: str) -> str:
    parts: list[str] = []
    last = 0
    for m in _COMMENT_OR_STRING.finditer(source):
        start = m.start()
        if source[start] == "#":
            parts.append(source[last:start])
            last = m.end()
            continue
        if m.group("triple") is None:
            continue
        p = start  # the string prefix: up to two of rRbBuUfF right before the quotes
        while p > 0 and start - p < 2 and source[p - 1] in "rRbBuUfF":
            p -= 1
        if "f" in source[p:start] or "F" in source[p:start]:
            continue  # an f-string: code inside {...}
        line_start = source.rfind("\n", 0, p) + 1
        if line_start != p and not source[line_start:p].isspace():
            continue
        end = m.end()
        line_end = source.find("\n", end)
        rest = source[end:line_end if line_end >= 0 else len(source)].lstrip()
        if rest and rest[0] != "#":
            continue
        parts.append(source[last:p])
        last = end
    if not parts:
        return source
    parts.append(source[last:])
    return "".join(parts)


def bare_code(source: str) -> str:
    """``source`` without comments and without the text of its string literals (each becomes ``""``;
    f-strings are kept whole: code inside ``{...}``): the words that remain are the code's own."""
    if "#" not in source and '"' not in source and "'" not in source:
        return source
    parts: list[str] = []
    last = 0
    for m in _COMMENT_OR_STRING.finditer(source):
        start = m.start()
        if source[start] == "#":
            parts.append(source[last:start])
            last = m.end()
            continue
        p = start
        while p > 0 and start - p < 2 and source[p - 1] in "rRbBuUfF":
            p -= 1
        if "f" in source[p:start] or "F" in source[p:start]:
            continue
        parts.append(source[last:start])
        parts.append('""')
        last = m.end()
    parts.append(source[last:])
    return "".join(parts)
