"""Notebook code cells and notebook positions in the CLI's output."""
from __future__ import annotations

import ast
import json

import pytest

from tfpar_lint.notebook import clean_cell, code_cells


def test_code_cells_numbers_count_all_cells(notebook):
    text = notebook([("markdown", "# hi\n"), ("code", "a = 1\n"), ("raw", "x"), ("code", "b = 2")])
    assert code_cells(text) == [(2, "a = 1\n"), (4, "b = 2")]


def test_source_as_string_or_list():
    nb = {"cells": [{"cell_type": "code", "source": "a = 1\nb = 2"},
                    {"cell_type": "code", "source": ["c = 1\n", "d = 2"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    assert code_cells(json.dumps(nb)) == [(1, "a = 1\nb = 2"), (2, "c = 1\nd = 2")]


@pytest.mark.parametrize("src, expected", [
    ("%matplotlib inline\nimport tensorflow as tf\n", "\nimport tensorflow as tf\n"),
    ("!pip install x\nx = 1\n", "\nx = 1\n"),
    ("  !ls\nx = 1\n", "\nx = 1\n"),
    ("files = !ls\nx = 1\n", "\nx = 1\n"),
    ("t = %time f()\nx = 1\n", "\nx = 1\n"),
    ("tf.function?\nx = 1\n", "\nx = 1\n"),
    ("??tf.function\nx = 1\n", "\nx = 1\n"),
    ("%pip install \\\n   tensorflow\nx = 1\n", "\n\nx = 1\n"),
    ("x = a != b\ny = a % b\n", "x = a != b\ny = a % b\n"),
    ("if x:\n    %time f()\n", "if x:\n    pass\n"),
    ("x = 1", "x = 1"),
    # a magic alone in a block whose header ends with a comment (issue 20)
    ("if 'google.colab' in sys.modules:  # Colab only\n  %tensorflow_version 1.x\nx = 1\n",
     "if 'google.colab' in sys.modules:  # Colab only\n  pass\nx = 1\n"),
    ("if x:  # '#' in a comment \"\n    !pip install a\nelse:  # b\n    cd data\n",
     "if x:  # '#' in a comment \"\n    pass\nelse:  # b\n    pass\n"),
    ("if s == '#':\n    %time f()\n", "if s == '#':\n    pass\n"),
    # automagics: a line magic without its %, when the line is not Python as written
    ("pip install -q tensorflow==2.4\n", "\n"),
    ("conda install -y numpy\nx = 1\n", "\nx = 1\n"),
    ("ls\nenv = {}\npip = 3\n", "ls\nenv = {}\npip = 3\n"),
    ("env FOO=1\n", "\n"),
    ("time f()\n", "\n"),
    ("cd data\nx = 1\n", "\nx = 1\n"),
    ("if x:\n    pip install a\nx = 1\n", "if x:\n    pass\nx = 1\n"),
    ("cd ../\n", "\n"),
    ("ls ./data/train/\n", "\n"),
    ("cd ~/data\nx = 1\n", "\nx = 1\n"),
    ("ls *.py\n", "\n"),
])
def test_magics_blanked_keeping_line_numbers(src, expected):
    out = clean_cell(src)
    assert out == expected
    assert out.count("\n") == src.count("\n")


# Statements that start with a magic's name and go on over several lines: IPython runs them as Python
# (an assignment, a call, an operation, an attribute or an index after the name; and no automagic at all
# in a cell of several lines), so the cell is left as it is.
@pytest.mark.parametrize("src", [
    "history = model.fit(x, y,\n                    epochs=3)\n",
    "run = wandb.init(\n    project='p')\n",
    "config = tf.estimator.RunConfig(\n    train_distribute=strategy)\n",
    "hist = model.fit(\n    ds)\nenv = dict(\n  a=1)\ncolors = [\n  'r']\n",
    "hist, acc = (\n    1, 2)\n",
    "run(main,\n    argv)\n",
    "history.history['loss'][\n    0]\n",
    "time [\n    1]\n",
    "env != (\n    3)\n",
    "history += [\n    1]\n",
    "history: dict = dict(\n    a=1)\n",
    "cd = 1\nif cd:\n    history = fit(\n        x)\n",
    "ls\nx = 1\n",  # a magic's name that is Python as written (a name): IPython runs the cell as Python
    "async def f():\n    pass\nrun = await f(\n)\n",  # top-level await (IPython's autoawait)
])
def test_python_that_starts_with_a_magic_name_is_kept(src):
    assert clean_cell(src) == src
    compile(clean_cell(src), "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


@pytest.mark.parametrize("src, expected", [
    # the cell does not parse with the automagic line kept: it is blanked, the rest stays
    ("pip install x\nhistory = model.fit(x,\n    y)\n", "\nhistory = model.fit(x,\n    y)\n"),
    ("history = model.fit(x,\n    y)\nenv TF_CONFIG={}\n", "history = model.fit(x,\n    y)\n\n"),
])
def test_automagic_blanked_beside_multiline_python(src, expected):
    assert clean_cell(src) == expected


@pytest.mark.parametrize("src, expected", [
    # IPython removes the indentation common to the cell's lines, and a pasted session's prompts
    ("  with s.scope():\n      m = f()\n  ", "with s.scope():\n    m = f()\n"),
    ("\n    x = 1\n    y = (2,\n      3)\n", "\nx = 1\ny = (2,\n  3)\n"),
    (">>> x = 1\n>>> if x:\n...     y = 2\n", "x = 1\nif x:\n    y = 2\n"),
    ("x = 1\ny = 2\n>>> z = 3\n", "x = 1\ny = 2\n>>> z = 3\n"),  # no prompt on line 1 or 2: left as it is
    (" x = (1,\n2)\n", "x = (1,\n2)\n"),  # lines without the first line's indentation stay
    ("In [3]: x = (1,\n   ...: 2)\n", "x = (1,\n2)\n"),
    ("  pip install x\n  history = model.fit(x,\n      y)\n", "\nhistory = model.fit(x,\n    y)\n"),
])
def test_ipython_cleanup_of_pasted_cells(src, expected):
    out = clean_cell(src)
    assert out == expected
    assert out.count("\n") == src.count("\n")
    if ">>>" not in expected:
        compile(out, "<cell>", "exec")


def test_cell_magic_of_another_language_skips_the_whole_cell(notebook):
    assert clean_cell("%%bash\necho hi\n") is None
    assert clean_cell("%%time\n%%bash\npython3 x.py \\\n  --a 1\n") is None  # bash, timed
    assert clean_cell("%%time\n%%capture\nx = 1\n") == "\n\nx = 1\n"
    text = notebook([("code", "%%writefile x.py\nimport tensorflow\n"), ("code", "y = 1\n")])
    assert code_cells(text) == [(2, "y = 1\n")]


@pytest.mark.parametrize("magic", ["%%time", "%%timeit -n 3 y = 2", "%%capture out", "%%prun", "%%python3"])
def test_python_cell_magics_are_masked_and_the_cell_linted(magic):
    src = f"\n{magic}\nx = 1\nif x:\n    %time f()\n"
    assert clean_cell(src) == "\n\nx = 1\nif x:\n    pass\n"


def test_cli_lints_cells_under_cell_magics_and_automagics(project, cli, notebook):
    """The TFP101 program split over cells that start with %%time / %%capture and a `pip install`
    cell: the finding is reported at its cell line, and nothing else (no E999)."""
    text = notebook([
        ("code", "pip install -q tensorflow\n"),
        ("code", "%%capture\nimport sys\nimport tensorflow as tf\n"
                 "if 'google.colab' in sys.modules:  # Colab\n    %tensorflow_version 2.x\n"),
        ("code", "%%time\nstrategy = tf.distribute.MirroredStrategy()\n"
                 "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
                 "with strategy.scope():\n    model.compile(optimizer='sgd', loss='mse')\n"),
    ])
    project.write("nb.ipynb", text)
    r = cli("nb.ipynb")
    assert r.lines == [line for line in r.lines if "TFP101" in line] and len(r.lines) == 1, r.out
    assert r.lines[0].startswith("nb.ipynb:cell_3:3:9: TFP101 "), r.out


@pytest.mark.parametrize("text, words", [
    ("", ["empty"]),
    ("{not json", ["invalid notebook JSON", "line 1"]),
    ("[1, 2]", ["not a JSON object"]),
    ('{"metadata": {}}', ["no 'cells'"]),
    ('{"cells": [1]}', ["cell 1"]),
    ('{"cells": [{"cell_type": "code", "source": 3}]}', ["cell 1", "source"]),
])
def test_invalid_notebooks_raise_value_error(text, words):
    with pytest.raises(ValueError) as exc:
        code_cells(text)
    for w in words:
        assert w in str(exc.value)


def test_non_python_kernel_has_no_cells(notebook):
    assert code_cells(notebook([("code", "library(x)\n")], language="R")) == []


def test_nbformat3():
    nb = {"worksheets": [{"cells": [{"cell_type": "code", "input": ["x = 1\n"]}]}], "nbformat": 3}
    assert code_cells(json.dumps(nb)) == [(1, "x = 1\n")]


# -- through the CLI --------------------------------------------------------------------

def test_cli_notebook_positions(project, cli, tfp101_notebook):
    project.write("train.ipynb", tfp101_notebook)
    r = cli("train.ipynb")
    assert r.rc == 1
    assert len(r.lines) == 1
    assert r.lines[0].startswith("train.ipynb:cell_3:2:9: TFP101 "), r.out


def test_cli_notebook_json_sarif_github(project, cli, tfp101_notebook):
    project.write("train.ipynb", tfp101_notebook)
    f = json.loads(cli("--format", "json", "train.ipynb").out)[0]
    assert (f["cell"], f["line"], f["col"]) == (3, 2, 9)
    res = json.loads(cli("--format", "sarif", "train.ipynb").out)["runs"][0]["results"][0]
    assert res["properties"]["cell"] == 3
    assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.ipynb"
    # SARIF and github point into the .ipynb file's JSON text, where the flagged code is written
    file_lines = tfp101_notebook.split("\n")
    region = res["locations"][0]["physicalLocation"]["region"]
    at = file_lines[region["startLine"] - 1][region["startColumn"] - 1:]
    assert at.startswith("tf.keras.Sequential([tf.keras.layers.Dense(1)])"), (region, at)
    assert region["endLine"] == region["startLine"]
    assert file_lines[region["endLine"] - 1][region["endColumn"] - 1:].startswith("\\n\""), region
    assert f["data"]["ipynb_region"] == {"line": region["startLine"], "col": region["startColumn"],
                                         "end_line": region["endLine"], "end_col": region["endColumn"]}
    gh = cli("--format", "github", "train.ipynb").out
    where = (f"file=train.ipynb,line={region['startLine']},col={region['startColumn']},"
             f"endLine={region['endLine']},endColumn={region['endColumn']},title=TFP101 (cell 3)::"
             "cell 3, line 2, col 9: ")
    assert gh.startswith(f"::error {where}") or gh.startswith(f"::warning {where}"), gh


def test_cli_finds_notebooks_in_folders_and_noqa_in_cells(project, cli, tfp101_notebook, notebook):
    project.write("nbs/train.ipynb", tfp101_notebook)
    project.write("nbs/.ipynb_checkpoints/train-checkpoint.ipynb", tfp101_notebook)
    r = cli(".")
    assert len(r.lines) == 1 and r.lines[0].startswith("nbs/train.ipynb:cell_3:2:9:")
    quiet = tfp101_notebook.replace("tf.keras.layers.Dense(1)])", "tf.keras.layers.Dense(1)])  # noqa: TFP101")
    project.write("nbs/train.ipynb", quiet)
    assert cli(".").rc == 0


def test_cli_broken_notebook(project, cli, snippets):
    project.write("bad.ipynb", '{"cells": [')
    project.write("a.py", snippets.tfp101)
    r = cli("bad.ipynb", "a.py")
    assert r.rc == 1  # a diagnostic, as ruff: exit 1
    bad = [ln for ln in r.lines if ln.startswith("bad.ipynb:")]
    assert len(bad) == 1 and "E902" in bad[0] and "invalid notebook JSON" in bad[0]
    assert any(ln.startswith("a.py:3:9: TFP101") for ln in r.lines)


def test_lines_inside_brackets_or_strings_are_never_magics():
    from tfpar_lint.notebook import clean_cell

    src = "print('loss: %f'\n      % loss)\nx = (1\n!= 4)\ns = '''\n!no\n'''\n%time f()\n"
    out = clean_cell(src)
    assert out.splitlines() == ["print('loss: %f'", "      % loss)", "x = (1", "!= 4)", "s = '''", "!no", "'''", ""]
    compile(out, "cell", "exec")


def test_cli_lints_a_notebook_whose_statements_start_with_magic_names(project, cli, notebook):
    """Multi-line statements that start with `history`, `run`, `config` (names of IPython magics) are
    Python: the notebook is analysed (the TFP101 finding, no E999)."""
    text = notebook([
        ("code", "import tensorflow as tf\nrun = dict(\n    epochs=2)\n"),
        ("code", "strategy = tf.distribute.MirroredStrategy()\n"
                 "config = tf.estimator.RunConfig(\n    train_distribute=strategy)\n"
                 "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
                 "with strategy.scope():\n    model.compile(optimizer='sgd', loss='mse')\n"),
        ("code", "history = model.fit(tf.zeros([8, 1]), tf.zeros([8, 1]),\n"
                 "                    epochs=run['epochs'])\n"),
    ])
    project.write("nb.ipynb", text)
    r = cli("nb.ipynb")
    assert not any(" E9" in line for line in r.lines), r.out
    assert [line.split(" ")[1] for line in r.lines] == ["TFP101"], r.out
    assert r.lines[0].startswith("nb.ipynb:cell_2:4:9: TFP101 "), r.out
