"""The functions of a module, with what every analysis asks first about them: qualified name,
enclosing class and its bases, parameters (without ``self``/``cls``) and decorators."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from sync_lint.analysis.names import NameTable, dotted
from sync_lint.analysis.nodes import positional_params


@dataclass(frozen=True)
class FunctionInfo:
    node: cst.FunctionDef
    qualname: str  # "<module>.<Class>.<name>" or "<module>.<name>" (nested: "<outer>.<name>")
    name: str
    class_node: cst.ClassDef | None
    class_bases: tuple[str, ...]  # resolved dotted names of the enclosing class's bases
    params: tuple[str, ...]  # positional-or-keyword order, without self / cls
    all_params: tuple[str, ...]  # including self / cls
    decorators: tuple[str, ...]  # resolved dotted names (call decorators by their callee)
    # How many of ``params`` a call can bind by position: not ``*args`` nor keyword-only ones.
    positional: int = 0

    @property
    def is_method(self) -> bool:
        return _is_method(self.class_node, self.decorators)

    @property
    def class_name(self) -> str | None:
        return self.class_node.name.value if self.class_node is not None else None


def _params(node: cst.FunctionDef) -> list[str]:
    p = node.params
    names = [param.name.value for param in positional_params(p)]
    if isinstance(p.star_arg, cst.Param):
        names.append(p.star_arg.name.value)
    names.extend(param.name.value for param in p.kwonly_params)
    return names


# Statements whose blocks may define functions at the same level (``if TYPE_CHECKING:``, ``try:``).
_BLOCK_STATEMENTS = (cst.If, cst.Try, cst.With, cst.For, cst.While)


def _decorator_name(decorator: cst.Decorator, names: NameTable) -> str:
    expression = decorator.decorator
    if isinstance(expression, cst.Call):
        expression = expression.func
    return names.resolve(expression) or (dotted(expression) or "")


def module_functions(module: cst.Module, names: NameTable) -> list[FunctionInfo]:
    """Every function and method, nested ones included, in source order."""
    found: list[FunctionInfo] = []
    # A module-level recursion, not a nested function calling itself: that one would be a
    # reference cycle holding the whole tree until the garbage collector ran.
    _collect(module.body, names.module_name, None, (), names, found)
    return found


def _is_method(class_node: cst.ClassDef | None, decorators: tuple[str, ...]) -> bool:
    """A function of a class that receives ``self`` / ``cls``: not a ``staticmethod`` (decorators
    are resolved names, so ``builtins.staticmethod`` or ``pkg.staticmethod`` may stand for it)."""
    return class_node is not None and not any(d.endswith("staticmethod") for d in decorators)


def _collect(
    body, prefix: str, class_node: cst.ClassDef | None, bases: tuple[str, ...], names: NameTable,
    found: list[FunctionInfo],
) -> None:
    for statement in body:
        kind = type(statement)
        if kind is cst.FunctionDef:
            all_params = _params(statement)
            decorators = tuple(_decorator_name(d, names) for d in statement.decorators)
            bound_first = _is_method(class_node, decorators) and bool(all_params)
            params = tuple(all_params[1:] if bound_first else all_params)
            qualname = f"{prefix}.{statement.name.value}" if prefix else statement.name.value
            positional = len(statement.params.posonly_params) + len(statement.params.params) - bound_first
            found.append(
                FunctionInfo(statement, qualname, statement.name.value, class_node, bases, params,
                             tuple(all_params), decorators, max(positional, 0))
            )
            _collect(_block(statement), qualname, None, (), names, found)
        elif kind is cst.ClassDef:
            qualname = f"{prefix}.{statement.name.value}" if prefix else statement.name.value
            class_bases = tuple(names.resolve(arg.value) or "" for arg in statement.bases)
            _collect(_block(statement), qualname, statement, class_bases, names, found)
        elif kind in _BLOCK_STATEMENTS:
            # Functions defined under ``if TYPE_CHECKING:`` / ``try:`` at the same level.
            for block in _blocks(statement):
                _collect(block, prefix, class_node, bases, names, found)


def _block(node: cst.CSTNode):
    body = getattr(node, "body", None)
    if type(body) is cst.IndentedBlock:
        return body.body
    return ()


def _blocks(statement: cst.CSTNode):
    yield _block(statement)
    orelse = getattr(statement, "orelse", None)
    while orelse is not None:
        if isinstance(orelse, cst.If):
            yield _block(orelse)
            orelse = orelse.orelse
        else:
            yield _block(orelse)
            orelse = None
    for handler in getattr(statement, "handlers", ()):
        yield _block(handler)
    final = getattr(statement, "finalbody", None)
    if final is not None:
        yield _block(final)
