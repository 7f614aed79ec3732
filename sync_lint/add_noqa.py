"""``sync-lint check --add-noqa``: suppress every current finding with a ``# noqa: CODE`` comment.

Where the comment goes: on the finding's line, unless that line ends inside a token that spans
lines (a triple-quoted string) or with a backslash continuation; then at the end of the last line
of that run of lines. This is exactly the span flake8 searches for a line's ``noqa`` (lines are
joined only across multi-line tokens and continuations, not across brackets), and sync-lint's
own suppression covers the whole logical line, so the comment works for both and never lands
inside a string.

An existing ``# noqa: X`` on that span is extended (``# noqa: X, GPU201``), keeping codes of
other tools. The result is re-parsed, checked to suppress what it should, and written atomically.
"""

from __future__ import annotations

import io
import tokenize
from collections import defaultdict
from dataclasses import dataclass, field

import libcst as cst

from sync_lint.diagnostics import Diagnostic, Edit, Fix
from sync_lint.fixes import apply_fixes
from sync_lint.pipeline import suppress
from sync_lint.pipeline.lint_file import tool_diagnostic
from sync_lint.pipeline.source import LineIndex, SourceError, read

# Not worth a noqa: tool errors (the file was not checked), syntax errors (nothing to attach to),
# and unused-noqa findings (remove the stale code instead: `sync-lint fix`).
SKIPPED_CODES = ("GPU001", "GPU010")


class NoqaError(Exception):
    pass


def wanted(diagnostic: Diagnostic) -> bool:
    return not diagnostic.is_tool_error and diagnostic.code not in SKIPPED_CODES


def comment_spans(text: str) -> dict[int, tuple[int, int]]:
    """Physical line -> (first, last) line of the span a ``noqa`` for it covers; it goes at ``last``."""
    target: dict[int, tuple[int, int]] = {}
    first, last = None, -1
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.ENDMARKER, tokenize.DEDENT):
                continue
            first = token.start[0] if first is None else min(first, token.start[0])
            last = max(last, token.end[0])
            if token.type in (tokenize.NL, tokenize.NEWLINE):
                for line in range(first, last + 1):
                    target[line] = (first, last)
                first, last = None, -1
    except (tokenize.TokenError, SyntaxError) as exc:
        raise NoqaError(f"cannot tokenize: {exc}") from None
    return target


def _merged(existing: tuple[str, ...], added: list[str]) -> str:
    codes = list(existing) + [code for code in added if code not in existing]
    return "# noqa: " + ", ".join(codes)


def add_noqa_text(text: str, diagnostics: list[Diagnostic]) -> tuple[str, int]:
    """``text`` with a noqa for each finding in it; (new text, number of codes added)."""
    edits, added = noqa_edits(text, diagnostics)
    if not edits:
        return text, 0
    new_text, _ = apply_fixes(text, [Fix("add noqa", "safe", (edit,)) for edit in edits])
    return new_text, added


def noqa_edits(text: str, diagnostics: list[Diagnostic]) -> tuple[list[Edit], int]:
    """The edits that add the comments (one per comment written), and the number of codes added."""
    found = [d for d in diagnostics if wanted(d)]
    if not found:
        return [], 0
    lines = LineIndex(text)
    spans = comment_spans(text)
    existing = suppress.scan(text).comments
    by_span: dict[tuple[int, int], list[str]] = defaultdict(list)
    for d in found:
        span = spans.get(d.line, (d.line, d.line))
        if d.code not in by_span[span]:
            by_span[span].append(d.code)
    edits: list[Edit] = []
    added = 0
    for (first, line), codes in sorted(by_span.items()):
        comment = next((c for c in existing if first <= c.line <= line and c.codes), None)
        bare = next((c for c in existing if first <= c.line <= line and c.codes is None), None)
        if bare is not None:
            continue  # a bare noqa already suppresses everything there
        codes = sorted(codes)
        if comment is not None:
            fresh = [code for code in codes if code not in comment.codes]
            if fresh:
                edits.append(Edit(comment.offset, comment.end_offset, _merged(comment.codes, fresh)))
                added += len(fresh)
            continue
        line_text = lines.line_text(line)
        start = lines.offset(line, 0)
        kept = line_text.rstrip()
        edits.append(Edit(start + len(kept), start + len(line_text), "  # noqa: " + ", ".join(codes)))
        added += len(codes)
    return edits, added


def check_result(new_text: str, diagnostics: list[Diagnostic]) -> None:
    """The new text must parse and suppress every finding it was written for."""
    try:
        cst.parse_module(new_text)
    except (cst.ParserSyntaxError, RecursionError):
        raise NoqaError("the result would not parse (please report this)") from None
    suppressions = suppress.scan(new_text)
    for d in diagnostics:
        if wanted(d) and not suppress.is_suppressed(d, suppressions):
            raise NoqaError(f"line {d.line}: the added comment would not suppress {d.code} (please report this)")


@dataclass
class AddNoqaResult:
    files_changed: int = 0
    codes_added: int = 0
    errors: list[Diagnostic] = field(default_factory=list)


def add_noqa(diagnostics: list[Diagnostic]) -> AddNoqaResult:
    """Add the comments to the files on disk, each written atomically after the checks above."""
    from sync_lint.pipeline.fix import FixOutcome, write_atomically

    result = AddNoqaResult()
    by_file: dict[str, list[Diagnostic]] = defaultdict(list)
    for d in diagnostics:
        if wanted(d):
            by_file[d.path].append(d)
    for path in sorted(by_file):
        try:
            source = read(path)
            new_text, added = add_noqa_text(source.text, by_file[path])
            check_result(new_text, by_file[path])
        except SourceError as exc:
            result.errors.append(tool_diagnostic(path, exc.code, exc.message, exc.line))
            continue
        except NoqaError as exc:
            result.errors.append(tool_diagnostic(path, "GPU005", f"noqa not added: {exc}"))
            continue
        if new_text == source.text:
            continue
        error = write_atomically(FixOutcome(source=source, fixed=new_text))
        if error is not None:
            result.errors.append(error)
            continue
        result.files_changed += 1
        result.codes_added += added
    return result
