"""The torch dtypes the analyses recognise by name (``torch.int32``, ``torch.long``).

Free of libcst: the syntax scout (``pipeline.scout``) asks about them before any libcst import.
"""

# Legacy spellings -> the dtype they stand for.
DTYPE_ALIASES = {
    "float": "float32", "half": "float16", "double": "float64", "int": "int32", "long": "int64",
    "short": "int16", "cfloat": "complex64", "cdouble": "complex128", "chalf": "complex32",
}  # fmt: skip
# Bytes per element (``torch.<dtype>.itemsize``), by canonical name. ``t.view(dtype)`` to a dtype
# of the same size reinterprets each element in place and works on any strides; to another size
# it regroups the bytes of the last dim, which must then have stride 1.
ELEMENT_SIZES = {
    "bool": 1, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1, "float4_e2m1fn_x2": 1,
    "float16": 2, "bfloat16": 2, "int16": 2, "uint16": 2,
    "float32": 4, "int32": 4, "uint32": 4, "complex32": 4,
    "float64": 8, "int64": 8, "uint64": 8, "complex64": 8,
    "complex128": 16,
}  # fmt: skip
DTYPES = frozenset({*ELEMENT_SIZES, *DTYPE_ALIASES})
# Dtypes no tensor is converted to: torch implements no copy into packed FP4 (``.to(...)`` raises
# "copy_ not implemented"), so its data is written as bytes (``uint8``, or another 1-byte dtype)
# and viewed as it. A tensor of unknown dtype viewed as one holds bytes already: the view
# reinterprets each element in place, whatever the strides.
VIEWED_FROM_BYTES = frozenset({"torch.float4_e2m1fn_x2"})
# Real floating dtypes: a sum or a mean of one keeps its dtype (an integer sum widens to int64).
FLOATING = frozenset({"torch.float16", "torch.bfloat16", "torch.float32", "torch.float64"})


def element_size(dtype: str) -> int | None:
    """Bytes per element of a canonical dtype (``torch.float8_e4m3fn`` -> 1); None if not known."""
    return ELEMENT_SIZES.get(dtype.removeprefix("torch."))
