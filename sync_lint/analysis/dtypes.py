"""The torch dtypes the analyses recognise by name (``torch.int32``, ``torch.long``).

Free of libcst: the syntax scout (``pipeline.scout``) asks about them before any libcst import.
"""

# Legacy spellings -> the dtype they stand for.
DTYPE_ALIASES = {
    "float": "float32", "half": "float16", "double": "float64", "int": "int32", "long": "int64",
    "short": "int16", "cfloat": "complex64", "cdouble": "complex128",
}  # fmt: skip
DTYPES = frozenset({
    "float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8",
    "uint16", "uint32", "uint64", "bool", "complex64", "complex128", "float8_e4m3fn",
    "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", *DTYPE_ALIASES,
})  # fmt: skip
