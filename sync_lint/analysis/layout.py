"""Layout provenance: what memory layout a tensor expression may have, and where it came from.

For each expression and local name of a function the ``LayoutDomain`` (a ``flow.Domain``) gives a
``Layout``: fresh (certainly contiguous), a gapped / permuted / broadcast view, unknown, or not a
tensor at all. It follows assignments, tuple unpacking, branches (a value that is a view on some
paths is a view), casts, ``.contiguous()``, ``reshape`` / ``flatten`` and ``self.`` attributes
assigned in the same class, and remembers the expression a view came from (for the message).

The rules rest on these runtime facts (see docs/FACTS.md):
- a cast (``.to(dtype)``, ``.int()``, ``.cuda()``...) returns its receiver unchanged when there is
  nothing to convert, strides included;
- a dtype-changing cast of a gapped or broadcast view is a new contiguous tensor, but one of a
  permuted view keeps the permuted strides (``preserve_format``); ``clone`` and ``empty_like``
  behave the same way;
- basic indexing keeps contiguity only while the selected dims lead (``x[i]``, ``x[:n]``,
  ``x[i, :k]``); ``x[:, i]``, ``x[..., i]``, ``x[:, :k]`` and step slices leave gaps; a size-1
  slice (``x[:1, 0]``) counts as a selected dim: the view passes ``is_contiguous()`` but keeps the
  row width as its stride;
- a view keeps a unit last stride (``inner_unit``) only while its last dim is the base's, not
  selected, stepped or expanded (stride 0): ``x[:, :k]``, ``x[:, ::2]`` and ``x[:, i]`` of a 3-D
  tensor, ``x.expand(n, -1)``. An index is taken to reach the last dim unless the number of dims
  is written out (``torch.empty(n, h, d)``, ``.view(n, h, d)``);
- ``as_strided(size, stride)`` is contiguous exactly when ``stride`` is the row-major stride of
  ``size`` (whatever the base was); only literal tuples are judged, any other is a gapped view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import libcst as cst

from sync_lint.analysis.dtypes import DTYPE_ALIASES, DTYPES, FLOATING, element_size
from sync_lint.analysis.flow import (
    Decide,
    Walker,
    conditional_value,
    narrowing,
    target_key,
)
from sync_lint.analysis.layout_words import (
    BROADCASTING,
    CAST_METHODS,
    DIM0_OK,
    ELEMENTWISE_METHODS,
    FRESH_METHODS,
    GAPPING,
    NON_TENSOR_ATTRIBUTES,
    PERMUTING,
    PERMUTING_ATTRIBUTES,
    RESHAPING,
    SHAPE_KEEPING,
    VIEW_MAKING,
)
from sync_lint.analysis.names import dotted
from sync_lint.analysis.nodes import children, one_line, shortened

if TYPE_CHECKING:
    from sync_lint.analysis.context import FileContext
    from sync_lint.analysis.functions import FunctionInfo

# Kinds of value.
FRESH = "fresh"  # certainly contiguous (a factory, arithmetic, a reduction, `.contiguous()`)
GAPPED = "gapped"  # a view that skips elements (column slice, step slice, narrow, ...)
PERMUTED = "permuted"  # a view with reordered strides (t, transpose, permute, ...)
BROADCAST = "broadcast"  # a view with stride-0 dims (expand, broadcast_to)
UNKNOWN = "unknown"  # a tensor (or anything) of unknown layout
SCALAR = "scalar"  # a Python number (or a 0-d value used as one)
OTHER = "other"  # not a tensor: strings, lists, shapes, dtypes
TUPLE = "tuple"  # a tuple literal: its elements are tracked
NONE = "none"  # the constant None

VIEWS = frozenset({GAPPED, PERMUTED, BROADCAST})
_RANK = {PERMUTED: 7, GAPPED: 6, BROADCAST: 5, UNKNOWN: 4, FRESH: 3, TUPLE: 2, SCALAR: 1, OTHER: 1, NONE: 0}


@dataclass(frozen=True)
class Cast:
    """A cast that may be a no-op, applied to a value that may not be contiguous."""

    node: cst.Call  # the cast call: ``state_indices.to(torch.int32)``
    text: str  # ``.to(torch.int32)``
    source_text: str  # ``state_indices``
    target: str = "dtype"  # what it converts: "dtype", "device", or "unknown" (``.to(other)``)
    same_dtype: str | None = None  # the source is known to have the target dtype: certainly a no-op


@dataclass(frozen=True)
class Layout:
    kind: str
    # For views: what made it, as a phrase ("a column slice of `block_table`"), and the node.
    what: str = ""
    origin: cst.CSTNode | None = None
    dtype: str | None = None  # "torch.int32" when known
    # Parameters this value may be, unchanged in layout (``x``, ``x[:n]``): for summaries.
    params: frozenset[str] = frozenset()
    # "param" / "attr" when the value *is* a parameter or an attribute of unknown layout.
    source: str | None = None
    cast: Cast | None = None
    made_contiguous: cst.Call | None = None  # the value is the result of this `.contiguous()`
    refixed: cst.Call | None = None  # a view taken of a `.contiguous()` result (GPU103)
    size1: bool = False  # contiguous only thanks to a size-1 dim: strides are not normalised
    # The last dim keeps the base's stride, so stride 1 for a contiguous base (False: it has
    # another stride on some path, or may: a transpose, a column select, an expanded last dim).
    inner_unit: bool = True
    vector: bool = False  # a 1-D-style view (column select) that reshape/flatten keeps a view
    base_root: str | None = None  # root name of the tensor a view was taken of
    # The number of dims, when written out (a factory's or ``view``'s literal sizes): says
    # whether ``x[:, ::2]`` steps the last dim (2-D) or a middle one (3-D).
    ndim: int | None = None
    stride_of: str | None = None  # for ``t.stride(...)`` scalars: the root name of ``t``
    maybe_none: bool = False
    elements: tuple[Layout, ...] | None = None  # for TUPLE
    # A buffer just allocated (``torch.empty``, ``zeros``, ``*_like``, ``x.new_empty``).
    allocated: bool = False
    # Of unknown kind, but the result of an elementwise comparison (``torch.arange(m) < lens``)
    # or a logical combination of such: a bool tensor, or a bool. Either as an index leaves no
    # gap (a tensor mask copies; a bool adds a dim).
    mask: bool = False
    # A permutation of such a buffer: a layout chosen on purpose (``torch.empty(k, m).t()`` is
    # how a column-major buffer is made for a consumer that wants one), not a view handed on by
    # mistake. Still strided: ``.view(dtype)`` judges it; the kernels and ops it is made for do not.
    chosen: bool = False
    # The stride of dim 0, in elements of ``dtype``, where literal sizes tell it: a 2-D factory
    # with a literal last size (``torch.empty((n, 32 * 260), dtype=torch.uint8)``: 8320), kept
    # by a column range of it (``[:, 32 * 256:]``) and rescaled by ``.view(dtype)`` (to float32:
    # 2080). A kernel that steps the view by that literal stride reads it as laid out
    # (``FunctionSummary.row_strides``).
    row_stride: int | None = None

    @property
    def is_view(self) -> bool:
        return self.kind in VIEWS


UNKNOWN_LAYOUT = Layout(UNKNOWN)
MASK_LAYOUT = Layout(UNKNOWN, mask=True)
_LOGICAL_OPERATORS = (cst.BitAnd, cst.BitOr, cst.BitXor)
FRESH_LAYOUT = Layout(FRESH)
SCALAR_LAYOUT = Layout(SCALAR)
OTHER_LAYOUT = Layout(OTHER)
NONE_LAYOUT = Layout(NONE)

# -- names the domain recognises ------------------------------------------------------------
# (the views, the casts and the methods that make a new tensor are in ``layout_words``, which the
# syntax scout reads too)

_DIMS_ADDED = {"select": -1, "narrow": 0, "unfold": 1, "diagonal": -1}  # to the base's number of dims
_SHAPE_FACTORIES = {"empty", "zeros", "ones", "full", "rand", "randn"}  # sizes first, as ``view`` takes them
_ONE_D_FACTORIES = {"arange", "range", "linspace", "logspace", "randperm"}
# Fresh methods whose result has another dtype than the receiver: indices, truth values, and the
# reductions that widen an integer input to int64 (kept for a real floating input).
_INDEX_RESULTS = {"argmax", "argmin", "nonzero", "argsort", "count_nonzero", "any", "all"}
_WIDENING = {"sum", "prod", "cumsum", "cumprod", "mean", "norm"}
_SCALAR_METHODS = {"item", "size", "stride", "numel", "dim", "element_size", "nelement", "data_ptr",
                   "storage_offset", "ndimension", "get_device"}
_OTHER_METHODS = {"tolist", "is_contiguous", "type", "__len__", "is_floating_point"}
_TORCH_FACTORIES = {
    "empty", "zeros", "ones", "full", "arange", "range", "linspace", "logspace", "eye", "rand",
    "randn", "randint", "randperm", "tensor", "cat", "concat", "concatenate", "stack",
    "index_select", "masked_select", "nonzero", "cumsum", "cumprod", "sum", "mean", "prod",
    "amax", "amin", "argmax", "argmin", "softmax", "log_softmax", "matmul", "mm", "bmm",
    "repeat_interleave", "searchsorted", "bucketize", "flip", "roll", "ravel", "argsort",
    "count_nonzero",
}  # fmt: skip
_TORCH_LIKE = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like"}
_ALLOCATING = {"empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
               "new_empty", "new_zeros", "new_ones", "new_full"}  # fmt: skip
# Every method whose result may share the receiver's storage with other strides (``sinks``
# compares two arguments' views by them).
VIEW_METHODS = frozenset(VIEW_MAKING | SHAPE_KEEPING | RESHAPING)
_TORCH_VIEW_FUNCTIONS = VIEW_MAKING | {"reshape", "flatten", "squeeze", "unsqueeze"}
_SCALAR_BUILTINS = {"int", "len", "float", "round", "abs", "min", "max", "sum", "range", "divmod", "pow"}
_OTHER_BUILTINS = {"str", "list", "tuple", "dict", "set", "sorted", "isinstance", "bool", "repr", "getattr", "hasattr", "print"}


def code_of(module: cst.Module, node: cst.CSTNode) -> str:
    """The source text of an expression on one line, shortened for messages."""
    return shortened(one_line(module, node))


def root_name(node: cst.BaseExpression) -> str | None:
    """The name an expression is built on: ``x`` for ``x[:, 0].to(...)``, ``self.bt`` for
    ``self.bt[:, 0]``."""
    while True:
        if isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        elif isinstance(node, cst.Attribute):
            name = dotted(node)
            if name is not None and name.startswith("self.") and name.count(".") == 1:
                return name
            node = node.value
        elif isinstance(node, cst.Name):
            return node.value
        else:
            return None


def _not_last(dim: cst.BaseExpression | None, ndim: int | None) -> bool:
    """Is ``dim`` (a literal) certainly not the last of ``ndim`` dims?"""
    value = _int_literal(dim)
    if value is None or ndim is None:
        return False
    return value % ndim != ndim - 1 if -ndim <= value < ndim else False


def _permutation_keeps_last(method: str, positional: list, ndim: int | None) -> tuple[bool, int | None]:
    """Does a permuting view leave the last dim where it was, and with it the base's last stride
    (what ``.view(dtype)`` and a ``stride(-1) == 1`` check need)? And its number of dims.

    ``k.permute(0, 2, 1, 3)`` (the dims listed end with the last), ``x.transpose(-3, -2)`` (a
    negative dim other than -1 is never the last) and ``x.transpose(0, 1)`` of a tensor known to
    have 3 dims keep it; ``x.t()``, ``x.permute(1, 0)``, and anything not written as literals, do
    not."""
    if method == "permute":
        values = _dims_written(method, positional)
        if values is None:
            return False, ndim
        return values[-1] in (len(values) - 1, -1), len(values)
    if method == "t" or len(positional) != 2:
        return False, ndim
    return all(_not_last(dim, ndim) or (_int_literal(dim) or 0) < -1 for dim in positional), ndim


def _dim_made_last(method: str, positional: list, ndim: int | None) -> int | None:
    """The receiver's dim (as written: ``0``, ``-2``) that a permuting view makes its last one,
    where the call says: ``t()`` (2-D at most) and ``T`` reverse the dims (dim 0), ``mT`` swaps
    the last two (dim -2), ``permute(..., d)`` ends with ``d``, ``transpose(d, -1)`` swaps ``d``
    in. None: not known."""
    if method in ("t", "T", "H"):
        return 0
    if method in ("mT", "mH"):
        return -2
    values = _dims_written(method, positional)
    if values is None:
        return None
    if method == "permute":
        return values[-1]
    if method in ("transpose", "swapaxes", "swapdims") and len(values) == 2:
        for last, other in (values, reversed(values)):
            if last == -1 or (ndim is not None and last == ndim - 1):
                return other
    return None


def _dims_written(method: str, positional: list) -> list[int] | None:
    """The dims a permuting call lists (``permute(0, 2, 1)``, ``permute((0, 2, 1))``,
    ``transpose(0, 1)``); None unless all are integer literals."""
    dims = positional
    if method == "permute" and len(positional) == 1 and isinstance(positional[0], (cst.Tuple, cst.List)):
        dims = [element.value for element in positional[0].elements]
    values = [_int_literal(dim) for dim in dims]
    return values if values and None not in values else None


def _transpose_key(node: cst.BaseExpression) -> object:
    """Which transpose ``node`` takes: ``t()``, ``T`` and ``H`` (the same for 2-D), ``mT`` and
    ``mH``, or ``transpose``/``swapaxes``/``swapdims`` of two literal dims (either order); None
    for anything else."""
    if isinstance(node, cst.Attribute) and node.attr.value in PERMUTING_ATTRIBUTES:
        return "mT" if node.attr.value in ("mT", "mH") else "T"
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return None
    method = node.func.attr.value
    if method == "t" and not node.args:
        return "T"
    if method in ("transpose", "swapaxes", "swapdims") and len(node.args) == 2 and not any(a.keyword for a in node.args):
        dims = _dims_written(method, [arg.value for arg in node.args])
        return ("swap", frozenset(dims)) if dims is not None and len(set(dims)) == 2 else None
    return None


def _transposed_back(base: Layout, node: cst.BaseExpression) -> bool:
    """``x.t().contiguous().t()``: the transpose of a ``.contiguous()`` copy of the same
    transpose, the idiom for a column-major copy of ``x`` (for an op that wants one, a GEMM's
    weight); likewise a permutation of a copy of the inverse one, ``x.permute(0, 2, 3,
    1).contiguous().permute(0, 3, 1, 2)`` (an NCHW tensor laid out channels-last). Deliberate:
    no view to report, and appending ``.contiguous()`` would undo it."""
    made = base.made_contiguous
    if made is None or made.args or not isinstance(made.func, cst.Attribute):
        return False
    before = made.func.value
    key = _transpose_key(node)
    if key is not None and key == _transpose_key(before):
        return True
    # A ``permute`` on either side tells how many dims there are, which a transpose then names.
    listed = _permutation(before) or _permutation(node)
    if listed is None:
        return False
    first, back = _as_permutation(before, len(listed)), _as_permutation(node, len(listed))
    # ``back`` undoes ``first`` when dim i of the result is dim ``first[back[i]]`` of ``x``, i.
    return first is not None and back is not None and all(first[dim] == i for i, dim in enumerate(back))


def _permutation(node: cst.BaseExpression) -> list[int] | None:
    """The dims of ``x.permute(...)`` written as integer literals, negative ones counted from the
    end (a permutation lists every dim); None for anything else."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "permute"):
        return None
    if any(arg.keyword is not None or arg.star for arg in node.args):
        return None
    dims = _dims_written("permute", [arg.value for arg in node.args])
    if dims is None:
        return None
    count = len(dims)
    dims = [_from_end(dim, count) for dim in dims]
    return dims if sorted(dims) == list(range(count)) else None


def _as_permutation(node: cst.BaseExpression, count: int) -> list[int] | None:
    """``node`` as a permutation of ``count`` dims: a ``permute`` of that many, or a transpose
    of two literal dims (``t()`` and ``T`` of 2, ``mT`` of the last two); None otherwise."""
    listed = _permutation(node)
    if listed is not None:
        return listed if len(listed) == count else None
    key = _transpose_key(node)
    if key == "T":
        swapped = (0, 1) if count == 2 else None
    elif key == "mT":
        swapped = (count - 2, count - 1) if count >= 2 else None
    elif key is not None:
        swapped = tuple(_from_end(dim, count) for dim in key[1])
    else:
        swapped = None
    if swapped is None or len(set(swapped)) != 2 or not all(0 <= dim < count for dim in swapped):
        return None
    dims = list(range(count))
    dims[swapped[0]], dims[swapped[1]] = dims[swapped[1]], dims[swapped[0]]
    return dims


def _from_end(dim: int, count: int) -> int:
    """A dim of ``count`` written from the end (``-1``) as its index; others as they are."""
    return dim + count if -count <= dim < 0 else dim


def _stride_dim_of(node: cst.BaseExpression, key: str) -> int | None:
    """``d`` of ``x.stride(d)`` or ``x.stride()[d]`` with ``x`` written as ``key``, else None."""
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        inner = node.value
        if isinstance(inner, cst.Call) and not inner.args and _is_stride_method(inner.func, key):
            return _int_literal(node.slice[0].slice.value)
        return None
    if isinstance(node, cst.Call) and len(node.args) == 1 and _is_stride_method(node.func, key):
        return _int_literal(node.args[0].value)
    return None


def _is_stride_method(func: cst.BaseExpression, key: str) -> bool:
    return isinstance(func, cst.Attribute) and func.attr.value == "stride" and target_key(func.value) == key


def _unit_stride_test(test: cst.BaseExpression, key: str, equal: type) -> int | None:
    """``d`` of ``key.stride(d) == 1`` (``equal`` cst.Equal) or ``!= 1`` (cst.NotEqual), either way round."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    comparison = test.comparisons[0]
    if type(comparison.operator) is not equal:
        return None
    for one, other in ((test.left, comparison.comparator), (comparison.comparator, test.left)):
        if _int_literal(other) == 1:
            dim = _stride_dim_of(one, key)
            if dim is not None:
                return dim
    return None


def _unit_dims(test: cst.BaseExpression, key: str, holds: bool) -> set[int]:
    """The dims ``d`` (as written) with ``key.stride(d) == 1`` wherever ``test`` is true
    (``holds``: ``assert w.stride(0) == 1``) or false (``if w.stride(0) != 1: raise``): that
    comparison, ``not`` of its opposite, or one of them in an ``and`` that holds (an ``or`` that
    fails); where one side of an ``or`` that holds says it, both must."""
    if isinstance(test, cst.BooleanOperation):
        one, other = _unit_dims(test.left, key, holds), _unit_dims(test.right, key, holds)
        return one | other if isinstance(test.operator, cst.And) == holds else one & other
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _unit_dims(test.expression, key, not holds)
    dim = _unit_stride_test(test, key, cst.Equal if holds else cst.NotEqual)
    return {dim} if dim is not None else set()


def _int_literal(node: cst.BaseExpression | None) -> int | None:
    if isinstance(node, cst.Integer):
        try:
            return int(node.value, 0)
        except ValueError:
            return None
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _int_literal(node.expression)
        return -inner if inner is not None else None
    return None


def join(a: Layout, b: Layout) -> Layout:
    """What a value may hold after two paths meet: a view on some path is a view.

    Symmetric (``join(a, b) == join(b, a)``, up to which of two identically written expressions a
    message names), and each field keeps the answer that holds on every path, i.e. the weaker
    guarantee: a flag that licenses a finding ("may be strided", "may be None") is set if it is
    on some path; one that withholds a finding ("the last stride stays 1", "the launch has these
    strides") only if it is on both.
    """
    if a is b or a == b:
        return a
    maybe_none = a.maybe_none or b.maybe_none or a.kind == NONE or b.kind == NONE
    if a.kind == NONE:
        return replace(b, maybe_none=True)
    if b.kind == NONE:
        return replace(a, maybe_none=True)
    # A size-1 dim keeps the row width as a stride on the path that took it: the launch that
    # reads the strides may be wrong on that path.
    size1 = a.size1 or b.size1
    if a.kind == b.kind == TUPLE and a.elements and b.elements and len(a.elements) == len(b.elements):
        elements = tuple(join(x, y) for x, y in zip(a.elements, b.elements, strict=True))
        return Layout(TUPLE, elements=elements, maybe_none=maybe_none)
    if a.kind in VIEWS or b.kind in VIEWS:
        return _join_views(a, b, maybe_none, size1)
    first, second = (a, b) if _RANK[a.kind] >= _RANK[b.kind] else (b, a)
    if first.kind == UNKNOWN:
        # A parameter on one path and something else on another is still, on that path, the
        # parameter: keep what summaries need, drop claims that hold on one path only.
        both_unchanged = second.kind == UNKNOWN and first.cast is None and second.cast is None
        params = first.params | second.params if both_unchanged else (first.params if second.kind != UNKNOWN else frozenset())
        # A cast relied on by a parameter or attribute on some path is still relied on (GPU101);
        # two different casts: name the one first in the text, whichever path came first.
        cast = _first_cast(first.cast, second.cast) if first.source == second.source else None
        if cast is not None and second.kind == UNKNOWN and _uncast_on_a_path(first, second, cast):
            cast = None
        # ``dtype`` is left unknown (never wrong); ``source`` and ``ndim`` hold only if the same
        # on both paths.
        return Layout(
            UNKNOWN, params=params, maybe_none=maybe_none, size1=size1,
            source=first.source if first.source == second.source else None, cast=cast,
            ndim=first.ndim if first.ndim == second.ndim else None,
        )  # fmt: skip
    if first.kind == second.kind:
        # ``s = x.stride(0) if x is not None else 0``: a stride of ``x`` whenever ``x`` is passed.
        # ``dtype``, ``ndim`` and the `.contiguous()` call it came from (GPU103's words) hold
        # only if the same on both paths.
        strides = {layout.stride_of for layout in (first, second) if layout.stride_of}
        return Layout(first.kind, dtype=first.dtype if first.dtype == second.dtype else None, maybe_none=maybe_none,
                      made_contiguous=first.made_contiguous if first.made_contiguous is second.made_contiguous else None,
                      stride_of=strides.pop() if len(strides) == 1 else None, size1=size1,
                      ndim=first.ndim if first.ndim == second.ndim else None,
                      allocated=first.allocated and second.allocated)
    if first.kind == FRESH:
        return Layout(UNKNOWN, maybe_none=maybe_none)  # a tensor on one path, a number on another
    return Layout(OTHER, maybe_none=maybe_none)


def _join_views(a: Layout, b: Layout, maybe_none: bool, size1: bool) -> Layout:
    """The join when some path holds a view, field by field:

    - ``kind``: the highest rank (a permuted view outlives a dtype-changing cast, a gapped one
      does not);
    - ``inner_unit``: the last stride stays 1 only if it does on both paths; ``vector`` (a
      reshape keeps it a view): if on some path;
    - ``cast`` (GPU101: strided unless the cast converts) only if every view path has one, and
      ``refixed`` (GPU103) only if every view path has one: a plain view on some path is strided
      whatever the author did on the other (GPU102);
    - ``chosen`` (a layout made on purpose) only if on every view path;
    - ``dtype`` (which decides whether a later cast certainly converts) and ``base_root`` (the
      strides a launch must receive to be stride-aware) only if the same on every view path: a
      path that holds no view is contiguous whatever a cast or a launch does with it; ``ndim``
      only if the same on both paths; ``params`` / ``source`` / ``made_contiguous`` are dropped
      (the value is no longer the parameter, nor a `.contiguous()` result, on every path);
    - the words and the origin come from the view that justifies the verdict: strided in its last
      dim first (what a unit-stride callee fails on), then agreeing with the cast / refix verdict,
      then the highest rank, then the text.
    """
    views = [layout for layout in (a, b) if layout.kind in VIEWS]
    has_cast = all(view.cast is not None for view in views)
    has_refix = all(view.refixed is not None for view in views)
    def key(view: Layout, texts: bool = False) -> tuple:
        verdict = (view.inner_unit, (view.cast is not None) != has_cast, (view.refixed is not None) != has_refix,
                   -_RANK[view.kind], view.what)  # fmt: skip
        if not texts:
            return verdict
        return (*verdict, _text(view.cast.node) if view.cast else "", _text(view.origin))

    shown = views[0]
    if len(views) == 2:
        one, other = key(a), key(b)
        if one == other:  # rendering the source is dearer: only to break a tie
            one, other = key(a, texts=True), key(b, texts=True)
        shown = a if one <= other else b
    roots = {view.base_root for view in views}
    dtypes = {view.dtype for view in views}
    return replace(
        shown, kind=max((view.kind for view in views), key=_RANK.__getitem__),
        cast=shown.cast if has_cast else None, refixed=shown.refixed if has_refix else None,
        inner_unit=a.inner_unit and b.inner_unit, vector=any(view.vector for view in views),
        dtype=dtypes.pop() if len(dtypes) == 1 else None, base_root=roots.pop() if len(roots) == 1 else None,
        ndim=a.ndim if a.ndim == b.ndim else None, chosen=all(view.chosen for view in views),
        params=frozenset(), source=None, made_contiguous=None, maybe_none=maybe_none, size1=size1,
        row_stride=a.row_stride if a.row_stride == b.row_stride else None,
    )  # fmt: skip


def _first_cast(one: Cast | None, other: Cast | None) -> Cast | None:
    if one is None or other is None:
        return one or other
    return min((one, other), key=lambda cast: (cast.source_text, cast.text))


def _text(node: cst.CSTNode | None) -> str:
    return cst.Module([]).code_for_node(node) if node is not None else ""


def _uncast_on_a_path(a: Layout, b: Layout, cast: Cast) -> bool:
    """``x = x.to(torch.int32) if x.dtype != torch.int32 else x`` (or the same with an ``if``
    statement): one path hands the parameter itself on, uncast, so the author does not rely on the
    cast for its layout (and, guarded so, the cast is never a no-op)."""
    uncast = b if a.cast is cast else a
    return uncast.cast is None and cast.source_text in uncast.params


class LayoutDomain:
    """The ``flow.Domain`` of layouts, for one function of one file."""

    def __init__(self, ctx: FileContext, int_params: frozenset[str] = frozenset()) -> None:
        self.ctx = ctx
        self.names = ctx.names
        self.module = ctx.module
        self.int_params = int_params  # parameters annotated ``int``: ``x[:, i]`` selects
        # The walk's known conditions (``Walker.conditions``: test, environment at the test,
        # whether it holds) while a walker evaluates with this domain; none otherwise.
        self.conditions: list[tuple[cst.BaseExpression, dict, bool]] | tuple = ()
        self.decide: Decide | None = None  # the oracle of a walk under an assumed flag (``flow``)
        # Each gapped view this domain made by an index, by identity: (the view, the layout it was
        # indexed from, the index's classes), so that a later index may undo the gap
        # (``_undone_gap``). Any other layout derived from the view is another object: not here.
        self._indexed: dict[int, tuple[Layout, Layout, tuple[str, ...]]] = {}

    # -- flow.Domain -------------------------------------------------------------------------
    def unknown(self) -> Layout:
        return UNKNOWN_LAYOUT

    def join(self, a: Layout, b: Layout) -> Layout:
        return join(a, b)

    def none(self) -> Layout:
        return NONE_LAYOUT

    def element(self, value: Layout, index: int) -> Layout:
        if value.kind == TUPLE and value.elements is not None and 0 <= index < len(value.elements):
            return value.elements[index]
        if value.kind == SCALAR:
            # ``sb, sd, st = x.stride()``: each element is still a stride of ``x``.
            return Layout(SCALAR, stride_of=value.stride_of) if value.stride_of else SCALAR_LAYOUT
        return UNKNOWN_LAYOUT

    def iterate(self, value: Layout) -> Layout:
        if value.kind == TUPLE and value.elements:
            result = value.elements[0]
            for element in value.elements[1:]:
                result = join(result, element)
            return result
        return self.element(value, 0)

    def evaluate(self, node: cst.BaseExpression, env: Mapping[str, Layout]) -> Layout:
        method = getattr(self, "_eval_" + type(node).__name__, None)
        if method is None:
            return UNKNOWN_LAYOUT
        return method(node, env)

    # -- helpers -----------------------------------------------------------------------------
    def text(self, node: cst.CSTNode) -> str:
        return code_of(self.module, node)

    def dtype_of(self, node: cst.BaseExpression | None) -> str | None:
        """``torch.int32`` for an expression naming a torch dtype, else None."""
        if node is None:
            return None
        name = self.names.resolve(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if name and name.startswith("torch.") and name.count(".") == 1:
            short = name[len("torch.") :]
            if short in DTYPES:
                return "torch." + DTYPE_ALIASES.get(short, short)
        return None

    def _view(self, base: Layout, kind: str, what: str, origin: cst.CSTNode, base_node: cst.BaseExpression,
              inner_unit: bool = True, vector: bool = False, ndim: int | None = None, chosen: bool = False,
              row_stride: int | None = None) -> Layout:
        return Layout(
            kind, what=what, origin=origin, dtype=base.dtype,
            refixed=base.made_contiguous or (base.refixed if base.is_view else None),
            inner_unit=inner_unit, vector=vector, base_root=root_name(base_node), ndim=ndim, chosen=chosen,
            row_stride=row_stride,
        )  # fmt: skip

    def _size_count(self, sizes: list, env) -> int | None:
        """How many dims literal sizes give (``view(a, b, c)``, ``empty((a, b))``, ``empty(n)``):
        None where a starred or non-literal size (``view(shape)``, ``empty(*s)``) leaves it open."""
        if any(arg.star for arg in sizes) or not sizes:
            return None
        if len(sizes) > 1:
            return len(sizes)
        size = sizes[0].value
        if isinstance(size, (cst.Tuple, cst.List)):
            starred = any(isinstance(e, cst.StarredElement) for e in size.elements)
            return None if starred else len(size.elements)
        if _int_literal(size) is not None or (isinstance(size, cst.Name) and size.value in self.int_params):
            return 1
        layout = self.evaluate(size, env)
        if layout.kind == TUPLE and layout.elements is not None:
            return len(layout.elements)
        return 1 if layout.kind == SCALAR else None

    @staticmethod
    def _is_contiguous_format(node: cst.BaseExpression) -> bool:
        name = dotted(node) or ""
        return name.endswith("contiguous_format")

    # -- expressions -------------------------------------------------------------------------
    def _eval_Name(self, node: cst.Name, env) -> Layout:
        if node.value in env:
            return env[node.value]
        if node.value == "None":
            return Layout(NONE)
        if node.value in ("True", "False"):
            return OTHER_LAYOUT
        return UNKNOWN_LAYOUT

    def _eval_Integer(self, node, env) -> Layout:
        return SCALAR_LAYOUT

    _eval_Float = _eval_Integer
    _eval_Imaginary = _eval_Integer

    def _eval_SimpleString(self, node, env) -> Layout:
        return OTHER_LAYOUT

    _eval_ConcatenatedString = _eval_SimpleString
    _eval_FormattedString = _eval_SimpleString
    _eval_List = _eval_SimpleString
    _eval_Dict = _eval_SimpleString
    _eval_Set = _eval_SimpleString
    _eval_ListComp = _eval_SimpleString
    _eval_DictComp = _eval_SimpleString
    _eval_SetComp = _eval_SimpleString
    _eval_Lambda = _eval_SimpleString
    _eval_GeneratorExp = _eval_SimpleString

    def _eval_Tuple(self, node: cst.Tuple, env) -> Layout:
        if any(isinstance(e, cst.StarredElement) for e in node.elements):
            return OTHER_LAYOUT
        return Layout(TUPLE, elements=tuple(self.evaluate(e.value, env) for e in node.elements))

    def _eval_NamedExpr(self, node: cst.NamedExpr, env) -> Layout:
        return self.evaluate(node.value, env)

    def _eval_IfExp(self, node: cst.IfExp, env) -> Layout:
        return conditional_value(self, node, env)

    def branch_envs(self, test: cst.BaseExpression, env) -> tuple[dict, dict]:
        """The environments the two branches of a conditional expression are evaluated in: what
        its test tells of None (``refine``) and of contiguity (``narrow``)."""
        then_env, else_env = dict(env), dict(env)
        self.refine(test, then_env, else_env)
        then_env.update(self.narrow(test, env, True))
        else_env.update(self.narrow(test, env, False))
        return then_env, else_env

    def narrow(self, test: cst.BaseExpression, env, holds: bool) -> dict[str, Layout]:
        """What a test tells of layouts where it holds (``holds``) or fails, for ``flow.Walker``
        and conditional expressions (``flow.narrowing``): a tensor checked ``x.is_contiguous()``
        is contiguous where the check passes, so ``if not x.is_contiguous(): x = x.contiguous()``
        and ``x if x.is_contiguous() else x.contiguous()`` leave ``x`` contiguous on every path."""

        def contiguous_where_checked(leaf: cst.BaseExpression, passes: bool) -> dict[str, Layout]:
            if not passes or type(leaf) is not cst.Call or leaf.args or type(leaf.func) is not cst.Attribute:
                return {}
            if leaf.func.attr.value != "is_contiguous":
                return {}
            key = target_key(leaf.func.value)
            checked = env.get(key) if key is not None else None
            if checked is None or not (checked.is_view or checked.kind == UNKNOWN):
                return {}
            # Contiguous by torch's measure: a size-1 dim keeps its odd stride (``size1``, GPU103).
            # A parameter checked as passed is still that parameter (``as_passed``: what a
            # summary says of it, that a kernel only reads it, goes on past an ``assert``).
            uncast = checked.kind == UNKNOWN and checked.cast is None
            return {key: Layout(FRESH, dtype=checked.dtype, size1=checked.size1, base_root=checked.base_root,
                                ndim=checked.ndim, params=checked.params if uncast else frozenset(),
                                source=checked.source if uncast else None)}  # and not None: it was called

        return narrowing(test, holds, contiguous_where_checked)

    @staticmethod
    def refine(test: cst.BaseExpression, then_env, else_env) -> None:
        """``... if x is not None else ...`` / ``... if x is None else ...``: ``x`` is None on the other
        branch (so that ``x.to(torch.int64) if x is not None else x`` is a cast of every tensor)."""
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return
        operator = test.comparisons[0].operator
        key = target_key(test.left)
        if key is None or not (isinstance(test.comparisons[0].comparator, cst.Name)
                               and test.comparisons[0].comparator.value == "None"):
            return
        if isinstance(operator, cst.IsNot):
            else_env[key] = Layout(NONE)
        elif isinstance(operator, cst.Is):
            then_env[key] = Layout(NONE)

    def _eval_BooleanOperation(self, node: cst.BooleanOperation, env) -> Layout:
        return join(self.evaluate(node.left, env), self.evaluate(node.right, env))

    def _eval_Attribute(self, node: cst.Attribute, env) -> Layout:
        key = dotted(node)
        if key is not None and key in env:
            return env[key]
        attr = node.attr.value
        if attr in PERMUTING_ATTRIBUTES:
            base = self.evaluate(node.value, env)
            if base.kind in (SCALAR, OTHER, NONE, TUPLE) or _transposed_back(base, node):
                return UNKNOWN_LAYOUT
            unit_last = self._unit_stride_checked(node.value, _dim_made_last(attr, [], base.ndim), base.ndim, env)
            return self._view(base, PERMUTED, f"a transpose of `{self.text(node.value)}`", node, node.value,
                              inner_unit=unit_last, ndim=base.ndim, chosen=base.allocated)
        if attr in NON_TENSOR_ATTRIBUTES:
            return OTHER_LAYOUT
        if attr == "data":
            return self.evaluate(node.value, env)
        if self.dtype_of(node) is not None:
            return OTHER_LAYOUT
        return Layout(UNKNOWN, source="attr")

    def _eval_Subscript(self, node: cst.Subscript, env) -> Layout:
        value = node.value
        if isinstance(value, cst.Attribute) and value.attr.value in ("shape", "stride"):
            return SCALAR_LAYOUT
        base = self.evaluate(value, env)
        if base.kind == TUPLE:
            index = _int_literal(node.slice[0].slice.value) if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) else None
            return self.element(base, index) if index is not None else UNKNOWN_LAYOUT
        if base.kind in (SCALAR, OTHER, NONE):
            return UNKNOWN_LAYOUT if base.kind == OTHER else base
        effect = self._index_effect(node.slice, env, base.ndim)
        undone = self._undone_gap(base, effect)
        if undone is not None:
            base, effect = undone
        if effect.kind == "fresh":
            return Layout(FRESH, dtype=base.dtype)
        if effect.kind == "unknown":
            return UNKNOWN_LAYOUT
        if effect.kind == "gap":
            what = f"{effect.what} of `{self.text(value)}`"
            # A range or a full slice first leaves dim 0's stride as it was (``[:, k:]``).
            first = node.slice[0].slice
            keeps_rows = isinstance(first, cst.Slice) and first.step is None and base.ndim == 2
            view = self._view(base, GAPPED, what, node, value, inner_unit=effect.inner_unit and base.inner_unit,
                              vector=effect.vector, ndim=effect.ndim, row_stride=base.row_stride if keeps_rows else None)
            if effect.classes is not None:
                self._indexed[id(view)] = (view, base, effect.classes)
            return view
        return self._kept(base, effect)

    @staticmethod
    def _kept(base: Layout, effect: _IndexEffect) -> Layout:
        """An index of ``base`` that keeps its contiguity: the base's layout carries over (a
        parameter stays the parameter layout-wise, but it is no longer *the* parameter: a cast of
        it is not flagged)."""
        if base.kind == FRESH or base.is_view:
            return replace(base, size1=base.size1 or effect.size1, made_contiguous=None, cast=None, ndim=effect.ndim,
                           row_stride=None)
        return Layout(UNKNOWN, params=base.params if base.cast is None else frozenset(), size1=effect.size1,
                      ndim=effect.ndim)

    def _undone_gap(self, view: Layout, effect: _IndexEffect) -> tuple[Layout, _IndexEffect] | None:
        """Where an index of a gapped view this domain made by an index selects the gap away, the
        layout that view was indexed from and the effect of both indices as one (``x[:, :k][i]``
        is ``x[i, :k]``: contiguous); None where it does not, or is not known to."""
        made = self._indexed.get(id(view))
        if made is None or made[0] is not view or effect.classes is None or "unk" in made[2]:
            return None
        _, indexed, first = made
        # An element of unknown kind in the second index is an int or an index tensor: the one
        # selects, the other copies (advanced indexing), so the gap is gone if an int's would be.
        second = tuple("int" if cls == "unk" else cls for cls in effect.classes)
        both = _composed_index(first, second)
        if both is None:
            return None
        composed = _classify(list(both))
        if composed.kind != "keep":
            return None
        ndim = indexed.ndim - both.count("int") if indexed.ndim is not None and len(both) == indexed.ndim else None
        return indexed, replace(composed, ndim=ndim)

    def _index_effect(self, elements, env, ndim: int | None = None) -> _IndexEffect:
        """The effect of an index on a contiguous tensor of ``ndim`` dims (None: unknown).

        With ``ndim`` known, the dims an index leaves out are full slices: ``x[:, ::2]`` of a 3-D
        tensor steps a middle dim and leaves the last stride 1 (not contiguous, but enough for a
        unit-stride sink). With it unknown the index is taken to reach the last dim, as it does
        for the 2-D block tables and caches this is written for: a last-dim verdict then errs
        towards reporting a unit-stride sink."""
        classes: list[str] = []
        added = 0  # ``None`` entries: new size-1 dims
        for element in elements:
            piece = element.slice
            if isinstance(piece, cst.Slice):
                step = piece.step
                if step is not None and _int_literal(step) != 1 and not (isinstance(step, cst.Name) and step.value == "None"):
                    classes.append("step")
                elif piece.lower is None and piece.upper is None:
                    classes.append("full")
                elif self._is_size1_slice(piece):
                    classes.append("one")
                else:
                    classes.append("part")
                continue
            value = piece.value
            if isinstance(value, cst.Ellipsis):
                classes.append("ellipsis")
            elif isinstance(value, cst.Name) and value.value == "None":
                added += 1
                continue
            elif _int_literal(value) is not None or isinstance(value, (cst.List, cst.Tuple)):
                classes.append("int" if _int_literal(value) is not None else "adv")
            else:
                layout = self.evaluate(value, env)
                if layout.kind == SCALAR or (isinstance(value, cst.Name) and value.value in self.int_params):
                    classes.append("int")
                elif layout.kind in (FRESH, *VIEWS) or layout.mask:
                    classes.append("adv")  # an index tensor, or a mask (``x[torch.arange(m) < lens]``): a copy
                else:
                    classes.append("unk")
        reached = len(classes) - classes.count("ellipsis")
        if ndim is None or reached > ndim or "adv" in classes or "unk" in classes:
            return replace(_classify(classes), classes=_composable(classes, added))
        if "ellipsis" not in classes:
            classes += ["full"] * (ndim - reached)
        return replace(_classify(classes), ndim=ndim - classes.count("int") + added, classes=_composable(classes, added))

    @staticmethod
    def _is_size1_slice(piece: cst.Slice) -> bool:
        lower, upper = piece.lower, piece.upper
        if upper is not None and lower in (None,) and _int_literal(upper) == 1:
            return True
        if lower is not None and _int_literal(lower) == 0 and _int_literal(upper) == 1:
            return True
        if upper is None and _int_literal(lower) == -1:
            return True
        # ``x[i : i + 1]``
        return (
            isinstance(upper, cst.BinaryOperation)
            and isinstance(upper.operator, cst.Add)
            and _int_literal(upper.right) == 1
            and lower is not None
            and upper.left.deep_equals(lower)
        )

    def _eval_BinaryOperation(self, node: cst.BinaryOperation, env) -> Layout:
        left, right = self.evaluate(node.left, env), self.evaluate(node.right, env)
        result = self._elementwise(left, right)
        if type(node.operator) in _LOGICAL_OPERATORS and result.kind == UNKNOWN and (left.mask or right.mask):
            return MASK_LAYOUT  # ``(a >= 0) & (a < n)``
        return result

    def _eval_UnaryOperation(self, node: cst.UnaryOperation, env) -> Layout:
        if isinstance(node.operator, cst.Not):
            return OTHER_LAYOUT
        operand = self.evaluate(node.expression, env)
        if isinstance(node.operator, cst.BitInvert) and operand.mask:
            return MASK_LAYOUT
        return self._elementwise(operand)

    def _eval_Comparison(self, node: cst.Comparison, env) -> Layout:
        layouts = [self.evaluate(node.left, env)] + [self.evaluate(c.comparator, env) for c in node.comparisons]
        if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in node.comparisons):
            return OTHER_LAYOUT
        result = self._elementwise(*layouts)
        return MASK_LAYOUT if result.kind == UNKNOWN else result

    @staticmethod
    def _elementwise(*layouts: Layout) -> Layout:
        """Arithmetic: a new tensor, whose strides follow a permuted input (TensorIterator)."""
        kinds = {layout.kind for layout in layouts}
        if kinds <= {SCALAR, OTHER}:
            return SCALAR_LAYOUT
        if PERMUTED in kinds or UNKNOWN in kinds or TUPLE in kinds or NONE in kinds:
            return UNKNOWN_LAYOUT
        return FRESH_LAYOUT

    def _eval_Call(self, node: cst.Call, env) -> Layout:
        func = node.func
        if isinstance(func, cst.Attribute):
            receiver_name = self.names.resolve(func.value) if isinstance(func.value, (cst.Name, cst.Attribute)) else None
            if receiver_name != "torch" and not (receiver_name or "").startswith("torch."):
                return self._method(node, func.attr.value, func.value, env)
        name = self.names.resolve(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if name is None:
            return UNKNOWN_LAYOUT
        if name.startswith("torch.") and name.count(".") == 1:
            return self._torch_function(node, name[len("torch.") :], env)
        if isinstance(func, cst.Name) and func.value in _SCALAR_BUILTINS and not self._defined_here(func.value):
            if func.value in ("min", "max", "sum", "abs", "round"):
                args = [self.evaluate(a.value, env) for a in node.args]
                if not all(a.kind == SCALAR for a in args):
                    return UNKNOWN_LAYOUT
            return SCALAR_LAYOUT
        if isinstance(func, cst.Name) and func.value in _OTHER_BUILTINS and not self._defined_here(func.value):
            return OTHER_LAYOUT
        if isinstance(func, cst.Name) and not self._defined_here(func.value):
            return self.ctx.get(ReturnedStrides).result_of(node, func.value, self, env)
        return UNKNOWN_LAYOUT

    def _defined_here(self, name: str) -> bool:
        return name in self.names.imports

    def _torch_function(self, node: cst.Call, name: str, env) -> Layout:
        if name in _TORCH_FACTORIES:
            dtype = self.dtype_of(self._keyword(node, "dtype"))
            ndim = self._factory_ndim(node, name, env)
            return Layout(FRESH, dtype=dtype, ndim=ndim, allocated=name in _ALLOCATING,
                          row_stride=self._literal_row_width(node, name) if ndim == 2 else None)
        if name in _TORCH_LIKE:
            source = self.evaluate(node.args[0].value, env) if node.args else UNKNOWN_LAYOUT
            # ``dtype=`` given: the dtype it names, else unknown (``dtype=out_dtype``), never the source's.
            given = self._keyword(node, "dtype")
            dtype = self.dtype_of(given) if given is not None else source.dtype
            if self._keyword(node, "memory_format") is not None:
                return Layout(FRESH, dtype=dtype, ndim=source.ndim)
            if source.kind == PERMUTED:
                return replace(source, dtype=dtype, cast=None, made_contiguous=None)
            if source.kind in (UNKNOWN, TUPLE):  # it keeps the source's strides, unknown here
                return Layout(UNKNOWN, allocated=name in _ALLOCATING)
            return Layout(FRESH, dtype=dtype, ndim=source.ndim, allocated=name in _ALLOCATING)
        if name in _TORCH_VIEW_FUNCTIONS and node.args and node.args[0].keyword is None and not node.args[0].star:
            return self._method(node, name, node.args[0].value, env, args=node.args[1:])
        if name == "where" and len(node.args) == 3:
            return self._elementwise(*(self.evaluate(a.value, env) for a in node.args))
        return UNKNOWN_LAYOUT

    def _factory_ndim(self, node: cst.Call, name: str, env) -> int | None:
        if name in _ONE_D_FACTORIES:
            return 1
        if name not in _SHAPE_FACTORIES:
            return None
        return self._size_count(self._size_args(node, name), env)

    @staticmethod
    def _size_args(node: cst.Call, name: str) -> list[cst.Arg]:
        """The arguments that give a shape factory's sizes: ``size=``, else the positional ones
        (``empty(a, b)``, ``empty((a, b))``; ``full(size, fill_value)``: the first)."""
        size = next((arg for arg in node.args if arg.keyword is not None and arg.keyword.value == "size"), None)
        if size is not None:
            return [size]
        positional = [arg for arg in node.args if arg.keyword is None]
        return positional[:1] if name == "full" else positional

    def _literal_row_width(self, node: cst.Call, name: str) -> int | None:
        """The last of a 2-D shape factory's sizes, where it folds to an integer."""
        sizes = [arg.value for arg in self._size_args(node, name)]
        if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
            sizes = [element.value for element in sizes[0].elements]
        return folded_int(sizes[-1]) if len(sizes) == 2 else None

    @staticmethod
    def _keyword(node: cst.Call, keyword: str) -> cst.BaseExpression | None:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return arg.value
        return None

    def _method(self, node: cst.Call, method: str, receiver: cst.BaseExpression, env, args=None) -> Layout:
        args = node.args if args is None else args
        positional = [a.value for a in args if a.keyword is None and not a.star]
        if method in CAST_METHODS or method in ("to", "type"):
            return self._cast(node, method, receiver, positional, env)
        if method in _SCALAR_METHODS:
            if method == "stride":
                return Layout(SCALAR, stride_of=root_name(receiver))
            return SCALAR_LAYOUT
        if method in _OTHER_METHODS:
            return OTHER_LAYOUT
        base = self.evaluate(receiver, env)
        if base.kind in (SCALAR, OTHER, NONE, TUPLE):
            return UNKNOWN_LAYOUT if base.kind != SCALAR else SCALAR_LAYOUT
        if method == "contiguous":
            memory_format = self._keyword(node, "memory_format")
            if memory_format is not None and not self._is_contiguous_format(memory_format):
                return UNKNOWN_LAYOUT
            return Layout(FRESH, dtype=base.dtype, made_contiguous=node, size1=base.size1, base_root=base.base_root,
                          ndim=base.ndim)
        if method == "clone":
            memory_format = self._keyword(node, "memory_format")
            if base.kind == PERMUTED and (memory_format is None or not self._is_contiguous_format(memory_format)):
                return replace(base, cast=None, made_contiguous=None)
            if base.kind == UNKNOWN and memory_format is None:
                return UNKNOWN_LAYOUT
            return Layout(FRESH, dtype=base.dtype, ndim=base.ndim)
        if method in PERMUTING:
            if self._identity_permutation(method, positional):
                return base
            if _transposed_back(base, node):
                return UNKNOWN_LAYOUT
            what = "a permutation" if method in ("permute", "movedim", "moveaxis") else "a transpose"
            keeps_last, ndim = _permutation_keeps_last(method, positional, base.ndim)
            made_last = None if keeps_last else _dim_made_last(method, positional, base.ndim)
            inner_unit = base.inner_unit if keeps_last else (
                made_last is not None and self._unit_stride_checked(receiver, made_last, ndim, env)
            )
            return self._view(base, PERMUTED, f"{what} of `{self.text(receiver)}`", node, receiver,
                              inner_unit=inner_unit, ndim=ndim, chosen=base.allocated)
        if method in BROADCASTING:
            sizes = self._broadcast_sizes(method, args)
            # An expanded dim has stride 0: the last dim keeps the base's stride only where its
            # size is certainly the base's own (``-1``, or the receiver's ``shape[-1]``); a size
            # written out (``expand(n, d)``) may expand a size-1 last dim.
            keeps_last = sizes is not None and self._same_last_size(sizes[-1], receiver)
            what = f"a broadcast (stride-0) view of `{self.text(receiver)}`"
            return self._view(base, BROADCAST, what, node, receiver, inner_unit=base.inner_unit and keeps_last,
                              ndim=len(sizes) if sizes else None)
        if method == "as_strided" and _row_major(*self._as_strided_geometry(node, positional)):
            # Explicit strides that are the row-major strides of the explicit size: contiguous
            # whatever the base's layout (``k_cache.as_strided((n,), (1,))``, a flat byte view).
            return Layout(FRESH, dtype=base.dtype)
        if method in GAPPING or method in DIM0_OK:
            dim = positional[0] if positional else self._keyword(node, "dim")
            ndim = base.ndim + _DIMS_ADDED[method] if base.ndim is not None and method in _DIMS_ADDED else None
            if method in DIM0_OK and _int_literal(dim) == 0:
                if base.kind == FRESH or base.is_view:
                    return replace(base, made_contiguous=None, cast=None, ndim=ndim, row_stride=None)
                return Layout(UNKNOWN, params=base.params if base.cast is None else frozenset(), ndim=ndim)
            # ``select`` drops its dim: the last one (stride 1 lost) unless the dims are known
            # and it is another (``x.select(1, i)`` of a 3-D tensor, like ``x[:, i]``).
            drops_last = method == "diagonal" or (method == "select" and not _not_last(dim, base.ndim))
            return self._view(base, GAPPED, f"a `.{method}()` view of `{self.text(receiver)}`", node, receiver,
                              inner_unit=base.inner_unit and not drops_last, vector=drops_last, ndim=ndim)
        if method == "squeeze":
            squeezed = self._squeezed_index(node, positional, base)
            if squeezed is not None:
                return squeezed
        if method in SHAPE_KEEPING:
            if method == "view" and len(positional) == 1 and self.dtype_of(positional[0]) is not None:
                target = self.dtype_of(positional[0])
                return replace(base, dtype=target, made_contiguous=None, cast=None,
                               row_stride=_rescaled(base.row_stride, base.dtype, target))
            ndim = self._reshaped_ndim(method, args, base, env)
            if base.kind == FRESH or base.is_view:
                return replace(base, made_contiguous=None, cast=None, ndim=ndim, row_stride=None)
            return Layout(UNKNOWN, ndim=ndim) if ndim is not None else UNKNOWN_LAYOUT
        if method in RESHAPING:
            # reshape / flatten return a view when the strides allow it: a column select stays a
            # (strided) view; a 2-D gapped or permuted source is usually copied.
            ndim = self._reshaped_ndim(method, args, base, env)
            if base.kind == FRESH:
                return Layout(FRESH, dtype=base.dtype, ndim=ndim)
            if base.kind == GAPPED and base.vector:
                return replace(base, made_contiguous=None, cast=None, ndim=ndim, row_stride=None,
                               what=f"{base.what}, reshaped (`.{method}()` keeps it a view)")
            return Layout(UNKNOWN, ndim=ndim) if ndim is not None else UNKNOWN_LAYOUT
        if method in FRESH_METHODS:
            return Layout(FRESH, dtype=self._fresh_dtype(node, method, base.dtype, positional), allocated=method in _ALLOCATING)
        if method in ELEMENTWISE_METHODS:
            return self._elementwise(base, *(self.evaluate(a, env) for a in positional))
        if method.endswith("_") and not method.endswith("__"):
            return base  # in place: returns the receiver
        return UNKNOWN_LAYOUT

    def _squeezed_index(self, node: cst.Call, positional: list, view: Layout) -> Layout | None:
        """``x[:, :n].squeeze(0)``: squeezing a dim away says its size is 1 (were it not, the
        call would do nothing and the caller would get a dim more than it was written for), and
        a gap that only a size-1 dim leads is no gap: the result is ``x[0, :n]``. Read as that
        index, where this domain made the view by an index (``_undone_gap``); None otherwise."""
        dim = positional[0] if len(positional) == 1 else self._keyword(node, "dim")
        squeezed = _int_literal(dim)
        if squeezed is None or squeezed < 0:
            return None  # every size-1 dim, or one counted from the end: which is not known here
        select = _IndexEffect("keep", classes=(*("full",) * squeezed, "int"))
        undone = self._undone_gap(view, select)
        return None if undone is None else self._kept(*undone)

    def _fresh_dtype(self, node: cst.Call, method: str, dtype: str | None, positional: list) -> str | None:
        """The dtype of a fresh method's result, where certain (a known dtype decides whether a
        later ``.view(dtype)`` needs a unit last stride, so a wrong one would hide a finding)."""
        given = self._keyword(node, "dtype")
        if given is not None:  # ``x.new_empty(n, dtype=torch.int32)``, ``x.sum(dtype=...)``
            return self.dtype_of(given)
        named = next((d for d in map(self.dtype_of, positional) if d is not None), None)
        if named is not None:  # ``x.softmax(-1, torch.float32)``
            return named
        if method in _INDEX_RESULTS or (method in _WIDENING and dtype not in FLOATING):
            return None
        return dtype

    def _reshaped_ndim(self, method: str, args, base: Layout, env) -> int | None:
        """The number of dims after a shape-changing method, where the call spells it out."""
        if method in ("view", "reshape"):
            return self._size_count([arg for arg in args if arg.keyword is None], env)
        if method == "flatten":
            return 1 if not args else None
        if method in ("detach", "data", "requires_grad_"):
            return base.ndim
        if method == "unsqueeze" and base.ndim is not None:
            return base.ndim + 1
        return None  # ``squeeze`` drops a dim only if its size is 1; ``unflatten`` / ``view_as``: open

    @staticmethod
    def _broadcast_sizes(method: str, args) -> list | None:
        """The sizes an ``expand`` / ``broadcast_to`` spells out (a literal tuple or the
        arguments themselves); None for ``expand_as``, a starred or non-literal shape."""
        positional = [arg for arg in args if arg.keyword is None]
        if method == "expand_as" or not positional or any(arg.star for arg in positional):
            return None
        if len(positional) == 1 and isinstance(positional[0].value, (cst.Tuple, cst.List)):
            elements = positional[0].value.elements
            if not elements or any(isinstance(e, cst.StarredElement) for e in elements):
                return None
            return [e.value for e in elements]
        if method == "broadcast_to" or (len(positional) == 1 and _int_literal(positional[0].value) is None):
            return None  # ``expand(shape)`` / ``broadcast_to(x, shape)``: a shape held in a name
        return [arg.value for arg in positional]

    @staticmethod
    def _same_last_size(size: cst.BaseExpression, receiver: cst.BaseExpression) -> bool:
        """``-1``, ``receiver.shape[-1]`` or ``receiver.size(-1)``, or the last size of a
        ``view`` / ``reshape`` receiver written alike (``x.view(t, 1, d).expand(t, h, d)``, where
        ``d`` is a name, an attribute or an integer): the last size left unchanged."""
        if _int_literal(size) == -1:
            return True
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and (
            receiver.func.attr.value in ("view", "reshape")
        ):
            shape = [arg.value for arg in receiver.args if arg.keyword is None and not arg.star]
            if len(shape) == 1 and isinstance(shape[0], (cst.Tuple, cst.List)):
                shape = [element.value for element in shape[0].elements]
            if len(shape) > 1 and _same_every_time(size) and shape[-1].deep_equals(size):
                return True
        if isinstance(size, cst.Subscript) and len(size.slice) == 1 and isinstance(size.slice[0].slice, cst.Index):
            owner, index = size.value, size.slice[0].slice.value
            return (isinstance(owner, cst.Attribute) and owner.attr.value == "shape" and _int_literal(index) == -1
                    and owner.value.deep_equals(receiver))  # fmt: skip
        if isinstance(size, cst.Call) and isinstance(size.func, cst.Attribute) and size.func.attr.value == "size":
            return (len(size.args) == 1 and _int_literal(size.args[0].value) == -1
                    and size.func.value.deep_equals(receiver))  # fmt: skip
        return False

    def _as_strided_geometry(self, node: cst.Call, positional: list):
        """The ``size`` and ``stride`` arguments of ``as_strided`` (positional or keyword)."""
        size = positional[0] if positional else self._keyword(node, "size")
        stride = positional[1] if len(positional) > 1 else self._keyword(node, "stride")
        return size, stride

    def _unit_stride_checked(self, receiver: cst.BaseExpression, dim: int, ndim: int | None, env) -> bool:
        """Is ``receiver``'s stride in ``dim`` 1 here, by a condition the walk knows holds
        (``assert w.stride(0) == 1``, or below ``if w.stride(0) != 1: raise``), with ``receiver``
        still the value it was at that test? Then a transpose that makes ``dim`` its last dim
        (``w.t()`` of a column-major ``w``) has stride 1 there. With ``ndim`` dims known, ``-2``
        and ``1`` of a 3-D tensor are one dim."""
        key = target_key(receiver)
        if key is None or not self.conditions:
            return False
        same = (lambda d: d == dim) if not ndim else (lambda d: -ndim <= d < ndim and d % ndim == dim % ndim)
        return any(
            key in before and before[key] is env.get(key)
            and any(same(d) for d in _unit_dims(test, key, holds))
            for test, before, holds in self.conditions
        )

    @staticmethod
    def _identity_permutation(method: str, positional: list) -> bool:
        values = [_int_literal(p) for p in positional]
        if None in values or not values:
            return False
        if method == "permute":
            return values == list(range(len(values)))
        return len(values) == 2 and values[0] == values[1]

    def _cast_target(self, node: cst.Call, method: str, target: str | None, positional: list) -> str:
        if target is not None:
            return "dtype"
        if method == "cuda" or self._keyword(node, "device") is not None:
            return "device"
        first = positional[0] if positional else None
        if isinstance(first, (cst.SimpleString, cst.FormattedString)) or "device" in (dotted(first) or "") if first is not None else False:
            return "device"
        return "unknown"

    def _cast(self, node: cst.Call, method: str, receiver: cst.BaseExpression, positional: list, env) -> Layout:
        base = self.evaluate(receiver, env)
        if method == "type" and not positional and self._keyword(node, "dtype") is None:
            return OTHER_LAYOUT  # ``t.type()`` is the type name
        if method in CAST_METHODS:
            target = CAST_METHODS[method]
            device_only = target is None
        else:
            target = self.dtype_of(self._keyword(node, "dtype"))
            if target is None and positional:
                target = self.dtype_of(positional[0])
                if target is None and len(positional) > 1:
                    target = self.dtype_of(positional[1])  # ``.to(device, dtype)``
            device_only = False
        memory_format = self._keyword(node, "memory_format")
        if memory_format is not None and self._is_contiguous_format(memory_format):
            # ``.to(memory_format=...)`` alone keeps the dtype; ``.to(d, memory_format=...)`` is d's.
            keeps = device_only or (not positional and self._keyword(node, "dtype") is None)
            return Layout(FRESH, dtype=target or (base.dtype if keeps else None))
        if base.kind in (SCALAR, OTHER, NONE, TUPLE):
            return base if base.kind != TUPLE else UNKNOWN_LAYOUT
        dtype = target or (base.dtype if device_only else None)
        changes = not device_only and target is not None and base.dtype is not None and target != base.dtype
        copies = self._keyword(node, "copy") is not None
        if base.kind == FRESH:
            return Layout(FRESH, dtype=dtype, ndim=base.ndim)
        if base.kind in (GAPPED, BROADCAST) and (changes or copies):
            # a new tensor; preserve_format falls back to contiguous
            return Layout(FRESH, dtype=dtype, ndim=base.ndim)
        # The cast's own text is what the call adds to its receiver, taken before either is
        # shortened (a long receiver would leave nothing of the cast).
        receiver_text, text = one_line(self.module, receiver), one_line(self.module, node)
        cast_text = text[len(receiver_text) :].strip() if text.startswith(receiver_text) else f".{method}(...)"
        cast = Cast(node, shortened(cast_text), shortened(receiver_text),
                    self._cast_target(node, method, target, positional),
                    same_dtype=target if target is not None and target == base.dtype else None)
        if base.is_view:
            return replace(base, dtype=dtype, cast=cast, made_contiguous=None, params=frozenset(),
                           row_stride=base.row_stride if dtype == base.dtype else None)
        # Unknown layout: the cast is not a contiguity fix; remember it only when the receiver is
        # a parameter or an attribute itself (the upstream pattern), not a derived value.
        return Layout(UNKNOWN, dtype=dtype, source=base.source, cast=cast if base.source else None, ndim=base.ndim)


def _rescaled(stride: int | None, source: str | None, target: str) -> int | None:
    """A stride in elements of ``source`` counted in elements of ``target`` (``.view(dtype)``
    of a tensor whose last dim has stride 1); None where a size is not known or it does not
    divide."""
    if stride is None or source is None:
        return None
    source_size, target_size = element_size(source), element_size(target)
    if source_size is None or target_size is None or (stride * source_size) % target_size:
        return None
    return stride * source_size // target_size


def folded_int(node: cst.BaseExpression | None) -> int | None:
    """An integer written as constant arithmetic (``32 * 260 // 4``), folded; None otherwise."""
    literal = _int_literal(node)
    if literal is not None or not isinstance(node, cst.BinaryOperation):
        return literal
    left, right = folded_int(node.left), folded_int(node.right)
    if left is None or right is None:
        return None
    operator = type(node.operator)
    if operator is cst.Add:
        return left + right
    if operator is cst.Subtract:
        return left - right
    if operator is cst.Multiply:
        return left * right
    if operator is cst.FloorDivide and right:
        return left // right
    return None


def factors(node: cst.BaseExpression) -> tuple[int, tuple[str, ...]] | None:
    """A product as (integer constant, sorted source texts of the other factors):
    ``h * d * 2`` -> (2, ("d", "h")), ``row * (32 * 260 // 4)`` -> (2080, ("row",)); None for
    anything that is not a product."""
    constant = folded_int(node)
    if constant is not None:
        return constant, ()
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        left, right = factors(node.left), factors(node.right)
        if left is None or right is None:
            return None
        return left[0] * right[0], tuple(sorted(left[1] + right[1]))
    if isinstance(node, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
        return 1, (cst.Module([]).code_for_node(node).replace(" ", ""),)
    return None


def _same_every_time(node: cst.BaseExpression) -> bool:
    """An integer, a name or a dotted name: read twice in one expression, the same value."""
    if isinstance(node, cst.Attribute):
        return _same_every_time(node.value)
    return isinstance(node, (cst.Name, cst.Integer))


def _row_major(size: cst.BaseExpression | None, stride: cst.BaseExpression | None) -> bool:
    """Are the ``stride`` elements, as written, the row-major (C-contiguous) strides of ``size``:
    the last stride 1 and each other one the product of the sizes after it (``(n,), (1,)``;
    ``(t, h, d), (h * d, d, 1)``)? Sizes or strides that are not literal tuples of the same length
    (``x.stride()``, a variable) are never known to be."""
    if not (isinstance(size, (cst.Tuple, cst.List)) and isinstance(stride, (cst.Tuple, cst.List))):
        return False
    sizes = [e.value for e in size.elements]
    strides = [e.value for e in stride.elements]
    if not sizes or len(sizes) != len(strides) or any(isinstance(e, cst.StarredElement) for e in (*size.elements, *stride.elements)):
        return False
    expected: tuple[int, tuple[str, ...]] = (1, ())
    for index in range(len(sizes) - 1, -1, -1):
        if factors(strides[index]) != expected:
            return False
        factor = factors(sizes[index])
        if factor is None:
            return index == 0  # the outermost size never enters a stride
        expected = (expected[0] * factor[0], tuple(sorted(expected[1] + factor[1])))
    return True


@dataclass(frozen=True)
class _IndexEffect:
    kind: str  # "keep", "gap", "fresh", "unknown"
    what: str = ""
    inner_unit: bool = True
    vector: bool = False
    size1: bool = False
    ndim: int | None = None  # of the result, when the base's is known
    # The index's classes, one per dim of the indexed tensor from the first, where they say which
    # dim each element takes (no ``...``, no ``None``, no index tensor): ``_composed_index``.
    classes: tuple[str, ...] | None = None


def _composable(classes: list[str], added: int) -> tuple[str, ...] | None:
    if added or "ellipsis" in classes or "adv" in classes:
        return None
    return tuple(classes)


def _composed_index(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...] | None:
    """The classes of one index that does what ``first`` then ``second`` do: ``second``'s
    elements take the dims ``first`` left (those it did not select with an int, then the dims
    past its end), each narrowing what ``first`` kept of that dim."""
    both = list(first)
    kept = [dim for dim, cls in enumerate(first) if cls != "int"]
    for position, cls in enumerate(second):
        if position >= len(kept):
            both.append(cls)
            continue
        dim = kept[position]
        narrowed = _narrowed(first[dim], cls)
        if narrowed is None:
            return None
        both[dim] = narrowed
    return tuple(both)


def _narrowed(first: str, second: str) -> str | None:
    """A dim sliced as ``first``, then as ``second``, in one slice's class."""
    if second == "full":
        return first
    if first == "full" or second == "int":
        return second
    if "step" in (first, second):
        return "step"
    return "one" if "one" in (first, second) else "part"


def _classify(classes: list[str]) -> _IndexEffect:
    """The effect of basic indexing on a contiguous tensor, from the kinds of its index elements.

    Selected dims (ints, size-1 slices) that lead keep contiguity, then one partial slice, then
    only full slices. Anything selected or cut after a kept dim leaves gaps.
    """
    if "adv" in classes:
        return _IndexEffect("fresh")  # advanced indexing copies
    state = "lead"
    gap: str | None = None
    after_one = False
    for cls in classes:
        if cls == "step":
            gap = gap or "a step slice"
            break
        if cls in ("int", "one"):
            if state != "lead":
                gap = gap or ("a last-dim slice" if state == "ellipsis" else "a column slice")
                break
            if cls == "one":
                after_one = True
            continue
        if cls == "unk":
            if state != "lead":
                return _IndexEffect("unknown")  # an int (a view) or an index tensor (a copy)
            continue
        if cls == "part":
            if state != "lead":
                gap = gap or "a column-range slice"
                break
            state = "part"
            continue
        if cls == "full":
            if state == "lead":
                state = "full"
            continue
        if cls == "ellipsis":
            state = "ellipsis"
    if gap is not None:
        last = classes[-1] if classes else ""
        single_select = gap in ("a column slice", "a last-dim slice") and last in ("int", "one")
        inner_unit = not (single_select or (gap == "a step slice" and last == "step"))
        vector = single_select or (gap == "a step slice" and len(classes) == 1)
        return _IndexEffect("gap", gap, inner_unit=inner_unit, vector=vector)
    size1 = after_one and any(c not in ("one", "full") for c in classes[classes.index("one") + 1 :]) if after_one else False
    return _IndexEffect("keep", size1=size1)


@dataclass
class ClassAttributes:
    """``self.<attr>`` layouts assigned anywhere in each class of a file (joined over all
    assignments), so that a method reading ``self.state_indices`` knows what ``__init__`` put there."""

    by_class: dict[int, dict[str, Layout]] = field(default_factory=dict)

    def env_for(self, info: FunctionInfo) -> dict[str, Layout]:
        if info.class_node is None:
            return {}
        return dict(self.by_class.get(id(info.class_node), {}))


class ReturnedStrides:
    """Which elements of the tuple a module-level function of this file returns are strides of
    which of its parameters, on some return path (``return m, n, x.stride(-2)``, or a local
    bound to one). A caller that unpacks the call (``M, N, row_stride = flatten(x)``) then holds
    strides of the argument it passed, and a kernel launched with them is stride-aware.

    A function whose every return holds a parameter's ``.stride()`` in another shape (xformers'
    ``_strides(x, *names)``: ``{f"stride_{n}": s for n, s in zip(names, x.stride())}``) returns
    that parameter's strides whole: a launch handed ``**_strides(q, ...)`` gets ``q``'s."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        prefix = f"{ctx.module_name}." if ctx.module_name else ""
        self._functions = {
            info.name: info for info in ctx.functions()
            if info.class_node is None and info.qualname == prefix + info.name
        }  # fmt: skip
        self._found: dict[str, dict[int, str]] = {}

    def result_of(self, call: cst.Call, name: str, domain: LayoutDomain, env) -> Layout:
        """The layout of ``call``, a call of ``name``: a tuple with the strides it returns, or unknown."""
        info = self._functions.get(name)
        returned = self._returned(info) if info is not None else {}
        if not returned:
            return UNKNOWN_LAYOUT
        if WHOLE in returned:
            argument = _argument_for(call, info.params, returned[WHOLE])
            root = root_name(argument) if argument is not None else None
            return Layout(SCALAR, stride_of=root) if root is not None else UNKNOWN_LAYOUT
        elements = [UNKNOWN_LAYOUT] * (max(returned) + 1)
        for index, param in returned.items():
            argument = _argument_for(call, info.params, param)
            root = root_name(argument) if argument is not None else None
            if root is not None:
                elements[index] = Layout(SCALAR, stride_of=root)
        return Layout(TUPLE, elements=tuple(elements))

    def _returned(self, info: FunctionInfo) -> dict[int, str]:
        if info.name in self._found:
            return self._found[info.name]
        self._found[info.name] = found = {}  # also what a recursive call sees meanwhile
        domain = LayoutDomain(self.ctx)
        params = set(info.params)
        # Per return, the parameters whose ``.stride()`` it holds as passed, and those None there.
        whole: list[tuple[set[str], set[str]]] = []

        def on_statement(node: cst.CSTNode, env) -> None:
            if type(node) is not cst.Return or node.value is None:
                return
            if type(node.value) is cst.Tuple:
                for index, element in enumerate(node.value.elements):
                    value = domain.evaluate(element.value, env)
                    if value.kind == SCALAR and value.stride_of in params:
                        found.setdefault(index, value.stride_of)
            held = {param for param in _whole_strides_read(node.value) if as_passed(env, param)}
            none = {param for param in params if (layout := env.get(param)) is not None and layout.kind == NONE}
            whole.append((held, none))

        env = {param: Layout(UNKNOWN, params=frozenset({param}), source="param") for param in info.params}
        if isinstance(info.node.body, cst.IndentedBlock):
            Walker(domain, on_statement).walk(info.node.body.body, env)
        if not found and whole:
            # Every return holds them, but where the parameter is None (``if x is None: return
            # {...: None}``: a None tensor has no strides to hand on).
            held_anywhere = set().union(*(held for held, _ in whole))
            common = held_anywhere.intersection(*(held | none for held, none in whole))
            if len(common) == 1:
                found[WHOLE] = common.pop()
        return found


WHOLE = -1  # ``ReturnedStrides``: the whole result holds the strides


def _whole_strides_read(node: cst.CSTNode) -> set[str]:
    """The names ``p`` of the ``p.stride()`` calls (no argument: every stride) in an expression."""
    found: set[str] = set()
    todo = [node]
    while todo:
        current = todo.pop()
        if (type(current) is cst.Call and not current.args and type(current.func) is cst.Attribute
                and current.func.attr.value == "stride" and type(current.func.value) is cst.Name):
            found.add(current.func.value.value)
        todo.extend(children(current))
    return found


def as_passed(env, name: str) -> bool:
    """Does the parameter ``name`` still hold the tensor as passed (not rebound on the way)?"""
    layout = env.get(name)
    return layout is not None and layout.source == "param" and layout.params == frozenset({name})


def _argument_for(call: cst.Call, params: tuple[str, ...], param: str) -> cst.BaseExpression | None:
    """The expression ``call`` passes for ``param`` (by keyword, or by position before any star)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param:
            return arg.value
    position = params.index(param)
    positional = []
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            break
        positional.append(arg.value)
    return positional[position] if position < len(positional) else None


def class_attributes(ctx: FileContext, functions: list[FunctionInfo], domain_for) -> ClassAttributes:
    result = ClassAttributes()
    for info in functions:
        if info.class_node is None or not info.is_method:
            continue
        recorder = _AttributeRecorder(
            domain_for(info), result.by_class.setdefault(id(info.class_node), {}),
            info.all_params[0] if info.all_params else "self",
        )  # fmt: skip
        body = info.node.body.body if isinstance(info.node.body, cst.IndentedBlock) else ()
        Walker(recorder.domain, recorder.on_statement).walk(body, {})
    return result


@dataclass
class _AttributeRecorder:
    """Joins the layout of every ``self.<attr> = ...`` of one method into its class's table."""

    domain: LayoutDomain
    found: dict[str, Layout]
    self_name: str

    def on_statement(self, statement: cst.CSTNode, env) -> None:
        if not isinstance(statement, (cst.Assign, cst.AnnAssign)) or statement.value is None:
            return
        targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
        for target in targets:
            key = dotted(target) if isinstance(target, cst.Attribute) else None
            if key is not None and key.startswith(self.self_name + ".") and key.count(".") == 1:
                value = self.domain.evaluate(statement.value, env)
                attr = "self." + key.split(".", 1)[1]
                self.found[attr] = join(self.found[attr], value) if attr in self.found else value
