"""The syntax scout: questions about a file that CPython's ``ast`` answers before (and instead of)
a libcst parse.

``ast.parse`` costs about a twentieth of libcst's parse. A file checked on its own (pre-commit's
staged files, the flake8 plugin, an editor's buffer) where no rule can report needs no libcst
parse at all; the text pre-filter (``prefilter``) cannot tell that for the GPU2xx rules, whose
trigger words (``.cpu(``, ``graph``, ``forward``) are in most engine files, while the scopes
they report in are in few.

Every answer here over-approximates the analysis it stands in for (``analysis.hot_scopes``):
"may" means the analysis could say yes; "no" must be certain. When in doubt (a syntax error,
an option the scout does not model) the answer is "may".
"""

from __future__ import annotations

import ast
import builtins
import fnmatch
import re

from sync_lint.analysis.dtypes import DTYPES
from sync_lint.config import Settings


class Scout:
    """One file's syntax tree, parsed on the first question (none when it does not parse)."""

    def __init__(self, text: str, settings: Settings) -> None:
        self.text = text
        self.settings = settings
        self._parsed = False
        self._tree: ast.Module | None = None  # None: it does not parse (the libcst parse reports it)
        self._names: _Names | None = None

    def _names_of_tree(self) -> _Names | None:
        if not self._parsed:
            self._parsed = True
            try:
                self._tree = ast.parse(self.text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
            self._names = _Names(self._tree, self.settings)
        return self._names

    def may_have_hot_scope(self) -> bool:
        """Whether ``HotScopes`` could find a hot function or a ``torch.cuda.graph`` block (the
        only places GPU201/GPU202/GPU204 report)."""
        if self.settings["hot-functions"]:
            return True  # dotted names and globs over qualnames: left to the analysis
        names = self._names_of_tree()
        return names is None or _HotScout(names, self._tree, self.settings).found()

    def may_call_a_sink(self, sink_words: re.Pattern) -> bool:
        """Whether a GPU1xx rule could report in this file on its own: at a ``.view(dtype)`` (one
        argument that may name a torch dtype), or at a call of a function (a launch of a kernel)
        defined here that may carry a summary: its definition holds one of ``sink_words`` (the
        rules' unit triggers but for the sink shapes), a Triton decorator or a launch (a dtype
        view anywhere already answers "may"). Other files' functions have no summary in a one-file run, so ``list[int]()``,
        ``x.view(-1, n)``, a launch of an imported kernel or ``assert x.is_contiguous()`` in a
        function nothing here calls cannot report."""
        names = self._names_of_tree()
        return names is None or _SinkScout(names, self.text, sink_words).found()


class _Names:
    """The file's imports, every meaning of each name, and ``alias-modules``: a stand-in for
    ``analysis.names.NameTable`` that may answer more meanings than it, never fewer."""

    def __init__(self, tree: ast.Module, settings: Settings) -> None:
        self.aliases: dict[str, str] = dict(settings["alias-modules"])
        self.imports: dict[str, set[str]] = {}
        self.bound: set[str] = set()  # every name the file binds anywhere
        self.nodes: dict[type, list] = {}
        for node in ast.walk(tree):
            kind = type(node)
            self.nodes.setdefault(kind, []).append(node)
            if kind is ast.Import:
                for alias in node.names:
                    local = alias.asname or alias.name.partition(".")[0]
                    self.imports.setdefault(local, set()).add(alias.name if alias.asname else local)
                    self.bound.add(local)
            elif kind is ast.ImportFrom:
                # Relative imports keep only their module's tail: meanings are compared by endings.
                base = node.module or ""
                for alias in node.names:
                    if alias.name != "*":
                        local = alias.asname or alias.name
                        self.imports.setdefault(local, set()).add(f"{base}.{alias.name}" if base else alias.name)
                        self.bound.add(local)
            elif kind is ast.Name and type(node.ctx) is not ast.Load:
                self.bound.add(node.id)
            elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
                self.bound.add(node.name)
            elif kind is ast.Global or kind is ast.Nonlocal:
                self.bound.update(node.names)

    def of(self, kind: type) -> list:
        return self.nodes.get(kind, [])

    def meanings(self, node: ast.expr) -> set[str]:
        """Every dotted name ``node`` may resolve to: as written, through each import of its head,
        and with ``alias-modules`` applied to either. The analysis resolves an unimported name
        (and a relative import) behind a package name the scout does not know, so an alias that
        ends in a name's first parts may rename them too. Empty for no Name/Attribute chain."""
        written = _dotted(node)
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

    def last_parts(self, node: ast.expr) -> set[str]:
        return {name.rsplit(".", 1)[-1] for name in self.meanings(node)}


class _HotScout:
    """Over-approximates ``HotScopes``: cold patterns, CPU backends and memoizers, which only
    take hotness away, are not modelled."""

    def __init__(self, names: _Names, tree: ast.Module, settings: Settings) -> None:
        self.names = names
        self.tree = tree
        self.class_patterns = list(settings["hot-class-patterns"])
        self.method_patterns = list(settings["hot-method-patterns"])

    def found(self) -> bool:
        return self._graph_block() or self._compiled() or self._hot_method()

    def _graph_block(self) -> bool:
        """``with torch.cuda.graph(g):`` (any callee whose name may end in ``graph``)."""
        return any(
            type(item.context_expr) is ast.Call and "graph" in self.names.last_parts(item.context_expr.func)
            for kind in (ast.With, ast.AsyncWith) for node in self.names.of(kind) for item in node.items
        )

    def _compiled(self) -> bool:
        """A function decorated with ``torch.compile`` or passed to it at module level."""
        for kind in _FUNCTIONS:
            for function in self.names.of(kind):
                for decorator in function.decorator_list:
                    if "compile" in self.names.last_parts(_callee(decorator)):
                        return True
        for statement in self.tree.body:
            value = getattr(statement, "value", None)
            if type(value) is ast.Call and value.args and "compile" in self.names.last_parts(value.func):
                return True
        return False

    def _hot_method(self) -> bool:
        """A method named like ``hot-method-patterns`` in a class that may be a hot class or an
        ``nn.Module`` subclass."""
        with_hot_method = [
            node for node in self.names.of(ast.ClassDef)
            if any(type(f) in _FUNCTIONS and _matches(f.name, self.method_patterns) for f in ast.walk(node))
        ]
        if not with_hot_method:
            return False
        modules = self._module_classes()
        return any(node.name in modules or self._hot_class(node) for node in with_hot_method)

    def _hot_class(self, node: ast.ClassDef) -> bool:
        if _matches(node.name, self.class_patterns):
            return True
        return any(_matches(part, self.class_patterns) for base in node.bases for part in self._base_last_parts(base))

    def _base_last_parts(self, base: ast.expr) -> set[str]:
        return self.names.last_parts(base.value if type(base) is ast.Subscript else base)

    def _module_classes(self) -> set[str]:
        """Names of the classes that may be ``nn.Module`` subclasses: a base whose meaning ends in
        ``Module``, a class of this file that may be one, or ``@support_torch_compile``."""
        found: set[str] = set()
        classes = self.names.of(ast.ClassDef)
        changed = True
        while changed:
            changed = False
            for node in classes:
                if node.name in found:
                    continue
                parts = {part for base in node.bases for part in self._base_last_parts(base)}
                decorated = any(
                    name.endswith("support_torch_compile")
                    for decorator in node.decorator_list for name in self.names.meanings(_callee(decorator))
                )
                if decorated or any(part.endswith("Module") or part in found for part in parts):
                    found.add(node.name)
                    changed = True
        return found


class _SinkScout:
    """Over-approximates where ``analysis.sinks`` can make a finding without other files."""

    def __init__(self, names: _Names, text: str, sink_words: re.Pattern) -> None:
        self.names = names
        self.text = text
        self.sink_words = sink_words

    def found(self) -> bool:
        calls = self.names.of(ast.Call)
        if any(self._dtype_view(call) for call in calls):
            return True
        summarised = self._summarised_definitions()
        return bool(summarised) and any(_callee_name(call) in summarised for call in calls)

    def _summarised_definitions(self) -> set[str]:
        """Names of the functions (and classes) here that may carry a summary."""
        lines = self.text.splitlines(keepends=True)
        found = set()
        for kind in (*_FUNCTIONS, ast.ClassDef):
            for node in self.names.of(kind):
                if node.name in found:
                    continue
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
                if (
                    self.sink_words.search("".join(lines[first : node.end_lineno or len(lines)]))
                    or any("triton" in name for d in node.decorator_list for name in self.names.meanings(_callee(d)))
                    or any(self._launch(call) for call in ast.walk(node) if type(call) is ast.Call)
                ):  # fmt: skip
                    found.add(node.name)
        return found

    def _launch(self, call: ast.Call) -> bool:
        """``k[grid](...)`` where ``k`` may be a global (``sinks`` judges a launch so): not
        ``list[int]()``, a builtin generic's constructor, unless the file rebinds ``list``."""
        func = call.func
        if type(func) is not ast.Subscript:
            return False
        written = _dotted(func.value)
        if written is None:
            return False
        head = written.partition(".")[0]
        return head not in _BUILTINS or head in self.names.bound

    def _dtype_view(self, call: ast.Call) -> bool:
        """``t.view(x)`` with one argument (positional or keyword) that may name a torch dtype:
        its last part, through imports and aliases, is a dtype's name."""
        func = call.func
        if type(func) is not ast.Attribute or func.attr != "view" or len(call.args) + len(call.keywords) != 1:
            return False
        argument = call.args[0] if call.args else call.keywords[0].value
        if type(argument) is ast.Starred:
            argument = argument.value
        return not DTYPES.isdisjoint(self.names.last_parts(argument))


def _callee_name(call: ast.Call) -> str | None:
    """The last name of what a call calls: ``f``, ``self.f``, ``mod.kernel[grid]``."""
    func = call.func
    if type(func) is ast.Subscript:
        func = func.value
    if type(func) is ast.Name:
        return func.id
    if type(func) is ast.Attribute:
        return func.attr
    return None


def _callee(decorator: ast.expr) -> ast.expr:
    return decorator.func if type(decorator) is ast.Call else decorator


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BUILTINS = frozenset(dir(builtins))


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is ast.Name:
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None
