"""The ``tfpar-lint`` command.

::

    tfpar-lint [PATH ...]                 lint files and folders (default: .)
    tfpar-lint - --stdin-filename x.py    lint standard input
    tfpar-lint rule TFP101                print a rule's page (also --explain TFP101)
    tfpar-lint --list-rules               code, name, default on/off, summary
    tfpar-lint --verify train.py [--devices cpu:2] [-- script args...]

Exit codes: 0 nothing found, 1 findings (with ``--verify``: a finding was
confirmed or could not be decided), 2 usage, configuration or file error (a
file that cannot be read or parsed is reported and the others are still
linted).  Bad input never prints a traceback.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, TextIO

from tfpar_lint import __version__
from tfpar_lint.config import FORMATS, ConfigError, Settings, load_settings, split_csv
from tfpar_lint.finding import NOT_REPRODUCED, FileError, Finding

PROG = "tfpar-lint"
PROGRESS_MIN_FILES = 20
_DEVICES = re.compile(r"^(auto|cpu:[1-9][0-9]*|gpu(:[1-9][0-9]*)?)$")


class UsageError(Exception):
    """Bad command line; ``str()`` is the line to print."""


# -- helpers -------------------------------------------------------------------

def _err(msg: str) -> None:
    sys.stderr.write(f"{PROG}: error: {msg}\n")


def _warn(msg: str) -> None:
    sys.stderr.write(f"{PROG}: warning: {msg}\n")


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
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--timeout must be a positive number of seconds, got {s!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"--timeout must be a positive number of seconds, got {s!r}")
    return v


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
        description="Find tf.distribute mistakes in Python files and notebooks.",
        epilog=f"`{PROG} rule CODE` prints a rule's page. Everything after `--` is passed to the "
               "scripts run by --verify. Exit codes: 0 clean, 1 findings, 2 usage/config/file error.",
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
    out.add_argument("--format", choices=FORMATS, default=None, help="report format (default: text)")
    out.add_argument("-o", "--output-file", metavar="FILE", help="write the report to FILE instead of stdout")
    out.add_argument("--statistics", action="store_true", help="count the findings per code (text format)")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    out.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    info = p.add_argument_group("information")
    info.add_argument("--explain", metavar="CODE", help="print a rule's page and exit")
    info.add_argument("--list-rules", action="store_true", help="list the rules and exit")
    info.add_argument("--show-settings", action="store_true", help="print the resolved settings and exit")
    info.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    cfg = p.add_argument_group("configuration")
    cfg.add_argument("--config", metavar="PATH", help="read settings from this TOML file")
    cfg.add_argument("--no-config", action="store_true", help="ignore pyproject.toml")
    cfg.add_argument("--tf-version", metavar="X.Y", default=None,
                     help="the TensorFlow version the code targets, like ruff's --target-version "
                          "(default: tf-version in [tool.tfpar-lint], else 2.16: tf.keras is Keras 3)")
    cfg.add_argument("-j", "--jobs", type=_positive_int("--jobs"), default=None,
                     help="worker processes (default: all cores)")
    cfg.add_argument("--no-cache", action="store_true",
                     help="neither read nor write the result cache")
    cfg.add_argument("--cache-dir", metavar="DIR", default=None,
                     help="where to keep the result cache (default: cache-dir from the settings, "
                          ".tfpar_lint_cache in the project root)")
    ver = p.add_argument_group("runtime verification (needs tfpar-lint[verify])")
    ver.add_argument("--verify", action="store_true",
                     help="run the PATHs as scripts on real devices to confirm or refute each finding")
    ver.add_argument("--devices", type=_devices, default="auto", help="auto, cpu:N or gpu[:N] (default: auto)")
    ver.add_argument("--max-steps", type=_positive_int("--max-steps"), default=None,
                     help="stop each script after N training steps")
    ver.add_argument("--timeout", type=_positive_float, default=None, help="seconds allowed per script")
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

def _read_stdin() -> bytes:
    return sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode("utf-8")


def _decode(data: bytes, name: str) -> str:
    import io
    import tokenize

    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(enc)
    except (SyntaxError, UnicodeDecodeError, LookupError) as e:
        raise ValueError(f"cannot decode: {e}") from None
    return text[1:] if text.startswith("\ufeff") else text


def _lint_stdin(settings: Settings, display: Optional[str], options: Any) -> Any:
    from tfpar_lint import engine

    name = display or "<stdin>"
    enabled = settings.enabled_for(name)
    try:
        data = _read_stdin()
    except OSError as e:
        return engine.FileResult(path=name, findings=[], error=FileError(name, f"cannot read stdin: {e}"))
    try:
        source = _decode(data, name)
    except ValueError as e:
        return engine.FileResult(path=name, findings=[], error=FileError(name, str(e)))
    # lint_source treats a name ending in .ipynb as notebook JSON.
    return engine.lint_source(source, name, enabled=enabled, options=options)


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
                                         cache_dir=cache_dir))
        offset += len(group)
    return results


def _tensorflow_available() -> bool:
    """Is TensorFlow importable here (without importing it)?"""
    import importlib.util

    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


def _verify(files: list[str], findings: list[Finding], args: argparse.Namespace,
            script_args: list[str], jobs: Optional[int]) -> list[Any]:
    """Run the verifier; raises UsageError when it cannot be used."""
    hint = f"--verify needs TensorFlow: pip install '{PROG}[verify]'"
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
    kwargs: dict[str, Any] = {"devices": args.devices, "script_args": script_args, "jobs": jobs}
    if args.max_steps is not None:
        kwargs["max_steps"] = args.max_steps
    if args.timeout is not None:
        kwargs["timeout"] = args.timeout
    try:
        return list(verify_findings(files, findings, **kwargs) or [])
    except ImportError as e:
        raise UsageError(f"{hint} ({e})") from None


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
        sys.stderr.write("interrupted\n")
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


def _main(argv: list[str]) -> int:
    # `tfpar-lint rule CODE` (unless `rule` is a path here and CODE is not a rule)
    if argv and argv[0] == "rule":
        is_path = os.path.exists("rule")
        if len(argv) == 2 and not argv[1].startswith("-") and (not is_path or _resolve_rule(argv[1])[0]):
            sys.stdout.write(rule_page(argv[1]))
            return 0
        if not is_path:
            raise UsageError(f"usage: {PROG} rule CODE")

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
    )
    fmt = settings.format

    if args.list_rules:
        list_rules(fmt, sys.stdout)
        return 0
    if args.show_settings:
        sys.stdout.write(settings.describe() + "\n")
        return 0

    if not paths:
        paths = ["-"] if args.stdin_filename else ["."]
    if args.verify and "-" in paths:
        raise UsageError("--verify runs scripts from files; it cannot read standard input")
    if not args.verify and (script_args or args.max_steps or args.timeout):
        raise UsageError("--max-steps/--timeout and script arguments need --verify")

    from tfpar_lint.discovery import discover, is_excluded

    found = discover(paths, settings.all_excludes, settings.root, force_exclude=args.force_exclude)
    options = settings.analysis_options()
    results: list[Any] = []
    errors: list[FileError] = [FileError(p.path, p.message) for p in found.problems]

    show_progress = (not args.no_progress and len(found.files) > PROGRESS_MIN_FILES
                     and hasattr(sys.stderr, "isatty") and sys.stderr.isatty())
    bar = _Progress(sys.stderr) if show_progress else None
    cache_dir: Optional[str] = None
    if not args.no_cache:
        cache_dir = args.cache_dir or settings.cache_dir
        if not args.cache_dir and not os.path.isabs(cache_dir):
            cache_dir = os.path.join(settings.root, cache_dir)
    try:
        if found.files:
            results.extend(_lint_files(found.files, settings, options, settings.jobs, bar, cache_dir))
    finally:
        if bar is not None:
            bar.close()
    if found.stdin:
        name = args.stdin_filename
        if not (args.force_exclude and name and is_excluded(name, settings.all_excludes, settings.root)):
            results.append(_lint_stdin(settings, name, options))

    findings: list[Finding] = []
    for r in results:
        if r.error is not None:
            errors.append(r.error)
        findings.extend(r.findings)

    if not found.files and not found.stdin and not found.problems and args.paths:
        _warn("no Python files or notebooks found under the given paths")

    runs: list[Any] = []
    if args.verify:
        scripts = [f for f in found.files]
        if scripts:  # clean scripts run too: their per-family observations show "not reproduced"
            runs = _verify(scripts, findings, args, script_args, settings.jobs)

    from tfpar_lint.output import Report, write

    report = Report(findings=findings, errors=errors, runs=runs if fmt == "text" else [],
                    verified=args.verify, root=settings.root if settings.config_path else os.getcwd())
    if fmt == "sarif":
        report.runs = runs
    if runs and fmt in ("json", "github"):
        for run in runs:
            sys.stderr.write((run.summary() if hasattr(run, "summary") else str(run)).rstrip("\n") + "\n")

    if args.output_file:
        try:
            with open(args.output_file, "w", encoding="utf-8", newline="") as fh:
                write(fmt, report, fh, statistics=args.statistics)
        except OSError as e:
            raise UsageError(f"cannot write {args.output_file}: {e.strerror or e}") from None
    else:
        write(fmt, report, sys.stdout, statistics=args.statistics)
        sys.stdout.flush()

    return exit_code(findings, errors, verified=args.verify, exit_zero=args.exit_zero)


def exit_code(findings: Iterable[Finding], errors: Sequence[FileError], *, verified: bool,
              exit_zero: bool) -> int:
    if errors:
        return 2
    findings = list(findings)
    if exit_zero or not findings:
        return 0
    if not verified:
        return 1
    for f in findings:
        if f.verification is None or f.verification.status != NOT_REPRODUCED:
            return 1  # confirmed, inconclusive, or not run
    return 0


__all__ = ["main", "build_parser", "exit_code", "rule_page", "list_rules"]
