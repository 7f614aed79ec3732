"""Suppression comments with flake8's syntax, and the report of ones that suppress nothing.

- ``# noqa`` (bare) suppresses every finding on its logical line; ``# noqa: GPU201,GPU202``
  (codes after a colon, separated by commas or spaces) only those codes or code prefixes.
  As in flake8, ``# noqa GPU201`` without the colon is a bare noqa, and a comment anywhere on a
  statement that spans several lines covers all of them.
- ``# sync-lint: noqa`` on a line of its own turns the whole file off;
  ``# sync-lint: noqa: GPU201`` only those codes.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from functools import lru_cache

from sync_lint.diagnostics import Diagnostic, Edit, Fix
from sync_lint.pipeline.source import LineIndex

_NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_FILE_NOQA = re.compile(r"^#\s*sync-lint\s*:\s*noqa(?:\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?\s*$", re.IGNORECASE)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)
OUR_PREFIX = "GPU"


@dataclass(frozen=True)
class NoqaComment:
    line: int  # physical line of the comment
    col: int  # 0-based column of the ``#``
    end_col: int  # end of the matched noqa comment text
    codes: tuple[str, ...] | None  # None: a bare noqa
    first_line: int  # the logical line it covers
    last_line: int
    # Offsets into the file of the noqa comment text, and of the blanks before it when nothing
    # else follows on the line (what removing the whole comment removes).
    offset: int
    end_offset: int
    strip_offset: int


@dataclass(frozen=True)
class Suppressions:
    comments: tuple[NoqaComment, ...] = ()
    file_codes: tuple[str, ...] | None = ()  # None: the whole file is off; () nothing

    def file_is_off(self) -> bool:
        return self.file_codes is None


@lru_cache(maxsize=4)
def scan(text: str) -> Suppressions:
    """Find every noqa comment. Cheap when the file mentions no noqa at all. Remembers the last
    few texts: a file with findings is scanned before its fixes are planned (a suppressed
    finding gets none) and again when its facts are complete."""
    if "noqa" not in text and "NOQA" not in text.upper():
        return Suppressions()
    lines = LineIndex(text)
    comments: list[NoqaComment] = []
    file_codes: list[str] | None = []
    for line, col, comment, first, last in _comments(text):
        whole = _FILE_NOQA.match(comment)
        if whole and not lines.line_text(line)[:col].strip():
            if whole.group("codes") is None:
                file_codes = None
            elif file_codes is not None:
                file_codes.extend(c.upper() for c in _CODE.findall(whole.group("codes")))
            continue
        match = _NOQA.search(comment)
        if match:
            codes = match.group("codes")
            start = lines.offset(line, col + match.start())
            end = lines.offset(line, col + match.end())
            line_text = lines.line_text(line)
            before = line_text[: col + match.start()]
            alone = line_text[col + match.end() :].strip() == "" and before.strip() != ""
            comments.append(
                NoqaComment(
                    line=line,
                    col=col + match.start(),
                    end_col=col + match.end(),
                    codes=tuple(c.upper() for c in _CODE.findall(codes)) if codes else None,
                    first_line=first,
                    last_line=last,
                    offset=start,
                    end_offset=end,
                    strip_offset=start - (len(before) - len(before.rstrip())) if alone else start,
                )
            )
    return Suppressions(tuple(comments), None if file_codes is None else tuple(file_codes))


# The word of the file-level switch, in any case (``_FILE_NOQA``): searched with the same
# case-folding, which a lowered text does not give (``ſ`` is an ``s`` to it).
_SWITCH_WORD = re.compile(r"sync-lint", re.IGNORECASE)


def scan_for_ours(text: str) -> Suppressions:
    """``scan``, or nothing where no comment can touch our findings: a noqa that names only
    other tools' codes (``# noqa: E501``) suppresses none of them, and GPU010 judges only our
    codes. Most of an engine's files with findings have such comments and no other: this spares
    tokenizing them.

    Read from the whole text with the comment pattern itself; a match that may matter (bare,
    naming one of our codes, or spanning lines, where a comment alone would read otherwise)
    or the switch's word anywhere sends the file to ``scan``. A match in a string only adds
    work: every noqa comment's own match is among these."""
    if "noqa" not in text.lower() or _SWITCH_WORD.search(text):
        return scan(text)
    for match in _NOQA.finditer(text):
        codes = match.group("codes")
        written = match.group(0)
        if codes is None or not written.isascii() or "\n" in written or "\r" in written or OUR_PREFIX in codes.upper():
            return scan(text)
    return Suppressions()


def _comments(text: str):
    """(line, col, comment text, first line, last line of its logical line) for each comment."""
    pending: list[tuple[int, int, str]] = []
    logical_start = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if logical_start is None and token.type not in (tokenize.NL, tokenize.COMMENT):
                logical_start = token.start[0]
            if token.type == tokenize.COMMENT:
                pending.append((token.start[0], token.start[1], token.string))
            elif token.type in (tokenize.NEWLINE, tokenize.NL) and (token.type == tokenize.NEWLINE or logical_start is None):
                first = logical_start if logical_start is not None else token.start[0]
                for line, col, comment in pending:
                    yield line, col, comment, min(first, line), max(token.start[0], line)
                pending.clear()
                logical_start = None
        for line, col, comment in pending:
            yield line, col, comment, line, line
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # Not tokenizable (the parse error is reported elsewhere): fall back to physical lines.
        for number, line_text in enumerate(text.splitlines(), start=1):
            hash_at = line_text.find("#")
            if hash_at >= 0:
                yield number, hash_at, line_text[hash_at:], number, number


def _code_matches(code: str, selector: str) -> bool:
    return code.startswith(selector)


def is_suppressed(diagnostic: Diagnostic, suppressions: Suppressions) -> bool:
    if suppressions.file_is_off():
        return True
    if any(_code_matches(diagnostic.code, c) for c in suppressions.file_codes or ()):
        return True
    return _covering_comment(diagnostic, suppressions) is not None


def _covering_comment(diagnostic: Diagnostic, suppressions: Suppressions) -> NoqaComment | None:
    for comment in suppressions.comments:
        if comment.first_line <= diagnostic.line <= comment.last_line:
            if comment.codes is None or any(_code_matches(diagnostic.code, c) for c in comment.codes):
                return comment
    return None


def apply(path: str, diagnostics: list[Diagnostic], suppressions: Suppressions, judged_codes: set[str]) -> list[Diagnostic]:
    """Drop suppressed findings; add GPU010 for our codes in noqa comments that suppressed nothing.

    ``judged_codes``: the enabled codes of this file; a noqa naming a code that is not ours, or
    ours but disabled here, is left alone (another tool, or another config, may need it).
    """
    kept = [d for d in diagnostics if d.is_tool_error or d.code == "GPU001" or not is_suppressed(d, suppressions)]
    if "GPU010" not in judged_codes or suppressions.file_is_off():
        return kept
    for comment in suppressions.comments:
        if not comment.codes:
            continue
        covered = [d for d in diagnostics if comment.first_line <= d.line <= comment.last_line]
        unused = [
            code
            for code in comment.codes
            if code.startswith(OUR_PREFIX)
            and any(_code_matches(j, code) for j in judged_codes)
            and not any(_code_matches(d.code, code) for d in covered)
        ]
        if unused:
            kept.append(_unused_noqa(path, comment, unused))
    return kept


def _unused_noqa(path: str, comment: NoqaComment, unused: list[str]) -> Diagnostic:
    remaining = [c for c in comment.codes or () if c not in unused]
    if remaining:
        edit = Edit(comment.offset, comment.end_offset, "# noqa: " + ", ".join(remaining))
    else:
        edit = Edit(comment.strip_offset, comment.end_offset, "")
    fix = Fix(
        message="Remove unused `noqa` codes" if remaining else "Remove unused `noqa` comment",
        applicability="safe",
        edits=(edit,),
    )
    return Diagnostic(
        path=path,
        line=comment.line,
        col=comment.col + 1,
        end_line=comment.line,
        end_col=comment.end_col + 1,
        code="GPU010",
        message=f"Unused `noqa` code{'s' if len(unused) > 1 else ''}: {', '.join(unused)}",
        fix=fix,
    )
