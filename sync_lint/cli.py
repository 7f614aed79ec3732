"""The command line: ``sync-lint check``, ``fix``, ``rule``, ``clean``, ``server``.

Exit status: 0 clean, 1 findings (or, for ``fix --diff``, a diff), 2 the tool could not do its
job (bad configuration, a file it could not read or decode, an internal error).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import time
from pathlib import Path

from sync_lint import __version__, config
from sync_lint.diagnostics import Diagnostic
from sync_lint.pipeline import profile
from sync_lint.pipeline.discover import (
    DEFAULT_EXCLUDE,
    Discovery,
    git_tracked_python_files,
)
from sync_lint.pipeline.runner import Linter, WorkerDied
from sync_lint.report import FORMATS
from sync_lint.report.text import fixable, statistics

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """A problem with how the tool was invoked; printed on one line, exit 2."""


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", help="files or folders (default: the files git tracks, else `.`)")
    parser.add_argument("--select", type=_codes, help="comma-separated codes or prefixes to enable (replaces config)")
    parser.add_argument("--extend-select", type=_codes, default=[], help="codes or prefixes to enable in addition")
    parser.add_argument("--ignore", type=_codes, default=[], help="codes or prefixes to disable")
    parser.add_argument("--preview", action="store_true", default=None, help="enable preview rules")
    parser.add_argument("--config", type=Path, help="a pyproject.toml to read instead of the nearest one")
    parser.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    parser.add_argument("--exclude", type=_codes, default=None, help="globs to exclude (replaces the defaults)")
    parser.add_argument("--extend-exclude", type=_codes, default=[], help="globs to exclude in addition")
    parser.add_argument(
        "--force-exclude", action="store_true", help="apply the exclusions to files named explicitly too (pre-commit)"
    )
    parser.add_argument(
        "--no-default-paths",
        action="store_true",
        help="with no paths, check nothing instead of the git-tracked files (hooks that pass the changed files)",
    )
    parser.add_argument("--unsafe-fixes", action="store_true", help="include unsafe fixes")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    parser.add_argument(
        "--parse-whole-files", action="store_true",
        help="parse every file a rule may match whole, not only the functions the project plan keeps (same findings, slower)",
    )
    parser.add_argument("--cache-dir", help="cache folder (default: .sync_lint_cache beside the config)")
    parser.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: all cores)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no summary line on stderr")


def _codes(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sync-lint",
        description="Find casts relied on for contiguity and undeclared GPU->CPU syncs in GPU inference code.",
    )
    parser.add_argument("--version", action="version", version=f"sync-lint {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser("check", help="report findings")
    _common_options(check)
    check.add_argument("--output-format", choices=sorted(FORMATS), default="text")
    check.add_argument("--output-file", "-o", help="write the report here instead of stdout")
    check.add_argument("--statistics", action="store_true", help="count findings per rule")
    check.add_argument(
        "--profile", action="store_true", help="print time per phase, analysis and rule to stderr (summed over workers)"
    )
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    adoption = check.add_mutually_exclusive_group()
    adoption.add_argument("--baseline", metavar="FILE", help="report only findings not recorded in FILE")
    adoption.add_argument(
        "--write-baseline", metavar="FILE", help="record the current findings in FILE (exit 0 unless a file failed)"
    )
    check.add_argument(
        "--add-noqa", action="store_true", help="add `# noqa: CODE` to every line with a finding (with --baseline: new ones)"
    )

    fix = commands.add_parser("fix", help="apply fixes (safe ones; unsafe ones with --unsafe-fixes)")
    _common_options(fix)
    fix.add_argument("--diff", action="store_true", help="print a unified diff; write nothing; exit 1 if any")
    fix.add_argument("--exit-non-zero-on-fix", action="store_true", help="exit 1 if anything was fixed")

    rule = commands.add_parser("rule", help="print a rule's documentation")
    rule.add_argument("code", nargs="?", help="a code (GPU201) or name (undeclared-sync-in-hot-path)")
    rule.add_argument("--all", action="store_true", help="print every rule's page")

    clean = commands.add_parser("clean", help="remove the cache")
    clean.add_argument("--cache-dir", help="cache folder (default: .sync_lint_cache beside the config)")
    clean.add_argument("--config", type=Path, help="a pyproject.toml to read instead of the nearest one")
    clean.add_argument("--isolated", action="store_true", help="ignore every configuration file")

    commands.add_parser("server", help="run the language server on stdin/stdout (for editors)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            return run_check(args)
        if args.command == "fix":
            return run_fix(args)
        if args.command == "rule":
            return run_rule(args)
        if args.command == "clean":
            return run_clean(args)
        if args.command == "server":
            return run_server(args)
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    except (config.ConfigError, UsageError, WorkerDied) as exc:
        print(f"sync-lint: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("sync-lint: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_CLEAN


# -- set-up shared by check and fix --------------------------------------------------------------
def _settings(args) -> config.Settings:
    start = Path(args.paths[0]) if args.paths else Path.cwd()
    if args.config is not None and not args.config.is_file():
        raise UsageError(f"--config {args.config}: no such file")
    settings = config.load(args.config, args.isolated, start=start)
    values = dict(settings.values)
    for flag, key in (("select", "select"), ("exclude", "exclude")):
        if getattr(args, flag) is not None:
            values[key] = getattr(args, flag)
    values["extend-select"] = list(settings["extend-select"]) + args.extend_select
    values["ignore"] = list(settings["ignore"]) + args.ignore
    values["extend-exclude"] = list(settings["extend-exclude"]) + args.extend_exclude
    if args.preview:
        values["preview"] = True
    for key in ("select", "extend-select", "ignore"):
        config.check_codes(values.get(key, []), f"--{key}")
    settings.values = values
    return settings


def _files(args, settings: config.Settings) -> list[str]:
    exclude = list(settings["exclude"] or DEFAULT_EXCLUDE) + list(settings["extend-exclude"])
    discovery = Discovery(exclude, settings.root)
    paths = args.paths
    if not paths and args.no_default_paths:
        return []
    if not paths:
        tracked = git_tracked_python_files()
        if tracked is not None:
            return [path for path in tracked if not discovery.is_excluded(path)]
        paths = ["."]
    for path in paths:
        if not os.path.lexists(path):
            raise UsageError(f"{path}: no such file or folder")
    files = discovery.files(paths)
    if args.force_exclude:
        files = [path for path in files if not _excluded_with_parents(discovery, path)]
    return files


def _excluded_with_parents(discovery: Discovery, path: str) -> bool:
    """A file named explicitly is excluded if it, or a folder above it, matches an exclusion."""
    current = os.path.normpath(path)
    while current and current not in (".", os.sep):
        if discovery.is_excluded(current):
            return True
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return False


def _cache_dir(args, settings: config.Settings) -> str:
    return args.cache_dir or str(settings.root / ".sync_lint_cache")


def _linter(args, settings: config.Settings) -> Linter:
    cache_dir = None if args.no_cache else _cache_dir(args, settings)
    return Linter(settings, cache_dir=cache_dir, fast=not args.parse_whole_files)


class Progress:
    """A progress counter on stderr, only when stderr is a terminal and the run is long."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.enabled = total >= 200 and sys.stderr.isatty()

    def __call__(self, count: int) -> None:
        if not self.enabled:
            return
        self.done += count
        width = 30
        filled = width * self.done // max(self.total, 1)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} files")
        sys.stderr.flush()

    def finish(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 60 + "\r")


def _exit_status(diagnostics: list[Diagnostic], findings_fail: bool) -> int:
    if any(d.is_tool_error for d in diagnostics):
        return EXIT_ERROR
    return EXIT_FINDINGS if diagnostics and findings_fail else EXIT_CLEAN


def _summary(files: int, diagnostics: list[Diagnostic], unsafe: bool, seconds: float, extra: str = "") -> str:
    fixables = sum(1 for d in diagnostics if fixable(d, unsafe))
    # Unsafe fixes are not applied nor marked without --unsafe-fixes; say that they exist.
    hidden = 0 if unsafe else sum(1 for d in diagnostics if fixable(d, True)) - fixables
    more = f", {hidden} more with --unsafe-fixes" if hidden else ""
    noun = "finding" if len(diagnostics) == 1 else "findings"
    return (
        f"sync-lint: {files} file{'s' if files != 1 else ''} checked, {len(diagnostics)} {noun}"
        f" ({fixables} fixable{more}){extra} in {seconds:.2f}s"
    )


# -- commands ---------------------------------------------------------------------------------
def run_check(args) -> int:
    started = time.perf_counter()
    if args.write_baseline and args.add_noqa:
        raise UsageError("--write-baseline and --add-noqa: choose one way to accept today's findings")
    known = _load_baseline(args.baseline) if args.baseline else None  # before a long run, not after
    profiler = profile.enable() if args.profile else None
    settings = _settings(args)
    with profile.span("discover"):
        files = _files(args, settings)
    linter = _linter(args, settings)
    progress = Progress(len(files))
    result = linter.run(files, jobs=args.jobs, progress=progress)
    progress.finish()
    if profiler is not None:
        print(profiler.report(time.perf_counter() - started, len(files), result.workers), file=sys.stderr)
    diagnostics = sorted(result.diagnostics, key=Diagnostic.sort_key)
    extra = ""
    if args.write_baseline:
        from sync_lint import baseline

        try:
            recorded = baseline.write(args.write_baseline, diagnostics)
        except baseline.BaselineError as exc:
            raise UsageError(f"--write-baseline {exc}") from None
        # Only what cannot be recorded (files that could not be checked) is still reported.
        diagnostics = [d for d in diagnostics if d.is_tool_error]
        extra = f", {recorded} recorded in {args.write_baseline}"
    elif known is not None:
        from sync_lint import baseline

        filtered = baseline.filter_new(diagnostics, known, checked=files)
        diagnostics = filtered.new
        extra = f", {filtered.known} baselined"
        if filtered.gone:
            extra += f" ({filtered.gone} baselined gone: refresh with --write-baseline)"
    if args.add_noqa:
        return _add_noqa(args, files, diagnostics, started, extra)
    report = FORMATS[args.output_format](diagnostics, args.unsafe_fixes)
    if args.statistics and args.output_format in ("text", "concise"):
        report = statistics(diagnostics, args.unsafe_fixes)
    if args.output_file:
        try:
            with open(args.output_file, "w", encoding="utf-8") as handle:
                handle.write(report)
        except OSError as exc:
            raise UsageError(f"--output-file {args.output_file}: {exc.strerror}") from None
    else:
        sys.stdout.write(report)
    if not args.quiet:
        print(
            _summary(len(files), diagnostics, args.unsafe_fixes, time.perf_counter() - started, extra), file=sys.stderr
        )
    return _exit_status(diagnostics, not args.exit_zero)


def _load_baseline(path: str):
    from sync_lint import baseline

    try:
        return baseline.load(path)
    except baseline.BaselineError as exc:
        raise UsageError(f"--baseline {exc}") from None


def _add_noqa(args, files: list[str], diagnostics: list[Diagnostic], started: float, extra: str) -> int:
    from sync_lint.add_noqa import add_noqa

    result = add_noqa(diagnostics)
    left = sorted([d for d in diagnostics if d.is_tool_error] + result.errors, key=Diagnostic.sort_key)
    sys.stdout.write(FORMATS["text"](left, args.unsafe_fixes))
    if not args.quiet:
        seconds = time.perf_counter() - started
        print(
            f"sync-lint: {len(files)} file{'s' if len(files) != 1 else ''} checked, added {result.codes_added}"
            f" noqa code{'s' if result.codes_added != 1 else ''} in {result.files_changed}"
            f" file{'s' if result.files_changed != 1 else ''}{extra} in {seconds:.2f}s",
            file=sys.stderr,
        )
    return EXIT_ERROR if left else EXIT_CLEAN


def run_fix(args) -> int:
    from sync_lint.pipeline.fix import fix_path, write_atomically

    started = time.perf_counter()
    settings = _settings(args)
    files = _files(args, settings)
    linter = _linter(args, settings)
    result = linter.run(files, jobs=args.jobs)
    by_file: dict[str, list[Diagnostic]] = {}
    for d in result.diagnostics:
        by_file.setdefault(d.path, []).append(d)
    remaining: list[Diagnostic] = []
    fixed_count = 0
    any_diff = False
    for path in sorted(by_file):
        found = by_file[path]
        if not any(fixable(d, args.unsafe_fixes) for d in found):
            remaining.extend(found)
            continue
        outcome = fix_path(linter, path, result.index, args.unsafe_fixes)
        if isinstance(outcome, Diagnostic):
            remaining.append(outcome)
            continue
        remaining.extend(outcome.remaining)
        if outcome.error is not None:
            remaining.append(outcome.error)
        if not outcome.changed:
            continue
        any_diff = True
        fixed_count += outcome.fixes_applied
        if args.diff:
            sys.stdout.write(_unified_diff(path, outcome.original, outcome.fixed))
        else:
            error = write_atomically(outcome)
            if error is not None:
                remaining.append(error)
                fixed_count -= outcome.fixes_applied
    remaining.sort(key=Diagnostic.sort_key)
    if not args.diff:
        sys.stdout.write(FORMATS["text"](remaining, args.unsafe_fixes))
    if not args.quiet:
        verb = "would fix" if args.diff else "fixed"
        print(
            _summary(len(files), remaining, args.unsafe_fixes, time.perf_counter() - started, f", {fixed_count} {verb}"),
            file=sys.stderr,
        )
    if any(d.is_tool_error for d in remaining):
        return EXIT_ERROR
    if args.diff:
        return EXIT_FINDINGS if any_diff else EXIT_CLEAN
    if args.exit_non_zero_on_fix and fixed_count:
        return EXIT_FINDINGS
    return EXIT_FINDINGS if remaining else EXIT_CLEAN


def run_server(args) -> int:
    try:
        from sync_lint.server import serve
    except ImportError as exc:
        raise UsageError(f"server: needs pygls 2 ({exc}): pip install 'sync-lint[server]'") from None
    serve()
    return EXIT_CLEAN


def _unified_diff(path: str, before: str, after: str) -> str:
    """A patch ``git apply`` / ``patch`` accept, with the marker for a missing final newline."""
    lines = []
    for line in difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile=f"a/{path}", tofile=f"b/{path}"
    ):
        lines.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(lines)


def run_clean(args) -> int:
    """Remove the cache (as ``ruff clean`` does): what a run would use, found the same way."""
    from sync_lint.pipeline.cache import clean

    if args.config is not None and not args.config.is_file():
        raise UsageError(f"--config {args.config}: no such file")
    folder = _cache_dir(args, config.load(args.config, args.isolated))
    try:
        removed = clean(folder)
    except OSError as exc:
        raise UsageError(f"{exc.filename or folder}: cannot remove: {exc.strerror}") from None
    if removed is None:
        print(f"sync-lint: no cache at {folder}", file=sys.stderr)
    else:
        files, size = removed
        noun = "entry" if files == 1 else "entries"
        print(f"sync-lint: removed the cache at {folder} ({files} {noun}, {size / 1e6:.1f} MB)", file=sys.stderr)
    return EXIT_CLEAN


def run_rule(args) -> int:
    from sync_lint.docs import render_rule
    from sync_lint.rules import all_rules, rule_by_code

    if args.all:
        sys.stdout.write("\n".join(render_rule(rule) for rule in all_rules()))
        return EXIT_CLEAN
    if not args.code:
        raise UsageError("rule: give a code (e.g. GPU201) or --all")
    rule = rule_by_code(args.code.upper()) or rule_by_code(args.code)
    if rule is None:
        raise UsageError(f"rule: unknown rule `{args.code}`")
    sys.stdout.write(render_rule(rule))
    return EXIT_CLEAN
