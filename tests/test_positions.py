"""Positions rendered per statement must equal libcst's whole-module PositionProvider for every
node: findings, noqa lines and fix edits all rest on them."""

from __future__ import annotations

from pathlib import Path

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from libcst.metadata import MetadataWrapper, PositionProvider

from sync_lint.analysis.nodes import children
from sync_lint.analysis.positions import Positions

ROOT = Path(__file__).resolve().parent.parent

TRICKY = {
    "repeated one-liners": "def f(x):\n    return x\n\ndef g(x):\n    return x\n\nclass A:\n    def f(x):\n        return x\n",
    "tabs and mixed blocks": "class A:\n\tdef f(self):\n\t\tif self:\n\t\t    return 1\n\t\treturn 2\n",
    "comments and blank lines before statements": (
        "# head\n\nimport os\n\n\nclass A:\n    # about f\n\n    @staticmethod\n    # between\n    def f():\n"
        "        # inside\n        x = 1  # trailing\n\n        return x\n# tail\n"
    ),
    "elif chains": "def f(a):\n    if a == 1:\n        b = 1\n    elif a == 2:\n        b = 2\n    elif a:\n        b = 3\n    else:\n        b = 4\n    return b\n",
    "suites and semicolons": "def f(a):\n    if a: b = 1; c = 2\n    for i in a: pass\n    x = 1; y = 2\n    return b\n",
    "continuations and strings": (
        "def f(a):\n    s = '''\nnot indented\n    more'''\n    t = a + \\\n        1\n    u = g(\n  a,\n            b)\n    return s, t, u\n"
    ),
    "try and match": (
        "def f(a):\n    try:\n        x = 1\n    except (ValueError, KeyError) as e:\n        x = e\n    else:\n        x = 2\n"
        "    finally:\n        y = 3\n    match a:\n        case [1, *rest]:\n            return rest\n        case _:\n            return x\n"
    ),
    "CRLF": "class A:\r\n    def f(self, x):\r\n        return x[:, 0]\r\n\r\n    def g(self):\r\n        return 1\r\n",
    "no final newline": "def f(x):\n    return x\n\ndef g(x):\n    return x.to(int)",
    "async and with": "async def f(a):\n    async with a as b, a as c:\n        await b\n    async for i in c:\n        yield i\n",
}


def _nodes(module: cst.Module) -> list[cst.CSTNode]:
    found, stack = [], [module]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(children(current))
    return found


def _assert_same_positions(text: str) -> None:
    module = cst.parse_module(text)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = _nodes(module)
    # Ask in an order that renders inner statements before the ones around them, and the reverse.
    for order in (nodes, nodes[::-1]):
        positions = Positions(module, text)
        for node in order:
            assert positions[node] == expected[node], (type(node).__name__, cst.Module([]).code_for_node(node))


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_tricky_layouts(name: str) -> None:
    _assert_same_positions(TRICKY[name])


def _repository_files() -> list[Path]:
    return sorted(p for folder in ("fixtures", "reference_kernels", "sync_lint") for p in (ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _repository_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_repository_files(path: Path) -> None:
    _assert_same_positions(path.read_text(encoding="utf-8"))


# Generated programs such as ``1j[0]`` are valid syntax that CPython's compiler warns about.
@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_node())
def test_generated_programs(text: str) -> None:
    try:
        cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError):
        return
    _assert_same_positions(text)


def test_a_node_in_a_method_renders_only_its_statement() -> None:
    # The point of rendering per statement: a finding in one method of a big class must not
    # render the class. Only the innermost statement's nodes get positions.
    text = "class A:\n    def f(self, x):\n        y = x[:, 0]\n        return y\n\n    def g(self):\n        return 2\n"
    module = cst.parse_module(text)
    f = module.body[0].body.body[0]
    slice_statement = f.body.body[0]
    target = slice_statement.body[0].value
    positions = Positions(module, text)
    assert positions[target].start.line == 3 and positions[target].start.column == 12
    rendered = set(positions._ranges)
    assert slice_statement in rendered and target in rendered
    assert f not in rendered and module.body[0] not in rendered and positions._whole is None
