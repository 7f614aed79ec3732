"""Device provenance: could this expression hold a tensor that lives on the GPU?

A ``Place`` is one of
- ``HOST``: certainly host-side: Python numbers, strings, lists, numpy arrays, CPU tensors
  (names ending ``_cpu`` / ``_np`` / ``_host``, ``device="cpu"``, ``pin_memory=True``, results of
  ``.cpu()`` / ``.numpy()`` / ``.tolist()`` / ``.item()`` / ``torch.from_numpy``), shape arithmetic
  (``x.shape[0]``, ``x.size(0)``, ``x.numel()``, ``len(x)``). Nothing host-side ever syncs.
- ``DEVICE``: a tensor known to live on the accelerator: created with a (non-CPU) device,
  ``.cuda()``, ``.to(device)``, a ``CpuGpuBuffer``'s ``.gpu``, or computed from such a tensor.
  ``mask`` marks boolean tensors (comparisons, ``.any()``, ``logical_*``), the ones whose use as
  an index is a sync.
- ``UNKNOWN``: anything else (a parameter, the result of an unknown call...).
- ``NONE``: the constant ``None`` (joins away: ``x = None`` then ``x = t.cuda()`` is ``DEVICE``).

Torch factories without a ``device=`` make CPU tensors (the default device); the rare code that
changes the default device is not modelled (precision over recall). ``DeviceDomain`` plugs into
``sync_lint.analysis.flow.Walker``.

``tensor`` marks an unknown-device value that is certainly a tensor (a torch op's result, a
tensor method's, a multi-dimensional subscript, ``x[1:] - x[:-1]``, a ``torch.Tensor``
annotation): implicit syncs on such values count where unknown devices are reported (in
metadata builders by default); an unknown value that may as well be a Python int never does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst

from sync_lint.analysis.device_words import (
    ELEMENT_BUILTINS,
    FLAG_PREFIXES,
    HOST_ATTRIBUTES,
    HOST_RESULT_METHODS,
    MASK_METHODS,
    TORCH_MASK_FUNCTIONS,
    VALUE_READS,
    names_host,
)
from sync_lint.analysis.flow import (
    Decide,
    Walker,
    conditional_value,
    narrowing,
    one_comparison,
    target_key,
)
from sync_lint.analysis.names import NameTable, dotted
from sync_lint.analysis.nodes import named_params


@dataclass(frozen=True)
class Place:
    where: str  # "host" | "device" | "unknown" | "none"
    mask: bool = False  # a boolean tensor
    tensor: bool = False  # certainly a tensor / array (always true on the device)
    items: tuple[Place, ...] | None = None  # positional elements, for unpacking
    elem: Place | None = None  # the element when iterated
    names_device: bool = False  # a device, not a tensor: a call binds a parameter to ``"cpu"``

    @property
    def is_host(self) -> bool:
        return self.where in ("host", "none")

    @property
    def is_device(self) -> bool:
        return self.where == "device"

    @property
    def is_unknown(self) -> bool:
        return self.where == "unknown"


HOST = Place("host")
HOST_TENSOR = Place("host", tensor=True)  # a CPU tensor or numpy array
DEVICE = Place("device", tensor=True)
DEVICE_OBJECT = Place("device")  # moved to the GPU, but maybe not a tensor (``module.to(device)``)
DEVICE_MASK = Place("device", mask=True, tensor=True)
UNKNOWN = Place("unknown")
UNKNOWN_TENSOR = Place("unknown", tensor=True)
UNKNOWN_MASK = Place("unknown", mask=True, tensor=True)
NONE = Place("none")
HOST_DEVICE = Place("host", names_device=True)  # ``"cpu"``, ``torch.device("cpu")`` bound to a parameter


def as_mask(place: Place) -> Place:
    """The boolean tensor a comparison of ``place`` gives (host stays host)."""
    if place.is_device:
        return DEVICE_MASK
    if place.is_unknown and place.tensor:
        return UNKNOWN_MASK
    return place if place.is_host else UNKNOWN


def as_tensor(place: Place) -> Place:
    """What a tensor operation on ``place`` gives: a tensor where it is (mask dropped)."""
    if place.is_device:
        return DEVICE
    if place.is_host:
        return HOST_TENSOR
    return UNKNOWN_TENSOR



# Methods only arrays / tensors have (not lists, dicts or strings): an unknown receiver is then a
# tensor (or a numpy array, which in engine code is named ``*_np``).
TENSOR_METHODS = frozenset({
    "sum", "any", "all", "max", "min", "amax", "amin", "mean", "prod", "cumsum", "cumprod", "argmax", "argmin",
    "long", "int", "float", "half", "bfloat16", "double", "view", "reshape", "flatten", "squeeze",
    "unsqueeze", "contiguous", "detach", "masked_fill", "masked_fill_", "nonzero", "clamp", "clamp_",
    "clamp_min", "masked_select", "repeat_interleave", "index_select", "gather", "expand", "permute",
    "transpose", "eq", "ne", "gt", "lt", "ge", "le", "logical_and", "logical_or", "logical_not", "isnan",
    "diff", "argsort", "topk", "unique", "type_as", "new_zeros", "new_empty", "new_full", "new_ones", "narrow",
    "unbind", "floor_divide", "remainder", "index_copy_", "scatter_", "scatter_add_", "isin",
})
# Methods that keep a mask a mask.
_MASK_KEEPING = frozenset({"view", "reshape", "flatten", "squeeze", "unsqueeze", "contiguous", "clone", "expand",
                           "__getitem__", "logical_and", "logical_or", "logical_not", "logical_xor", "to"})

TORCH_FACTORIES = frozenset({
    "empty", "zeros", "ones", "full", "arange", "range", "linspace", "logspace", "eye", "rand", "randn",
    "randint", "randperm", "empty_strided", "tensor", "as_tensor", "asarray", "scalar_tensor", "frombuffer",
})
# Torch functions that return a Python value read from a tensor's metadata (no device read).
TORCH_HOST_RESULTS = frozenset({
    "is_floating_point", "is_complex", "is_tensor", "is_storage", "numel", "is_same_size",
    "is_grad_enabled", "is_inference_mode_enabled", "is_autocast_enabled", "is_inference", "is_conj", "is_neg",
    "get_default_dtype", "result_type", "promote_types", "can_cast", "is_signed",
})
# Torch predicates (``torch.is_grad_enabled()``, ``torch.compiler.is_compiling()``,
# ``torch.distributed.is_initialized()``) and the namespaces of the compiler's and the
# runtime's state return Python values, never a tensor (``torch.is_nonzero``, a data read, is
# one of ``VALUE_READS``).
_PREDICATE_PREFIXES = ("is_", "has_")
_STATE_NAMESPACES = ("torch.compiler.", "torch._dynamo.", "torch.jit.", "torch.backends.", "torch.version.")
# A module's state, whatever tensor it is made from: ``module.to(device)`` moves it.
_MODULE_STATE = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer",
                           "torch.nn.parameter.Buffer"})
_LIKE_FACTORIES = frozenset({"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
                             "randint_like"})
_HOST_LIBRARIES = ("numpy", "math", "random", "itertools", "functools", "collections", "os", "sys", "time",
                   "re", "json", "operator", "string", "typing")
_HOST_BUILTINS = frozenset({
    "len", "int", "float", "bool", "str", "repr", "range", "list", "tuple", "dict", "set", "frozenset", "sum",
    "min", "max", "abs", "round", "isinstance", "issubclass", "hasattr", "callable", "sorted", "reversed",
    "any", "all", "divmod", "pow", "hash", "id", "ord", "chr", "format", "bytes", "enumerate", "zip", "map",
    "filter", "type",
})
# Torch dtypes as ``torch.<name>``: ``.to(torch.int32)`` keeps the tensor where it is.
_DTYPE_NAMES = frozenset({
    "float", "float16", "float32", "float64", "half", "double", "bfloat16", "int", "int8", "int16", "int32",
    "int64", "long", "short", "uint8", "bool", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "complex64", "complex128", "uint16", "uint32", "uint64",
})


def join(a: Place, b: Place) -> Place:
    if a is b or a == b:  # ``is`` first: the shared constants (UNKNOWN...) are most joins
        return a
    if a.where == "none":
        return b
    if b.where == "none":
        return a
    if a.where == b.where:
        mask, tensor = a.mask and b.mask, a.tensor and b.tensor
        if a.items is not None and b.items is not None and len(a.items) == len(b.items):
            return Place(a.where, mask, tensor, tuple(join(x, y) for x, y in zip(a.items, b.items)))
        return Place(a.where, mask, tensor)
    return UNKNOWN


def combine(places, tensor_op: bool = False) -> Place:
    """The place of an operation on several operands (arithmetic, a torch op): on the device
    if one operand is; on the host if a host tensor is (a CPU tensor combines only with numbers
    and CPU tensors); unknown if one is; else host. ``tensor_op``: the result is a tensor."""
    result = HOST
    host_tensor = False
    for place in places:
        if place.items is not None:
            place = combine(place.items) if place.items else HOST
        elif place.elem is not None:
            place = place.elem
        if place.is_device:
            return DEVICE
        if place.is_unknown:
            result = UNKNOWN_TENSOR if (tensor_op or place.tensor or result.tensor) else UNKNOWN
        elif place.is_host and place.tensor:
            host_tensor = True
    if host_tensor:
        return HOST_TENSOR
    return result


def _cpu_test(test: cst.BaseExpression) -> tuple[cst.BaseExpression, bool] | None:
    """``t.is_cpu`` -> (t, True); ``t.device.type == "cpu"`` -> (t, True), ``!=`` -> (t, False):
    the tensor a test asks to be on the CPU, and whether it is there where the test is true."""
    if type(test) is cst.Attribute and test.attr.value == "is_cpu":
        return test.value, True
    found = one_comparison(test, cst.Equal, cst.NotEqual)
    if found is None:
        return None
    left, operator, right = found
    for device_type, other in ((left, right), (right, left)):
        if (type(other) is cst.SimpleString and other.evaluated_value == "cpu" and type(device_type) is cst.Attribute
                and device_type.attr.value == "type" and type(device_type.value) is cst.Attribute
                and device_type.value.attr.value == "device"):
            return device_type.value.value, operator is cst.Equal
    return None


def name_hint(name: str) -> Place | None:
    """What a variable or attribute name says about where its value lives."""
    lowered = name.lower().lstrip("_")
    if names_host(lowered):
        return HOST_TENSOR
    if lowered == "gpu":
        return DEVICE
    if lowered.endswith("_gpu") and not lowered.startswith(FLAG_PREFIXES):
        return DEVICE
    if name == "__debug__":
        return HOST
    return None


def string_value(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 -- a malformed literal; pragma: no cover
            return None
        return value if isinstance(value, str) else None
    return None


def keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def positional(call: cst.Call) -> list[cst.BaseExpression]:
    return [arg.value for arg in call.args if arg.keyword is None and not arg.star]


def is_true(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def is_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.Name) and node.value in ("None", "True", "False"):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return is_literal(node.expression)
    return False


def annotation_place(annotation: cst.Annotation | None) -> Place | None:
    """``n: int`` / ``a: np.ndarray`` are host-side; ``x: torch.Tensor`` is a tensor of unknown device
    (engines pass host tensors too: ``grid_thw``, ``*_cpu``); a union is known only if all its members are."""
    if annotation is None:
        return None
    places = [_annotation_member(member) for member in _union_members(annotation.annotation)]
    places = [p for p in places if p is not NONE]
    if not places or any(p is None for p in places):
        return None
    if all(p.is_host for p in places):
        return HOST_TENSOR if all(p.tensor for p in places) else HOST
    return UNKNOWN_TENSOR if all(p is UNKNOWN_TENSOR for p in places) else None


def excludes_none(annotation: cst.Annotation | None) -> bool:
    """Does an annotation name only types ``None`` is not (``int``, ``torch.Tensor``,
    ``list[int]``; not ``Optional[int]``, ``int | None``, nor a name the linter does not know)?"""
    if annotation is None:
        return False
    members = [_annotation_member(member) for member in _union_members(annotation.annotation)]
    return all(member is not None and member is not NONE for member in members)


def _union_members(node: cst.BaseExpression):
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        yield from _union_members(node.left)
        yield from _union_members(node.right)
        return
    if isinstance(node, cst.Subscript):
        outer = (dotted(node.value) or "").rsplit(".", 1)[-1]
        if outer in ("Optional", "Union"):
            for element in node.slice:
                if isinstance(element.slice, cst.Index):
                    yield from _union_members(element.slice.value)
            return
    yield node


def _annotation_member(node: cst.BaseExpression) -> Place | None:
    if isinstance(node, cst.Name) and node.value == "None":
        return NONE
    if isinstance(node, cst.Subscript):
        node = node.value
    last = (dotted(node) or "").rsplit(".", 1)[-1]
    if last in ("ndarray", "NDArray"):
        return HOST_TENSOR
    if last in ("int", "float", "bool", "str", "bytes", "list", "tuple", "dict", "set", "List", "Tuple", "Dict",
                "Set", "Sequence", "Iterable", "SymInt"):
        return HOST
    if last == "Tensor":
        return UNKNOWN_TENSOR
    return None


class DeviceDomain:
    """The abstract values of device provenance, for ``Walker``."""

    def __init__(self, names: NameTable, attributes: Mapping[str, Place] | None = None) -> None:
        self.names = names
        self.attributes = attributes or {}  # "self.x" -> place, from ``__init__``
        self.decide: Decide | None = None  # the oracle of a walk under assumed flags (``flow``)

    # -- the Domain protocol -----------------------------------------------------------------
    def unknown(self) -> Place:
        return UNKNOWN

    def join(self, a: Place, b: Place) -> Place:
        return join(a, b)

    def element(self, value: Place, index: int) -> Place:
        if value.items is not None:
            return value.items[index] if 0 <= index < len(value.items) else UNKNOWN
        if value.elem is not None:
            return value.elem
        if value.where == "device":
            return DEVICE
        if value.where == "host":
            return HOST
        return UNKNOWN

    def evaluate(self, node: cst.BaseExpression, env: Mapping[str, Place]) -> Place:
        method = getattr(self, "_eval_" + type(node).__name__, None)
        if method is not None:
            return method(node, env)
        if is_literal(node) or isinstance(node, (cst.FormattedString, cst.Lambda, cst.Dict, cst.DictComp,
                                                 cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            return HOST
        return UNKNOWN

    # -- names and attributes ----------------------------------------------------------------
    def _hint(self, name: str) -> Place | None:
        return name_hint(name)

    def _eval_Name(self, node: cst.Name, env) -> Place:
        if node.value == "None":
            return NONE
        if node.value in ("True", "False", "__debug__"):
            return HOST
        return self._named(node.value, env.get(node.value), node.value)

    def _named(self, name: str, found: Place | None, last: str) -> Place:
        """A tracked value, unless it is of unknown device and its name says where it lives
        (``lens_cpu = some_call()``)."""
        if found is not None and not found.is_unknown:
            return found
        return self._hint(last) or found or UNKNOWN

    def _eval_Attribute(self, node: cst.Attribute, env) -> Place:
        key = dotted(node)
        attr = node.attr.value
        if key is not None:
            found = env.get(key, self.attributes.get(key))
            if found is not None:
                return self._named(key, found, attr)
        if attr in ("T", "mT", "data", "real", "imag", "H", "mH", "values", "indices"):
            return self.evaluate(node.value, env)  # views, and ``.max(dim).values``
        if attr in ("cpu", "np", "numpy"):  # ``CpuGpuBuffer.cpu`` / ``.np``
            return HOST_TENSOR
        if attr in HOST_ATTRIBUTES:
            return HOST
        hint = self._hint(attr)
        if hint is not None:
            return hint
        # ``torch.int32`` and other module attributes are host constants.
        if key is not None and self.names.is_imported(node):
            return HOST
        # An attribute of a host value (``np_array.size``, ``host_list.x``) is host-side.
        if self.evaluate(node.value, env).is_host:
            return HOST
        return UNKNOWN

    # -- containers and operators -------------------------------------------------------------
    def _eval_Tuple(self, node: cst.Tuple, env) -> Place:
        if any(isinstance(e, cst.StarredElement) for e in node.elements):
            return HOST
        return Place("host", items=tuple(self.evaluate(e.value, env) for e in node.elements))

    _eval_List = _eval_Tuple

    def _eval_Set(self, node, env) -> Place:
        return HOST

    def _eval_Subscript(self, node: cst.Subscript, env) -> Place:
        base = self.evaluate(node.value, env)
        if base.items is not None:
            index = node.slice[0].slice if len(node.slice) == 1 else None
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                position = index.value.evaluated_value
                if position < len(base.items):
                    return base.items[position]
            return HOST  # a slice of a literal tuple / list is still a host container
        if base.is_device:
            return DEVICE_MASK if base.mask else DEVICE if base.tensor else DEVICE_OBJECT
        if base.elem is not None:
            return base.elem
        if base.is_host:
            return HOST_TENSOR if base.tensor else HOST
        if base.tensor or _array_subscript(node):
            return UNKNOWN_MASK if base.mask else UNKNOWN_TENSOR
        return UNKNOWN

    def _eval_BinaryOperation(self, node: cst.BinaryOperation, env) -> Place:
        left = self.evaluate(node.left, env)
        right = self.evaluate(node.right, env)
        # ``x[1:] - x[:-1]``: lists do not subtract, so a sliced operand makes this tensor arithmetic.
        sliced = _sliced(node.left) or _sliced(node.right)
        numeric = is_literal(node.left) or is_literal(node.right)
        tensor_op = sliced and (not isinstance(node.operator, cst.Add) or numeric)
        place = combine((left, right), tensor_op)
        if isinstance(node.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)) and (left.mask or right.mask):
            return as_mask(place)
        return place

    def _eval_Comparison(self, node: cst.Comparison, env) -> Place:
        if any(isinstance(t.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for t in node.comparisons):
            return HOST
        place = combine([self.evaluate(node.left, env)] + [self.evaluate(t.comparator, env) for t in node.comparisons])
        return as_mask(place) if place.tensor else place

    def _eval_UnaryOperation(self, node: cst.UnaryOperation, env) -> Place:
        if isinstance(node.operator, cst.Not):
            return HOST
        return self.evaluate(node.expression, env)

    def _eval_BooleanOperation(self, node: cst.BooleanOperation, env) -> Place:
        return join(self.evaluate(node.left, env), self.evaluate(node.right, env))

    def _eval_IfExp(self, node: cst.IfExp, env) -> Place:
        return conditional_value(self, node, env)

    def branch_envs(self, test: cst.BaseExpression, env) -> tuple[dict, dict]:
        """The environments the two branches of a conditional expression are read in (``narrow``)."""
        return {**env, **self.narrow(test, env, True)}, {**env, **self.narrow(test, env, False)}

    def narrow(self, test: cst.BaseExpression, env, holds: bool) -> dict[str, Place]:
        """What a test tells of places where it holds (``holds``) or fails, for ``flow.Walker``
        and conditional expressions (``flow.narrowing``): a tensor tested to be on the CPU is a
        host tensor there (``if t.is_cpu:``, ``if t.device.type == "cpu":``, the ``else`` of
        ``!= "cpu"``). ``not t.is_cuda`` says nothing: another accelerator (NPU, XPU) is no CUDA
        device either."""

        def host_where_tested(leaf: cst.BaseExpression, passes: bool) -> dict[str, Place]:
            tested = _cpu_test(leaf)
            if tested is None:
                return {}
            receiver, on_cpu_when_true = tested
            key = target_key(receiver)
            if key is None or passes is not on_cpu_when_true:
                return {}
            return {key: Place("host", mask=self.evaluate(receiver, env).mask, tensor=True)}

        return narrowing(test, holds, host_where_tested)

    def _eval_NamedExpr(self, node: cst.NamedExpr, env) -> Place:
        return self.evaluate(node.value, env)

    # -- calls --------------------------------------------------------------------------------
    def _eval_Call(self, node: cst.Call, env) -> Place:
        func = node.func
        library = self.library_name(func)
        if library is not None:
            return self._library_call(library, node, env)
        if isinstance(func, cst.Attribute):
            return self._method_call(func.attr.value, self.evaluate(func.value, env), node, env)
        if isinstance(func, cst.Name) and func.value in _HOST_BUILTINS and func.value not in env:
            return self._builtin_call(func.value, node, env)
        return UNKNOWN

    def library_name(self, func: cst.BaseExpression) -> str | None:
        """``torch.zeros`` / ``np.asarray`` ... as a dotted name, when ``func`` names an imported
        module's function (not a method of a local value)."""
        if not self.names.is_imported(func):
            return None
        resolved = self.names.resolve(func) or ""
        if resolved.startswith("torch.") or resolved.split(".")[0] in _HOST_LIBRARIES:
            return resolved
        return None

    def _library_call(self, name: str, node: cst.Call, env) -> Place:
        if not name.startswith("torch."):
            return HOST_TENSOR if name.startswith("numpy.") else HOST  # numpy, math, ...
        short = name.rsplit(".", 1)[-1]
        if name == "torch.from_numpy":
            return HOST_TENSOR
        if name in _MODULE_STATE:
            return UNKNOWN_TENSOR  # a module's parameter or buffer: on whatever device the module is moved to
        if name in ("torch.device", "torch.get_default_device") or name.startswith("torch.cuda."):
            return HOST
        if short in TORCH_HOST_RESULTS:
            return HOST  # ``torch.is_floating_point(x)`` reads metadata: a Python bool, no sync
        if (short.startswith(_PREDICATE_PREFIXES) and short not in VALUE_READS) or name.startswith(_STATE_NAMESPACES):
            return HOST  # ``torch.compiler.is_compiling()``, ``torch.jit.is_scripting()``: Python state
        if short in VALUE_READS and name.count(".") == 1:
            return HOST  # ``torch.equal(a, b)``: a Python bool (the read is the sync)
        args = positional(node)
        if short in TORCH_FACTORIES or short in _LIKE_FACTORIES:
            placed = self.device_argument(node, env)
            if placed is not None:
                return placed
            if is_true(keyword(node, "pin_memory")):
                return HOST_TENSOR
            if keyword(node, "device") is not None or any(arg.star == "**" for arg in node.args):
                return UNKNOWN_TENSOR  # a device we cannot read (``device=dev``, ``**kwargs``)
            if short in _LIKE_FACTORIES or short in ("as_tensor", "asarray"):
                return as_tensor(self.evaluate(args[0], env)) if args else UNKNOWN_TENSOR
            return HOST_TENSOR
        tensors = [self.evaluate(a, env) for a in args]
        tensors.extend(self.evaluate(arg.value, env) for arg in node.args if arg.keyword is not None
                       and arg.keyword.value not in ("dim", "dtype", "out", "keepdim"))
        place = combine(tensors, tensor_op=True) if tensors else UNKNOWN_TENSOR
        return as_mask(place) if short in TORCH_MASK_FUNCTIONS else place

    def device_argument(self, call: cst.Call, env) -> Place | None:
        """Where ``device=`` (or ``.to(...)``'s argument) puts a tensor; None if no device is named."""
        candidates = [keyword(call, "device")]
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "to":
            candidates.extend(positional(call)[:1])
        for value in candidates:
            if value is None:
                continue
            placed = self.device_value(value, env)
            if placed is not None:
                return placed
        return None

    def device_value(self, value: cst.BaseExpression, env) -> Place | None:
        """HOST / DEVICE for an expression naming a device; None if it names none (a dtype...)."""
        if type(value) is cst.Name and (bound := env.get(value.value)) is not None and bound.names_device:
            return HOST_TENSOR if bound.is_host else DEVICE  # a parameter a call binds to a device
        text = string_value(value)
        if text is not None:
            return HOST_TENSOR if text.startswith("cpu") else DEVICE
        if isinstance(value, cst.Call) and (dotted(value.func) or "").endswith("device"):
            args = positional(value)
            inner = string_value(args[0]) if args else None
            if inner is not None:
                return HOST_TENSOR if inner.startswith("cpu") else DEVICE
            return None
        if isinstance(value, cst.Attribute) and value.attr.value == "device":
            # ``x.device`` / ``self.device``: wherever ``x`` is; an engine's device otherwise.
            return HOST_TENSOR if self.evaluate(value.value, env).is_host else DEVICE
        name = dotted(value)
        if name is None:
            return None
        last = name.rsplit(".", 1)[-1].lower()
        if "cpu" in last.split("_"):
            return HOST_TENSOR
        if "device" in last or last in ("cuda", "gpu"):
            return DEVICE
        return None

    def _method_call(self, method: str, receiver: Place, node: cst.Call, env) -> Place:
        if method in ("cpu", "numpy", "pin_memory"):
            return HOST_TENSOR
        if method in HOST_RESULT_METHODS:
            return HOST
        if method in ("cuda", "to"):
            placed = self.device_argument(node, env) if method == "to" else DEVICE
            args = positional(node)
            if placed is None and method == "to" and args and not self._is_dtype(args[0]):
                if self.evaluate(args[0], env).is_device:
                    placed = DEVICE  # ``.to(other_tensor)``: where ``other`` is
            if placed is None:
                return receiver  # a dtype cast
            if placed.is_device and not (receiver.tensor or receiver.is_host):
                return DEVICE_OBJECT  # ``Model(...).to(device)`` is a module, not a tensor
            return placed
        if receiver.is_host:
            return HOST_TENSOR if receiver.tensor else HOST
        if receiver.tensor or method in TENSOR_METHODS:
            tensor = as_tensor(receiver)
            if method in MASK_METHODS or (receiver.mask and method in _MASK_KEEPING):
                return as_mask(tensor)
            return tensor
        return DEVICE_OBJECT if receiver.is_device else UNKNOWN

    def _is_dtype(self, node: cst.BaseExpression) -> bool:
        name = dotted(node) or ""
        return name.endswith("dtype") or (name.startswith("torch.") and name.rsplit(".", 1)[-1] in _DTYPE_NAMES)

    def _builtin_call(self, name: str, node: cst.Call, env) -> Place:
        args = positional(node)
        if name not in ELEMENT_BUILTINS or not args:
            return HOST
        if name == "enumerate":
            return Place("host", elem=Place("host", items=(HOST, self.element(self.evaluate(args[0], env), 0))))
        if name == "zip":
            return Place("host", elem=Place("host", items=tuple(self.element(self.evaluate(a, env), 0) for a in args)))
        return Place("host", elem=self.element(self.evaluate(args[0], env), 0))  # list, tuple, sorted, reversed


def initial_env(params: cst.Parameters) -> dict[str, Place]:
    """Parameters' places from their annotations; a name that says where it lives
    (``seq_lens_cpu``) wins over an annotation. Every other parameter is ``UNKNOWN`` (what the
    caller passed; its name is still read when it is used), not absent: a branch that moves it
    (``if big: qo_offset = qo_offset.to(device)``) leaves it unknown after the join, not on the
    GPU, as it does for a parameter annotated ``torch.Tensor``."""
    env: dict[str, Place] = {}
    for param in named_params(params):
        name = param.name.value
        place = annotation_place(param.annotation)
        env[name] = place if place is not None and name_hint(name) is None else UNKNOWN
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param:
            env[star.name.value] = UNKNOWN
    return env


class ClassAttributes:
    """``self.<attr>`` places as ``__init__`` leaves them, per class of a file (inherited from
    classes of the same file when the subclass does not set them)."""

    def __init__(self, ctx) -> None:
        self.by_class: dict[str, dict[str, Place]] = {}
        classes: dict[str, cst.ClassDef] = {}
        self._collect(ctx.module.body, classes)
        domain = DeviceDomain(ctx.names)
        own: dict[str, dict[str, Place]] = {}
        for name, node in classes.items():
            init = _method(node, "__init__")
            if init is None:
                own[name] = {}
                continue
            env = Walker(domain).walk(_body(init), initial_env(init.params))
            own[name] = {key: value for key, value in env.items() if key.startswith("self.")}
        for name, node in classes.items():
            merged: dict[str, Place] = {}
            for base in reversed(node.bases):
                base_name = base_class_name(base.value)
                if base_name in classes and base_name != name:
                    merged.update(own.get(base_name, {}))
            merged.update(own.get(name, {}))
            self.by_class[name] = merged

    def _collect(self, body, classes: dict[str, cst.ClassDef]) -> None:
        for statement in body:
            if isinstance(statement, cst.ClassDef):
                classes.setdefault(statement.name.value, statement)
                self._collect(_body(statement), classes)

    def of(self, class_name: str | None) -> dict[str, Place]:
        return self.by_class.get(class_name or "", {})


def _sliced(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Subscript) and any(isinstance(e.slice, cst.Slice) for e in node.slice)


def _array_subscript(node: cst.Subscript) -> bool:
    """``x[:, 0]`` / ``x[..., i]`` / ``x[None]``: indexing only arrays and tensors support."""
    elements = node.slice
    if len(elements) > 1 and any(isinstance(e.slice, cst.Slice) for e in elements):
        return True
    for element in elements:
        part = element.slice
        if isinstance(part, cst.Index) and (
            isinstance(part.value, cst.Ellipsis) or (isinstance(part.value, cst.Name) and part.value.value == "None")
        ):
            return True
    return False


def base_class_name(node: cst.BaseExpression) -> str:
    """The written name of a base class (``Generic[T]`` -> ``Generic``, ``mod.Base`` -> ``mod.Base``)."""
    if isinstance(node, cst.Subscript):
        node = node.value
    return dotted(node) or ""


def _method(node: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    for statement in _body(node):
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            return statement
    return None


def _body(node) -> tuple:
    body = getattr(node, "body", None)
    if isinstance(body, cst.IndentedBlock):
        return tuple(body.body)
    return ()
