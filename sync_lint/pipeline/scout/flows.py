"""Values followed through a function's bindings in any order: which names and attributes may
hold a suspect value (``suspects``), and which parameters a value may be (``ParameterFlows``)."""

from __future__ import annotations

import ast
import bisect

from sync_lint.pipeline.scout.syntax import (
    FUNCTIONS,
    FileNames,
    ast_dotted,
    first_line,
    positional_names,
    walk,
)


class ParameterFlows:
    """Which parameters of a function each of its names and attributes may hold, by any of
    its bindings in any order (nested functions' included). ``method``: its first parameter
    is the instance (or class), which the analyses' summaries leave out (``FunctionInfo.params``)."""

    def __init__(self, function: ast.AST, method: bool = False, scope: ScopeFacts | None = None) -> None:
        """``scope``: the function's facts where the caller has them (one walk less)."""
        self.params = parameter_names(function, method)
        if scope is not None:
            self.calls = scope.calls
            self._bindings = None
        else:
            self.calls, self._bindings = _calls_and_bindings([function])
        self._scope = scope
        # A name (an attribute as ``.name``) -> the values bound to it: made on the first
        # question (many functions get none), and what each value reads only once a question
        # follows its name (most of a function's values lead to no question).
        self._values: dict[str, list[_ExprFacts | ast.expr]] | None = None
        self._reads: dict[str, set[str]] = {}
        self._read_by_value: dict[int, set[str]] = {}  # a value bound to several names is read once
        self._held: dict[str, set[str]] = {}

    def _values_by_key(self) -> dict[str, list[_ExprFacts | ast.expr]]:
        values: dict[str, list[_ExprFacts | ast.expr]] = {}
        if self._scope is not None:
            for bound, value in self._scope.bound_values():
                for key in bound:
                    values.setdefault(key, []).append(value)
        else:
            for targets, value, _ in self._bindings:
                for key in _bound_keys(targets):
                    values.setdefault(key, []).append(value)
        return values

    def _reads_of(self, key: str) -> set[str]:
        """What the values bound to a name (an attribute as ``.name``) read."""
        reads = self._reads.get(key)
        if reads is None:
            reads = self._reads[key] = set()
            for value in self._values.get(key, ()):
                read = self._read_by_value.get(id(value))
                if read is None:
                    read = self._read_by_value[id(value)] = value.keys() if type(value) is _ExprFacts else _read_keys(value)
                reads |= read
        return reads

    def parameters_in(self, node: ast.expr) -> set[str]:
        """The parameters ``node``'s value may be (a part of)."""
        return self.parameters_in_keys(_read_keys(node))

    def parameters_in_keys(self, keys) -> set[str]:
        """The parameters a value that reads ``keys`` (names, attributes as ``.name``) may be."""
        found: set[str] = set()
        if not self.params:
            return found  # none to hold (a method of ``self`` alone)
        for key in keys:
            found |= self._held_by(key)
        return found

    def _held_by(self, key: str) -> set[str]:
        held = self._held.get(key)
        if held is None:
            if self._values is None:
                self._values = self._values_by_key()
            held = set()
            seen = {key}
            todo = [key]
            while todo:
                current = todo.pop()
                known = self._held.get(current)
                if known is not None:  # all it holds, followed before: nothing to follow again
                    held |= known
                    continue
                if current in self.params:
                    held.add(current)
                for read in self._reads_of(current):
                    if read not in seen:
                        seen.add(read)
                        todo.append(read)
            self._held[key] = held
        return held


def parameter_names(function: ast.AST, method: bool = False) -> set[str]:
    """The names of a function's parameters (``*args`` / ``**kwargs`` too); ``method``: but the
    first, the instance (or class), which no call hands an argument to."""
    arguments = function.args
    positional = positional_names(arguments)
    names = {*positional[1 if method else 0 :], *(a.arg for a in arguments.kwonlyargs)}
    names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    return names


def _calls_and_bindings(roots: list[ast.AST]) -> tuple[list[ast.Call], list[tuple[list[ast.expr], ast.expr, int]]]:
    """Every call under ``roots``, and every binding as (targets, value, line)."""
    calls = []
    bindings = []
    for root in roots:
        for node in walk(root):
            if type(node) is ast.Call:
                calls.append(node)
                continue
            bound = _binding(node)
            if bound is not None:
                bindings.append(bound)
    return calls, bindings


def _binding(node: ast.AST) -> tuple[list[ast.expr], ast.expr, int] | None:
    """(targets, value, line) of a node that binds (an assignment, a loop, a ``with ... as``, a
    walrus, a comprehension's ``for``); None for any other node. ``line``: where it starts
    (``_BINDING_KINDS``)."""
    kind = type(node)
    if kind is ast.Assign:
        return node.targets, node.value, node.lineno
    if kind in (ast.AnnAssign, ast.AugAssign, ast.NamedExpr):
        return ([node.target], node.value, node.lineno) if node.value is not None else None
    if kind is ast.For or kind is ast.AsyncFor:
        return [node.target], node.iter, node.lineno
    if kind is ast.comprehension:
        return [node.target], node.iter, node.target.lineno
    if kind is ast.withitem:
        return ([node.optional_vars], node.context_expr, node.context_expr.lineno) if node.optional_vars is not None else None
    return None


def _read_keys(node: ast.expr) -> set[str]:
    """The names and attributes (``.name``) an expression reads."""
    keys = set()
    for child in walk(node):
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


def _bound_parts(targets: list[ast.expr], shared_through: str | None) -> tuple[set[str], set[str], set[str]]:
    """The names, and the attributes, that binding targets bind (``_bound_keys``), the
    attributes split by where they may be read (``ScopeFacts``): by name across the file where
    assigned through the name ``shared_through`` (the first parameter; "": through anything),
    else by dotted name here (none where the target is no dotted name: ``rows[0].x``, which the
    domains do not follow). ``shared_through`` None: a function with no parameter, all here."""
    names: set[str] = set()
    shared: set[str] = set()
    local: set[str] = set()
    for key in _bound_keys(targets):
        if not key.startswith("."):
            names.add(key)
    todo = list(targets)
    while todo:
        node = todo.pop()
        kind = type(node)
        if kind is ast.Attribute:
            root = node.value
            while type(root) is ast.Attribute:
                root = root.value
            through = root.id if type(root) is ast.Name else None
            if shared_through == "" or through == shared_through:
                shared.add(node.attr)
            elif through is not None:
                local.add(ast_dotted(node))
        elif kind in (ast.Tuple, ast.List):
            todo.extend(node.elts)
        elif kind in (ast.Starred, ast.Subscript):
            todo.append(node.value)
    return names, shared, local


def suspects(
    tree: ast.Module, is_source, prune=None, names: FileNames | None = None, only=None,
    source_kinds: tuple[type, ...] | None = None,
) -> tuple[list[ScopeFacts], set[str]]:
    """Each scope's facts (``_scopes``), with the names that may hold a value ``is_source``
    marks (a node that makes one), and the attributes any assignment of the file gives one.
    ``prune``: expressions whose value is never suspect, whatever they read. ``names``: the
    tree's (``FileNames``), whose nodes by kind spare a walk of each scope, and which keeps the
    file's scopes for the next question (``FileScopes``). ``only``: a test of a scope's roots;
    the scopes it fails get no facts, and the caller vouches that they neither make a suspect
    value nor read an attribute that may hold one. ``source_kinds``: the only node kinds
    ``is_source`` may mark (with ``names``): a scope with no such node is quiet (``ScopeFacts``),
    and most scopes of a file are."""
    if names is None:
        scope_roots = _scopes(tree)
        parts = [_calls_and_bindings(roots) for roots in scope_roots]
        orders = [_Order.of_roots(roots) for roots in scope_roots]
        quiet_reads: list[set[str] | None] = [None] * len(scope_roots)
    else:
        file_scopes = names.memo.get(FileScopes)
        if file_scopes is None:
            file_scopes = names.memo[FileScopes] = FileScopes(tree, names.of)
        scope_roots, parts, orders = file_scopes.roots, file_scopes.parts, file_scopes.orders
        quiet_reads = (
            [None] * len(scope_roots) if source_kinds is None else file_scopes.quiet_reads(is_source, source_kinds, names.of)
        )
    scopes = [
        ScopeFacts(roots, is_source, prune, found, order, quiet)
        for roots, found, order, quiet in zip(scope_roots, parts, orders, quiet_reads)
        if only is None or only(roots)
    ]
    attributes: set[str] = set()
    while True:
        for scope in scopes:
            scope.close(attributes)
        found = set().union(*(scope.suspect_attributes for scope in scopes))
        if found <= attributes:
            return scopes, attributes
        attributes |= found


class FileScopes:
    """A file's scopes (``_scopes``), each with its calls and bindings, its order
    (``_Order``) and the attributes it reads, from the file's nodes by kind (``nodes_of``):
    the same whatever value ``suspects`` follows, so made once for the several questions a
    file is asked (a sink's, a sync's, a mask's). Read only once made: every ``ScopeFacts``
    of the file shares them. (It holds no reference to the ``FileNames`` that keeps it: a
    cycle would keep the file's tree alive until the cyclic collector's next pass.)"""

    def __init__(self, tree: ast.Module, nodes_of) -> None:
        self.roots = _scopes(tree)
        self.scope_at = _scope_at(self.roots)
        self.parts = _calls_and_bindings_by_scope(self.scope_at, len(self.roots), nodes_of)
        self.orders = _Order.by_scope(self.roots, self.scope_at, nodes_of)
        self._attribute_reads: list[set[str]] | None = None

    def quiet_reads(self, is_source, source_kinds: tuple[type, ...], nodes_of) -> list[set[str] | None]:
        """For each scope with no node ``is_source`` marks (of ``source_kinds``), the attributes
        it reads (``ScopeFacts``: only one of them holding a suspect value can make a binding
        of it suspect); None for the others. Parts a ``prune`` leaves out count here too: a
        scope is quiet only when it surely is. ``nodes_of``: the file's nodes by kind."""
        scope_at = self.scope_at
        sourced: set[int | None] = set()
        for kind in source_kinds:
            for node in nodes_of(kind):
                if is_source(node):
                    sourced.add(scope_at(node.lineno))
        if self._attribute_reads is None:
            self._attribute_reads = [set() for _ in self.roots]
            for node in nodes_of(ast.Attribute):
                index = scope_at(node.lineno)
                if index is not None:
                    self._attribute_reads[index].add(node.attr)
        return [None if index in sourced else reads for index, reads in enumerate(self._attribute_reads)]


# The node kinds ``_binding`` reads.
_BINDING_KINDS = (
    ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr, ast.For, ast.AsyncFor, ast.comprehension, ast.withitem,
)  # fmt: skip
# Code that runs again and again (its bindings may reach its earlier lines), and code that runs
# later than where it is written (a closure, a lambda, a generator expression: every binding of
# the function may reach it).
_LOOP_KINDS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp)
_LATER_KINDS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.GeneratorExp)


class _Order:
    """What a scope's order of bindings rests on (``ScopeFacts``): its loops' and its later
    code's line spans, and the names whose bindings are taken to reach everywhere: those
    declared ``global`` or ``nonlocal``, and those a walrus binds (``f(y) if (y := g()) else
    None`` binds ``y`` on a later line than it reads it)."""

    __slots__ = ("later", "loops", "unordered")

    def __init__(self) -> None:
        self.loops: list[tuple[int, int]] = []
        self.later: list[tuple[int, int]] = []
        self.unordered: set[str] = set()

    def add(self, node: ast.AST) -> None:
        kind = type(node)
        if kind in _LOOP_KINDS:
            self.loops.append((node.lineno, node.end_lineno))
        elif kind in _LATER_KINDS:
            first = first_line(node) if kind in FUNCTIONS else node.lineno
            self.later.append((first, node.end_lineno))
        elif kind is ast.Global or kind is ast.Nonlocal:
            self.unordered.update(node.names)
        elif kind is ast.NamedExpr and type(node.target) is ast.Name:
            self.unordered.add(node.target.id)

    @classmethod
    def of_roots(cls, roots: list[ast.AST]) -> _Order:
        """``roots``: a scope's (``_scopes``); its own function is no later code of it, but a
        loop of the module code is a loop of it."""
        order = cls()
        for root in roots:
            for node in walk(root):
                if node is not root or type(root) not in FUNCTIONS:
                    order.add(node)
        return order

    @classmethod
    def by_scope(cls, scope_roots: list[list[ast.AST]], scope_at, nodes_of) -> list[_Order]:
        """``of_roots`` of each scope, from the file's nodes by kind (as
        ``_calls_and_bindings_by_scope``)."""
        own = {id(root) for roots in scope_roots for root in roots if type(root) in FUNCTIONS}
        orders = [cls() for _ in scope_roots]
        for kind in (*_LOOP_KINDS, *_LATER_KINDS, ast.Global, ast.Nonlocal, ast.NamedExpr):
            for node in nodes_of(kind):
                if id(node) in own:
                    continue
                index = scope_at(first_line(node) if kind in FUNCTIONS else node.lineno)
                if index is not None:
                    orders[index].add(node)
        return orders

    def runs_later(self, line: int) -> bool:
        return any(first <= line <= last for first, last in self.later)

    def reaches(self, bound: int, read: int) -> bool:
        """May a binding that starts on line ``bound`` reach a read on line ``read`` (a read in
        code that runs later is not asked)? An earlier line, the same one, or a later one in a
        loop around both."""
        return bound <= read or any(first <= read and bound <= last for first, last in self.loops)


def _calls_and_bindings_by_scope(scope_at, count: int, nodes_of) -> list[tuple[list, list]]:
    """``_calls_and_bindings`` of each of ``count`` scopes, from the file's nodes by kind: a node
    belongs to the scope ``scope_at`` its first line (``_scope_at``)."""
    found: list[tuple[list, list]] = [([], []) for _ in range(count)]
    for call in nodes_of(ast.Call):
        index = scope_at(call.lineno)
        if index is not None:
            found[index][0].append(call)
    for kind in _BINDING_KINDS:
        for node in nodes_of(kind):
            bound = _binding(node)
            if bound is None:
                continue
            index = scope_at(bound[2])
            if index is not None:
                found[index][1].append(bound)
    return found


def _scope_at(scope_roots: list[list[ast.AST]]):
    """Which scope (``_scopes``) a line belongs to: the function scope whose lines (decorators
    included) hold it, else the last scope (the rest), else None. Top-level functions and
    methods never share a line."""
    spans = []  # (first line, last line, scope index), by first line
    for index, roots in enumerate(scope_roots):
        root = roots[0]
        if len(roots) == 1 and type(root) in FUNCTIONS:
            spans.append((first_line(root), root.end_lineno, index))
    spans.sort()
    starts = [first for first, _, _ in spans]
    rest = len(scope_roots) - 1  # the last scope, unless every scope is a function
    has_rest = bool(scope_roots) and not (len(scope_roots[rest]) == 1 and type(scope_roots[rest][0]) in FUNCTIONS)

    def scope_at(line: int) -> int | None:
        at = bisect.bisect_right(starts, line) - 1
        if at >= 0 and line <= spans[at][1]:
            return spans[at][2]
        return rest if has_rest else None

    return scope_at


class ScopeFacts:
    """One function's (or the module code's) bindings and calls, and which of its names may hold
    a suspect value (one that a node ``is_source`` marks made, or flowed from one) where they
    are read. Names are not told apart by nested scope.

    Order counts, by lines (``_Order``): a read sees the suspect bindings of its name on earlier
    lines or its own, on later lines in a loop around both, and all of them where it runs later
    (in a nested function, a lambda, a generator expression) or where the name is ``global``,
    ``nonlocal`` or bound by a walrus. ``x = x.to(torch.int32)`` after a read of ``x`` leaves
    that read alone.

    Attributes are told apart by name only. One assigned through the function's first parameter
    (``self.x = ...``, ``self.cache.x = ...``) may be read in other functions: the domains carry
    those across a class (``layout.class_attributes``, ``device.ClassPlaces``), so a suspect
    value there makes the name suspect across the file (``suspect_attributes``). One assigned
    through anything else (``layer.w.data = ...``) the domains follow within the function only,
    by its dotted name (``flow.target_key``): that name is suspect here (``local_keys``), and so
    is any read of it or of an attribute of it (``layer.w.data.view(...)``), not
    ``layer.scale.data``. Outside every function (module code, class bodies, nested classes'
    methods) every attribute counts across the file.

    A quiet scope (no node of it may make a suspect value: ``suspects``) has a suspect binding
    only where it reads an attribute that holds one; until it does, the facts of its bindings,
    a walk of each value and most of the cost, are not made."""

    def __init__(self, roots: list[ast.AST], is_source, prune=None, calls_and_bindings=None,
                 order: _Order | None = None, quiet_reads: set[str] | None = None) -> None:
        """``calls_and_bindings``: ``_calls_and_bindings(roots)``, and ``order``:
        ``_Order.of_roots(roots)``, where the caller has them. ``quiet_reads``: for a quiet
        scope, the attributes it reads (None: not known to be quiet)."""
        self.roots = roots
        self.is_source = is_source
        self.prune = prune
        self.calls, self._bound = calls_and_bindings or _calls_and_bindings(roots)
        self._order = order or _Order.of_roots(roots)
        self._quiet_reads = quiet_reads
        self._bindings: list[_Binding] | None = None
        # name -> the lines of its suspect bindings (0: reaches every read)
        self._suspect_lines: dict[str, list[int]] = {}
        self.suspect_attributes: set[str] = set()
        self.local_keys: set[str] = set()
        self._facts: dict[int, _ExprFacts] = {}

    @property
    def bindings(self) -> list[_Binding]:
        if self._bindings is None:
            shared_through = self._shared_through()
            self._bindings = []
            for targets, value, line in self._bound:
                names, shared, local = _bound_parts(targets, shared_through)
                facts = _ExprFacts(value, self.is_source, self.prune)
                self._bindings.append(_Binding(names, shared, local, facts, line, self._read_at(value)))
        return self._bindings

    def bound_values(self):
        """Each binding's names and attributes (``.name``; ``.a.b`` by dotted name where it is
        followed here only: ``_bound_parts``), and its value: its facts where they are made,
        else the expression (a quiet scope's facts are left unmade)."""
        if self._bindings is not None:
            for binding in self._bindings:
                yield (*binding.names, *("." + a for a in binding.shared | binding.local)), binding.value
            return
        shared_through = self._shared_through()
        for targets, value, _ in self._bound:
            names, shared, local = _bound_parts(targets, shared_through)
            yield (*names, *("." + a for a in shared | local)), value

    def _shared_through(self) -> str | None:
        """The name attributes shared across the file are assigned through (``_bound_parts``)."""
        roots = self.roots
        if len(roots) != 1 or type(roots[0]) not in FUNCTIONS:
            return ""  # outside every function: through anything
        positional = positional_names(roots[0].args)
        return positional[0] if positional else None

    def close(self, attributes: set[str]) -> None:
        """Grow the suspect bindings to a fixpoint, given the file's suspect attributes."""
        if self._bindings is None and self._quiet_reads is not None and self._quiet_reads.isdisjoint(attributes):
            return  # quiet, and reads none of them: no binding of it can be suspect
        unordered = self._order.unordered
        grown = True
        while grown:
            grown = False
            for binding in self.bindings:
                if binding.suspect:
                    continue
                value = binding.value
                reaching = _NO_NAMES
                if value.names and not self._suspect_lines.keys().isdisjoint(value.names):
                    reaching = self._reaching(value.names, binding.read_at)
                if value.suspect(reaching, attributes, self.local_keys):
                    binding.suspect = grown = True
                    for name in binding.names:
                        self._suspect_lines.setdefault(name, []).append(0 if name in unordered else binding.line)
                    self.suspect_attributes |= binding.shared
                    self.local_keys |= binding.local

    def suspect(self, node: ast.expr, attributes: set[str]) -> bool:
        """May ``node`` (of this scope) be suspect, given the file's suspect attributes?"""
        if self._bindings is None and self._quiet_reads is not None and self._quiet_reads.isdisjoint(attributes):
            return False  # as ``close``: nothing of it can be
        facts = self.facts(node)
        if facts.makes_one:
            return True
        reaching = _NO_NAMES
        if facts.names and not self._suspect_lines.keys().isdisjoint(facts.names):
            reaching = self._reaching(facts.names, self._read_at(node))
        return facts.suspect(reaching, attributes, self.local_keys)

    def _read_at(self, node: ast.expr) -> int:
        """The line a read in ``node`` is taken at: its last (the whole of it counts as read
        there); 0 for code that runs later, which every binding may reach."""
        return 0 if self._order.later and self._order.runs_later(node.lineno) else node.end_lineno

    def _reaching(self, names: set[str], read: int) -> set[str]:
        """Those of ``names`` with a suspect binding that may reach a read on line ``read``
        (``_read_at``)."""
        lines_of = self._suspect_lines
        order = self._order
        return {
            name for name in names if (lines := lines_of.get(name)) is not None
            and (read == 0 or any(order.reaches(line, read) for line in lines))
        }  # fmt: skip

    def facts(self, node: ast.expr) -> _ExprFacts:
        facts = self._facts.get(id(node))
        if facts is None:
            facts = self._facts[id(node)] = _ExprFacts(node, self.is_source, self.prune)
        return facts


_NO_NAMES: frozenset[str] = frozenset()


class _Binding:
    """One binding of a scope (``ScopeFacts``): the names it binds, the attributes it assigns
    (across the file, and here only by dotted name: ``_bound_parts``), its value's facts, the
    line it starts on, the line its value is read at (``ScopeFacts._read_at``), and whether its
    value is found suspect."""

    __slots__ = ("line", "local", "names", "read_at", "shared", "suspect", "value")

    def __init__(self, names: set[str], shared: set[str], local: set[str], value: _ExprFacts, line: int,
                 read_at: int) -> None:
        self.names = names
        self.shared = shared
        self.local = local
        self.value = value
        self.line = line
        self.read_at = read_at
        self.suspect = False


class _ExprFacts:
    """What of an expression bears on a suspect value: whether it makes one itself (a node
    ``is_source`` marks), and the names and attributes it reads outside the parts ``prune``
    leaves out (which are never suspect, whatever they read)."""

    __slots__ = ("_dotted", "_node", "_prune", "_pruned", "attributes", "makes_one", "names")

    def __init__(self, node: ast.expr, is_source, prune=None) -> None:
        self.makes_one = False
        self.names: set[str] = set()
        self.attributes: set[str] = set()
        self._pruned: list[ast.AST] | None = None
        self._node = node
        self._prune = prune
        self._dotted: set[str] | None = None
        kind = type(node)
        if kind is ast.Name or kind is ast.Constant:  # half the values; nothing below to walk
            if prune is None or not prune(node):
                if kind is ast.Name:
                    self.names.add(node.id)
                self.makes_one = bool(is_source(node))
            else:
                self._pruned = [node]
            return
        if prune is not None:
            pruned: list[ast.AST] = []

            def leave_out(child: ast.AST) -> bool:
                if prune(child):
                    pruned.append(child)
                    return True
                return False

            children = walk(node, leave_out)
            self._pruned = pruned or None
        else:
            children = walk(node)
        for child in children:
            kind = type(child)
            if kind is ast.Name:
                self.names.add(child.id)
            elif kind is ast.Attribute:
                self.attributes.add(child.attr)
            if not self.makes_one and is_source(child):
                self.makes_one = True

    def keys(self) -> set[str]:
        """Every name and attribute (``.name``) it reads (``_read_keys``), the parts left out
        included: a value holds what it is made of whether or not it may be suspect
        (``x.contiguous()`` may be ``x`` itself)."""
        keys = self.names | {"." + attribute for attribute in self.attributes}
        for part in self._pruned or ():
            keys |= _read_keys(part)
        return keys

    def suspect(self, names: set[str], attributes: set[str], local_keys: set[str] | None = None) -> bool:
        """Is it suspect where ``names`` and ``attributes`` are (``ScopeFacts``), and, read by
        their dotted names, ``local_keys``?"""
        if self.makes_one or not self.names.isdisjoint(names) or not self.attributes.isdisjoint(attributes):
            return True
        return bool(local_keys) and any(key.rpartition(".")[2] in self.attributes for key in local_keys) and (
            not self._dotted_reads().isdisjoint(local_keys)
        )

    def _dotted_reads(self) -> set[str]:
        """The dotted names of the attributes it reads outside the pruned parts, each prefix of a
        chain too (``a.b.c`` reads ``a.b``): made on the first need."""
        if self._dotted is None:
            self._dotted = {
                dotted for child in walk(self._node, self._prune) if type(child) is ast.Attribute
                and (dotted := ast_dotted(child)) is not None
            }  # fmt: skip
        return self._dotted


def _scopes(tree: ast.Module) -> list[list[ast.AST]]:
    """The code of each top-level function and each method of a top-level class (nested
    functions included), and last the rest: module code and class bodies."""
    scopes: list[list[ast.AST]] = []
    rest: list[ast.AST] = []
    for statement in tree.body:
        if type(statement) in FUNCTIONS:
            scopes.append([statement])
        elif type(statement) is ast.ClassDef:
            for member in statement.body:
                (scopes.append([member]) if type(member) in FUNCTIONS else rest.append(member))
            rest.extend([*statement.bases, *statement.keywords, *statement.decorator_list])
        else:
            rest.append(statement)
    if rest:
        scopes.append(rest)
    return scopes
