"""Contiguity sinks: where a tensor must be contiguous, and what reaches those places.

A sink is an argument that is read as if it were contiguous:
- an argument of a Triton launch ``kernel[grid](...)`` whose parameter the kernel reads as
  ``ptr + offset`` (``tl.load`` / ``tl.store``), unless the launch also passes the tensor's strides
  (``x.stride(0)`` among the arguments; for a local that is a parameter, ``ptr = x``, the
  parameter's);
- an argument of a custom op ``torch.ops.<ns>.<op>(...)`` (also through a module-level alias:
  ``_C = torch.ops._C``, ``_C.op(...)``), or of a function named in the
  ``contiguous-sinks`` option; never one of a callee named in ``strided-sinks`` (an op that takes
  any strides, such as a GEMM that wants its weight column-major), which is not looked up either;
- a parameter of a Python function that checks ``p.is_contiguous()`` (assert, or if-raise), or
  passes it on unchanged to a sink;
- the receiver of a ``.data_ptr()`` handed to a call.

A weaker sink needs only a unit stride in the last dim (a column-range slice ``x[:, :n]`` passes,
a transpose does not): a parameter checked with ``p.stride(-1) == 1``, the receiver of
``.view(dtype)`` (none at all where the receiver's dtype is known to have the target's element
size: ``fp8.view(torch.uint8)`` reinterprets each element in place, whatever the strides), and a
parameter checked with ``p.is_contiguous() or p.stride(-1) == 1`` (either check passes it); the
summary keeps those apart (``needs_unit_stride``), and a call into such a
function is reported only for an argument whose last dim is not known to keep stride 1
(``Layout.inner_unit`` False: a transpose, a column select, an expand that may expand it).

Function-level facts go into ``ctx.summary`` (``needs_contiguous``, ``needs_unit_stride`` and
``forwards``) so that the project can judge a call in one file into a kernel wrapper in another;
every call that hands a suspicious value to a function is kept as a ``SinkUse`` with its callee,
and the rules turn those into findings conditional on the callee's closed summary.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass, field

import libcst as cst

from sync_lint.analysis.context import FileContext
from sync_lint.analysis.device import string_value
from sync_lint.analysis.dtypes import VIEWED_FROM_BYTES, element_size
from sync_lint.analysis.flags import (
    call_arguments,
    call_flags,
    deciding,
    excuse_vanished,
    flag_defaults,
    flag_params,
    flag_tests,
)
from sync_lint.analysis.flow import Walker, decided_branch, target_key
from sync_lint.analysis.functions import FunctionInfo
from sync_lint.analysis.layout import (
    FRESH,
    PERMUTING_ATTRIBUTES,
    SCALAR,
    UNKNOWN,
    VIEW_METHODS,
    VIEWS,
    Layout,
    LayoutDomain,
    as_passed,
    class_attributes,
    code_of,
    factors,
    root_name,
)  # fmt: skip
from sync_lint.analysis.names import dotted
from sync_lint.analysis.nodes import children, named_params, one_line, positional_params
from sync_lint.analysis.python_ops import PythonOps
from sync_lint.analysis.summaries import ArgKey, CallFlags, Forward, FunctionSummary
from sync_lint.analysis.triton_names import is_triton_decorator
from sync_lint.config import is_contiguous_input_decorator, is_strided_sink
from sync_lint.patterns import definition_of
from sync_lint.pipeline.profile import span

_POINTER_CALLS = {"load": "read", "store": "written", "atomic_add": "updated", "atomic_max": "updated",
                  "atomic_min": "updated", "atomic_cas": "updated", "atomic_xchg": "updated",
                  "atomic_and": "updated", "atomic_or": "updated", "atomic_xor": "updated"}
_BLOCK_POINTERS = {"make_block_ptr", "make_tensor_descriptor", "load", "tensor_descriptor"}
# Callees that never need contiguity (torch itself handles any strides); not worth a pending call.
_PLAIN_PREFIXES = ("torch.", "triton.", "numpy.", "math.", "builtins.", "typing.", "functools.", "itertools.")
_BUILTINS = frozenset(dir(__import__("builtins")))
# ``torch.ops`` namespaces of PyTorch's own operators, which handle any strides.
_STRIDED_OP_NAMESPACES = frozenset({
    "aten", "prims", "higher_order", "inductor", "profiler", "rngprims", "debugprims", "c10d_functional",
    "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "quantized_decomposed", "_quantized",
})  # fmt: skip


@dataclass(frozen=True)
class SinkUse:
    """A value of interest handed to a place that may need it contiguous."""

    function: FunctionInfo
    call: cst.Call  # the launch / call
    arg: cst.BaseExpression  # the argument expression (an ``IfExp`` branch when split)
    layout: Layout
    callee: str | None  # dotted name: the finding depends on its summary (None: a local sink)
    key: ArgKey | None  # the callee's argument
    sink: str  # "the custom op `torch.ops._C.foo`" / "`fused_kda_chunk`"
    reason: str  # why the local sink needs it, for summaries ("passed to the custom op `...`")
    stride_aware: bool = False  # the call also receives this argument's strides
    # The call's arguments that are views (``PendingCall.arg_views``).
    arg_views: tuple[tuple[ArgKey, str], ...] = ()
    flags: CallFlags = ()  # the call's arguments that may be flags (``PendingCall.flags``)
    note: str = ""  # for a local sink: what it does with a strided tensor (for the message)


@dataclass(frozen=True)
class _HelperCall:
    """A kernel's call of a jit helper that hands on its pointer parameter ``param`` as ``key``;
    ``arguments``: each argument key with the kernel parameters its value is built from."""

    param: str
    helper: str
    key: ArgKey
    arguments: list[tuple[ArgKey, set[str]]]


@dataclass
class _KernelAccesses:
    """How a kernel steps through its pointer parameters: the parameters each direct load or
    store's offset is built from, and its jit-helper calls (``ContiguityAnalysis._pointer_steps``)."""

    summary: FunctionSummary | None = None
    direct: dict[str, list[frozenset[str]]] = field(default_factory=dict)
    through_helpers: list[_HelperCall] = field(default_factory=list)
    # For each direct load or store's offset: the integer constants it multiplies by (``_steps``)
    steps: dict[str, list[frozenset[int]]] = field(default_factory=dict)


def _built_from(node: cst.CSTNode, built_from: dict[str, set[str]], names) -> set[str]:
    """The parameters an expression of a kernel is built from (``built_from``: name -> its
    parameters), through any operator; attribute and keyword names are not variables. A value
    loaded from memory is data, not built from the address it is loaded at: an index read
    through ``positions_ptr + i * positions_stride`` steps through another pointer by itself."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is cst.Name:
            found |= built_from.get(current.value, set())
        elif kind is cst.Attribute or kind is cst.Arg:  # not ``.attr`` nor ``keyword=``
            stack.append(current.value)
        elif kind is cst.Call:
            name = names.resolve(current.func) or ""
            if not (name.startswith("triton.language.") and name.rsplit(".", 1)[-1] in _POINTER_CALLS):
                stack += children(current)
        elif kind not in _NESTED_SCOPES:
            stack += children(current)
    return found


class LineFinder:
    """Line numbers without libcst's position metadata (which costs about two parses).

    An expression's line is where its text first occurs after the start of the function it
    belongs to: exact for the origin lines quoted in messages in practice, and only needed for
    files with a finding or a summary.
    """

    def __init__(self, ctx: FileContext) -> None:
        self.text = ctx.source.text
        self.module = ctx.module

    def def_offsets(self, functions: list[FunctionInfo]) -> dict[int, int]:
        offsets: dict[int, int] = {}
        cursor = 0
        for info in functions:
            match = definition_of(info.name).search(self.text, cursor)
            if match is not None:
                cursor = match.start()
                offsets[id(info.node)] = cursor
        return offsets

    def line(self, node: cst.CSTNode | None, scope_offset: int = 0) -> int:
        if node is None:
            return 0
        if isinstance(node, cst.Call) and isinstance(node.func, (cst.Name, cst.Attribute, cst.Subscript)):
            node = node.func  # enough to find a call, and cheaper to render
        code = self.module.code_for_node(node).strip().splitlines()
        needle = code[0] if code else ""
        at = self.text.find(needle, scope_offset) if needle else -1
        if at < 0:
            at = self.text.find(needle) if needle else -1
        return self.text.count("\n", 0, max(at, 0)) + 1


def is_triton_kernel(info: FunctionInfo) -> bool:
    return any(is_triton_decorator(d) for d in info.decorators)


def split_branches(node: cst.BaseExpression, domain: LayoutDomain, env) -> list[tuple[cst.BaseExpression, dict]]:
    """``None if x is None else x.to(t)``: judge (and fix) each branch on its own, each with the
    environment to evaluate it in: what the test tells on that branch (``x if x.is_contiguous()
    else x.contiguous()``: ``LayoutDomain.branch_envs``). Of a test the walk's oracle decides
    (``flow.decided_branch``), only the branch taken."""
    if not isinstance(node, cst.IfExp):
        return [(node, env)]
    branch = decided_branch(node, domain.decide, env)
    if branch is not None:
        return split_branches(branch, domain, env)
    then_env, else_env = domain.branch_envs(node.test, env)
    return split_branches(node.body, domain, then_env) + split_branches(node.orelse, domain, else_env)


_NESTED_SCOPES = (cst.Lambda, cst.FunctionDef, cst.ClassDef)


def _calls_in(node: cst.CSTNode) -> Iterator[cst.Call]:
    """Calls in an expression tree, outer first; lambdas and nested scopes are skipped."""
    stack = [node]
    while stack:
        current = stack.pop()
        kind = type(current)  # not isinstance: libcst's classes are ABCs, slow to test (``analysis.nodes``)
        if kind in _NESTED_SCOPES:
            continue
        if kind is cst.Call:
            yield current
        stack += reversed(children(current))


def _tests_taking(part: cst.CSTNode, call: cst.Call) -> list[cst.BaseExpression]:
    """The tests of the conditional expressions in ``part`` that evaluate ``call`` only when true
    (``call`` is in their ``body``)."""
    stack: list[tuple[cst.CSTNode, tuple[cst.BaseExpression, ...]]] = [(part, ())]
    while stack:
        node, tests = stack.pop()
        if node is call:
            return list(tests)
        kind = type(node)
        if kind in _NESTED_SCOPES:
            continue
        if kind is cst.IfExp:
            stack += [(node.test, tests), (node.body, (*tests, node.test)), (node.orelse, tests)]
            continue
        stack += [(child, tests) for child in children(node)]
    return []


def _sizes_guarded(test: cst.BaseExpression, receiver: cst.BaseExpression, domain: LayoutDomain) -> set[int]:
    """The element sizes ``receiver`` may have where ``test`` is true, as far as the test says:
    ``r.element_size() == 1``, ``r.itemsize == 2``, ``r.dtype.itemsize == 1``, ``r.dtype ==
    torch.float8_e4m3fn`` (or ``is``), ``r.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)``,
    or them joined by ``and`` (both hold). Empty: the test says nothing about it."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        one, other = _sizes_guarded(test.left, receiver, domain), _sizes_guarded(test.right, receiver, domain)
        return one & other if one and other else one or other
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return set()
    left, operator, right = test.left, test.comparisons[0].operator, test.comparisons[0].comparator
    if isinstance(operator, cst.In):
        if not _is_dtype_of(left, receiver) or not isinstance(right, (cst.Tuple, cst.List, cst.Set)):
            return set()
        sizes = {element_size(domain.dtype_of(element.value) or "") for element in right.elements}
        return {size for size in sizes if size is not None} if None not in sizes else set()
    if not isinstance(operator, (cst.Equal, cst.Is)):
        return set()
    for one, other in ((left, right), (right, left)):
        if _is_size_of(one, receiver) and isinstance(other, cst.Integer):
            return {int(other.value, 0)}
        dtype = domain.dtype_of(other) if _is_dtype_of(one, receiver) else None
        size = element_size(dtype) if dtype is not None else None
        if size is not None:
            return {size}
    return set()


_POSITIVE = {cst.NotEqual: cst.Equal, cst.IsNot: cst.Is, cst.NotIn: cst.In}


def _sizes_refuted(test: cst.BaseExpression, receiver: cst.BaseExpression, domain: LayoutDomain) -> set[int]:
    """The element sizes ``receiver`` may have where ``test`` is false (``_sizes_guarded`` of its
    negation): ``r.element_size() != 1``, ``r.dtype not in (...)``, ``not <test>``, or them joined
    by ``or`` (both are false)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        one, other = _sizes_refuted(test.left, receiver, domain), _sizes_refuted(test.right, receiver, domain)
        return one & other if one and other else one or other
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _sizes_guarded(test.expression, receiver, domain)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        positive = _POSITIVE.get(type(test.comparisons[0].operator))
        if positive is not None:
            flipped = test.comparisons[0].with_changes(operator=positive())
            return _sizes_guarded(test.with_changes(comparisons=[flipped]), receiver, domain)
    return set()


def _is_dtype_of(node: cst.BaseExpression, receiver: cst.BaseExpression) -> bool:
    """``r.dtype`` for the receiver ``r``."""
    return isinstance(node, cst.Attribute) and node.attr.value == "dtype" and node.value.deep_equals(receiver)


def _is_size_of(node: cst.BaseExpression, receiver: cst.BaseExpression) -> bool:
    """``r.element_size()``, ``r.itemsize`` or ``r.dtype.itemsize`` for the receiver ``r``."""
    if isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute):
        return node.func.attr.value == "element_size" and node.func.value.deep_equals(receiver)
    if isinstance(node, cst.Attribute) and node.attr.value == "itemsize":
        return node.value.deep_equals(receiver) or _is_dtype_of(node.value, receiver)
    return False


def _header_parts(statement: cst.CSTNode) -> list[cst.CSTNode]:
    """The expressions of one statement that the walker's hook may inspect (not nested bodies)."""
    if isinstance(statement, cst.BaseSmallStatement):
        return [statement]
    if isinstance(statement, (cst.If, cst.While)):
        return [statement.test]
    if isinstance(statement, cst.For):
        return [statement.iter]
    if isinstance(statement, cst.With):
        return [item.item for item in statement.items]
    if isinstance(statement, cst.ExceptHandler):
        return [statement.type] if statement.type is not None else []
    if isinstance(statement, cst.Match):
        return [statement.subject]
    return []


def _arg_views(module: cst.Module, call: cst.Call, layout_of) -> tuple[tuple[ArgKey, str], ...]:
    """Each argument of ``call`` that is a view of its base, with the view as written after the
    base (``k.permute(1, 0, 2)`` -> ``"permute(1, 0, 2)"``), a subscript by what it does to the
    strides (``x[:, :n]`` -> ``"[:, :]"``): equal views of tensors of one shape have equal
    strides. A name stands for the view it was bound to (``layout_of``: its ``Layout``); one
    bound to no view is itself (``"=k"``): handed as two arguments, it has their one layout."""
    found = []
    for arg, key in call_arguments(call):
        if key is None:
            continue
        value = arg.value
        if type(value) is cst.Name:
            layout = layout_of(value)
            if layout.kind not in VIEWS or layout.origin is None:
                found.append((key, "=" + value.value))
                continue
            value = layout.origin
        view = _view_written(module, value)
        if view is not None:
            found.append((key, view))
    return tuple(found)


def _view_written(module: cst.Module, value: cst.CSTNode) -> str | None:
    if type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in VIEW_METHODS:
        written = (("" if a.keyword is None else a.keyword.value + "=") + one_line(module, a.value) for a in value.args)
        return value.func.attr.value + "(" + ", ".join(written) + ")"
    if type(value) is cst.Attribute and value.attr.value in PERMUTING_ATTRIBUTES:
        return value.attr.value
    if type(value) is cst.Subscript:
        return "[" + ", ".join(_stride_effect(module, element.slice) for element in value.slice) + "]"
    return None


def _stride_effect(module: cst.Module, part: cst.BaseSlice) -> str:
    """What one subscript element does to the strides: an index drops its dim, a range keeps
    the dim's stride whatever its bounds (``x[:, :64]`` and ``x[:, 64:]`` step alike), a step
    multiplies it. ``None`` and ``...`` add or span dims."""
    if type(part) is cst.Slice:
        return ":" if part.step is None else "::" + one_line(module, part.step)
    value = part.value if type(part) is cst.Index else None
    if type(value) is cst.Name and value.value == "None" or type(value) is cst.Ellipsis:
        return one_line(module, value)
    return "i"


def _recorded(functions: list[FunctionInfo], module: cst.Module, skipped: frozenset) -> list[FunctionInfo]:
    """``functions`` less those of the units ``skipped`` names (``FileContext.not_at_sinks``): a
    top-level ``def`` or a method of a top-level class, with the functions nested in it, which
    ``module_functions`` lists right after it (their qualified names extend its name)."""
    if not skipped:
        return functions
    tops = set()
    for statement in module.body:
        if type(statement) is cst.FunctionDef and (None, statement.name.value) in skipped:
            tops.add(id(statement))
        elif type(statement) is cst.ClassDef and type(statement.body) is cst.IndentedBlock:
            tops.update(
                id(member) for member in statement.body.body
                if type(member) is cst.FunctionDef and (statement.name.value, member.name.value) in skipped
            )  # fmt: skip
    kept, inside = [], None
    for info in functions:
        if inside is not None and info.qualname.startswith(inside):
            continue
        inside = None
        if id(info.node) in tops:
            inside = info.qualname + "."
            continue
        kept.append(info)
    return kept


class ContiguityAnalysis:
    """Sink uses and function summaries of one file (``ctx.get(ContiguityAnalysis)``)."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.names = ctx.names
        self.lines = LineFinder(ctx)
        self.uses: list[SinkUse] = []
        self.functions = ctx.functions()
        self._offsets = self.lines.def_offsets(self.functions)
        self._configured = tuple(ctx.settings["contiguous-sinks"])
        self.module_level = self._module_level_names()
        kernels = [info for info in self.functions if is_triton_kernel(info)]
        accesses = [self._kernel_summary(info) for info in kernels]
        self._pointer_steps(accesses)
        plain = [info for info in self.functions if not is_triton_kernel(info)]
        attributes = class_attributes(ctx, plain, self._domain)  # the state every method sets counts
        for info in _recorded(plain, ctx.module, ctx.not_at_sinks):
            self._function(info, attributes.env_for(info))

    # -- set-up -----------------------------------------------------------------------------
    def _module_level_names(self) -> set[str]:
        found = set(self.names.imports)
        for statement in self.ctx.module.body:
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                found.add(statement.name.value)
        return found

    def offset(self, info: FunctionInfo) -> int:
        return self._offsets.get(id(info.node), 0)

    def _domain(self, info: FunctionInfo) -> LayoutDomain:
        int_params = frozenset(
            p.name.value for p in named_params(info.node.params)
            if p.annotation is not None and dotted(p.annotation.annotation) == "int"
        )
        return LayoutDomain(self.ctx, int_params)

    def line(self, node: cst.CSTNode, info: FunctionInfo) -> int:
        """A line for a summary (no positions: most files with summaries have no finding)."""
        return self.lines.line(node, self.offset(info))

    def finding_line(self, node: cst.CSTNode | None) -> int:
        """The exact line of a node, for a message of a finding in this file."""
        return self.ctx.positions()[node].start.line if node is not None else 0

    # -- Triton kernels ---------------------------------------------------------------------
    def _kernel_summary(self, info: FunctionInfo) -> _KernelAccesses:
        """The kernel's needs, and how it steps through its pointers (for ``_pointer_steps``)."""
        params = [
            p.name.value for p in positional_params(info.node.params)
            if p.annotation is None or "constexpr" not in (code_of(self.ctx.module, p.annotation.annotation))
        ]  # fmt: skip
        derived: dict[str, set[str]] = {p: {p} for p in params}
        # Every parameter (constexpr ones too) a local's value is built from, through any operator.
        every_param = {p.name.value for p in named_params(info.node.params)}
        built_from: dict[str, set[str]] = {p: {p} for p in every_param}
        assignments: list[tuple[str, cst.BaseExpression]] = []
        calls: list[cst.Call] = []
        for node in _walk_body(info.node):  # ``type() is``: these classes have no subclasses (``analysis.nodes``)
            kind = type(node)
            if kind is cst.Assign:
                for target in node.targets:
                    if type(target.target) is cst.Name:
                        assignments.append((target.target.value, node.value))
            elif (kind is cst.AugAssign or kind is cst.AnnAssign) and type(node.target) is cst.Name and node.value is not None:
                assignments.append((node.target.value, node.value))
            elif kind is cst.Call:
                calls.append(node)
        for _ in range(4):  # pointer arithmetic through local names, to a fixpoint
            changed = False
            for target, value in assignments:
                sources = self._pointer_sources(value, derived)
                if not sources <= derived.setdefault(target, set()):
                    derived[target] |= sources
                    changed = True
                made_of = _built_from(value, built_from, self.names)
                if not made_of <= built_from.setdefault(target, set()):
                    built_from[target] |= made_of
                    changed = True
            if not changed:
                break
        summary = None
        accesses = _KernelAccesses()
        moved = {target for target, _ in assignments}
        loaded: set[str] = set()
        not_read_only: set[str] = set()  # stored through, or handed to another function
        for call in calls:
            name = self.names.resolve(call.func) or ""
            short = name.rsplit(".", 1)[-1]
            if name.startswith("triton.language.") and short in _POINTER_CALLS:
                pointer = self._pointer_argument(call)
                if pointer is None:
                    continue
                # ``tl.load(scale_ptr)``: the parameter as passed (never moved: ``scale_ptr += i``)
                # is the address of the first element, whatever the strides (a stride-0
                # ``scale.expand(n)`` is read right): no need.
                bare = type(pointer) is cst.Name and pointer.value in params and pointer.value not in moved
                offsets = _built_from(pointer, built_from, self.names)
                for param in self._pointer_sources(pointer, derived) & set(params):
                    summary = summary or self.ctx.summary(info)
                    verb = _POINTER_CALLS[short]
                    how = f"{verb} as `ptr + offset`" if not bare else verb
                    if not bare:
                        summary.need_contiguous(param, f"{how} by the Triton kernel `{info.name}`")
                        accesses.direct.setdefault(param, []).append(frozenset(offsets - {param}))
                        accesses.steps.setdefault(param, []).append(_steps(pointer, param))
                    if verb == "read":
                        loaded.add(param)
                    else:
                        not_read_only.add(param)
                        summary.writes_through.setdefault(param, f"{how} by the Triton kernel `{info.name}`")
                continue
            if name.startswith("triton.") and short not in _BLOCK_POINTERS:
                continue
            # A jit helper (or a call not resolved) may store through any pointer it is given, and
            # so may a block pointer or descriptor made from it (its stores are not followed).
            for arg in call.args:
                not_read_only |= self._pointer_sources(arg.value, derived) & set(params)
            if name:
                # A jit helper called with a pointer: its summary decides what the pointer needs.
                arguments = None  # what each argument is built from, once a pointer is handed on
                for arg, key in call_arguments(call):
                    if isinstance(arg.value, cst.Name) and arg.value.value in params and key is not None:
                        summary = summary or self.ctx.summary(info)
                        summary.forwards.append(Forward(arg.value.value, name, key, self.line(call, info)))
                        if arguments is None:
                            arguments = [(k, _built_from(a.value, built_from, self.names))
                                         for a, k in call_arguments(call) if k is not None]  # fmt: skip
                        accesses.through_helpers.append(_HelperCall(arg.value.value, name, key, arguments))
        accesses.summary = summary  # made at the first load or store through a parameter
        if summary is not None:
            for param in loaded - not_read_only:
                summary.read_only_if[param] = ()
        return accesses

    def _pointer_steps(self, kernels: list[_KernelAccesses]) -> None:
        """How each kernel of the file steps through each pointer, for every access through it:
        - ``FunctionSummary.offset_params``: the parameters its offset is built from. An access
          through a jit helper of this file counts with what the kernel passes for the
          parameters the helper's offsets use (``_load_tile(k, head, tokens, head_stride,
          token_stride)``);
        - ``FunctionSummary.row_strides``: the literal strides it steps by, the helper's own.
        An access through a helper elsewhere counts with none. To a fixpoint: the sets only
        grow, as the helpers' do. Kernels defined twice under one name (``if hasattr(tl,
        "gather"): def _lut(...)`` / ``else: def _lut(...)``) share one summary: it gets what
        the accesses of both have in common (judged one at a time, the two would overwrite
        each other's sets for ever)."""
        changed = True
        while changed:
            changed = False
            accesses: dict[tuple[int, str], tuple[FunctionSummary, list, list]] = {}
            for kernel in kernels:
                summary = kernel.summary
                if summary is None:
                    continue
                for param in {*kernel.direct, *(call.param for call in kernel.through_helpers)}:
                    _, offsets, steps = accesses.setdefault((id(summary), param), (summary, [], []))
                    offsets.extend(kernel.direct.get(param, ()))
                    steps.extend(kernel.steps.get(param, ()))
                    for call in kernel.through_helpers:
                        if call.param == param:
                            offsets.append(self._helper_offsets(call, summary))
                            helper = self.ctx.summaries.get(call.helper)
                            steps.append(frozenset() if helper is None or helper is summary else
                                         helper.row_strides.get(helper.param_for(call.key) or "", frozenset()))
            for (_, param), (summary, offsets, steps) in accesses.items():
                for known, found in ((summary.offset_params, frozenset.intersection(*offsets)),
                                     (summary.row_strides, frozenset.intersection(*steps))):
                    if found != known.get(param, frozenset()):
                        known[param] = found
                        changed = True

    def _helper_offsets(self, call: _HelperCall, caller: FunctionSummary) -> frozenset[str]:
        helper = self.ctx.summaries.get(call.helper)
        if helper is None or helper is caller:
            return frozenset()
        read_with = helper.offset_params.get(helper.param_for(call.key) or "", frozenset())
        made_of = set().union(*(params for key, params in call.arguments if helper.param_for(key) in read_with))
        return frozenset(made_of - {call.param})

    @staticmethod
    def _pointer_argument(call: cst.Call) -> cst.BaseExpression | None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "pointer":
                return arg.value
        for arg in call.args:
            if arg.keyword is None and not arg.star:
                return arg.value
        return None

    def _pointer_sources(self, node: cst.BaseExpression, derived: dict[str, set[str]]) -> set[str]:
        """Parameters an address expression is built on, through additive pointer arithmetic."""
        kind = type(node)  # not isinstance: these classes have no subclasses (``analysis.nodes``)
        if kind is cst.Name:
            return set(derived.get(node.value, ()))
        if kind is cst.BinaryOperation:
            if type(node.operator) in (cst.Add, cst.Subtract):
                return self._pointer_sources(node.left, derived) | self._pointer_sources(node.right, derived)
            return set()
        if kind is cst.Subscript:
            return self._pointer_sources(node.value, derived)
        if kind is cst.IfExp:
            return self._pointer_sources(node.body, derived) | self._pointer_sources(node.orelse, derived)
        if kind is cst.Call:
            name = self.names.resolve(node.func) or ""
            if name.rsplit(".", 1)[-1] in _BLOCK_POINTERS:
                return set()  # block pointers carry their strides; loads give values
            sources: set[str] = set()
            if isinstance(node.func, cst.Attribute):  # ``ptr.to(tl.pointer_type(...))``
                sources |= self._pointer_sources(node.func.value, derived)
            for arg in node.args:
                sources |= self._pointer_sources(arg.value, derived)
            return sources
        return set()

    # -- Python functions -------------------------------------------------------------------
    def _function(self, info: FunctionInfo, class_env: dict[str, Layout]) -> None:
        facts = self._walk(info, class_env)
        facts.record_read_only()
        facts.record_returned()
        summary = self.ctx.summaries.get(info.qualname)
        if summary is not None:
            self._flag_conditions(info, class_env, summary, facts.need_sites)

    def _walk(self, info: FunctionInfo, class_env: dict[str, Layout], assume: tuple[str, bool] | None = None,
              scratch: FunctionSummary | None = None) -> _FunctionFacts:
        """Walk one function, recording into its summary and ``uses``; with ``assume`` (a flag
        parameter's truth), into ``scratch`` only, for ``_flag_conditions``."""
        domain = self._domain(info)
        env: dict[str, Layout] = dict(class_env)
        guarded = self._contiguous_inputs(info)
        for param in info.params:
            # A guarded parameter is still the parameter as passed (``as_passed``), but of a
            # known layout: no need of its own is recorded for the callers (``_record_param``).
            kind = FRESH if param in guarded else UNKNOWN
            env[param] = Layout(kind, params=frozenset({param}), source="param")
        facts = _FunctionFacts(self, info, domain, scratch)
        # A flag is assumed while it still holds the parameter as passed (``flags.deciding``).
        decide = deciding({assume[0]: assume[1]}, dict(env)) if assume is not None else None
        walker = Walker(domain, facts.on_statement, decide)
        domain.decide = decide  # and its conditional expressions (``flow.decided_branch``)
        # What asserts and guards say (of strides, element sizes) while the walk is there.
        domain.conditions = walker.conditions
        body = info.node.body
        try:
            if isinstance(body, cst.IndentedBlock):
                walker.walk(body.body, env)
            elif isinstance(body, cst.SimpleStatementSuite):
                walker.walk([cst.SimpleStatementLine(body=body.body)], env)
        finally:
            domain.conditions = ()
        return facts

    def _contiguous_inputs(self, info: FunctionInfo) -> frozenset[str]:
        """The parameters a decorator of ``contiguous-input-decorators`` makes contiguous before
        the function runs (``*args`` and ``**kwargs`` are left unknown: tuples, not tensors)."""
        guarded: set[str] = set()
        named = info.node.params
        every = [param.name.value for param in named_params(named)]
        for decorator, name in zip(info.node.decorators, info.decorators):
            if is_contiguous_input_decorator(self.ctx.settings, name):
                exempt = _exempted_by_guard(decorator.decorator)
                if exempt is not None:
                    guarded.update(param for param in every if param not in exempt)
        return frozenset(guarded)

    def _flag_conditions(self, info: FunctionInfo, class_env: dict[str, Layout], summary: FunctionSummary,
                         need_sites: set[int]) -> None:
        """Needs that arise only where a flag parameter is false (or true): ``if use_l2norm: q =
        l2norm(q.contiguous())`` before ``q`` reaches a kernel, or ``if use_triton:
        _kernel[grid](q)``. For each flag an ``if`` tests around a need (``_flag_tests``), the
        function is walked again assuming each truth; a need or forward of a parameter that walk
        no longer finds is excused where a call binds the flag so
        (``FunctionSummary.needs_unless``, ``Forward.unless``). A function without such a test
        costs one scan of its statements."""
        needy = {*summary.needs_contiguous, *summary.needs_unit_stride, *(f.param for f in summary.forwards)}
        if not needy:
            return
        for flag, truth in flag_tests(info.node, info.params, needy, need_sites):
            scratch = FunctionSummary(info.qualname, info.params, self.ctx.path, positional=info.positional)
            with span("analysis ContiguityAnalysis: walks under a flag"):
                self._walk(info, class_env, (flag, truth), scratch)
            unless = frozenset({(flag, truth)})
            for param in [*summary.needs_contiguous, *summary.needs_unit_stride]:
                if param not in scratch.needs_contiguous and param not in scratch.needs_unit_stride:
                    summary.needs_unless[param] = summary.needs_unless.get(param, frozenset()) | unless
            made = {_forward_key(forward) for forward in scratch.forwards}
            summary.forwards = excuse_vanished(summary.forwards, made, _forward_key, unless)
        summary.flag_defaults.update(flag_defaults(info.node))

    def callee_of(self, call: cst.Call, info: FunctionInfo, env) -> tuple[str | None, str]:
        """(dotted callee for a summary look-up, kind): kind is "launch", "op", "configured",
        "call", "python-op" (a call of the function that implements a custom op:
        ``analysis.python_ops``) or "" (nothing to look up)."""
        callee, kind = self._callee_of(call, info, env)
        if callee is not None and is_strided_sink(self.ctx.settings, callee):
            return None, ""  # ``strided-sinks``: it takes any strides (a column-major GEMM operand)
        return callee, kind

    def _callee_of(self, call: cst.Call, info: FunctionInfo, env) -> tuple[str | None, str]:
        func = call.func
        if isinstance(func, cst.Subscript) and isinstance(func.value, (cst.Name, cst.Attribute)):
            if not self._is_global(func.value, info, env):
                return None, ""
            return self.names.resolve(func.value), "launch"
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return None, ""
        self_name = info.all_params[0] if info.is_method and info.all_params else None
        if (
            self_name is not None and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
            and func.value.value == self_name and info.class_node is not None
        ):  # fmt: skip
            class_qualname = info.qualname.rsplit(".", 1)[0]
            return f"{class_qualname}.{func.attr.value}", "call"
        # A custom op called through a module-level alias (``_C = torch.ops._C``), where no local
        # or parameter hides the alias.
        name = self.names.custom_op(func)
        if name is None or not self._is_global(func, info, env):
            name = self.names.resolve(func)
        if name is None:
            return None, ""
        if name.startswith("torch.ops."):
            if name.split(".")[2:3] and name.split(".")[2] in _STRIDED_OP_NAMESPACES:
                return None, ""
            implementation = self.ctx.get(PythonOps).implementation(name)
            if implementation is not None:
                return implementation, "python-op"  # an op of this file's, in Python: its summary decides
            return name, "op"
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in self._configured):
            return name, "configured"
        if not self._is_global(func, info, env) or name.startswith(_PLAIN_PREFIXES):
            return None, ""
        return name, "call"

    def _is_global(self, node: cst.BaseExpression, info: FunctionInfo, env) -> bool:
        """Does the callee name a module-level function or import, not a local, a parameter or a
        builtin? (Module-level defs may be masked by the unit pre-filter: any name the function
        has not bound, per the walker's environment, counts.)"""
        head = (dotted(node) or "").partition(".")[0]
        if not head or head in env or head in info.all_params:
            return False
        return head not in _BUILTINS or head in self.module_level


def _steps(pointer: cst.BaseExpression, param: str) -> frozenset[int]:
    """The integer constants an address ``param + ...`` multiplies its other terms by
    (``Scales + page * (32 * 260 // 4) + tl.arange(0, 32)``: {2080}); none where ``param`` is
    not itself one of its terms (a cast pointer, a local)."""
    terms: list[cst.BaseExpression] = []
    todo = [pointer]
    while todo:
        node = todo.pop()
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
            todo += [node.left, node.right]
        else:
            terms.append(node)
    if not any(type(term) is cst.Name and term.value == param for term in terms):
        return frozenset()
    found = set()
    for term in terms:
        product = factors(term)  # (constant, the other factors)
        if product is not None and product[1] and product[0] > 1:
            found.add(product[0])
    return frozenset(found)


def _walk_body(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = list(children(node))
    while stack:
        current = stack.pop()
        yield current
        if type(current) not in _NESTED_SCOPES:
            stack += children(current)


# What reads a tensor's metadata, or makes a new tensor, and never writes through the tensor.
_METADATA_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "layout", "itemsize", "nbytes"})
_METADATA_METHODS = frozenset({
    "size", "stride", "dim", "numel", "nelement", "element_size", "is_contiguous", "get_device", "storage_offset",
    "is_floating_point", "new_empty", "new_zeros", "new_ones", "new_full",
})  # fmt: skip
_METADATA_BUILTINS = frozenset({"len", "isinstance", "type"})
_METADATA_FUNCTIONS = frozenset({"torch.empty_like", "torch.zeros_like", "torch.ones_like", "torch.full_like"})
_ASSIGNED = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.Del)


def _name_uses(root: cst.CSTNode, names: set[str]) -> Iterator[tuple[cst.Name, cst.CSTNode, cst.CSTNode | None]]:
    """Each ``Name`` in ``root`` that may be a variable of ``names`` (not an attribute's or a
    keyword's name), with its parent and grandparent. Nested scopes count: a closure may write."""
    stack: list[tuple[cst.CSTNode, cst.CSTNode, cst.CSTNode | None]] = [(child, root, None) for child in children(root)]
    while stack:
        node, parent, grandparent = stack.pop()
        if type(node) is cst.Name:
            if node.value in names and not (
                (type(parent) is cst.Attribute and parent.attr is node) or (type(parent) is cst.Arg and parent.keyword is node)
            ):
                yield node, parent, grandparent
            continue
        stack += [(child, node, parent) for child in children(node)]


def _exempted_by_guard(decorator: cst.BaseExpression) -> frozenset[str] | None:
    """The parameters a contiguity guard leaves as passed: none for ``@guard`` or ``@guard()``,
    those a literal ``no_guard_contiguous=[...]`` names (False: none), and None (every one)
    for ``no_guard_contiguous=True`` or any argument whose meaning is not known."""
    if not isinstance(decorator, cst.Call):
        return frozenset()
    exempt: frozenset[str] = frozenset()
    for arg in decorator.args:
        if arg.keyword is None or arg.keyword.value != "no_guard_contiguous":
            return None
        value = arg.value
        if isinstance(value, cst.Name) and value.value == "False":
            continue
        if not isinstance(value, (cst.List, cst.Tuple, cst.Set)):
            return None
        names = [string_value(element.value) for element in value.elements]
        if None in names or any(isinstance(element, cst.StarredElement) for element in value.elements):
            return None
        exempt |= frozenset(names)
    return exempt


def _forward_key(forward: Forward) -> tuple:
    return forward.param, forward.callee, forward.arg, forward.line


def _interesting(layout: Layout) -> bool:
    """A value some GPU1xx rule may report at a sink."""
    return layout.kind in VIEWS or layout.cast is not None


class _FunctionFacts:
    """The walker hook for one function: records summaries and sink uses."""

    def __init__(self, analysis: ContiguityAnalysis, info: FunctionInfo, domain: LayoutDomain,
                 scratch: FunctionSummary | None = None) -> None:
        self.analysis = analysis
        self.ctx = analysis.ctx
        self.info = info
        self.domain = domain
        # A walk under an assumption (``ContiguityAnalysis._flag_conditions``) records its
        # summary apart and its sink uses nowhere.
        self._scratch = scratch
        self.uses: list[SinkUse] = analysis.uses if scratch is None else []
        # The statements where a need or a forward of a parameter was recorded (by ``id``): an
        # ``if flag:`` whose branch holds one may make it conditional (``_flag_conditions``).
        self.need_sites: set[int] = set()
        self._statement: cst.CSTNode | None = None
        self._flag_params = flag_params(info.node)  # what a call may hand on as a flag (``flags.call_flags``)
        self._seen: set[int] = set()
        # Locals built from ``t.stride(...)`` (``strides = [t.stride(0) * t.element_size()]``):
        # local -> the roots ``t`` whose strides they carry, for a raw ``.data_ptr()`` handed along.
        self._stride_locals: dict[str, frozenset[str]] = {}
        # Parameter -> (id of the ``Name``, callee, argument) where it is handed on as it is to a
        # function whose summary may show it only reads through it (``record_read_only``).
        self._handed: dict[str, list[tuple[int, str, ArgKey]]] = {}

    def summary(self) -> FunctionSummary:
        if self._scratch is not None:
            return self._scratch
        return self.ctx.summary(self.info)

    def _recording(self) -> FunctionSummary:
        """The summary, to record a need or a forward of a parameter at the statement the walk
        is at (``need_sites``)."""
        self.need_sites.add(id(self._statement))
        return self.summary()

    def on_statement(self, statement: cst.CSTNode, env) -> None:
        if id(statement) in self._seen:
            return  # loop bodies are walked twice; the second walk is the one that reports
        self._seen.add(id(statement))
        self._statement = statement
        parts = [(part, list(_calls_in(part))) for part in _header_parts(statement)]
        self._note_stride_local(statement, parts)
        self._checks(statement, env)
        for part, calls in parts:
            for call in calls:
                self._call(call, env, part)

    def record_read_only(self) -> None:
        """After the walk: a parameter handed on (``_handed``) and otherwise used only to read its
        metadata is only read through here if the callees only read through it
        (``FunctionSummary.read_only_if``). Any other use (a view of it, a method, an
        assignment, a custom op) may write through it or let it escape."""
        if not self._handed:
            return
        handed = {node_id for uses in self._handed.values() for node_id, _, _ in uses}
        candidates = set(self._handed)
        for name, parent, grandparent in _name_uses(self.info.node.body, candidates):
            if id(name) not in handed and not self._reads_metadata(parent, grandparent):
                candidates.discard(name.value)
        summary = self.summary()
        for param in candidates:
            summary.read_only_if[param] = tuple((callee, key) for _, callee, key in self._handed[param])

    def record_returned(self) -> None:
        """After the walk: the parameters handed on that a ``return`` may hand back, whole or in
        part (``FunctionSummary.returned``): a callee's writes into one reach this function's
        caller through the result (``return pad(q, out)``, ``return out``)."""
        summary = self.ctx.summaries.get(self.info.qualname)
        if summary is None or not summary.forwards:
            return
        handed = {forward.param for forward in summary.forwards}
        returned = {
            name.value for node in _walk_body(self.info.node) if type(node) is cst.Return and node.value is not None
            for name, _, _ in _name_uses(node, handed)
        }  # fmt: skip
        if returned:
            summary.returned = frozenset(returned)

    def _reads_metadata(self, parent: cst.CSTNode, grandparent: cst.CSTNode | None) -> bool:
        """Does this use of a name only read the tensor's metadata (``p.shape``, ``p.stride(0)``,
        ``p is None``, ``len(p)``), never writing through it nor letting it escape?"""
        kind = type(parent)
        if kind is cst.Attribute:
            if type(grandparent) is cst.Call and grandparent.func is parent:
                return parent.attr.value in _METADATA_METHODS
            return parent.attr.value in _METADATA_ATTRIBUTES and type(grandparent) not in _ASSIGNED
        if kind is cst.Comparison or kind is cst.ComparisonTarget:
            comparison = parent if kind is cst.Comparison else grandparent
            return type(comparison) is cst.Comparison and all(
                type(target.operator) in (cst.Is, cst.IsNot) for target in comparison.comparisons
            )
        if kind is cst.Arg and not parent.star and type(grandparent) is cst.Call:
            written = dotted(grandparent.func)
            if written in _METADATA_BUILTINS:
                return written not in self.analysis.module_level  # not a function of the file's own
            return (self.analysis.names.resolve(grandparent.func) or "") in _METADATA_FUNCTIONS
        return False

    def _note_handed(self, value: cst.BaseExpression, callee: str, key: ArgKey, env) -> None:
        if type(value) is cst.Name and value.value in self.info.params and as_passed(env, value.value):
            self._handed.setdefault(value.value, []).append((id(value), callee, key))

    def _note_stride_local(self, statement: cst.CSTNode, parts: list[tuple[cst.CSTNode, list[cst.Call]]]) -> None:
        """``parts``: the statement's header parts with their calls (``on_statement``). An
        assignment to a name is its own one part, and its target holds no call, so its calls
        are its value's; an annotation may hold some, so an annotated one is walked again."""
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0].target, statement.value
        elif isinstance(statement, cst.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            return
        if not isinstance(target, cst.Name):
            return
        roots = _stride_roots(value) if type(statement) is cst.AnnAssign else _roots_of_strides(parts[0][1])
        if roots:
            self._stride_locals[target.value] = roots
        else:
            self._stride_locals.pop(target.value, None)

    # -- ``assert p.is_contiguous()`` / ``if not p.is_contiguous(): raise`` -------------------
    def _checks(self, statement: cst.CSTNode, env) -> None:
        test, negated = None, False
        if isinstance(statement, cst.Assert):
            test = statement.test
        elif isinstance(statement, cst.If) and _raises(statement.body):
            test, negated = statement.test, True
        elif isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
            name = self.analysis.names.resolve(statement.value.func) or ""
            if name in ("torch._check", "torch._check_value") and statement.value.args:
                test = statement.value.args[0].value
        if test is None:
            return
        for param, (check, unit_stride) in _layout_needs(test, passes=not negated).items():
            layout = env.get(param)
            if layout is None or layout.cast is not None or layout.kind == FRESH:
                continue  # a guarded parameter (``_contiguous_inputs``) passes whatever is handed
            if negated:
                otherwise = "unless its last dim has stride 1" if unit_stride else "otherwise"
                how = f"checked with `{check}` in `{self.info.name}`, which raises {otherwise}"
            else:
                what = "to have stride 1 in its last dim" if unit_stride else "contiguous"
                how = f"asserted {what} in `{self.info.name}` (`assert {check}`)"
            summary = self._recording()
            for name in layout.params:
                if unit_stride:
                    summary.need_unit_stride(name, how)
                else:
                    summary.need_contiguous(name, how)

    # -- calls ------------------------------------------------------------------------------
    def _keeps_element_size(self, receiver: cst.BaseExpression, layout: Layout, target: str, header: cst.CSTNode,
                            call: cst.Call, env) -> bool:
        """Is ``receiver`` known to have the element size of ``target``: by its dtype, by the test
        of a conditional expression that takes ``call`` only then (``t.view(torch.uint8) if
        t.element_size() == 1 else t``), or by the test of an enclosing ``if`` statement, when
        ``receiver`` names the same value as at that test (``if t.dtype == torch.float8_e4m3fn:
        t = t.view(torch.uint8)``)? Unknown: False (the view is a sink)."""
        size = element_size(target)
        if size is None:
            return False
        if layout.dtype is not None:
            return element_size(layout.dtype) == size
        if target in VIEWED_FROM_BYTES:
            return True
        if any(_sizes_guarded(test, receiver, self.domain) == {size} for test in _tests_taking(header, call)):
            return True
        key = target_key(receiver)
        conditions = self.domain.conditions if key is not None else ()
        return any(
            key in before and before[key] is env.get(key)
            and (_sizes_guarded if holds else _sizes_refuted)(test, receiver, self.domain) == {size}
            for test, before, holds in conditions
        )

    def _call(self, call: cst.Call, env, header: cst.CSTNode) -> None:
        analysis = self.analysis
        func = call.func
        # ``t.view(torch.int8)``: the receiver needs a unit inner stride, unless its dtype is known
        # to have the target's element size (``fp8_t.view(torch.uint8)`` works on any strides).
        if isinstance(func, cst.Attribute) and func.attr.value == "view" and len(call.args) == 1:
            target = self.domain.dtype_of(call.args[0].value)
            layout = self.domain.evaluate(func.value, env) if target is not None else None
            if layout is not None and not self._keeps_element_size(func.value, layout, target, header, call, env):
                self._receiver_sink(func.value, call, env, f"`.view({code_of(self.ctx.module, call.args[0].value)})`",
                                    "reinterpreted with `.view(dtype)`, which needs the last dim to have stride 1",
                                    "`.view(dtype)` raises unless the last dim has stride 1",
                                    need=lambda layout: not layout.inner_unit, unit_stride=True, layout=layout)
        callee, kind = analysis.callee_of(call, self.info, env)
        if not kind:
            return
        carried = self._strides_carried(call, env)
        strides = self._strides_passed(carried, env)
        stride_roots = self._stride_roots_bound(carried, env) if strides and kind == "launch" else ()
        arg_views = None  # made for the first use recorded: a signature renders code
        short = callee.rsplit(".", 1)[-1] if callee else ""
        note = ""
        if kind == "op":
            sink, reason = f"the custom op `{callee}`", f"passed to the custom op `{callee}`"
            note = "custom ops check `is_contiguous()` and raise, or read it as dense memory"
        elif kind == "configured":
            sink, reason = f"`{short}`", f"passed to `{callee}`, a configured contiguous sink"
            note = "`contiguous-sinks` names it"
        elif kind == "python-op":
            # Named as the caller wrote it, then the function its summary comes from.
            sink, reason = f"the custom op `{code_of(self.ctx.module, func)}` (in Python: `{{callee}}`)", ""
            kind = "call"
        else:
            sink, reason = "`{callee}`", ""
        local = kind in ("op", "configured")
        flags = () if local else call_flags(call, self._flag_params, lambda name: as_passed(env, name))
        for arg, key in call_arguments(call):
            if arg.star:
                continue
            if not local and callee is not None and key is not None:
                self._note_handed(arg.value, callee, key, env)
            # ``f(t.data_ptr())``: the raw address of ``t`` is handed over.
            for pointer_call in _data_ptr_calls(arg.value):
                receiver = pointer_call.func.value  # type: ignore[union-attr]
                callee_text = code_of(self.ctx.module, func)
                if root_name(receiver) in self._pointer_strides(call, strides):
                    # ``encode(t.data_ptr(), strides)`` with ``strides`` built from ``t.stride()`` (a
                    # TMA descriptor, a BLAS leading dimension): the callee steps by the strides it
                    # is given and reads only the last dim densely.
                    self._receiver_sink(receiver, call, env, f"`{callee_text}` (through `.data_ptr()`)",
                                        f"handed to `{callee_text}` as a raw `.data_ptr()` with its strides, "
                                        "which assumes stride 1 in the last dim",
                                        "a raw address handed with its strides is read with stride 1 in the last dim",
                                        need=lambda layout: not layout.inner_unit, unit_stride=True)
                    continue
                self._receiver_sink(receiver, call, env, f"`{callee_text}` (through `.data_ptr()`)",
                                    f"handed to `{callee_text}` as a raw `.data_ptr()`",
                                    "a raw address is read as dense memory", need=lambda layout: True)
            for part, part_env in split_branches(arg.value, self.domain, env):
                layout = self.domain.evaluate(part, part_env)
                if layout.chosen:
                    continue  # a buffer permuted on purpose for the callee (``Layout.chosen``)
                aware = self._stride_aware(part, layout, strides)
                if not aware:
                    self._record_param(layout, callee, key, kind, reason, call, stride_roots, flags)
                # Stride-aware uses matter only for GPU103's size-1 case (strides read).
                if (not aware and _interesting(layout)) or (aware and kind == "launch" and layout.size1):
                    if arg_views is None:
                        arg_views = () if local else _arg_views(
                            self.ctx.module, call, lambda name: self.domain.evaluate(name, env)
                        )
                    self.uses.append(SinkUse(
                        self.info, call, part, layout, None if local else callee, key, sink, reason,
                        stride_aware=aware, note=note, arg_views=arg_views, flags=flags,
                    ))  # fmt: skip

    def _record_param(self, layout: Layout, callee, key, kind: str, reason: str, call: cst.Call,
                      stride_roots: tuple[tuple[ArgKey, str], ...], flags: CallFlags) -> None:
        if not layout.params or layout.cast is not None or layout.kind != UNKNOWN:
            return
        for param in layout.params:
            if kind in ("op", "configured"):
                self._recording().need_contiguous(param, reason)
            elif callee is not None and key is not None:
                line = self.analysis.line(call, self.info)
                self._recording().forwards.append(Forward(param, callee, key, line, stride_roots, flags=flags))

    def _receiver_sink(self, receiver: cst.BaseExpression, call: cst.Call, env, sink: str, reason: str, note: str,
                       need, unit_stride: bool = False, layout: Layout | None = None) -> None:
        """``unit_stride``: the sink needs only a unit last stride (``need`` says which views fail);
        ``layout``: the receiver's, when the caller has it already."""
        layout = layout if layout is not None else self.domain.evaluate(receiver, env)
        if layout.params and layout.kind == UNKNOWN and layout.cast is None:
            summary = self._recording()
            for param in layout.params:
                if unit_stride:
                    summary.need_unit_stride(param, reason)
                else:
                    summary.need_contiguous(param, reason)
        if _interesting(layout) and (layout.kind not in VIEWS or need(layout)):
            self.uses.append(
                SinkUse(self.info, call, receiver, layout, None, None, sink, reason, note=note)
            )

    def _pointer_strides(self, call: cst.Call, strides: frozenset[str]) -> frozenset[str]:
        """Roots whose strides ``call`` receives, also through a local built from them (for a
        raw ``.data_ptr()``; a launch counts only strides it is handed directly)."""
        carried = [self._stride_locals.get(arg.value.value, frozenset()) for arg in call.args
                   if isinstance(arg.value, cst.Name)]  # fmt: skip
        return strides.union(*carried)

    def _strides_carried(self, call: cst.Call, env) -> list[tuple[ArgKey | None, frozenset[str]]]:
        """Each argument of a call with the roots of the tensors whose strides it carries:
        ``q.stride(0)``, a local holding one (``s0``), ``strides[1]`` of ``strides = q.stride()``,
        a function of this file's result that holds them (``**_strides(q, ...)``:
        ``layout.ReturnedStrides``)."""
        found = []
        for arg, key in call_arguments(call):
            roots = _stride_roots(arg.value)
            kind = type(arg.value)
            if kind is cst.Name or kind is cst.Subscript or (kind is cst.Call and type(arg.value.func) is cst.Name):
                layout = self.domain.evaluate(arg.value, env)
                if layout.kind == SCALAR and layout.stride_of:
                    roots |= {layout.stride_of}
            if roots:
                found.append((key, roots))
        return found

    def _strides_passed(self, carried: list[tuple[ArgKey | None, frozenset[str]]], env) -> frozenset[str]:
        roots = set().union(*(roots for _, roots in carried))
        return frozenset(roots | self._equal_strides(roots, env)) if roots else frozenset()

    @staticmethod
    def _stride_roots_bound(carried: list[tuple[ArgKey | None, frozenset[str]]], env) -> tuple[tuple[ArgKey, str], ...]:
        """The arguments of a launch that carry one tensor's strides, with its root name: the
        name of a parameter only while it is the tensor as passed (not after ``q =
        q.contiguous()``), else "" (another tensor's strides: ``ProjectIndex`` then asks for
        contiguity)."""
        found = []
        for key, roots in carried:
            if key is None or len(roots) != 1:
                continue
            (root,) = roots
            layout = env.get(root)
            unchanged = (layout is not None and layout.kind == UNKNOWN and layout.cast is None
                         and layout.params == frozenset({root}))  # fmt: skip
            found.append((key, root if unchanged else ""))
        return tuple(found)

    def _equal_strides(self, roots: set[str], env) -> set[str]:
        """Tensors whose strides a check where the walk is says equal those of ``roots``
        (``assert q.stride(1) == k.stride(1) == v.stride(1)``, or the code below ``if
        q.stride(1) != k.stride(1): raise``), while none of them is rebound: a launch handed
        ``q.stride(1)`` steps through ``k`` and ``v`` right too."""
        classes = [
            equal for test, before, holds in self.domain.conditions
            if (equal := _stride_equalities(test, holds)) and all(before.get(r) is env.get(r) for r in equal)
        ]  # fmt: skip
        found = set(roots)
        grown = True
        while grown:  # ``a == b`` and ``b == c``, in either order: ``a``'s strides step through ``c``
            grown = False
            for equal in classes:
                if not equal <= found and not equal.isdisjoint(found):
                    found |= equal
                    grown = True
        return found - roots

    @staticmethod
    def _stride_aware(part: cst.BaseExpression, layout: Layout, strides: frozenset[str]) -> bool:
        if not strides:
            return False
        candidates = {root_name(part), layout.base_root}
        if layout.cast is not None:
            candidates.add(root_name(layout.cast.node))
        if candidates & strides:
            return True
        # A local bound to a parameter (``k_scale_ptr = k_scale_cache`` on the path that uses it,
        # None on the other), launched with that parameter's strides: every parameter the value
        # may be must have its strides passed.
        return bool(layout.params) and layout.cast is None and layout.params <= strides


def _stride_equalities(test: cst.BaseExpression, holds: bool) -> set[str]:
    """The roots of the stride reads a test says are all equal where it has the truth ``holds``:
    ``a.stride(1) == b.stride(1) == c.stride(1)`` true, ``a.stride(1) != b.stride(1)`` false
    (empty for any other test)."""
    if type(test) is not cst.Comparison:
        return set()
    operators = {type(target.operator) for target in test.comparisons}
    if not (operators == {cst.Equal} and holds or operators == {cst.NotEqual} and not holds and len(test.comparisons) == 1):
        return set()
    roots = set()
    for operand in (test.left, *(target.comparator for target in test.comparisons)):
        call = operand.value if type(operand) is cst.Subscript else operand  # ``q.stride()[2:]``
        if not (type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value == "stride"):
            continue  # a number (``== (K, 1)``) says nothing of another tensor
        root = root_name(call.func.value)
        if root:
            roots.add(root)
    return roots if len(roots) > 1 else set()


def _stride_roots(node: cst.CSTNode) -> frozenset[str]:
    """Roots ``t`` of the ``t.stride(...)`` calls in an expression."""
    return _roots_of_strides(_calls_in(node))


def _roots_of_strides(calls) -> frozenset[str]:
    """Roots ``t`` of the ``t.stride(...)`` calls among ``calls``."""
    roots = set()
    for inner in calls:
        if isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "stride":
            root = root_name(inner.func.value)
            if root:
                roots.add(root)
    return frozenset(roots)


def _raises(body: cst.BaseSuite) -> bool:
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    for statement in statements:
        if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            if any(isinstance(small, cst.Raise) for small in statement.body):
                return True
    return False


def _layout_needs(test: cst.BaseExpression, passes: bool) -> dict[str, tuple[str, bool]]:
    """What ``test`` holding (``passes``; False: ``test`` failing, for ``if test: raise``) requires
    of each tensor name it checks: (the check's text, only a unit last stride). The checks are
    ``name.is_contiguous()`` (contiguity) and ``name.stride(-1) == 1`` (a unit last stride).

    Where both sides of a boolean operation must hold (``a and b`` holding, ``a or b`` failing), a
    name checked on both sides needs the stronger need; where either side may hold, it needs only
    the weaker one (``x.is_contiguous() or x.stride(-1) == 1`` passes a column-range slice). A name
    checked on one side only keeps that side's need: the other side is no layout check
    (``assert x is None or x.is_contiguous()``: a tensor passed is never None).
    """
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _layout_needs(test.expression, not passes)
    if isinstance(test, cst.BooleanOperation):
        left, right = _layout_needs(test.left, passes), _layout_needs(test.right, passes)
        both_hold = isinstance(test.operator, cst.And) == passes
        needs = {**left, **right}
        for name in left.keys() & right.keys():
            # Unit stride only: on both sides when both must hold, on either side otherwise.
            unit = left[name][1] and right[name][1] if both_hold else left[name][1] or right[name][1]
            needs[name] = (code_of(cst.Module([]), test.with_changes(lpar=[], rpar=[])), unit)
        return needs
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and test.func.attr.value == "is_contiguous":
        name = test.func.value
        if passes and isinstance(name, cst.Name) and not test.args:  # a failing ``is_contiguous()`` needs nothing
            return {name.value: (f"{name.value}.is_contiguous()", False)}
    elif isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        left, comparison = test.left, test.comparisons[0]
        wanted = cst.Equal if passes else cst.NotEqual
        if (
            isinstance(comparison.operator, wanted) and isinstance(left, cst.Call)
            and isinstance(left.func, cst.Attribute) and left.func.attr.value == "stride"
            and isinstance(left.func.value, cst.Name) and len(left.args) == 1
            and _literal(left.args[0].value) == -1 and _literal(comparison.comparator) == 1
        ):  # fmt: skip
            op = "==" if passes else "!="
            return {left.func.value.value: (f"{left.func.value.value}.stride(-1) {op} 1", True)}
    return {}


def _literal(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
        return -int(node.expression.value)
    return None


def _data_ptr_calls(node: cst.BaseExpression) -> Iterator[cst.Call]:
    """``t.data_ptr()`` used as (part of) an argument value: ``f(t.data_ptr())``, ``f(t.data_ptr() + o)``."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "data_ptr":
        yield node
    elif isinstance(node, cst.BinaryOperation):
        yield from _data_ptr_calls(node.left)
        yield from _data_ptr_calls(node.right)


# -- what each GPU1xx rule reports --------------------------------------------------------------

def cast_relied_on(layout: Layout) -> bool:
    """GPU101: a cast that may be a no-op stands between a maybe-non-contiguous source and a sink."""
    if layout.cast is None:
        return False
    return layout.kind in VIEWS or (layout.kind == UNKNOWN and layout.source in ("param", "attr"))


def plain_view(layout: Layout) -> bool:
    """GPU102: a known view, with neither a cast nor a `.contiguous()` in its history."""
    return layout.kind in VIEWS and layout.cast is None and layout.refixed is None


def view_after_fix(layout: Layout) -> bool:
    """GPU103: a view taken of a `.contiguous()` result."""
    return layout.kind in VIEWS and layout.cast is None and layout.refixed is not None


def size1_strides_read(use: SinkUse) -> bool:
    """GPU103: a view contiguous only through a size-1 dim whose strides the launch reads."""
    return use.stride_aware and use.layout.size1 and use.layout.kind not in VIEWS


def reported(use: SinkUse, verdict) -> bool:
    return not use.stride_aware and verdict(use.layout)


def callee_need(use: SinkUse) -> str:
    """The pending-call kind for a use whose verdict is the callee's summary: a unit-last-stride
    need of the callee counts only for an argument whose last dim is not known to keep stride 1."""
    return "contiguity" if use.layout.inner_unit else "unit-stride"


def because(use: SinkUse) -> str:
    """The clause saying why the sink needs it; ``{reason}`` is filled from the callee's summary."""
    return " (the argument is {reason})" if use.callee is not None else f" ({use.note})"


def contains(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    stack = [root]
    while stack:
        current = stack.pop()
        if current is node:
            return True
        stack.extend(children(current))
    return False



def fix_target(use: SinkUse) -> cst.BaseExpression | None:
    """Where `.contiguous()` goes: the sink argument, unless that may be None (``idx = None if
    x is None else x.to(torch.int32)``; then the cast or view itself, if it is in this function)."""
    layout = use.layout
    if not layout.maybe_none:
        return use.arg
    candidate = layout.cast.node if layout.cast is not None else layout.origin
    if isinstance(candidate, cst.BaseExpression) and contains(use.function.node, candidate):
        return candidate
    return None


def append_contiguous(node: cst.BaseExpression):
    """A fix plan that appends `.contiguous()` to ``node``: unsafe, as the sink may write through
    it (``project.ProjectIndex.resolve`` makes it safe where the callee only reads)."""
    from sync_lint.fixes import make_fix

    def plan(editor):
        return make_fix("Add `.contiguous()`", "unsafe", editor.insert_after(node, ".contiguous()"))

    return plan
