"""Flag parameters: the ``if flag:`` tests a function's needs may hang on, and what a call binds.

A need of a function (a parameter that must be contiguous, a sync) may hold only where a flag
parameter is false, or true: fla's ``chunk_kda`` copies ``q`` itself under
``use_qk_l2norm_in_kernel=True``; a helper syncs only under ``return_host=True``. The analyses
walk such a function again assuming each truth of the flags it tests (``flag_tests``;
``flow.Walker`` with ``decide=deciding(...)``, which folds a test with parameters bound to
constants: ``truth``) and record what no longer arises as excused where a call binds the flag so
(``FunctionSummary.needs_unless`` / ``sync_unless``); a call's flags (``call_flags``) decide,
project-wide, whether its callee's need holds for it. The same folding judges a call of a
function of the same file with its constant arguments (``SyncAnalysis.clean_with_arguments``).

A sync may also hang on a parameter being ``None``: ``if max_seqlen is None: max_seqlen =
int(seq_lens.max().item())`` syncs only where a caller leaves ``max_seqlen`` out (SGLang's
``prepare_vision_attention_metadata``). The sync analysis walks such a function again with the
parameter bound to ``NOT_NONE`` (``flag_tests`` given ``bind_count``), which decides ``is None`` /
``is not None`` tests and nothing else, and a call handing a value that is certainly not
``None`` there (``not_none``: ``x.shape[0]``, ``int(...)``, a local only ever assigned such
values, a parameter annotated ``int``) binds it so.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

import libcst as cst

from sync_lint.analysis.device import is_literal
from sync_lint.analysis.nodes import block_statements, inner_blocks, named_params
from sync_lint.analysis.summaries import NOT_NONE, ArgKey, CallFlags


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


def call_flags(call: cst.Call, params: frozenset[str], unchanged: Callable[[str], bool],
               not_none: Callable[[cst.BaseExpression], bool] | None = None) -> CallFlags:
    """What each argument of ``call`` binds a flag to (``summaries.CallFlags``): a literal
    ``True`` / ``False``, a flag parameter of the calling function (``params``: its
    ``flag_params``) that is still as passed (``unchanged``), ``NOT_NONE`` for a value that
    ``not_none`` tells is no ``None``, an unpacked ``*args`` / ``**kwargs``, or anything else
    (None)."""
    found: list[tuple[ArgKey, object]] = []
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
        elif not_none is not None and not_none(value):
            found.append((key, NOT_NONE))
        else:
            found.append((key, None))
    return tuple(found)


# A value that is no constant (``None`` is one).
NOT_CONSTANT = object()
_COMPARE = {
    cst.Equal: operator.eq, cst.NotEqual: operator.ne, cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le, cst.GreaterThan: operator.gt, cst.GreaterThanEqual: operator.ge,
    cst.Is: operator.is_, cst.IsNot: operator.is_not,
}
_SINGLETONS = (None, True, False)


def constant(node: cst.BaseExpression | None):
    """The Python value of a literal argument or default (``-1``, ``False``, ``None``, ``"auto"``)."""
    if node is None or not is_literal(node):
        return NOT_CONSTANT
    kind = type(node)
    if kind is cst.Name:
        return {"None": None, "True": True, "False": False}[node.value]
    if kind is cst.UnaryOperation:
        inner = constant(node.expression)
        if inner is NOT_CONSTANT or not isinstance(inner, (int, float, complex)):
            return NOT_CONSTANT
        return -inner if type(node.operator) is cst.Minus else inner
    try:
        return node.evaluated_value
    except Exception:  # noqa: BLE001 -- a malformed literal; pragma: no cover
        return NOT_CONSTANT


def truth(node: cst.BaseExpression, constants: dict[str, object]) -> bool | None:
    """Is a test true, false or not known, with the parameters ``constants`` names bound?"""
    kind = type(node)
    if kind is cst.UnaryOperation and type(node.operator) is cst.Not:
        inner = truth(node.expression, constants)
        return None if inner is None else not inner
    if kind is cst.BooleanOperation:
        left, right = truth(node.left, constants), truth(node.right, constants)
        decisive = type(node.operator) is cst.Or  # ``x or True`` is true, ``x and False`` false
        if left is decisive or right is decisive:
            return decisive
        return None if left is None or right is None else not decisive
    if kind is cst.Comparison:
        left = _value(node.left, constants)
        for link in node.comparisons:
            right = _value(link.comparator, constants)
            compare = _COMPARE.get(type(link.operator))
            if left is NOT_CONSTANT or right is NOT_CONSTANT or compare is None:
                return None
            if (left is NOT_NONE or right is NOT_NONE) and not (
                    compare in (operator.is_, operator.is_not) and (left is None or right is None)):
                return None  # all that is known of it is that it is not ``None``
            if compare in (operator.is_, operator.is_not) and not any(
                    left is v or right is v for v in _SINGLETONS):
                return None  # ``is`` on numbers or strings depends on the interpreter
            try:
                if not compare(left, right):
                    return False
            except TypeError:
                return None
            left = right
        return True
    value = _value(node, constants)
    return None if value is NOT_CONSTANT or value is NOT_NONE else bool(value)


def _value(node: cst.BaseExpression, constants: dict[str, object]):
    if type(node) is cst.Name and node.value in constants:
        return constants[node.value]
    return constant(node)


def deciding(constants: dict[str, object], start: Mapping[str, object] | None = None):
    """A ``flow.Walker`` ``decide`` for parameters bound to constants: the truth of an ``if``
    test with them bound (``truth``), or None. With ``start`` (the walk's values of the
    parameters as passed), a name no longer holding its start value is not bound any more (the
    function rebound it); without, the caller has left rebound names out."""

    def decide(test: cst.BaseExpression, env) -> bool | None:
        live = constants if start is None else {n: v for n, v in constants.items() if env.get(n) == start.get(n)}
        return truth(test, live) if live and _reads(test, live) else None

    return decide


def _reads(test: cst.BaseExpression, names) -> bool:
    """Does a test read one of ``names`` where ``truth`` looks (a test of literals alone, ``if
    False:``, is left as the plain walk has it)?"""
    kind = type(test)
    if kind is cst.Name:
        return test.value in names
    if kind is cst.UnaryOperation:
        return _reads(test.expression, names)
    if kind is cst.BooleanOperation:
        return _reads(test.left, names) or _reads(test.right, names)
    if kind is cst.Comparison:
        return _reads(test.left, names) or any(_reads(link.comparator, names) for link in test.comparisons)
    return False


def decides_any(function: cst.FunctionDef, constants: dict[str, object]) -> bool:
    """Do these constants decide any ``if`` test of the function, or a conditional expression's
    (so that a walk under them may differ from the plain one)?"""
    return any(_reads(test, constants) and truth(test, constants) is not None
               for test in _tests(function.body))


def _tests(block: cst.CSTNode) -> Iterator[cst.BaseExpression]:
    """The tests of the ``if`` statements of a block and of the conditional expressions its
    simple statements hold (``_conditional_expressions``)."""
    for statement in _statements(block):
        kind = type(statement)
        if kind is cst.If:
            yield statement.test
        elif kind is cst.SimpleStatementLine:
            for small in statement.body:
                for expression in _conditional_expressions(small):
                    yield expression.test


_VALUED_STATEMENTS = (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Return, cst.Expr)


def _conditional_expressions(small: cst.BaseSmallStatement) -> Iterator[cst.IfExp]:
    """The conditional expressions a simple statement's value is, or holds as a call's argument,
    a tuple's or list's element, or a branch of another: ``q = l2norm(q.contiguous()) if
    use_l2norm else q``, ``return out, (out.cpu() if return_host else None)``,
    ``_k[grid](q.contiguous() if dense else q)``. Deeper ones are not looked for: a walk under a
    flag evaluates them all the same, but no flag is assumed for them alone."""
    if type(small) not in _VALUED_STATEMENTS or small.value is None:
        return
    stack: list[cst.BaseExpression] = [small.value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.IfExp:
            yield node
            stack += (node.body, node.orelse)
        elif kind is cst.Call:
            stack += [arg.value for arg in node.args]
        elif kind is cst.Tuple or kind is cst.List:
            stack += [element.value for element in node.elements]


def excuse_vanished(calls: list, made: set, key: Callable, unless: frozenset) -> list:
    """``calls`` (``Forward`` / ``SyncCall`` records of a function) with ``unless`` added to each
    that the walk under a flag did not make again (``made``: the ``key`` of each it made)."""
    return [call if key(call) in made else replace(call, unless=call.unless | unless) for call in calls]


MAX_FLAGS = 4  # flag parameters a function is walked again for (up to two walks each)


def flag_tests(function: cst.FunctionDef, params: tuple[str, ...], needy: set[str],
               need_sites: set[int], bind_count: Callable[[str], int] | None = None) -> list[tuple[str, object]]:
    """``(flag, truth)`` to walk a function again under, for a parameter an ``if`` tests as a
    truth value: for ``if flag:`` / ``if not flag:``, the truth that takes a branch assigning a
    parameter in ``needy`` (``if use_l2norm: q = l2norm(q)``) or ending the path, and the truth
    that skips a branch holding a statement where a need was recorded (``need_sites``: ``if
    use_triton: _kernel[grid](q)``, ``if return_host: out.cpu()``); both truths of each flag of a
    test joined with ``and`` / ``or`` (``if use_triton and n > 0:``), there only parameters that
    look like flags (``flag_params``). At most ``MAX_FLAGS`` flags.

    With ``bind_count`` (how often the function binds a name), also ``(param, NOT_NONE)`` for a
    parameter an ``if param is None:`` / ``is not None`` test (or a conditional expression's)
    decides the same way: the ``None`` side holding a need site, or the other side rebinding a
    needy parameter or ending the path (``if max_seqlen is not None: return max_seqlen``). Only
    for a parameter the function rebinds nowhere but where it is ``None`` (``if max_seqlen is
    None: max_seqlen = ...``, ``max_seqlen = ... if max_seqlen is None else max_seqlen``)."""
    found: list[tuple[str, object]] = []
    flags: set[str] = set()
    joined: frozenset[str] | None = None  # ``flag_params``, read when a joined test is met

    def want(flag: str, value: object) -> None:
        if (flag, value) not in found and (flag in flags or len(flags) < MAX_FLAGS):
            found.append((flag, value))
            flags.add(flag)

    def want_not_none(name: str) -> None:
        if (bind_count is not None and name in params and (name, NOT_NONE) not in found
                and len(_kept_where_not_none(function, name)) == bind_count(name)):
            want(name, NOT_NONE)

    for statement in _statements(function.body):
        if type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                if id(small) in need_sites or needy.intersection(_assigned_names(small)):
                    for expression in _conditional_expressions(small):
                        if (none_test := _none_test(expression.test)) is not None:
                            want_not_none(none_test[0])
                            continue
                        # Both truths: which branch leaves the need is the walk's to find.
                        joined = flag_params(function) if joined is None else joined
                        for name in _flag_names(expression.test, params, joined):
                            want(name, True)
                            want(name, False)
            continue
        if type(statement) is not cst.If:
            continue
        test, truth_taken = statement.test, True
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, truth_taken = test.expression, False
        branches = inner_blocks(statement)  # the body, and the ``else`` / ``elif`` if any
        if (none_test := _none_test(test)) is not None:
            name, true_if_none = none_test
            body_if_none = true_if_none is truth_taken
            for branch, none_side in zip(branches, (body_if_none, not body_if_none)):
                if _holds_site(branch, need_sites) if none_side else _rebinds_or_leaves(branch, needy):
                    want_not_none(name)
            continue
        if type(test) is cst.Name:
            if test.value not in params:
                continue
            for branch, taken_at in zip(branches, (truth_taken, not truth_taken)):
                if _rebinds_or_leaves(branch, needy):
                    want(test.value, taken_at)
                if _holds_site(branch, need_sites):
                    want(test.value, not taken_at)
            continue
        if type(test) is not cst.BooleanOperation:
            continue
        joined = flag_params(function) if joined is None else joined
        names = _flag_names(test, params, joined)
        if names and any(_rebinds_or_leaves(b, needy) or _holds_site(b, need_sites) for b in branches):
            for name in names:
                want(name, True)
                want(name, False)
    return found


def _none_test(test: cst.BaseExpression) -> tuple[str, bool] | None:
    """``(name, True)`` for a test ``name is None``, ``(name, False)`` for ``name is not None``;
    None for any other test."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1 or type(test.left) is not cst.Name:
        return None
    link = test.comparisons[0]
    if type(link.comparator) is not cst.Name or link.comparator.value != "None":
        return None
    operator_kind = type(link.operator)
    if operator_kind is cst.Is or operator_kind is cst.IsNot:
        return test.left.value, operator_kind is cst.Is
    return None


def _kept_where_not_none(function: cst.FunctionDef, name: str) -> set[int]:
    """The assignments of ``name`` (by ``id``) that leave it as passed wherever it was passed
    as something other than ``None``: those in a branch taken only where it is ``None`` (``if
    name is None: name = ...``), and ``name = ... if name is None else name``."""
    kept: set[int] = set()
    for statement in _statements(function.body):
        if type(statement) is cst.If:
            test, truth_taken = statement.test, True
            if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
                test, truth_taken = test.expression, False
            none_test = _none_test(test)
            if none_test is None or none_test[0] != name:
                continue
            branches = inner_blocks(statement)
            for block in branches[:1] if none_test[1] is truth_taken else branches[1:]:
                for inner in _statements(block):
                    if type(inner) is cst.SimpleStatementLine:
                        kept.update(id(small) for small in inner.body if _assigns_only(small, name))
        elif type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                value = small.value if _assigns_only(small, name) else None
                if type(value) is cst.IfExp and (none_test := _none_test(value.test)) is not None \
                        and none_test[0] == name:
                    kept_side = value.orelse if none_test[1] else value.body
                    if type(kept_side) is cst.Name and kept_side.value == name:
                        kept.add(id(small))
    return kept


def _assigns_only(small: cst.CSTNode, name: str) -> bool:
    """Is a simple statement ``name = ...`` or ``name: T = ...`` (one plain target)?"""
    kind = type(small)
    if kind is cst.Assign:
        return len(small.targets) == 1 and type(small.targets[0].target) is cst.Name \
            and small.targets[0].target.value == name
    return kind is cst.AnnAssign and small.value is not None and type(small.target) is cst.Name \
        and small.target.value == name


# Calls and methods whose result is never ``None`` (or that raise).
_NOT_NONE_BUILTINS = frozenset({"int", "float", "bool", "str", "len", "max", "min", "sum", "abs", "round",
                                "list", "tuple", "dict", "set", "sorted", "range"})
_NOT_NONE_METHODS = frozenset({"item", "tolist", "numel", "size", "dim", "stride", "element_size", "data_ptr"})


def not_none(node: cst.BaseExpression, name_not_none: Callable[[str], bool]) -> bool:
    """Is an expression certainly not ``None``: a literal other than ``None``, arithmetic, a
    comparison, a container, a shape (``x.shape[0]``, ``x.size(0)``, ``x.numel()``), a call of
    ``int`` / ``len`` / ``max`` ..., ``a if c else b`` and ``a or b`` of such values, or a name
    ``name_not_none`` vouches for (a local only ever assigned such values, a parameter
    annotated ``int``)? The linter cannot tell a ``max`` the module rebinds from the builtin:
    precision enough for an argument that only excuses a sync."""
    kind = type(node)
    if kind is cst.Name:
        if node.value in ("True", "False"):
            return True
        return node.value != "None" and name_not_none(node.value)
    if kind in _NEVER_NONE or is_literal(node):
        return True
    if kind is cst.IfExp:
        return not_none(node.body, name_not_none) and not_none(node.orelse, name_not_none)
    if kind is cst.BooleanOperation:
        right = not_none(node.right, name_not_none)  # ``a or b`` is ``b`` where ``a`` is falsy
        return right and (type(node.operator) is cst.Or or not_none(node.left, name_not_none))
    if kind is cst.Call:
        func = node.func
        if type(func) is cst.Name:
            return func.value in _NOT_NONE_BUILTINS
        return type(func) is cst.Attribute and func.attr.value in _NOT_NONE_METHODS
    if kind is cst.Subscript:
        return type(node.value) is cst.Attribute and node.value.attr.value == "shape"
    return kind is cst.Attribute and node.attr.value == "shape"


_NEVER_NONE = (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.List, cst.Tuple, cst.Dict, cst.Set,
               cst.ListComp, cst.SetComp, cst.DictComp, cst.FormattedString, cst.ConcatenatedString)


def _flag_names(test: cst.BaseExpression, params: tuple[str, ...], joined: frozenset[str]) -> list[str]:
    """The parameters a conditional expression's test reads as truth values: ``flag`` or ``not
    flag`` alone, any parameter; joined with ``and`` / ``or``, only those that look like flags
    (``joined``: ``flag_params``), as for an ``if``."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test = test.expression
    if type(test) is cst.Name:
        return [test.value] if test.value in params else []
    if type(test) is cst.BooleanOperation:
        return [name for name in _truth_names(test) if name in joined and name in params]
    return []


def _truth_names(test: cst.BaseExpression) -> list[str]:
    """The names a test reads as truth values through ``not`` / ``and`` / ``or``."""
    kind = type(test)
    if kind is cst.Name:
        return [test.value]
    if kind is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _truth_names(test.expression)
    if kind is cst.BooleanOperation:
        return _truth_names(test.left) + _truth_names(test.right)
    return []


def _holds_site(block: cst.CSTNode, sites: set[int]) -> bool:
    """Does a block hold one of these statements (a compound statement's header, or a small
    statement: what ``Walker`` hands its hook)?"""
    for statement in _statements(block):
        if id(statement) in sites:
            return True
        if type(statement) is cst.SimpleStatementLine and any(id(small) in sites for small in statement.body):
            return True
    return False


def _statements(block: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every statement of a block and of the blocks nested in it (``nodes.block_statements``),
    not those of nested functions or classes, without descending into expressions."""
    for statement in block_statements(block):
        yield statement
        for inner in inner_blocks(statement):
            yield from _statements(inner)


def _rebinds_or_leaves(block: cst.CSTNode, names: set[str]) -> bool:
    """Does a block assign one of ``names`` (``x = ...``, ``x, y = ...``, ``x: T = ...``,
    ``x += ...``) or hold a ``return`` / ``raise`` (what follows may then not see the name as
    it was)?"""
    for statement in _statements(block):
        for small in statement.body if type(statement) is cst.SimpleStatementLine else (statement,):
            kind = type(small)
            if kind is cst.Return or kind is cst.Raise:
                return True
            if names.intersection(_assigned_names(small)):
                return True
    return False


def _assigned_names(small: cst.CSTNode) -> list[str]:
    """The plain names a simple statement assigns: ``x = ...``, ``x, y = ...``, ``x: T = ...``,
    ``x += ...``."""
    kind = type(small)
    if kind is cst.Assign:
        targets = [target.target for target in small.targets]
    elif kind is cst.AnnAssign or kind is cst.AugAssign:
        targets = [small.target]
    else:
        return []
    found = []
    for target in targets:
        elements = [e.value for e in target.elements] if type(target) in (cst.Tuple, cst.List) else [target]
        found += [element.value for element in elements if type(element) is cst.Name]
    return found


def flag_params(node: cst.FunctionDef) -> frozenset[str]:
    """The parameters that look like flags: annotated ``bool`` or defaulting to ``True`` /
    ``False``. Only these are handed on as flags through a wrapper (``call_flags``)."""
    params = node.params
    return frozenset(
        param.name.value for param in named_params(params)
        if (type(param.default) is cst.Name and param.default.value in ("True", "False"))
        or (param.annotation is not None and type(param.annotation.annotation) is cst.Name
            and param.annotation.annotation.value == "bool")
    )


def none_params(node: cst.FunctionDef) -> frozenset[str]:
    """The parameters that default to ``None``: a wrapper hands them on to a callee that syncs
    only where one is ``None`` (``if max_seqlen is None: ...``), and its own callers decide
    (``call_flags`` records them as handed, as it does ``flag_params``)."""
    params = node.params
    return frozenset(
        param.name.value for param in named_params(params)
        if type(param.default) is cst.Name and param.default.value == "None"
    )


def flag_defaults(node: cst.FunctionDef) -> dict[str, bool]:
    """The parameters that default to a literal ``True`` or ``False``."""
    params = node.params
    return {
        param.name.value: param.default.value == "True"
        for param in named_params(params)
        if type(param.default) is cst.Name and param.default.value in ("True", "False")
    }
