"""Fast child iteration over libcst nodes, shared by the analyses.

libcst's own ``children`` runs a visitor that rebuilds the node: far too slow to call per node.
"""

from __future__ import annotations

from typing import Iterator

import libcst as cst

_SKIPPED_FIELDS = frozenset({
    "lpar", "rpar", "comma", "leading_lines", "lines_after_decorators", "header", "footer", "semicolon",
    "equal", "star", "dot", "colon", "operator", "newline", "trailing_whitespace", "asynchronous",
})  # fmt: skip
_FIELDS: dict[type, tuple[str, ...]] = {}


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The child nodes that hold code, without whitespace and punctuation. libcst's own
    ``children`` runs a visitor that rebuilds the node: far too slow to call per node."""
    fields = _FIELDS.get(type(node))
    if fields is None:
        fields = _FIELDS[type(node)] = tuple(
            name for name in node.__dataclass_fields__ if name not in _SKIPPED_FIELDS and not name.startswith("whitespace")
        )
    for name in fields:
        value = getattr(node, name)
        kind = type(value)
        if kind is list or kind is tuple:
            for item in value:
                if _is_node(type(item)):
                    yield item
        elif _is_node(kind):
            yield value


_NODE_TYPES: dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    found = _NODE_TYPES.get(kind)
    if found is None:
        found = _NODE_TYPES[kind] = issubclass(kind, cst.CSTNode)
    return found
