"""Every rule has a page ``rules/<CODE>.md`` that agrees with the rule.

The page layout is the catalogue's (ruff-style), the same for every rule::

    # TFP101 model-outside-scope
    <one-line summary>
    ## What it does         <- ends with what it deliberately leaves alone ("Not flagged")
    ## Shapes it follows    <- how values reach the rule (helpers, classes, closures, containers...)
    ## Why is this bad?
    ## Example              <- its python code block(s) must trigger the rule
    ## Use instead          <- its python code block(s) must not
    ## Fix                  <- "**Safe fix**", "**Unsafe fix**" or "No automatic fix", as the rule's FIXABLE
    ## How --verify confirms it
    ## Options / default
    ## References

The code blocks are linted with ``lint_source(..., enabled=[code])`` and without
``# noqa`` handling, so a page cannot silence its own "Use instead" block. A rule
without a page fails: nothing here is skipped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

from tfpar_lint.engine import lint_source
from tfpar_lint.registry import all_rules, rules_by_code

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "rules"
RULES = all_rules()

HEADINGS = (
    "What it does",
    "Shapes it follows",
    "Why is this bad?",
    "Example",
    "Use instead",
    "Fix",
    "How --verify confirms it",
    "Options / default",
    "References",
)
PYTHON_INFO = ("python", "py", "python3")
# A fence may be indented (inside a list item): group 1 is the fence, group 2 the info string.
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([^\s`]*)")


@dataclass
class Page:
    title: Optional[str] = None  # the first line, without "# "
    summary: Optional[str] = None  # the first text line after the title
    h1_count: int = 0
    sections: list[tuple[str, str]] = field(default_factory=list)  # (heading, body text)
    unclosed_fence: bool = False

    def body(self, heading: str) -> str:
        return next((b for h, b in self.sections if h == heading), "")


def parse_page(text: str) -> Page:
    """Split a page into title, summary and ``## `` sections; headings inside code fences are not headings."""
    page = Page()
    fence: Optional[str] = None
    current: Optional[list[str]] = None
    lines = text.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2):
                fence = None
        elif m:
            fence = m.group(1)
        elif line.startswith("# "):
            page.h1_count += 1
            if i == first:
                page.title = line[2:].strip()
            continue
        elif line.startswith("## "):
            current = []
            page.sections.append((line[3:].strip(), ""))
            continue
        if current is not None:
            current.append(line)
            page.sections[-1] = (page.sections[-1][0], "\n".join(current))
        elif page.summary is None and page.title is not None and line.strip():
            page.summary = line.strip()
    page.unclosed_fence = fence is not None
    return page


def python_blocks(body: str) -> list[str]:
    """The fenced code blocks of a section whose info string says Python."""
    blocks: list[str] = []
    fence: Optional[str] = None
    lang = ""
    indent = 0
    buf: list[str] = []
    for line in body.splitlines():
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence, lang, buf = m.group(1), m.group(2).lower(), []
                indent = len(line) - len(line.lstrip())
            continue
        if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2):
            if lang in PYTHON_INFO:
                blocks.append("\n".join(buf) + "\n")
            fence = None
            continue
        # CommonMark: drop up to the opening fence's indentation from each line
        strip = min(indent, len(line) - len(line.lstrip(" ")))
        buf.append(line[strip:])
    return blocks


def _lint(code: str, source: str, where: str) -> tuple[list[str], list[str]]:
    """(lines of `code`'s findings, problems) for one block."""
    rule = rules_by_code().get(code)
    # the noqa rules (TFP9xx) judge the `# noqa` comments: they need noqa handling on
    text_only = bool(getattr(rule, "TEXT_ONLY", False))
    result = lint_source(source, path=f"rules/{code}.md ({where})", enabled=[code], apply_noqa=text_only)
    if result.error is not None:
        return [], [f"{where} block does not lint cleanly: {result.error.message}"]
    return [f"line {f.line}: {f.message}" for f in result.findings if f.code == code], []


def page_problems(code: str, name: str, text: str) -> list[str]:
    """Everything wrong with the page ``text`` of rule ``code``/``name`` (empty when it is right)."""
    problems: list[str] = []
    page = parse_page(text)
    want_title = f"{code} {name}"
    if page.title != want_title:
        problems.append(f"title line must be '# {want_title}', found {page.title!r}")
    if page.h1_count != 1:
        problems.append(f"exactly one '# ' heading expected (the title), found {page.h1_count}")
    if not page.summary or page.summary.startswith(("#", "`" * 3, "~" * 3)):
        problems.append("a one-line summary must follow the title")
    if page.unclosed_fence:
        problems.append("a code fence is never closed")
    found = tuple(h for h, _ in page.sections)
    if found != HEADINGS:
        problems.append(f"'## ' headings must be exactly {list(HEADINGS)} in this order, found {list(found)}")
    for heading, body in page.sections:
        if heading in HEADINGS and not body.strip():
            problems.append(f"section '## {heading}' is empty")
    if "not flagged" not in page.body("What it does").lower():
        problems.append("'## What it does' must say what the rule deliberately leaves alone ('Not flagged: ...')")
    bad = python_blocks(page.body("Example"))
    good = python_blocks(page.body("Use instead"))
    if not bad:
        problems.append("'## Example' has no ```python code block")
    if not good:
        problems.append("'## Use instead' has no ```python code block")
    for i, src in enumerate(bad, 1):
        hits, errs = _lint(code, src, f"Example #{i}")
        problems += errs
        if not errs and not hits:
            problems.append(f"Example block #{i} does not trigger {code}")
    for i, src in enumerate(good, 1):
        hits, errs = _lint(code, src, f"Use instead #{i}")
        problems += errs
        if hits:
            problems.append(f"Use instead block #{i} triggers {code}: {hits}")
    return problems


# ------------------------------------------------------------------ the pages


FIX_LEADS = {"safe": "**Safe fix** (`--fix`)", "unsafe": "**Unsafe fix** (`--fix --unsafe-fixes`)",
             "": "No automatic fix"}


def fix_section_problems(fixable: str, text: str) -> list[str]:
    """The '## Fix' section must open with the words that match the rule's FIXABLE."""
    body = parse_page(text).body("Fix").strip()
    want = FIX_LEADS[fixable]
    if not body.startswith(want):
        return [f"'## Fix' must start with {want!r} (the rule's FIXABLE is {fixable!r}), found {body[:40]!r}"]
    return []


@pytest.mark.parametrize("rule", RULES, ids=[r.CODE for r in RULES])
def test_rule_page_fix_section_matches_the_rule(rule):
    path = PAGES / f"{rule.CODE}.md"
    assert not fix_section_problems(rule.FIXABLE, path.read_text(encoding="utf-8")), path


def test_fix_section_checker_can_fail():
    assert fix_section_problems("safe", _page().replace("## Fix\n\nText.", "## Fix\n\nNo automatic fix."))
    assert fix_section_problems("", _page())


@pytest.mark.parametrize("rule", RULES, ids=[r.CODE for r in RULES])
def test_rule_page(rule):
    path = PAGES / f"{rule.CODE}.md"
    assert path.is_file(), f"rule {rule.CODE} ({rule.NAME}) has no page {path.relative_to(ROOT)}"
    problems = page_problems(rule.CODE, rule.NAME, path.read_text(encoding="utf-8"))
    assert not problems, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


def test_every_page_documents_a_rule():
    """No page for a code that no rule implements (a renamed or removed rule)."""
    known = rules_by_code()
    orphans = [p.name for p in sorted(PAGES.glob("TFP*.md"))
               if p.stem not in known and "(retired)" not in p.read_text().splitlines()[0]]
    assert not orphans, f"pages without a rule (a removed rule's page must say '(retired)' in its title): {orphans}"


# ------------------------------------------------------------------ the checker can fail

_BAD = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
model = tf.keras.Sequential([tf.keras.layers.Dense(1)])  # flagged
with strategy.scope():
    model.compile(optimizer="sgd", loss="mse")
"""
_GOOD = """\
import tensorflow as tf
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
"""


def _page(title="TFP101 model-outside-scope", headings=HEADINGS, bad=_BAD, good=_GOOD) -> str:
    parts = [f"# {title}", "", "A summary.", ""]
    for h in headings:
        parts += [f"## {h}", ""]
        if h == "Example":
            parts += ["```python", bad.rstrip("\n"), "```"]
        elif h == "Use instead":
            parts += ["```python", good.rstrip("\n"), "```"]
        else:
            parts += ["Text. A `## heading` in a code span is not one:", "", "```toml",
                      "## not a heading either", "```"]
            if h == "What it does":
                parts += ["", "Not flagged: anything else."]
        parts.append("")
    return "\n".join(parts)


def _problems(text: str) -> list[str]:
    return page_problems("TFP101", "model-outside-scope", text)


def test_checker_accepts_a_right_page():
    assert _problems(_page()) == []


def test_checker_reads_indented_blocks():
    """A fence inside a list item is indented; its code is dedented before linting."""
    text = _page()
    indented = "* In a list:\n\n  ```python\n" + "".join(f"  {ln}\n" for ln in _GOOD.splitlines()) + "  ```\n"
    text = text.replace("## Options / default", indented + "\n## Options / default")
    assert python_blocks(parse_page(text).body("How --verify confirms it"))[0] == _GOOD
    bad_in_list = _page(good=_GOOD).replace("```python\n" + _GOOD.rstrip("\n") + "\n```",
                                            "* fixed:\n\n  ```python\n"
                                            + "".join(f"  {ln}\n" for ln in _BAD.splitlines()) + "  ```")
    assert any("Use instead block #1 triggers TFP101" in p for p in _problems(bad_in_list))


def test_checker_rejects_swapped_examples():
    problems = _problems(_page(bad=_GOOD, good=_BAD))
    assert any("does not trigger TFP101" in p for p in problems), problems
    assert any("Use instead block #1 triggers TFP101" in p for p in problems), problems


def test_checker_ignores_noqa_in_use_instead():
    silenced = _BAD.replace("# flagged", "# noqa: TFP101")
    assert any("triggers TFP101" in p for p in _problems(_page(good=silenced)))


def test_checker_rejects_wrong_title_and_headings():
    assert any("title line" in p for p in _problems(_page(title="TFP101 model-created-outside-scope")))
    swapped = list(HEADINGS)
    swapped[2], swapped[3] = swapped[3], swapped[2]
    assert any("headings must be" in p for p in _problems(_page(headings=tuple(swapped))))
    assert any("headings must be" in p for p in _problems(_page(headings=HEADINGS[:-1])))
    backticked = tuple(h.replace("--verify", "`--verify`") for h in HEADINGS)
    assert any("headings must be" in p for p in _problems(_page(headings=backticked)))


def test_checker_rejects_missing_or_broken_code():
    no_code = _page().replace("```python", "```text")
    problems = _problems(no_code)
    assert any("'## Example' has no" in p for p in problems), problems
    assert any("'## Use instead' has no" in p for p in problems), problems
    broken = _problems(_page(good=_GOOD + "x = = 1\n"))
    assert any("does not lint cleanly" in p for p in broken), broken


def test_checker_rejects_a_page_that_does_not_say_what_it_leaves_alone():
    text = _page().replace("Not flagged: anything else.", "")
    assert any("leaves alone" in p for p in _problems(text))


def test_checker_rejects_an_empty_section():
    text = _page()
    text = text[: text.index("## References")] + "## References\n"
    assert any("'## References' is empty" in p for p in _problems(text))


def test_readme_lists_every_rule_with_its_default():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for r in all_rules():
        row = f"| [{r.CODE}](rules/{r.CODE}.md) | {r.NAME} | {'on' if r.DEFAULT_ENABLED else 'off'} |"
        assert row in readme, f"README rule table is missing or outdated for {r.CODE}: {row}"


def test_readme_rule_table_is_generated_from_the_registry():
    """README.md's table is exactly what scripts/rules_table.py makes from the registry: every rule once,
    with its page, name, default and summary, and no other row (run ``scripts/rules_table.py --write``)."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("rules_table", root / "scripts" / "rules_table.py")
    rules_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rules_table)
    readme = (root / "README.md").read_text(encoding="utf-8")
    block = rules_table.block_now(readme)
    assert block is not None, "README.md has no generated rules table"
    assert block == rules_table.table(), "README.md's rules table is stale: run scripts/rules_table.py --write"
    rows = [ln for ln in block.splitlines() if ln.startswith("| [TFP")]
    assert [ln.split("]")[0][3:] for ln in rows] == sorted(r.CODE for r in all_rules())
    for line in rows:  # each link goes to a page that exists
        page = re.search(r"\]\((rules/TFP\d{3}\.md)\)", line).group(1)
        assert (root / page).is_file(), page
