"""Building fixes: turn "what to change" on libcst nodes into text edits.

Three ways, all producing minimal ``Edit``s on the original text:
- ``insert_after`` / ``replace``: a text change at a node's span (cheap; for expression fixes).
- ``replace_statement``: render a replacement statement with libcst at the indentation of the
  one it replaces (wrapping a statement in a ``with`` block: libcst gets nested indentation and
  multi-line strings right), and edit only those lines.
- ``transform``: replace nodes in the module with libcst, render the whole module, and diff it
  against the original line by line: costs a render and a diff of the whole file, so kept for
  what the others cannot express.
"""

from __future__ import annotations

import difflib
import io
import tokenize
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst
from libcst._nodes.internal import CodegenState

from sync_lint.diagnostics import Applicability, Edit, Fix
from sync_lint.pipeline.source import LineIndex, split_lines

if TYPE_CHECKING:
    from libcst.metadata import CodeRange

# Expressions that can take a trailing ``.attr`` / ``(...)`` without parentheses.
_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.List, cst.Tuple, cst.Dict, cst.Set)


class NeedsWholeFile(Exception):
    """A fix planned on a masked parse (``pipeline.units``) needs the whole module."""


class Editor:
    """Edits are offsets into ``text``, the file that libcst parsed into ``module``.

    ``masked``: ``module`` is the parse of ``text`` with some function units masked. Masking
    keeps the lines and columns of the code it keeps, so an edit at a node's own span
    (``span``, ``insert_after``, ``replace``) is exact, and so is ``replace_statement``, which
    checks its statement's rendering against ``text`` and renders at the whole file's indent
    (``default_indent``). What reads the module beyond the node may not be: ``transform``
    raises ``NeedsWholeFile`` (the file's fixes are then planned on a whole parse), and a plan
    that reads another statement asks ``stands_for_a_function`` of it."""

    def __init__(self, module: cst.Module, text: str, positions: Mapping[cst.CSTNode, CodeRange], masked: bool = False) -> None:
        self.module = module
        self.text = text
        self.positions = positions
        self.lines = LineIndex(text)
        self.masked = masked

    def _whole(self) -> None:
        if self.masked:
            raise NeedsWholeFile

    def stands_for_a_function(self, statement: cst.BaseStatement) -> bool:
        """Is ``statement``, in a masked parse, what stands for a masked function unit: a ``pass``
        (continued over the unit's lines) where ``text`` has a ``def`` (or its decorators)? Its
        leading lines are the ``def``'s: masking keeps the lines before a unit. A kept class may
        hold such stand-ins; its own header and place are the text's."""
        if not (
            self.masked and isinstance(statement, cst.SimpleStatementLine)
            and len(statement.body) == 1 and isinstance(statement.body[0], cst.Pass)
        ):
            return False
        where = self.positions[statement].start
        return not self.text.startswith("pass", self.lines.offset(where.line, where.column))

    @cached_property
    def default_indent(self) -> str:
        """The indent of a block libcst renders without one of its own: the module's default,
        which libcst takes from the first indented line. A masked parse may have masked that
        line; the whole text's is then read from its tokens, up to its first indent."""
        if not self.masked:
            return self.module.default_indent
        try:
            for token in tokenize.generate_tokens(io.StringIO(self.text).readline):
                if token.type == tokenize.INDENT:
                    return token.string
        except (tokenize.TokenError, SyntaxError):
            raise NeedsWholeFile from None
        return self.module.default_indent  # no indented line at all: libcst's fallback

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        where = self.positions[node]
        return (
            self.lines.offset(where.start.line, where.start.column),
            self.lines.offset(where.end.line, where.end.column),
        )

    def insert_after(self, node: cst.BaseExpression, text: str) -> Edit:
        """Append ``text`` (``.contiguous()``) to an expression, parenthesising it if needed.
        A node's span leaves out its own parentheses: an atomic one takes ``text`` inside them
        (``(x[:, 0].contiguous())``), another after them (``(a if c else b).contiguous()``, not
        ``(a if c else b.contiguous())``)."""
        start, end = self.span(node)
        if isinstance(node, _ATOMIC):
            return Edit(end, end, text)
        if _is_parenthesized(node):
            after = self._after_parentheses(node, end)
            if after is not None:
                return Edit(after, after, text)
        return Edit(start, end, f"({self.text[start:end]}){text}")

    def _after_parentheses(self, node: cst.BaseExpression, end: int) -> int | None:
        """The offset just past ``node``'s closing parentheses: inside them only blanks, line
        breaks and comments may come between its span and each ``)``; None if anything else
        does (the caller then wraps the node in parentheses of its own)."""
        text = self.text
        for _ in node.rpar:
            while end < len(text) and text[end] != ")":
                if text[end] == "#":
                    end = text.find("\n", end)
                    if end < 0:
                        return None
                elif text[end] in " \t\r\n\\\f":
                    end += 1
                else:
                    return None
            if end >= len(text):
                return None
            end += 1
        return end

    def replace(self, node: cst.CSTNode, text: str) -> Edit:
        start, end = self.span(node)
        return Edit(start, end, text)

    def replace_statement(self, statement: cst.BaseStatement, replacement: cst.BaseStatement) -> Edit | None:
        """Replace a statement of a body by ``replacement`` rendered at its indentation, both
        without their leading blank lines and comments (which stay as they are). None when the
        statement's own rendering is not exactly what the text holds from the start of its line
        (a decorated definition, whose position starts at ``def``; a last line without a
        newline): the caller falls back to ``transform``."""
        where = self.positions[statement]
        start = self.lines.offset(where.start.line, 0)
        indent = self.text[start : start + where.start.column]
        if indent.strip():
            return None  # not the first statement on its line
        original = self._render(statement.with_changes(leading_lines=()), indent)
        if not self.text.startswith(original, start):
            return None
        return Edit(start, start + len(original), self._render(replacement.with_changes(leading_lines=()), indent))

    def _render(self, statement: cst.BaseStatement, indent: str) -> str:
        state = CodegenState(
            default_indent=self.default_indent,
            default_newline=self.module.default_newline,
            indent_tokens=[indent] if indent else [],
        )
        statement._codegen(state)
        return "".join(state.tokens)

    def transform(self, new_module: cst.Module) -> tuple[Edit, ...]:
        """Line-level edits that turn the original text into ``new_module``'s code."""
        self._whole()
        old_lines = split_lines(self.text)
        new_lines = split_lines(new_module.code)
        edits = []
        starts = self.lines.starts
        matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            start = starts[i1] if i1 < len(starts) else len(self.text)
            end = starts[i2] if i2 < len(starts) else len(self.text)
            edits.append(Edit(start, end, "".join(new_lines[j1:j2])))
        return tuple(edits)


def make_fix(message: str, applicability: Applicability, *edits: Edit) -> Fix:
    return Fix(message=message, applicability=applicability, edits=tuple(sorted(edits)))


def _is_parenthesized(node: cst.CSTNode) -> bool:
    return bool(getattr(node, "lpar", ()))


def apply_fixes(text: str, fixes: list[Fix]) -> tuple[str, int]:
    """Apply every fix whose edits overlap no fix applied before it; return (text, fixes applied).

    A fix's edits go in together or not at all; the ones left out are retried on the next
    round, after the file is linted again.
    """
    taken: list[Edit] = []
    applied = 0
    for fix in sorted(fixes, key=lambda f: f.edits[0] if f.edits else Edit(0, 0, "")):
        if not fix.edits or any(_overlaps(edit, other) for edit in fix.edits for other in taken):
            continue
        taken.extend(fix.edits)
        applied += 1
    pieces = []
    cursor = 0
    for edit in sorted(taken):
        pieces.append(text[cursor : edit.start])
        pieces.append(edit.content)
        cursor = edit.end
    pieces.append(text[cursor:])
    return "".join(pieces), applied


def _overlaps(a: Edit, b: Edit) -> bool:
    # Two insertions at one point would be ordered arbitrarily: treat them as overlapping too.
    return a.start < b.end and b.start < a.end or a.start == b.start or a.start == a.end == b.end
