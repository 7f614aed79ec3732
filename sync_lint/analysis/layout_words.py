"""The names the layout domain (``analysis.layout``) reads as views and casts.

Free of libcst: the syntax scout (``pipeline.scout``) asks which expressions may make a view
before any libcst import, and must know every name the domain knows.
"""

# Cast methods with a fixed target dtype (None: the device changes, the dtype stays).
CAST_METHODS = {
    "int": "torch.int32", "long": "torch.int64", "float": "torch.float32", "half": "torch.float16",
    "bfloat16": "torch.bfloat16", "double": "torch.float64", "short": "torch.int16",
    "bool": "torch.bool", "byte": "torch.uint8", "char": "torch.int8", "cuda": None,
}  # fmt: skip
PERMUTING = frozenset({"t", "transpose", "permute", "movedim", "moveaxis", "swapaxes", "swapdims"})
PERMUTING_ATTRIBUTES = frozenset({"T", "mT", "H", "mH"})
BROADCASTING = frozenset({"expand", "expand_as", "broadcast_to"})
GAPPING = frozenset({"unfold", "diagonal", "as_strided"})
DIM0_OK = frozenset({"select", "narrow"})  # contiguous when taken along dim 0

# What may turn a tensor of no suspect layout into one the GPU1xx rules report: a view that is
# not contiguous, or a cast (a no-op on a tensor that already has the target dtype or device).
# Methods (``x.t()``, ``x.to(torch.int32)``) and, for the views, torch functions
# (``torch.transpose(x, 0, 1)``).
VIEW_MAKING = PERMUTING | BROADCASTING | GAPPING | DIM0_OK
LAYOUT_SUSPECT_METHODS = VIEW_MAKING | frozenset(CAST_METHODS) | {"to", "type"}
# Methods whose result keeps the receiver's layout with another shape (a view of a view is one).
SHAPE_KEEPING = frozenset({"view", "view_as", "unsqueeze", "squeeze", "unflatten", "detach", "data", "requires_grad_"})
RESHAPING = frozenset({"reshape", "flatten"})  # a view only where the strides allow it
# Every method whose result the domain may read with its receiver's layout (a view, a cast, the
# receiver itself, a size-1 view that ``.contiguous()`` returns unchanged), besides the in-place
# ones (``x.add_(1)``, any name ending in one ``_``): of any other method the result is a new
# tensor or of unknown layout (``LayoutDomain._method``), never a view nor a cast.
LAYOUT_CARRYING_METHODS = LAYOUT_SUSPECT_METHODS | SHAPE_KEEPING | RESHAPING | {"contiguous", "clone"}
# A tensor's attributes that are no tensor (``x.shape``), unless the code assigns one itself.
NON_TENSOR_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "layout", "is_cuda"})

# Methods whose result is a new tensor, never a view nor a cast: certainly contiguous
# (reductions, factories off a tensor, ...).
FRESH_METHODS = frozenset({
    "sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "cumsum", "cumprod", "softmax",
    "log_softmax", "index_select", "masked_select", "nonzero", "repeat", "repeat_interleave",
    "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "flip", "roll", "ravel",
    "argsort", "matmul", "mm", "bmm", "norm", "any", "all", "count_nonzero",
})  # fmt: skip
# Elementwise methods: a new tensor whose strides follow the input (so a permuted input gives a
# permuted result; anything else a contiguous one).
ELEMENTWISE_METHODS = frozenset({
    "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh",
    "relu", "clamp", "clamp_min", "clamp_max", "masked_fill", "pow", "remainder", "floor",
    "ceil", "round", "sign", "reciprocal", "eq", "ne", "lt", "le", "gt", "ge", "logical_not",
    "bitwise_and", "bitwise_or", "maximum", "minimum", "where", "fmod", "square",
})  # fmt: skip
