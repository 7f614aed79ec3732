"""Runtime checker for GPU->CPU synchronisations in an inference engine's step.

Usage, as an engine wires it::

    # once, after model loading, warm-up and CUDA-graph capture:
    enable_sync_check()

    @sync_checked_step()
    def execute_model(...):
        ...
        with gpu_sync_allowed():          # an intended, declared sync
            n = int(indptr[-1].item())

The mode comes from the environment variable ``GPU_SYNC_CHECK`` (``warn`` | ``error``;
unset, empty or ``off`` disables the check). It is read once, at import;
:func:`set_sync_check_mode` changes it afterwards (tests).

With the check off, :func:`gpu_sync_allowed` returns one shared
``contextlib.nullcontext()`` object and :func:`sync_checked_step` does nothing, so both
can stay in the hot path.

Two detectors run inside an armed step:

* CUDA: ``torch.cuda.set_sync_debug_mode`` set to the mode for the duration of the step.
  PyTorch reports every synchronising CUDA call (``.item()``, ``.tolist()``,
  ``.cpu()``, ``nonzero``, ...). The switch is process-global, so an allowed region
  turns it off (mode 0) for the whole process while it is open; a step on another
  thread is unchecked meanwhile. In ``error`` mode PyTorch's ``RuntimeError`` is
  re-raised as :class:`GPUSyncError` naming the offending line; in ``warn`` mode
  PyTorch issues its own ``UserWarning`` (attributed by Python to the calling line),
  whose text is PyTorch's, not this module's.
* CPU (to prove syncs without a GPU): a ``TorchDispatchMode`` that watches tensors
  marked with :func:`mark_device_resident`. Marks live on storages, so views and
  slices of a marked tensor count; outputs of any op that reads a marked tensor inside
  the step are marked too. It reports ``aten._local_scalar_dense`` (what ``.item()``,
  ``int(t)``, ``float(t)``, ``bool(t)``, ``if t:``, ``range(t)`` call), ``nonzero``,
  boolean-mask indexing and index-put, ``masked_select``, ``unique``,
  ``repeat_interleave`` without ``output_size`` and ``equal``. ``.tolist()``,
  ``.numpy()``, ``.cpu()`` and ``.to("cpu")`` bypass the dispatcher (or, on a CPU
  tensor, return it unchanged), so the step also patches those four ``torch.Tensor``
  methods, once, with wrappers that check marked tensors. Host reads that go neither
  through the dispatcher nor through those methods (``t.data_ptr()`` arithmetic,
  ``memoryview``/DLPack hand-offs, ``torch.equal`` via C++) are not seen. The
  dispatch mode is only pushed while some tensor is marked, so production steps on a
  GPU pay nothing for it.

Allowed regions are tracked per thread and per asyncio task through ``contextvars``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys
import threading
import warnings
import weakref
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = [
    "GPUSyncError",
    "GPUSyncWarning",
    "clear_device_resident",
    "disable_sync_check",
    "enable_sync_check",
    "gpu_sync_allowed",
    "is_device_resident",
    "mark_device_resident",
    "set_sync_check_mode",
    "sync_check_mode",
    "sync_checked_step",
]

ENV_VAR = "GPU_SYNC_CHECK"
_MODES = ("off", "warn", "error")


class GPUSyncError(RuntimeError):
    """An undeclared GPU->CPU sync happened inside an armed step (``error`` mode)."""


class GPUSyncWarning(UserWarning):
    """An undeclared GPU->CPU sync happened inside an armed step (``warn`` mode)."""


def _parse_mode(raw: str | None) -> str:
    value = (raw or "").strip().lower()
    if value in ("", "0", "off", "none"):
        return "off"
    if value in _MODES:
        return value
    raise ValueError(f"{ENV_VAR} must be one of 'warn', 'error' or 'off', got {raw!r}")


_mode: str = _parse_mode(os.environ.get(ENV_VAR))
# Returned by gpu_sync_allowed() whenever the check is off: one object, no allocation.
_NULL_CONTEXT = contextlib.nullcontext()
# Flipped by enable_sync_check() after warm-up; process-wide like the engine's warm-up.
_armed: bool = False

# Per thread and per asyncio task: is the code inside `with gpu_sync_allowed():` /
# inside an armed step?
_in_allowed_region: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "gpu_sync_allowed", default=False
)
_in_checked_step: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "sync_checked_step", default=False
)

# Call sites (file, line) whose `gpu_sync_allowed(first_only=True)` was already used
# inside an armed step.
_first_only_sites_used: set[tuple[str, int]] = set()
_first_only_lock = threading.Lock()

# Storages of tensors that stand for device memory in CPU tests.
_resident_storages: weakref.WeakSet[torch.UntypedStorage] = weakref.WeakSet()

_THIS_FILE = os.path.abspath(__file__)
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def sync_check_mode() -> str:
    """The current mode: ``"off"``, ``"warn"`` or ``"error"``."""
    return _mode


def set_sync_check_mode(mode: str | None) -> str:
    """Set the mode (``None``: re-read ``GPU_SYNC_CHECK``); returns the previous one.

    Also forgets which ``first_only`` sites were used, so a test starts clean.
    """
    global _mode
    previous = _mode
    _mode = _parse_mode(os.environ.get(ENV_VAR) if mode is None else mode)
    with _first_only_lock:
        _first_only_sites_used.clear()
    return previous


def enable_sync_check() -> None:
    """Arm the checker: call once warm-up and graph capture are done."""
    global _armed
    _armed = True


def disable_sync_check() -> None:
    """Disarm the checker (e.g. before a re-capture, or at the end of a test)."""
    global _armed
    _armed = False


def mark_device_resident(tensor: torch.Tensor) -> torch.Tensor:
    """Make the CPU detector treat ``tensor`` (and every view of it) as GPU memory."""
    _resident_storages.add(tensor.untyped_storage())
    return tensor


def is_device_resident(tensor: torch.Tensor) -> bool:
    return tensor.layout == torch.strided and tensor.untyped_storage() in _resident_storages


def clear_device_resident() -> None:
    """Forget all marks (test isolation; marks also vanish with their storages)."""
    _resident_storages.clear()


@functools.cache
def _cuda_available() -> bool:
    return torch.cuda.is_available()


class _AllowedRegion:
    """Exempts the enclosed code, in this thread / task only, from both detectors."""

    __slots__ = ("_cuda_mode_before", "_token")

    def __enter__(self) -> None:
        self._token = _in_allowed_region.set(True)
        self._cuda_mode_before = 0
        if _cuda_available():
            self._cuda_mode_before = torch.cuda.get_sync_debug_mode()
            if self._cuda_mode_before:
                torch.cuda.set_sync_debug_mode(0)

    def __exit__(self, *exc_info: object) -> None:
        if self._cuda_mode_before:
            torch.cuda.set_sync_debug_mode(self._cuda_mode_before)
        _in_allowed_region.reset(self._token)


def gpu_sync_allowed(
    first_only: bool = False,
) -> contextlib.AbstractContextManager[None]:
    """Declare that the enclosed code syncs on purpose.

    ``first_only=True``: only the first entry from this call site (file, line) inside
    an armed step is exempt; later entries are checked as usual. For syncs that happen
    once, e.g. when a lazily built cache is filled.
    """
    if _mode == "off":
        return _NULL_CONTEXT
    if first_only and _in_checked_step.get():
        caller = sys._getframe(1)
        site = (caller.f_code.co_filename, caller.f_lineno)
        with _first_only_lock:
            if site in _first_only_sites_used:
                return _NULL_CONTEXT
            _first_only_sites_used.add(site)
    return _AllowedRegion()


def _is_offender(filename: str) -> bool:
    return filename != _THIS_FILE and not filename.startswith(_TORCH_DIR)


def _first_frame_outside_torch() -> FrameType | None:
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not _is_offender(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def _message(what: str, filename: str, lineno: int, function: str) -> str:
    return (
        f"GPU->CPU sync outside gpu_sync_allowed(): {what} at {filename}:{lineno} "
        f"(in {function}). Remove the sync or declare it with `with gpu_sync_allowed():`."
    )


def _report(what: str) -> None:
    frame = _first_frame_outside_torch()
    if frame is None:
        filename, lineno, function = "<unknown>", 0, "<unknown>"
    else:
        filename, lineno, function = frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name
    text = _message(what, filename, lineno, function)
    if _mode == "error":
        raise GPUSyncError(text)
    warnings.warn_explicit(text, GPUSyncWarning, filename, lineno)


def _must_report(tensor: torch.Tensor) -> bool:
    return (
        _in_checked_step.get()
        and not _in_allowed_region.get()
        and is_device_resident(tensor)
    )


_aten = torch.ops.aten
# Ops whose result the host must wait for: a scalar read or a data-dependent shape.
_SYNCING_OPS = {
    _aten._local_scalar_dense: ".item() / int() / float() / bool() of a device tensor",
    _aten.nonzero: "nonzero() (also torch.where(cond) with one argument)",
    _aten.masked_select: "masked_select()",
    _aten._unique2: "unique()",
    _aten.unique_dim: "unique(dim=...)",
    _aten.unique_consecutive: "unique_consecutive()",
    _aten.equal: "torch.equal()",
}
_INDEXING_OPS = (_aten.index, _aten.index_put, _aten.index_put_, _aten._index_put_impl_)
_MASK_DTYPES = (torch.bool, torch.uint8)


def _sync_description(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> str | None:
    packet = func.overloadpacket
    if packet in _SYNCING_OPS:
        return f"aten.{packet.__name__}: {_SYNCING_OPS[packet]}"
    if packet in _INDEXING_OPS:
        indices = args[1]
        if any(i is not None and i.dtype in _MASK_DTYPES for i in indices):
            return f"aten.{packet.__name__} with a boolean mask (x[mask] / x[mask] = v)"
    if (
        packet is _aten.repeat_interleave
        and func is not _aten.repeat_interleave.self_int
        and kwargs.get("output_size") is None
    ):
        return "aten.repeat_interleave with tensor repeats and no output_size"
    return None


class _HostReadDetector(TorchDispatchMode):
    """Sees every aten op in the step; reports the syncing ones on marked tensors."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        reads_resident = any(is_device_resident(t) for t in tensors)
        if reads_resident and not _in_allowed_region.get():
            what = _sync_description(func, args, kwargs)
            if what is not None:
                _report(what)
        out = func(*args, **kwargs)
        if reads_resident:
            # Derived data lives where its inputs live.
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                    _resident_storages.add(t.untyped_storage())
        return out


def _targets_cpu(args: tuple, kwargs: dict) -> bool:
    device = torch._C._nn._parse_to(*args, **kwargs)[0]
    return device is not None and device.type == "cpu"


_HOST_READ_METHODS: dict[str, Callable[[tuple, dict], bool]] = {
    "tolist": lambda args, kwargs: True,
    "numpy": lambda args, kwargs: True,
    "cpu": lambda args, kwargs: True,
    "to": _targets_cpu,
}
_host_read_patch_lock = threading.Lock()
_host_read_methods_patched = False


def _wrap_host_read(name: str, original: Callable, reads_host: Callable[[tuple, dict], bool]):
    @functools.wraps(original)
    def checked(self: torch.Tensor, *args: Any, **kwargs: Any):
        if _must_report(self) and reads_host(args, kwargs):
            _report(f"Tensor.{name}() of a device tensor")
        return original(self, *args, **kwargs)

    return checked


def _patch_host_read_methods() -> None:
    """Route the dispatcher-bypassing host reads through a check (process-wide, once).

    The wrappers cost one context-variable read per call outside armed steps.
    """
    global _host_read_methods_patched
    with _host_read_patch_lock:
        if _host_read_methods_patched:
            return
        for name, reads_host in _HOST_READ_METHODS.items():
            original = getattr(torch.Tensor, name)
            setattr(torch.Tensor, name, _wrap_host_read(name, original, reads_host))
        _host_read_methods_patched = True


_CUDA_SYNC_ERROR_TEXT = "synchronizing CUDA operation"


def _offender_in_traceback(tb: TracebackType | None) -> tuple[str, int, str]:
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame.f_code.co_name))
        tb = tb.tb_next
    for filename, lineno, function in reversed(frames):
        if _is_offender(filename):
            return filename, lineno, function
    return "<unknown>", 0, "<unknown>"


_F = TypeVar("_F", bound=Callable[..., Any])


class _CheckedStep:
    """Context manager / decorator returned by :func:`sync_checked_step`."""

    def __init__(self) -> None:
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self) -> None:
        # Nested steps are checked by the outermost one only.
        if _mode == "off" or not _armed or _in_checked_step.get():
            return
        stack = contextlib.ExitStack()
        token = _in_checked_step.set(True)
        stack.callback(_in_checked_step.reset, token)
        if len(_resident_storages):
            _patch_host_read_methods()
            stack.enter_context(_HostReadDetector())
        if _cuda_available():
            previous = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode(_mode)
            stack.callback(torch.cuda.set_sync_debug_mode, previous)
        self._stack = stack

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._stack is None:
            return
        self._stack.close()
        self._stack = None
        if isinstance(exc, RuntimeError) and _CUDA_SYNC_ERROR_TEXT in str(exc):
            filename, lineno, function = _offender_in_traceback(tb)
            what = f"synchronizing CUDA call ({str(exc).strip()})"
            raise GPUSyncError(_message(what, filename, lineno, function)) from exc

    def __call__(self, fn: _F) -> _F:
        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any):
            with _CheckedStep():
                return fn(*args, **kwargs)

        return checked  # type: ignore[return-value]


def sync_checked_step() -> _CheckedStep:
    """Check the enclosed step (``with sync_checked_step():`` or ``@sync_checked_step()``).

    Does nothing while the mode is off or before :func:`enable_sync_check`.
    """
    return _CheckedStep()
