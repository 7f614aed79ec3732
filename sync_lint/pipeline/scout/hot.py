"""Where ``analysis.hot_scopes`` may find a hot scope (``HotScout``)."""

from __future__ import annotations

import ast
import bisect
from functools import cached_property

from sync_lint.analysis.hot_words import HotNames, is_torch_module_class, matches
from sync_lint.config import Settings
from sync_lint.pipeline.scout.syntax import (
    BLOCK_FIELDS,
    FUNCTIONS,
    FileNames,
    UnitSpans,
    ast_dotted,
    decorator_callee,
)


class HotScout:
    """Over-approximates ``HotScopes``: cold patterns, CPU backends and memoizers, which only
    take hotness away, are not modelled. ``module_name``: the file's, as the lint names it
    (``lint_file.module_name_for``), which ``hot-functions`` are matched under; the scout of a
    file of unknown name is not asked where ``hot-functions`` is set (``Scout.knows_hot_functions``).
    ``module_bases``: the names bases may have that other files make ``nn.Module`` subclasses
    (``Scout``)."""

    def __init__(
        self, names: FileNames, tree: ast.Module, settings: Settings, module_name: str | None,
        module_bases: tuple[str, ...] = (),
    ) -> None:
        self.names = names
        self.tree = tree
        self.hot_names = HotNames(settings)
        self.module_name = module_name
        # Matched by last part (this file's names keep a relative import's module by its tail).
        self._module_base_parts = {base.rpartition(".")[2] for base in module_bases}

    # Made on the first question and kept: ``units`` and ``SyncScout.found`` ask for each.
    @cached_property
    def spans(self) -> UnitSpans:
        return UnitSpans(self.tree)

    def found(self) -> bool:
        return bool(self.graph_blocks) or self._compiled() or self._hot_method() or bool(self._named_hot_units)

    def units(self) -> set[tuple[str | None, str]] | None:
        """Per unit, the same over-approximation as ``found``: a hot method of a class that may be
        hot or an ``nn.Module``, a top-level function passed to a compile at module level, and a
        unit holding (at any depth: nested functions are judged too) a function that may be
        compiled, a graph block, or a class with a hot method. None when such a thing is outside
        every unit (a class or a function defined under a module-level ``if``): module-level
        code is always parsed, but what it calls would not be."""
        whole = self.whole_units
        if whole is None:
            return None
        found = whole | {self.spans.unit_at(block.lineno) for block in self.graph_blocks}
        return None if None in found else found

    @cached_property
    def graph_blocks(self) -> list[ast.AST]:
        """``with`` blocks that may capture a CUDA graph (``HotScopes.is_graph_block``): what runs
        in them is hot, whatever function they are in."""
        return [
            node for kind in (ast.With, ast.AsyncWith) for node in self.names.of(kind)
            if any(self._is_graph_call(item.context_expr) for item in node.items)
        ]

    @cached_property
    def whole_units(self) -> set[tuple[str | None, str]] | None:
        """The units that may be hot as a whole (``units`` but for graph blocks: a unit holding
        only those is hot in them alone); None as for ``units``."""
        modules = self._module_classes()
        spans = self.spans
        defined = {node.name for kind in FUNCTIONS for node in self.names.of(kind)}
        compiled = {(None, name) for name in self._compiled_by_call()}
        if any(unit not in spans.names and unit[1] in defined for unit in compiled):
            return None
        found = compiled & spans.names  # a compiled import is another file's (not hot here)
        found |= self._named_hot_units
        found.update(spans.unit_at(node.lineno) for kind in FUNCTIONS for node in self.names.of(kind) if self._decorated_compiled(node))
        top_level = {id(statement) for statement in self.tree.body}
        for node in self.names.of(ast.ClassDef):
            patterns = self._hot_method_patterns(node, modules)
            hot_methods = [m.name for m in node.body if type(m) in FUNCTIONS and matches(m.name, patterns)]
            if hot_methods:
                if id(node) in top_level:
                    found.update((node.name, name) for name in hot_methods)
                else:
                    found.add(spans.unit_at(node.lineno))  # a class inside a function: that function's unit
        return None if None in found else found

    @cached_property
    def _named_hot_units(self) -> set[tuple[str | None, str] | None]:
        """The units holding a function ``hot-functions`` names, at any depth (None among them:
        one outside every unit, under a module-level block)."""
        is_named_hot = self.hot_names.is_named_hot
        if is_named_hot is None:
            return set()
        assert self.module_name is not None, "hot-functions are matched under a module name"
        return {
            self.spans.unit_at(node.lineno)
            for qualname, node in qualified_functions(self.tree.body, self.module_name) if is_named_hot(qualname)
        }

    def _is_graph_call(self, node: ast.expr) -> bool:
        return type(node) is ast.Call and "graph" in self.names.last_parts(node.func)

    def _decorated_compiled(self, function: ast.AST) -> bool:
        return any("compile" in self.names.last_parts(decorator_callee(decorator)) for decorator in function.decorator_list)

    def _compile_calls(self) -> list[ast.Call]:
        """Module-level calls, with an argument, of what may be ``torch.compile``."""
        calls = (getattr(statement, "value", None) for statement in self.tree.body)
        return [c for c in calls if type(c) is ast.Call and c.args and "compile" in self.names.last_parts(c.func)]

    def _compiled_by_call(self) -> set[str]:
        """Names passed to a call that may be ``torch.compile`` at module level."""
        written = (ast_dotted(call.args[0]) for call in self._compile_calls())
        return {name.rsplit(".", 1)[-1] for name in written if name}

    def _compiled(self) -> bool:
        """A function decorated with ``torch.compile`` or passed to it at module level."""
        return bool(self._compile_calls()) or any(
            self._decorated_compiled(function) for kind in FUNCTIONS for function in self.names.of(kind)
        )

    def _hot_method(self) -> bool:
        """A method named like ``hot-method-patterns`` in a class that may be a hot class or an
        ``nn.Module`` subclass, or like a ``hot-class-methods`` entry its class may match."""
        sieve = self.hot_names.any_method_patterns
        named = sorted(
            ((f.lineno, f.col_offset), f.name) for kind in FUNCTIONS for f in self.names.of(kind)
            if matches(f.name, sieve)
        )  # fmt: skip
        if not named:
            return False
        starts = [start for start, _ in named]
        with_hot_name = {}
        for node in self.names.of(ast.ClassDef):
            # Syntax nests: a function that starts inside a class's span is defined in it, at
            # some depth (what a walk of the class finds, without walking it).
            first = bisect.bisect_left(starts, (node.lineno, node.col_offset))
            last = bisect.bisect_right(starts, (node.end_lineno, node.end_col_offset))
            if first < last:
                with_hot_name[node] = [name for _, name in named[first:last]]
        if not with_hot_name:
            return False  # the cheap question first: most classes have no method so named
        modules = self._module_classes()
        for node, methods in with_hot_name.items():
            patterns = self._hot_method_patterns(node, modules)
            if any(matches(method, patterns) for method in methods):
                return True
        return False

    def _hot_method_patterns(self, node: ast.ClassDef, modules: set[str]) -> tuple[str, ...]:
        """The names of the methods that may be hot in this class (``HotScopes._judge``)."""
        return self.hot_names.hot_method_patterns(self._class_names(node), node.name in modules)

    def may_be_hot_class(self, node: ast.ClassDef) -> bool:
        """May it be a hot class (``HotScopes.is_hot_class``)?"""
        methods = (m.name for m in node.body if type(m) in FUNCTIONS)
        return self.hot_names.is_hot_class(self._class_names(node), methods)

    def _class_names(self, node: ast.ClassDef) -> list[str]:
        """Its own name and every last part its bases' names may have."""
        return [node.name, *(part for base in node.bases for part in self._base_last_parts(base))]

    def _base_last_parts(self, base: ast.expr) -> set[str]:
        return self.names.last_parts(base.value if type(base) is ast.Subscript else base)

    def _module_classes(self) -> set[str]:
        """Names of the classes that may be ``nn.Module`` subclasses: a base whose meaning ends in
        ``Module`` or may be another of torch's modules (``nn.Embedding``), or that another file
        makes one (``module_bases``), a class of this file that may be one, or
        ``@support_torch_compile``."""
        found: set[str] = set()
        pending: list[tuple[str, set[str]]] = []  # a class not known to be one, and its bases' last parts
        for node in self.names.of(ast.ClassDef):
            parts = {part for base in node.bases for part in self._base_last_parts(base)}
            decorated = any(
                name.endswith("support_torch_compile")
                for decorator in node.decorator_list for name in self.names.meanings(decorator_callee(decorator))
            )
            if decorated or any(part.endswith("Module") for part in parts) or not parts.isdisjoint(
                self._module_base_parts
            ) or any(
                is_torch_module_class(meaning) for base in node.bases
                for meaning in self.names.meanings(base.value if type(base) is ast.Subscript else base)
            ):  # fmt: skip
                found.add(node.name)
            else:
                pending.append((node.name, parts))
        changed = True
        while changed:  # a class of this file that may be one makes its subclasses so
            changed = False
            for name, parts in pending:
                if name not in found and not parts.isdisjoint(found):
                    found.add(name)
                    changed = True
        return found


def qualified_functions(body: list[ast.stmt], prefix: str):
    """Each function defined in these statements, at any depth, with its qualified name as
    ``analysis.functions`` writes it: ``<prefix>.<name>``, a class's or an enclosing function's
    name joining the prefix, a block's (``if``, ``try``, ``with``, a loop) not. Blocks of every
    kind are entered, some of which the analysis does not collect from (``match``, ``except*``):
    a name more is a unit more kept, never one less."""
    for statement in body:
        kind = type(statement)
        if kind in FUNCTIONS or kind is ast.ClassDef:
            qualname = f"{prefix}.{statement.name}" if prefix else statement.name
            if kind is not ast.ClassDef:
                yield qualname, statement
            yield from qualified_functions(statement.body, qualname)
            continue
        for field in BLOCK_FIELDS:
            block = getattr(statement, field, None) or []
            if block and not isinstance(block[0], ast.stmt):  # ``except`` handlers, ``case``s
                for part in block:
                    yield from qualified_functions(part.body, prefix)
            else:
                yield from qualified_functions(block, prefix)
