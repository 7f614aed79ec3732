"""Code a test runs in order to see it fail: the bodies of ``with pytest.raises(...)`` and of
``with self.assertRaises(...)`` (``assertRaisesRegex``). A test that hands a kernel a transposed
tensor there checks that the kernel refuses it; a finding there would ask to "fix" the test."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from sync_lint.analysis.nodes import children

if TYPE_CHECKING:
    from sync_lint.analysis.context import FileContext

# A file without these words has no such block: most files are never walked.
_WORDS = re.compile(r"\braises\b|\bassertRaises")
_PYTEST_RAISES = "pytest.raises"
_UNITTEST_METHODS = frozenset({"assertRaises", "assertRaisesRegex", "assertRaisesRegexp"})


class ExpectedFailures:
    """The ids of every node inside such a block of the file."""

    def __init__(self, ctx: FileContext) -> None:
        self._inside: set[int] = set()
        if _WORDS.search(ctx.parsed_text) is None:
            return
        finder = _BlockFinder(ctx)
        ctx.module.visit(finder)
        for body in finder.bodies:
            self._inside.update(_node_ids(body))

    def contains(self, node: cst.CSTNode) -> bool:
        return id(node) in self._inside


class _BlockFinder(cst.CSTVisitor):
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.bodies: list[cst.BaseSuite] = []

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        return False  # no ``with`` statement in it

    def visit_With(self, node: cst.With) -> bool:
        if any(self._expects_an_error(item.item) for item in node.items):
            self.bodies.append(node.body)
            return False  # all of it is inside already
        return True

    def _expects_an_error(self, expression: cst.BaseExpression) -> bool:
        if not isinstance(expression, cst.Call):
            return False
        func = expression.func
        if isinstance(func, cst.Attribute) and func.attr.value in _UNITTEST_METHODS:
            return True  # ``self.assertRaises``: a ``TestCase`` method, whatever the receiver is named
        return self.ctx.names.resolve(func) == _PYTEST_RAISES


def _node_ids(root: cst.CSTNode) -> set[int]:
    found: set[int] = set()
    todo = [root]
    while todo:
        node = todo.pop()
        found.add(id(node))
        todo.extend(children(node))
    return found
