"""Dotted names of expressions, through a cheap import alias table.

libcst's QualifiedNameProvider needs scope analysis of the whole module, which costs several
times the parse. Rules only need "what does ``tl.load`` / ``torch.ops.x.y`` / ``kernel`` refer
to", which module-level (and function-level) imports answer.
"""

from __future__ import annotations

from collections import deque
from functools import cached_property

import libcst as cst

from sync_lint.analysis.modules import resolve_relative


def dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    # ``type(...) is``: libcst's classes are ABCs, whose isinstance is slow (``analysis.nodes``).
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is cst.Name:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def _module_path(node: cst.BaseExpression | None) -> str:
    return dotted(node) or "" if node is not None else ""


class NameTable:
    """Local name -> the dotted name it was imported as, for one module."""

    def __init__(self, module: cst.Module, module_name: str, aliases: dict[str, str], is_package: bool = False) -> None:
        self.module_name = module_name
        self.aliases = aliases
        self.imports: dict[str, str] = {}
        self._collect(module.body, is_package)
        self._body = module.body  # read again only where a rule asks for ``op_aliases``

    def _collect(self, body, is_package: bool) -> None:
        # Imports anywhere in the module (function-level imports are common in engines); a name
        # imported twice keeps its first meaning, which is what module-level code sees.
        stack = deque(body)  # in order: an alias is read through those bound before it
        while stack:
            statement = stack.popleft()
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    self._add(small, is_package)
            elif isinstance(statement, (cst.If, cst.Try, cst.FunctionDef, cst.ClassDef, cst.With)):
                stack.extend(_child_statements(statement))

    def _add(self, small: cst.BaseSmallStatement, is_package: bool) -> None:
        if isinstance(small, cst.Import):
            for alias in small.names:
                full = dotted(alias.name) or ""
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.imports.setdefault(alias.asname.name.value, full)
                else:
                    root = full.split(".")[0]
                    self.imports.setdefault(root, root)
        elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            base = resolve_relative(self.module_name, is_package, len(small.relative), _module_path(small.module))
            for alias in small.names:
                name = dotted(alias.name) or ""
                local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
                self.imports.setdefault(local, f"{base}.{name}" if base else name)

    @cached_property
    def op_aliases(self) -> dict[str, str]:
        """The names a module binds once, at its top level, to a ``torch.ops`` chain (``_C =
        torch.ops._C``, ``flash_mla_cuda = torch.ops._flashmla_C``, ``op = _C.silu``: each
        alias read through those before it), for ``custom_op``. A name bound again anywhere in
        module code, or imported (anywhere: ``imports``), stands for nothing certain and is
        left out."""
        body = self._body
        top_level = {id(statement) for statement in body}
        times_bound: dict[str, int] = {}
        candidates: list[tuple[str, str]] = []
        stack = deque(body)  # in order: an alias is read through those bound before it
        while stack:
            statement = stack.popleft()
            kind = type(statement)
            if kind is cst.SimpleStatementLine:
                for small in statement.body:
                    for name in _names_bound(small):
                        times_bound[name] = times_bound.get(name, 0) + 1
                    if (
                        id(statement) in top_level and type(small) is cst.Assign and len(small.targets) == 1
                        and type(small.targets[0].target) is cst.Name and (value := dotted(small.value)) is not None
                    ):  # fmt: skip
                        candidates.append((small.targets[0].target.value, value))
                continue
            if kind in (cst.FunctionDef, cst.ClassDef):
                names = [statement.name.value]
            elif kind is cst.For:
                names = _target_names([statement.target])
            else:
                names = []
            for name in names:
                times_bound[name] = times_bound.get(name, 0) + 1
            if kind in (cst.If, cst.Try, cst.With, cst.For, cst.While):
                stack.extend(_child_statements(statement))
        aliases: dict[str, str] = {}
        for name, value in candidates:
            if times_bound.get(name) != 1 or name in self.imports:
                continue
            head, _, rest = value.partition(".")
            target = aliases[head] + ("." + rest if rest else "") if head in aliases else self.resolve_dotted(value)
            if target == "torch.ops" or target.startswith("torch.ops."):
                aliases[name] = target
        return aliases

    def custom_op(self, node: cst.BaseExpression) -> str | None:
        """The ``torch.ops`` name a callee written through a module-level alias of one stands
        for (``_C.silu`` where ``_C = torch.ops._C``: ``torch.ops._C.silu``), else None."""
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        target = self.op_aliases.get(head)
        return None if target is None else target + ("." + rest if rest else "")

    def resolve(self, node: cst.BaseExpression) -> str | None:
        """The dotted name an expression refers to, with imports and alias shims applied.

        A name defined in this module (not imported) resolves to ``<module>.<name>``.
        """
        name = dotted(node)
        if name is None:
            return None
        return self.resolve_dotted(name)

    def resolve_dotted(self, name: str) -> str:
        head, _, rest = name.partition(".")
        if head in self.imports:
            full = self.imports[head] + ("." + rest if rest else "")
        else:
            full = f"{self.module_name}.{name}" if self.module_name else name
        return self.apply_aliases(full)

    def apply_aliases(self, full: str) -> str:
        for alias, target in self.aliases.items():
            if full == alias or full.startswith(alias + "."):
                return target + full[len(alias) :]
        return full

    def is_imported(self, node: cst.BaseExpression) -> bool:
        name = dotted(node)
        return name is not None and name.partition(".")[0] in self.imports


def _names_bound(small: cst.BaseSmallStatement) -> list[str]:
    """The plain names an assignment binds (its targets, unpacked too); imports are ``imports``'."""
    kind = type(small)
    if kind is cst.Assign:
        return _target_names([target.target for target in small.targets])
    if kind is cst.AnnAssign or kind is cst.AugAssign:
        return _target_names([small.target])
    return []


def _target_names(targets: list[cst.BaseExpression]) -> list[str]:
    found = []
    while targets:
        target = targets.pop()
        if type(target) is cst.Name:
            found.append(target.value)
        elif type(target) in (cst.Tuple, cst.List):
            targets.extend(element.value for element in target.elements)  # a starred one too
    return found


def _child_statements(statement: cst.CSTNode):
    """The statements directly nested in a compound statement."""
    for block_name in ("body", "orelse", "finalbody"):
        block = getattr(statement, block_name, None)
        if isinstance(block, (cst.Else, cst.Finally)):
            block = block.body
        if isinstance(block, cst.If):  # elif
            yield block
        elif isinstance(block, cst.BaseSuite):
            body = block.body
            if isinstance(body, (list, tuple)):
                yield from body
    for handler in getattr(statement, "handlers", ()):
        yield from handler.body.body
