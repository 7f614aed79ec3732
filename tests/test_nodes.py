"""The fast node helpers (``sync_lint.analysis.nodes``) must answer exactly what libcst's own
API answers: the analyses rest on them for every file."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from sync_lint.analysis.nodes import _NODE_CLASSES, children, kinds, parse_module

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "sync_lint").rglob("*.py"))


def _all_nodes(module: cst.Module) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            found.append(node)
            return True

    module.visit(Collect())
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_unvalidated_parse_builds_the_same_tree(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    fast = parse_module(text)
    assert fast.deep_equals(cst.parse_module(text))
    assert fast.code == text


def test_validation_is_back_after_parsing() -> None:
    parse_module("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")  # an empty name fails libcst's own check
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("def f(:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")


def test_kinds_agree_with_isinstance() -> None:
    module = cst.parse_module((ROOT / "sync_lint" / "analysis" / "flow.py").read_text(encoding="utf-8"))
    groups = [(cst.BaseExpression,), (cst.BaseSuite, cst.Else), (cst.Call,), (cst.BaseSmallStatement, cst.If)]
    nodes = _all_nodes(module)
    for classes in groups:
        members = kinds(*classes)
        for node in nodes:
            assert (type(node) in members) == isinstance(node, classes), (type(node).__name__, classes)
    # The lookup relies on libcst's concrete node classes having no subclasses of their own.
    for cls in (cst.Call, cst.Name, cst.Attribute, cst.Subscript, cst.FunctionDef, cst.If):
        assert kinds(cls) == {cls}


def test_children_are_the_code_bearing_nodes_in_source_order() -> None:
    module = cst.parse_module("out = kernel[grid](x[:, 0], y.t(), n=4)  # launch\n")
    call = module.body[0].body[0].value
    kids = children(call)
    assert kids[0] is call.func and [type(k) for k in kids[1:]] == [cst.Arg] * 3
    assert all(type(k) in _NODE_CLASSES for k in kids)
    assert not any(isinstance(k, (cst.Comma, cst.LeftParen, cst.BaseParenthesizableWhitespace)) for k in kids)
