"""Large, hostile inputs (issue 12: no input under 1 MB takes over 5 s in the analysis).

The generators are benchmarks/pathological.py's (the benchmark times them at full size, see
benchmarks/results.md); here they run scaled down and the findings must be exactly the ones
the text holds: the indexes and shortcuts that made the analysis linear must not lose or add
any.  The parts those changes touched are also checked against their plain definitions.
No timing is asserted here.
"""
from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import libcst as cst
import pytest

from tfpar_lint import engine, semantic
from tfpar_lint.registry import all_rules

ROOT = Path(__file__).resolve().parents[1]


def _load_generators():
    spec = importlib.util.spec_from_file_location("tfpar_bench_pathological", ROOT / "benchmarks" / "pathological.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


P = _load_generators()
ALL = [r.CODE for r in all_rules()]


def codes(text: str, enabled=None) -> Counter:
    res = engine.lint_source(P.HEADER + text, "big.py", enabled=enabled or ALL)
    assert res.error is None, res.error
    return Counter(f.code for f in res.findings)


# (generator, scaled-down arguments, the findings: the header's TFP101 and what the text holds)
CASES = {
    "methods": (P.methods, (7, 5), {"TFP101": 1, "TFP401": 7}),
    "statements": (P.statements, (60,), {"TFP101": 2}),
    "elif_chains": (P.elif_chains, (4, 12), {"TFP101": 1, "TFP401": 4}),
    "threads": (P.threads, (9,), {"TFP101": 1, "TFP301": 9}),
    "scopes": (P.scopes, (60,), {"TFP101": 1 + 6}),
    "literals": (P.literals, (40,), {"TFP101": 1}),
    "imports": (P.imports, (40,), {"TFP101": 1}),
    "closures": (P.closures, (8, 4), {"TFP101": 1, "TFP401": 8}),
    "replica_chain": (P.replica_chain, (12,), {"TFP101": 1, "TFP401": 1}),
    "noqa_lines": (P.noqa_lines, (30,), {"TFP101": 1, "TFP900": 10, "TFP901": 10}),
    "long_function": (P.long_function, (40,), {"TFP101": 1}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_scaled_down_hostile_inputs_give_exactly_their_findings(name):
    gen, args, want = CASES[name]
    assert dict(codes(gen(*args))) == want


def test_each_scoped_block_model_is_reported_with_its_fix():
    """scopes(): every tenth model is built before its ``with strategy.scope():`` block; each such
    finding is on its own line and carries the safe fix (the index of the block is used)."""
    res = engine.lint_source(P.HEADER + P.scopes(40), "big.py", enabled=["TFP101"])
    late = [f for f in res.findings if f.line > 5]
    assert len(late) == 4
    assert all(f.fix and f.fix["applicability"] == "safe" for f in late)
    text = (P.HEADER + P.scopes(40)).splitlines()
    assert all(text[f.line - 1].startswith(f"m{i * 10} = tf.keras.Sequential") for i, f in enumerate(late))


def test_the_hostile_rows_are_under_one_megabyte():
    for name, (gen, args) in P.HOSTILE.items():
        assert len((P.HEADER + gen(*args)).encode()) < 1 << 20, name


# -- the parts changed for speed, against their plain definitions --------------------------

POSITION_SOURCES = [
    "import os\n\n# c\n@dec\n# between\n@dec2(\n  1)\ndef f(a,\n      b):\n    return g(a)  # x\n"
    "x = 1; y = f(x)\nclass C:\n    @property\n    def p(self):\n        '''doc\n        '''\n        return 1\n",
    "a = 1\r\nb = (\r\n  2)\r\nif a:\r\n\tc = f(\\\n 3)\r\nelse:\r\n\tpass\r\nz = 'no newline at end'",
    '"""mod\ndoc"""\nx = """multi\nline"""\n\n\n\nasync def h():\n    async with a as b:\n        await b\n'
    "while x:\n    break\nelse:\n    y = [i for i in range(3)]\n",
    "x = 'caf\u00e9'; y = f('\u00fc', x)\nz = g(y)\n",
]


@pytest.mark.parametrize("source", POSITION_SOURCES)
def test_statement_positions_equal_the_position_provider(source):
    from libcst.metadata import MetadataWrapper, PositionProvider

    tree = cst.parse_module(source)
    full = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    from tfpar_lint.semantic.walk import TOKEN_CLASSES

    nodes = [n for n in full if not isinstance(n, TOKEN_CLASSES + (cst.Module,))]
    assert engine._statement_positions(tree, nodes, source) is not None  # the shortcut is taken
    for wanted in (nodes, nodes[:1], nodes[-1:], nodes[len(nodes) // 2:len(nodes) // 2 + 2]):
        got = engine.node_positions(tree, wanted, source)
        assert {id(n): got.get(n) for n in wanted} == {id(n): full[n] for n in wanted}


def test_statement_positions_give_way_where_they_cannot_tell():
    source = "x = 1\ny = f(x)\n"
    tree = cst.parse_module(source)
    wanted = [tree.body[1].body[0]]
    assert engine._statement_positions(tree, wanted, source + "z = 3\n") is None  # not the parsed text
    assert engine._statement_positions(tree, [tree.body[0].body[0].targets[0].whitespace_before_equal],
                                       source) is None  # a token: the whole module is generated
    got = engine.node_positions(tree, wanted, source + "z = 3\n")  # falls back, still right
    assert got[wanted[0]].start.line == 2


def test_parents_without_tokens_equal_libcst_parents():
    from tfpar_lint.fix import parents
    from tfpar_lint.semantic.walk import TOKEN_CLASSES

    source = (ROOT / "tests" / "test_fastwalk.py").read_text(encoding="utf-8")
    source = source.split("KITCHEN_SINK = '''\\\n", 1)[1].split("'''", 1)[0]
    tree = cst.parse_module(source)
    ref: dict[int, cst.CSTNode] = {}

    class V(cst.CSTVisitor):
        def __init__(self):
            self.stack = []

        def on_visit(self, node):
            if self.stack:
                ref[id(node)] = (self.stack[-1], node)
            self.stack.append(node)
            return True

        def on_leave(self, node):
            self.stack.pop()

    tree.visit(V())
    m = semantic.Module(tree, source)
    table = parents(m)
    checked = 0
    for key, (par, node) in ref.items():
        if isinstance(node, TOKEN_CLASSES):
            assert key not in table
        else:
            assert table[key] is par
            checked += 1
    assert checked > 300


def test_lookup_by_bisection_is_the_last_binding_before():
    lines = ["h = 0"]
    for i in range(40):
        lines.append(f"h = h + {i}")
        if i % 7 == 0:
            lines.append("for h in range(3): pass")
    source = "\n".join(lines) + "\nprint(h)\n"
    m = semantic.Module(cst.parse_module(source), source)
    bindings = m.scope.bindings["h"]
    assert len(bindings) > 40
    for ref in m.refs:
        if ref.node.value != "h":
            continue
        before = [b for b in bindings if b.order < ref.order]
        assert m.lookup("h", ref.scope, ref.order) == ([before[-1]] if before else bindings)


def test_same_named_nested_functions_are_told_apart():
    """passing_refs files every reference of a name once, under the function it denotes."""
    source = "".join(
        f"def outer{i}(x):\n    def step(y):\n        return y\n    strategy.run(step)\n"
        f"    {'step(1)' if i % 2 else 'use(step)'}\n" for i in range(6))
    m = semantic.Module(cst.parse_module(source), source)
    steps = [f for f in m.functions if f.name == "step"]
    assert len(steps) == 6
    for fn in steps:
        refs = m.passing_refs(fn)
        direct = {id(cs.node.func) for cs in m.callers(fn)}
        plain = [r.node for r in m.refs if r.node.value == "step" and id(r.node) not in direct
                 and any(v.info is fn for v in m.infer(r.node, r.scope, r.order))]
        assert refs == plain
        assert len(refs) == (1 if steps.index(fn) % 2 else 2)


def test_unused_noqa_on_a_long_statement():
    """A directive covers every line of its logical line (the findings indexed by line give the
    same verdicts as the scan over all findings)."""
    items = "".join("    tf.keras.Sequential(),  # noqa: TFP101\n" if i == 3 else f"    {i},\n" for i in range(50))
    text = ("import tensorflow as tf\nstrategy = tf.distribute.MirroredStrategy()\n"
            "m = tf.keras.Sequential()  # noqa: TFP101\nwith strategy.scope():\n    m.compile(loss='mse')\n"
            f"x = [\n{items}]  # noqa: TFP102\n")
    res = engine.lint_source(text, "n.py", enabled=ALL)
    got = sorted((f.code, f.line) for f in res.findings)
    # the first TFP101 is used; the list's TFP101 and TFP102 suppress nothing
    assert ("TFP101", 3) not in got
    assert [c for c, _ in got].count("TFP900") == 2


def test_add_noqa_puts_one_comment_at_the_end_of_a_long_statement():
    from tfpar_lint.noqa import add_noqa

    class F:
        def __init__(self, line, code):
            self.line, self.code = line, code

    text = "x = 0" + "".join(f" + \\\n    {i}" for i in range(200)) + "\ny = 2\n"  # lines 1-201: one statement
    findings = [F(ln, "TFP999") for ln in range(200, 1, -1)] + [F(202, "TFP998")]
    new, count = add_noqa(text, findings)
    assert count == 2
    lines = new.splitlines()
    assert lines[200] == "    199  # noqa: TFP999"
    assert lines[201] == "y = 2  # noqa: TFP998"
    assert sum("noqa" in ln for ln in lines) == 2


def test_a_wanted_class_is_placed_from_its_body():
    """A fix that inserts before a class asks for the class's range: it starts at ``class`` and ends
    where its body's last statement ends, without generating the rest of the class."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    source = "import x\n\n@deco\nclass A(B):\n    '''doc'''\n" + "".join(
        f"    def m{i}(self):\n        return self.m{i + 1}()\n" for i in range(30)) + \
        "    def last(self):\n        with s.scope():\n            tf.random.set_seed(1)\ny = 2\n"
    tree = cst.parse_module(source)
    full = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    cls = tree.body[1]
    call = [n for n in full if isinstance(n, cst.Call) and tree.code_for_node(n) == "tf.random.set_seed(1)"][0]
    got = engine._statement_positions(tree, [cls, call], source)
    assert got is not None
    assert got[cls] == full[cls] and got[call] == full[call]
    m5 = cls.body.body[6]
    assert m5 not in got  # the other methods were not generated


# -- large modules are parsed in pieces (issue 20: peak memory per source byte) -------------------

def _big_module(size: int) -> str:
    parts = ['"""A generated module.\n\nIts docstring has lines\nat column 0.\n"""\n', "import tensorflow as tf\n",
             "strategy = tf.distribute.MirroredStrategy()\n"]
    i = 0
    while sum(map(len, parts)) < size:
        parts.append(
            f"\n# block {i}\n@tf.function\ndef f_{i}(x):\n    return x * {i}\n\n"
            f"TEXT_{i} = '''\ndef not_code_{i}():\nclass NotCode:\n'''\n"
            f"if {i} % 2:\n    y_{i} = 1\nelse:\n    y_{i} = 2\n"
            f"VALUES_{i} = [\n{i},\n{i + 1},\n]\nz_{i} = 1 + \\\n    2\n")
        i += 1
    parts.append("model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nwith strategy.scope():\n"
                 "    model.compile(optimizer='sgd', loss='mse')\n# the end\n")
    return "".join(parts)


def test_a_large_module_parsed_in_pieces_is_the_whole_module_s_tree():
    from tfpar_lint import deep

    src = _big_module(3 * deep.CHUNK_CHARS)
    pieces = deep._chunks(src)
    assert pieces is not None and len(pieces) >= 2 and "".join(pieces) == src
    tree, opaque = deep.parse_module(src)
    assert opaque == 0 and tree.code == src
    assert tree.deep_equals(cst.parse_module(src))


def test_a_cut_inside_a_string_joins_the_pieces(monkeypatch):
    from tfpar_lint import deep

    monkeypatch.setattr(deep, "CHUNK_CHARS", 64)
    src = "x = 1\n" * 20 + "S = '''\n" + "def inside_the_string():\n" * 10 + "'''\n" + "y = 2\n" * 20
    pieces = deep._chunks(src)
    assert pieces is not None and any(p.startswith("def inside_the_string") for p in pieces)
    tree, _ = deep.parse_module(src)
    assert tree.code == src and tree.deep_equals(cst.parse_module(src))


def test_a_3_mb_module_lints_with_its_finding_at_the_end():
    src = _big_module(3 * 1024 * 1024)
    res = engine.lint_source(src, "<stdin>", options=engine.AnalysisOptions())
    assert res.error is None, res.error
    lines = src.splitlines()
    assert [(f.code, lines[f.line - 1][f.col - 1:f.end_col - 1]) for f in res.findings] == [
        ("TFP101", "tf.keras.Sequential([tf.keras.layers.Dense(1)])")]


def test_positions_of_a_module_parsed_in_pieces_are_the_position_provider_s(monkeypatch):
    from libcst.metadata import MetadataWrapper, PositionProvider

    from tfpar_lint import deep

    monkeypatch.setattr(deep, "CHUNK_CHARS", 2048)
    src = _big_module(20000)
    tree, _ = deep.parse_module(src)
    pieces = deep.take_pieces(tree)
    assert pieces is not None and len(pieces) >= 3
    want = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    calls = [n for n in want if isinstance(n, (cst.Call, cst.FunctionDef, cst.SimpleString, cst.Comment))]
    picked = calls[::7] + calls[-3:]
    got = engine.node_positions(tree, picked, src, pieces)
    assert len(picked) > 20 and all(got[n] == want[n] for n in picked)
