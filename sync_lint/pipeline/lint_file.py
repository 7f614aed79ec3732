"""Lint one file: pre-filter, parse once, run the enabled rules on shared analyses.

The result, ``FileFacts``, is plain data: local diagnostics with positions and fixes already
computed, the file's function summaries and pending cross-file calls, and its suppressions.
It is what worker processes return and what the cache stores.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from sync_lint.analysis.device_words import names_host_copy
from sync_lint.analysis.modules import is_package_init
from sync_lint.analysis.project_names import NOTHING_FROM_THE_PROJECT, FileProjectNames
from sync_lint.analysis.summaries import FunctionSummary, PendingCall
from sync_lint.compiled_methods import compiled_methods
from sync_lint.config import Settings
from sync_lint.diagnostics import Diagnostic
from sync_lint.pipeline import collector, prefilter
from sync_lint.pipeline.profile import span
from sync_lint.pipeline.source import SourceError, SourceFile, split_lines
from sync_lint.pipeline.suppress import Suppressions, is_suppressed, scan, scan_for_ours
from sync_lint.pipeline.units import MaskPlan
from sync_lint.rules.base import Finding, Rule

# libcst and the analyses are imported where a file is parsed, not here: a file that no rule's
# triggers match (about a third of an engine's files) is done without them, and their import
# is most of a one-file run (what pre-commit does).
if TYPE_CHECKING:
    import libcst as cst

    from sync_lint.analysis.context import FileContext
    from sync_lint.pipeline.project_plan import KeptUnits
    from sync_lint.pipeline.scout import Scout


@dataclass
class FileFacts:
    path: str
    module_name: str = ""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    pending: list[PendingCall] = field(default_factory=list)
    summaries: dict[str, FunctionSummary] = field(default_factory=dict)
    # Local name -> dotted name of module-level imports, to follow re-exports across files.
    imports: dict[str, str] = field(default_factory=dict)
    # Qualified names of every function the parsed file defines, summarised or not.
    functions: frozenset[str] = frozenset()
    suppressions: Suppressions = field(default_factory=Suppressions)
    parsed: bool = False
    # The properties it defines that are named for a host copy (``host_copy_properties``), for
    # GPU203's findings on reads of such attributes (``rules.base.HOST_COPY``).
    host_properties: frozenset[str] = frozenset()
    # Parsed with some units masked (``pipeline.units``): the findings, as (line, column,
    # code), whose fix needs the whole file (``fixes.NeedsWholeFile``). They have no fix here,
    # and the runner lints the file whole if one of them is reported.
    fixes_need_whole_file: frozenset[tuple[int, int, str]] = frozenset()


@lru_cache(maxsize=4096)
def _package_parts(folder: str) -> tuple[str, ...]:
    """Dotted parts of the package a folder is: its path from the top-most folder above it (or
    itself) that holds an ``__init__.py``. A folder without one inside such a package is a
    namespace portion of it (PEP 420), imported through the package as any subpackage is:
    SGLang ships ``sglang/__init__.py`` and no ``sglang/srt/__init__.py``, and its files import
    ``sglang.srt.layers.attention.vision``. No such folder above: no package (a script)."""
    parts: list[str] = []
    top = 0  # how many of ``parts`` the top-most package so far takes
    while True:
        parts.append(os.path.basename(folder))
        if os.path.isfile(os.path.join(folder, "__init__.py")):
            top = len(parts)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return tuple(reversed(parts[:top]))


def module_name_for(path: str) -> str:
    absolute = os.path.abspath(path)
    folder, filename = os.path.split(absolute)
    stem = filename.removesuffix(".py")
    parts = _package_parts(folder)
    if stem == "__init__":
        return ".".join(parts)
    return ".".join(parts + (stem,))


def tool_diagnostic(path: str, code: str, message: str, line: int = 1, col: int = 1) -> Diagnostic:
    return Diagnostic(
        path=path, line=line, col=col, end_line=line, end_col=col, code=code, message=message,
        is_tool_error=code != "GPU001",
    )


def lint_source(
    source: SourceFile,
    settings: Settings,
    rules: list[Rule],
    alone: Scout | None = None,
    kept: KeptUnits | None = None,
    project: FileProjectNames = NOTHING_FROM_THE_PROJECT,
    parse: bool = True,
) -> FileFacts:
    """Lint one file (see ``_lint_source``), with Python's cyclic garbage collector paused
    (``collector``: a parse makes no cycle).
    ``alone``: the file is checked on its own (one file given, the flake8 plugin), and this is
    its syntax scout: only the functions that can matter to it alone are parsed
    (``prefilter.one_file_plan``). ``kept``: the function units a run of many files needs
    parsed here (``project_plan``); None: all of them. ``project``: what the run's other files
    tell of it (``project_plan.ProjectNames``). ``parse``: False raises ``WouldParse`` where
    the lint needs libcst, for a process that leaves its parses to another."""
    with collector.paused():
        # Suppression comments matter to a file with findings; to one without, only those naming our
        # codes (GPU010 judges them) and the file-level switch do. Tokenizing for them is
        # costly, and most files have both noqa comments (for other tools) and no finding.
        with span("noqa scan"):
            early = _noqa_matters_alone(source.text)
            suppressions = scan(source.text) if early else Suppressions()
        facts = _lint_source(source, settings, rules, suppressions, alone, kept, project, parse)
        if not early and (facts.diagnostics or facts.pending):
            with span("noqa scan"):
                facts.suppressions = scan_for_ours(source.text)
        return facts


_NOQA_THAT_MATTERS_ALONE = re.compile(r"noqa[^\n]*gpu|sync-lint\s*:\s*noqa")


def _fingerprint(source: SourceFile) -> int:
    from sync_lint.pipeline.project_plan import (
        fingerprint,  # only a run of many files has a plan
    )

    return fingerprint(source)


def _noqa_matters_alone(text: str) -> bool:
    """A noqa naming our codes, or the file-level switch, in any case. Searched in the
    lowered text, and only where "noqa" occurs: the pattern has no literal prefix for the
    regex engine to scan for, and a case-insensitive search of every file cost a second of a
    vLLM run."""
    lowered = text.lower()
    return "noqa" in lowered and _NOQA_THAT_MATTERS_ALONE.search(lowered) is not None


def _lint_source(
    source: SourceFile,
    settings: Settings,
    rules: list[Rule],
    suppressions: Suppressions,
    alone: Scout | None = None,
    kept: KeptUnits | None = None,
    project: FileProjectNames = NOTHING_FROM_THE_PROJECT,
    parse: bool = True,
) -> FileFacts:
    """Lint one file, parsing only the units a plan keeps (``alone`` or ``kept``, see
    ``lint_source``); the rest are masked (``units``), which keeps the lines and columns of
    what is parsed."""
    facts = FileFacts(path=source.path, suppressions=suppressions, host_properties=host_copy_properties(source.text))
    if facts.suppressions.file_is_off():
        return facts
    outlined = kept is not None and kept.fingerprint == _fingerprint(source)
    with span("prefilter"):
        if outlined and kept.active is not None:  # the outline of this very text found them
            active = [rule for rule in rules if rule.code in kept.active]
        else:
            active = [rule for rule in rules if prefilter.may_match(rule, source.text)]
    if not active:
        return facts  # a call through its imports is followed all the same (``pipeline.unread``)
    if outlined and kept.names_only and all(rule.reports_only_in_functions for rule in active):
        named = _names_only(source, kept, facts)
        if named is not None:
            return named
    text = source.text
    hidden: list[tuple[str | None, str | None]] = []
    not_at_sinks: frozenset[tuple[str | None, str | None]] = frozenset()
    plan = None
    if alone is not None:
        with span("prefilter"):
            plan = prefilter.one_file_plan(active, text, alone)
    elif outlined:
        plan = MaskPlan(text, split_lines(text), kept.cuts)
        plan.keep_units(list(kept.indices))
        plan.close_over_state()
        if kept.at_sinks is not None:
            not_at_sinks = _not_at_sinks(plan, kept.at_sinks)
    if plan is not None and plan.is_masking():
        text = plan.masked_text()
        hidden = [plan.qualified(index) for index in plan.functions() if not plan.keep[index]]
    too_long = _too_long_for_the_parser(text)
    if too_long is not None:
        facts.diagnostics.append(tool_diagnostic(source.path, "GPU001", *too_long))
        return facts
    if not parse:
        raise WouldParse(source.path)
    return _parse_and_check(
        source, text, settings, rules, active, facts, alone is not None, hidden, not_at_sinks, project
    )


# A property decorator (``@property``, ``@functools.cached_property``) at the start of a line.
_PROPERTY_DECORATOR = re.compile(r"^([ \t]*)@(?:[\w.]+\.)?(?:cached_)?property\b", re.MULTILINE)


def host_copy_properties(text: str) -> frozenset[str]:
    """The properties a file defines whose names say they are host copies (``seq_lens_cpu``):
    read from its text, parsed or not, the same on every path of a run. A decorated ``def`` is
    the first one after the decorator at its indentation (other decorators, of any number of
    lines, may come between)."""
    if "property" not in text:
        return frozenset()
    found = set()
    for decorator in _PROPERTY_DECORATOR.finditer(text):
        indent = re.escape(decorator.group(1))
        definition = re.compile(rf"^{indent}(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE).search(text, decorator.end())
        if definition is not None and names_host_copy(definition.group(1)):
            found.add(definition.group(1))
    return frozenset(found)


def _not_at_sinks(plan: MaskPlan, at_sinks: tuple[int, ...]) -> frozenset[tuple[str | None, str | None]]:
    """The units parsed that the GPU1xx closure did not keep (``KeptUnits.at_sinks``), by
    ``(class, name)``: those no unit of the closure shares a name with (two ``def f`` in one
    file are told apart by place, which the analysis does not see: both are then recorded)."""
    recorded = {plan.qualified(index) for index in at_sinks}
    return frozenset(
        plan.qualified(index) for index in plan.functions() if plan.keep[index] and plan.qualified(index) not in recorded
    )


def _names_only(source: SourceFile, kept: KeptUnits, facts: FileFacts) -> FileFacts | None:
    """The facts of a file the project plan keeps nothing of (``KeptUnits.names_only``), for rules
    that report only in functions: what its masked parse would give, without it. Its imports
    (another file's call may go through them: a re-export), read from CPython's ``ast`` of the
    masked text as ``NameTable`` reads libcst's (``scout.syntax.first_imports``), and the
    functions it defines (a call of one goes nowhere else). None: lint it as usual, where the
    parse would report something (the masked text does not parse: a cut inside a string; a
    line too long for the parser)."""
    with span("names only"):
        plan = MaskPlan(source.text, split_lines(source.text), kept.cuts)
        text = plan.masked_text()
        if _too_long_for_the_parser(text) is not None:
            return None
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        from sync_lint.pipeline.scout.syntax import first_imports

        facts.module_name = module_name_for(source.path)
        facts.imports = first_imports(tree, split_lines(text), facts.module_name, is_package_init(source.path))
        facts.functions = frozenset(
            ".".join(part for part in (facts.module_name, *plan.qualified(index)) if part) for index in plan.functions()
        )
    return facts


class WouldParse(Exception):
    """A lint told not to parse (``lint_source(parse=False)``) needs libcst."""


def import_the_parser() -> None:
    """Import what a lint that parses needs: libcst, the analyses and the fixes, which only such
    a lint imports (a run that parses nothing skips them). A small run's lint worker imports them
    ahead, while the run plans (``runner._WarmWorker``); any other process (the flake8 plugin's,
    a pool's worker) at its first parse. A module left out here is imported at
    its first use, as it would be anyway (``tests/test_runner_pool.py`` lints every fixture after
    it and looks for one). The project plan too: the worker is forked before the run imports it,
    and its first request, which holds what the plan keeps of each file, would import it.
    The dataclasses these modules make (libcst's nodes most) reuse methods compiled by an earlier
    run (``compiled_methods``: about half of libcst's import)."""
    with compiled_methods("parser"):
        _import_the_parser()


def _import_the_parser() -> None:
    import libcst.native  # noqa: F401  (libcst, and its parser, which it imports at the first parse)

    from sync_lint import fixes  # noqa: F401
    from sync_lint.analysis import (  # noqa: F401
        context,
        device,
        expected_failures,
        flags,
        flow,
        guards,
        hot_scopes,
        layout,
        nodes,
        positions,
        python_ops,
        sinks,
        syncs,
    )
    from sync_lint.pipeline import project_plan  # noqa: F401
    from sync_lint.rules import _sink_findings  # noqa: F401


def _parse_and_check(
    source: SourceFile, text: str, settings: Settings, rules: list[Rule], active: list[Rule], facts: FileFacts,
    alone: bool = False, hidden: list[tuple[str | None, str | None]] = (),
    not_at_sinks: frozenset[tuple[str | None, str | None]] = frozenset(),
    project: FileProjectNames = NOTHING_FROM_THE_PROJECT,
) -> FileFacts:
    """Parse ``text`` (the source, or the source with units masked) and run the ``active`` rules.
    ``alone``: the file is all there is, so a finding conditional on a function it does not
    define can never be reported: it is dropped. ``hidden``: the masked function units, which
    the file still defines (a call of one must not be followed elsewhere)."""
    if "libcst" not in sys.modules:  # this process's first parse (a small run's lint worker imported it ahead)
        import_the_parser()
    import libcst as cst

    from sync_lint.analysis.context import FileContext
    from sync_lint.analysis.nodes import parse_module

    try:
        with span("parse"):
            module = parse_module(text)
    except cst.ParserSyntaxError as exc:
        if text is not source.text:  # the cut landed inside a string: parse the file whole
            return lint_source(source, settings, rules, project=project)
        message, line, col = _syntax_error(source, exc)
        facts.diagnostics.append(tool_diagnostic(source.path, "GPU001", f"syntax error: {message}", line, col))
        return facts
    except RecursionError:
        facts.diagnostics.append(tool_diagnostic(source.path, "GPU001", "syntax error: nested too deeply to parse"))
        return facts
    facts.parsed = True
    facts.module_name = module_name_for(source.path)
    ctx = FileContext(source, module, facts.module_name, settings, parsed_text=text, not_at_sinks=not_at_sinks,
                      codes=frozenset(rule.code for rule in active), project=project,
                      masked=frozenset(hidden))
    try:
        findings: list[tuple[Rule, Finding]] = []
        for rule in active:
            try:
                with span(f"rule {rule.code}"):
                    findings.extend((rule, finding) for finding in rule.check(ctx))
            except RecursionError:
                facts.diagnostics.append(
                    tool_diagnostic(source.path, "GPU004", f"{rule.code} skipped this file: nested too deeply to analyse")
                )
            except Exception as exc:  # noqa: BLE001 -- a bug of ours must not stop the other files
                facts.diagnostics.append(
                    tool_diagnostic(source.path, "GPU004", f"internal error in {rule.code}: {type(exc).__name__}: {exc}")
                )
        facts.summaries = ctx.summaries
        facts.imports = dict(ctx.names.imports)
        facts.functions = frozenset(info.qualname for info in ctx.functions()) | {
            ".".join(part for part in (facts.module_name, *unit) if part) for unit in hidden
        }
        if alone and any(f.if_callee is not None for _, f in findings):
            # The index of a run of this file alone, as ``Linter.finalize`` resolves against:
            # a callee that gives no reason here is in another file, or needs nothing of the call.
            from sync_lint.pipeline.project import ProjectIndex

            index = ProjectIndex([facts])
            findings = [
                (rule, f) for rule, f in findings
                if f.if_callee is None or index.reason(
                    f.if_callee.kind, f.if_callee.callee, f.if_callee.arg, f.if_callee.arg_views, f.if_callee.flags,
                    f.if_callee.row_stride, f.if_callee.through, f.if_callee.device_args, f.if_callee.devices,
                ) is not None
            ]
        masked = text is not source.text
        # Masking keeps the lines and columns of the code it keeps, so a masked file's findings
        # are where the whole file's are, and so are the fixes that edit a node's own span
        # (``.contiguous()``) or their statement's lines, and the module-level code (GPU201's
        # ``with`` block and import); a fix that renders the module may differ, and needs the
        # whole file (``fixes.NeedsWholeFile``). An internal error (masking must not be its
        # cause) or, in a file checked alone, such a fix: lint the whole file now. In a run of
        # many files, most findings are conditional on other files: the runner lints whole
        # only a file that ends up reporting such a finding (``FileFacts.fixes_need_whole_file``).
        if masked and facts.diagnostics:
            return lint_source(source, settings, rules, project=project)
        if findings:
            with span("positions and fixes"):
                needs_whole = _resolve_findings(facts, ctx, findings, masked=masked)
            if needs_whole and alone:
                return lint_source(source, settings, rules, project=project)
            facts.fixes_need_whole_file = needs_whole
        return facts
    finally:
        ctx.release()


# libcst's parser takes super-linear time on a long flat operator chain (2,000 terms about 2 s,
# 4,000 about 28 s) and overflows its stack near 10,000: such generated lines are refused.
_LONG_LINE = re.compile(r"[^\n]{20000,}")
_OPERATOR = re.compile(r"[-+*/%|&^@]|\b(?:and|or)\b")
MAX_OPERATORS_PER_LINE = 2000


def _too_long_for_the_parser(text: str) -> tuple[str, int] | None:
    for match in _LONG_LINE.finditer(text):
        operators = len(_OPERATOR.findall(match.group(0)))
        if operators > MAX_OPERATORS_PER_LINE:
            line = text.count("\n", 0, match.start()) + 1
            return f"not checked: line {line} chains {operators} operators, too many to parse", line
    return None


def _syntax_error(source: SourceFile, exc: cst.ParserSyntaxError) -> tuple[str, int, int]:
    """Message and position as CPython reports them (libcst's raw position is often line 1, or
    the line after the error); libcst's own when CPython accepts the code."""
    null = source.text.find("\0")
    if null >= 0:  # CPython names no line for it
        line_start = source.text.rfind("\n", 0, null) + 1
        return "source code cannot contain null bytes", source.text.count("\n", 0, null) + 1, null - line_start + 1
    try:
        compile(source.text, source.path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        return error.msg, error.lineno or 1, error.offset or 1
    return exc.message, exc.raw_line, exc.raw_column + 1


def _resolve_findings(
    facts: FileFacts, ctx: FileContext, findings: list[tuple[Rule, Finding]], masked: bool = False
) -> frozenset[tuple[int, int, str]]:
    """Positions and fixes, computed only for files that have findings. A finding that a noqa
    comment suppresses is never shown nor fixed, so it gets no fix: planning one can cost a
    transform of the whole module (GPU201's ``with`` block), and engines carry many such
    deliberate, marked syncs. ``masked``: the module is a masked parse; returned are the
    findings (line, column, code) whose fix needs the whole file: they get none here. The
    others keep theirs, which edit their own spans and are exact on a masked parse: a file is
    linted again only if one of those findings is reported (many are conditional on a callee
    and dropped)."""
    from sync_lint.fixes import Editor, NeedsWholeFile

    positions = ctx.positions()
    editor = Editor(ctx.module, ctx.source.text, positions, masked=masked)
    needs_whole: set[tuple[int, int, str]] = set()
    with span("noqa scan"):
        suppressions = scan_for_ours(ctx.source.text)
    for rule, finding in findings:
        where = positions[finding.node]
        diagnostic = Diagnostic(
            path=ctx.path,
            line=where.start.line,
            col=where.start.column + 1,
            end_line=where.end.line,
            end_col=where.end.column + 1,
            code=rule.code,
            message=finding.message,
        )
        if finding.fix is not None and not is_suppressed(diagnostic, suppressions):
            try:
                diagnostic = replace(diagnostic, fix=finding.fix(editor))
            except NeedsWholeFile:
                needs_whole.add((diagnostic.line, diagnostic.col, diagnostic.code))
            except Exception as exc:  # noqa: BLE001 -- a broken fix must not lose the finding
                facts.diagnostics.append(
                    tool_diagnostic(ctx.path, "GPU004", f"internal error in {rule.code} fix: {type(exc).__name__}: {exc}")
                )
        if finding.if_callee is None:
            facts.diagnostics.append(diagnostic)
        else:
            condition = finding.if_callee
            facts.pending.append(
                PendingCall(condition.kind, condition.callee, condition.arg, diagnostic, condition.fix_safe_if_read_only,
                            condition.arg_views, condition.flags, condition.row_stride, condition.advice,
                            condition.through, condition.device_args, condition.devices)
            )
    return frozenset(needs_whole)


def lint_path(path: str, lint) -> FileFacts:
    """Read and lint; ``lint(source)`` is ``lint_source`` with the run's settings bound."""
    from sync_lint.pipeline import source as source_stage

    try:
        with span("read and decode"):
            source = source_stage.read(path)
    except SourceError as exc:
        return FileFacts(path=path, diagnostics=[tool_diagnostic(path, exc.code, exc.message, exc.line)])
    return lint(source)
