"""flake8 plugin: ``flake8 --select TFP`` runs the same engine as the CLI.

Registered as the ``TFP`` entry point in the ``flake8.extension`` group.
flake8 does the selection (``--select``/``--ignore``/``--extend-select``)
and the ``# noqa`` handling itself, so the plugin asks the engine for the
rules with noqa off.  The rule set is the CLI's: the rules on by default, and
a rule that is off by default only when flake8's ``--select`` or
``--extend-select`` names it by its code (``--extend-select TFP403``): a
prefix such as ``--select TFP`` does not turn it on, as in the CLI.  They are
also put on flake8's default ignore list (``extend_default_ignore``).  A bad
``--tfp-tf-version`` is an option error (exit 2, one line), as flake8 gives
for its own options.

Options (command line, or ``[flake8]`` in ``setup.cfg``/``tox.ini``/``.flake8``)::

    --tfp-strategy-factories=pkg.make_strategy,other.factory
    --tfp-dataset-distributors=pkg.data.distributed_input
    --tfp-markers=my_strategy_helper

Columns are handed to flake8 0-based (flake8 prints them 1-based).

A file the engine could not analyse is reported as the CLI reports it, under
the code ``TFP000`` (a code of this plugin, so ``--select TFP`` shows it)
followed by the CLI's code and message, e.g. ``TFP000 E903 analysis gave up:
file too deeply nested (Python's recursion limit)`` or ``TFP000 E903 analysis
gave up: libcst cannot parse this file, though Python can (...)``.  flake8
runs the plugin only on files Python parses (it reports E999 itself
otherwise), so every such error is one flake8 would not show.  Files over the
CLI's default size limit (``max-file-size``, 10M) are not parsed
(``TFP000 E902 skipped: ...``).  The plugin parses in flake8's own process:
unlike the CLI it is not protected from a crash of libcst by a worker process;
the engine's one parse (:func:`tfpar_lint.deep.parse_module`) keeps the inputs
that crash libcst (expressions nested thousands deep) away from it.  The
notes of that guard (expressions analysed as unknown values) are not shown by
flake8, which has no place for them.

Whole-project analysis works as in the CLI: the project's other modules are
read from disk, and their per-module summaries (which spare parsing most of
those that cannot matter to the file, see :mod:`tfpar_lint.semantic.summary`)
are read from and written to the ``cache-dir`` of the settings found from the
current folder (``.tfpar_lint_cache`` in the project root by default), where
the CLI and the other flake8 processes find them.
"""
from __future__ import annotations

import os
from typing import Any, ClassVar, Iterator, Optional, Sequence

from tfpar_lint import __version__

# The code under which the plugin reports a file it could not analyse.
ERROR_CODE = "TFP000"


def _rules() -> tuple[Any, ...]:
    from tfpar_lint import registry

    return registry.all_rules()


class Plugin:
    name = "tfpar-lint"
    version = __version__

    strategy_factories: ClassVar[tuple[str, ...]] = ()
    dataset_distributors: ClassVar[tuple[str, ...]] = ()
    markers: ClassVar[tuple[str, ...]] = ()
    tf_version: ClassVar[Optional[str]] = None
    _all_codes: ClassVar[Optional[frozenset[str]]] = None
    _enabled: ClassVar[Optional[frozenset[str]]] = None
    _options: ClassVar[Any] = None

    def __init__(self, tree: Any, lines: Sequence[str], filename: str) -> None:
        # `tree` (flake8's ast) is requested only so that flake8 runs us once
        # per file; the engine parses with libcst itself.
        self.lines = lines
        self.filename = filename

    @classmethod
    def add_options(cls, option_manager: Any) -> None:
        off = [r.CODE for r in _rules() if not r.DEFAULT_ENABLED]
        if off:
            option_manager.extend_default_ignore(off)
        for flag, help_text in (
            ("--tfp-strategy-factories",
             "Qualified names of project functions that return a tf.distribute strategy (comma-separated)."),
            ("--tfp-dataset-distributors",
             "Qualified names of project functions that return an already-distributed dataset (comma-separated)."),
            ("--tfp-markers",
             "Extra pre-filter substrings: a file containing one is always analysed (comma-separated)."),
        ):
            option_manager.add_option(
                flag, default="", parse_from_config=True, comma_separated_list=True, help=help_text)
        option_manager.add_option(
            "--tfp-tf-version", default="", parse_from_config=True,
            help="The TensorFlow version the code targets, e.g. 2.15 (default: tf-version from "
                 "[tool.tfpar-lint] in pyproject.toml, else 2.16).")

    @classmethod
    def parse_options(cls, options: Any) -> None:
        def get(name: str) -> tuple[str, ...]:
            val = getattr(options, name, None) or ()
            if isinstance(val, str):
                val = [v for v in val.replace(",", " ").split()]
            return tuple(v.strip() for v in val if v and v.strip())

        cls.strategy_factories = get("tfp_strategy_factories")
        cls.dataset_distributors = get("tfp_dataset_distributors")
        cls.markers = get("tfp_markers")
        cls.tf_version = (getattr(options, "tfp_tf_version", "") or "").strip() or None
        if cls.tf_version is not None:
            from tfpar_lint import config

            try:
                config.parse_tf_version(cls.tf_version, "--tfp-tf-version")
            except config.ConfigError as e:
                import sys

                sys.stderr.write(f"flake8: error: {e}\n")
                raise SystemExit(2) from None
        # off-by-default rules: only those named by their own code in --select / --extend-select
        from tfpar_lint import registry

        named = set()
        for attr in ("select", "extend_select", "enable_extensions"):
            for v in getattr(options, attr, None) or ():
                named.update(c.strip().upper() for c in str(v).replace(",", " ").split())
        cls._enabled = frozenset(registry.default_codes() | (named & cls._codes()))
        cls._options = None

    @classmethod
    def _analysis_options(cls) -> Any:
        if cls._options is None:
            from tfpar_lint import config
            from tfpar_lint.engine import AnalysisOptions

            try:  # the project's own settings, as the CLI reads them
                settings = config.load_settings(None)
            except config.ConfigError:
                settings = None  # flake8 is not the place to report it
            if cls.tf_version is not None:
                tf_version = config.parse_tf_version(cls.tf_version, "--tfp-tf-version")
            else:
                tf_version = settings.tf_version if settings is not None else None  # None: inferred
            # the per-module summaries of the modules a file imports or is imported by: shared
            # with the CLI and every flake8 process through the cache folder (cache-dir)
            summary_dir = None
            if settings is not None:
                summary_dir = os.path.join(settings.root, settings.cache_dir)
            cls._options = AnalysisOptions(
                strategy_factories=cls.strategy_factories,
                dataset_distributors=cls.dataset_distributors,
                extra_markers=cls.markers,
                tf_version=tf_version,
                summary_dir=summary_dir,
            )
        return cls._options

    @classmethod
    def _codes(cls) -> frozenset[str]:
        if cls._all_codes is None:
            cls._all_codes = frozenset(r.CODE for r in _rules())
        return cls._all_codes

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        from tfpar_lint.engine import lint_source

        from tfpar_lint.engine import DEFAULT_MAX_FILE_SIZE, too_large
        from tfpar_lint.output import error_code

        source = "".join(self.lines)
        if len(source) > DEFAULT_MAX_FILE_SIZE and len(source.encode("utf-8", "surrogatepass")) > DEFAULT_MAX_FILE_SIZE:
            err = too_large(self.filename, None, DEFAULT_MAX_FILE_SIZE)
            yield 1, 0, f"{ERROR_CODE} {error_code(err)} {err.message}", type(self)
            return
        # check_syntax=False: flake8 reports E999 itself for files we do not parse
        enabled = self._enabled if self._enabled is not None else self._codes()
        result = lint_source(source, self.filename, enabled=enabled,
                             options=self._analysis_options(), apply_noqa=False, check_syntax=False)
        if result.error is not None:
            err = result.error
            yield max(err.line, 1), max(err.col - 1, 0), f"{ERROR_CODE} {error_code(err)} {err.message}", type(self)
            return
        for f in result.findings:
            yield f.line, max(f.col - 1, 0), f"{f.code} {f.message}", type(self)
