"""A forward walk over one function body that tracks an abstract value per local name.

Layout provenance (GPU1xx) and device provenance (GPU2xx) are both "what could this name hold
here?" questions; they differ only in their values. A ``Domain`` says how to evaluate an
expression and how to join two values; ``walk`` handles statements: assignments (tuple
unpacking, ``self.x = ...``, augmented, annotated, walrus at statement level), branches (the
values of both sides are joined: a value that is a view on some paths is a view), loops (the
body is walked twice so that values flowing round the loop are seen), ``try``, ``with ... as``,
``match``. Nested functions and classes are separate scopes and are skipped.

A path that ends unconditionally (``return``, ``raise``, ``continue``, ``break``, and what raises as
surely: ``assert False``, a statement ``sys.exit(...)`` / ``os._exit(...)`` / builtin ``exit()`` /
``quit()``) does not flow into the statement after it: a branch ending so takes no part in the join
after its ``if`` (its values are not what the code after the ``if`` sees). Its environment is
marked ``Unreachable``; the values are kept for where that path does go: a ``continue`` to the loop
head (the next iteration and the loop exit), a ``break`` to after the loop (its ``else`` skipped), a
``return`` to the function exit (what ``walk`` returns: the join of the fall-through and every
``return``), a raise to the handlers of an enclosing ``try`` or past an enclosing
``with contextlib.suppress(...)`` (which swallows it). A ``while True:`` loop is left only by a
``break``; a ``match`` with a catch-all case (``case _:``, a bare capture) always takes one of its
cases. Statements after the end of a path (dead code) are still walked, hooks included, with the
values that held at the end, but nothing they do reaches live code.

``on_statement(node, env)`` is called for every simple statement and every compound statement
header (``if`` test, ``for`` iterable, ``with`` items...) with the environment that holds
before it; rules inspect expressions there.

A walk may be given a *decide* oracle (``decide(test, env) -> bool | None``, ``flags.deciding``:
parameters bound to constants): an ``if`` whose test it decides takes only that branch, the
other is not walked at all (no hooks), nor is code after a path's end (dead, maybe only by what
was decided). It is how a summary learns that a need or a sync arises only where a flag
parameter is false, and how a call of a function of the same file is judged with its constant
arguments (``analysis.flags``, ``syncs.SyncAnalysis.clean_with_arguments``). A conditional
expression is the domain's to evaluate: a domain handed the same oracle (its ``decide``
attribute) evaluates only the branch it takes (``decided_branch``), and so does the sync scanner.

What a test says of a value narrows it on each branch: ``x is None`` (``none``), and what the
domain reads in a test (``narrow``: ``x.is_contiguous()``, ``x.is_cpu``; ``narrowing`` reads
``not`` / ``and`` / ``or``), for an ``if`` and past an ``assert`` here, and for a conditional
expression in the domain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, Protocol, TypeVar

import libcst as cst

from sync_lint.analysis.names import dotted
from sync_lint.analysis.nodes import kinds

V = TypeVar("V")
Env = dict  # name (or "self.attr") -> abstract value


Decide = Callable[[cst.BaseExpression, Env], "bool | None"]


def decided_branch(node: cst.IfExp, decide: Decide | None, env: Env) -> cst.BaseExpression | None:
    """The branch of ``body if test else orelse`` that a walk's oracle takes (``q =
    l2norm(q.contiguous()) if use_l2norm else q`` assuming ``use_l2norm``); None where there is no
    oracle or it does not decide the test: either branch may be taken."""
    if decide is None:
        return None
    truth = decide(node.test, env)
    if truth is None:
        return None
    return node.body if truth else node.orelse


def conditional_value(domain, node: cst.IfExp, env: Env):
    """A conditional expression's value in a domain with ``decide`` and ``branch_envs``: the
    branch the walk's oracle takes, else both branches joined, each read with what the test tells
    on its side."""
    branch = decided_branch(node, domain.decide, env)
    if branch is not None:
        return domain.evaluate(branch, env)
    then_env, else_env = domain.branch_envs(node.test, env)
    return domain.join(domain.evaluate(node.body, then_env), domain.evaluate(node.orelse, else_env))


def narrowing(test: cst.BaseExpression, holds: bool, leaf: Callable[[cst.BaseExpression, bool], dict]) -> dict:
    """What a test tells of the values it checks where it holds (``holds``) or fails, for a
    domain's ``narrow``: ``leaf(test, holds)`` reads a test that is no ``not`` / ``and`` / ``or``;
    through ``not`` the truth flips, and where ``and`` holds (``or`` fails) each side does."""
    kind = type(test)
    if kind is cst.UnaryOperation and type(test.operator) is cst.Not:
        return narrowing(test.expression, not holds, leaf)
    if kind is cst.BooleanOperation:
        if (type(test.operator) is cst.And) is holds:
            return {**narrowing(test.left, holds, leaf), **narrowing(test.right, holds, leaf)}
        return {}
    return leaf(test, holds)


class Unreachable(dict):
    """The environment of a path that has ended (``return``, ``raise``, ``continue``, ``break``):
    the values as they were at its end. Joined with a live environment it contributes nothing."""


class Domain(Protocol[V]):
    def evaluate(self, node: cst.BaseExpression, env: Mapping[str, V]) -> V: ...

    def join(self, a: V, b: V) -> V: ...

    def element(self, value: V, index: int) -> V:
        """The value of one element when ``value`` is unpacked (``a, b = value``)."""
        ...

    def unknown(self) -> V: ...

    # Optional method ``none() -> V``, the value of ``None``: the walker then narrows a name
    # tested ``x is None`` / ``x is not None`` to it on the branch where the test says so.
    # Optional method ``narrow(test, env, holds) -> dict``: the values a test tells of the names
    # it checks where it holds (``holds``) or fails (``if not x.is_contiguous(): x =
    # x.contiguous()``: on the ``else`` path ``x`` is contiguous); the walker starts the branches
    # of an ``if`` with them.
    # Optional attribute ``decide``: the oracle of the walk, set by the analysis that makes a
    # walk under assumptions, for the domain's conditional expressions (``decided_branch``).
    # Optional attribute ``names``, the file's ``NameTable``: the walker resolves ``sys.exit``,
    # ``contextlib.suppress``... through the file's imports with it; without it, as written.


StatementHook = Callable[[cst.CSTNode, Env], None]

_SUITES = kinds(cst.BaseSuite, cst.Else, cst.Finally)
_SEQUENCE_TARGETS = (cst.Tuple, cst.List)
_SCOPES = (cst.FunctionDef, cst.ClassDef)
_LOOPS = (cst.For, cst.While)
_TRIES = (cst.Try, cst.TryStar)
_ENDS = (cst.Return, cst.Raise, cst.Continue, cst.Break)
_EXITS = frozenset({"sys.exit", "os._exit"})  # statement calls that never return (they raise or end the process)
_BUILTIN_EXITS = frozenset({"exit", "quit"})  # the ``site`` builtins: raise SystemExit
_SUPPRESSORS = frozenset({"contextlib.suppress"})  # context managers that swallow what their body raises
_LAST_WORDS = frozenset({"exit", "_exit", "suppress"})  # the last names of ``_EXITS`` and ``_SUPPRESSORS``


def _ended(env: Env) -> bool:
    return type(env) is Unreachable


def _constant_truth(test: cst.BaseExpression) -> bool | None:
    """``True`` / ``1`` -> True, ``False`` / ``0`` -> False, anything else -> None (unknown)."""
    kind = type(test)
    if kind is cst.Name and test.value in ("True", "False"):
        return test.value == "True"
    if kind is cst.Integer:
        return test.evaluated_value != 0
    return None


def _catch_all(case: cst.MatchCase) -> bool:
    """An irrefutable case without a guard: matches any subject."""
    return case.guard is None and _irrefutable(case.pattern)


def _irrefutable(pattern: cst.MatchPattern) -> bool:
    """``_``, ``name``, ``<irrefutable> as name``, or an or-pattern with an irrefutable
    alternative (``1 | _``): Python's irrefutable patterns."""
    kind = type(pattern)
    if kind is cst.MatchAs:
        return pattern.pattern is None or _irrefutable(pattern.pattern)
    if kind is cst.MatchOr:
        return any(_irrefutable(element.pattern) for element in pattern.patterns)
    return False


def one_comparison(test: cst.BaseExpression, *operators: type) -> tuple[cst.BaseExpression, type, cst.BaseExpression] | None:
    """``left <op> right`` with one of ``operators`` (``cst.Is``, ``cst.Equal``...), as (left, the
    operator's type, right); None for any other test, a chain (``a < b < c``) included."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    link = test.comparisons[0]
    operator = type(link.operator)
    return (test.left, operator, link.comparator) if operator in operators else None


def _none_test(test: cst.BaseExpression) -> tuple[str, bool] | None:
    """``x is None`` -> ``("x", True)``, ``x is not None`` (or ``None is not x``) -> ``("x",
    False)``: the key the test narrows, and whether it holds None where the test is true."""
    found = one_comparison(test, cst.Is, cst.IsNot)
    if found is None:
        return None
    left, operator, right = found
    if type(left) is cst.Name and left.value == "None":
        left, right = right, left
    if not (type(right) is cst.Name and right.value == "None"):
        return None
    key = target_key(left)
    return (key, operator is cst.Is) if key is not None else None


def target_key(target: cst.BaseExpression) -> str | None:
    """The environment key a target binds: ``x`` or ``self.x`` (other targets are not tracked)."""
    kind = type(target)
    if kind is cst.Name:
        return target.value
    if kind is cst.Attribute:
        return dotted(target)
    return None


class Walker(Generic[V]):
    def __init__(self, domain: Domain[V], on_statement: StatementHook | None = None,
                 decide: Decide | None = None) -> None:
        self.domain = domain
        self._decide = decide
        self._names = getattr(domain, "names", None)  # the file's NameTable, where the domain has one
        self._none = getattr(domain, "none", None)  # the value of None, where the domain has one
        self._narrow = getattr(domain, "narrow", None)  # what a test tells, where the domain reads tests
        self._hook = on_statement or (lambda node, env: None)
        self._quiet = 0  # > 0 while walking a loop body the first time: no hooks then
        self._dead = 0  # > 0 while walking unreachable code: its path ends record nothing
        self._returns: list[Env] = []  # environments at the ``return`` statements of this walk
        self._loops: list[tuple[list[Env], list[Env]]] = []  # per enclosing loop: continues, breaks
        self._tries: list[list[Env]] = []  # per enclosing ``try`` body: where its paths ended
        # What is known to hold where the walk is, for the hook to ask (``if t.dtype == d:``): each
        # test with the environment before it and whether it is true there (the body of an
        # enclosing ``if``; after an ``assert``) or false (after an ``if`` whose body ends the
        # path: ``if t.element_size() != 1: raise``), until the end of the enclosing block.
        self.conditions: list[tuple[cst.BaseExpression, Env, bool]] = []

    def on_statement(self, node: cst.CSTNode, env: Env) -> None:
        if not self._quiet:
            self._hook(node, env)

    def walk(self, body, env: Env) -> Env:
        """Walk a function body; the environment at its exit: the join of the path that falls off
        its end and of every ``return`` (the end values when every path raises)."""
        outer = self._returns, self._loops, self._tries
        self._returns, self._loops, self._tries = [], [], []
        try:
            end = self._block(body, env)
            exits = ([] if _ended(end) else [end]) + self._returns
        finally:
            self._returns, self._loops, self._tries = outer
        if not exits:
            return dict(end)
        result = exits[0]
        for other in exits[1:]:
            result = self._join_values(result, other)
        return dict(result)

    def _block(self, body, env: Env) -> Env:
        known = len(self.conditions)
        try:
            for index, statement in enumerate(body):
                if _ended(env):
                    self._unreachable(body[index:], env, self.statement)
                    break
                env = self.statement(statement, env)
        finally:
            del self.conditions[known:]  # what a statement of this block made known ends with it
        return env

    def _smalls(self, smalls, env: Env) -> Env:
        for index, small in enumerate(smalls):
            if _ended(env):
                self._unreachable(smalls[index:], env, self.small)
                break
            env = self.small(small, env)
        return env

    def _unreachable(self, statements, env: Env, step) -> None:
        """Dead code after the end of a path: walked (hooks see it, with the values at the end)
        but what it binds or where its own paths end goes nowhere. Not where a ``decide`` oracle
        prunes branches: the code may be dead only by what it decided, and must record nothing."""
        if self._decide is not None:
            return
        self._dead += 1
        try:
            live = dict(env)
            for statement in statements:
                live = dict(step(statement, live))
        finally:
            self._dead -= 1

    def _suite(self, suite, env: Env) -> Env:
        if suite is None:
            return env
        if type(suite) is cst.SimpleStatementSuite:  # ``if c: x = 1`` (small statements inline)
            return self._smalls(suite.body, env)
        body = getattr(suite, "body", suite)
        if type(body) in _SUITES:
            return self._suite(body, env)
        if isinstance(body, (list, tuple)):
            return self._block(body, env)
        return env

    def join_envs(self, a: Env, b: Env) -> Env:
        """Two paths meet: a path that has ended (``Unreachable``) contributes nothing; when both
        have, the result has ended too (with both paths' values joined)."""
        a_ended, b_ended = _ended(a), _ended(b)
        if a_ended != b_ended:
            return dict(b if a_ended else a)
        joined = self._join_values(a, b)
        return Unreachable(joined) if a_ended else joined

    def _join_values(self, a: Env, b: Env) -> Env:
        joined = dict(a)
        for key, value in b.items():
            joined[key] = self.domain.join(joined[key], value) if key in joined else value
        return joined

    def _join_all(self, env: Env, others: list[Env]) -> Env:
        for other in others:
            env = self.join_envs(env, other)
        return env

    def _item(self, iterable: V) -> V:
        """The value a ``for`` target takes: the domain's ``iterate`` (any element, e.g. the join
        of a tuple's elements) if it has one, else element 0."""
        iterate = getattr(self.domain, "iterate", None)
        return iterate(iterable) if iterate is not None else self.domain.element(iterable, 0)

    def bind(self, target: cst.BaseExpression, value: V, env: Env) -> None:
        if type(target) in _SEQUENCE_TARGETS:
            for index, element in enumerate(target.elements):
                inner = element.value
                if type(element) is cst.StarredElement:
                    self.bind(inner, self.domain.unknown(), env)
                else:
                    self.bind(inner, self.domain.element(value, index), env)
            return
        key = target_key(target)
        if key is not None:
            env[key] = value
            if type(target) is cst.Name:
                # A new object: what was known of the old one's attributes (``x.data``) is not of it.
                prefix = key + "."
                for stale in [k for k in env if k.startswith(prefix)]:
                    del env[stale]

    def _narrowed(self, test: cst.BaseExpression, env: Env) -> tuple[Env, Env]:
        """The environments an ``if`` starts its two branches with: where its test says a
        tracked name is None, it is None there (``if x is not None: x = x.contiguous()`` leaves
        ``x`` None or contiguous, never the parameter as passed); and what else the domain reads
        in the test (``narrow``)."""
        then_env, else_env = dict(env), dict(env)
        narrowed = _none_test(test) if self._none is not None else None
        if narrowed is not None and narrowed[0] in env:
            key, none_when_true = narrowed
            (then_env if none_when_true else else_env)[key] = self._none()
        if self._narrow is not None:
            then_env.update(self._narrow(test, env, True))
            else_env.update(self._narrow(test, env, False))
        return then_env, else_env

    def statement(self, node: cst.CSTNode, env: Env) -> Env:
        kind = type(node)
        if kind is cst.SimpleStatementLine:
            return self._smalls(node.body, env)
        if kind in _SCOPES:
            env = dict(env)
            env[node.name.value] = self.domain.unknown()
            return env
        if kind is cst.If:
            self.on_statement(node, env)
            truth = self._decide(node.test, env) if self._decide is not None else None
            if truth is False:
                return self.statement(node.orelse, env) if type(node.orelse) is cst.If else self._suite(node.orelse, env)
            if truth is True:
                self.conditions.append((node.test, env, True))
                try:
                    return self._suite(node.body, dict(env))
                finally:
                    self.conditions.pop()
            then_start, else_start = self._narrowed(node.test, env)
            self.conditions.append((node.test, env, True))
            try:
                then_env = self._suite(node.body, then_start)
            finally:
                self.conditions.pop()
            else_env = self.statement(node.orelse, else_start) if type(node.orelse) is cst.If else self._suite(node.orelse, else_start)
            if node.orelse is None and _ended(then_env) and not _ended(else_env):
                self.conditions.append((node.test, env, False))  # a guard: the rest runs only when false
            return self.join_envs(then_env, else_env)
        if kind in _LOOPS:
            self.on_statement(node, env)
            before = dict(env)
            loop_env = dict(env)
            if kind is cst.For:
                item = self._item(self.domain.evaluate(node.iter, env))
                self.bind(node.target, item, loop_env)
            # Twice: the second pass sees values assigned late in the first iteration. Hooks
            # run on the second pass only, so each statement is reported once. A ``continue``
            # goes to the loop head (the next iteration, or the exit), a ``break`` past ``else``.
            self._quiet += 1
            first: tuple[list[Env], list[Env]] = ([], [])
            self._loops.append(first)
            try:
                after_once = self._suite(node.body, loop_env)
            finally:
                self._quiet -= 1
                self._loops.pop()
            second: tuple[list[Env], list[Env]] = ([], [])
            self._loops.append(second)
            head = self._join_all(loop_env, [after_once, *first[0]])
            if kind is cst.For:  # each iteration starts by binding the target afresh
                self.bind(node.target, item, head)
            try:
                after_twice = self._suite(node.body, head)
            finally:
                self._loops.pop()
            result = self._join_all(before, [after_twice, *first[0], *second[0]])
            if kind is cst.While and _constant_truth(node.test):
                # ``while True:`` never finds its test false: only a ``break`` leaves it (its
                # ``else`` is dead code).
                result = Unreachable(result)
            result = self._suite(node.orelse, result)
            return self._join_all(result, [*first[1], *second[1]])
        if kind is cst.With:
            self.on_statement(node, env)
            env = dict(env)
            for item in node.items:
                if item.asname is not None:
                    self.bind(item.asname.name, self.domain.evaluate(item.item, env), env)
            if not any(type(item.item) is cst.Call and self._names_one_of(item.item.func, _SUPPRESSORS)
                       for item in node.items):
                return self._suite(node.body, env)
            # ``suppress`` is ``try: body`` with an ``except: pass``: what the body raises (from its
            # start, its end, where a path of it ended) continues after the block.
            swallowed: list[Env] = []
            self._tries.append(swallowed)
            try:
                after_body = self._suite(node.body, env)
            finally:
                self._tries.pop()
            merged = env
            for end in (after_body, *swallowed):
                merged = self._join_values(merged, end)
            return merged
        if kind in _TRIES:
            ends: list[Env] = []
            self._tries.append(ends)
            try:
                after_body = self._suite(node.body, dict(env))
            finally:
                self._tries.pop()
            # A handler may be entered from anywhere in the body: its start, its end, and where
            # a path of it ended (a ``raise``; ``return f(x)`` may raise too) all count.
            merged = env
            for end in (after_body, *ends):
                merged = self._join_values(merged, end)
            # ``else`` runs when the body completes: not after a handler, nor after a ``return``.
            result = self._suite(node.orelse, after_body)
            for handler in node.handlers:
                self.on_statement(handler, merged)
                handler_env = dict(merged)
                if handler.name is not None:
                    self.bind(handler.name.name, self.domain.unknown(), handler_env)
                result = self.join_envs(result, self._suite(handler.body, handler_env))
            return self._suite(node.finalbody, result)
        if kind is cst.Match:
            self.on_statement(node, env)
            result = None
            for case in node.cases:
                case_env = self._suite(case.body, dict(env))
                result = case_env if result is None else self.join_envs(result, case_env)
            if result is None:
                return env
            # Without a catch-all case, no case may match: the subject falls through unchanged.
            return result if any(_catch_all(case) for case in node.cases) else self.join_envs(env, result)
        return env

    def small(self, node: cst.BaseSmallStatement, env: Env) -> Env:
        self.on_statement(node, env)
        kind = type(node)
        if kind is cst.Assign:
            value = self.domain.evaluate(node.value, env)
            env = dict(env)
            for target in node.targets:
                self.bind(target.target, value, env)
        elif kind is cst.AnnAssign and node.value is not None:
            env = dict(env)
            self.bind(node.target, self.domain.evaluate(node.value, env), env)
        elif kind is cst.AugAssign:
            key = target_key(node.target)
            if key is not None:
                env = dict(env)
                # ``x += y`` is arithmetic: evaluate it as the binary operation it stands for.
                env[key] = self.domain.evaluate(
                    cst.BinaryOperation(left=node.target, operator=cst.Add(), right=node.value), env
                )
        elif kind is cst.Expr and type(node.value) is cst.NamedExpr:
            env = dict(env)
            self.bind(node.value.target, self.domain.evaluate(node.value.value, env), env)
        elif kind is cst.Assert and not self._raises(node, env):
            self.conditions.append((node.test, env, True))
            # Past it, its test holds (``assert x.is_contiguous()`` after ``x = x.t()``: the
            # author knows the tensor is stored transposed), as on the branch of an ``if``.
            env, _ = self._narrowed(node.test, env)
        elif kind in _ENDS or self._raises(node, env):
            if not self._dead:
                for ends in self._tries:
                    ends.append(env)
                if kind is cst.Return:
                    self._returns.append(env)
                elif kind in (cst.Continue, cst.Break) and self._loops:
                    self._loops[-1][0 if kind is cst.Continue else 1].append(env)
            return Unreachable(env)
        return env

    def _names_one_of(self, func: cst.BaseExpression, targets: frozenset[str]) -> bool:
        """Does ``func`` (``name`` or ``a.b.name``) refer to one of ``targets`` (dotted names)? A bare
        name only through an import (``from sys import exit as bye``); an attribute chain through
        the imports of its head, or as written where the domain has no ``NameTable``."""
        kind = type(func)
        if kind is cst.Name:
            names = self._names
            return names is not None and func.value in names.imports and names.resolve(func) in targets
        if kind is not cst.Attribute or func.attr.value not in _LAST_WORDS:  # a cheap test first
            return False
        return (self._names.resolve(func) if self._names is not None else dotted(func)) in targets

    def _raises(self, node: cst.BaseSmallStatement, env: Env) -> bool:
        """A small statement that is not ``raise`` but never completes: ``assert False`` (it
        raises ``AssertionError``) or a statement call of an exit function."""
        kind = type(node)
        if kind is cst.Assert:
            return _constant_truth(node.test) is False
        if kind is not cst.Expr or type(node.value) is not cst.Call:
            return False
        func = node.value.func
        if type(func) is cst.Name:
            if func.value in env:  # a local binding (``exit = stack.pop``) is no exit function
                return False
            if func.value in _BUILTIN_EXITS:
                # The builtin unless an import names it (``from sys import exit`` still exits).
                names = self._names
                return names is None or func.value not in names.imports or names.resolve(func) in _EXITS
        return self._names_one_of(func, _EXITS)
