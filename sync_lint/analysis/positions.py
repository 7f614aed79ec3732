"""Node positions, computed only for the statements that hold a finding.

libcst's PositionProvider renders the whole module to learn every node's position: as costly
as the parse again, for a file where one line is reported. Rendering only the innermost
statement of a body (module, class, function, block) that holds the node gives the same
positions, provided the rendering starts where the statement starts in the file: at column 0
of its first line (the previous statement ended with a newline), with the indentation of its
enclosing blocks. libcst round-trips byte for byte, so that rendering is an exact substring of
the parsed text, and where it occurs once its offset gives the line. A statement whose code
occurs more than once (a repeated one-liner) is rendered through the statement around it
instead; a node outside every statement (the module itself) falls back to the whole module.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from sync_lint.analysis.nodes import children


class Positions:
    """``positions[node]`` -> ``CodeRange`` (1-based lines, 0-based columns) in ``text``."""

    def __init__(self, module: cst.Module, text: str) -> None:
        self.module = module
        self.text = text
        # id(node) -> the innermost body statement holding it (a body statement maps to itself).
        self._statement: dict[int, cst.CSTNode] = {}
        # id(body statement) -> (the body statement around it or None, indentation it starts with).
        self._context: dict[int, tuple[cst.CSTNode | None, tuple[str, ...]]] = {}
        self._walked = 0  # top-level statements whose nodes are mapped
        self._ranges: dict[cst.CSTNode, CodeRange] = {}
        self._whole: dict[cst.CSTNode, CodeRange] | None = None

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        if self._whole is not None:
            return self._whole[node]
        found = self._ranges.get(node)
        if found is not None:
            return found
        statement = self._statement_of(node)
        while statement is not None:
            if self._render(statement):
                return self._ranges[node]
            statement = self._context[id(statement)][0]
        return self._whole_module()[node]

    def _statement_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        found = self._statement.get(id(node))
        body = self.module.body
        indent = self.module.default_indent
        while found is None and self._walked < len(body):
            top = body[self._walked]
            self._context[id(top)] = (None, ())
            stack: list[tuple[cst.CSTNode, cst.CSTNode, tuple[str, ...]]] = [(top, top, ())]
            while stack:
                current, statement, tokens = stack.pop()
                self._statement[id(current)] = statement
                if type(current) is cst.IndentedBlock:
                    inner = (*tokens, indent if current.indent is None else current.indent)
                    for child in current.body:
                        self._context[id(child)] = (statement, inner)
                        stack.append((child, child, inner))
                else:
                    stack.extend((child, statement, tokens) for child in children(current))
            self._walked += 1
            found = self._statement.get(id(node))
        return found

    def _render(self, statement: cst.CSTNode) -> bool:
        """Positions of every node of ``statement``; False when its place in the text is not
        certain (its code is not found exactly once)."""
        _, tokens = self._context[id(statement)]
        provider = PositionProvider()
        state = PositionProvidingCodegenState(
            default_indent=self.module.default_indent,
            default_newline=self.module.default_newline,
            provider=provider,
            indent_tokens=list(tokens),
        )
        statement._codegen(state)
        code = "".join(state.tokens)
        start = self.text.find(code)
        if start < 0 or self.text.find(code, start + 1) >= 0:
            return False
        shift = self.text.count("\n", 0, start) + self.text.count("\r", 0, start) - self.text.count("\r\n", 0, start)
        ranges = self._ranges
        for key, where in provider._computed.items():
            ranges[key] = CodeRange(
                CodePosition(where.start.line + shift, where.start.column),
                CodePosition(where.end.line + shift, where.end.column),
            )
        return True

    def _whole_module(self) -> dict[cst.CSTNode, CodeRange]:
        if self._whole is None:
            self._whole = dict(MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider))
        return self._whole
