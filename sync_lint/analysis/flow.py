"""A forward walk over one function body that tracks an abstract value per local name.

Layout provenance (GPU1xx) and device provenance (GPU2xx) are both "what could this name hold
here?" questions; they differ only in their values. A ``Domain`` says how to evaluate an
expression and how to join two values; ``walk`` handles statements: assignments (tuple
unpacking, ``self.x = ...``, augmented, annotated, walrus at statement level), branches (the
values of both sides are joined: a value that is a view on some paths is a view), loops (the
body is walked twice so that values flowing round the loop are seen), ``try``, ``with ... as``,
``match``. Nested functions and classes are separate scopes and are skipped.

``on_statement(node, env)`` is called for every simple statement and every compound statement
header (``if`` test, ``for`` iterable, ``with`` items...) with the environment that holds
before it; rules inspect expressions there.
"""

from __future__ import annotations

from typing import Callable, Generic, Mapping, Protocol, TypeVar

import libcst as cst

from sync_lint.analysis.names import dotted
from sync_lint.analysis.nodes import kinds

V = TypeVar("V")
Env = dict  # name (or "self.attr") -> abstract value


class Domain(Protocol[V]):
    def evaluate(self, node: cst.BaseExpression, env: Mapping[str, V]) -> V: ...

    def join(self, a: V, b: V) -> V: ...

    def element(self, value: V, index: int) -> V:
        """The value of one element when ``value`` is unpacked (``a, b = value``)."""
        ...

    def unknown(self) -> V: ...


StatementHook = Callable[[cst.CSTNode, Env], None]

_SUITES = kinds(cst.BaseSuite, cst.Else, cst.Finally)
_SEQUENCE_TARGETS = (cst.Tuple, cst.List)
_SCOPES = (cst.FunctionDef, cst.ClassDef)
_LOOPS = (cst.For, cst.While)
_TRIES = (cst.Try, cst.TryStar)


def target_key(target: cst.BaseExpression) -> str | None:
    """The environment key a target binds: ``x`` or ``self.x`` (other targets are not tracked)."""
    kind = type(target)
    if kind is cst.Name:
        return target.value
    if kind is cst.Attribute:
        return dotted(target)
    return None


class Walker(Generic[V]):
    def __init__(self, domain: Domain[V], on_statement: StatementHook | None = None) -> None:
        self.domain = domain
        self._hook = on_statement or (lambda node, env: None)
        self._quiet = 0  # > 0 while walking a loop body the first time: no hooks then

    def on_statement(self, node: cst.CSTNode, env: Env) -> None:
        if not self._quiet:
            self._hook(node, env)

    def walk(self, body, env: Env) -> Env:
        for statement in body:
            env = self.statement(statement, env)
        return env

    def _suite(self, suite, env: Env) -> Env:
        if suite is None:
            return env
        if type(suite) is cst.SimpleStatementSuite:  # ``if c: x = 1`` (small statements inline)
            for small in suite.body:
                env = self.small(small, env)
            return env
        body = getattr(suite, "body", suite)
        if type(body) in _SUITES:
            return self._suite(body, env)
        if isinstance(body, (list, tuple)):
            return self.walk(body, env)
        return env

    def join_envs(self, a: Env, b: Env) -> Env:
        joined = dict(a)
        for key, value in b.items():
            joined[key] = self.domain.join(joined[key], value) if key in joined else value
        return joined

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

    def statement(self, node: cst.CSTNode, env: Env) -> Env:
        kind = type(node)
        if kind is cst.SimpleStatementLine:
            for small in node.body:
                env = self.small(small, env)
            return env
        if kind in _SCOPES:
            env = dict(env)
            env[node.name.value] = self.domain.unknown()
            return env
        if kind is cst.If:
            self.on_statement(node, env)
            then_env = self._suite(node.body, dict(env))
            else_env = self.statement(node.orelse, dict(env)) if type(node.orelse) is cst.If else self._suite(node.orelse, dict(env))
            return self.join_envs(then_env, else_env)
        if kind in _LOOPS:
            self.on_statement(node, env)
            before = dict(env)
            loop_env = dict(env)
            if kind is cst.For:
                self.bind(node.target, self._item(self.domain.evaluate(node.iter, env)), loop_env)
            # Twice: the second pass sees values assigned late in the first iteration. Hooks
            # run on the second pass only, so each statement is reported once.
            self._quiet += 1
            try:
                after_once = self._suite(node.body, loop_env)
            finally:
                self._quiet -= 1
            after_twice = self._suite(node.body, self.join_envs(loop_env, after_once))
            result = self.join_envs(before, after_twice)
            return self._suite(node.orelse, result)
        if kind is cst.With:
            self.on_statement(node, env)
            env = dict(env)
            for item in node.items:
                if item.asname is not None:
                    self.bind(item.asname.name, self.domain.evaluate(item.item, env), env)
            return self._suite(node.body, env)
        if kind in _TRIES:
            after_body = self._suite(node.body, dict(env))
            merged = self.join_envs(env, after_body)
            result = after_body
            for handler in node.handlers:
                self.on_statement(handler, merged)
                handler_env = dict(merged)
                if handler.name is not None:
                    self.bind(handler.name.name, self.domain.unknown(), handler_env)
                result = self.join_envs(result, self._suite(handler.body, handler_env))
            result = self._suite(node.orelse, result)
            return self._suite(node.finalbody, result)
        if kind is cst.Match:
            self.on_statement(node, env)
            result = None
            for case in node.cases:
                case_env = self._suite(case.body, dict(env))
                result = case_env if result is None else self.join_envs(result, case_env)
            return self.join_envs(env, result) if result is not None else env
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
        return env
