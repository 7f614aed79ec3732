"""Fast parsing, node tests and child iteration over libcst nodes, shared by the analyses.

libcst's node classes are ABCs, so ``isinstance(node, cst.Call)`` goes through
``ABCMeta.__instancecheck__``: several times slower than a set lookup, and the walks that test
every node do it millions of times on an engine's tree. libcst's own ``children`` runs a visitor
that rebuilds the node: far too slow to call per node. And every node libcst's parser builds
validates itself, a check meant for trees built by hand: about a fifth of the parse.
"""

from __future__ import annotations

import re

import libcst as cst


def _all_subclasses(root: type) -> frozenset[type]:
    found: set[type] = set()
    stack = [root]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                stack.append(sub)
    return frozenset(found)


_NODE_CLASSES = _all_subclasses(cst.CSTNode)


def _skip_validation(node: cst.CSTNode) -> None:
    pass


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module`` without each node's ``_validate``: the parser only builds trees
    of code it accepted, so the check cannot fail there (``tests/test_nodes.py`` compares the
    trees). Nodes built while this runs skip it too; parsing and linting a file is
    single-threaded, and fixes build their nodes outside it."""
    validate = cst.CSTNode.__post_init__
    cst.CSTNode.__post_init__ = _skip_validation
    try:
        return cst.parse_module(text)
    finally:
        cst.CSTNode.__post_init__ = validate


def kinds(*classes: type) -> frozenset[type]:
    """The node classes that are ``classes`` or derive from them, for ``type(node) in KINDS``
    (the same answer as ``isinstance(node, classes)`` for any libcst node)."""
    return frozenset(c for c in _NODE_CLASSES if issubclass(c, classes))


_SKIPPED_FIELDS = frozenset({
    "lpar", "rpar", "comma", "leading_lines", "lines_after_decorators", "header", "footer", "semicolon",
    "equal", "star", "dot", "colon", "operator", "newline", "trailing_whitespace", "asynchronous",
})  # fmt: skip
_FIELDS: dict[type, tuple[str, ...]] = {}
_SEQUENCES = (list, tuple)


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The child nodes that hold code, in source order, without whitespace and punctuation."""
    kind = type(node)
    fields = _FIELDS.get(kind)
    if fields is None:
        fields = _FIELDS[kind] = tuple(
            name for name in node.__dataclass_fields__ if name not in _SKIPPED_FIELDS and not name.startswith("whitespace")
        )
    found = []
    for name in fields:
        value = getattr(node, name)
        if type(value) in _SEQUENCES:
            found += [item for item in value if type(item) in _NODE_CLASSES]
        elif type(value) in _NODE_CLASSES:
            found.append(value)
    return found


def block_statements(block) -> tuple:
    """The statements of a block: a suite, or what holds one (``else``, ``finally``, an
    ``except`` or ``case`` clause); an ``elif`` is a statement of its own; the small statements
    of a one-line suite are statements."""
    if type(block) is cst.If:
        return (block,)  # an ``elif``
    body = block.body  # a suite, or ``else`` / ``finally`` / ``except`` / ``case`` around one
    return tuple(body.body if isinstance(body, cst.BaseSuite) else body)


def inner_blocks(statement) -> tuple:
    """The blocks a compound statement holds (none for ``def`` and ``class``: their own scopes)."""
    kind = type(statement)
    if kind is cst.If or kind is cst.For or kind is cst.While:
        return (statement.body,) if statement.orelse is None else (statement.body, statement.orelse)
    if kind is cst.With:
        return (statement.body,)
    if kind is cst.Try or kind is cst.TryStar:
        return tuple(b for b in (statement.body, *statement.handlers, statement.orelse, statement.finalbody)
                     if b is not None)
    if kind is cst.Match:
        return tuple(statement.cases)
    return ()


# -- code quoted in messages --------------------------------------------------------------------
MAX_QUOTED = 48  # characters of code a message quotes
_SPACE_INSIDE_BRACKETS = re.compile(r"(?<=[(\[{]) | (?=[)\]}])")


def one_line(module: cst.Module, node: cst.CSTNode) -> str:
    """The code of ``node`` on one line: runs of whitespace as one space, none inside the
    brackets of code written over several lines (``x[\n    :bs\n]`` reads ``x[:bs]``)."""
    return _SPACE_INSIDE_BRACKETS.sub("", " ".join(module.code_for_node(node).split()))


def shortened(text: str, keep_end: bool = False) -> str:
    """``text`` cut to ``MAX_QUOTED`` characters for a message: its start, or with ``keep_end``
    its start and its end (a sync's call: ``torch.cuda.current_...(self.device).synchronize()``)."""
    if len(text) <= MAX_QUOTED:
        return text
    if keep_end:
        head = (MAX_QUOTED - 3) // 2
        return text[:head] + "..." + text[len(text) - (MAX_QUOTED - 3 - head) :]
    return text[: MAX_QUOTED - 3] + "..."


def named_params(params: cst.Parameters) -> tuple[cst.Param, ...]:
    """A signature's parameters that have names of their own: positional-only, ordinary and
    keyword-only (not ``*args`` / ``**kwargs``)."""
    return (*params.posonly_params, *params.params, *params.kwonly_params)


def positional_params(params: cst.Parameters) -> tuple[cst.Param, ...]:
    """A signature's parameters a positional argument may bind, in order (not ``*args``)."""
    return (*params.posonly_params, *params.params)
