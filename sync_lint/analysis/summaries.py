"""Facts about functions that cross file boundaries, and the calls that need them.

Per file, analyses record for each function (keyed by its dotted qualified name):
- which parameters reach a contiguity-requiring sink (``needs_contiguous``), or a place that
  needs only a unit stride in the last dim (``needs_unit_stride``: ``assert p.stride(-1) == 1``,
  ``p.view(dtype)``), directly or by being passed on to another function (``forwards``), and
- which parameters it only reads through (``read_only_if``), so that a ``.contiguous()`` copy
  handed to it in their place changes nothing but the layout, and which it is known to write
  through (``writes_through``), where such a copy would take the writes and lose them, and
- whether it performs an undeclared GPU->CPU sync (``sync``), directly or by calling another
  function that does (``sync_calls``), or an explicit one on a GPU value a caller hands it
  (``syncs_on``: ``def host_lens(x): return x.tolist()`` called with a GPU tensor), and
- whether it makes a blocking copy of host data onto the GPU (``upload``, GPU205), or does where
  a call hands it a GPU device (``uploads_to``), directly or by calling another function that
  does (``upload_calls``).
Rules yield a ``PendingCall`` for each call whose verdict depends on the callee's summary.
``sync_lint.pipeline.project`` closes the summaries over the call graph once per run and turns
pending calls into diagnostics. Everything here is plain picklable data (it is cached).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from sync_lint.diagnostics import Diagnostic


class _Bound(enum.Enum):
    """What a call binds a parameter to where no literal tells: an enum member, so that it keeps
    its identity through the cache's pickling, and is no flag parameter's name (a ``str``)."""

    NOT_NONE = "not None"


# A value certainly not ``None``, of which nothing else is known (``max_seqlen=x.shape[0]``).
NOT_NONE = _Bound.NOT_NONE

# A callee argument: a position (0-based, ``self`` excluded for methods) or a keyword name.
ArgKey = int | str
# ``(flag, value)``: a parameter ``flag`` of a function bound to ``value`` at a call: True or
# False, or ``NOT_NONE`` (anything but ``None``: ``analysis.flags.flag_tests``).
FlagValue = tuple[str, "bool | _Bound"]
# What a call binds its arguments to, where a flag may be: ``(key, True)`` / ``(key, False)`` for
# a literal, ``(key, "name")`` for a parameter of the calling function, still as passed,
# ``(key, NOT_NONE)`` for another value certainly not ``None``, ``(key, None)`` for any other
# value; and ``("*", "*")`` / ``("**", "**")`` for a ``*args`` / ``**kwargs``, which may bind
# anything.
CallFlags = tuple[tuple[ArgKey, "bool | str | _Bound | None"], ...]
UNPACKED = ("*", "**")
# What a call hands a function's parameters as devices (``UploadCall``): ``(key, value)`` for
# each argument, the value being a parameter of the calling function handed on as passed,
# HOST_DEVICE_ARG for a host device (``"cpu"``, ``torch.device("cpu")``), or None for anything
# else; ``("*", None)`` / ``("**", None)`` for an unpacked argument.
HOST_DEVICE_ARG = "<cpu>"  # no parameter's name
DeviceArgs = tuple[tuple[ArgKey, str | None], ...]


@dataclass(frozen=True)
class UploadCall:
    """A call of ``callee`` that may make a blocking copy onto the GPU, with what it hands the
    callee as devices (None: not known, and only a copy the callee makes whatever it is handed
    counts: a call the walk with a caller's arguments bound still meets, ``Through``)."""

    callee: str
    line: int
    devices: DeviceArgs | None = None


@dataclass(frozen=True)
class Forward:
    """``param`` of this function is passed unchanged (layout-wise) as ``arg`` of ``callee``."""

    param: str
    callee: str
    arg: ArgKey
    line: int
    # A launch's arguments bound to some tensor's strides, with that tensor's root name
    # (``head_stride=q.stride(0)``: ``("head_stride", "q")``); empty for other calls.
    stride_roots: tuple[tuple[ArgKey, str], ...] = ()
    # The call happens only where none of these hold (``if use_l2norm: q = l2norm(q)`` before it:
    # ``q`` reaches it only where ``use_l2norm`` is false): ``(flag parameter, value)``.
    unless: frozenset[FlagValue] = frozenset()
    flags: CallFlags = ()  # the call's arguments that may be flags (``CallFlags``)


# A call of a function of the same file whose own syncs the call's arguments rule out
# (``SyncAnalysis.clean_with_arguments``: host tensors, constants deciding its branches), but
# which still calls other functions there: those calls, each as (callee, line in the function
# called). The call syncs only if one of them does, as the project's summaries decide (a helper
# that only uploads, ``_upload(np.arange(n), device)``, does not). Empty: the callee's summary
# decides.
Through = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class SyncCall:
    """An undeclared call of ``callee`` from this function (it syncs if the callee does, or
    with ``through``, if one of those calls does)."""

    callee: str
    line: int
    unless: frozenset[FlagValue] = frozenset()  # as ``Forward.unless``
    flags: CallFlags = ()  # as ``Forward.flags``
    through: Through = ()
    # The call's arguments known to be on the GPU: it syncs too where the callee syncs on one
    # (``FunctionSummary.syncs_on``).
    device_args: tuple[ArgKey, ...] = ()


@dataclass
class FunctionSummary:
    qualname: str
    params: tuple[str, ...]  # without ``self`` / ``cls``
    path: str
    positional: int | None = None  # how many of ``params`` a position binds (None: all)
    # param -> why it must be contiguous ("read as `ptr + i` by the Triton kernel `k`")
    needs_contiguous: dict[str, str] = field(default_factory=dict)
    # param -> why its last dim must have stride 1, for params that need no more than that (a
    # column-range slice ``x[:, :n]`` is fine there; a transpose is not). Disjoint from
    # ``needs_contiguous``, which wins: write both through ``need_contiguous`` / ``need_unit_stride``.
    needs_unit_stride: dict[str, str] = field(default_factory=dict)
    forwards: list[Forward] = field(default_factory=list)
    # why calling this function syncs ("`.tolist()` at line 12"), or None; excused by any of
    # ``sync_unless`` bound at a call (``if return_host: out.cpu()``; empty: never excused)
    sync: str | None = None
    sync_unless: frozenset[FlagValue] = frozenset()
    sync_calls: list[SyncCall] = field(default_factory=list)
    # param -> why the function syncs where a call hands it a GPU value there ("syncs with
    # `.tolist()` on `x` (line 3)"), for a function with no sync of its own: an explicit sync
    # (``.item()``, ``.tolist()``, ``.cpu()``...) on that parameter, which the summary judges of
    # unknown device (``SyncAnalysis._record_syncs_on``). Not closed over calls.
    syncs_on: dict[str, str] = field(default_factory=dict)
    # why calling this function makes a blocking copy of host data onto the GPU ("copies onto the
    # GPU with `torch.tensor()` of host data ... (line 7)"), or None: an undeclared one of its own
    # outside a run-once region, or one of a function it calls. Not a sync to GPU201: the host
    # waits, but for its own copy (GPU205).
    upload: str | None = None
    # param -> why it makes one where a call hands it a GPU device there (``x_cpu.to(device)``,
    # ``torch.tensor(data, device=device)``): not where the call hands it a host device, nor where
    # it leaves out a parameter that defaults to ``None`` or a host device (``host_defaults``).
    uploads_to: dict[str, str] = field(default_factory=dict)
    host_defaults: frozenset[str] = frozenset()
    # Its undeclared calls of project functions that may make one: closed project-wide into the
    # two above, whatever flags a call binds (a copy under a flag counts).
    upload_calls: list[UploadCall] = field(default_factory=list)
    # param -> the callee arguments it is handed to, for a param this function uses in no other
    # way than to read its metadata (``p.shape``, ``p is None``) or, in a Triton kernel, to load
    # through it: the function only reads through ``param`` if each of those callees only reads
    # through its argument (none: it reads through it itself). Closed project-wide.
    read_only_if: dict[str, tuple[tuple[str, ArgKey], ...]] = field(default_factory=dict)
    # param -> how it is known to be written through ("written as `ptr + offset` by the Triton
    # kernel `k`"): a Triton store or atomic through it, here or in a function it is passed on
    # to (closed project-wide along ``forwards``), where the writes are lost to a caller that
    # handed a copy: not through a function that may return it (``returned``), whose caller may
    # read them from the result. A custom op may write too, but is not known to.
    writes_through: dict[str, str] = field(default_factory=dict)
    returned: frozenset[str] = frozenset()  # params a ``return`` may hand back, whole or in part
    # Triton kernels: pointer param -> the other parameters that the offset of every load and
    # store through it is built from (``q + h * head_stride + t * token_stride``): a launch that
    # binds one of them to the strides of another tensor steps through this pointer with those.
    offset_params: dict[str, frozenset[str]] = field(default_factory=dict)
    # Triton kernels: pointer param -> the literal strides every load and store through it steps
    # by (``Scales + page * 2080 + tl.arange(0, 32)``, in a jit helper it is handed to too): a
    # launch handing it a view whose row stride is one of them (``Layout.row_stride``: a column
    # range of a buffer with 2080-element rows) is read as laid out, not as dense memory.
    row_strides: dict[str, frozenset[int]] = field(default_factory=dict)
    # param -> (other param, why): a kernel steps through ``param`` with the strides of
    # ``other``, so the two must have the same layout, contiguous or not (SGLang's fp8 attention
    # hands ``q``, ``k``, ``v`` all ``permute(1, 0, 2)``-ed and ``q``'s strides alone). A call
    # passing both the same view of their bases needs nothing; otherwise ``param`` needs
    # contiguity, as if read with its own strides (``ProjectIndex.reason``). Closed project-wide.
    same_strides_as: dict[str, tuple[str, str]] = field(default_factory=dict)
    # param -> flag values any one of which, bound at a call, excuses every need of ``param``
    # above: ``chunk(q, use_l2norm=True)`` where ``chunk`` makes ``q`` contiguous itself under
    # that flag. Absent: the need holds whatever the call binds. Closed project-wide.
    needs_unless: dict[str, frozenset[FlagValue]] = field(default_factory=dict)
    flag_defaults: dict[str, bool] = field(default_factory=dict)  # params defaulting to True / False

    def need_contiguous(self, param: str, reason: str, unless: frozenset[FlagValue] = frozenset()) -> None:
        self._condition(param, unless)
        self.needs_unit_stride.pop(param, None)
        self.needs_contiguous.setdefault(param, reason)

    def need_unit_stride(self, param: str, reason: str, unless: frozenset[FlagValue] = frozenset()) -> None:
        if param not in self.needs_contiguous:
            self._condition(param, unless)
            self.needs_unit_stride.setdefault(param, reason)

    def _condition(self, param: str, unless: frozenset[FlagValue]) -> None:
        """Another source of a need of ``param``, excused by ``unless``: the need is excused only
        where every source is, so by the flag values they all name."""
        if param not in self.needs_contiguous and param not in self.needs_unit_stride:
            if unless:
                self.needs_unless[param] = unless
            return
        known = self.needs_unless.get(param)
        if known is not None:
            narrowed = known & unless
            if narrowed:
                self.needs_unless[param] = narrowed
            else:
                del self.needs_unless[param]

    def record_sync(self, reason: str, unless: frozenset[FlagValue] = frozenset()) -> bool:
        """Another reason calling this function syncs, excused by ``unless``: the sync is excused
        only where every reason is (the first reason found is the one told). Changed?"""
        if self.sync is None:
            self.sync, self.sync_unless = reason, unless
            return True
        narrowed = self.sync_unless & unless
        if narrowed == self.sync_unless:
            return False
        self.sync_unless = narrowed
        return True

    def excused(self, param: str, flags: CallFlags) -> bool:
        """Does a call binding ``flags`` (literals only count) excuse the needs of ``param``?"""
        return self._bound_to_any(self.needs_unless.get(param), flags)

    def sync_on_device(self, device_args: tuple[ArgKey, ...]) -> str | None:
        """Why a call that hands GPU values as ``device_args`` syncs by ``syncs_on``; None: not."""
        for key in device_args:
            param = self.param_for(key)
            if param in self.syncs_on:
                return f"{self.syncs_on[param]}, on the GPU value handed to `{param}`"
        return None

    def upload_with(self, devices: DeviceArgs | None) -> tuple[str, str | None] | None:
        """Why a call handing ``devices`` (``UploadCall.devices``) makes a blocking copy onto the
        GPU, and the caller's parameter it does so through (None: whatever the caller is
        handed); None: it makes none."""
        if self.upload is not None:
            return self.upload, None
        if devices is None or not self.uploads_to:
            return None
        unpacked = any(key in UNPACKED for key, _ in devices)
        bound = {name: value for key, value in devices if (name := self.param_for(key)) is not None}
        for param, why in self.uploads_to.items():
            if param in bound:
                if bound[param] != HOST_DEVICE_ARG:
                    return why, bound[param]
            elif unpacked or param not in self.host_defaults:
                return why, None
        return None

    def sync_excused(self, flags: CallFlags) -> bool:
        """Does a call binding ``flags`` excuse this function's sync?"""
        return self._bound_to_any(self.sync_unless, flags)

    def _bound_to_any(self, unless: frozenset[FlagValue] | None, flags: CallFlags) -> bool:
        if not unless:
            return False
        # A default holds unless an unpacked ``*args`` / ``**kwargs`` may bind the flag.
        bound = {} if any(key in UNPACKED for key, _ in flags) else dict(self.flag_defaults)
        for key, value in flags:
            name = self.param_for(key)
            if name is not None:
                bound[name] = value
        return any(bound.get(flag) is value or (value is NOT_NONE and type(bound.get(flag)) is bool)
                   for flag, value in unless)

    def need_of(self, param: str | None, unit_stride_counts: bool) -> str | None:
        """Why ``param`` must be contiguous; or, if ``unit_stride_counts`` (the argument's last
        dim certainly has no unit stride), why its last dim must have stride 1. None: no need."""
        if param is None:
            return None
        reason = self.needs_contiguous.get(param)
        if reason is None and unit_stride_counts:
            reason = self.needs_unit_stride.get(param)
        return reason

    def param_for(self, arg: ArgKey) -> str | None:
        if isinstance(arg, str):
            return arg if arg in self.params else None
        bound = len(self.params) if self.positional is None else self.positional
        return self.params[arg] if 0 <= arg < bound else None  # later positions go to ``*args``


@dataclass(frozen=True)
class PendingCall:
    """A diagnostic to emit only if the callee's closed summary says so.

    ``kind`` is "contiguity" (emit if the callee needs argument ``arg`` contiguous),
    "unit-stride" (the argument's last dim certainly has no stride 1: emit if the callee needs it
    contiguous or needs a unit last stride), "sync" (emit if the callee syncs) or "upload" (emit
    if the callee makes a blocking copy onto the GPU, ``FunctionSummary.upload``).
    ``diagnostic.message`` may contain ``{reason}`` and ``{callee}``, filled from the summary,
    and ``{advice}``, filled with ``advice`` (see there).
    """

    kind: str
    callee: str
    arg: ArgKey | None
    diagnostic: Diagnostic
    # The diagnostic's unsafe ``.contiguous()`` fix is safe if the callee only reads through
    # ``arg`` (``FunctionSummary.read_only_if``): the copy then reaches nothing else.
    fix_safe_if_read_only: bool = False
    # The call's arguments that are views, with the view written after their base
    # (``k.permute(1, 0, 2)``: ``"permute(1, 0, 2)"``), for ``FunctionSummary.same_strides_as``.
    arg_views: tuple[tuple[ArgKey, str], ...] = ()
    flags: CallFlags = ()  # the call's arguments that may be flags (``FunctionSummary.excused``)
    # The argument's row stride where literal sizes tell it (``Layout.row_stride``): a kernel
    # that steps the parameter by it reads the view as laid out (``FunctionSummary.row_strides``).
    row_stride: int | None = None
    # What the finding tells to do, a contiguous copy (``Add `.contiguous()`.``). Where the callee
    # is known to write through ``arg`` (``FunctionSummary.writes_through``), the copy would take
    # the writes and lose them: a warning saying so takes its place, and the fix is dropped.
    advice: str = ""
    through: Through = ()  # kinds "sync" and "upload": as ``SyncCall.through``
    device_args: tuple[ArgKey, ...] = ()  # kind "sync": as ``SyncCall.device_args``
    devices: DeviceArgs = ()  # kind "upload": as ``UploadCall.devices``
