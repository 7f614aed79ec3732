"""The catalogue of GPU->CPU sync sites of a file, and per-function sync summaries.

For every function, one forward walk (``flow.Walker`` with ``device.DeviceDomain``) finds:
- explicit syncs: ``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()``, ``.to("cpu")`` (not
  ``non_blocking=True``), ``cpu_tensor.copy_(gpu_tensor)``, any ``.synchronize()`` (``torch.cuda``,
  streams, events; not ``torch.cpu``);
- implicit syncs: ``int()`` / ``float()`` / ``bool()`` of a GPU tensor, a GPU tensor as an ``if`` /
  ``while`` / ``assert`` / conditional-expression / comprehension condition or as an operand of
  ``and`` / ``or`` / ``not``, ``.any()`` / ``.all()`` in a condition, boolean-mask indexing,
  ``nonzero`` / ``argwhere`` / one-argument ``torch.where`` / ``unique`` / ``masked_select`` /
  ``bincount`` / ``one_hot`` without ``num_classes`` / ``histc`` without a range /
  ``repeat_interleave`` with tensor repeats
  and no ``output_size=`` (each reads the data to size its output), a GPU tensor used as a
  Python int (``range(t)``, slice bounds, sizes of ``torch.arange`` / ``empty`` / ``zeros`` ...),
  a Python bool read from tensors' data (``torch.equal`` / ``allclose`` / ``is_nonzero`` and the
  methods of those names: the bool itself is host-side, so using it later is no second sync);
- calls of functions of the project (``helper(x)``, ``self.helper()`` as ``<module>.<Class>.helper``,
  ``mod.func()``), which sync if the callee's closed summary says so; a call of a function of
  the same file that passes CPU tensors, or constants that skip its syncing branch, is no sync
  site if the callee, walked with them bound, has none (``SyncAnalysis.clean_with_arguments``: the
  summary judges parameters as unknown), and syncs only through the calls that walk still meets
  if it has only those (``Through``); nor is a call of a memoised function of the same file
  whose tensor arguments the cache itself handed out (``SyncAnalysis.cached_call``). A call of a
  function of the same file that passes GPU values is a sync site of its own where the callee,
  walked with them bound, syncs on them (``SyncAnalysis.sync_on_device_arguments``): ``def
  max_len(x): return x.max().item()`` does not sync by its summary, ``max_len(lens_gpu)`` does.

Receivers must be on the GPU (``DEVICE``); unknown receivers of explicit syncs and of the
tensor-only APIs count as well per ``unknown-device`` (default: only in methods of hot classes);
implicit syncs through Python protocols (``int(x)``, ``if x:``) need a known GPU tensor, since
``x`` is then as likely a Python value.

A site in a hot scope (``hot_scopes``) or in a ``torch.cuda.graph`` block is reported unless it is
inside a sync declaration, a debug-only or training-only region or (outside a capture) a run-once lazy
initialisation (``guards``). Sites in other functions (not cold ones) make up the function's
summary: ``sync`` (why calling it syncs) and ``sync_calls``; the
project closes them over the call graph, so a hot call of a helper is reported at the call site.
Blocking copies of host data onto the GPU (kind "upload", GPU205) are found in the same walk:
reported in hot code, recorded in other functions' summaries (``upload``), never a sync to the
other rules.

Stale declarations (GPU203): a declaration block is stale when nothing in it *can* sync, judged
broadly (anything not known to be host-side, whatever ``unknown-device`` says; any call not known
to be sync-free: a call of a function of another file keeps the block alive, since its summary
is not known here; a function of the same file is looked into).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass, replace

import libcst as cst

from sync_lint.analysis.device import (
    DEVICE,
    HOST_DEVICE,
    ClassAttributes,
    DeviceDomain,
    Place,
    base_class_name,
    combine,
    excludes_none,
    initial_env,
    is_literal,
    is_true,
    keyword,
    name_hint,
    positional,
    string_value,
)
from sync_lint.analysis.device_words import (
    DATA_DEPENDENT_FUNCTIONS,
    DATA_DEPENDENT_METHODS,
    EXPLICIT_METHODS,
    FORMATTING_BUILTINS,
    PROTOCOL_BUILTINS,
    SIZE_FUNCTIONS,
    VALUE_READS,
    names_host_copy,
)
from sync_lint.analysis.flags import (
    NOT_CONSTANT,
    call_arguments,
    call_flags,
    constant,
    decides_any,
    deciding,
    excuse_vanished,
    flag_defaults,
    flag_params,
    flag_tests,
    none_params,
    not_none,
)
from sync_lint.analysis.flow import Walker, decided_branch
from sync_lint.analysis.functions import FunctionInfo
from sync_lint.analysis.guards import (
    Declarations,
    OnceRegions,
    off_path_branch,
    opt_in_checks,
    wrap_fix,
)
from sync_lint.analysis.hot_scopes import Hotness, HotScopes
from sync_lint.analysis.modules import LIBRARY_ROOTS
from sync_lint.analysis.names import dotted
from sync_lint.analysis.nodes import (
    block_statements,
    children,
    inner_blocks,
    named_params,
    one_line,
    positional_params,
    shortened,
)
from sync_lint.analysis.summaries import (
    HOST_DEVICE_ARG,
    NOT_NONE,
    ArgKey,
    CallFlags,
    DeviceArgs,
    FunctionSummary,
    SyncCall,
    Through,
    UploadCall,
)
from sync_lint.patterns import definition_of
from sync_lint.pipeline.profile import span
from sync_lint.rules.base import CalleeCondition, Finding

_AS_TEXT = " (its values are copied to the host as text)"  # what formatting a tensor costs
# For stale declarations: calls known not to sync (their arguments are still looked at).
SAFE_BUILTINS = frozenset({
    "len", "isinstance", "issubclass", "getattr", "hasattr", "setattr", "type", "id", "callable", "super", "zip",
    "enumerate", "iter", "list", "tuple", "dict", "set", "frozenset", "object", "slice", "range",
})
SAFE_METHODS = frozenset({
    "view", "reshape", "flatten", "unflatten", "unsqueeze", "squeeze", "contiguous", "clone", "detach", "t",
    "transpose", "permute", "narrow", "select", "expand", "expand_as", "repeat", "index_select", "gather",
    "scatter", "scatter_", "scatter_add", "scatter_add_", "index_copy_", "index_fill_", "masked_fill",
    "masked_fill_", "fill_", "zero_", "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "abs",
    "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "cumsum", "cumprod", "clamp", "clamp_",
    "clamp_min", "clamp_max", "int", "long", "float", "half", "bfloat16", "bool", "type_as", "view_as",
    "reshape_as", "split", "chunk", "unbind", "stride", "size", "dim", "numel", "element_size", "data_ptr",
    "is_contiguous", "new_empty", "new_zeros", "new_ones", "new_full", "record_stream", "wait_event",
    "wait_stream", "record", "append", "extend", "insert", "pop", "get", "items", "keys", "values", "update",
    "setdefault", "discard", "remove", "format", "join", "startswith", "endswith", "lower", "upper", "strip",
    "replace", "eq", "ne", "gt", "lt", "ge", "le", "logical_and", "logical_or", "logical_not", "isnan", "any",
    "all", "sort", "argsort", "topk", "flip", "roll", "diff", "pow", "sqrt", "exp", "log", "softmax", "sigmoid",
    "relu", "matmul", "mm", "bmm", "where", "nan_to_num", "copy", "debug", "info", "warning", "warning_once",
    "info_once", "debug_once",
})
SAFE_TORCH = frozenset({
    "empty", "zeros", "ones", "full", "arange", "empty_like", "zeros_like", "ones_like", "full_like", "cat",
    "stack", "concat", "concatenate", "split", "chunk", "cumsum", "sum", "max", "min", "maximum", "minimum",
    "clamp", "where", "gather", "index_select", "searchsorted", "bucketize", "matmul", "mm", "bmm", "softmax",
    "exp", "log", "sqrt", "narrow", "flatten", "reshape", "transpose", "permute", "sort", "argsort", "topk",
    "logical_and", "logical_or", "logical_not", "eq", "ne", "gt", "lt", "ge", "le", "isin", "no_grad",
    "inference_mode", "is_tensor", "get_default_dtype", "broadcast_to", "diff", "div", "mul", "add", "sub",
    "floor_divide", "remainder", "from_numpy", "device", "dtype", "finfo", "iinfo", "Size", "current_stream",
    "Event", "Stream", "stream", "is_available", "current_device", "empty_strided", "randn", "rand",
    "nullcontext",
})


@dataclass(frozen=True)
class Flags:
    """Where a statement sits in its function."""

    wrap: cst.CSTNode  # the statement a declaration would wrap (in a block of statements)
    declared: bool = False
    off_path: bool = False  # a debug-only or training-only branch (``guards.off_path_branch``)
    once: bool = False  # lazy initialisation: runs once per key (``guards.OnceRegions``)
    loop: bool = False
    graph: bool = False
    blocks: tuple[cst.With, ...] = ()  # enclosing declaration blocks


@dataclass(frozen=True)
class DeclarationBlock:
    node: cst.With
    item: int  # index of the declaring item
    conditional: bool  # ``with cm:`` where ``cm = ... gpu_sync_allowed() ...``
    function: FunctionInfo


@dataclass
class SyncSite:
    node: cst.CSTNode  # the span reported
    kind: str  # "explicit" | "implicit" | "call"; GPU205's "upload" | "upload-call" (``_UPLOAD_KINDS``)
    template: str  # what it is; ``{code}`` stands for ``subject``'s source
    subject: cst.CSTNode | None
    statement: cst.CSTNode  # the statement a declaration would wrap
    scope: str | None  # the hot scope ("hot path `B.build`"), None outside hot code
    in_loop: bool
    declared: bool
    off_path: bool
    callee: str | None = None
    once: bool = False
    through: Through = ()  # a call site: see ``Through``
    # A call that syncs on the GPU tensors it passes (``SyncAnalysis.sync_on_device_arguments``):
    # what it hands over, and why the callee then syncs. ``callee`` names it.
    on_device: tuple[str, str] | None = None
    # A call of a function of another file: its arguments known to be on the GPU (``SyncCall``).
    device_args: tuple[ArgKey, ...] = ()
    flags: CallFlags = ()  # a call site: what it binds flags to (``flags.call_flags``)
    devices: DeviceArgs = ()  # an "upload-call" site: what it hands as devices (``UploadCall.devices``)

    @property
    def undeclared(self) -> bool:
        return not self.declared and not self.off_path and not self.once


@dataclass(frozen=True)
class BoundCall:
    """A call of a function of this file that has a summary, with what it binds
    (``SyncAnalysis.bind_call``): each parameter's argument, the parameters a call may bind,
    and those bound to tensors known to be on the host or values known to be on the GPU."""

    qualname: str
    info: FunctionInfo
    passed: dict[str, cst.BaseExpression]
    params: list[cst.Param]
    places: dict[str, Place]


@dataclass
class _Hit:
    node: cst.CSTNode
    kind: str
    template: str
    subject: cst.CSTNode | None
    in_loop: bool
    callee: str | None = None
    through: Through = ()
    on_device: tuple[str, str] | None = None  # as ``SyncSite.on_device``
    device_args: tuple[ArgKey, ...] = ()  # as ``SyncSite.device_args``
    devices: DeviceArgs = ()  # as ``SyncSite.devices``


class _Contexts:
    """A pre-pass over a function body: ``Flags`` for every statement the walker reports, and the
    function's declaration blocks."""

    def __init__(self, ctx, info: FunctionInfo, declarations: Declarations, hot: HotScopes,
                 context_names: set[str], opt_in: frozenset[str]) -> None:
        """``opt_in``: the file's checks switched on from the environment (``opt_in_checks``)."""
        self.flags: dict[int, Flags] = {}
        self._ctx = ctx
        self._opt_in = opt_in
        self._once: OnceRegions | None = None
        self._persistent: frozenset[str] | None = None
        self.blocks: list[DeclarationBlock] = []
        self.has_graph = False
        self._info = info
        self._declarations = declarations
        self._hot = hot
        self._context_names = context_names
        body = info.node.body
        if isinstance(body, cst.IndentedBlock):
            self._statements(body.body, Flags(wrap=info.node))
        else:
            for small in body.body:
                self._record(small, Flags(wrap=info.node))

    def _record(self, node: cst.CSTNode, flags: Flags) -> None:
        self.flags[id(node)] = flags

    def _statements(self, body, flags: Flags) -> None:
        gets: dict[str, tuple[str, str] | str] = {}  # ``v = self._cache.get(key)`` earlier in this block
        for index, statement in enumerate(body):
            kind = type(statement)
            if kind is cst.If:
                self._if(statement, replace(flags, wrap=statement), gets)
                if not flags.once and type(statement.test) in _STATE_TEST_KINDS and self._regions() \
                        .once_after(statement, body[index + 1:], self._info, self._persistent, gets):
                    flags = replace(flags, once=True)  # after ``if key in self._done: return``
                continue
            if kind is cst.SimpleStatementLine and type(statement.body[0]) is cst.Assign:
                value = statement.body[0].value
                if type(value) is cst.Attribute or type(value) is cst.Call and (
                        (type(value.func) is cst.Attribute and value.func.attr.value == "get")
                        or (type(value.func) is cst.Name and value.func.value == "getattr")):
                    found = self._regions().cache_get(statement.body[0], self._persistent)
                    if found is not None:
                        gets[found[0]] = found[1]
            self._statement(statement, replace(flags, wrap=statement))

    def _regions(self) -> OnceRegions:
        if self._once is None:
            self._once = self._ctx.get(OnceRegions)
            self._persistent = self._once.persistent_names(self._info.node)
        return self._once

    def _suite(self, suite, flags: Flags) -> None:
        if isinstance(suite, (cst.Else, cst.Finally)):
            suite = suite.body
        if isinstance(suite, cst.IndentedBlock):
            self._statements(suite.body, flags)
        elif isinstance(suite, cst.SimpleStatementSuite):
            for small in suite.body:
                self._record(small, flags)

    def _statement(self, node: cst.CSTNode, flags: Flags) -> None:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self._record(small, flags)
        elif isinstance(node, cst.If):
            self._if(node, flags, {})
        elif isinstance(node, cst.For):
            self._record(node, flags)
            self._suite(node.body, replace(flags, loop=True))
            if node.orelse is not None:
                self._suite(node.orelse, flags)
        elif isinstance(node, cst.While):
            looping = replace(flags, loop=True)
            self._record(node, looping)
            self._suite(node.body, looping)
            if node.orelse is not None:
                self._suite(node.orelse, flags)
        elif isinstance(node, cst.With):
            self._record(node, flags)
            inner = flags
            declarations = self._declarations
            index = declarations.declaring_item(node, self._context_names) if declarations.mentioned else None
            if index is not None:
                conditional = not isinstance(node.items[index].item, cst.Call)
                self.blocks.append(DeclarationBlock(node, index, conditional, self._info))
                inner = replace(inner, declared=True, blocks=(*inner.blocks, node))
            if self._hot.is_graph_block(node):
                self.has_graph = True
                inner = replace(inner, graph=True)
            self._suite(node.body, inner)
        elif isinstance(node, (cst.Try, cst.TryStar)):
            self._suite(node.body, flags)
            for handler in node.handlers:
                self._record(handler, flags)
                self._suite(handler.body, flags)
            if node.orelse is not None:
                self._suite(node.orelse, flags)
            if node.finalbody is not None:
                self._suite(node.finalbody, flags)
        elif isinstance(node, cst.Match):
            self._record(node, flags)
            for case in node.cases:
                self._suite(case.body, flags)

    def _if(self, node: cst.If, flags: Flags, gets: dict) -> None:
        branch = off_path_branch(node.test, self._opt_in)
        off_path = replace(flags, off_path=True)
        self._record(node, off_path if branch == "body" else flags)
        body_flags = off_path if branch == "body" else flags
        if not body_flags.once and type(node.test) in _STATE_TEST_KINDS \
                and self._regions().once_body(node, self._info, self._persistent, gets):
            body_flags = replace(body_flags, once=True)  # ``if self._pool is None: ... self._pool = ...``
        self._suite(node.body, body_flags)
        orelse_flags = off_path if branch == "orelse" else flags
        if isinstance(node.orelse, cst.If):
            self._if(node.orelse, orelse_flags, {})
        elif node.orelse is not None:
            self._suite(node.orelse, orelse_flags)


_NEWLINE = re.compile("\n")


class _Lines:
    """Line numbers for summaries without position metadata (which costs about two parses, and
    most files with summaries have no finding): a node's line is where its text first occurs
    after the previous one found in the same function, from the function's ``def``."""

    def __init__(self, ctx, functions: list[FunctionInfo]) -> None:
        self.text = ctx.source.text
        self.module = ctx.module
        self._line_starts: list[int] | None = None  # made on the first line asked: most files ask none
        self._start: dict[int, int] = {}
        self._cursor: dict[int, int] = {}
        cursor = 0
        for info in functions:  # in source order
            found = definition_of(info.name).search(self.text, cursor)
            if found is not None:
                cursor = found.start()
                self._start[id(info.node)] = cursor

    def line(self, info: FunctionInfo, node: cst.CSTNode) -> int:
        if isinstance(node, cst.Call) and isinstance(node.func, (cst.Name, cst.Attribute)):
            node = node.func  # enough to find a call, and cheaper to render
        code = self.module.code_for_node(node).strip().splitlines()
        if not code:
            return 0
        start = self._start.get(id(info.node), 0)
        at = self.text.find(code[0], self._cursor.get(id(info.node), start))
        if at < 0:
            at = self.text.find(code[0], start)
        if at < 0:
            return 0
        self._cursor[id(info.node)] = at
        if self._line_starts is None:
            # Counting newlines up to each site costs a pass over the text per site: a big
            # file's hot functions ask for hundreds.
            self._line_starts = [0, *(found.end() for found in _NEWLINE.finditer(self.text))]
        return bisect.bisect_right(self._line_starts, at)

    def restart(self, info: FunctionInfo) -> None:
        """A new walk of ``info`` asks for its lines from its ``def`` again."""
        self._cursor.pop(id(info.node), None)

    def skip(self, info: FunctionInfo, statement: cst.CSTNode) -> None:
        """A walk that asks for lines passes over ``statement`` without asking for any of its
        nodes (a debug-only ``if``, a declared ``with``): move the cursor past its lines, or a
        call written there first would be found for the same call written after it."""
        leading = getattr(statement, "leading_lines", None)
        code = self.module.code_for_node(statement.with_changes(leading_lines=()) if leading else statement)
        lines = code.strip("\n").splitlines()
        if not lines:
            return
        start = self._start.get(id(info.node), 0)
        at = self.text.find(lines[0].strip(), self._cursor.get(id(info.node), start))
        if at < 0:
            return
        end = at
        for _ in range(len(lines)):  # to the start of the line after its last
            newline = self.text.find("\n", end)
            if newline < 0:
                return
            end = newline + 1
        self._cursor[id(info.node)] = end


class _Scanner:
    """Finds sync sites in the expressions of one statement (``broad``: anything that may sync)."""

    def __init__(self, analysis: SyncAnalysis, info: FunctionInfo, domain: DeviceDomain, report_unknown: bool,
                 broad: bool = False, calls: bool = True, device_args: bool = False, uploads: bool = False) -> None:
        """``calls``: judge the calls of project functions (a walk for explicit syncs alone does
        not); ``device_args``: tell which arguments of a call of another file's function are on
        the GPU (``SyncCall.device_args``: only a summary's own walk records them); ``uploads``:
        also find blocking copies of CPU data onto the GPU (kind "upload", GPU205), which the
        walk that reports hot sites asks for alone."""
        self.analysis = analysis
        self.ctx = analysis.ctx
        self.names = analysis.ctx.names
        self.info = info
        self.domain = domain
        self.report_unknown = report_unknown
        self.broad = broad
        self.calls = calls
        self.device_args = device_args
        self.uploads = uploads and not broad
        self.hits: list[_Hit] = []
        # Whether it met an explicit sync's call on any receiver (``SyncAnalysis._record_syncs_on``).
        self.explicit_calls = False
        self._binder = Walker(domain)
        self._nested = {
            s.name.value for s in (info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else ())
            if isinstance(s, cst.FunctionDef)
        }

    # -- entry points ---------------------------------------------------------------------------
    def scan(self, node: cst.CSTNode, env, in_loop: bool) -> list[_Hit]:
        self.hits = []
        self._loop = in_loop
        for expression, condition, store in self._roots(node):
            if store:
                self._target(expression, env)
            else:
                self.visit(expression, env, condition, False)
        return self.hits

    def may_sync(self, node: cst.CSTNode, env) -> bool:
        return bool(self.scan(node, env, False))

    def roots(self, node: cst.CSTNode) -> list[cst.BaseExpression]:
        """The expressions a statement evaluates (``_roots``), store targets left out."""
        return [expression for expression, _, store in self._roots(node) if not store]

    def _roots(self, node: cst.CSTNode):
        """(expression, condition label, is-a-store-target) for what a statement evaluates."""
        if isinstance(node, cst.Expr):
            yield node.value, None, False
        elif isinstance(node, cst.Assign):
            yield node.value, None, False
            for target in node.targets:
                yield target.target, None, True
        elif isinstance(node, cst.AugAssign):
            yield node.value, None, False
            yield node.target, None, False
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                yield node.value, None, False
            yield node.target, None, True
        elif isinstance(node, cst.Return):
            if node.value is not None:
                yield node.value, None, False
        elif isinstance(node, cst.Assert):
            yield node.test, "an `assert` condition", False
            if node.msg is not None and self.broad:  # evaluated only when the assertion fails
                yield node.msg, None, False
        elif isinstance(node, cst.Raise):
            if node.exc is not None and self.broad:  # an error path, not a per-step cost
                yield node.exc, None, False
        elif isinstance(node, cst.If):
            yield node.test, "an `if` condition", False
        elif isinstance(node, cst.While):
            yield node.test, "a `while` condition", False
        elif isinstance(node, cst.For):
            yield node.iter, None, False
        elif isinstance(node, cst.With):
            for item in node.items:
                if not self.analysis.declarations.is_declaration_call(item.item):
                    yield item.item, None, False
        elif isinstance(node, cst.Match):
            yield node.subject, None, False
        elif isinstance(node, cst.ExceptHandler) and node.type is not None:
            yield node.type, None, False

    # -- reporting ------------------------------------------------------------------------------
    def _hit(self, node, kind: str, template: str, subject=None, loop: bool = False, callee: str | None = None,
             through: Through = (), on_device: tuple[str, str] | None = None,
             device_args: tuple[ArgKey, ...] = (), devices: DeviceArgs = ()) -> None:
        self.hits.append(_Hit(node, kind, template, subject, self._loop or loop, callee, through, on_device, device_args,
                              devices))

    def _candidate(self, node, loop: bool = False) -> None:
        self._hit(node, "candidate", "", None, loop)

    def _device_ish(self, place: Place, tensor: bool = False) -> bool:
        """On the GPU, or unknown where unknown devices count; ``tensor``: and certainly a tensor
        (for syncs through Python protocols, which any object may implement)."""
        if tensor and not place.tensor:
            return False
        return place.is_device or (place.is_unknown and self.report_unknown)

    @staticmethod
    def _maybe_device(place: Place) -> bool:
        """Broad mode: not known to be host-side."""
        return not place.is_host or (place.items is not None and any(not p.is_host for p in place.items))

    # -- expressions ----------------------------------------------------------------------------
    def visit(self, node: cst.BaseExpression, env, condition: str | None, loop: bool) -> None:
        kind = type(node)  # not isinstance: libcst's classes are ABCs, slow to test (``analysis.nodes``)
        if kind is cst.Lambda:
            return
        if kind is cst.BooleanOperation:
            label = "an operand of `and`" if type(node.operator) is cst.And else "an operand of `or`"
            self.visit(node.left, env, condition or label, loop)
            self.visit(node.right, env, condition, loop)
            return
        if kind is cst.UnaryOperation and type(node.operator) is cst.Not:
            self.visit(node.expression, env, "an operand of `not`", loop)
            return
        if kind is cst.IfExp:
            self.visit(node.test, env, "a conditional-expression test", loop)
            branch = decided_branch(node, self.domain.decide, env)  # a walk under assumed flags
            if branch is not None:
                self.visit(branch, env, condition, loop)
                return
            then_env, else_env = self.domain.branch_envs(node.test, env)  # ``x.tolist() if x.is_cpu else ...``
            off_path = off_path_branch(node.test, self.analysis.opt_in)  # ``t.item() if self.debug else 0``: as an ``if`` statement's
            if off_path != "body":
                self.visit(node.body, then_env, condition, loop)
            if off_path != "orelse":
                self.visit(node.orelse, else_env, condition, loop)
            return
        if kind in _COMPREHENSIONS:
            self._comprehension(node, env, loop)
            return
        if kind in _SUSPENSIONS and self.broad:
            self._candidate(node, loop)
        if condition is not None:
            self._condition(node, env, condition, loop)
        if kind is cst.Call:
            self._call(node, env, loop)
            if type(node.func) is cst.Attribute:
                self.visit(node.func.value, env, None, loop)
            for arg in node.args:
                self.visit(arg.value, env, None, loop)
            return
        if kind is cst.Subscript:
            self._subscript(node, env, loop, store=False)
            self.visit(node.value, env, None, loop)
            self._slice_children(node, env, loop)
            return
        if kind is cst.FormattedString:
            for part in node.parts:
                if type(part) is cst.FormattedStringExpression:
                    self._read_on_host(part.expression, f"the tensor `{{code}}` formatted in an f-string{_AS_TEXT}", env, loop)
        for child in _expression_children(node):
            self.visit(child, env, None, loop)

    def _slice_children(self, node: cst.Subscript, env, loop: bool) -> None:
        for element in node.slice:
            part = element.slice
            if type(part) is cst.Index:
                self.visit(part.value, env, None, loop)
            else:
                for bound in (part.lower, part.upper, part.step):
                    if bound is not None:
                        self.visit(bound, env, None, loop)

    def _target(self, node: cst.BaseExpression, env) -> None:
        """A store target: its sub-expressions are evaluated (``out[:n] = ...``), a mask is not a sync."""
        if isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                self._target(element.value, env)
        elif isinstance(node, cst.StarredElement):
            self._target(node.value, env)
        elif isinstance(node, cst.Subscript):
            self._subscript(node, env, False, store=True)
            self.visit(node.value, env, None, False)
            self._slice_children(node, env, False)
        elif isinstance(node, cst.Attribute):
            self.visit(node.value, env, None, False)

    def _comprehension(self, node, env, loop: bool) -> None:
        local = dict(env)
        clause = node.for_in
        first = True
        while clause is not None:
            self.visit(clause.iter, local, None, loop or not first)
            self._binder.bind(clause.target, self.domain.element(self.domain.evaluate(clause.iter, local), 0), local)
            for test in clause.ifs:
                self.visit(test.test, local, "a comprehension condition", True)
            clause = clause.inner_for_in
            first = False
        if isinstance(node, cst.DictComp):
            self.visit(node.key, local, None, True)
            self.visit(node.value, local, None, True)
        else:
            self.visit(node.elt, local, None, True)

    def _condition(self, node: cst.BaseExpression, env, label: str, loop: bool) -> None:
        func = node.func if isinstance(node, cst.Call) else None
        if isinstance(func, cst.Attribute) and func.attr.value in ("any", "all") and not self.domain.library_name(func):
            receiver = self.domain.evaluate(func.value, env)
            if self.broad:
                if self._maybe_device(receiver):
                    self._candidate(node, loop)
            elif self._device_ish(receiver):
                self._hit(node, "implicit", f"`.{node.func.attr.value}()` in {label}", None, loop)
            return
        self._read_on_host(node, f"the tensor `{{code}}` used as {label}", env, loop)

    def _subscript(self, node: cst.Subscript, env, loop: bool, store: bool) -> None:
        for element in node.slice:
            part = element.slice
            if isinstance(part, cst.Index):
                if is_literal(part.value):
                    continue
                place = self.domain.evaluate(part.value, env)
                if self.broad:
                    if not store and self._maybe_device(place):
                        self._candidate(part.value, loop)
                elif not store and place.mask and self._device_ish(place, tensor=True):
                    self._hit(node, "implicit", "boolean-mask indexing `{code}`", node, loop)
                continue
            for bound in (part.lower, part.upper, part.step):
                if bound is not None:
                    self._read_on_host(bound, "the tensor `{code}` used as a slice bound", env, loop)

    # -- calls ----------------------------------------------------------------------------------
    def _call(self, node: cst.Call, env, loop: bool) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "synchronize":
            resolved = self.names.resolve(func) if self.names.is_imported(func) else ""
            if not (resolved or "").startswith("torch.cpu."):
                self._hit(node, "explicit", "`{code}`", node, loop)
            return
        if self.analysis.declarations.is_declaration_call(node):
            return
        callee = self._callee(func, env)
        if callee is not None:
            if self.broad:
                if self.analysis.function_may_sync(callee):
                    self._candidate(node, loop)
            elif self.calls:
                self._project_call(callee, node, env, loop)
            return
        library = self.domain.library_name(func)
        if library is not None:
            self._library_call(library, node, env, loop)
        elif isinstance(func, cst.Attribute):
            self._method_call(func.attr.value, func.value, node, env, loop)
        elif isinstance(func, cst.Name) and self._is_builtin(func.value, env):
            self._builtin_call(func.value, node, env, loop)
        elif self.broad:
            self._candidate(node, loop)

    def _is_builtin(self, name: str, env) -> bool:
        return name not in env and name not in self.names.imports and name not in self.analysis.module_names

    def _project_call(self, callee: str, node: cst.Call, env, loop: bool) -> None:
        """A call of a function of the project: no sync where this call's arguments rule its
        syncs out (``clean_with_arguments``) or a memoised function's cache hands them out
        (``cached_call``); a sync of its own where the callee syncs on the GPU values it hands
        over (``sync_on_device_arguments``); else a call its summary judges."""
        bound = self.analysis.bind_call(callee, node, env, self.domain)
        if self.uploads:
            if self.analysis.cached_call(callee, node, self.info):
                return
            self._upload_call(callee, bound, node, env, loop)
        clean = self.analysis.clean_with_arguments(bound)
        if clean is True or (not self.uploads and self.analysis.cached_call(callee, node, self.info)):
            return
        on_device = self.analysis.sync_on_device_arguments(bound)
        if on_device is not None:
            handed, why = on_device
            short = callee.rsplit(".", 1)[-1]
            self._hit(node, "explicit", f"`{short}()`, handed {handed}, {why}", None, loop, callee, on_device=on_device)
            return
        device_args = self._device_arguments(node, env) if self.device_args and callee not in self.analysis.functions else ()
        self._hit(node, "call", "", None, loop, callee, () if clean is False else clean, device_args=device_args)

    def _upload_call(self, callee: str, bound: BoundCall | None, node: cst.Call, env, loop: bool) -> None:
        """A call of a project function, for GPU205 (kind "upload-call"): its template is why it
        makes a blocking copy onto the GPU where the arguments it binds tell
        (``upload_with_arguments``); empty where the callee's summary decides, with what the call
        hands it as devices, or the calls the bound walk still meets (``through``)."""
        verdict = self.analysis.upload_with_arguments(bound)
        if verdict is None:
            self._hit(node, "upload-call", "", None, loop, callee, devices=self._devices(node, env))
            return
        own, through = verdict
        if own is not None:
            self._hit(node, "upload-call", own, None, loop, callee)
        elif through:
            self._hit(node, "upload-call", "", None, loop, callee, through)

    def _devices(self, call: cst.Call, env) -> DeviceArgs:
        """What a call hands as devices, by position or keyword (``UploadCall.devices``)."""
        found: list[tuple[ArgKey, str | None]] = []
        for arg, key in call_arguments(call):
            if arg.star:
                found.append((arg.star, None))
                continue
            if key is None:
                continue  # a position after ``*args``: the marker above says "unknown"
            named = self.domain.device_value(arg.value, env)
            if named is not None and named.is_host:
                found.append((key, HOST_DEVICE_ARG))
            elif type(arg.value) is cst.Name and arg.value.value in self.info.params:
                found.append((key, arg.value.value))
            else:
                found.append((key, None))
        return tuple(found)

    def _device_arguments(self, call: cst.Call, env) -> tuple[ArgKey, ...]:
        """The arguments of a call of another file's function that are known to be on the GPU,
        by position or keyword (none where an argument is unpacked: it may bind anything)."""
        found: list[ArgKey] = []
        index = 0
        for arg in call.args:
            if arg.star:
                return ()
            key: ArgKey = arg.keyword.value if arg.keyword is not None else index
            if arg.keyword is None:
                index += 1
            if not is_literal(arg.value) and self.domain.evaluate(arg.value, env).is_device:
                found.append(key)
        return tuple(found)

    def _method_call(self, method: str, receiver_node, node: cst.Call, env, loop: bool) -> None:
        if method in EXPLICIT_METHODS or method == "copy_":
            self.explicit_calls = True
        receiver = self.domain.evaluate(receiver_node, env)
        non_blocking = is_true(keyword(node, "non_blocking"))
        if method in EXPLICIT_METHODS:
            if self.broad:
                if self._maybe_device(receiver):
                    self._candidate(node, loop)
            elif self._device_ish(receiver):
                self._hit(node, "explicit", f"`.{method}()` on `{{code}}`", receiver_node, loop)
        elif method == "to":
            target = self.domain.device_argument(node, env)
            if target is not None and target.is_host:
                self.explicit_calls = True  # a copy to the host: a sync where the receiver is on the GPU
            if self.broad:
                if target is not None or any(not self.domain._is_dtype(a) for a in positional(node)):
                    self._candidate(node, loop)
            elif target is not None and target.is_host and not non_blocking and self._device_ish(receiver):
                self._hit(node, "explicit", "`.to(\"cpu\")` of `{code}`", receiver_node, loop)
            elif self.uploads and target is not None and target.is_device and not non_blocking \
                    and _in_host_memory(receiver_node, receiver):
                self._hit(node, "upload", "a blocking `.to()` of the CPU tensor `{code}` onto the GPU", receiver_node, loop)
        elif method == "cuda":
            if self.uploads and not non_blocking and _in_host_memory(receiver_node, receiver):
                self._hit(node, "upload", "a blocking `.cuda()` of the CPU tensor `{code}`", receiver_node, loop)
        elif method == "copy_":
            if self.broad:
                self._candidate(node, loop)
            else:
                args = positional(node)
                source = self.domain.evaluate(args[0], env) if args else None
                if source is not None and receiver.is_host and not non_blocking and source.is_device:
                    self._hit(node, "explicit", "a blocking `.copy_()` of a GPU tensor into the CPU tensor `{code}`",
                              receiver_node, loop)
                elif self.uploads and source is not None and receiver.is_device and not non_blocking \
                        and _in_host_memory(args[0], source):
                    self._hit(node, "upload", "a blocking `.copy_()` of the CPU tensor `{code}` into a GPU tensor",
                              args[0], loop)
        elif method in DATA_DEPENDENT_METHODS:
            if self.broad:
                if self._maybe_device(receiver):
                    self._candidate(node, loop)
            elif self._device_ish(receiver):
                self._hit(node, "implicit", f"`.{method}()` of `{{code}}` (its output size depends on the data)",
                          receiver_node, loop)
        elif method == "histc":
            self._histc(node, receiver, positional(node)[1:3], loop)
        elif method == "repeat_interleave":
            args = positional(node)
            repeats = keyword(node, "repeats") or (args[0] if args else None)
            self._repeat_interleave(node, repeats, receiver, env, loop)
        elif method in VALUE_READS:
            args = positional(node)
            other = keyword(node, "other") or (args[0] if args else None)
            operands = [receiver] if other is None else [receiver, self.domain.evaluate(other, env)]
            self._value_read(node, operands, loop)
        elif self.broad and method not in SAFE_METHODS:
            self._candidate(node, loop)

    def _repeat_interleave(self, node: cst.Call, repeats, receiver: Place, env, loop: bool) -> None:
        if repeats is None or keyword(node, "output_size") is not None or is_literal(repeats):
            return
        place = self.domain.evaluate(repeats, env)
        if self.broad:
            if self._maybe_device(place):
                self._candidate(node, loop)
        elif self._device_ish(place, tensor=True) and not receiver.is_host:
            self._hit(node, "implicit", "`repeat_interleave` with tensor repeats and no `output_size=`", None, loop)

    def _histc(self, node: cst.Call, place: Place, bounds: list[cst.BaseExpression], loop: bool) -> None:
        """``torch.histc(x)`` / ``x.histc()``: with ``min`` and ``max`` equal (both 0, the
        defaults), the range is the data's own, read on the host."""
        low = keyword(node, "min") or (bounds[0] if bounds else None)
        high = keyword(node, "max") or (bounds[1] if len(bounds) > 1 else None)
        if low is not None and high is not None and not (is_literal(low) and constant(low) == constant(high)):
            return
        if self.broad:
            if self._maybe_device(place):
                self._candidate(node, loop)
        elif self._device_ish(place):
            self._hit(node, "implicit", "`histc()` without `min=` / `max=` (its range is read from the data)", None, loop)

    def _value_read(self, node: cst.Call, operands: list[Place], loop: bool) -> None:
        """``torch.equal(a, b)`` / ``a.allclose(b)`` / ``t.is_nonzero()``: a Python bool computed
        from the data of tensors that must share a device, so one on the GPU makes it a sync.
        Tensor-only APIs: an operand of unknown device counts as for ``.item()``."""
        place = combine(operands)
        if self.broad:
            if self._maybe_device(place):
                self._candidate(node, loop)
        elif self._device_ish(place):
            self._hit(node, "implicit", "`{code}` (a Python bool read from tensor data)", node, loop)

    def _library_call(self, name: str, node: cst.Call, env, loop: bool) -> None:
        if not name.startswith("torch."):
            return
        short = name.rsplit(".", 1)[-1]
        args = positional(node)
        has_keywords = any(arg.keyword is not None for arg in node.args)
        if short in ("tensor", "as_tensor") and name.count(".") == 1:
            # Host data made straight on the GPU: a blocking copy from pageable memory.
            data = args[0] if args else keyword(node, "data")
            target = self.domain.device_argument(node, env)
            if self.uploads and data is not None and target is not None and target.is_device \
                    and self.domain.evaluate(data, env).is_host:
                self._hit(node, "upload", f"`torch.{short}()` made on the GPU from host data (a blocking copy)", None, loop)
            return
        # ``num_classes`` left out (or -1): the largest value, read on the host, sizes the output.
        wide_one_hot = short == "one_hot" and not _counts_classes(args[1] if len(args) > 1 else keyword(node, "num_classes"))
        if short in DATA_DEPENDENT_FUNCTIONS or (short == "where" and len(args) == 1 and not has_keywords) or wide_one_hot:
            first = args[0] if args else keyword(node, "input") or keyword(node, "condition")
            place = self.domain.evaluate(first, env) if first is not None else Place("unknown")
            what = "`one_hot()` without `num_classes=`" if wide_one_hot else f"`torch.{short}()`"
            if self.broad:
                self._candidate(node, loop)
            elif self._device_ish(place):
                self._hit(node, "implicit", f"{what} (its output size depends on the data)", None, loop)
        elif short in VALUE_READS and name.count(".") == 1:
            operands = [*args[:2], keyword(node, "input"), keyword(node, "other")]
            places = [self.domain.evaluate(operand, env) for operand in operands if operand is not None]
            self._value_read(node, places, loop)
        elif short == "histc" and name.count(".") == 1:
            place = self.domain.evaluate(args[0], env) if args else Place("unknown")
            self._histc(node, place, args[2:4], loop)
        elif short == "repeat_interleave":
            repeats = keyword(node, "repeats") or (args[1] if len(args) > 1 else args[0] if args else None)
            source = self.domain.evaluate(args[0], env) if len(args) > 1 else Place("unknown")
            self._repeat_interleave(node, repeats, source, env, loop)
        elif short in SIZE_FUNCTIONS and name.count(".") == 1:
            sizes = args[:1] if short == "full" else args
            for size in _flatten(sizes):
                self._read_on_host(size, f"the tensor `{{code}}` used as a Python int in `torch.{short}()`", env, loop)
        elif self.broad and not (short in SAFE_TORCH or name.startswith("torch.nn.functional.")):
            self._candidate(node, loop)

    def _builtin_call(self, name: str, node: cst.Call, env, loop: bool) -> None:
        args = positional(node)
        if name in PROTOCOL_BUILTINS and len(args) == 1:
            self._read_on_host(args[0], f"`{name}()` of the tensor `{{code}}`", env, loop, at=node)
            return
        if name in FORMATTING_BUILTINS:
            for arg in args if name == "print" else args[:1]:
                self._read_on_host(arg, f"`{name}()` of the tensor `{{code}}`{_AS_TEXT}", env, loop)
            return
        if name == "range":
            for arg in args:
                self._read_on_host(arg, "the tensor `{code}` used as a Python int in `range()`", env, loop)
            return
        if self.broad and name not in SAFE_BUILTINS:
            if any(not is_literal(a) and self._maybe_device(self.domain.evaluate(a, env)) for a in args):
                self._candidate(node, loop)

    def _read_on_host(self, value: cst.BaseExpression, template: str, env, loop: bool,
                      at: cst.CSTNode | None = None) -> None:
        """A site that reads ``value``'s data on the host (as a truth value, a Python int, text):
        a sync where it is a tensor on the GPU, or of unknown device where that counts; in broad
        mode, a candidate where it may be on the GPU. ``template`` names ``value`` as
        ``{code}``; ``at``: the node reported, ``value`` itself by default."""
        if is_literal(value):
            return
        place = self.domain.evaluate(value, env)
        at = value if at is None else at
        if self.broad:
            if self._maybe_device(place):
                self._candidate(at, loop)
        elif self._device_ish(place, tensor=True):
            self._hit(at, "implicit", template, value, loop)

    # -- callees --------------------------------------------------------------------------------
    def _callee(self, func: cst.BaseExpression, env) -> str | None:
        """The dotted name of a project function this call runs, if it can be told."""
        names = self.names
        module = names.module_name
        if isinstance(func, cst.Name):
            name = func.value
            if name in env:
                return None
            if name in self._nested:
                return f"{self.info.qualname}.{name}"
            if name in names.imports:
                full = names.resolve(func) or ""
                return None if full.split(".")[0] in LIBRARY_ROOTS else full
            if name in self.analysis.module_functions:
                return f"{module}.{name}" if module else name
            return None
        if not isinstance(func, cst.Attribute):
            return None
        base = func.value
        method = func.attr.value
        if isinstance(base, cst.Name) and base.value in ("self", "cls") and self.info.class_node is not None:
            return self.analysis.method_target(self.info.qualname.rsplit(".", 1)[0], self.info.class_node, method)
        if isinstance(base, cst.Call) and isinstance(base.func, cst.Name) and base.func.value == "super" \
                and self.info.class_node is not None:
            return self.analysis.base_method_target(self.info.class_node, method)
        written = dotted(func)
        if written is None:
            return None
        head = written.split(".")[0]
        if head in env:
            return None
        if head in names.imports:
            full = names.resolve(func) or ""
            return None if full.split(".")[0] in LIBRARY_ROOTS else full
        if head in self.analysis.module_classes:
            return f"{module}.{written}" if module else written
        return None


def _flatten(nodes):
    for node in nodes:
        if isinstance(node, (cst.Tuple, cst.List)):
            yield from _flatten(e.value for e in node.elements)
        else:
            yield node


def _expression_children(node: cst.CSTNode):
    """The sub-expressions an expression evaluates (Call and Subscript are handled by the caller).
    Written out per node type: libcst's generic ``children`` runs a visitor, too slow here."""
    kind = type(node)
    if kind in _LEAVES:
        return ()
    if kind is cst.Attribute:
        return (node.value,)
    if kind is cst.BinaryOperation:
        return (node.left, node.right)
    if kind is cst.Comparison:
        return (node.left, *(target.comparator for target in node.comparisons))
    if kind is cst.UnaryOperation:
        return (node.expression,)
    if kind in (cst.Tuple, cst.List, cst.Set):
        return tuple(element.value for element in node.elements)
    if kind is cst.Dict:
        pairs = ((e.key, e.value) if isinstance(e, cst.DictElement) else (e.value,) for e in node.elements)
        return tuple(value for pair in pairs for value in pair)
    if kind is cst.FormattedString:
        return tuple(part.expression for part in node.parts if isinstance(part, cst.FormattedStringExpression))
    if kind is cst.ConcatenatedString:
        return (node.left, node.right)
    if kind is cst.Await:
        return (node.expression,)
    if kind is cst.Yield:
        value = node.value.item if isinstance(node.value, cst.From) else node.value
        return (value,) if value is not None else ()
    if kind in (cst.NamedExpr, cst.StarredElement):
        return (node.value,)
    return tuple(child for child in node.children if isinstance(child, cst.BaseExpression))


# GPU205's sites: a blocking copy onto the GPU, and a call of a function that may make one.
UPLOAD_RULE = "GPU205"
_UPLOAD_KINDS = ("upload", "upload-call")

# The ``if`` tests a run-once region may have (``guards.OnceRegions``): a cheap first filter.
_STATE_TEST_KINDS = frozenset({cst.Comparison, cst.UnaryOperation, cst.Name, cst.Attribute, cst.Call, cst.BooleanOperation})
_LEAVES = frozenset({cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis})
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_SUSPENSIONS = (cst.Await, cst.Yield)


class SyncAnalysis:
    """Every sync site of a file, its stale declarations, and the functions' sync summaries."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.hot = ctx.get(HotScopes)
        self.declarations = ctx.get(Declarations)
        self.opt_in = opt_in_checks(ctx.module)  # names of checks off unless the environment sets them
        self.policy = ctx.settings["unknown-device"]
        # Blocking copies onto the GPU are looked for only where the rule that reports them runs.
        self.finds_uploads = ctx.runs(UPLOAD_RULE)
        self.sites: list[SyncSite] = []
        self.stale: list[DeclarationBlock] = []
        # A stale block (by ``id`` of its node) -> the host copies it reads of objects whose class
        # is not seen here: stale only if the project defines no property of those names
        # (``_host_copies_read``).
        self.stale_unless: dict[int, frozenset[str]] = {}
        self.functions = {info.qualname: info for info in self.hot.functions}
        self.module_functions = {s.name.value for s in ctx.module.body if isinstance(s, cst.FunctionDef)}
        self.module_classes = {s.name.value for s in ctx.module.body if isinstance(s, cst.ClassDef)}
        self.module_names = self.module_functions | self.module_classes
        self._lines: _Lines | None = None
        self._may_sync: dict[str, bool] = {}
        self._context_cache: dict[int, _Contexts] = {}
        self._clean: dict[tuple, object] = {}  # ``clean_with_arguments``' and ``upload_with_arguments``' answers
        self._on_device: dict[tuple, str | None] = {}  # ``sync_on_device_arguments``' answers
        self._attributes: ClassAttributes | None = None
        self._analysed: dict[int, bool] = {}  # id(function node) -> done (False: in progress)
        self._own_hits: set[str] = set()  # functions with an undeclared sync site of their own
        self._bindings: dict[int, _Bindings] = {}  # id(function node) -> its bindings
        self._not_none: dict[int, _NamesNotNone] = {}  # id(function node) -> its names certainly not None
        self._cached_names: dict[int, set[str]] = {}  # id(function node) -> ``cached_call``'s names
        for info in self.hot.functions:
            self._ensure_analysed(info)

    # -- queries for the rules ------------------------------------------------------------------
    def hot_sites(self, kinds: tuple[str, ...], undeclared: bool = True) -> list[SyncSite]:
        return [s for s in self.sites if s.kind in kinds and (s.undeclared if undeclared else not (s.off_path or s.once))]

    def describe(self, site: SyncSite) -> str:
        return self._described(site.template, site.subject)

    def _syncs_with(self, info: FunctionInfo, template: str, subject: cst.CSTNode | None, node: cst.CSTNode) -> str:
        """Why a function syncs by a site of its own: "syncs with `.item()` on `x` (line 4)"."""
        return f"syncs with {self._described(template, subject)} (line {self.line(info, node)})"

    def _described(self, template: str, subject: cst.CSTNode | None) -> str:
        """A site's ``template`` with its ``subject``'s code in place of ``{code}``."""
        if subject is None or "{code}" not in template:
            return template
        return template.replace("{code}", shortened(one_line(self.ctx.module, subject), keep_end=True))

    def describe_declaration(self, block: DeclarationBlock) -> str:
        """``with gpu_sync_allowed():`` as written (shortened)."""
        return f"with {shortened(one_line(self.ctx.module, block.node.items[block.item].item))}:"

    def line(self, info: FunctionInfo, node: cst.CSTNode) -> int:
        return self._line_finder().line(info, node)

    def _line_finder(self) -> _Lines:
        if self._lines is None:
            self._lines = _Lines(self.ctx, self.hot.functions)
        return self._lines

    # -- per function ---------------------------------------------------------------------------
    def _class_attributes(self, info: FunctionInfo):
        if info.class_node is None:
            return {}
        if self._attributes is None:
            self._attributes = self.ctx.get(ClassAttributes)
        return self._attributes.of(info.class_node.name.value)

    def _contexts(self, info: FunctionInfo) -> _Contexts:
        found = self._context_cache.get(id(info.node))
        if found is None:
            declarations = self.declarations
            context_names = declarations.context_names(info.node) if declarations.mentioned else set()
            found = self._context_cache[id(info.node)] = _Contexts(self.ctx, info, declarations, self.hot,
                                                                    context_names, self.opt_in)
        return found

    def _ensure_analysed(self, info: FunctionInfo) -> None:
        """Analyse ``info`` now, unless it is done or in progress (``clean_with_arguments`` asks
        about a callee defined further down)."""
        if id(info.node) not in self._analysed:
            self._analysed[id(info.node)] = False
            self._analyse(info)
            self._analysed[id(info.node)] = True

    def _analyse(self, info: FunctionInfo) -> None:
        hot = self.hot.of(info)
        contexts = self._contexts(info)
        if not hot.cold or contexts.has_graph:
            summarised = self._find_sites(info, hot, contexts)
            if summarised:
                self._flag_conditions(info, hot, contexts, summarised)
        if contexts.blocks:
            self._find_stale(info, contexts)

    def _flag_conditions(self, info: FunctionInfo, hot: Hotness, contexts: _Contexts, summarised: set[int]) -> None:
        """A sync of the summary that arises only where a flag parameter is true (or false):
        ``if return_host: out.cpu()``. As for contiguity needs (``analysis.flags``): the function
        is walked again under each truth of the flags it tests around a summarised site, and a
        sync or a syncing call that walk no longer finds is excused where a call binds the flag
        so (``FunctionSummary.sync_unless``, ``SyncCall.unless``). In a file the calls of its own
        functions are judged with their arguments bound anyway (``clean_with_arguments``)."""
        summary = self.ctx.summaries.get(info.qualname)
        if summary is None:
            return
        counts = self._bindings_of(info).counts
        for flag, truth in flag_tests(info.node, info.params, set(), summarised, bind_count=counts.__getitem__):
            if flag in counts and truth is not NOT_NONE:  # ``flag_tests`` vetted where it rebinds that
                continue
            scratch = FunctionSummary(info.qualname, info.params, self.ctx.path, positional=info.positional)
            with span("analysis SyncAnalysis: walks under a flag"):
                self._find_sites(info, hot, contexts, (flag, truth), scratch)
            unless = frozenset({(flag, truth)})
            if summary.sync is not None and scratch.sync is None:
                summary.sync_unless |= unless
            made = {(call.callee, call.line) for call in scratch.sync_calls}
            summary.sync_calls = excuse_vanished(summary.sync_calls, made, lambda call: (call.callee, call.line), unless)
        summary.flag_defaults.update(flag_defaults(info.node))

    def _find_sites(self, info: FunctionInfo, hot: Hotness, contexts: _Contexts,
                    assume: tuple[str, bool] | None = None, into: FunctionSummary | None = None) -> set[int]:
        """Record the function's sync sites: hot ones for the rules, the others into its summary;
        the statements that summarised one (by ``id``). With ``assume`` (a flag parameter's
        truth), the summary's only into ``into`` (``_flag_conditions``)."""
        report_unknown = self.policy == "always" or (self.policy == "hot-classes" and hot.hot_class)
        domain = DeviceDomain(self.ctx.names, self._class_attributes(info))
        scanner = _Scanner(self, info, domain, report_unknown, device_args=assume is None,
                           uploads=assume is None and not hot.compiled and self.finds_uploads)
        decorated = self.declarations.mentioned and self.declarations.decorates(info.node)
        short = f"{info.class_name}.{info.name}" if info.class_name else info.name
        graph_scope = f"code captured by `torch.cuda.graph` in `{short}`"
        summarised: set[int] = set()
        lines = self._line_finder()
        lines.restart(info)

        def on_statement(node, env) -> None:
            flags = contexts.flags.get(id(node))
            if flags is None or (hot.cold and not flags.graph):
                return
            for hit in scanner.scan(node, env, flags.loop):
                scope = hot.reason or (graph_scope if flags.graph else None)
                if scope is None:
                    # Every site's line in turn, summarised or not: a site's line is found by its
                    # text after the last one found (``_Lines``), and a declared or debug-only
                    # call of the same function earlier would be found for it.
                    lines.line(info, hit.node)
                site = SyncSite(
                    node=hit.node, kind=hit.kind, template=hit.template, subject=hit.subject,
                    statement=flags.wrap, scope=scope,
                    in_loop=hit.in_loop, declared=flags.declared or decorated, off_path=flags.off_path, callee=hit.callee,
                    once=flags.once and not flags.graph,  # a capture fails on its first sync too
                    through=hit.through, on_device=hit.on_device, device_args=hit.device_args,
                    # What a hot call binds (a summarised one records its own, ``_summarise``).
                    flags=self._call_flags(info, hit.node, frozenset()) if hit.kind == "call" and scope else (),
                    devices=hit.devices,
                )
                if site.kind in _UPLOAD_KINDS:  # GPU205's (met in this walk alone): no sync to the others
                    if site.scope is not None:
                        self.sites.append(site)
                    elif site.undeclared:
                        self._summarise_upload(info, site)
                    continue
                if into is not None:
                    if site.scope is None and site.undeclared:
                        self._summarise(info, site, into)
                    continue
                if site.undeclared:
                    self._own_hits.add(info.qualname)
                if site.scope is not None:
                    self.sites.append(site)
                elif site.undeclared:
                    self._summarise(info, site, self.ctx.summary(info))
                    summarised.add(id(node))

        env = initial_env(info.node.params)
        # Only flags the function never rebinds are assumed (``_flag_conditions``): a place does
        # not tell a rebound parameter from the one passed.
        domain.decide = deciding({assume[0]: assume[1]}) if assume is not None else None
        _walk(Walker(domain, on_statement, domain.decide), info.node, env)
        if assume is None and scanner.explicit_calls and hot.reason is None and not hot.cold and not decorated:
            self._record_syncs_on(info)
        return summarised

    def _record_syncs_on(self, info: FunctionInfo) -> None:
        """The parameters a summarised function with no sync of its own makes an explicit sync
        on (``FunctionSummary.syncs_on``): a call of it from another file that hands a GPU
        value there syncs (one from this file is walked with its arguments bound instead:
        ``sync_on_device_arguments``). One walk with every parameter on the GPU finds whether
        there is any; then one walk per parameter tells which."""
        summary = self.ctx.summaries.get(info.qualname)
        if (summary is not None and summary.sync is not None) or not info.params:
            return
        if self._walk_bound(info, dict.fromkeys(info.params, DEVICE), {}, explicit_only=True)[0] is None:
            return
        for param in info.params:
            why = self._walk_bound(info, {param: DEVICE}, {}, explicit_only=True)[0]
            if why is not None:
                self.ctx.summary(info).syncs_on[param] = why

    def _summarise(self, info: FunctionInfo, site: SyncSite, summary: FunctionSummary) -> None:
        if site.on_device is not None:
            summary.record_sync(self._calling(site.callee, self.line(info, site.node), site.on_device))
        elif site.kind == "call":
            if site.callee != info.qualname:
                flags = self._call_flags(info, site.node, flag_params(info.node) | none_params(info.node))
                summary.sync_calls.append(SyncCall(site.callee, self.line(info, site.node), flags=flags,
                                                   through=site.through, device_args=site.device_args))
        elif summary.sync is None:
            summary.record_sync(self._syncs_with(info, site.template, site.subject, site.node))

    def _summarise_upload(self, info: FunctionInfo, site: SyncSite) -> None:
        """A blocking copy of the function's own, or a call whose bound arguments tell that it
        makes one; a call of which the callee's summary decides (or those of the calls its walk
        with the arguments bound still meets) is left to the project's closure (``upload_calls``)."""
        summary = self.ctx.summary(info)
        if summary.upload is not None:
            return
        if not summary.upload_calls and not summary.uploads_to:
            summary.host_defaults = _host_defaults(info.node.params)
        why = self._uploads_with(info, site)
        param = _device_parameter(site.node, info) if site.kind == "upload" else None
        if why is not None and param is not None:
            summary.uploads_to.setdefault(param, why)  # onto the device it is handed
        elif why is not None:
            summary.upload = why
        elif site.through:
            summary.upload_calls.extend(UploadCall(name, line) for name, line in site.through)
        elif site.callee is not None:
            summary.upload_calls.append(UploadCall(site.callee, self.line(info, site.node), site.devices))

    def _uploads_with(self, info: FunctionInfo, found: SyncSite | _Hit) -> str | None:
        """Why a function makes a blocking copy onto the GPU by a site of its own (an "upload", or
        an "upload-call" its arguments decide: "copies onto the GPU with `torch.tensor()` ...
        (line 4)"); None for a call whose callee's summary decides."""
        line = self.line(info, found.node)
        if found.kind == "upload":
            return f"copies onto the GPU with {self._described(found.template, found.subject)} (line {line})"
        if found.template and found.callee is not None:
            return f"calls `{found.callee.rsplit('.', 1)[-1]}` (line {line}), which {found.template}"
        return None

    # -- stale declarations ---------------------------------------------------------------------
    def _find_stale(self, info: FunctionInfo, contexts: _Contexts) -> None:
        live: set[int] = set()
        domain = DeviceDomain(self.ctx.names, self._class_attributes(info))
        scanner = _Scanner(self, info, domain, report_unknown=True, broad=True)

        read: dict[int, set[str]] = {}  # block -> the host copies it reads that may be properties

        def on_statement(node, env) -> None:
            flags = contexts.flags.get(id(node))
            if flags is None or not flags.blocks or all(id(b) in live for b in flags.blocks):
                return
            if scanner.may_sync(node, env):
                live.update(id(b) for b in flags.blocks)
                return
            copies = self._host_copies_read(info, scanner.roots(node))
            if copies is None:
                live.update(id(b) for b in flags.blocks)
            elif copies:
                for block in flags.blocks:
                    read.setdefault(id(block), set()).update(copies)

        _walk(Walker(domain, on_statement), info.node, initial_env(info.node.params))
        for block in contexts.blocks:
            if id(block.node) not in live:
                self.stale.append(block)
                if id(block.node) in read:
                    self.stale_unless[id(block.node)] = frozenset(read[id(block.node)])

    def _host_copies_read(self, info: FunctionInfo, expressions: list[cst.BaseExpression]) -> set[str] | None:
        """The attributes named for a host copy (``common.seq_lens_cpu``, ``batch.positions_np``:
        ``device_words.names_host_copy``) that ``expressions`` read and that may be properties of a
        class not seen here; None where one is a property of this file's own class. A property
        that makes the copy on first read syncs there (vLLM's ``CommonAttentionMetadata.
        seq_lens_cpu`` was one: ``self.seq_lens.to("cpu")``), so a sync declaration around the
        read is stale only if no such property exists (``ProjectIndex.reason``, kind
        "host-copy"). ``self.``'s own fields are no properties. Calls and nested functions
        aside: the scanner judges those."""
        names: set[str] = set()
        todo = list(expressions)
        while todo:
            node = todo.pop()
            if isinstance(node, (cst.Lambda, cst.FunctionDef)):
                continue
            if isinstance(node, cst.Call):
                todo.extend(arg.value for arg in node.args)
                func = node.func
                todo.append(func.value if isinstance(func, cst.Attribute) else func)  # a method is a call
                continue
            if isinstance(node, cst.Attribute) and names_host_copy(node.attr.value):
                owner, name = node.value, node.attr.value
                if not (isinstance(owner, cst.Name) and owner.value == "self"):
                    names.add(name)
                elif info.class_node is not None and (
                    _defines(info.class_node, name)
                    or self.ctx.masks_method(info.class_node, info.qualname.rsplit(".", 1)[0], name)
                ):
                    return None
                elif self._has_unseen_base(info):
                    names.add(name)
            todo.extend(children(node))
        return names

    def _has_unseen_base(self, info: FunctionInfo) -> bool:
        """Has the function's class a base of another file (whose properties are not seen here)?"""
        if info.class_node is None:
            return True
        return any(self.hot._classes.get(self.ctx.names.resolve_dotted(base_class_name(arg.value))) is None
                   for arg in info.class_node.bases if arg.keyword is None)  # fmt: skip

    def clean_with_arguments(self, bound: BoundCall | None) -> bool | Through:
        """Is a call of a function of this file sync-free with the arguments this call passes?
        Its summary judges its parameters as of unknown device (reported in hot classes), so a
        helper that reads ``lens.tolist()`` syncs by its summary; called with a CPU tensor
        (``self._padded_len(qo_len_cpu)``) it does not. Its summary also counts every branch,
        while a constant argument, or a parameter left at a constant default, may decide the
        ``if`` that leads to the sync (``plan(lens, split=False)``; vLLM ``_fmha_sm100_plan``'s
        ``if kv_block_num > 0 and ...:`` with ``kv_block_num=-1``): the branch the constants rule
        out is not looked at. True when the callee, walked with the CPU-tensor arguments bound,
        has no sync site left outside those branches; the calls that walk still meets
        (``Through``) when it has only those: the call then syncs only if one of them does, which
        the project's summaries decide. False otherwise: its summary decides, as for any call
        (and for a call ``bind_call`` cannot bind: None)."""
        if bound is None:
            return False
        qualname, info = bound.qualname, bound.info
        host = {name: place for name, place in bound.places.items() if place.is_host}
        constants = self._constants(bound.passed, bound.params)
        if not host and not constants:
            return False  # nothing the summary did not assume (Python values do not sync
            # through a parameter of unknown device: ``int(n)`` needs a known tensor)
        self._ensure_analysed(info)
        if not self._analysed[id(info.node)] or qualname not in self._own_hits:
            return False  # in progress (recursion), or nothing to take back: its summary is empty
        key = (qualname, tuple(sorted(host)), tuple(sorted((n, type(v).__name__, v) for n, v in constants.items())))
        if key in self._clean:
            return self._clean[key]
        self._clean[key] = False  # while looking (recursion): not known to be clean
        self._clean[key] = clean = self._clean_with(info, host, constants)
        return clean

    def upload_with_arguments(self, bound: BoundCall | None) -> tuple[str | None, Through] | None:
        """GPU205's ``clean_with_arguments``: does a call of a function of this file make a
        blocking copy onto the GPU, with the CPU tensors and constants it passes? Its summary
        counts every branch (``plan(lens, split=False)`` may skip the one that copies). None: the
        summary decides (nothing bound that it did not assume, or it has no copy to take back);
        else the bound walk's first copy of its own, described (None: none), and the calls it
        still meets, whose summaries decide."""
        if bound is None:
            return None
        host = {name: place for name, place in bound.places.items() if place.is_host}
        constants = self._constants(bound.passed, bound.params)
        if not host and not constants:
            return None
        qualname, info = bound.qualname, bound.info
        self._ensure_analysed(info)
        summary = self.ctx.summaries.get(qualname)
        if not self._analysed[id(info.node)] or summary is None or not (
                summary.upload or summary.uploads_to or summary.upload_calls):
            return None  # in progress (recursion), or no copy its summary could tell of
        live = self._deciding_constants(info, constants) if constants else {}
        if not host and not live:
            return None
        key = ("upload", qualname, tuple(sorted(host)),
               tuple(sorted((n, type(v).__name__, v) for n, v in live.items())))
        if key not in self._clean:
            self._clean[key] = None  # while looking (recursion): the summary decides
            self._clean[key] = self._walk_bound(info, host, live, uploads=True)
        return self._clean[key]

    def _clean_with(self, info: FunctionInfo, host: dict[str, Place], constants: dict[str, object]) -> bool | Through:
        if self.declarations.mentioned and self.declarations.decorates(info.node):
            return True
        live = self._deciding_constants(info, constants) if constants else {}
        if not host and not live:
            return False  # walked as its summary was
        own, through = self._walk_bound(info, host, live)
        if own is not None:
            return False
        return through or True

    def sync_on_device_arguments(self, bound: BoundCall | None) -> tuple[str, str] | None:
        """Whether a call of a function of this file syncs on the GPU tensors it passes, where the
        function's summary finds no sync of its own: the summary judges its parameters as of
        unknown device (``unknown-device``), so ``def max_len(x): return x.max().item()`` does
        not sync by it, yet ``max_len(lens)`` with ``lens`` on the GPU does (SGLang
        ``resolve_max_seqlen(source, cu_seqlens)`` in a vision attention's ``forward``). The
        function is walked with the call's GPU and CPU tensors bound, and the constants that
        decide its branches (as ``clean_with_arguments``), to its first undeclared sync site, or
        a call of a function of this file that syncs on a GPU tensor it hands on: what the call
        hands over ("the GPU tensor `lens`") and why the function then syncs ("syncs with ...
        (line 4)"). None where the call passes no GPU tensor, or the walk finds no such site (its
        other calls are the summary's to judge). A function of another file is not looked into:
        its summary does not tell which parameters it syncs on (``FunctionSummary.syncs_on``)."""
        if bound is None:
            return None
        qualname, info, passed, places = bound.qualname, bound.info, bound.passed, bound.places
        on_device = sorted(name for name, place in places.items() if place.is_device)
        if not on_device:
            return None
        self._ensure_analysed(info)
        if not self._analysed[id(info.node)]:
            return None  # in progress (recursion)
        summary = self.ctx.summaries.get(qualname)
        if summary is not None and summary.sync is not None:
            return None  # it syncs whatever it is handed: its summary tells why
        if self.declarations.mentioned and self.declarations.decorates(info.node):
            return None
        constants = self._constants(passed, bound.params)
        live = self._deciding_constants(info, constants) if constants else {}
        key = (qualname, tuple(sorted(places.items(), key=lambda item: item[0])),
               tuple(sorted((n, type(v).__name__, v) for n, v in live.items())))  # fmt: skip
        if key not in self._on_device:
            self._on_device[key] = None  # while looking (recursion): no sync found
            self._on_device[key] = self._walk_bound(info, places, live)[0]
        why = self._on_device[key]
        if why is None:
            return None
        if len(on_device) > 1:
            return "GPU values", why
        kind = "tensor" if places[on_device[0]].tensor else "value"  # ``x.to(device)``: maybe a module
        return f"the GPU {kind} `{shortened(one_line(self.ctx.module, passed[on_device[0]]))}`", why

    @staticmethod
    def _calling(callee: str, line: int, on_device: tuple[str, str]) -> str:
        """Why a function syncs through a call of ``callee`` at ``line`` that hands it GPU
        tensors (``sync_on_device_arguments``)."""
        handed, why = on_device
        return f"calls `{callee.rsplit('.', 1)[-1]}` (line {line}) with {handed}, which {why}"

    def bind_call(self, qualname: str, call: cst.Call, env, domain: DeviceDomain) -> BoundCall | None:
        """What a call of a function of this file that has a summary binds (``BoundCall``); None
        for another file's function, where that cannot be told (``*args`` in the call, a method
        not called through ``self`` / ``cls`` / ``super()``), or for a function with no summary
        (a hot or cold one: its sites are reported where they are, or nowhere)."""
        info = self.functions.get(qualname)
        if info is None or any(arg.star for arg in call.args):
            return None
        hot = self.hot.of(info)
        if hot.cold or hot.reason is not None:
            return None
        params = info.node.params
        positional = list(positional_params(params))
        func = call.func
        if info.is_method:  # ``self`` / ``cls`` is bound
            bound_self = type(func) is cst.Attribute and (
                (type(func.value) is cst.Name and func.value.value in ("self", "cls"))
                or (type(func.value) is cst.Call and dotted(func.value.func) == "super"))
            if not bound_self or not positional:
                return None
            positional = positional[1:]
        passed = _passed_arguments(positional, call)
        if passed is None:
            return None
        return BoundCall(qualname, info, passed, [*positional, *params.kwonly_params],
                         self._known_places(passed, env, domain))

    @staticmethod
    def _constants(passed: dict[str, cst.BaseExpression], params: list[cst.Param]) -> dict[str, object]:
        """The parameters a call binds to constants, passed or left to a constant default."""
        return {
            param.name.value: value
            for param in params
            if (value := constant(passed.get(param.name.value, param.default))) is not NOT_CONSTANT
        }

    @staticmethod
    def _known_places(passed: dict[str, cst.BaseExpression], env, domain: DeviceDomain) -> dict[str, Place]:
        """The parameters a call binds to tensors known to be on the host, or to values known to
        be on the GPU (``x.to(device)``: a tensor or a module), with their places; and to host
        devices (``device="cpu"``)."""
        places: dict[str, Place] = {}
        for name, value in passed.items():
            named = domain.device_value(value, env)
            if named is not None and named.is_host:
                places[name] = HOST_DEVICE  # ``.to(device)`` there copies nothing onto the GPU
            elif not is_literal(value):
                place = domain.evaluate(value, env)
                if place.is_device or (place.is_host and place.tensor):
                    places[name] = place
        return places

    def _walk_bound(self, info: FunctionInfo, bound: dict[str, Place], live: dict[str, object],
                    explicit_only: bool = False, uploads: bool = False) -> tuple[str | None, Through]:
        """Walk ``info`` with parameters ``bound`` to places and ``live`` constants deciding its
        branches (``_deciding_constants``): its first undeclared sync site of its own, described
        with its line (None: none), and the calls of project functions the walk meets before it
        (all of them, where it meets none). ``explicit_only``: its first explicit sync
        (``.item()``, ``.tolist()``, ``.cpu()``...), calls aside. ``uploads``: its first blocking
        copy onto the GPU instead of a sync, and the calls whose summaries may tell of one."""
        contexts = self._contexts(info)
        hot = self.hot.of(info)
        report_unknown = self.policy == "always" or (self.policy == "hot-classes" and hot.hot_class)
        domain = DeviceDomain(self.ctx.names, self._class_attributes(info))
        scanner = _Scanner(self, info, domain, report_unknown, calls=not explicit_only, uploads=uploads)
        own: str | None = None
        through: list[tuple[str, int]] = []

        lines = self._line_finder()

        def on_statement(node, env) -> None:
            nonlocal own
            if own is not None:
                return
            flags = contexts.flags.get(id(node))
            if flags is None:
                return
            if flags.declared or flags.off_path or (flags.once and not flags.graph):
                lines.skip(info, node)  # not scanned: its lines are passed over (``_Lines``)
                return
            for hit in scanner.scan(node, env, flags.loop):
                lines.line(info, hit.node)  # each in turn, as ``_find_sites``
                if uploads:
                    if hit.kind in _UPLOAD_KINDS:
                        own = self._uploads_with(info, hit)
                        if own is not None:
                            return
                        through.extend(hit.through or ((hit.callee, self.line(info, hit.node)),))
                    continue
                if explicit_only and hit.kind != "explicit":
                    continue
                if hit.on_device is not None:
                    own = self._calling(hit.callee, self.line(info, hit.node), hit.on_device)
                    return
                if hit.kind != "call":
                    own = self._syncs_with(info, hit.template, hit.subject, hit.node)
                    return
                # A call judged by its own arguments (``hit.through``) counts here by the
                # callee's summary: coarser, never missing a sync.
                through.append((hit.callee, self.line(info, hit.node)))

        env = initial_env(info.node.params)
        env.update(bound)
        domain.decide = deciding(live) if live else None
        lines.restart(info)
        _walk(Walker(domain, on_statement, domain.decide), info.node, env)
        return own, tuple(dict.fromkeys(through))

    def _deciding_constants(self, info: FunctionInfo, constants: dict[str, object]) -> dict[str, object]:
        """The ``constants`` a walk of ``info`` may decide its ``if`` tests by (none: they decide
        none). A parameter the function rebinds (``split = split or 4``) decides nothing; that is
        looked up only when some test is decided (most calls pass constants that decide none)."""
        if not decides_any(info.node, constants):
            return {}
        rebound = self._bindings_of(info).counts
        live = {name: value for name, value in constants.items() if name not in rebound}
        return live if len(live) == len(constants) or decides_any(info.node, live) else {}

    def _call_flags(self, info: FunctionInfo, call: cst.CSTNode, handed: frozenset[str]) -> CallFlags:
        """What a call in ``info`` binds its callee's flags to (``flags.call_flags``): literals,
        values certainly not ``None``, and ``handed`` (the flag parameters of ``info`` it may
        pass on) where still as passed."""
        if type(call) is not cst.Call:
            return ()
        counts = self._bindings_of(info).counts
        return call_flags(call, handed, lambda name: name not in counts,
                          lambda node: not_none(node, self._names_not_none(info)))

    def _names_not_none(self, info: FunctionInfo) -> _NamesNotNone:
        known = self._not_none.get(id(info.node))
        if known is None:
            known = self._not_none[id(info.node)] = _NamesNotNone(info.node, self._bindings_of(info))
        return known

    def _bindings_of(self, info: FunctionInfo) -> _Bindings:
        found = self._bindings.get(id(info.node))
        if found is None:
            found = self._bindings[id(info.node)] = _Bindings(info.node, ":=" in self.ctx.source.text)
        return found

    def cached_call(self, qualname: str, call: cst.Call, caller: FunctionInfo) -> bool:
        """Does ``call`` run a memoised function of this file (``functools.lru_cache`` / ``cache``)
        whose body runs once per key, not once per step? A tensor is hashed by identity, so a
        tensor argument made per step misses the cache every step (``HotScopes._memoized`` leaves
        such functions hot); but a tensor the cache itself handed out, the result of a memoised
        call (directly, or through a name of ``caller`` bound once to one), is the same object for
        the same key: SGLang ``get_non_pad_index(construct_variable_block_sizes(shape, tiles,
        device), n)``. Other arguments are keys, as for ``HotScopes._memoized``."""
        info = self.functions.get(qualname)
        if info is None or self.hot.memoized_tensor_params(info) is None:
            return False
        bindings = self._bindings_of(caller)
        shadowed = set(bindings.counts) | set(caller.all_params)  # local names are not the module's
        names = self._cached_names.get(id(caller.node))
        if names is None:
            names = self._cached_names[id(caller.node)] = set()
            for assign in bindings.assigns:  # in source order: a name may feed a later call
                target = assign.targets[0].target
                if len(assign.targets) == 1 and type(target) is cst.Name and bindings.counts[target.value] == 1 \
                        and target.value not in caller.all_params and self._handed_out(assign.value, names, shadowed):
                    names.add(target.value)
        return self._cache_hit(qualname, call, names, shadowed)

    def _cache_hit(self, qualname: str, call: cst.Call, names: set[str], shadowed: set[str]) -> bool:
        info = self.functions.get(qualname)
        tensors = None if info is None else self.hot.memoized_tensor_params(info)
        if tensors is None:
            return False
        params = info.node.params
        passed = _passed_arguments(list(positional_params(params)), call)
        return passed is not None and all(
            is_literal(passed[name]) or self._handed_out(passed[name], names, shadowed)
            for name in tensors if name in passed
        )

    def _handed_out(self, node: cst.BaseExpression, names: set[str], shadowed: set[str]) -> bool:
        """Is ``node`` an object a memoised function's cache returned (see ``cached_call``)?"""
        if type(node) is cst.Name:
            return node.value in names
        if type(node) is not cst.Call or type(node.func) is not cst.Name:
            return False
        name = node.func.value
        if name not in self.module_functions or name in shadowed:
            return False
        module = self.ctx.names.module_name
        return self._cache_hit(f"{module}.{name}" if module else name, node, names, shadowed)

    def function_may_sync(self, qualname: str) -> bool:
        """Broadly: may calling this function sync? Unknown (other files') functions may."""
        if qualname in self._may_sync:
            return self._may_sync[qualname]
        info = self.functions.get(qualname)
        if info is None:
            return True
        self._may_sync[qualname] = True  # while looking (recursion): assume it may
        found = False
        domain = DeviceDomain(self.ctx.names, self._class_attributes(info))
        scanner = _Scanner(self, info, domain, report_unknown=True, broad=True)

        def on_statement(node, env) -> None:
            nonlocal found
            if not found and not isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                found = scanner.may_sync(node, env)

        _walk(Walker(domain, on_statement), info.node, initial_env(info.node.params))
        self._may_sync[qualname] = found
        return found

    # -- method resolution ----------------------------------------------------------------------
    def method_target(self, class_qualname: str, class_node: cst.ClassDef, method: str, depth: int = 0) -> str | None:
        """``self.<method>`` of ``class_node``: defined there (parsed, or masked out of the parse:
        ``FileContext.masks_method``), in a base of this file, or (as a guess the project index
        may confirm) in its first base of another file."""
        if _defines(class_node, method) or self.ctx.masks_method(class_node, class_qualname, method):
            return f"{class_qualname}.{method}"
        if depth > 8:
            return None
        return self.base_method_target(class_node, method, depth)

    def base_method_target(self, class_node: cst.ClassDef, method: str, depth: int = 0) -> str | None:
        names = self.ctx.names
        for arg in class_node.bases:
            if arg.keyword is not None:
                continue
            written = base_class_name(arg.value)
            if not written:
                continue
            resolved = names.resolve_dotted(written)
            local = self.hot._classes.get(resolved)
            if local is not None:
                found = self.method_target(resolved, local, method, depth + 1)
                if found is not None:
                    return found
                continue
            if resolved.split(".")[0] in LIBRARY_ROOTS or written in ("object", "Generic", "ABC", "Protocol"):
                continue
            return f"{resolved}.{method}"
        return None


def _defines(class_node: cst.ClassDef, method: str) -> bool:
    body = class_node.body.body if isinstance(class_node.body, cst.IndentedBlock) else ()
    return any(isinstance(s, cst.FunctionDef) and s.name.value == method for s in body)


def _passed_arguments(positional_params, call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    """Parameter name -> the argument ``call`` passes for it; None when that cannot be told
    (``*args`` / ``**kwargs`` in the call, more positional arguments than parameters)."""
    passed: dict[str, cst.BaseExpression] = {}
    index = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None:
            passed[arg.keyword.value] = arg.value
        elif index < len(positional_params):
            passed[positional_params[index].name.value] = arg.value
            index += 1
        else:
            return None  # into ``*args``
    return passed


class _Bindings:
    """The names a function body binds, with how often (assignments, ``for`` / ``with`` /
    ``except`` / ``import`` / walrus / ``case`` targets, ``del``, nested ``def`` / ``class``), and
    its ``=`` assignments in source order. Counted broadly: a name bound in a nested function
    counts too (it only makes a name look less constant). A walk over statements, which looks
    into expressions only for a walrus, in modules that have one (``_bind_captured``)."""

    def __init__(self, function: cst.FunctionDef, walrus: bool) -> None:
        self.counts: Counter[str] = Counter()
        self.assigns: list[cst.Assign] = []
        self._block(function.body)
        if walrus:
            self._bind_captured(function.body)

    def bind(self, target: cst.BaseExpression) -> None:
        kind = type(target)
        if kind is cst.Name:
            self.counts[target.value] += 1
        elif kind in (cst.Tuple, cst.List):
            for element in target.elements:
                self.bind(element.value)
        elif kind is cst.StarredElement:
            self.bind(target.value)

    def _block(self, block) -> None:
        for statement in block_statements(block):
            kind = type(statement)
            if kind is cst.SimpleStatementLine:
                for small in statement.body:
                    self._small(small)
            elif kind is cst.For:
                self.bind(statement.target)
            elif kind is cst.With:
                for item in statement.items:
                    if item.asname is not None:
                        self.bind(item.asname.name)
            elif kind is cst.Try or kind is cst.TryStar:
                for handler in statement.handlers:
                    if handler.name is not None:
                        self.bind(handler.name.name)
            elif kind is cst.Match:
                for case in statement.cases:
                    self._bind_captured(case.pattern)
            elif kind is cst.FunctionDef or kind is cst.ClassDef:
                self.bind(statement.name)
                continue  # its body binds its own names
            else:
                self._small(statement)  # a ``def f(): return x`` body, or none
            for inner in inner_blocks(statement):
                self._block(inner)

    def _bind_captured(self, node: cst.CSTNode) -> None:
        """The names bound inside ``node``'s expressions (walrus) and ``case`` patterns, at any
        depth: a walk over ``nodes.children``, not a libcst visitor, which rebuilds every node it
        passes (a third of a one-file run of vLLM's ``gpu_model_runner.py``, whose module has a
        walrus, went to it)."""
        todo = [node]
        while todo:
            current = todo.pop()
            kind = type(current)
            if kind is cst.NamedExpr:
                self.bind(current.target)
            elif (kind is cst.MatchAs or kind is cst.MatchStar) and current.name is not None:
                self.bind(current.name)
            elif kind is cst.MatchMapping and current.rest is not None:  # ``{"k": v, **rest}``
                self.bind(current.rest)
            todo += children(current)

    def _small(self, small) -> None:
        kind = type(small)
        if kind is cst.Assign:
            self.assigns.append(small)
            for target in small.targets:
                self.bind(target.target)
        elif kind is cst.AugAssign or kind is cst.AnnAssign or kind is cst.Del:
            self.bind(small.target)
        elif kind is cst.Import or kind is cst.ImportFrom:
            for alias in small.names if isinstance(small.names, (list, tuple)) else ():
                if alias.asname is not None:
                    self.bind(alias.asname.name)
                else:  # ``import a.b`` binds ``a``
                    self.counts[(dotted(alias.name) or "").split(".")[0]] += 1


def _in_host_memory(node: cst.BaseExpression, place: Place) -> bool:
    """Is an expression a tensor known to be in host memory, what a copy onto the GPU reads
    from? Not module state (``self.weight``, ``self.freqs.unsqueeze(0)``) whose name says
    nothing of the host: a parameter or buffer made on the CPU in ``__init__`` moves to the GPU
    with its module, which the device domain does not follow."""
    if not (place.where == "host" and place.tensor):
        return False
    while True:
        kind = type(node)
        if kind is cst.Attribute:
            if name_hint(node.attr.value) is not None:
                return True  # ``self.seq_lens_cpu``, ``self.buffer.cpu``
            node = node.value
        elif kind is cst.Call or kind is cst.Subscript:
            node = node.func if kind is cst.Call else node.value
        else:
            return not (kind is cst.Name and node.value in ("self", "cls"))


def _device_parameter(call: cst.CSTNode, info: FunctionInfo) -> str | None:
    """The parameter a copy onto the GPU reads its target device from, as passed: ``x.to(device)``,
    ``torch.tensor(data, device=device)``; None for any other target."""
    if type(call) is not cst.Call:
        return None
    targets = [keyword(call, "device")]
    if type(call.func) is cst.Attribute and call.func.attr.value == "to":
        targets.extend(positional(call)[:1])
    for target in targets:
        if type(target) is cst.Name and target.value in info.params:
            return target.value
    return None


def _host_defaults(params: cst.Parameters) -> frozenset[str]:
    """The parameters that default to ``None`` or a host device (a copy onto them copies nothing)."""
    found = set()
    for param in named_params(params):
        default = param.default
        if default is None:
            continue
        text = string_value(default)
        if (type(default) is cst.Name and default.value == "None") or (text is not None and text.startswith("cpu")):
            found.add(param.name.value)
    return frozenset(found)


def _counts_classes(num_classes: cst.BaseExpression | None) -> bool:
    """Does ``one_hot``'s ``num_classes`` argument fix the output's width (anything but a
    missing one or a literal ``-1``, the default, which reads the data's largest value)?"""
    return num_classes is not None and constant(num_classes) != -1


class _NamesNotNone:
    """Which names of a function certainly hold no ``None`` where read (``flags.not_none``
    asks): a parameter annotated with a type ``None`` is not (``max_seqlen: int``, default not
    ``None``), and a local whose every binding assigns such a value (``n = int(lens.max())``),
    the parameter's rebindings too. Looked up on demand, each name once. A callable object, not
    a closure: a closure calling itself is a reference cycle, and would keep the tree alive."""

    def __init__(self, function: cst.FunctionDef, bindings: _Bindings) -> None:
        signature = function.params
        self._params = {param.name.value: param
                        for param in named_params(signature)}
        self._bindings = bindings
        self._answers: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        answer = self._answers.get(name)
        if answer is None:
            self._answers[name] = False  # while looking (``n = n + 1``): not known
            answer = self._answers[name] = self._holds(name)
        return answer

    def _holds(self, name: str) -> bool:
        param = self._params.get(name)
        if param is not None and not (excludes_none(param.annotation) and (
                param.default is None or constant(param.default) is not None)):
            return False
        values = [assign.value for assign in self._bindings.assigns for target in assign.targets
                  if type(target.target) is cst.Name and target.target.value == name]
        if len(values) != self._bindings.counts[name] or (param is None and not values):
            return False
        return all(not_none(value, self) for value in values)


def _walk(walker: Walker, function: cst.FunctionDef, env) -> None:
    body = function.body
    if isinstance(body, cst.IndentedBlock):
        walker.walk(body.body, env)
    else:  # ``def f(x): return x.item()``
        for small in body.body:
            env = walker.small(small, env)


# -- what the GPU2xx rules share -----------------------------------------------------------------

UNDECLARED = "undeclared GPU->CPU sync"
DECLARE_FIX = "Declare the intended sync: wrap the statement in `with gpu_sync_allowed():`"


def declared_findings(ctx, kinds: tuple[str, ...]):
    """Findings for the undeclared hot sync sites of ``kinds``, with the wrap-in-a-declaration
    fix (GPU201: explicit syncs and calls of syncing functions; GPU202: implicit syncs)."""
    analysis = ctx.get(SyncAnalysis)
    for site in analysis.hot_sites(kinds):
        yield Finding(site.node, site_message(analysis, site, UNDECLARED), wrap_fix(ctx, site.statement, DECLARE_FIX),
                      callee_condition(site))


def callee_condition(site: SyncSite) -> CalleeCondition | None:
    """For a call site: report it only if the callee syncs, with what the call binds its flags
    to (``prepare(n, return_host=False)`` calls a function that syncs only under the flag); for
    GPU205's call whose arguments do not decide, only if the callee makes a blocking copy onto
    the GPU with what the call hands it as devices, or one of the calls its walk with those
    arguments bound still meets does (``through``)."""
    if site.kind == "call":
        return CalleeCondition("sync", site.callee, flags=site.flags, through=site.through,
                               device_args=site.device_args)
    if site.kind == "upload-call" and not site.template:
        return CalleeCondition("upload", site.callee, through=site.through, devices=site.devices)
    return None


def site_message(analysis: SyncAnalysis, site: SyncSite, lead: str) -> str:
    """``<lead> in <scope>: <what>``; a call site names the callee and why it syncs (filled in
    from its summary project-wide)."""
    if site.kind == "call" or (site.kind == "upload-call" and not site.template):
        return f"{lead} in {site.scope}: `{{callee}}()` {{reason}}"
    if site.kind == "upload-call":
        return f"{lead} in {site.scope}: `{site.callee.rsplit('.', 1)[-1]}()` {site.template}"
    return f"{lead} in {site.scope}: {analysis.describe(site)}"
