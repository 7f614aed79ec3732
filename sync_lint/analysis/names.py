"""Dotted names of expressions, through a cheap import alias table.

libcst's QualifiedNameProvider needs scope analysis of the whole module, which costs several
times the parse. Rules only need "what does ``tl.load`` / ``torch.ops.x.y`` / ``kernel`` refer
to", which module-level (and function-level) imports answer.
"""

from __future__ import annotations

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

    def _collect(self, body, is_package: bool) -> None:
        # Imports anywhere in the module (function-level imports are common in engines); a name
        # imported twice keeps its first meaning, which is what module-level code sees.
        stack = list(body)
        while stack:
            statement = stack.pop(0)
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
