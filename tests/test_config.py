"""[tool.tfpar-lint] loading, validation and rule selection."""
from __future__ import annotations

import os

import pytest

from tfpar_lint import registry
from tfpar_lint.config import (
    DEFAULT_EXCLUDES, ConfigError, Settings, find_config, load_settings, path_matches,
    settings_from_table,
)


def _load(project, body: str) -> Settings:
    project.write("pyproject.toml", "[project]\nname = 'x'\n\n[tool.tfpar-lint]\n" + body)
    return load_settings()


def test_defaults_without_config(project):
    s = load_settings()
    assert s.config_path is None
    assert s.root == str(project.root)
    assert s.base_enabled() == registry.default_codes()
    assert ".venv" in s.exclude and ".tfpar_lint_cache" in s.exclude
    assert s.format == "text" and s.jobs is None


def test_all_keys(project):
    s = _load(project, """
select = ["TFP1", "TFP201"]
extend-select = ["TFP3"]
ignore = ["TFP102"]
exclude = ["gen"]
extend-exclude = ["legacy/*"]
strategy-factories = ["mypkg.dist.make_strategy"]
dataset-distributors = ["mypkg.data.distributed"]
markers = ["make_strategy"]
jobs = 3
cache-dir = ".cache/tfp"
format = "sarif"

[tool.tfpar-lint.per-file-ignores]
"tests/*" = ["TFP1"]
""")
    assert s.config_path == str(project.root / "pyproject.toml")
    assert s.exclude == ("gen",) and s.extend_exclude == ("legacy/*",)
    assert s.all_excludes == ("gen", "legacy/*")
    assert s.strategy_factories == ("mypkg.dist.make_strategy",)
    assert s.dataset_distributors == ("mypkg.data.distributed",)
    assert s.markers == ("make_strategy",)
    assert s.jobs == 3 and s.format == "sarif"
    assert s.cache_dir == os.path.join(str(project.root), ".cache/tfp")
    on = s.base_enabled()
    tfp1 = {c for c in registry.rules_by_code() if c.startswith("TFP1")}
    tfp3 = {c for c in registry.rules_by_code() if c.startswith("TFP3")}
    defaults = set(registry.default_codes())
    assert on == ((tfp1 - {"TFP102"}) | {"TFP201"} | tfp3) & defaults  # a prefix: the rules on by default
    assert s.enabled_for("tests/test_x.py") == on - tfp1
    assert s.enabled_for("src/x.py") == on
    opts = s.analysis_options()
    assert opts.strategy_factories == ("mypkg.dist.make_strategy",)
    assert opts.extra_markers == ("make_strategy",)


@pytest.mark.parametrize("body, words", [
    ("selekt = ['TFP1']", ["selekt", "unknown key"]),
    ("extend_select = ['TFP1']", ["extend_select", "did you mean 'extend-select'"]),
    ("select = 'TFP1'", ["'select'", "list of strings"]),
    ("select = ['TFP1', 3]", ["'select'", "list of strings"]),
    ("ignore = ['TFP9999x']", ["'ignore'", "TFP9999x"]),
    ("extend-select = ['no-such-rule']", ["'extend-select'", "no-such-rule"]),
    ("jobs = 0", ["'jobs'", "positive integer"]),
    ("jobs = true", ["'jobs'"]),
    ("jobs = '4'", ["'jobs'"]),
    ("format = 'xml'", ["'format'", "xml"]),
    ("cache-dir = 5", ["'cache-dir'"]),
    ("per-file-ignores = ['x']", ["per-file-ignores"]),
    ("per-file-ignores = {'tests/*' = 'TFP1'}", ["per-file-ignores", "tests/*"]),
    ("per-file-ignores = {'tests/*' = ['TFPX']}", ["per-file-ignores", "TFPX"]),
    ("strategy-factories = ['not a name']", ["'strategy-factories'", "not a name"]),
    ("markers = ['']", ["'markers'"]),
])
def test_bad_values_name_key_and_file(project, body, words):
    with pytest.raises(ConfigError) as exc:
        _load(project, body + "\n")
    msg = str(exc.value)
    assert str(project.root / "pyproject.toml") in msg
    for w in words:
        assert w in msg, msg
    assert "\n" not in msg


def test_invalid_toml(project):
    project.write("pyproject.toml", "[tool.tfpar-lint]\nselect = [\n")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert "pyproject.toml" in str(exc.value) and "invalid TOML" in str(exc.value)


def test_pyproject_without_table_is_passed_over(project):
    project.write("pyproject.toml", "[tool.tfpar-lint]\nignore = ['TFP101']\n")
    project.write("sub/pyproject.toml", "[project]\nname = 'sub'\n")
    project.write("sub/broken-but-irrelevant/pyproject.toml", "this is [ not toml")
    assert find_config(str(project.root / "sub")) == project.root / "pyproject.toml"
    # a broken pyproject.toml that cannot hold our table is not even parsed
    assert find_config(str(project.root / "sub" / "broken-but-irrelevant")) == project.root / "pyproject.toml"


def test_no_config_and_explicit_config(project):
    project.write("pyproject.toml", "[tool.tfpar-lint]\nignore = ['TFP101']\n")
    assert "TFP101" not in load_settings().base_enabled()
    assert "TFP101" in load_settings(no_config=True).base_enabled()
    project.write("other/tfpar-lint.toml", "ignore = ['TFP102']\n")
    s = load_settings("other/tfpar-lint.toml")
    assert "TFP101" in s.base_enabled() and "TFP102" not in s.base_enabled()
    assert s.root == str(project.root / "other")
    project.write("other/pyproject.toml", "[tool.tfpar-lint]\nignore = ['TFP103']\n")
    s = load_settings("other/pyproject.toml")
    assert "TFP103" not in s.base_enabled()
    with pytest.raises(ConfigError):
        load_settings("nowhere.toml")


# -- selection, ruff's way ------------------------------------------------------------

def _sel(**kw) -> set[str]:
    return set(Settings().with_cli(**kw).base_enabled())


def test_selection_rules():
    all_codes = set(registry.rules_by_code())
    defaults = set(registry.default_codes())
    tfp1 = {c for c in all_codes if c.startswith("TFP1")}
    assert _sel() == defaults
    assert _sel(select=["ALL"]) == all_codes
    # a prefix selects the rules under it that are on by default; an off-by-default rule needs its
    # own code or name, or ALL (the flake8 plugin decides the same way)
    assert _sel(select=["TFP"]) == defaults
    assert _sel(select=["TFP1"]) == tfp1 & defaults
    off1 = tfp1 - defaults
    assert off1 and _sel(select=["TFP1", *off1]) == tfp1
    assert _sel(select=["TFP1"], ignore=["TFP101"]) == (tfp1 & defaults) - {"TFP101"}
    assert _sel(select=["TFP101"], ignore=["TFP1"]) == {"TFP101"}
    assert _sel(select=["TFP1"], ignore=["TFP1"]) == set()
    assert _sel(ignore=["ALL"], extend_select=["TFP101"]) == {"TFP101"}
    assert _sel(select=["model-outside-scope"]) == {"TFP101"}
    assert _sel(ignore=["model-outside-scope"]) == defaults - {"TFP101"}
    assert _sel(select=["tfp101"]) == {"TFP101"}


def test_default_off_rules_need_selection():
    off = [r.CODE for r in registry.all_rules() if not r.DEFAULT_ENABLED]
    assert off, "no rule is off by default"
    code = off[0]
    assert code not in _sel()
    assert code in _sel(extend_select=[code])
    assert code in _sel(select=["ALL"])


def test_cli_layer_over_file_layer():
    s = settings_from_table({"select": ["TFP1"], "ignore": ["TFP101"]}, "/p/pyproject.toml")
    tfp1 = {c for c in registry.rules_by_code() if c.startswith("TFP1")} & set(registry.default_codes())
    assert set(s.base_enabled()) == tfp1 - {"TFP101"}
    # --select resets the file's select and ignore (ruff: `--select F401` gives only F401)
    assert set(s.with_cli(select=["TFP101"]).base_enabled()) == {"TFP101"}
    # --extend-select / --ignore adjust it
    assert set(s.with_cli(extend_select=["TFP2"]).base_enabled()) == (
        tfp1 - {"TFP101"}) | {c for c in registry.rules_by_code() if c.startswith("TFP2")}
    assert set(s.with_cli(extend_select=["TFP101"]).base_enabled()) == tfp1
    assert set(s.with_cli(ignore=["TFP102"]).base_enabled()) == tfp1 - {"TFP101", "TFP102"}


def test_cli_unknown_selector():
    with pytest.raises(ConfigError) as exc:
        Settings().with_cli(select=["TFP1", "bogus"])
    assert "bogus" in str(exc.value) and "--select" in str(exc.value)


# -- globs ------------------------------------------------------------------------------

@pytest.mark.parametrize("path, pattern, expected", [
    ("venv/lib/x.py", "venv", True),
    ("a/venv/x.py", "venv", True),
    ("a/venvx/x.py", "venv", False),
    ("a/x_pb2.py", "*_pb2.py", True),
    ("tests/a/b.py", "tests/*", True),
    ("tests/a/b.py", "tests/", True),
    ("tests/a/b.py", "./tests", True),
    ("src/tests/b.py", "tests/*", False),
    ("src/gen.py", "src/**/gen.py", True),
    ("src/a/b/gen.py", "src/**/gen.py", True),
    ("src/xgen.py", "src/**/gen.py", False),
    ("a/x.py", "a/[xy].py", True),
    ("a/z.py", "a/[xy].py", False),
])
def test_path_matches(tmp_path, path, pattern, expected):
    assert path_matches(str(tmp_path / path), pattern, str(tmp_path)) is expected


def test_default_excludes_like_ruff():
    for name in (".git", ".venv", "venv", "__pycache__", "build", "dist", ".tox", "node_modules",
                 ".tfpar_lint_cache", ".ipynb_checkpoints"):
        assert name in DEFAULT_EXCLUDES
