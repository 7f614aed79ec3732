"""Flag parameters: the ``if flag:`` tests a function's needs may hang on, and what a call binds.

A need of a function (a parameter that must be contiguous, a sync) may hold only where a flag
parameter is false, or true: fla's ``chunk_kda`` copies ``q`` itself under
``use_qk_l2norm_in_kernel=True``; a helper syncs only under ``return_host=True``. The analyses walk
such a function again assuming each truth of the flags it tests (``flag_tests``, ``flow.Walker``'s
``assume``) and record what no longer arises as excused where a call binds the flag so
(``FunctionSummary.needs_unless`` / ``sync_unless``); a call's literal flags (``call_flags``)
decide, project-wide, whether its callee's need holds for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from sync_lint.analysis.summaries import ArgKey, CallFlags

_SCOPES = (cst.Lambda, cst.FunctionDef, cst.ClassDef)  # their statements are not the function's


def call_arguments(call: cst.Call) -> Iterator[tuple[cst.Arg, ArgKey | None]]:
    """Each argument with the callee argument it binds: a position, a keyword, or None (an
    unpacked ``*args`` / ``**kwargs``, and every position after one)."""
    position: int | None = 0
    for arg in call.args:
        if arg.star:
            position = None  # positions after ``*args`` are unknown
            yield arg, None
            continue
        if arg.keyword is not None:
            yield arg, arg.keyword.value
            continue
        yield arg, position
        if position is not None:
            position += 1


def call_flags(call: cst.Call, params: frozenset[str], unchanged: Callable[[str], bool]) -> CallFlags:
    """What each argument of ``call`` binds a flag to (``summaries.CallFlags``): a literal
    ``True`` / ``False``, a flag parameter of the calling function (``params``: its
    ``flag_params``) that is still as passed (``unchanged``), an unpacked ``*args`` /
    ``**kwargs``, or anything else (None)."""
    found: list[tuple[ArgKey, bool | str | None]] = []
    for arg, key in call_arguments(call):
        value = arg.value
        if arg.star:
            found.append((arg.star, arg.star))
        elif key is None:
            continue  # a position after ``*args``: the marker above already says "unknown"
        elif type(value) is cst.Name and value.value in ("True", "False"):
            found.append((key, value.value == "True"))
        elif type(value) is cst.Name and value.value in params and unchanged(value.value):
            found.append((key, value.value))
        else:
            found.append((key, None))
    return tuple(found)


MAX_FLAGS = 4  # flag parameters a function is walked again for (up to two walks each)


def flag_tests(body: cst.BaseSuite, params: tuple[str, ...], needy: set[str], need_sites: set[int]) -> list[tuple[str, bool]]:
    """``(flag, truth)`` to walk a function again under, for a parameter tested as ``if flag:`` /
    ``if not flag:``: the truth that takes a branch assigning a parameter in ``needy`` (``if
    use_l2norm: q = l2norm(q)``) or ending the path, and the truth that skips a branch holding a
    statement where a need was recorded (``need_sites``: ``if use_triton: _kernel[grid](q)``, ``if
    return_host: out.cpu()``); for at most ``MAX_FLAGS`` flags."""
    found: list[tuple[str, bool]] = []
    flags: set[str] = set()
    for statement in _statements(body):
        if type(statement) is not cst.If:
            continue
        test, truth = statement.test, True
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, truth = test.expression, False
        if type(test) is not cst.Name or test.value not in params:
            continue
        if test.value not in flags and len(flags) == MAX_FLAGS:
            continue
        for branch, taken_at in ((statement.body, truth), (statement.orelse, not truth)):
            if branch is None:
                continue
            wanted = []
            if _rebinds_or_leaves(branch, needy):
                wanted.append(taken_at)
            if _holds_site(branch, need_sites):
                wanted.append(not taken_at)
            for value in wanted:
                if (test.value, value) not in found:
                    found.append((test.value, value))
                    flags.add(test.value)
    return found


def _holds_site(block: cst.CSTNode, sites: set[int]) -> bool:
    """Does a block hold one of these statements (a compound statement's header, or a small
    statement: what ``Walker`` hands its hook)?"""
    for statement in _statements(block):
        if id(statement) in sites:
            return True
        if type(statement) is cst.SimpleStatementLine and any(id(small) in sites for small in statement.body):
            return True
    return False


def _statements(block: cst.CSTNode | None) -> Iterator[cst.CSTNode]:
    """Every statement of a block and of the blocks nested in it (an ``elif`` is a statement of
    its own; the small statements of a one-line suite are statements), not those of nested
    functions or classes, without descending into expressions."""
    if block is None:
        return
    if type(block) is cst.If:
        statements = [block]
    else:
        body = getattr(block, "body", ())
        if not isinstance(body, (list, tuple)):
            yield from _statements(body)  # an ``Else`` / ``Finally`` / handler around its block
            return
        statements = body
    for statement in statements:
        yield statement
        if type(statement) in _SCOPES or type(statement) is cst.SimpleStatementLine:
            continue
        yield from _statements(getattr(statement, "body", None))
        yield from _statements(getattr(statement, "orelse", None))
        for handler in getattr(statement, "handlers", ()):
            yield from _statements(handler)
        yield from _statements(getattr(statement, "finalbody", None))


def _rebinds_or_leaves(block: cst.CSTNode, names: set[str]) -> bool:
    """Does a block assign one of ``names`` (``x = ...``, ``x, y = ...``, ``x: T = ...``,
    ``x += ...``) or hold a ``return`` / ``raise`` (what follows may then not see the name as
    it was)?"""
    for statement in _statements(block):
        for small in statement.body if type(statement) is cst.SimpleStatementLine else (statement,):
            kind = type(small)
            if kind is cst.Return or kind is cst.Raise:
                return True
            if kind is cst.Assign:
                targets = [target.target for target in small.targets]
            elif kind is cst.AnnAssign or kind is cst.AugAssign:
                targets = [small.target]
            else:
                continue
            for target in targets:
                elements = [e.value for e in target.elements] if type(target) in (cst.Tuple, cst.List) else [target]
                if any(type(element) is cst.Name and element.value in names for element in elements):
                    return True
    return False


def flag_params(node: cst.FunctionDef) -> frozenset[str]:
    """The parameters that look like flags: annotated ``bool`` or defaulting to ``True`` /
    ``False``. Only these are handed on as flags through a wrapper (``call_flags``)."""
    params = node.params
    return frozenset(
        param.name.value for param in (*params.posonly_params, *params.params, *params.kwonly_params)
        if (type(param.default) is cst.Name and param.default.value in ("True", "False"))
        or (param.annotation is not None and type(param.annotation.annotation) is cst.Name
            and param.annotation.annotation.value == "bool")
    )


def flag_defaults(node: cst.FunctionDef) -> dict[str, bool]:
    """The parameters that default to a literal ``True`` or ``False``."""
    params = node.params
    return {
        param.name.value: param.default.value == "True"
        for param in (*params.posonly_params, *params.params, *params.kwonly_params)
        if type(param.default) is cst.Name and param.default.value in ("True", "False")
    }
