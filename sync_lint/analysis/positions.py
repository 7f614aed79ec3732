"""Node positions, computed only for the top-level statements that hold a finding.

libcst's PositionProvider renders the whole module to learn every node's position: as costly
as the parse again, for a file where one line is reported. A top-level statement's code is an
exact substring of the parsed text (libcst round-trips byte for byte) that starts at column 0,
so rendering that statement alone, as a module of its own, gives positions that only need its
line offset in the file. A statement whose code occurs more than once in the text (a repeated
one-liner) falls back to the whole-module provider.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from sync_lint.analysis.nodes import children


class Positions:
    """``positions[node]`` -> ``CodeRange`` (1-based lines, 0-based columns) in ``text``."""

    def __init__(self, module: cst.Module, text: str) -> None:
        self.module = module
        self.text = text
        self._owner: dict[int, int] = {}  # id(node) -> index of its top-level statement
        self._walked = 0  # statements whose nodes are in ``_owner``
        self._ranges: dict[int, dict[cst.CSTNode, CodeRange]] = {}
        self._whole: dict[cst.CSTNode, CodeRange] | None = None

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        if self._whole is not None:
            return self._whole[node]
        index = self._statement_of(node)
        if index is None:  # the module itself, or a node of its header/footer
            return self._whole_module()[node]
        ranges = self._ranges.get(index)
        if ranges is None:
            ranges = self._statement_ranges(index)
            if ranges is None:
                return self._whole_module()[node]
            self._ranges[index] = ranges
        return ranges[node]

    def _statement_of(self, node: cst.CSTNode) -> int | None:
        found = self._owner.get(id(node))
        body = self.module.body
        while found is None and self._walked < len(body):
            index = self._walked
            stack = [body[index]]
            while stack:
                current = stack.pop()
                self._owner[id(current)] = index
                stack.extend(children(current))
            self._walked += 1
            found = self._owner.get(id(node))
        return found

    def _statement_ranges(self, index: int) -> dict[cst.CSTNode, CodeRange] | None:
        statement = self.module.body[index]
        alone = cst.Module(
            body=[statement], default_newline=self.module.default_newline, default_indent=self.module.default_indent
        )
        code = alone.code
        start = self.text.find(code)
        if start < 0 or self.text.find(code, start + 1) >= 0:
            return None
        offset = self.text.count("\n", 0, start) + self.text.count("\r", 0, start) - self.text.count("\r\n", 0, start)
        ranges = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
        if offset == 0:
            return dict(ranges)
        return {
            key: CodeRange(
                CodePosition(where.start.line + offset, where.start.column),
                CodePosition(where.end.line + offset, where.end.column),
            )
            for key, where in ranges.items()
        }

    def _whole_module(self) -> dict[cst.CSTNode, CodeRange]:
        if self._whole is None:
            self._whole = dict(MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider))
        return self._whole
