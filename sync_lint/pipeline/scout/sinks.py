"""Where ``analysis.sinks`` may make a finding in a file on its own (``SinkScout``)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from sync_lint.analysis.layout_words import (
    ELEMENTWISE_METHODS,
    FRESH_METHODS,
    LAYOUT_CARRYING_METHODS,
    LAYOUT_SUSPECT_METHODS,
    NON_TENSOR_ATTRIBUTES,
    PERMUTING_ATTRIBUTES,
    VIEW_MAKING,
)
from sync_lint.config import Settings, is_strided_sink
from sync_lint.pipeline.scout.flows import ParameterFlows, suspects
from sync_lint.pipeline.scout.syntax import (
    FUNCTIONS,
    FileNames,
    ast_dotted,
    callee_name,
    decorator_callee,
    first_line,
    positional_names,
)


class SinkScout:
    """Over-approximates where ``analysis.sinks`` can make a finding without other files: where a
    sink is handed an expression whose layout may be suspect.

    The sinks: a custom op (``torch.ops``, through imports), a call of a function or class of
    this file that may carry a summary (a launch of its kernel, a call of its checked wrapper),
    and the receiver of ``.view(dtype)`` or of ``.data_ptr()``.

    A suspect expression holds a view or a cast (``analysis.layout_words``; an index that may
    leave gaps, ``_slices``), a name its function binds anywhere to a suspect expression, or an
    attribute that some assignment of the file gives one. These are the only ways a layout the
    rules report reaches a sink: the layout domain follows locals and ``self.`` attributes, and
    reads a parameter, a global and any other call as of unknown layout, which it never reports
    unless a cast of it is there."""

    def __init__(self, names: FileNames, tree: ast.Module, lines: list[str], settings: Settings) -> None:
        self.names = names
        self.tree = tree
        self.lines = lines
        self.settings = settings
        # One object per distinct argument description (``_handed_calls``): a run of many files
        # holds every file's outline at once.
        self._shared: dict[tuple, tuple] = {}
        self._never_a_view = _NeverAView(names)
        # For ``.view(dtype)``, which needs only a unit last stride: a ``.contiguous()`` result has
        # one, size-1 dims or not.
        self._never_without_unit_stride = _NeverAView(names, contiguous_too=True)
        self._configured_names = _configured_last_names(settings["contiguous-sinks"])

    def found(self) -> bool:
        if self._configured_names is None:
            return True  # a configured glob any callee may match: left to the analysis
        needs = self._needs()
        scopes, attributes = suspects(self.tree, _makes_view, self._never_a_view, names=self.names, source_kinds=_VIEW_KINDS)
        # ``.view(dtype)`` needs only a unit last stride (a column range passes it): tracked
        # apart, and only in a file that has one.
        unit_scopes, unit_attributes = None, set()
        for index, scope in enumerate(scopes):
            if self.names.certainly_triton_kernel(scope.roots[0]):
                continue  # no sink uses in a kernel
            for call in scope.calls:
                if self.names.is_dtype_view(call):
                    if unit_scopes is None:
                        unit_scopes, unit_attributes = suspects(
                            self.tree, _may_lose_unit_stride, self._never_without_unit_stride, names=self.names,
                            source_kinds=_VIEW_KINDS,
                        )
                    if unit_scopes[index].suspect(call.func.value, unit_attributes):
                        return True
                elif any(scope.suspect(handed, attributes) for handed in self._handed(call, needs)):
                    return True
        return False

    def handing(self, may_be_called) -> list[ScopeHanding] | None:
        """Per scope of the file (``flows._scopes``: each top-level function and method, then the
        rest), what a run of many files needs to know of it (``project_plan``): whether it hands
        a suspect value to a sink of its own (a custom op, a ``contiguous-sinks`` callee,
        ``.view(dtype)``, ``.data_ptr()``),
        which of its parameters such a sink may be handed (its own needs), and each call that
        hands a suspect value or a value of a parameter to a function whose summary a finding or
        its own summary may rest on: a call (or launch) of a dotted name whose head
        ``may_be_called`` says may name such a function. None when a configured glob may
        match any callee."""
        if self._configured_names is None:
            return None
        scopes, attributes = suspects(self.tree, _makes_view, self._never_a_view, names=self.names, source_kinds=_VIEW_KINDS)
        unit_scopes, unit_attributes = None, set()
        methods = _method_ids(self.names)
        found = []
        for index, scope in enumerate(scopes):
            root = scope.roots[0]
            if type(root) not in FUNCTIONS:
                # The rest (a function under a module-level ``if``, a nested class's method):
                # parameters are not told apart, so any value may be one, and any needed.
                found.append(ScopeHanding(None, True, self._handed_calls(scope, attributes, may_be_called, None), None, None))
                continue
            kernel = self.names.certainly_triton_kernel(root)
            flows = ParameterFlows(root, method=id(root) in methods, scope=scope)
            reports = False
            needs: set[str] | None = set()
            first = first_line(root)
            if self.names.triton_decorated(root) or _CHECKS.search("".join(self.lines[first - 1 : root.end_lineno])):
                needs = None  # every parameter, as ``_needs`` reads them
            for call in scope.calls:
                if kernel:
                    break  # no sink uses in a kernel
                func = call.func
                if self.names.is_dtype_view(call):
                    sunk = [func.value]
                    if not reports:
                        if unit_scopes is None:
                            unit_scopes, unit_attributes = suspects(
                                self.tree, _may_lose_unit_stride, self._never_without_unit_stride, names=self.names,
                            source_kinds=_VIEW_KINDS,
                            )
                        reports = unit_scopes[index].suspect(func.value, unit_attributes)
                elif (type(func) is ast.Attribute and func.attr == "data_ptr") or self._is_fixed_sink(call):
                    sunk = self._handed(call, {})
                    reports = reports or any(scope.suspect(value, attributes) for value in sunk)
                else:
                    continue
                if needs is not None:
                    for value in sunk:
                        needs |= flows.parameters_in(value)
            signature = _Needs(root.args)
            found.append(ScopeHanding(
                root, reports, self._handed_calls(scope, attributes, may_be_called, flows, views=not kernel),
                None if needs is None else frozenset(needs),
                (tuple(signature.positional), signature.rest, signature.keywords, id(root) in methods),
            ))  # fmt: skip
        return found

    def _handed_calls(
        self, scope, attributes: set[str], may_be_called, flows: ParameterFlows | None, views: bool = True,
    ) -> tuple[HandedCall, ...]:
        """The calls of a scope that hand on a suspect value or one its parameters may flow into
        (``flows``; None: any value may be a parameter's), with what each argument may be.
        ``views``: False in a Triton kernel, whose values are no tensors (a cast there,
        ``x.to(tl.float32)``, is of a block): the analyses look for no finding in it, and its
        calls count only for the pointers it hands on."""
        handed = []
        for call in scope.calls:
            func = call.func
            chain = ast_dotted(func.value if type(func) is ast.Subscript else func)
            if chain is None or not may_be_called(chain.partition(".")[0]):
                continue  # nothing the analyses look a summary up for
            arguments = []
            bound = [
                *(("*" if type(value) is ast.Starred else position, value) for position, value in enumerate(call.args)),
                *(("**" if keyword.arg is None else keyword.arg, keyword.value) for keyword in call.keywords),
            ]  # fmt: skip
            for key, value in bound:
                facts = scope.facts(value)
                suspect = views and scope.suspect(value, attributes)
                params = None if flows is None else tuple(sorted(flows.parameters_in_keys(facts.keys())))
                if suspect or params is None or params:
                    argument = (key, params, suspect)
                    arguments.append(self._shared.setdefault(argument, argument))
            if arguments:
                handed.append(HandedCall(chain, tuple(arguments)))
        return tuple(handed)

    def _handed(self, call: ast.Call, needs: dict[str, list[_Needs]]) -> list[ast.expr]:
        """What ``call`` hands a sink: the receiver of a raw ``.data_ptr()``, the arguments of a
        custom op or a ``contiguous-sinks`` callee, or those of a call of a function here that
        binds a parameter it needs contiguous (``_needs``); the receiver of ``.view(dtype)`` is
        the caller's to read."""
        func = call.func
        if type(func) is ast.Attribute and func.attr == "data_ptr":
            return [func.value]
        if self._is_fixed_sink(call):
            return [*call.args, *(keyword.value for keyword in call.keywords)]
        definitions = needs.get(callee_name(call))
        if not definitions:
            return []
        handed: list[ast.expr] = []
        for definition in definitions:
            handed.extend(definition.bound_by(call))
        return handed

    def _is_fixed_sink(self, call: ast.Call) -> bool:
        """A callee every tensor argument of which must be contiguous: a custom op, or one that
        ``contiguous-sinks`` may name (``SinkAnalysis._callee_of`` resolves the callee, an
        import's or this module's name, and matches it against the globs: the scout, which
        knows no module name, compares the last names, the one part resolution keeps)."""
        if self._is_custom_op(call):
            return True
        configured = self._configured_names
        return bool(configured) and type(call.func) in (ast.Name, ast.Attribute) and not configured.isdisjoint(
            self.names.last_parts(call.func)
        )

    def _is_custom_op(self, call: ast.Call) -> bool:
        if self.names.op_aliases and any(
            not is_strided_sink(self.settings, name) for name in self.names.op_meanings(call.func)
        ):
            return True  # through a module-level alias (``_C = torch.ops._C``)
        if not any(target.startswith("torch") for target in self.names.aliases.values()):
            # Unless ``alias-modules`` renames something to torch's names, only ``torch`` written
            # or imported can mean ``torch.ops``.
            written = ast_dotted(call.func)
            if written is None:
                return False
            head = written.partition(".")[0]
            if head != "torch" and not any(full.startswith("torch") for full in self.names.imports.get(head, ())):
                return False
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
        for kind in FUNCTIONS:
            for node in self.names.of(kind):
                first = first_line(node)
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
            init = next((m for m in node.body if type(m) in FUNCTIONS and m.name == "__init__"), None)
            found.setdefault(node.name, []).append(by_node[id(init)] if init is not None else _Needs(None, every=True))
        methods = _method_ids(self.names)
        flows = {id(node): ParameterFlows(node, method=id(node) in methods) for node, _ in open_definitions}
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


def _configured_last_names(globs: list[str]) -> frozenset[str] | None:
    """The last names ``contiguous-sinks`` callees may have: a resolved callee the glob matches
    ends in ``.<name>`` (or is ``<name>``) when the glob's last part is literal. None when a
    glob's last part is not (``pkg.op_*``: ``*`` also matches dots), or a bracket may hold the
    dot that ends its second-to-last part (``pkg.mod[.]op``)."""
    names = set()
    for glob in globs:
        last = glob.rpartition(".")[2]
        if "[" in glob or "*" in last or "?" in last:
            return None
        names.add(last)
    return frozenset(names)


@dataclass(frozen=True)
class HandedCall:
    """A call that hands a value on (``SinkScout.handing``): the dotted name it calls (of the
    kernel, for a launch ``k[grid](...)``), and per argument that may matter, its key (a
    position, a keyword, ``"*"`` / ``"**"`` for one unpacked), the calling function's
    parameters its value may hold (None: any), and whether it may be a view or a cast."""

    callee: str
    arguments: tuple[tuple[int | str, tuple[str, ...] | None, bool], ...]


@dataclass(frozen=True)
class ScopeHanding:
    """One scope's part in GPU1xx findings (``SinkScout.handing``). ``function``: its function
    node (None: the code outside every top-level function and method). ``reports``: it may
    hand a suspect value to a sink of its own. ``needs``: the parameters that may reach a sink
    of its own (None: any may). ``signature``: how a call binds its parameters (positional
    names, ``*args``, ``**kwargs``, and whether it is a method, whose first parameter no
    argument of a call binds); None outside a function."""

    function: ast.AST | None
    reports: bool
    calls: tuple[HandedCall, ...]
    needs: frozenset[str] | None
    signature: tuple[tuple[str, ...], str | None, str | None, bool] | None


def _method_ids(names: FileNames) -> set[int]:
    """The methods of the file's classes that receive their instance (or class) first: not
    static methods."""
    return {
        id(member) for node in names.of(ast.ClassDef) for member in node.body
        if type(member) in FUNCTIONS and not any(
            (ast_dotted(decorator_callee(d)) or "").endswith("staticmethod") for d in member.decorator_list
        )
    }  # fmt: skip


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
            self.positional = positional_names(arguments)
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


# The methods whose result the layout domain reads as a new tensor (fresh, or of unknown strides
# after an elementwise op on a permuted input), never as a view or a cast, whatever the receiver.
# Not ``.contiguous()``: it returns a size-1 view unchanged (``Layout.size1``), whose strides a
# stride-aware kernel may still misread (GPU103).
_NEW_TENSOR_METHODS = FRESH_METHODS | ELEMENTWISE_METHODS


class _NeverAView:
    """Expressions the layout domain never reads as a view or a cast, whatever they are made of:
    - arithmetic and comparisons (``LayoutDomain._elementwise``: fresh, a scalar or unknown);
    - ``x.shape``, ``x.dtype`` and the like (``NON_TENSOR_ATTRIBUTES``), where the file assigns
      no attribute of that name (the domain reads an assigned ``self.shape`` as assigned);
    - a call of a method that makes a new tensor (``x.t().amax(-1)``, ``x[:, 0].clamp(0, 1)``);
    - any other call, unless it may be a torch function (``torch.transpose(x, 0, 1)``, written
      ``torch.<name>``, or imported) or a method that may keep its receiver's layout
      (``layout_words.LAYOUT_CARRYING_METHODS``, an in-place one): ``LayoutDomain._eval_Call``
      reads the rest (``Parameter(w.t())``, ``x.t().unbind(0)``, ``helper(x[:, 0])``, a launch)
      as of unknown layout, a scalar or a tuple of strides.
    Unknown is no finding without a cast, and a cast around it is a node of its own. Which
    parameters such a value may hold is still read from all of it (``ScopeFacts.facts(...).keys()``):
    a summary's needs follow what a value is made of."""

    def __init__(self, names: FileNames, contiguous_too: bool = False) -> None:
        """``contiguous_too``: ``x.contiguous()`` counts as well (not for the GPU1xx sinks in
        general: it returns a size-1 view unchanged, whose strides a stride-aware kernel may
        misread, GPU103)."""
        self.names = names
        self._new_tensor_methods = _NEW_TENSOR_METHODS | {"contiguous"} if contiguous_too else _NEW_TENSOR_METHODS
        assigned = {node.attr for node in names.of(ast.Attribute) if type(node.ctx) is not ast.Load}
        self._non_tensor_attributes = NON_TENSOR_ATTRIBUTES - assigned

    def __call__(self, node: ast.AST) -> bool:
        kind = type(node)
        if kind is ast.BinOp or kind is ast.UnaryOp or kind is ast.Compare:
            return True
        if kind is ast.Attribute:
            return node.attr in self._non_tensor_attributes
        if kind is not ast.Call:
            return False
        func = node.func
        kind = type(func)
        if kind is ast.Attribute:
            method = func.attr
            if method in self._new_tensor_methods:
                return True
            if method in LAYOUT_CARRYING_METHODS or (method.endswith("_") and not method.endswith("__")):
                return False
        elif kind is ast.Name:
            if func.id in VIEW_MAKING:
                return False  # a source of its own (``_makes_view``)
        else:
            return True  # ``kernel[grid](...)``, ``make()(x)``: unknown
        return not self.names.may_be_torch(func, top_level=True)


def _may_lose_unit_stride(node: ast.AST) -> bool:
    """A view or a cast whose last dim may not have stride 1 (what ``.view(dtype)`` needs): as
    ``_makes_view``, but for the ranges that keep the last stride."""
    if type(node) is ast.Subscript:
        return _slices(node, unit_stride_only=True)
    return _makes_view(node)


# The only node kinds ``_makes_view`` and ``_may_lose_unit_stride`` mark.
_VIEW_KINDS = (ast.Attribute, ast.Call, ast.Subscript)


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
