"""# noqa handling: flake8's semantics, plus rule names; and the CLI applying it."""
from __future__ import annotations

import pytest

from tfpar_lint.noqa import NOQA_INLINE_REGEXP, NoqaMap

NAME = "model-outside-scope"


def sup(src: str, line: int, code: str = "TFP101", name: str = NAME) -> bool:
    return NoqaMap.from_source(src).is_suppressed(line, code, name)


def test_regex_is_flake8s():
    flake8_defaults = pytest.importorskip("flake8.defaults")
    assert NOQA_INLINE_REGEXP.pattern == flake8_defaults.NOQA_INLINE_REGEXP.pattern
    assert NOQA_INLINE_REGEXP.flags == flake8_defaults.NOQA_INLINE_REGEXP.flags


@pytest.mark.parametrize("comment, suppressed", [
    ("# noqa", True),
    ("# NOQA", True),
    ("#noqa", False),                 # flake8 needs "# noqa"
    ("# noqa:TFP101", True),
    ("# noqa: TFP101", True),
    ("# noqa: E501,TFP101", True),
    ("# noqa: E501, TFP101", True),
    ("# noqa: E501 TFP101", True),
    ("# noqa: TFP1", True),           # prefix
    ("# noqa: TFP", True),
    ("# noqa: TFP102", False),
    ("# noqa: TFP10", True),          # flake8 matches by startswith
    ("# noqa: E501", False),
    ("# noqa: tfp101", False),        # codes are case-sensitive, as in flake8
    (f"# noqa: {NAME}", True),        # tfpar-lint extra: rule names
    (f"# noqa: E501,{NAME}", True),
    ("# noqa: optimizer-outside-scope", False),
    ("# noqa:,TFP101", True),         # flake8: regex fails at the comma -> bare noqa
    ("# type: ignore  # noqa: TFP101", True),
    ("# noqa : TFP102", True),        # flake8: "# noqa" then junk -> bare noqa
])
def test_inline_forms(comment, suppressed):
    src = f"x = 1\nmodel = build()  {comment}\n"
    assert sup(src, 2) is suppressed
    assert sup(src, 1) is False


def test_matches_flake8_decision_for_codes():
    """For code lists, our decision equals flake8's own Violation.is_inline_ignored."""
    violation = pytest.importorskip("flake8.violation")
    for comment in ["# noqa", "# noqa:TFP101", "# noqa: TFP1", "# noqa: E1,W2", "# noqa: TFP102 TFP1",
                    "# noqa:", "# noqa: tfp101", "#noqa", "# NoQA: TFP101,E501"]:
        line = f"model = build()  {comment}\n"
        v = violation.Violation("TFP101", "f.py", 1, 1, "msg", line)
        assert sup(line, 1) is v.is_inline_ignored(False), comment


def test_backslash_continuation_covers_every_line():
    src = (
        "import tensorflow as tf\n"
        "model = \\\n"                                  # 2: finding reported here
        "    tf.keras.Sequential([])  # noqa: TFP101\n"
        "other = 1\n"
    )
    assert sup(src, 2) and sup(src, 3)
    assert not sup(src, 1) and not sup(src, 4)


def test_bracketed_continuation_is_per_physical_line_like_flake8():
    """flake8 (3.8+, still 7.x) joins lines across one token (multi-line strings) and backslash
    continuations only; inside brackets each line ends with an NL token and stands alone."""
    src = (
        "model = tf.keras.Sequential(\n"
        "    [tf.keras.layers.Dense(1)],\n"
        ")  # noqa: TFP101\n"
    )
    assert sup(src, 3)
    assert not sup(src, 1) and not sup(src, 2)


SOURCES = [
    "x = 1  # noqa\ny = 2\n",
    'a = """\nb\n"""  # noqa: E1\nc = 1\n',
    "a = 1 + \\\n    2  # noqa\nb = 3\n",
    "f(\n  1,  # noqa: TFP1\n  2)\n",
    "def f():\n    return '''\n    x'''  # noqa\n\n\nclass A:\n    pass\n",
    "if x:\n    y = f'{a!r}' \\\n        'b'  # noqa: X1\n",
    "x = 1",
]


@pytest.mark.parametrize("src", SOURCES)
def test_line_mapping_equals_flake8s(tmp_path, src):
    """Differential test against flake8's own FileProcessor._noqa_line_mapping."""
    processor = pytest.importorskip("flake8.processor")
    import argparse

    f = tmp_path / "m.py"
    f.write_text(src)
    opts = argparse.Namespace(hang_closing=False, indent_size=4, max_line_length=79, max_doc_length=None,
                              verbose=0, stdin_display_name="stdin", disable_noqa=False)
    theirs = processor.FileProcessor(str(f), opts)
    ours = NoqaMap.from_source(src)
    physical = src.splitlines(keepends=True)
    for line in range(1, len(physical) + 1):
        expected = theirs.noqa_line_for(line)
        if expected is None:  # flake8 then reads the physical line
            expected = physical[line - 1]
        assert ours.line_text(line) == expected, line


def test_triple_quoted_string_spans():
    src = 'x = """\nline\n"""  # noqa\ny = 2\n'
    assert sup(src, 1) and sup(src, 2) and sup(src, 3)
    assert not sup(src, 4)


def test_file_level_flake8_noqa():
    src = "# flake8: noqa\nmodel = build()\n"
    assert sup(src, 2)
    assert sup("# tfpar-lint: noqa\nmodel = build()\n", 2)
    assert not sup("x = 1  # flake8: noqa\nmodel = build()\n", 2)  # must start the line


def test_untokenizable_input_falls_back_to_physical_lines():
    src = "model = build(  # noqa: TFP101\nother = 1\n'''unterminated\n"
    m = NoqaMap.from_source(src)
    assert m.is_suppressed(1, "TFP101", NAME)
    assert not m.is_suppressed(2, "TFP101", NAME)
    assert not m.is_suppressed(99, "TFP101", NAME)  # out of range: no crash
    for bad in ["\x00\x01 # noqa", "if x:\n  y\n z # noqa\n", "(\n" * 200, ""]:
        NoqaMap.from_source(bad).is_suppressed(1, "TFP101", NAME)


def test_noqa_with_no_comments_is_cheap():
    m = NoqaMap.from_source("x = 1\n" * 1000)
    assert not m.is_suppressed(10, "TFP101", NAME)


# -- through the CLI --------------------------------------------------------------------

@pytest.mark.parametrize("comment, found", [
    ("", True),
    ("  # noqa", False),
    ("  # noqa: TFP101", False),
    ("  # noqa: TFP1", False),
    (f"  # noqa: {NAME}", False),
    ("  # noqa: TFP2", True),
])
def test_cli_honours_noqa(project, cli, snippets, comment, found):
    lines = snippets.tfp101.splitlines()
    lines[2] += comment
    project.write("a.py", "\n".join(lines) + "\n")
    r = cli("a.py")
    assert (" TFP101 " in r.out) is found, r.out
    if comment == f"  # noqa: {NAME}":  # honoured, and TFP901 says flake8 would read it as a bare noqa
        assert "TFP901" in r.out and r.rc == 1
    else:
        assert (r.rc == 1) is found, r.out


def test_cli_noqa_after_multiline_string_covers_statement_start(project, cli):
    # The finding is on line 3 (the call); the comment can only follow the string on line 4.
    src = (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MirroredStrategy()\n"
        'model = tf.keras.Sequential([tf.keras.layers.Dense(1)], name="""m\n'
        '""")  # noqa: TFP101\n'
        "with strategy.scope():\n"
        "    model.compile(optimizer='sgd', loss='mse')\n"
    )
    project.write("a.py", src)
    assert cli("a.py").rc == 0
    project.write("b.py", src.replace("  # noqa: TFP101", ""))
    r = cli("b.py")
    assert r.rc == 1 and r.lines[0].startswith("b.py:3:9: TFP101"), r.out
