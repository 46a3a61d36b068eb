"""Mixed tabs and spaces that CPython accepts are parsed (issue 20): libcst refuses some of them
(an inner block indented ``8 spaces + tab`` under a block indented with a tab), so the indentation
is rewritten with spaces before libcst sees it, and columns are mapped back."""
from __future__ import annotations

import ast
import itertools

import pytest

from tfpar_lint import deep
from tfpar_lint.engine import AnalysisOptions, lint_source

UNITS = ["\t", " ", "    ", "        ", "\t ", " \t", "  \t", "\t\t", "        \t"]
SHAPES = [
    "if x:\n{a}if y:\n{a}{b}z = 1\n{c}w = 2\n",
    "def f():\n{a}if y:\n{b}z = 1\n{a}return 2\n",
    "class A:\n{a}def f(self):\n{b}return 1\n{c}def g(self):\n{b}return 2\n",
    "def f():\n{a}if y:\n{b}z = '''a\n{c}b'''\n{a}return 2\n",
]


def test_every_mix_python_accepts_parses_to_the_same_program():
    accepted = normalised = 0
    for a, b, c in itertools.product(UNITS, repeat=3):
        for shape in SHAPES:
            src = shape.format(a=a, b=b, c=c)
            try:
                want = ast.dump(ast.parse(src))
            except SyntaxError:
                continue
            accepted += 1
            tree, _opaque, fixed = deep.parse(src)
            if fixed is not None:
                normalised += 1
                assert ast.dump(ast.parse(fixed.text)) == want, src  # the same statements
                # strings keep their text: only indentation of lines that start a token changed
                assert fixed.text.count("'''") == src.count("'''")
            else:
                assert tree.code == src
    assert accepted > 300 and normalised > 40, (accepted, normalised)  # the mixes libcst refuses or rewrites


def test_a_mix_python_refuses_is_python_s_error():
    src = "if x:\n\ty = 1\n        z = 2\n"
    with pytest.raises(deep.PythonRejects):
        deep.parse(src)


TFP101_TABS = ('import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\ndef f():\n\tif True:\n'
               '        \tmodel = tf.keras.Sequential()\n        \twith strategy.scope():\n'
               '        \t\tmodel.compile(loss="mse")\n\treturn 2\n')


def test_findings_on_a_normalised_file_keep_the_file_s_columns():
    res = lint_source(TFP101_TABS, "<stdin>", options=AnalysisOptions())
    assert res.error is None, res.error
    [f] = res.findings
    line = TFP101_TABS.splitlines()[f.line - 1]
    assert (f.code, f.line) == ("TFP101", 5)
    assert line[f.col - 1:f.end_col - 1] == "tf.keras.Sequential()"
    assert f.fix is None


def test_normalised_column_mapping():
    fixed = deep.normalise_indentation("if x:\n\t  y = 1\n")
    assert fixed is not None and fixed.text == "if x:\n          y = 1\n"
    assert fixed.indents == {2: (3, 10)}
    assert fixed.column(2, 11) == 4 and fixed.column(2, 15) == 8 and fixed.column(1, 3) == 3
