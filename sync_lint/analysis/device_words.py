"""The names the device domain (``analysis.device``) and the sync catalogue (``analysis.syncs``)
read as host results and as sync sites.

Free of libcst: the syntax scout (``pipeline.scout``) asks where a sync may be before any libcst
import, and must know every name the analyses know.
"""

# Tensor methods and torch functions that return a Python bool read from the tensors' data
# (``torch.equal(a, b)``, ``a.allclose(b)``, ``torch.is_nonzero(t)``): a host value, whose read
# is a sync when a tensor is on the GPU (``analysis.syncs`` reports the call, not later uses).
VALUE_READS = frozenset({"equal", "allclose", "is_nonzero"})
# Tensor methods and attributes whose result is a host value whatever the tensor.
HOST_RESULT_METHODS = frozenset({
    "item", "tolist", "cpu", "numpy", "size", "dim", "ndimension", "numel", "nelement", "stride",
    "element_size", "data_ptr", "storage_offset", "is_contiguous", "is_pinned", "get_device",
    "pin_memory", "is_floating_point", "is_complex", "untyped_storage", "__len__", "type",
}) | VALUE_READS  # fmt: skip
HOST_ATTRIBUTES = frozenset({
    "shape", "ndim", "dtype", "device", "is_cuda", "is_cpu", "layout", "requires_grad", "itemsize", "nbytes",
    "cpu", "np", "numpy",  # ``CpuGpuBuffer.cpu`` / ``.np``
})  # fmt: skip

# Sync sites (``analysis.syncs``): methods that copy to the host, ops whose output size depends on
# the data (``bincount``: its largest value, read on the host even with ``minlength=``), torch
# functions whose size arguments become Python ints (``full``: only the first), and the builtins
# that read a tensor as a Python number or truth value.
EXPLICIT_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
DATA_DEPENDENT_METHODS = frozenset({"nonzero", "argwhere", "unique", "unique_consecutive", "masked_select", "bincount"})
DATA_DEPENDENT_FUNCTIONS = frozenset({"nonzero", "argwhere", "unique", "unique_consecutive", "masked_select",
                                      "bincount"})
SIZE_FUNCTIONS = frozenset({"arange", "empty", "zeros", "ones", "full", "rand", "randn"})
PROTOCOL_BUILTINS = ("int", "float", "bool", "complex")
# Builtins that format their arguments as text: a tensor's text holds its values, copied to the
# host (``print(x)``, ``str(x)``; an f-string's ``{x}`` alike).
FORMATTING_BUILTINS = ("str", "repr", "ascii", "format", "print")

# What makes a boolean tensor (a mask, whose use as an index is a sync): tensor methods, and
# torch functions by their last name.
MASK_METHODS = frozenset({
    "eq", "ne", "gt", "lt", "ge", "le", "greater", "less", "not_equal", "logical_and", "logical_or",
    "logical_not", "logical_xor", "isnan", "isinf", "isfinite", "isneginf", "isposinf", "bool", "isin",
    "any", "all", "__eq__", "__ne__", "__lt__", "__gt__", "__le__", "__ge__",
})
TORCH_MASK_FUNCTIONS = frozenset({
    "eq", "ne", "gt", "lt", "ge", "le", "logical_and", "logical_or", "logical_not", "logical_xor", "isin",
    "isnan", "isinf", "isfinite", "any", "all",
})
# Memoizing decorators: the body runs once per distinct (hashable: ints, a device) argument set,
# so a tensor such a function returns is the same object for the same key
# (``analysis.hot_scopes``, ``SyncAnalysis.cached_call``).
MEMOIZERS = frozenset({"functools.lru_cache", "functools.cache"})
# Builtins whose result holds their argument's elements (``DeviceDomain._builtin_call``), which
# may be on a device; every other builtin's result is a host value.
ELEMENT_BUILTINS = frozenset({"enumerate", "zip", "list", "tuple", "sorted", "reversed"})


# Name parts that mark a host-side value (``seq_lens_cpu``, ``positions_np``, ``cpu_buf``).
HOST_NAME_PARTS = frozenset({"cpu", "np", "numpy", "host"})
# Boolean-valued prefixes: ``is_gpu`` / ``use_gpu`` / ``num_gpu`` are flags and counts, not tensors.
FLAG_PREFIXES = ("is_", "use_", "has_", "num_", "n_", "enable_", "should_")


def names_host(lowered: str) -> bool:
    """Does a lowercase name, leading underscores stripped, have a part that marks a host-side
    value (``seq_lens_cpu``, ``cpu_buf``, ``np``)?"""
    return not HOST_NAME_PARTS.isdisjoint(lowered.split("_"))


def names_host_copy(name: str) -> bool:
    """Does a name say its value is a host copy (``seq_lens_cpu``, ``positions_np``), and is no
    flag or count about the host (``use_cpu``, ``num_cpu_blocks``)?"""
    lowered = name.lower().lstrip("_")
    return names_host(lowered) and not lowered.startswith(FLAG_PREFIXES)
