"""The scout's reading of a file's CPython ``ast``: names through imports (``FileNames``,
``first_imports``), the units a file is cut into (``UnitSpans``), and a fast walk."""

from __future__ import annotations

import ast
import bisect
import builtins
from collections import deque
from functools import cached_property

from sync_lint.analysis.dtypes import DTYPES
from sync_lint.analysis.modules import resolve_relative
from sync_lint.analysis.triton_names import is_triton_decorator
from sync_lint.config import Settings


class FileNames:
    """The file's imports, every meaning of each name, and ``alias-modules``: a stand-in for
    ``analysis.names.NameTable`` that may answer more meanings than it, never fewer."""

    def __init__(self, tree: ast.Module, settings: Settings) -> None:
        self.aliases: dict[str, str] = dict(settings["alias-modules"])
        self.imports: dict[str, set[str]] = {}
        self.bound: set[str] = set()  # every name the file binds anywhere
        self.relative: set[str] = set()  # names a relative import binds (their module is known by its tail only)
        self.nodes: dict[type, list] = {}  # each kind's nodes in ``walk``'s order
        self._torch_callees: dict[tuple[str | None, bool], bool] = {}  # ``may_be_torch``'s answers
        # What other modules make of the file once for all their questions (``flows.FileScopes``).
        self.memo: dict[type, object] = {}
        # Whether ``alias-modules`` may rename something to torch's names: only then does a
        # callee's meaning need the aliases (``may_be_torch``).
        self._torch_renamed = any(target.partition(".")[0] == "torch" for target in self.aliases.values())
        for node in walk(tree):
            bucket = self.nodes.get(type(node))
            if bucket is None:
                self.nodes[type(node)] = [node]
            else:
                bucket.append(node)
        of = self.of
        for node in of(ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.partition(".")[0]
                self.imports.setdefault(local, set()).add(alias.name if alias.asname else local)
                self.bound.add(local)
        for node in of(ast.ImportFrom):
            # Relative imports keep only their module's tail: meanings are compared by endings.
            base = node.module or ""
            for alias in node.names:
                if alias.name != "*":
                    local = alias.asname or alias.name
                    if node.level:
                        self.relative.add(local)
                    self.imports.setdefault(local, set()).add(f"{base}.{alias.name}" if base else alias.name)
                    self.bound.add(local)
        load = ast.Load
        self.bound.update(node.id for node in of(ast.Name) if type(node.ctx) is not load)
        for kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            self.bound.update(node.name for node in of(kind))
        for kind in (ast.Global, ast.Nonlocal):
            for node in of(kind):
                self.bound.update(node.names)

    @cached_property
    def op_aliases(self) -> dict[str, set[str]]:
        """Name -> the ``torch.ops`` chains an assignment of the file gives it (``_C =
        torch.ops._C``; ``op = _C.silu`` through it): ``NameTable.op_aliases`` over-approximated,
        as any such assignment counts, wherever it is and however often the name is bound.
        Made where a sink question first asks (``SinkScout._is_custom_op``)."""
        candidates = []
        for node in self.of(ast.Assign):
            if len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
                written = ast_dotted(node.value)
                if written is not None:
                    candidates.append((node.targets[0].id, node.value, written.partition(".")))
        found: dict[str, set[str]] = {}
        grown = True
        while grown:  # an alias through an alias, to a fixpoint
            grown = False
            for name, value, (head, dot, rest) in candidates:
                if head == "torch" or head in self.imports or head in found or self._torch_renamed:
                    meanings = {m for m in self.meanings(value) if m == "torch.ops" or m.startswith("torch.ops.")}
                    meanings.update(target + dot + rest for target in found.get(head, ()))
                    if not meanings <= found.get(name, set()):
                        found.setdefault(name, set()).update(meanings)
                        grown = True
        return found

    def op_meanings(self, node: ast.expr) -> set[str]:
        """The ``torch.ops`` names a callee written through such an alias may stand for."""
        written = ast_dotted(node)
        if written is None:
            return set()
        head, dot, rest = written.partition(".")
        return {target + dot + rest for target in self.op_aliases.get(head, ())}

    def of(self, kind: type) -> list:
        return self.nodes.get(kind, [])

    def meanings(self, node: ast.expr) -> set[str]:
        """Every dotted name ``node`` may resolve to: as written, through each import of its head,
        and with ``alias-modules`` applied to either. The analysis resolves an unimported name
        (and a relative import) behind a package name the scout does not know, so an alias that
        ends in a name's first parts may rename them too. Empty for no Name/Attribute chain."""
        written = ast_dotted(node)
        if written is None:
            return set()
        head, _, rest = written.partition(".")
        candidates = {written} | {full + ("." + rest if rest else "") for full in self.imports.get(head, ())}
        found = set(candidates)
        for alias, target in self.aliases.items():
            for name in candidates:
                parts = name.split(".")
                for k in range(1, len(parts) + 1):
                    prefix = ".".join(parts[:k])
                    if alias == prefix or alias.endswith("." + prefix):
                        found.add(".".join([target, *parts[k:]]))
        return found

    def may_be_torch(self, func: ast.expr, top_level: bool = False) -> bool:
        """May a callee name a torch function, as the domains resolve one (a name written
        ``torch.<...>`` or imported so, ``alias-modules`` applied)? ``top_level``: only
        ``torch.<name>`` (``LayoutDomain._torch_function``); else anything under ``torch``
        (``DeviceDomain.library_name``). Answered once per callee as written."""
        written = ast_dotted(func)
        known = self._torch_callees.get((written, top_level))
        if known is None:
            if self._torch_renamed:
                meanings = self.meanings(func)
            elif type(func) is ast.Name:  # ``meanings``' answer, without building it
                meanings = {func.id, *self.imports.get(func.id, ())}
            else:
                head, _, rest = (written or "").partition(".")
                meanings = {written or "", *(f"{full}.{rest}" for full in self.imports.get(head, ()))}
            known = self._torch_callees[(written, top_level)] = any(
                name.startswith("torch.") and (not top_level or name.count(".") == 1) for name in meanings
            )  # fmt: skip
        return known

    def last_parts(self, node: ast.expr) -> set[str]:
        return {name.rsplit(".", 1)[-1] for name in self.meanings(node)}

    def is_launch(self, call: ast.Call) -> bool:
        """``k[grid](...)`` where ``k`` may be a global (``sinks`` judges a launch so): not
        ``list[int]()``, a builtin generic's constructor, unless the file rebinds ``list``."""
        func = call.func
        if type(func) is not ast.Subscript:
            return False
        written = ast_dotted(func.value)
        if written is None:
            return False
        head = written.partition(".")[0]
        return head not in BUILTINS or head in self.bound

    def is_dtype_view(self, call: ast.Call) -> bool:
        """``t.view(x)`` with one argument (positional or keyword) that may name a torch dtype:
        its last part, through imports and aliases, is a dtype's name."""
        func = call.func
        if type(func) is not ast.Attribute or func.attr != "view" or len(call.args) + len(call.keywords) != 1:
            return False
        argument = call.args[0] if call.args else call.keywords[0].value
        if type(argument) is ast.Starred:
            argument = argument.value
        return not DTYPES.isdisjoint(self.last_parts(argument))

    def triton_decorated(self, function: ast.AST) -> bool:
        """A decorator whose meaning may be Triton's (``@triton.jit``, an alias of it)."""
        return any("triton" in name for d in function.decorator_list for name in self.meanings(decorator_callee(d)))

    def certainly_triton_kernel(self, function: ast.AST) -> bool:
        """A decorator the analyses certainly resolve to Triton's (``analysis.functions``): its
        head is imported by absolute imports only, and each of them, with ``alias-modules``
        applied as ``NameTable`` applies them, gives a Triton name."""
        if type(function) not in FUNCTIONS:
            return False
        for decorator in function.decorator_list:
            written = ast_dotted(decorator_callee(decorator))
            if written is None:
                continue
            head, _, rest = written.partition(".")
            imported = self.imports.get(head)
            if not imported or head in self.relative:
                continue
            if all(is_triton_decorator(self._aliased(full + ("." + rest if rest else ""))) for full in imported):
                return True
        return False

    def _aliased(self, full: str) -> str:
        for alias, target in self.aliases.items():  # the first that matches, as ``NameTable.apply_aliases``
            if full == alias or full.startswith(alias + "."):
                return target + full[len(alias) :]
        return full


def first_line(statement: ast.AST) -> int:
    """The first line of a statement: of a function or class definition, its decorators
    included, where the unit cut of ``pipeline.units`` starts it."""
    return min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])


# The fields of a compound statement that hold statements (an ``except`` clause's handler and
# a ``match``'s case hold them in their own ``body``), and the ``try`` statements (``try`` /
# ``except*`` from Python 3.11).
BLOCK_FIELDS = ("body", "handlers", "orelse", "finalbody", "cases")
TRY_STATEMENTS = (ast.Try, getattr(ast, "TryStar", ast.Try))


def first_imports(tree: ast.Module, lines: list[str], module_name: str, is_package: bool) -> dict[str, str]:
    """``analysis.names.NameTable(...).imports`` of the same code, read from its ``ast``: each
    local name's first meaning, the statements taken breadth first through ``if``, ``try``,
    ``with``, ``def`` and ``class`` blocks, and none of a block written on its header's line
    (``if TYPE_CHECKING: import x``: libcst's one-line suite holds small statements, which
    ``NameTable`` does not read). ``lines``: the text's lines, to tell such a block.
    ``tests/test_scout.py`` compares the two."""
    found: dict[str, str] = {}
    queue = deque(tree.body)
    while queue:
        statement = queue.popleft()
        kind = type(statement)
        if kind is ast.Import:
            for alias in statement.names:
                if alias.asname:
                    found.setdefault(alias.asname, alias.name)
                else:
                    root = alias.name.partition(".")[0]
                    found.setdefault(root, root)
        elif kind is ast.ImportFrom:
            if statement.names[0].name == "*":
                continue
            base = resolve_relative(module_name, is_package, statement.level or 0, statement.module or "")
            for alias in statement.names:
                found.setdefault(alias.asname or alias.name, f"{base}.{alias.name}" if base else alias.name)
        elif kind in _BLOCKS_READ_FOR_IMPORTS:
            for block in (statement.body, getattr(statement, "orelse", ()), getattr(statement, "finalbody", ())):
                queue.extend(_own_lines(block, lines))
            for handler in getattr(statement, "handlers", ()):
                queue.extend(_own_lines(handler.body, lines))
    return found


_BLOCKS_READ_FOR_IMPORTS = (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _own_lines(block: list[ast.stmt], lines: list[str]) -> list[ast.stmt]:
    """The statements of a block, or none where it is written on its header's line (text before
    its first statement on that line, the header's colon; ``ast`` columns count UTF-8 bytes)."""
    if not block:
        return block
    first = block[0]
    before = lines[first.lineno - 1].encode("utf-8")[: first.col_offset]
    return [] if before.strip() else block


class UnitSpans:
    """The units of ``pipeline.units`` (each top-level function, each method of a top-level
    class) by their lines, decorators included: which unit a node at a line is in."""

    def __init__(self, tree: ast.Module) -> None:
        self.nodes: list[tuple[tuple[str | None, str], ast.AST]] = []
        for statement in tree.body:
            if type(statement) in FUNCTIONS:
                self.nodes.append(((None, statement.name), statement))
            elif type(statement) is ast.ClassDef:
                self.nodes.extend(((statement.name, m.name), m) for m in statement.body if type(m) in FUNCTIONS)
        self.names = {unit for unit, _ in self.nodes}
        self.starts = [first_line(node) for _, node in self.nodes]
        self._ends = [node.end_lineno for _, node in self.nodes]

    def unit_at(self, line: int) -> tuple[str | None, str] | None:
        index = self.index_at(line)
        return None if index is None else self.nodes[index][0]

    def index_at(self, line: int) -> int | None:
        """The place in ``nodes`` of the unit holding ``line``; None: outside every unit."""
        index = bisect.bisect_right(self.starts, line) - 1
        if index >= 0 and line <= self._ends[index]:
            return index
        return None


def bound_names(statement: ast.stmt) -> set[str] | None:
    """The names an import or a plain assignment binds; None for any other statement."""
    kind = type(statement)
    if kind is ast.Import or kind is ast.ImportFrom:
        return {alias.asname or alias.name.partition(".")[0] for alias in statement.names}
    targets = statement.targets if kind is ast.Assign else [statement.target] if kind in (ast.AnnAssign, ast.AugAssign) else None
    if targets is None:
        return None
    names = set()
    for target in targets:
        for node in ast.walk(target):
            if type(node) is ast.Name:
                names.add(node.id)
            elif type(node) not in (ast.Tuple, ast.List, ast.Starred, ast.Store):
                return None  # ``x.attr = ...``, ``d[k] = ...``: state the scout does not follow
    return names


def callee_name(call: ast.Call) -> str | None:
    """The last name of what a call calls: ``f``, ``self.f``, ``mod.kernel[grid]``."""
    func = call.func
    if type(func) is ast.Subscript:
        func = func.value
    if type(func) is ast.Name:
        return func.id
    if type(func) is ast.Attribute:
        return func.attr
    return None


def decorator_callee(decorator: ast.expr) -> ast.expr:
    return decorator.func if type(decorator) is ast.Call else decorator


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
BUILTINS = frozenset(dir(builtins))


# Fields that never hold a node worth visiting: names, constants, and the shared singleton
# nodes of contexts and operators (``Load``, ``Add``), which are most of a tree's nodes.
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "name", "arg", "kind", "type_comment", "level", "module", "conversion"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def walk(tree: ast.AST, prune=None) -> list[ast.AST]:
    """Every node of ``tree`` but the context and operator singletons, in no set order: what
    ``ast.walk`` gives, at about a third of its cost (it asks every field of every node).
    ``prune``: a test of the nodes to leave out, with all below them."""
    found = []
    stack = [tree]
    child_fields = _CHILD_FIELDS
    node_type = ast.AST
    pop, push, keep = stack.pop, stack.append, found.append  # bound once: this loop is hot
    while stack:
        node = pop()
        if prune is not None and prune(node):
            continue
        keep(node)
        kind = type(node)
        fields = child_fields.get(kind)
        if fields is None:
            fields = child_fields[kind] = tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
        for name in fields:
            value = getattr(node, name, None)
            if value is None:
                continue
            if type(value) is list:
                for item in value:
                    if isinstance(item, node_type):
                        push(item)
            elif isinstance(value, node_type):
                push(value)
    return found


def ast_dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for an ``ast`` Name/Attribute chain, else None."""
    parts: list[str] = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is ast.Name:
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def positional_names(arguments: ast.arguments) -> list[str]:
    """The names of a signature's parameters a positional argument may bind, in order."""
    return [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
