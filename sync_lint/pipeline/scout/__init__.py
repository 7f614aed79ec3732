"""The syntax scout: questions about a file that CPython's ``ast`` answers before (and instead of)
a libcst parse.

``ast.parse`` costs about a twentieth of libcst's parse, and importing libcst more than
flake8's whole run on a small file. A file checked on its own (pre-commit's staged files, the
flake8 plugin, an editor's buffer) where no rule can report needs neither; the text pre-filter
(``prefilter``) cannot tell that, since the rules' trigger words (``.cpu(``, ``forward``,
``torch.ops``, ``.view(``) are in most engine files, while findings are in few.

The scout asks, per rule family, the question its findings cannot do without: a GPU1xx
finding needs a sink handed a view or a cast (``SinkScout``), a GPU2xx finding a hot scope
reaching a sync site with a value that may be on the GPU (``SyncScout``). Both follow values
through each function's bindings in no order (``ScopeFacts``) and through attributes across
the file, reading the same names as the analyses (``analysis.layout_words``,
``analysis.device_words``, ``analysis.triton_names``).

Every answer here over-approximates the analysis it stands in for: "may" means the analysis
could say yes; "no" must be certain. When in doubt (a syntax error, an option the scout does not
model) the answer is "may". ``bench/bench_one_file.py`` checks that on every file of vLLM and
SGLang, and ``tests/test_fast_path_equivalence.py`` on generated projects and the fixtures.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from sync_lint.analysis.device_words import MEMOIZERS
from sync_lint.config import Settings
from sync_lint.pipeline.scout.hot import HotScout
from sync_lint.pipeline.scout.sinks import HandedCall, ScopeHanding, SinkScout
from sync_lint.pipeline.scout.syncs import SyncOutline, SyncScout
from sync_lint.pipeline.scout.syntax import (
    BLOCK_FIELDS,
    FUNCTIONS,
    TRY_STATEMENTS,
    FileNames,
    UnitSpans,
    ast_dotted,
    bound_names,
    decorator_callee,
    first_line,
)
from sync_lint.pipeline.source import split_lines

__all__ = ["HandedCall", "ScopeHanding", "Scout", "SinkShapes", "ast_dotted"]


class Scout:
    """One file's syntax tree, parsed on the first question (none when it does not parse);
    ``tree``: the text's tree where the caller has one (flake8 hands its plugins one);
    ``module_name``: the file's, as the lint names it (``lint_file.module_name_for``), where the
    caller knows it: without it, no hot-scope question is answered under ``hot-functions``.
    ``module_bases``: the names its classes' bases may have that other files make ``nn.Module``
    subclasses (``FileProjectNames.module_bases``), for a file checked alone."""

    def __init__(
        self, text: str, settings: Settings, tree: ast.Module | None = None, module_name: str | None = None,
        module_bases: tuple[str, ...] = (),
    ) -> None:
        self.text = text
        self.settings = settings
        self.module_name = module_name
        self.module_bases = module_bases
        self._parsed = False
        self._tree: ast.Module | None = tree  # None: it does not parse (the libcst parse reports it)
        self._names: FileNames | None = None
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

    def _names_of_tree(self) -> FileNames | None:
        if not self._parsed:
            self._parsed = True
            if self._tree is None:
                try:
                    self._tree = ast.parse(self.text)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    return None
            self._names = FileNames(self._tree, self.settings)
        return self._names

    def tree(self) -> ast.Module | None:
        """The file's syntax tree; None when it does not parse."""
        return self._tree if self._names_of_tree() is not None else None

    def of(self, kind: type) -> list:
        """Every node of a kind, anywhere in the tree (empty when it does not parse)."""
        names = self._names_of_tree()
        return [] if names is None else names.of(kind)

    def knows_hot_functions(self) -> bool:
        """Whether the functions ``hot-functions`` names can be told here: none are named, or
        the module name they are matched under is known."""
        return self.module_name is not None or not self.settings["hot-functions"]

    def may_have_hot_scope(self) -> bool:
        """Whether ``HotScopes`` could find a hot function or a ``torch.cuda.graph`` block (the
        only places GPU201/GPU202/GPU204 report)."""
        if not self.knows_hot_functions():
            return True
        names = self._names_of_tree()
        return names is None or HotScout(names, self._tree, self.settings, self.module_name, self.module_bases).found()

    def hot_units(self) -> set[tuple[str | None, str]] | None:
        """The units (``pipeline.units``: a top-level function ``(None, name)`` or a method of a
        top-level class ``(class, name)``) where ``HotScopes`` could find a hot function or a
        ``torch.cuda.graph`` block; None when that cannot be told here (``knows_hot_functions``
        says no, the file does not parse, or such a thing is outside every unit)."""
        if not self.knows_hot_functions():
            return None
        names = self._names_of_tree()
        if names is None:
            return None
        # Asked once per rule that reports only in hot scopes (``prefilter.rule_seeds``).
        return self._once(("hot units",), lambda: HotScout(names, self._tree, self.settings, self.module_name, self.module_bases).units())

    def may_sync_in_a_hot_scope(self) -> bool:
        """Whether a GPU2xx rule that reports only in hot scopes could report in this file on its
        own: a hot scope may be here (``may_have_hot_scope``), and it or a function of this file
        it may call may hold a sync (``SyncScout``)."""
        if not self.may_have_hot_scope():
            return False  # the cheaper question first: most files the words let through have none
        if not self.knows_hot_functions():
            return True  # which functions are hot: the analysis decides
        names = self._names_of_tree()
        if names is None:
            return True
        return self._once(("hot sync",), lambda: SyncScout(names, self._tree, self.settings, self.module_name, self.module_bases).found())

    def sync_outline(self) -> SyncOutline | None:
        """For a run of many files (``SyncScout.outline``): the units (as ``hot_units`` names them)
        whose code may sync on a value from a named device (or, as ``unknown-device`` says, on
        any value), with what a sync of another file's function may rest on: the units that may
        sync explicitly on a parameter, and the calls that may hand one a value from a named
        device (``SyncOutline``); None when the file does not parse. (Which functions are hot,
        ``hot-functions`` among the reasons, does not change where a sync may be: that is the
        question of ``hot_units``.)"""
        names = self._names_of_tree()
        if names is None:
            return None
        return self._once(("sync outline",), lambda: SyncScout(names, self._tree, self.settings, self.module_name, self.module_bases).outline(self.lines()))

    def memoised_functions(self) -> set[tuple[None, str]]:
        """The top-level functions (as ``hot_units`` names them) under a decorator that may be
        ``functools.lru_cache`` / ``cache``: ``SyncAnalysis.cached_call`` reads their
        definitions where hot code hands one's result to another (empty when the file does not
        parse)."""
        names = self._names_of_tree()
        if names is None:
            return set()
        return {
            (None, statement.name) for statement in self._tree.body
            if type(statement) in FUNCTIONS and any(
                not MEMOIZERS.isdisjoint(names.meanings(decorator_callee(d))) for d in statement.decorator_list
            )
        }  # fmt: skip

    def bindings_matching(self, pattern: re.Pattern) -> set[str] | None:
        return self._once(("bindings", pattern), lambda: self._bindings_matching(pattern))

    def _bindings_matching(self, pattern: re.Pattern) -> set[str] | None:
        """The names that statements outside every function bind where ``pattern`` occurs in
        them: an import (``from torch.ops import _C``) or an assignment (``op = torch.ops.x``)
        gives a function that uses the name what the pattern stands for, and so does a function
        or class defined under a module-level block (``if hasattr(torch.ops._C, "op"):``),
        which is no unit of its own (``_bound_where_matching``), and a class attribute a class's
        own statement assigns. None when a statement outside every function that may bind
        anything (a call, a class's header) holds it, or the file does not parse: then any
        function may matter."""
        if self._names_of_tree() is None:
            return None
        lines = self.lines()
        found: set[str] = set()
        for statement in self._tree.body:
            kind = type(statement)
            if kind in FUNCTIONS:
                continue  # a unit of its own, decorators included
            if kind is ast.ClassDef:
                # Its header may hand the pattern's object to anything (a base, a decorator);
                # its own statements bind class attributes (``FUSED_OP = torch.ops.x.default``,
                # which a method reads as ``self.FUSED_OP``) as module-level ones bind names.
                header_end = statement.body[0].lineno - 1 if statement.body else statement.end_lineno
                if pattern.search("".join(lines[first_line(statement) - 1 : header_end])):
                    return None
                for member in statement.body:
                    if type(member) in FUNCTIONS:
                        continue
                    if pattern.search("".join(lines[first_line(member) - 1 : member.end_lineno])):
                        bound = _bound_where_matching(member, pattern, lines)
                        if bound is None:
                            return None
                        found |= bound
                continue
            if not pattern.search("".join(lines[statement.lineno - 1 : statement.end_lineno])):
                continue
            bound = _bound_where_matching(statement, pattern, lines)
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

    def sink_shapes(self) -> SinkShapes | None:
        """Where the file holds a call that may be a launch or a ``.view(dtype)``, or a Triton
        kernel (``SinkShapes``); None when the file does not parse or such a call is in module
        code that no function or class under a module-level block holds (a class's own body, a
        nested class's method, a plain statement)."""
        return self._once(("sink shapes",), self._sink_shapes)

    def _sink_shapes(self) -> SinkShapes | None:
        names = self._names_of_tree()
        if names is None:
            return None
        spans = UnitSpans(self._tree)
        shapes = SinkShapes(set(), set())
        for call in names.of(ast.Call):
            if names.is_launch(call) or names.is_dtype_view(call):
                unit = spans.unit_at(call.lineno)
                if unit is not None:
                    shapes.units.add(unit)
                    continue
                # Module code, always parsed; but a function defined there (``if HAS_TRITON:
                # def launch(x): kernel[grid](x)``) has callers that would not be.
                defined = _defined_around(self._tree, call.lineno)
                if defined is None:
                    return None
                shapes.defined_around.add(defined)
        shapes.units.update(unit for unit, node in spans.nodes if names.triton_decorated(node))
        return shapes

    def may_report_at_a_sink(self) -> bool:
        """Whether a GPU1xx rule could report in this file on its own: whether a sink may be
        handed a view or a cast (``SinkScout``). Other files' functions have no summary in a
        one-file run, so ``list[int]()``, ``x.view(-1, n)``, a launch of an imported kernel,
        ``assert x.is_contiguous()`` in a function nothing here calls, and a custom op handed
        only parameters and the results of other calls cannot report."""
        names = self._names_of_tree()
        return names is None or self._once(("sink",), lambda: SinkScout(names, self._tree, self.lines(), self.settings).found())

    def sink_handing(self, may_be_called) -> list[ScopeHanding] | None:
        """What each scope of the file hands to sinks and to other functions, for a run of many
        files (``SinkScout.handing``; ``may_be_called``: whether a name may be the head of a
        call of a function of the run); None when that cannot be told here (the file does not
        parse, or a ``contiguous-sinks`` glob may match any callee)."""
        names = self._names_of_tree()
        if names is None:
            return None
        return SinkScout(names, self._tree, self.lines(), self.settings).handing(may_be_called)


@dataclass
class SinkShapes:
    """A file's calls that may be a launch or a ``.view(dtype)`` (the sinks whose words are too
    common to be seed words, ``prefilter.seed_words``), and its Triton kernels: the units
    holding either, and the functions and classes defined under module-level blocks (no units
    of their own: the module code's) that hold such a call, by name."""

    units: set[tuple[str | None, str]]
    defined_around: set[str]


def _defined_around(tree: ast.Module, line: int) -> str | None:
    """The name of the function or class defined under module-level blocks (``if``, ``try``,
    ``with``, loops) whose lines hold ``line``; None where other module code holds it."""
    statements = tree.body
    while True:
        for statement in statements:
            if first_line(statement) <= line <= statement.end_lineno:
                break
        else:
            return None
        if type(statement) in FUNCTIONS or type(statement) is ast.ClassDef:
            return None if statements is tree.body else statement.name
        if type(statement) is ast.ExceptHandler:
            statements = statement.body
            continue
        if type(statement) not in _BLOCK_STATEMENTS:
            return None
        statements = [inner for block in BLOCK_FIELDS for inner in getattr(statement, block, ())]


# Not ``match``: its cases carry no line numbers.
_BLOCK_STATEMENTS = (ast.If, ast.While, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, *TRY_STATEMENTS)


def _bound_where_matching(statement: ast.stmt, pattern: re.Pattern, lines: list[str]) -> set[str] | None:
    """What a statement outside every unit that holds ``pattern`` binds to what the pattern
    stands for: an import's names (``bound_names``), an assignment's, or the container it
    stores into (``OPS[k] = torch.ops._C.op``: a function that reads ``OPS``); a
    function's or a class's name (one under a module-level block: its code is module code, so
    its callers are what may matter); a block's, from the statements in it that hold the
    pattern, where its own header binds nothing: an ``if``'s or a ``while``'s test with no
    walrus and no call handed the pattern's object but of a ``hasattr``-like builtin (``if
    hasattr(torch.ops._C, "op"):``), a ``try``; nothing for a docstring. None for anything
    else (a call, which may bind anything; a ``with`` or ``for`` header): then any function
    may matter."""
    kind = type(statement)
    if kind is ast.Expr and type(statement.value) is ast.Constant:
        return set()  # a docstring naming the words: it binds and runs nothing
    if kind is ast.Import or kind is ast.ImportFrom:
        return bound_names(statement)
    if kind is ast.Assign or kind is ast.AnnAssign or kind is ast.AugAssign:
        return _stored_into(statement.targets if kind is ast.Assign else [statement.target])
    if kind in FUNCTIONS or kind is ast.ClassDef:
        return {statement.name}
    if kind is ast.If or kind is ast.While:
        for node in ast.walk(statement.test):
            if type(node) is ast.NamedExpr:
                return None
            if type(node) is ast.Call and not (type(node.func) is ast.Name and node.func.id in _TEST_BUILTINS) \
                    and pattern.search(ast.unparse(node)):
                return None
        blocks = (statement.body, statement.orelse)
    elif kind in TRY_STATEMENTS:
        if any(handler.type is not None and pattern.search(ast.unparse(handler.type)) for handler in statement.handlers):
            return None
        blocks = (statement.body, *(handler.body for handler in statement.handlers), statement.orelse, statement.finalbody)
    else:
        return None
    found: set[str] = set()
    for block in blocks:
        for inner in block:
            if pattern.search("".join(lines[first_line(inner) - 1 : inner.end_lineno])):
                bound = _bound_where_matching(inner, pattern, lines)
                if bound is None:
                    return None
                found |= bound
    return found


def _stored_into(targets: list[ast.expr]) -> set[str] | None:
    """The names at the root of assignment targets (``OPS[k]``, ``ns.op``, ``a, b``); None
    where a target has none (``f().x``)."""
    found: set[str] = set()
    for target in targets:
        if type(target) in (ast.Tuple, ast.List):
            inner = _stored_into(target.elts)
            if inner is None:
                return None
            found |= inner
            continue
        node = target.value if type(target) is ast.Starred else target
        while type(node) in (ast.Subscript, ast.Attribute):
            node = node.value
        if type(node) is not ast.Name:
            return None
        found.add(node.id)
    return found


# Builtins a module-level block's test may call, binding nothing (``if hasattr(torch.ops._C, "op"):``).
_TEST_BUILTINS = frozenset({"hasattr", "getattr", "callable", "isinstance", "issubclass", "len"})

