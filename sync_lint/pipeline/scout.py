"""The syntax scout: questions about a file that CPython's ``ast`` answers before (and instead of)
a libcst parse.

``ast.parse`` costs about a twentieth of libcst's parse, and importing libcst more than
flake8's whole run on a small file. A file checked on its own (pre-commit's staged files, the
flake8 plugin, an editor's buffer) where no rule can report needs neither; the text pre-filter
(``prefilter``) cannot tell that, since the rules' trigger words (``.cpu(``, ``forward``,
``torch.ops``, ``.view(``) are in most engine files, while findings are in few.

The scout asks, per rule family, the question its findings cannot do without: a GPU1xx
finding needs a sink handed a view or a cast (``_SinkScout``), a GPU2xx finding a hot scope
reaching a sync site with a value that may be on the GPU (``_SyncScout``). Both follow values
through each function's bindings in no order (``_ScopeFacts``) and through attributes across
the file, reading the same names as the analyses (``analysis.layout_words``,
``analysis.device_words``, ``analysis.triton_names``).

Every answer here over-approximates the analysis it stands in for: "may" means the analysis
could say yes; "no" must be certain. When in doubt (a syntax error, an option the scout does not
model) the answer is "may". ``bench/bench_one_file.py`` checks that on every file of vLLM and
SGLang, and ``tests/test_fast_path_equivalence.py`` on generated projects and the fixtures.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import fnmatch
import re

from sync_lint.analysis.device_words import (
    DATA_DEPENDENT_FUNCTIONS,
    DATA_DEPENDENT_METHODS,
    EXPLICIT_METHODS,
    HOST_ATTRIBUTES,
    HOST_RESULT_METHODS,
    PROTOCOL_BUILTINS,
    SIZE_FUNCTIONS,
    VALUE_READS,
)
from sync_lint.analysis.dtypes import DTYPES
from sync_lint.analysis.layout_words import (
    LAYOUT_SUSPECT_METHODS,
    PERMUTING_ATTRIBUTES,
    VIEW_MAKING,
)
from sync_lint.analysis.triton_names import is_triton_decorator
from sync_lint.config import Settings, is_strided_sink
from sync_lint.pipeline.source import split_lines


class Scout:
    """One file's syntax tree, parsed on the first question (none when it does not parse);
    ``tree``: the text's tree where the caller has one (flake8 hands its plugins one)."""

    def __init__(self, text: str, settings: Settings, tree: ast.Module | None = None) -> None:
        self.text = text
        self.settings = settings
        self._parsed = False
        self._tree: ast.Module | None = tree  # None: it does not parse (the libcst parse reports it)
        self._names: _Names | None = None
        self._answers: dict[tuple, object] = {}  # several rules ask the same question
        self._lines: list[str] | None = None

    def lines(self) -> list[str]:
        """The text's lines as ``ast`` numbers them (from 1: ``lines()[lineno - 1]``)."""
        if self._lines is None:
            self._lines = split_lines(self.text)
        return self._lines

    def _once(self, question: tuple, answer):
        if question not in self._answers:
            self._answers[question] = answer()
        return self._answers[question]

    def _names_of_tree(self) -> _Names | None:
        if not self._parsed:
            self._parsed = True
            if self._tree is None:
                try:
                    self._tree = ast.parse(self.text)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    return None
            self._names = _Names(self._tree, self.settings)
        return self._names

    def tree(self) -> ast.Module | None:
        """The file's syntax tree; None when it does not parse."""
        return self._tree if self._names_of_tree() is not None else None

    def of(self, kind: type) -> list:
        """Every node of a kind, anywhere in the tree (empty when it does not parse)."""
        names = self._names_of_tree()
        return [] if names is None else names.of(kind)

    def may_have_hot_scope(self) -> bool:
        """Whether ``HotScopes`` could find a hot function or a ``torch.cuda.graph`` block (the
        only places GPU201/GPU202/GPU204 report)."""
        if self.settings["hot-functions"]:
            return True  # dotted names and globs over qualnames: left to the analysis
        names = self._names_of_tree()
        return names is None or _HotScout(names, self._tree, self.settings).found()

    def hot_units(self) -> set[tuple[str | None, str]] | None:
        """The units (``pipeline.units``: a top-level function ``(None, name)`` or a method of a
        top-level class ``(class, name)``) where ``HotScopes`` could find a hot function or a
        ``torch.cuda.graph`` block; None when that cannot be told here (``hot-functions`` is
        set, the file does not parse, or such a thing is outside every unit)."""
        if self.settings["hot-functions"]:
            return None
        names = self._names_of_tree()
        if names is None:
            return None
        return _HotScout(names, self._tree, self.settings).units()

    def may_sync_in_a_hot_scope(self) -> bool:
        """Whether a GPU2xx rule that reports only in hot scopes could report in this file on its
        own: a hot scope may be here (``may_have_hot_scope``), and it or a function of this file
        it may call may hold a sync (``_SyncScout``)."""
        if not self.may_have_hot_scope():
            return False  # the cheaper question first: most files the words let through have none
        if self.settings["hot-functions"] or self.settings["unknown-device"] == "always":
            return True  # dotted names over qualnames; any unknown value may sync: the analysis decides
        names = self._names_of_tree()
        if names is None:
            return True
        return self._once(("hot sync",), lambda: _SyncScout(names, self._tree, self.settings).found())

    def bindings_matching(self, pattern: re.Pattern) -> set[str] | None:
        return self._once(("bindings", pattern), lambda: self._bindings_matching(pattern))

    def _bindings_matching(self, pattern: re.Pattern) -> set[str] | None:
        """The names that statements outside every function bind where ``pattern`` occurs in
        them: an import (``from torch.ops import _C``) or an assignment (``op = torch.ops.x``)
        gives a function that uses the name what the pattern stands for. None when a statement
        outside every function that binds nothing by itself (a call, a block, a class's own
        code) holds it, or the file does not parse: then any function may matter."""
        if self._names_of_tree() is None:
            return None
        lines = self.lines()
        found: set[str] = set()
        for statement in self._tree.body:
            kind = type(statement)
            if kind in _FUNCTIONS:
                continue  # a unit of its own, decorators included
            if kind is ast.ClassDef:
                first = min([statement.lineno, *(d.lineno for d in statement.decorator_list)])
                header_end = statement.body[0].lineno - 1 if statement.body else statement.end_lineno
                own = [(first, header_end)] + [
                    (member.lineno, member.end_lineno) for member in statement.body if type(member) not in _FUNCTIONS
                ]
                if any(pattern.search("".join(lines[a - 1 : b])) for a, b in own):
                    return None
                continue
            if not pattern.search("".join(lines[statement.lineno - 1 : statement.end_lineno])):
                continue
            bound = _bound_names(statement)
            if bound is None:
                return None
            found |= bound
        return found

    def names_in_blocks(self, pattern: re.Pattern) -> set[str] | None:
        """Every name and attribute that the bodies of ``with`` blocks whose items match
        ``pattern`` mention (what a declared block may call); None when the file does not parse."""
        if self._names_of_tree() is None:
            return None
        lines = self.lines()
        found: set[str] = set()
        for kind in (ast.With, ast.AsyncWith):
            for block in self._names.of(kind):
                if any(pattern.search("".join(lines[i.context_expr.lineno - 1 : i.context_expr.end_lineno])) for i in block.items):
                    for statement in block.body:
                        for node in ast.walk(statement):
                            if type(node) is ast.Name:
                                found.add(node.id)
                            elif type(node) is ast.Attribute:
                                found.add(node.attr)
        return found

    def sink_shaped_units(self) -> set[tuple[str | None, str]] | None:
        """The units holding a call that may be a launch or a ``.view(dtype)``, or that are
        Triton kernels; None when the file does not parse or such a call is outside every unit."""
        return self._once(("sink shaped",), self._sink_shaped_units)

    def _sink_shaped_units(self) -> set[tuple[str | None, str]] | None:
        names = self._names_of_tree()
        if names is None:
            return None
        spans = _UnitSpans(self._tree)
        found = {spans.unit_at(call.lineno) for call in names.of(ast.Call) if names.is_launch(call) or names.is_dtype_view(call)}
        found.update(unit for unit, node in spans.nodes if names.triton_decorated(node))
        # A sink outside every unit: module-level code, always parsed, but maybe a function
        # defined there (under an ``if``) whose callers would not be.
        return None if None in found else found

    def may_report_at_a_sink(self) -> bool:
        """Whether a GPU1xx rule could report in this file on its own: whether a sink may be
        handed a view or a cast (``_SinkScout``). Other files' functions have no summary in a
        one-file run, so ``list[int]()``, ``x.view(-1, n)``, a launch of an imported kernel,
        ``assert x.is_contiguous()`` in a function nothing here calls, and a custom op handed
        only parameters and the results of other calls cannot report."""
        names = self._names_of_tree()
        return names is None or self._once(("sink",), lambda: _SinkScout(names, self._tree, self.lines(), self.settings).found())


class _Names:
    """The file's imports, every meaning of each name, and ``alias-modules``: a stand-in for
    ``analysis.names.NameTable`` that may answer more meanings than it, never fewer."""

    def __init__(self, tree: ast.Module, settings: Settings) -> None:
        self.aliases: dict[str, str] = dict(settings["alias-modules"])
        self.imports: dict[str, set[str]] = {}
        self.bound: set[str] = set()  # every name the file binds anywhere
        self.relative: set[str] = set()  # names a relative import binds (their module is known by its tail only)
        self.nodes: dict[type, list] = {}
        for node in _walk(tree):
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
                        if node.level:
                            self.relative.add(local)
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
        return head not in _BUILTINS or head in self.bound

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
        return any("triton" in name for d in function.decorator_list for name in self.meanings(_callee(d)))

    def certainly_triton_kernel(self, function: ast.AST) -> bool:
        """A decorator the analyses certainly resolve to Triton's (``analysis.functions``): its
        head is imported by absolute imports only, and each of them, with ``alias-modules``
        applied as ``NameTable`` applies them, gives a Triton name."""
        if type(function) not in _FUNCTIONS:
            return False
        for decorator in function.decorator_list:
            written = ast_dotted(_callee(decorator))
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

    def units(self) -> set[tuple[str | None, str]] | None:
        """Per unit, the same over-approximation as ``found``: a hot method of a class that may be
        hot or an ``nn.Module``, a top-level function passed to a compile at module level, and a
        unit holding (at any depth: nested functions are judged too) a function that may be
        compiled, a graph block, or a class with a hot method. None when such a thing is outside
        every unit (a class or a function defined under a module-level ``if``): module-level
        code is always parsed, but what it calls would not be."""
        modules = self._module_classes()
        spans = _UnitSpans(self.tree)
        defined = {node.name for kind in _FUNCTIONS for node in self.names.of(kind)}
        compiled = {(None, name) for name in self._compiled_by_call()}
        if any(unit not in spans.names and unit[1] in defined for unit in compiled):
            return None
        found = compiled & spans.names  # a compiled import is another file's (not hot here)
        found.update(spans.unit_at(node.lineno) for kind in _FUNCTIONS for node in self.names.of(kind) if self._decorated_compiled(node))
        found.update(
            spans.unit_at(node.lineno) for kind in (ast.With, ast.AsyncWith) for node in self.names.of(kind)
            if any(self._is_graph_call(item.context_expr) for item in node.items)
        )
        top_level = {id(statement) for statement in self.tree.body}
        for node in self.names.of(ast.ClassDef):
            if node.name in modules or self.may_be_hot_class(node):
                hot_methods = [m.name for m in node.body if type(m) in _FUNCTIONS and _matches(m.name, self.method_patterns)]
                if not hot_methods:
                    continue
                if id(node) in top_level:
                    found.update((node.name, name) for name in hot_methods)
                else:
                    found.add(spans.unit_at(node.lineno))  # a class inside a function: that function's unit
        return None if None in found else found

    def _is_graph_call(self, node: ast.expr) -> bool:
        return type(node) is ast.Call and "graph" in self.names.last_parts(node.func)

    def _decorated_compiled(self, function: ast.AST) -> bool:
        return any("compile" in self.names.last_parts(_callee(decorator)) for decorator in function.decorator_list)

    def _compile_calls(self) -> list[ast.Call]:
        """Module-level calls, with an argument, of what may be ``torch.compile``."""
        calls = (getattr(statement, "value", None) for statement in self.tree.body)
        return [c for c in calls if type(c) is ast.Call and c.args and "compile" in self.names.last_parts(c.func)]

    def _compiled_by_call(self) -> set[str]:
        """Names passed to a call that may be ``torch.compile`` at module level."""
        written = (ast_dotted(call.args[0]) for call in self._compile_calls())
        return {name.rsplit(".", 1)[-1] for name in written if name}

    def _graph_block(self) -> bool:
        """``with torch.cuda.graph(g):`` (any callee whose name may end in ``graph``)."""
        return any(
            self._is_graph_call(item.context_expr)
            for kind in (ast.With, ast.AsyncWith) for node in self.names.of(kind) for item in node.items
        )

    def _compiled(self) -> bool:
        """A function decorated with ``torch.compile`` or passed to it at module level."""
        return bool(self._compile_calls()) or any(
            self._decorated_compiled(function) for kind in _FUNCTIONS for function in self.names.of(kind)
        )

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
        return any(node.name in modules or self.may_be_hot_class(node) for node in with_hot_method)

    def may_be_hot_class(self, node: ast.ClassDef) -> bool:
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
    """Over-approximates where ``analysis.sinks`` can make a finding without other files: where a
    sink is handed an expression whose layout may be suspect.

    The sinks: a custom op (``torch.ops``, through imports), a call of a function or class of
    this file that may carry a summary (a launch of its kernel, a call of its checked wrapper),
    and the receiver of ``.view(dtype)`` or of ``.data_ptr()``.

    A suspect expression holds a view or a cast (``analysis.layout_words``; an index with a
    slice or an ellipsis), a name its function binds anywhere to a suspect expression, or an
    attribute that some assignment of the file gives one. These are the only ways a layout the
    rules report reaches a sink: the layout domain follows locals and ``self.`` attributes, and
    reads a parameter, a global and any other call as of unknown layout, which it never reports
    unless a cast of it is there."""

    def __init__(self, names: _Names, tree: ast.Module, lines: list[str], settings: Settings) -> None:
        self.names = names
        self.tree = tree
        self.lines = lines
        self.settings = settings

    def found(self) -> bool:
        if self.settings["contiguous-sinks"]:
            return True  # configured callees: left to the analysis
        needs = self._needs()
        scopes, attributes = _suspects(self.tree, _makes_view)
        # ``.view(dtype)`` needs only a unit last stride: a column range passes it.
        unit_scopes, unit_attributes = _suspects(self.tree, _may_lose_unit_stride)
        for scope, unit_scope in zip(scopes, unit_scopes):
            if self.names.certainly_triton_kernel(scope.roots[0]):
                continue  # no sink uses in a kernel
            for call in scope.calls:
                if self.names.is_dtype_view(call):
                    if unit_scope.suspect(call.func.value, unit_attributes):
                        return True
                elif any(scope.suspect(handed, attributes) for handed in self._handed(call, needs)):
                    return True
        return False

    def _handed(self, call: ast.Call, needs: dict[str, list[_Needs]]) -> list[ast.expr]:
        """What ``call`` hands a sink: the receiver of a raw ``.data_ptr()``, the arguments of a
        custom op, or those of a call of a function here that binds a parameter it needs
        contiguous (``_needs``); the receiver of ``.view(dtype)`` is the caller's to read."""
        func = call.func
        if type(func) is ast.Attribute and func.attr == "data_ptr":
            return [func.value]
        if self._is_custom_op(call):
            return [*call.args, *(keyword.value for keyword in call.keywords)]
        definitions = needs.get(_callee_name(call))
        if not definitions:
            return []
        handed: list[ast.expr] = []
        for definition in definitions:
            handed.extend(definition.bound_by(call))
        return handed

    def _is_custom_op(self, call: ast.Call) -> bool:
        return any(
            name.startswith("torch.ops.") and not is_strided_sink(self.settings, name)
            for name in self.names.meanings(call.func)
        )  # fmt: skip

    def _needs(self) -> dict[str, list[_Needs]]:
        """Per name, what each function (or class) of this file of that name may need contiguous:
        the parameters that reach a sink in it, by any binding (a summary of ``analysis.sinks``
        over-approximated). A Triton kernel, or a function that checks its tensors
        (``is_contiguous``, ``stride(``), may need every parameter; a class needs what its
        ``__init__`` needs; a function calling one hands its needs on."""
        lines = self.lines
        found: dict[str, list[_Needs]] = {}
        open_definitions: list[tuple[ast.AST, _Needs]] = []
        by_node: dict[int, _Needs] = {}
        for kind in _FUNCTIONS:
            for node in self.names.of(kind):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                text = "".join(lines[first - 1 : node.end_lineno or len(lines)])
                if self.names.triton_decorated(node) or _CHECKS.search(text):
                    needs = _Needs(None, every=True)
                else:
                    needs = _Needs(node.args)
                    open_definitions.append((node, needs))
                found.setdefault(node.name, []).append(needs)
                by_node[id(node)] = needs
        for node in self.names.of(ast.ClassDef):
            # A class is called for its ``__init__`` (a position may bind ``self``: ``bound_by``);
            # one it inherits may be anything.
            init = next((m for m in node.body if type(m) in _FUNCTIONS and m.name == "__init__"), None)
            found.setdefault(node.name, []).append(by_node[id(init)] if init is not None else _Needs(None, every=True))
        flows = {id(node): _ParameterFlows(node) for node, _ in open_definitions}
        grown = True
        while grown:  # a wrapper of a wrapper
            grown = False
            for node, needs in open_definitions:
                reaching = set()
                for call in flows[id(node)].calls:
                    func = call.func
                    if self.names.is_dtype_view(call):
                        reaching |= flows[id(node)].parameters_in(func.value)
                    for handed in self._handed(call, found):
                        reaching |= flows[id(node)].parameters_in(handed)
                if not reaching <= needs.params:
                    needs.params |= reaching
                    grown = True
        return found


# The checks that make a function need its tensors contiguous (``assert x.is_contiguous()``,
# ``x.stride(-1) == 1``): read as text, every parameter counts.
_CHECKS = re.compile(r"is_contiguous|stride\(")


class _Needs:
    """The parameters one function may need contiguous (``every``: any it is handed)."""

    def __init__(self, arguments: ast.arguments | None, every: bool = False) -> None:
        self.every = every
        self.params: set[str] = set()
        self.positional: list[str] = []
        self.rest: str | None = None  # ``*args``
        self.keywords: str | None = None  # ``**kwargs``
        if arguments is not None:
            self.positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
            self.rest = arguments.vararg.arg if arguments.vararg else None
            self.keywords = arguments.kwarg.arg if arguments.kwarg else None

    def bound_by(self, call: ast.Call) -> list[ast.expr]:
        """The arguments of ``call`` that may bind a needed parameter: a position counts for the
        parameter there and for the next one (a method called through its instance binds
        ``self`` first), anything unpacked for all."""
        if self.every:
            return [*call.args, *(keyword.value for keyword in call.keywords)]
        if not self.params:
            return []
        handed = []
        for position, argument in enumerate(call.args):
            names = set(self.positional[position : position + 2])
            if (
                type(argument) is ast.Starred or not names.isdisjoint(self.params)
                or (self.rest in self.params and position + 1 >= len(self.positional))
            ):  # fmt: skip
                handed.append(argument)
        for keyword in call.keywords:
            if keyword.arg is None or keyword.arg in self.params or (
                self.keywords in self.params and keyword.arg not in self.positional
            ):  # fmt: skip
                handed.append(keyword.value)
        return handed


class _ParameterFlows:
    """Which parameters of a function each of its names and attributes may hold, by any of
    its bindings in any order (nested functions' included)."""

    def __init__(self, function: ast.AST) -> None:
        arguments = function.args
        self.params = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
        self.params |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
        self.calls: list[ast.Call] = []
        reads: dict[str, set[str]] = {}  # a name (an attribute as ``.name``) -> what its values read
        for node in _walk(function):
            if type(node) is ast.Call:
                self.calls.append(node)
                continue
            bound = _binding(node)
            if bound is not None:
                read = _read_keys(bound[1])
                for key in _bound_keys(bound[0]):
                    reads.setdefault(key, set()).update(read)
        self._reads = reads
        self._held: dict[str, set[str]] = {}

    def parameters_in(self, node: ast.expr) -> set[str]:
        """The parameters ``node``'s value may be (a part of)."""
        found: set[str] = set()
        for key in _read_keys(node):
            found |= self._held_by(key)
        return found

    def _held_by(self, key: str) -> set[str]:
        held = self._held.get(key)
        if held is None:
            held = set()
            seen = {key}
            todo = [key]
            while todo:
                current = todo.pop()
                if current in self.params:
                    held.add(current)
                for read in self._reads.get(current, ()):
                    if read not in seen:
                        seen.add(read)
                        todo.append(read)
            self._held[key] = held
        return held


def _binding(node: ast.AST) -> tuple[list[ast.expr], ast.expr] | None:
    """(targets, value) of a node that binds (an assignment, a loop, a ``with ... as``, a
    walrus, a comprehension's ``for``); None for any other node."""
    kind = type(node)
    if kind is ast.Assign:
        return node.targets, node.value
    if kind in (ast.AnnAssign, ast.AugAssign, ast.NamedExpr):
        return ([node.target], node.value) if node.value is not None else None
    if kind in (ast.For, ast.AsyncFor, ast.comprehension):
        return [node.target], node.iter
    if kind is ast.withitem:
        return ([node.optional_vars], node.context_expr) if node.optional_vars is not None else None
    return None


def _read_keys(node: ast.expr) -> set[str]:
    """The names and attributes (``.name``) an expression reads."""
    keys = set()
    for child in _walk(node):
        if type(child) is ast.Name:
            keys.add(child.id)
        elif type(child) is ast.Attribute:
            keys.add("." + child.attr)
    return keys


def _bound_keys(targets: list[ast.expr]) -> set[str]:
    """The names and attributes (``.name``) binding targets bind (a container stored into counts)."""
    keys = set()
    todo = list(targets)
    while todo:
        node = todo.pop()
        kind = type(node)
        if kind is ast.Name:
            keys.add(node.id)
        elif kind is ast.Attribute:
            keys.add("." + node.attr)
        elif kind in (ast.Tuple, ast.List):
            todo.extend(node.elts)
        elif kind in (ast.Starred, ast.Subscript):
            todo.append(node.value)
    return keys


def _suspects(tree: ast.Module, is_source, prune=None) -> tuple[list[_ScopeFacts], set[str]]:
    """Each scope's facts (``_scopes``), with the names that may hold a value ``is_source``
    marks (a node that makes one), and the attributes any assignment of the file gives one.
    ``prune``: expressions whose value is never suspect, whatever they read."""
    scopes = [_ScopeFacts(roots, is_source, prune) for roots in _scopes(tree)]
    attributes: set[str] = set()
    while True:
        for scope in scopes:
            scope.close(attributes)
        found = set().union(*(scope.suspect_attributes for scope in scopes))
        if found <= attributes:
            return scopes, attributes
        attributes |= found


class _ScopeFacts:
    """One function's (or the module code's) bindings and calls, and which of its names may hold
    a suspect value (one that a node ``is_source`` marks made, or flowed from one). Names are not
    told apart by nested scope or order."""

    def __init__(self, roots: list[ast.AST], is_source, prune=None) -> None:
        self.roots = roots
        self.is_source = is_source
        self.prune = prune
        self.calls: list[ast.Call] = []
        # (names bound, attributes assigned, the value's facts) per binding
        self.bindings: list[tuple[set[str], set[str], _ExprFacts]] = []
        for root in roots:
            for node in _walk(root):
                if type(node) is ast.Call:
                    self.calls.append(node)
                    continue
                bound = _binding(node)
                if bound is not None:
                    keys = _bound_keys(bound[0])
                    names = {key for key in keys if not key.startswith(".")}
                    self.bindings.append((names, {key[1:] for key in keys - names}, _ExprFacts(bound[1], is_source, prune)))
        self.suspect_names: set[str] = set()
        self.suspect_attributes: set[str] = set()
        self._facts: dict[int, _ExprFacts] = {}

    def close(self, attributes: set[str]) -> None:
        """Grow the suspect names to a fixpoint, given the file's suspect attributes."""
        grown = True
        while grown:
            grown = False
            for names, assigned, value in self.bindings:
                if value.suspect(self.suspect_names, attributes) and not (
                    names <= self.suspect_names and assigned <= self.suspect_attributes
                ):
                    self.suspect_names |= names
                    self.suspect_attributes |= assigned
                    grown = True

    def suspect(self, node: ast.expr, attributes: set[str]) -> bool:
        facts = self._facts.get(id(node))
        if facts is None:
            facts = self._facts[id(node)] = _ExprFacts(node, self.is_source, self.prune)
        return facts.suspect(self.suspect_names, attributes)


class _ExprFacts:
    """What of an expression bears on a suspect value: whether it makes one itself (a node
    ``is_source`` marks), and the names and attributes it reads."""

    __slots__ = ("attributes", "makes_one", "names")

    def __init__(self, node: ast.expr, is_source, prune=None) -> None:
        self.makes_one = False
        self.names: set[str] = set()
        self.attributes: set[str] = set()
        for child in _walk(node, prune):
            kind = type(child)
            if kind is ast.Name:
                self.names.add(child.id)
            elif kind is ast.Attribute:
                self.attributes.add(child.attr)
            if not self.makes_one and is_source(child):
                self.makes_one = True

    def suspect(self, names: set[str], attributes: set[str]) -> bool:
        return self.makes_one or not self.names.isdisjoint(names) or not self.attributes.isdisjoint(attributes)


def _may_lose_unit_stride(node: ast.AST) -> bool:
    """A view or a cast whose last dim may not have stride 1 (what ``.view(dtype)`` needs): as
    ``_makes_view``, but for the ranges that keep the last stride."""
    if type(node) is ast.Subscript:
        return _slices(node, unit_stride_only=True)
    return _makes_view(node)


def _makes_view(node: ast.AST) -> bool:
    """A view or a cast, as the layout domain reads them (``layout_words``)."""
    kind = type(node)
    if kind is ast.Attribute:
        return node.attr in PERMUTING_ATTRIBUTES
    if kind is ast.Call:
        func = node.func
        return (type(func) is ast.Attribute and func.attr in LAYOUT_SUSPECT_METHODS) or (
            type(func) is ast.Name and func.id in VIEW_MAKING
        )
    return kind is ast.Subscript and _slices(node)


def _slices(node: ast.Subscript, unit_stride_only: bool = False) -> bool:
    """Whether an index may leave gaps, read as the layout domain reads basic indexing
    (``layout._classify``): selected dims and one range that lead keep a tensor contiguous
    (``x[i]``, ``x[:n]``, ``x[i, :k]``); a step, or a selection or a range after a range or an
    ellipsis, does not (``x[:, 0]``, ``x[..., i]``, ``x[::2]``). Any index that is not a slice
    counts as a selection, a size-1 slice as a range (the domain may read either more kindly).
    ``x.shape[1:]`` is no tensor.

    ``unit_stride_only``: whether it may lose the unit stride of the last dim, what
    ``.view(dtype)`` needs: a range after a range keeps it (``x[:, :k]``) unless it may be of
    size 1 (the domain counts ``x[:, i:i + 1]`` as a selection)."""
    value = node.value
    if type(value) is ast.Attribute and value.attr in ("shape", "stride"):
        return False
    index = node.slice
    parts = index.elts if type(index) is ast.Tuple else [index]
    leading = True  # only selections so far
    for part in parts:
        kind = type(part)
        if kind is ast.Slice:
            step = part.step
            if step is not None and not (type(step) is ast.Constant and step.value in (1, None)):
                return True  # a step slice
            if part.lower is None and part.upper is None:
                leading = False  # a full slice: what follows it must be full too
                continue
            if not leading and (not unit_stride_only or _may_be_size1(part)):
                return True  # a range after a range, an ellipsis or a full slice
            leading = False
        elif kind is ast.Constant and part.value is Ellipsis:
            leading = False
        elif kind is ast.Constant and part.value is None:
            continue  # a new size-1 dim
        elif kind is ast.Starred:
            return True  # ``x[*idx]``: anything
        elif not leading:
            return True  # a selection after a range, an ellipsis or a full slice
    return False


def _may_be_size1(part: ast.Slice) -> bool:
    """The ranges the domain reads as one element (``LayoutDomain._is_size1_slice``): ``:1``,
    ``0:1``, ``-1:``, ``i:i + 1``."""
    lower, upper = part.lower, part.upper
    if upper is not None and lower is None and _int_constant(upper) == 1:
        return True
    if lower is not None and _int_constant(lower) == 0 and _int_constant(upper) == 1:
        return True
    if upper is None and _int_constant(lower) == -1:
        return True
    return (
        type(upper) is ast.BinOp and type(upper.op) is ast.Add and _int_constant(upper.right) == 1
        and lower is not None and ast.dump(upper.left) == ast.dump(lower)
    )  # fmt: skip


def _int_constant(node: ast.expr | None) -> int | None:
    """An int literal, negated or not (``layout._int_literal``)."""
    if type(node) is ast.UnaryOp and type(node.op) is ast.USub:
        inner = _int_constant(node.operand)
        return -inner if inner is not None else None
    if type(node) is ast.Constant and type(node.value) is int:
        return node.value
    return None


def _scopes(tree: ast.Module) -> list[list[ast.AST]]:
    """The code of each top-level function and each method of a top-level class (nested
    functions included), and last the rest: module code and class bodies."""
    scopes: list[list[ast.AST]] = []
    rest: list[ast.AST] = []
    for statement in tree.body:
        if type(statement) in _FUNCTIONS:
            scopes.append([statement])
        elif type(statement) is ast.ClassDef:
            for member in statement.body:
                (scopes.append([member]) if type(member) in _FUNCTIONS else rest.append(member))
            rest.extend([*statement.bases, *statement.keywords, *statement.decorator_list])
        else:
            rest.append(statement)
    scopes.append(rest or [ast.Pass()])
    return scopes


class _SyncScout:
    """Over-approximates where ``analysis.syncs`` can report in a hot scope without other files.

    A sync the hot-scope rules report needs a tensor known to be on the GPU at a sync site (a
    condition, an index, ``.item()``, ``int()``, ``nonzero``, a size...: ``analysis.syncs``),
    except in a method of a hot class (``unknown-device``) and for ``.synchronize()``. Only a
    device named in the code makes one (``device=``, ``.cuda()``, ``.to("cuda")``,
    ``.to(x.device)``, a name ending ``_gpu``: ``analysis.device``), through locals and
    ``self.`` attributes, never through a host result (``x.shape``, ``x.size(0)``, ``len(x)``).
    So a hot scope can report only if it, or a function of this file it may call (whose
    summary it reads), hands a value that may come from such a word to a sync site."""

    def __init__(self, names: _Names, tree: ast.Module, settings: Settings) -> None:
        self.names = names
        self.tree = tree
        self.settings = settings

    def found(self) -> bool:
        hot_scout = _HotScout(self.names, self.tree, self.settings)
        hot = hot_scout.units()
        if hot is None:
            return True
        if not hot:
            return False
        # Any tensor of a hot class's method may be reported (``unknown-device``).
        hot_classes = {
            id(node) for node in self.names.of(ast.ClassDef) if hot_scout.may_be_hot_class(node)
        } if self.settings["unknown-device"] == "hot-classes" else set()  # fmt: skip
        spans = _UnitSpans(self.tree)
        by_name: dict[str, list[ast.AST]] = {}
        for (_, name), node in spans.nodes:
            by_name.setdefault(name, []).append(node)
        scopes, attributes = _suspects(self.tree, _names_a_device, self._host_result())
        scope_of = {id(scope.roots[0]): scope for scope in scopes}
        class_of = {id(member): statement for statement in self.tree.body if type(statement) is ast.ClassDef
                    for member in statement.body}  # fmt: skip
        reached = [node for unit, node in spans.nodes if unit in hot]
        seen = {id(node) for node in reached}
        while reached:
            node = reached.pop()
            if id(class_of.get(id(node))) in hot_classes:
                return True
            scope = scope_of[id(node)]
            mentioned: set[str] = set()
            for child in _walk(node):
                if self._may_sync_at(child, scope, attributes) or id(child) in hot_classes:
                    return True
                kind = type(child)
                if kind is ast.Name:
                    mentioned.add(child.id)
                elif kind is ast.Attribute:
                    mentioned.add(child.attr)
            for name in mentioned:  # what it may call (or hand on as a callback)
                for callee in by_name.get(name, ()):
                    if id(callee) not in seen:
                        seen.add(id(callee))
                        reached.append(callee)
        return False

    def _host_result(self):
        """The expressions the device domain reads as host values whatever they read: a host
        attribute (unless the file assigns one of that name, which the domain then tracks), a
        method with a host result, ``len()``."""
        assigned = {node.attr for node in self.names.of(ast.Attribute) if type(node.ctx) is ast.Store}
        host_attributes = HOST_ATTRIBUTES - assigned - {"device"}  # ``x.device`` names a device
        rebinds_len = "len" in self.names.bound

        def host(node: ast.AST) -> bool:
            kind = type(node)
            if kind is ast.Attribute:
                return node.attr in host_attributes
            if kind is ast.Call:
                func = node.func
                if type(func) is ast.Attribute:
                    return func.attr in HOST_RESULT_METHODS
                return type(func) is ast.Name and func.id == "len" and not rebinds_len
            if kind is ast.Compare:  # ``x is None``, ``i in table``
                return any(type(op) in _MEMBERSHIP_TESTS for op in node.ops)
            if kind is ast.UnaryOp:
                return type(node.op) is ast.Not
            return kind in _HOST_EXPRESSIONS

        return host

    def _may_sync_at(self, node: ast.AST, scope: _ScopeFacts, attributes: set[str]) -> bool:
        """Whether ``node`` is a sync site handed a value that may be on the GPU."""
        kind = type(node)
        if kind in (ast.If, ast.While, ast.Assert, ast.IfExp):
            return scope.suspect(node.test, attributes)
        if kind is ast.comprehension:
            return any(scope.suspect(test, attributes) for test in node.ifs)
        if kind is ast.BoolOp:
            return any(scope.suspect(value, attributes) for value in node.values)
        if kind is ast.UnaryOp:
            return type(node.op) is ast.Not and scope.suspect(node.operand, attributes)
        if kind is ast.Subscript:  # a mask, a slice bound
            return scope.suspect(node.slice, attributes)
        if kind is not ast.Call:
            return False
        func = node.func
        # What the site reads: not where a result goes (``device=``, ``dtype=``, ``out=``).
        operands = [*node.args, *(keyword.value for keyword in node.keywords if keyword.arg not in _PLACEMENT_KEYWORDS)]
        if type(func) is ast.Attribute and func.attr in _SYNC_METHODS:
            if func.attr == "to" and not _may_name_the_host(node):
                return False  # a cast, or a copy to the GPU
            operands.append(func.value)
        elif type(func) is ast.Attribute and func.attr == "synchronize":
            return True
        elif type(func) is ast.Name and func.id in _SYNC_BUILTINS:
            pass
        else:  # a torch function (``torch.nonzero(x)``, ``torch.arange(n)``; not ``tl.where``)
            last = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None
            if last not in _SYNC_TORCH_FUNCTIONS or not any(name.startswith("torch.") for name in self.names.meanings(func)):
                return False
            if last == "where" and (len(node.args) != 1 or node.keywords):
                return False  # ``torch.where(c, a, b)`` is elementwise
        return any(scope.suspect(operand, attributes) for operand in operands)


# What the device domain reads as a host value whatever it holds (``DeviceDomain.evaluate``).
_MEMBERSHIP_TESTS = (ast.Is, ast.IsNot, ast.In, ast.NotIn)
_HOST_EXPRESSIONS = (ast.JoinedStr, ast.Lambda, ast.Dict, ast.DictComp, ast.ListComp, ast.SetComp, ast.GeneratorExp)
# Keywords that say where and how a result is made, read by no sync site.
_PLACEMENT_KEYWORDS = frozenset({"device", "dtype", "layout", "pin_memory", "requires_grad", "memory_format",
                                 "non_blocking", "out", "generator"})
# Calls that are a sync site when handed a GPU tensor (``analysis.syncs._Scanner``): methods
# (their receiver too), builtins, and torch functions (by their last name).
_SYNC_METHODS = EXPLICIT_METHODS | DATA_DEPENDENT_METHODS | VALUE_READS | {"to", "copy_", "repeat_interleave"}
_SYNC_BUILTINS = frozenset({*PROTOCOL_BUILTINS, "range"})
_SYNC_TORCH_FUNCTIONS = DATA_DEPENDENT_FUNCTIONS | VALUE_READS | SIZE_FUNCTIONS | {"where", "repeat_interleave"}


def _may_name_the_host(call: ast.Call) -> bool:
    """Whether ``.to(...)`` may copy to the host, as ``DeviceDomain.device_argument`` reads its
    target: ``"cpu"``, ``torch.device("cpu")``, a name with a ``cpu`` part, ``x.device``."""
    targets = [keyword.value for keyword in call.keywords if keyword.arg == "device"] + call.args[:1]
    for target in targets:
        if type(target) is ast.Constant:
            if type(target.value) is str and target.value.startswith("cpu"):
                return True
        elif type(target) is ast.Attribute and target.attr == "device":
            if not (type(target.value) is ast.Name and target.value.id in ("self", "cls")):
                return True  # where ``x`` is: the host, if ``x`` is there (``self`` never is)
        elif type(target) is ast.Call:
            return True  # ``torch.device(...)``, or anything else: left to the analysis
        else:
            written = ast_dotted(target)
            if written is None or "cpu" in written.rsplit(".", 1)[-1].lower().split("_"):
                return True
    return any(keyword.arg is None for keyword in call.keywords)  # ``.to(**kwargs)``


# Words of a device in code: ``device=``, ``x.device``, ``.cuda()``, ``torch.cuda``, ``seq_lens_gpu``
# (``analysis.device.name_hint``).
_DEVICE_WORDS = re.compile(r"device|cuda|gpu", re.IGNORECASE)


def _names_a_device(node: ast.AST) -> bool:
    """A node that may put a value on the GPU."""
    kind = type(node)
    if kind is ast.Name:
        return _DEVICE_WORDS.search(node.id) is not None
    if kind is ast.Attribute:
        return _DEVICE_WORDS.search(node.attr) is not None
    if kind is ast.keyword:
        return node.arg is not None and _DEVICE_WORDS.search(node.arg) is not None
    if kind is ast.Call:  # ``.to("npu")``: any device named by a string (others go through ``device``)
        func = node.func
        return (
            type(func) is ast.Attribute and func.attr == "to" and bool(node.args)
            and type(node.args[0]) is ast.Constant and type(node.args[0].value) is str
        )  # fmt: skip
    return False


class _UnitSpans:
    """The units of ``pipeline.units`` (each top-level function, each method of a top-level
    class) by their lines, decorators included: which unit a node at a line is in."""

    def __init__(self, tree: ast.Module) -> None:
        self.nodes: list[tuple[tuple[str | None, str], ast.AST]] = []
        for statement in tree.body:
            if type(statement) in _FUNCTIONS:
                self.nodes.append(((None, statement.name), statement))
            elif type(statement) is ast.ClassDef:
                self.nodes.extend(((statement.name, m.name), m) for m in statement.body if type(m) in _FUNCTIONS)
        self.names = {unit for unit, _ in self.nodes}
        self._starts = [min([node.lineno, *(d.lineno for d in node.decorator_list)]) for _, node in self.nodes]
        self._ends = [node.end_lineno for _, node in self.nodes]

    def unit_at(self, line: int) -> tuple[str | None, str] | None:
        index = bisect.bisect_right(self._starts, line) - 1
        if index >= 0 and line <= self._ends[index]:
            return self.nodes[index][0]
        return None


def _bound_names(statement: ast.stmt) -> set[str] | None:
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


# Fields that never hold a node worth visiting: names, constants, and the shared singleton
# nodes of contexts and operators (``Load``, ``Add``), which are most of a tree's nodes.
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "name", "arg", "kind", "type_comment", "level", "module", "conversion"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _walk(tree: ast.AST, prune=None) -> list[ast.AST]:
    """Every node of ``tree`` but the context and operator singletons, in no set order: what
    ``ast.walk`` gives, at about a third of its cost (it asks every field of every node).
    ``prune``: a test of the nodes to leave out, with all below them."""
    found = []
    stack = [tree]
    child_fields = _CHILD_FIELDS
    node_type = ast.AST
    while stack:
        node = stack.pop()
        if prune is not None and prune(node):
            continue
        found.append(node)
        kind = type(node)
        fields = child_fields.get(kind)
        if fields is None:
            fields = child_fields[kind] = tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
        for name in fields:
            value = getattr(node, name, None)
            if type(value) is list:
                stack.extend(item for item in value if isinstance(item, node_type))
            elif isinstance(value, node_type):
                stack.append(value)
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
