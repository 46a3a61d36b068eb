"""The ``tfpar-lint`` command.

::

    tfpar-lint [check] [PATH ...]         lint files and folders (default: .); `check` as in ruff
    tfpar-lint check --fix [--unsafe-fixes] [--diff] PATH   apply the rules' fixes
    tfpar-lint - --stdin-filename x.py    lint standard input
    tfpar-lint rule TFP101                print a rule's page (also --explain TFP101)
    tfpar-lint --list-rules               code, name, default on/off, summary
    tfpar-lint --verify train.py [--devices cpu:2] [-- script args...]

Exit codes: 0 nothing found, 1 findings, 2 usage, configuration or file error
(a file that cannot be read or parsed is reported and the others are still
linted).  With ``--verify``: 2 when a script could not run (COULD_NOT_RUN) or a finding was left
INCONCLUSIVE, else 1 when a finding is CONFIRMED or was found at runtime (RUNTIME), else 0.
Bad input never prints a traceback.
"""
from __future__ import annotations

import argparse
import os
import shlex
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, TextIO

from tfpar_lint import __version__
from tfpar_lint.config import FORMATS, ConfigError, Settings, load_settings, split_csv
from tfpar_lint.finding import CONFIRMED, INCONCLUSIVE, RUNTIME, VERDICTS, FileError, Finding

PROG = "tfpar-lint"
PROGRESS_MIN_FILES = 20
_DEVICES = re.compile(r"^(auto|cpu:[1-9][0-9]*|gpu(:[1-9][0-9]*)?)$")


class UsageError(Exception):
    """Bad command line; ``str()`` is the line to print."""


# -- helpers -------------------------------------------------------------------

def _stderr_write(text: str) -> None:
    if sys.stderr is None:  # standard error is closed: nowhere to say it
        return
    try:
        sys.stderr.write(text)
    except (OSError, ValueError):
        pass


def _err(msg: str) -> None:
    _stderr_write(f"{PROG}: error: {msg}\n")


def _warn(msg: str) -> None:
    _stderr_write(f"{PROG}: warning: {msg}\n")


def _positive_int(name: str) -> Callable[[str], int]:
    def conv(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {s!r}") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {s!r}")
        return v
    return conv


def _positive_float(s: str) -> float:
    import math

    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--timeout must be a positive number of seconds, got {s!r}") from None
    from tfpar_lint.config import MAX_SECONDS

    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"--timeout must be a positive, finite number of seconds, got {s!r}")
    if v > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"--timeout must be at most {MAX_SECONDS:g} seconds, got {s!r}")
    return v


def _seconds(name: str) -> Callable[[str], float]:
    def conv(s: str) -> float:
        from tfpar_lint.config import parse_seconds

        try:
            return parse_seconds(s)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return conv


def _size(s: str) -> int:
    from tfpar_lint.config import parse_size

    try:
        return parse_size(s)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _devices(s: str) -> str:
    if not _DEVICES.match(s.strip().lower()):
        raise argparse.ArgumentTypeError(f"--devices must be auto, cpu:N or gpu[:N], got {s!r}")
    return s.strip().lower()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, no usage dump
        raise UsageError(f"{message} (see `{PROG} --help`)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        usage=f"{PROG} [check] [OPTIONS] [PATH ...]\n       {PROG} rule CODE",
        description="Find tf.distribute mistakes in Python files and notebooks (`check` is optional, as in "
                    "`ruff check`).",
        epilog=f"`{PROG} rule CODE` prints a rule's page. Everything after `--` is passed to the "
               "scripts run by --verify. Exit codes: 0 clean, 1 findings, 2 usage/config/file error. "
               "--verify gives each finding a verdict: "
               + "; ".join(f"{k}: {v}" for k, v in VERDICTS.items())
               + ". Exit codes under --verify: 2 when a script COULD_NOT_RUN or a finding is INCONCLUSIVE "
               "(not with --exit-zero), else 1 when a finding is CONFIRMED or RUNTIME, else 0.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or folders to lint (default: .); - for stdin")
    sel = p.add_argument_group("rule selection")
    sel.add_argument("--select", action="append", metavar="CODES",
                     help="comma-separated codes, prefixes (TFP1), ALL or rule names; replaces the configured selection")
    sel.add_argument("--extend-select", action="append", metavar="CODES", help="codes to add to the selection")
    sel.add_argument("--ignore", action="append", metavar="CODES", help="codes to leave out")
    files = p.add_argument_group("files")
    files.add_argument("--exclude", action="append", metavar="GLOBS", help="replace the exclude globs (comma-separated)")
    files.add_argument("--extend-exclude", action="append", metavar="GLOBS", help="add exclude globs (comma-separated)")
    files.add_argument("--force-exclude", action="store_true",
                       help="apply the excludes to files named on the command line too (used by the pre-commit hook)")
    files.add_argument("--stdin-filename", metavar="NAME", help="the name to report for standard input")
    out = p.add_argument_group("output")
    out.add_argument("--output-format", "--format", dest="format", choices=FORMATS, default=None,
                     help="report format (default: text, flake8's lines; concise and full are ruff's; "
                          "--format is an alias)")
    out.add_argument("-o", "--output-file", metavar="FILE", help="write the report to FILE instead of stdout")
    out.add_argument("--statistics", action="store_true", help="concise/full (ruff): a count per code instead of the findings; text (flake8): the findings, then a count per code")
    out.add_argument("--count", action="store_true",
                     help="print the total number of findings and errors after all other output (flake8's)")
    out.add_argument("--show-source", action=argparse.BooleanOptionalAction, default=False,
                     help="text format: show the source line and a caret under each finding (flake8's)")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    out.add_argument("--exit-non-zero-on-fix", action="store_true",
                     help="exit 1 when --fix changed a file, even if no finding remains")
    out.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    out.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                     help="colours: auto (on a terminal, unless NO_COLOR is set; FORCE_COLOR forces them), "
                          "always, never")
    log = p.add_argument_group("log levels")
    log.add_argument("-v", "--verbose", action="store_true",
                     help="log what is done to standard error; with --verify, also print each finding's message "
                          "and full evidence, the run's notes and what each probe checked")
    log.add_argument("-q", "--quiet", action="store_true", help="print findings, but nothing else")
    log.add_argument("-s", "--silent", action="store_true",
                     help="print nothing (the exit code still says whether there are findings)")
    fix = p.add_argument_group("fixes (ruff's flags)")
    fix.add_argument("--fix", action=argparse.BooleanOptionalAction, default=None,
                     help="apply the safe fixes and report what is left")
    fix.add_argument("--unsafe-fixes", action=argparse.BooleanOptionalAction, default=None,
                     help="include the unsafe fixes (they may change behaviour beyond the mistake)")
    fix.add_argument("--show-fixes", action=argparse.BooleanOptionalAction, default=None,
                     help="list the findings that were fixed")
    fix.add_argument("--diff", action="store_true",
                     help="write nothing; print the diff of each file the fixes would change, and exit 0 if "
                          "there is none (implies --fix-only)")
    fix.add_argument("--fix-only", action="store_true",
                     help="apply the fixes, but do not report or exit non-zero for what is left")
    fix.add_argument("--add-noqa", action="store_true",
                     help="add a `# noqa: CODE` comment to every line with a finding")
    info = p.add_argument_group("information")
    info.add_argument("--explain", metavar="CODE", help="print a rule's page and exit")
    info.add_argument("--list-rules", action="store_true", help="list the rules and exit")
    info.add_argument("--show-settings", action="store_true", help="print the resolved settings and exit")
    info.add_argument("--explain-silence", action="store_true",
                      help="list every place where a rule's question about a value got no kind, with the reason "
                           "(the census of lost values), then a count per reason, and exit")
    info.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    cfg = p.add_argument_group("configuration")
    cfg.add_argument("--config", metavar="PATH", help="read settings from this TOML file")
    cfg.add_argument("--no-config", action="store_true", help="ignore pyproject.toml")
    cfg.add_argument("--no-project", action="store_true",
                     help="lint each file alone: do not follow imports into the project's other files "
                          "(whole-project analysis is on by default; also project = false)")
    cfg.add_argument("--tf-version", metavar="X.Y", default=None,
                     help="the TensorFlow version the code targets, like ruff's --target-version "
                          "(default: tf-version in [tool.tfpar-lint], else inferred per file from the project's "
                          "requirements, pyproject.toml, setup.py, Pipfile, environment.yml or Dockerfile and the "
                          "code's APIs; --show-settings prints what was found)")
    cfg.add_argument("-j", "--jobs", type=_positive_int("--jobs"), default=None,
                     help="worker processes (default and maximum: the number of CPUs; files are always "
                          "parsed in supervised workers, also with -j1)")
    cfg.add_argument("--max-file-size", type=_size, default=None, metavar="SIZE",
                     help="skip files larger than SIZE with E902 (bytes, or 512K, 10M, 1G; 0: no limit; "
                          "default: max-file-size from the settings, 10M)")
    cfg.add_argument("--file-timeout", type=_seconds("--file-timeout"), default=None, metavar="SECONDS",
                     help="give up one file's analysis after SECONDS of CPU time with E903 and go on (a "
                          "busy machine does not make files hit it; 0: no limit; default: file-timeout from "
                          "the settings, 60)")
    cfg.add_argument("--no-cache", action="store_true",
                     help="neither read nor write the result cache")
    cfg.add_argument("--cache-dir", metavar="DIR", default=None,
                     help="where to keep the result cache (default: cache-dir from the settings, "
                          ".tfpar_lint_cache in the project root)")
    ver = p.add_argument_group("runtime verification (needs TensorFlow: the [verify] extra)")
    ver.add_argument("--verify", action="store_true",
                     help="run scripts on several devices: the files named on the command line, and the entry "
                          "points that use a strategy in the folders given, flagged or not (setup.py, tests and "
                          "modules are skipped, and listed; files without a strategy are never run). Each finding gets CONFIRMED, NOT_REPRODUCED or "
                          "INCONCLUSIVE with its evidence; a mistake the run shows where the linter was silent is "
                          "a finding of its own, RUNTIME; a script that does not run through is COULD_NOT_RUN. "
                          "Each run is sandboxed: see docs/verify.md, Security")
    ver.add_argument("--show-output", action="store_true",
                     help="print each verified script's stdout and stderr (always shown, last lines, when it fails)")
    ver.add_argument("--devices", type=_devices, default="auto",
                     help="auto (every GPU when there are two or more, one GPU split into 2 logical GPUs, else 2 "
                          "logical CPU devices), cpu:N or gpu[:N] (default: auto)")
    ver.add_argument("--max-steps", type=_positive_int("--max-steps"), default=None,
                     help="stop each script after N training steps")
    ver.add_argument("--timeout", type=_positive_float, default=None, help="seconds allowed per script")
    ver.add_argument("--sandbox", choices=("auto", "none"), default=None,
                     help="auto (default): each script runs in the namespace sandbox, and --verify refuses to "
                          "run where it cannot be set up; none: run the scripts with your permissions and NOTHING "
                          "ISOLATED (only Python's own file writes are redirected). Also TFPAR_VERIFY_SANDBOX")
    return p


def _csv(values: Optional[Sequence[str]]) -> list[str]:
    out: list[str] = []
    for v in values or ():
        out.extend(split_csv(v))
    return out


# -- rule pages and the rule table ---------------------------------------------

def _resolve_rule(query: str) -> tuple[Optional[str], Any]:
    from tfpar_lint import registry

    by_code = registry.rules_by_code()
    if query.upper() in by_code:
        return query.upper(), by_code[query.upper()]
    by_name = registry.rules_by_name()
    if query in by_name:
        return by_name[query].CODE, by_name[query]
    if re.fullmatch(r"TFP[0-9]{3}", query.upper()):
        return query.upper(), None
    return None, None


def rule_page_path(code: str) -> Optional[Path]:
    """The page of ``code``: the checkout's ``rules/`` first, then the wheel's copy."""
    pkg = Path(__file__).resolve().parent
    repo = pkg.parent.parent
    if pkg.parent.name == "src" and (repo / "pyproject.toml").is_file():
        page = repo / "rules" / f"{code}.md"
        if page.is_file():
            return page
    page = pkg / "rule_pages" / f"{code}.md"
    if page.is_file():
        return page
    return None


def rule_page(query: str) -> str:
    code, rule = _resolve_rule(query)
    if code is None:
        raise UsageError(f"unknown rule {query!r} (see `{PROG} --list-rules`)")
    page = rule_page_path(code)
    if page is not None:
        try:
            return page.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"cannot read {page}: {e}") from None
    if rule is None:
        raise UsageError(f"unknown rule {query!r} (see `{PROG} --list-rules`)")
    import inspect

    parts = [f"# {rule.CODE} {rule.NAME}", rule.SUMMARY]
    doc = inspect.cleandoc(rule.__doc__) if rule.__doc__ else ""
    if doc and doc.strip() != rule.SUMMARY.strip():
        parts.append(doc)
    if rule.FIX_HINT:
        parts.append(f"Fix: {rule.FIX_HINT}")
    parts.append(f"Default: {'on' if rule.DEFAULT_ENABLED else 'off'}. Severity: {rule.SEVERITY}.")
    return "\n\n".join(parts) + "\n"


def list_rules(fmt: str, stream: TextIO) -> None:
    from tfpar_lint import registry

    rules = registry.all_rules()
    if fmt == "json":
        import json

        json.dump([{"code": r.CODE, "name": r.NAME, "default": bool(r.DEFAULT_ENABLED),
                    "severity": r.SEVERITY, "summary": r.SUMMARY} for r in rules], stream, indent=2)
        stream.write("\n")
        return
    rows = [("CODE", "NAME", "DEFAULT", "SUMMARY")]
    rows += [(r.CODE, r.NAME, "on" if r.DEFAULT_ENABLED else "off", r.SUMMARY) for r in rules]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    w2 = max(len(r[2]) for r in rows)
    for r in rows:
        stream.write(f"{r[0]:<{w0}}  {r[1]:<{w1}}  {r[2]:<{w2}}  {r[3]}".rstrip() + "\n")


# -- progress ------------------------------------------------------------------

class _Progress:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        width = 30
        filled = int(width * done / total) if total else width
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} files")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()


# -- linting -------------------------------------------------------------------

def _read_stdin(limit: int) -> bytes:
    """Standard input, at most ``limit`` + 1 bytes (0: no limit); OSError when it is closed."""
    stdin = sys.stdin
    if stdin is None:
        raise OSError("standard input is closed")
    n = limit + 1 if limit else -1
    if hasattr(stdin, "buffer"):
        return stdin.buffer.read(n)
    return stdin.read(n).encode("utf-8")


def _lint_stdin(settings: Settings, display: Optional[str], options: Any) -> tuple[Any, Optional[str]]:
    """(the result, the text read) for standard input."""
    from tfpar_lint import engine

    name = display or "<stdin>"
    enabled = settings.enabled_for(name)
    try:
        data = _read_stdin(settings.max_file_size)
    except (OSError, ValueError) as e:
        return engine.FileResult(path=name, findings=[], error=FileError(name, f"cannot read stdin: {e}")), None
    if settings.max_file_size and len(data) > settings.max_file_size:
        return engine.FileResult(path=name, error=engine.too_large(name, None, settings.max_file_size)), None
    # the same decoding as a file's: the same bytes give the same result from a path or stdin
    source, err = engine.decode_source(name, data)
    if source is None:
        return engine.FileResult(path=name, findings=[], error=err), None
    # lint_source treats a name ending in .ipynb as notebook JSON.
    return engine.lint_source_supervised(source, name, enabled=enabled, options=options,
                                         timeout=settings.file_timeout, max_file_size=settings.max_file_size), source


def _offset_progress(progress: Callable[[int, int], None], offset: int,
                     total: int) -> Callable[[int, int], None]:
    def cb(done: int, _n: int) -> None:
        progress(offset + done, total)
    return cb


def _lint_files(files: list[str], settings: Settings, options: Any, jobs: Optional[int],
                progress: Optional[Callable[[int, int], None]], cache_dir: Optional[str] = None) -> list[Any]:
    from tfpar_lint import engine

    base = settings.base_enabled()
    groups: dict[frozenset[str], list[str]] = {}
    for f in files:
        groups.setdefault(settings.enabled_for(f, base), []).append(f)
    results: list[Any] = []
    total = len(files)
    offset = 0
    for enabled, group in groups.items():
        cb: Optional[Callable[[int, int], None]] = None
        if progress is not None:
            cb = _offset_progress(progress, offset, total)
        results.extend(engine.lint_paths(group, enabled=enabled, options=options, jobs=jobs, progress=cb,
                                         cache_dir=cache_dir, timeout=settings.file_timeout,
                                         max_file_size=settings.max_file_size))
        offset += len(group)
    return results


def _tensorflow_available() -> bool:
    """Is TensorFlow importable here (without importing it)?"""
    import importlib.util

    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


def verify_install_line() -> str:
    """A command that installs what ``--verify`` needs into this interpreter's environment, and
    works today (tfpar-lint itself is not on PyPI, so ``pip install 'tfpar-lint[verify]'`` would
    not): the requirements of the ``verify`` extra, read from the installed package."""
    reqs: list[str] = []
    try:
        from importlib import metadata

        for r in metadata.requires(PROG) or []:
            name, _, marker = r.partition(";")
            if "extra" in marker and "verify" in marker:
                reqs.append(name.strip().replace(" ", ""))
    except Exception:  # noqa: BLE001 - not installed as a distribution (a source tree on sys.path)
        reqs = []
    reqs = reqs or ["tensorflow-cpu>=2.16,<2.22", "pyseccomp>=0.1.2,<0.2"]
    return f"{shlex.quote(sys.executable)} -m pip install " + " ".join(shlex.quote(r) for r in reqs)


def _verify(files: list[str], findings: list[Finding], args: argparse.Namespace,
            script_args: list[str], jobs: Optional[int]) -> list[Any]:
    """Run the verifier; raises UsageError when it cannot be used."""
    hint = f"--verify needs TensorFlow: {verify_install_line()}"
    if not _tensorflow_available():
        raise UsageError(f"{hint} (TensorFlow is not installed for {sys.executable})")
    try:
        import importlib

        verify_mod = importlib.import_module("tfpar_lint.verify")
        verify_findings = verify_mod.verify_findings
    except ImportError as e:
        raise UsageError(f"{hint} ({e})") from None
    except AttributeError:
        raise UsageError("this installation's runtime verifier has no verify_findings()") from None
    try:
        from tfpar_lint.verify.devices import unmet
    except ImportError:
        unmet = None
    why = unmet(args.devices) if unmet is not None else None
    if why:  # never run on other devices than asked for
        raise UsageError(why)
    kwargs: dict[str, Any] = {"devices": args.devices, "script_args": script_args, "jobs": jobs}
    if getattr(args, "sandbox", None):
        kwargs["sandbox"] = args.sandbox
    if args.max_steps is not None:
        kwargs["max_steps"] = args.max_steps
    if args.timeout is not None:
        kwargs["timeout"] = args.timeout
    from tfpar_lint.verify.sandbox import Unavailable

    try:
        return list(verify_findings(files, findings, **kwargs) or [])
    except ImportError as e:
        raise UsageError(f"{hint} ({e})") from None
    except Unavailable as e:
        raise UsageError(f"--verify did not run: {e.strerror or e}. The scripts would run with your permissions "
                         f"and nothing isolated; '--sandbox none' runs them so anyway, if you trust them") from None
    except ValueError as e:  # an unknown TFPAR_VERIFY_SANDBOX
        if "sandbox" not in str(e):
            raise
        raise UsageError(f"--verify: {e}") from None


# -- main ----------------------------------------------------------------------

def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except UsageError as e:
        _err(str(e))
        return 2
    except ConfigError as e:
        _err(str(e))
        return 2
    except KeyboardInterrupt:
        _stderr_write("interrupted\n")
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")  # silence the flush at exit
        except OSError:
            pass
        return 1
    except Exception as e:  # a bug: one line, unless asked for the traceback
        if os.environ.get("TFPAR_LINT_DEBUG"):
            raise
        _err(f"internal error: {type(e).__name__}: {e} (set TFPAR_LINT_DEBUG=1 to see the traceback)")
        return 2


COMMANDS = ("check", "rule", "server")


def _first_positional(argv: list[str], parser: argparse.ArgumentParser) -> Optional[int]:
    """Index of the first argument that is neither an option nor an option's value (so that
    ``tfpar-lint --no-cache check DIR`` finds ``check``), or None."""
    takes_value = {opt for action in parser._actions for opt in action.option_strings
                   if action.nargs != 0}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return None
        if a.startswith("-") and a != "-":
            if "=" not in a and a in takes_value:
                i += 1  # its value
            i += 1
            continue
        return i
    return None


def _main(argv: list[str]) -> int:
    # `tfpar-lint check PATHS` is ruff's spelling of `tfpar-lint PATHS` (to lint a folder named
    # `check`, write `./check`); options may come before the command, as in ruff.
    at = _first_positional(argv, build_parser())
    word = argv[at] if at is not None else None
    if word == "check":
        argv = argv[:at] + argv[at + 1:]
    # `tfpar-lint rule CODE` (unless `rule` is a path here and CODE is not a rule)
    elif word == "rule" and at == 0:
        is_path = os.path.exists("rule")
        if len(argv) == 2 and not argv[1].startswith("-") and (not is_path or _resolve_rule(argv[1])[0]):
            sys.stdout.write(rule_page(argv[1]))
            return 0
        if not is_path:
            raise UsageError(f"usage: {PROG} rule CODE")
    elif word == "server" and at == 0 and len(argv) == 1 and not os.path.exists("server"):
        try:
            from tfpar_lint import server
        except ImportError as e:
            raise UsageError(f"the language server needs pygls: {shlex.quote(sys.executable)} -m pip install "
                             f"'pygls>=2.1,<3' (the [lsp] extra) ({e})") from None
        return server.main()
    elif word is not None and word not in COMMANDS and not os.path.lexists(word) and word.isidentifier():
        import difflib

        near = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6)
        if near:  # a mistyped command, not a file name: no such path exists either
            raise UsageError(f"unknown command '{word}' (did you mean '{near[0]}'?)")

    script_args: list[str] = []
    extra_paths: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1:]
        if "--verify" in argv:
            script_args = rest
        else:
            extra_paths = rest

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help / --version
        return int(e.code or 0)
    paths = list(args.paths) + extra_paths
    if sys.stdout is None and not args.output_file and not args.explain:
        raise UsageError("standard output is closed; write the report with -o FILE")

    if args.explain:
        sys.stdout.write(rule_page(args.explain))
        return 0

    settings = load_settings(args.config, no_config=args.no_config)
    settings = settings.with_cli(
        select=_csv(args.select) if args.select is not None else None,
        extend_select=_csv(args.extend_select),
        ignore=_csv(args.ignore),
        exclude=_csv(args.exclude) if args.exclude is not None else None,
        extend_exclude=_csv(args.extend_exclude),
        jobs=args.jobs,
        format=args.format,
        tf_version=args.tf_version,
        project=False if args.no_project else None,
        max_file_size=args.max_file_size,
        file_timeout=args.file_timeout,
    )
    fmt = settings.format

    if args.list_rules:
        list_rules(fmt, sys.stdout)
        return 0
    if args.show_settings:
        sys.stdout.write(settings.describe(paths) + "\n")
        return 0

    # the settings' fix / unsafe-fixes / show-fixes, unless the command line says otherwise (ruff)
    for name in ("fix", "unsafe_fixes", "show_fixes"):
        if getattr(args, name) is None:
            setattr(args, name, bool(getattr(settings, name)))
    if args.verify and args.fix and "--fix" not in argv:
        args.fix = False  # `fix = true` in the settings does not apply to --verify runs
    fix_mode = bool(args.fix or args.fix_only or args.diff)
    quiet = args.quiet or args.silent
    if not paths:
        paths = ["-"] if args.stdin_filename else ["."]
    if args.verify and "-" in paths:
        raise UsageError("--verify runs scripts from files; it cannot read standard input")
    if not args.verify and (script_args or args.max_steps or args.timeout or args.show_output or args.sandbox):
        raise UsageError("--max-steps/--timeout/--show-output/--sandbox and script arguments need --verify")
    if args.verify and (fix_mode or args.add_noqa):
        raise UsageError("--verify runs the scripts as they are: use it without --fix/--diff/--fix-only/--add-noqa")
    if args.add_noqa and fix_mode:
        raise UsageError("--add-noqa cannot be combined with --fix/--diff/--fix-only")

    log = _Log(args.verbose and not args.silent)
    log(f"settings: {settings.config_path or 'defaults (no [tool.tfpar-lint] table found)'}; "
        f"project root {settings.root}")

    from tfpar_lint.discovery import discover, is_excluded

    found = discover(paths, settings.all_excludes, settings.root, force_exclude=args.force_exclude)
    log(f"{len(found.files)} file(s) to lint" + (" and standard input" if found.stdin else ""))
    options = settings.analysis_options()
    if args.explain_silence:
        from tfpar_lint import census

        return census.main_lines(found.files, options, settings.base_enabled(), sys.stdout)
    results: list[Any] = []
    errors: list[FileError] = [FileError(p.path, p.message) for p in found.problems]

    show_progress = (not args.no_progress and not quiet and len(found.files) > PROGRESS_MIN_FILES
                     and hasattr(sys.stderr, "isatty") and sys.stderr.isatty())
    bar = _Progress(sys.stderr) if show_progress else None
    cache_dir: Optional[str] = None
    if not args.no_cache:
        cache_dir = args.cache_dir or settings.cache_dir
        if not args.cache_dir and not os.path.isabs(cache_dir):
            cache_dir = os.path.join(settings.root, cache_dir)
    import time

    t0 = time.perf_counter()
    try:
        if found.files:
            results.extend(_lint_files(found.files, settings, options, settings.jobs, bar, cache_dir))
    finally:
        if bar is not None:
            bar.close()
    stdin_source: Optional[str] = None
    stdin_result: Any = None
    if found.stdin:
        name = args.stdin_filename
        if not (args.force_exclude and name and is_excluded(name, settings.all_excludes, settings.root)):
            stdin_result, stdin_source = _lint_stdin(settings, name, options)
            results.append(stdin_result)
    log(f"linted in {time.perf_counter() - t0:.2f} s: "
        f"{sum(1 for r in results if getattr(r, 'skipped', False))} file(s) skipped by the pre-filter")

    # -- fixes ------------------------------------------------------------------
    fixed: dict[str, list[Finding]] = {}
    diffs: list[str] = []
    modified = 0
    stdin_fixed: Optional[str] = None
    if fix_mode:
        for k, r in enumerate(results):
            if r.error is not None or not any(_applicable(f, args.unsafe_fixes) for f in r.findings):
                continue
            is_stdin = r is stdin_result
            out = _fix_one(r.path, stdin_source if is_stdin else None, settings, options, args, log)
            if out is None:
                continue
            source, outcome = out
            results[k] = outcome.result
            if outcome.reverted and not quiet:
                _warn(f"{r.path}: {outcome.reverted}")
            if outcome.source == source:
                continue
            fixed[r.path] = outcome.fixed
            if args.diff:
                diffs.append(_unified_diff(r.path, source, outcome.source))
            elif is_stdin:
                stdin_fixed = outcome.source
            else:
                _write_fixed(r.path, outcome.source)
                modified += 1
                log(f"fixed {len(outcome.fixed)} finding(s) in {r.path}")
        if is_stdin_fix := (found.stdin and stdin_source is not None and not args.diff):
            # ruff's rule for `--fix -`: the fixed code goes to standard output
            sys.stdout.write(stdin_fixed if stdin_fixed is not None else stdin_source)
            sys.stdout.flush()
    else:
        is_stdin_fix = False

    findings: list[Finding] = []
    for r in results:
        if r.error is not None:
            errors.append(r.error)
        findings.extend(r.findings)
    from tfpar_lint import versions

    withheld: dict[str, dict[str, int]] = {}  # path -> counts of findings held back
    for r in results:
        for note in getattr(r, "notes", None) or ():
            got = versions.parse_withheld(note)
            if got is not None:
                withheld[r.path] = got
            elif not quiet:
                _warn(f"{r.path}: {note}")
    run_notes = [versions.withheld_summary(withheld)] if withheld else []
    if not quiet:
        for note in run_notes:  # once for the run, not once per file
            _warn(note)
    if any(getattr(r, "capped", False) for r in results) and not quiet:
        from tfpar_lint.semantic.project import BUDGET_BASE, BUDGET_FACTOR, MAX_MODULES, POOL_MAX

        _warn(f"whole-project analysis read, per linted file, at most {BUDGET_BASE // 1024} KB plus "
              f"{BUDGET_FACTOR:g} times the file's size of the project's other files, with what the files "
              f"linted before it left unused (at most {POOL_MAX // 1024} KB for one file, and {MAX_MODULES} files "
              f"per process); imports beyond that were not followed (some findings may be missing)")

    if not found.files and not found.stdin and not found.problems and args.paths and not quiet:
        _warn("no Python files or notebooks found under the given paths")

    if args.add_noqa:
        added = _add_noqa(results)
        if not args.silent:
            sys.stderr.write(f"Added {added} noqa directive{'' if added == 1 else 's'}.\n")
        return 2 if errors else 0

    n_fixed = sum(len(v) for v in fixed.values())
    if args.diff or args.fix_only:
        stream = sys.stdout
        if args.diff and not args.silent:
            for d in diffs:
                stream.write(d)
        line = _fix_only_summary(findings, n_fixed, args)
        if line and not quiet:
            stream.write(line + "\n")
        if errors:
            return 2
        if args.diff:
            return 1 if diffs else 0
        return 1 if (args.exit_non_zero_on_fix and modified) else 0

    runs: list[Any] = []
    interrupted = 0
    if args.verify:
        scripts = _scripts_to_run(found.files, paths, findings, quiet=quiet)
        if scripts:  # a named clean script runs too: a mistake the linter missed is reported as RUNTIME
            try:
                runs = _verify(scripts, findings, args, script_args, settings.jobs)
            except KeyboardInterrupt as e:  # lose nothing: report the findings and the finished runs
                runs = list(getattr(e, "runs", []) or [])
                interrupted = getattr(e, "signum", 2) or 2
                _exit_on_next_signal()
                sys.stderr.write(f"{PROG}: interrupted: {len(runs)} of {len(scripts)} script(s) verified; "
                                 f"the others were stopped or not started\n")
        for run in runs:
            findings.extend(run.new_findings() if hasattr(run, "new_findings") else [])

    from tfpar_lint.output import Report, write

    report = Report(findings=findings, errors=errors, runs=runs, notes=run_notes,
                    verified=args.verify, root=settings.root if settings.config_path else os.getcwd(),
                    unsafe_fixes=args.unsafe_fixes, show_source=args.show_source, verbose=args.verbose)
    if stdin_result is not None and stdin_source is not None:
        report.sources[stdin_result.path] = stdin_fixed if stdin_fixed is not None else stdin_source
    if fmt == "sarif":
        report.runs = runs
    if runs and fmt in ("json", "github", "sarif"):
        from tfpar_lint.output.text import script_header

        for run in runs:  # stdout stays machine-readable: one line per script on stderr
            fs = [f.verification.status for f in findings
                  if f.verification is not None and os.path.realpath(f.path) == os.path.realpath(run.path)]
            line = script_header(run, fs) if hasattr(run, "outcome") else str(run.summary())
            sys.stderr.write(line.rstrip("\n") + "\n")

    def emit(stream: TextIO) -> None:
        if args.silent:
            return
        write(fmt, report, stream, statistics=args.statistics)
        if fmt in ("text", "concise", "full") and not quiet:
            if args.show_fixes and fix_mode and fixed:
                stream.write(_show_fixes(fixed))
            if (fmt != "text" or fix_mode) and not (args.verify and runs):  # --verify ends with its own counts
                for line in summary_lines(findings, errors, n_fixed, fix_mode, args.unsafe_fixes):
                    stream.write(line + "\n")
        if args.count:
            stream.write(f"{len(findings) + len(errors)}\n")

    if args.output_file:
        report.color = args.color == "always"
        try:
            with open(args.output_file, "w", encoding="utf-8", errors="backslashreplace", newline="") as fh:
                emit(fh)
        except OSError as e:
            raise UsageError(f"cannot write {args.output_file}: {e.strerror or e}") from None
    else:
        target = sys.stderr if is_stdin_fix else sys.stdout
        report.color = use_color(args.color, target)
        try:
            if hasattr(target, "reconfigure"):
                target.reconfigure(errors="backslashreplace")
            emit(target)
            target.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise UsageError(f"cannot write the report to standard output: {e.strerror or e}") from None

    if runs:
        _show_outputs(runs, always=args.show_output)
    if interrupted:
        # Leave now: in the interpreter's shutdown Python restores the default handlers, and another
        # Ctrl-C arriving then would kill the process by the signal instead of `_exit_on_next_signal`.
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(128 + interrupted)
    not_run = _unverified(runs, findings)
    rc = exit_code(findings, errors, verified=args.verify, exit_zero=args.exit_zero, not_run=len(not_run))
    if rc == 0 and args.exit_non_zero_on_fix and modified:
        rc = 1
    return rc


# -- fix helpers ---------------------------------------------------------------------

class _Log:
    """-v: one line per step on standard error."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, msg: str) -> None:
        if self.on:
            sys.stderr.write(f"[{PROG}] {msg}\n")


def use_color(choice: str, stream: Any) -> bool:
    """ruff's rule: always/never as asked; auto: NO_COLOR (non-empty) turns colours off, else
    FORCE_COLOR (non-empty) turns them on, else colours only on a terminal."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return bool(getattr(stream, "isatty", None) and stream.isatty())


def _applicable(f: Finding, unsafe: bool) -> bool:
    from tfpar_lint.fix import applicable

    return applicable(f.fix, unsafe)


def _fix_one(path: str, stdin_source: Optional[str], settings: Settings, options: Any, args: argparse.Namespace,
             log: "_Log") -> Optional[tuple[str, Any]]:
    """(the text before, engine.FixOutcome) for one file; None when it cannot be fixed in place."""
    from tfpar_lint import engine

    if stdin_source is not None:
        source = stdin_source
    else:
        data, err = engine.read_bytes(path, settings.max_file_size)
        if data is None:
            return None
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        try:
            source = data.decode("utf-8")
        except UnicodeDecodeError:
            log(f"{path}: not UTF-8, not fixed")
            return None
    if path.endswith(".ipynb"):
        log(f"{path}: notebooks are not fixed")
        return None
    outcome = engine.fix_source(source, path, settings.enabled_for(path), options, unsafe=args.unsafe_fixes)
    return source, outcome


def _write_fixed(path: str, text: str) -> None:
    with open(path, "rb") as fh:
        bom = fh.read(3) == b"\xef\xbb\xbf"
    tmp = f"{path}.tfpar-lint-fix.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
        try:
            import shutil

            shutil.copymode(path, tmp)
        except OSError:
            pass
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise UsageError(f"cannot write the fixed {path}: {e.strerror or e}") from None


def _unified_diff(path: str, before: str, after: str) -> str:
    import difflib

    lines = list(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                      fromfile=path, tofile=path))
    out = "".join(ln if ln.endswith(("\n", "\r")) else ln + "\n\\ No newline at end of file\n" for ln in lines)
    return out + "\n"


def _plural(n: int, word: str, plural: str = "") -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def summary_lines(findings: Sequence[Finding], errors: Sequence[FileError], n_fixed: int, fix_mode: bool,
                  unsafe: bool) -> list[str]:
    """ruff's closing lines: "All checks passed!", "Found 3 errors (2 fixed, 1 remaining).",
    "[*] 2 fixable with `--fix`." and the hint at unsafe fixes not applied."""
    remaining = len(findings) + len(errors)
    total = remaining + n_fixed
    if total == 0:
        return ["All checks passed!"]
    out = []
    if fix_mode and n_fixed:
        out.append(f"Found {_plural(total, 'error')} ({n_fixed} fixed, {remaining} remaining).")
    else:
        out.append(f"Found {_plural(total, 'error')}.")
    fixable = sum(1 for f in findings if _applicable(f, unsafe))
    hidden = 0 if unsafe else sum(1 for f in findings if f.fix and f.fix.get("applicability") == "unsafe")
    hint = f"{_plural(hidden, 'unsafe fix', 'unsafe fixes')} available with `--fix --unsafe-fixes`"
    if not fix_mode and fixable:
        out.append(f"[*] {fixable} fixable with `--fix`" + (f" ({hint})." if hidden else "."))
    elif hidden:
        out.append(hint[0].upper() + hint[1:] + ".")
    return out


def _fix_only_summary(findings: Sequence[Finding], n_fixed: int, args: argparse.Namespace) -> str:
    """ruff's line for --diff ("Would fix 2 errors.") and --fix-only ("Fixed 2 errors.")."""
    hidden = 0 if args.unsafe_fixes else sum(1 for f in findings if f.fix and f.fix.get("applicability") == "unsafe")
    extra = f"{_plural(hidden, 'fix', 'fixes')} available with `--unsafe-fixes`"
    if args.diff:
        if n_fixed:
            return f"Would fix {_plural(n_fixed, 'error')}" + (f" ({hidden} additional {extra[len(str(hidden)) + 1:]})." if hidden else ".")
        return f"No errors would be fixed ({extra})." if hidden else ""
    if n_fixed:
        return f"Fixed {_plural(n_fixed, 'error')}" + (f" ({hidden} additional {extra[len(str(hidden)) + 1:]})." if hidden else ".")
    return f"No errors fixed ({extra})." if hidden else ""


def _show_fixes(fixed: dict[str, list[Finding]]) -> str:
    """ruff's --show-fixes block: per file, how many findings of each code were fixed."""
    from collections import Counter

    total = sum(len(v) for v in fixed.values())
    out = [f"\nFixed {_plural(total, 'error')}:"]
    for path in sorted(fixed):
        out.append(f"- {path}:")
        counts = Counter((f.code, f.name) for f in fixed[path])
        for (code, name), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            out.append(f"    {n} \u00d7 {code} ({name})")
    return "\n".join(out) + "\n\n"


def _add_noqa(results: list[Any]) -> int:
    from tfpar_lint import engine
    from tfpar_lint.noqa import add_noqa

    total = 0
    for r in results:
        if r.error is not None or not r.findings or r.path.endswith(".ipynb") or not os.path.isfile(r.path):
            continue
        source, err = engine.read_source(r.path)
        if source is None:
            continue
        new, n = add_noqa(source, r.findings)
        if n and new != source:
            _write_fixed(r.path, new)
            total += n
    return total


def _exit_on_next_signal() -> None:
    """After an interrupted --verify the report is still printed; another Ctrl-C or SIGTERM leaves at once."""
    import signal

    def leave(signum, frame):
        os._exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, leave)
        except (ValueError, OSError):  # not the main thread
            pass


def _scripts_to_run(files: Sequence[str], paths: Sequence[str], findings: Sequence[Finding],
                    quiet: bool = True) -> list[str]:
    """What ``--verify`` runs: files named on the command line, and the entry points found in the
    folders given that use a strategy, flagged or not (``tfpar_lint.verify.select``); unless ``quiet``,
    says on stderr which files of the folders were not run and why."""
    from tfpar_lint.verify.select import select

    sel = select(files, paths, [f.path for f in findings])
    if not quiet and (sel.skipped or sel.no_strategy):
        from tfpar_lint.output import display_path

        parts = [f"{display_path(p)} ({why})" for p, why in sel.skipped[:20]]
        if len(sel.skipped) > 20:
            parts.append(f"{len(sel.skipped) - 20} more")
        if sel.no_strategy:
            parts.append(f"{sel.no_strategy} file{'s' if sel.no_strategy != 1 else ''} that use no strategy")
        _stderr_write(f"{PROG}: --verify did not run: {'; '.join(parts)}\n")
    return sel.run


OUTPUT_TAIL_LINES = 20


def _show_outputs(runs: Sequence[Any], always: bool) -> None:
    """The scripts' own stdout/stderr on stderr: all of it with --show-output, else the last lines of a
    script that failed (an argparse error shows as its usage line, not as ``SystemExit: 2``)."""
    for run in runs:
        failed = getattr(run, "outcome", "") in ("error", "failed", "hung")
        if not always and (not failed or getattr(run, "stderr_tail", None)):
            continue  # a COULD_NOT_RUN script's last stderr lines are in the report already
        for name in ("stdout", "stderr"):
            text = getattr(run, name, "") or ""
            if not text.strip():
                continue
            lines = text.rstrip("\n").split("\n")
            if not always and len(lines) > OUTPUT_TAIL_LINES:
                head = f"---- {run.path}: last {OUTPUT_TAIL_LINES} lines of {name} (--show-output for all) ----"
                lines = lines[-OUTPUT_TAIL_LINES:]
            else:
                head = f"---- {run.path}: {name} ----"
            from tfpar_lint.output.base import printable

            sys.stderr.write(printable(head) + "\n" + "\n".join(printable(ln, keep="\t") for ln in lines) + "\n")


def _unverified(runs: Sequence[Any], findings: Sequence[Finding]) -> list[Any]:
    """The scripts the run did not verify: nothing seen in them (no CONFIRMED or RUNTIME finding), and
    they could not run through (COULD_NOT_RUN) or a finding of theirs is INCONCLUSIVE."""
    from tfpar_lint.finding import COULD_NOT_RUN

    by_path: dict[str, list[str]] = {}
    for f in findings:
        if f.verification is not None:
            by_path.setdefault(os.path.realpath(f.path), []).append(f.verification.status)
    out = []
    for run in runs:
        statuses = by_path.get(os.path.realpath(run.path), [])
        if any(s in (CONFIRMED, RUNTIME) for s in statuses):
            continue
        if getattr(run, "status", "") == COULD_NOT_RUN or INCONCLUSIVE in statuses:
            out.append(run)
    return out


# ruff reports a file it cannot parse or read as a diagnostic of that file (exit 1, and 0 under
# --exit-zero); only a failure of the tool itself (E903: the analysis gave up) is exit 2.
DIAGNOSTIC_ERRORS = frozenset({"E999", "E902"})


def exit_code(findings: Iterable[Finding], errors: Sequence[FileError], *, verified: bool,
              exit_zero: bool, not_run: int = 0) -> int:
    """0 clean, 1 findings (syntax and I/O errors included, as ruff), 2 the tool failed on a
    file (E903).  Under --verify: 2 when a script was not verified (COULD_NOT_RUN, or a finding
    INCONCLUSIVE; not with --exit-zero), else 1 when a finding is CONFIRMED or was found at runtime
    (RUNTIME), else 0: never 0 with a script the run did not verify.  With ``exit_zero``, a file
    given up at a per-file limit (CPU time, memory; it is reported) does not make it 2 either."""
    from tfpar_lint.output import error_code

    if any(error_code(e) not in DIAGNOSTIC_ERRORS and not (exit_zero and e.at_limit) for e in errors) \
            or (verified and not_run and not exit_zero):
        return 2
    findings = list(findings)
    if exit_zero:
        return 0
    if errors:
        return 1
    if not findings:
        return 0
    if not verified:
        return 1
    if any(f.verification is not None and f.verification.status in (CONFIRMED, RUNTIME) for f in findings):
        return 1
    return 0


__all__ = ["main", "build_parser", "exit_code", "rule_page", "list_rules"]
