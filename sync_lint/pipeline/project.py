"""Project-wide: close function summaries over the call graph, then resolve pending calls.

Runs once per run in the main process, on the ``FileFacts`` of every checked file, so that a
call in file A into a kernel wrapper or a syncing helper in file B is judged by B's code.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sync_lint.analysis.project_names import NOTHING_FROM_THE_PROJECT, FileProjectNames
from sync_lint.analysis.summaries import (
    NOT_NONE,
    UNPACKED,
    ArgKey,
    CallFlags,
    DeviceArgs,
    FlagValue,
    Forward,
    FunctionSummary,
    PendingCall,
    Through,
)
from sync_lint.diagnostics import Diagnostic
from sync_lint.pipeline.lint_file import FileFacts, module_name_for
from sync_lint.pipeline.unread import UnreadModules
from sync_lint.rules.base import HOST_COPY

if TYPE_CHECKING:
    from sync_lint.pipeline.project_plan import ProjectNames

_MAX_ALIAS_HOPS = 8


class ProjectIndex:
    def __init__(
        self, all_facts: list[FileFacts], follow_unread: bool = False, names: ProjectNames | None = None,
    ) -> None:
        """``follow_unread``: a run of many files, whose modules with no facts of their imports
        (no rule's words are there: a facade that only re-exports) are read for them when a
        name is first looked up through one (``pipeline.unread``). ``names``: what each file of
        the run heard from the others (``project_plan.ProjectNames``), which a file linted again
        (``pipeline.fix``) is linted with."""
        self.names = names
        self.functions: dict[str, FunctionSummary] = {}
        self.module_imports: dict[str, dict[str, str]] = {}
        self.defined: set[str] = set()  # every function of a parsed file, summarised or not
        self.host_properties: set[str] = set()  # ``FileFacts.host_properties`` of every file
        unread: dict[str, str] = {}  # module -> path
        for facts in all_facts:
            self.functions.update(facts.summaries)
            self.defined.update(facts.functions)
            self.host_properties.update(facts.host_properties)
            if facts.module_name:
                self.module_imports[facts.module_name] = facts.imports
            elif follow_unread:
                unread[module_name_for(facts.path)] = facts.path
        for module in self.module_imports:
            unread.pop(module, None)
        # Kept apart from ``module_imports``, which also tells modules from classes.
        self._unread = UnreadModules(unread)
        # id(summary) -> the parameters that function is known only to read through.
        self._read_only: dict[int, set[str]] = {}
        # The order each fixpoint below visits the summaries in. Where several calls would give
        # a function its need or its sync, the first found is the one its message tells, so the
        # order must not follow the facts' (a file's summaries come in the order its functions
        # were analysed, which what is masked changes): by name, the fast and the plain paths,
        # and a run of one file or of many, tell the same call.
        self._in_order = sorted(self.functions.values(), key=lambda summary: summary.qualname)
        self._close()
        self._close_read_only()
        self._close_writes()

    def project_names_of(self, path: str) -> FileProjectNames:
        return self.names.of(path) if self.names is not None else NOTHING_FROM_THE_PROJECT

    def lookup(self, name: str) -> FunctionSummary | None:
        """The summary for a dotted name, following re-exports (``from .ops import f``)."""
        for _ in range(_MAX_ALIAS_HOPS):
            found = self.functions.get(name)
            if found is not None or name in self.defined:
                # A function defined there without a summary needs nothing, even where the
                # module also imports the name (a platform branch): whether a summary was made
                # for it (which depends on the rules run) must not decide where a call goes.
                return found
            rewritten = self._through_reexport(name)
            if rewritten is None or rewritten == name:
                return None
            name = rewritten
        return None

    def _through_reexport(self, name: str) -> str | None:
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            imports = self.module_imports.get(module)
            if imports is None:
                imports = self._unread.imports_for(module, parts[cut])
            if imports is not None and parts[cut] in imports:
                return ".".join([imports[parts[cut]], *parts[cut + 1 :]])
        return None

    def _close(self) -> None:
        """Propagate the layout needs through forwards and syncs through calls, to a fixpoint.

        A parameter passed on to a contiguity need needs contiguity; passed on only to a
        unit-last-stride need, a unit last stride; contiguity wins. A forward whose call binds a
        flag that excuses the callee's need (``FunctionSummary.excused``) passes on nothing; one
        that hands it a flag parameter of its own, or happens only where a flag is false
        (``Forward.unless``), passes the need on excused by that flag; a sync passes through a
        call (``SyncCall``) the same way, and a blocking copy onto the GPU through any call that
        may make one (``upload_calls``). Each parameter only ever moves up (no need -> unit
        stride -> contiguous; the flags excusing it only shrink, as those excusing a sync, and
        ``same_strides_as`` entries are only added; an ``upload`` is only set), so this terminates."""
        changed = True
        while changed:
            changed = False
            for summary in self._in_order:
                for forward in summary.forwards:
                    if forward.param in summary.needs_contiguous and forward.param not in summary.needs_unless:
                        continue
                    callee = self.lookup(forward.callee)
                    if callee is None or callee is summary:
                        continue
                    changed |= self._pass_on(summary, forward, callee)
                for call in summary.sync_calls:
                    if summary.sync is not None and not summary.sync_unless:
                        break  # syncs whatever a call binds: nothing more to learn
                    if call.through:
                        why = self._through(call.through, "sync", summary)
                        if why is not None:
                            short = call.callee.rsplit(".", 1)[-1]
                            changed |= summary.record_sync(f"calls `{short}` (line {call.line}), which {why}", call.unless)
                        continue
                    callee = self.lookup(call.callee)
                    if callee is None or callee is summary:
                        continue
                    short = call.callee.rsplit(".", 1)[-1]
                    if callee.sync is None:
                        why = callee.sync_on_device(call.device_args)
                        if why is not None:
                            changed |= summary.record_sync(f"calls `{short}` (line {call.line}), which {why}", call.unless)
                        continue
                    if callee.sync_excused(call.flags):
                        continue
                    unless = _excused_here(call.unless, call.flags, callee, callee.sync_unless)
                    changed |= summary.record_sync(f"calls `{short}` (line {call.line}), which {callee.sync}", unless)
                changed |= self._pass_upload_on(summary)

    def _pass_upload_on(self, summary: FunctionSummary) -> bool:
        """A function makes a blocking copy onto the GPU where the first function it calls that
        does is called with what makes it copy (``upload_calls``: flags aside, which the walk
        that finds the copies does not look at); where a device it is handed decides, it copies
        where it is handed a GPU one (``uploads_to``). Changed?"""
        if summary.upload is not None:
            return False
        changed = False
        for call in summary.upload_calls:
            callee = self.lookup(call.callee)
            if callee is None or callee is summary:
                continue
            found = callee.upload_with(call.devices)
            if found is None:
                continue
            why, through_param = found
            reason = f"calls `{call.callee.rsplit('.', 1)[-1]}` (line {call.line}), which {why}"
            if through_param is None:
                summary.upload = reason
                return True
            if through_param not in summary.uploads_to:
                summary.uploads_to[through_param] = reason
                changed = True
        return changed

    def _through(self, through: Through, kind: str, caller: FunctionSummary | None = None) -> str | None:
        """Why a call that its arguments keep from syncing (kind "sync") or from making a blocking
        copy onto the GPU ("upload") by itself still does (``Through``): the first of the calls
        it still makes whose callee does. What those calls bind is not known here, so a callee
        that syncs only under a flag counts as syncing, and one that copies only onto a device it
        is handed as copying nothing."""
        for name, line in through:
            callee = self.lookup(name)
            if callee is None or callee is caller:
                continue
            why = callee.sync if kind == "sync" else callee.upload
            if why is not None:
                return f"calls `{name.rsplit('.', 1)[-1]}` (line {line}), which {why}"
        return None

    @staticmethod
    def _pass_on(summary: FunctionSummary, forward: Forward, callee: FunctionSummary) -> bool:
        """Give ``forward.param`` what ``callee`` needs of the argument it is handed as; changed?"""
        callee_param = callee.param_for(forward.arg)
        short = forward.callee.rsplit(".", 1)[-1]
        shared = _stepped_with(summary, forward, callee, callee_param)
        known = summary.same_strides_as.get(forward.param)
        if shared is not None and (known is None or known[0] == shared[0]):
            if known is None and forward.param not in summary.needs_contiguous:  # the first call found says why
                summary.same_strides_as[forward.param] = shared
                return True
            return False
        before = (forward.param in summary.needs_contiguous, forward.param in summary.needs_unit_stride,
                  summary.needs_unless.get(forward.param))
        if shared is not None:  # stepped through with two tensors' strides: only dense is safe
            summary.need_contiguous(forward.param, f"{shared[1]}, and elsewhere with those of `{known[0]}`")
        elif callee_param in callee.same_strides_as:  # the other tensor is not a parameter here
            summary.need_contiguous(forward.param, (
                f"passed on to `{short}` (line {forward.line}), where it is {callee.same_strides_as[callee_param][1]}"
            ))  # fmt: skip
        elif callee_param is None or callee.excused(callee_param, forward.flags):
            return False
        elif callee_param in callee.needs_contiguous:
            summary.need_contiguous(forward.param, (
                f"passed on to `{short}` (line {forward.line}), where it is {callee.needs_contiguous[callee_param]}"
            ), _excused_here(forward.unless, forward.flags, callee, callee.needs_unless.get(callee_param)))  # fmt: skip
        elif callee_param in callee.needs_unit_stride:
            summary.need_unit_stride(forward.param, (
                f"passed on to `{short}` (line {forward.line}), where it is {callee.needs_unit_stride[callee_param]}"
            ), _excused_here(forward.unless, forward.flags, callee, callee.needs_unless.get(callee_param)))  # fmt: skip
        after = (forward.param in summary.needs_contiguous, forward.param in summary.needs_unit_stride,
                 summary.needs_unless.get(forward.param))
        return after != before

    def _close_read_only(self) -> None:
        """A parameter is only read through when each callee argument it is handed to is
        (``FunctionSummary.read_only_if``), starting from the kernels that load through theirs.
        Proven sets only grow, so this ends; a cycle of forwards proves nothing."""
        changed = True
        while changed:
            changed = False
            for summary in self._in_order:
                proven = self._read_only.setdefault(id(summary), set())
                for param, handed_to in summary.read_only_if.items():
                    if param not in proven and all(self.only_reads(callee, arg) for callee, arg in handed_to):
                        proven.add(param)
                        changed = True

    def _close_writes(self) -> None:
        """A parameter passed on to a callee that writes through its argument is written
        through (``FunctionSummary.writes_through``), starting from the kernels that store
        through theirs, unless the function may return it (the writes then reach the caller).
        Entries are only added, each once, so this ends."""
        changed = True
        while changed:
            changed = False
            for summary in self._in_order:
                for forward in summary.forwards:
                    if forward.param in summary.writes_through or forward.param in summary.returned:
                        continue
                    callee = self.lookup(forward.callee)
                    if callee is None or callee is summary:
                        continue
                    written = callee.writes_through.get(callee.param_for(forward.arg) or "")
                    if written is not None:
                        short = forward.callee.rsplit(".", 1)[-1]
                        summary.writes_through[forward.param] = f"passed on to `{short}` (line {forward.line}), where it is {written}"
                        changed = True

    def written_through(self, callee_name: str, arg: ArgKey | None) -> str | None:
        """How ``callee_name`` is known to write through its argument ``arg``; None: not known to."""
        callee = self.lookup(callee_name)
        if callee is None or arg is None:
            return None
        return callee.writes_through.get(callee.param_for(arg) or "")

    def only_reads(self, callee_name: str, arg: ArgKey | None) -> bool:
        """Is ``callee_name`` known only to read through its argument ``arg``?"""
        callee = self.lookup(callee_name)
        if callee is None or arg is None:
            return False
        return callee.param_for(arg) in self._read_only.get(id(callee), ())

    def reason(self, kind: str, callee_name: str, arg, arg_views: tuple[tuple[ArgKey, str], ...] = (),
               flags: CallFlags = (), row_stride: int | None = None, through: Through = (),
               device_args: tuple[ArgKey, ...] = (), devices: DeviceArgs = ()) -> str | None:
        """Why a call of ``callee_name`` (argument ``arg``; ``arg_views``: the call's arguments
        that are views, ``PendingCall.arg_views``; ``flags``: those that may be flags,
        ``PendingCall.flags``; ``through``: ``PendingCall.through``; ``device_args``: those on
        the GPU; ``devices``: what it hands as devices, ``PendingCall.devices``) is a finding of
        ``kind``; None: it is not."""
        if kind == HOST_COPY:  # GPU203: stale unless one of the host copies read is a property
            return None if self.host_properties.intersection(callee_name.split("|")) else ""
        if kind in ("sync", "upload") and through:
            return self._through(through, kind)
        callee = self.lookup(callee_name)
        if callee is None:
            return None
        if kind == "upload":
            found = callee.upload_with(devices)  # a hot function's parameter counts as a GPU device
            return None if found is None else found[0]
        if kind in ("contiguity", "unit-stride"):
            param = callee.param_for(arg) if arg is not None else None
            need = callee.need_of(param, unit_stride_counts=kind == "unit-stride")
            if need is not None and callee.excused(param, flags):
                return None  # ``chunk(q, use_l2norm=True)``: the callee makes ``q`` contiguous itself
            if need is not None and row_stride is not None and row_stride in callee.row_strides.get(param, ()):
                return None  # the kernel steps through it by its own row stride, written out
            if need is not None:
                return need + _not_when(callee.needs_unless.get(param))
            if param not in callee.same_strides_as:
                return None
            # Stepped through with another argument's strides: fine where that one is the same view.
            other, why = callee.same_strides_as[param]
            views = {callee.param_for(key): view for key, view in arg_views}
            if views.get(param) is not None and views.get(param) == views.get(other):
                return None
            return f"{why}, which is not handed the same view"
        if callee.sync is None:
            return callee.sync_on_device(device_args)
        if callee.sync_excused(flags):
            return None  # ``prepare(n, return_host=False)``: the sync is under that flag
        return callee.sync + _not_when(callee.sync_unless)

    def resolve(self, pending: PendingCall) -> Diagnostic | None:
        reason = self.reason(pending.kind, pending.callee, pending.arg, pending.arg_views, pending.flags,
                             pending.row_stride, pending.through, pending.device_args, pending.devices)
        if reason is None:
            return None
        d = pending.diagnostic
        short = pending.callee.rsplit(".", 1)[-1]
        fix = d.fix
        advice = pending.advice
        written = self.written_through(pending.callee, pending.arg) if advice else None
        if written is not None:
            # A contiguous copy would take the callee's writes, and nothing reads them back.
            instead = "pass the strides, or hand it a contiguous tensor and copy the result back."
            if written == reason:  # the message already says how it is written
                advice = f"A `.contiguous()` copy would lose those writes: {instead}"
            else:
                advice = f"`{short}` also writes through it ({written}), so a `.contiguous()` copy would lose them: {instead}"
            fix = None
        elif fix is not None and pending.fix_safe_if_read_only and self.only_reads(pending.callee, pending.arg):
            fix = replace(fix, applicability="safe")
        message = d.message.replace("{reason}", reason).replace("{callee}", short).replace("{advice}", advice)
        return Diagnostic(d.path, d.line, d.col, d.end_line, d.end_col, d.code, message, fix)


def _not_when(unless: frozenset[FlagValue] | None) -> str:
    """The calls a reported need or sync does not hold for, to end its reason with: how the
    call could be written instead (``; not so when called with `use_l2norm=True` ``)."""
    if not unless:
        return ""
    ways = " or ".join(f"`{flag}` other than None" if value is NOT_NONE else f"`{flag}={value}`"
                       for flag, value in sorted(unless, key=lambda item: (item[0], str(item[1]))))
    return f"; not so when called with {ways}"


def _excused_here(unless: frozenset[FlagValue], flags: CallFlags, callee: FunctionSummary,
                  callee_unless: frozenset[FlagValue] | None) -> frozenset[FlagValue]:
    """What excuses, in the caller, the need (or sync) a call passes on: the flags the call
    happens only without (``unless``: ``Forward.unless``, ``SyncCall.unless``), and each flag
    excusing the callee's (``callee_unless``) that the call hands a flag parameter of the caller
    (``flags``: ``chunk(q, use_l2norm=normalize)`` hands ``normalize``)."""
    handed = {callee.param_for(key): value for key, value in flags if isinstance(value, str) and key not in UNPACKED}
    translated = {(handed[flag], value) for flag, value in callee_unless or () if flag in handed}
    return unless | translated


def _stepped_with(summary: FunctionSummary, forward: Forward, callee: FunctionSummary,
                  callee_param: str | None) -> tuple[str, str] | None:
    """The other parameter of ``summary``'s function whose strides the callee steps through
    ``forward.param`` with (``FunctionSummary.same_strides_as``), and why; None: not so.

    A launch: the kernel's offsets for the pointer use an argument bound to the strides of one
    other tensor, a parameter here (``_k[grid](q, k, s=q.stride(0))``). A function: the callee
    steps through its parameter with another's, and this call hands that one a parameter too."""
    if callee_param is None:
        return None
    short = forward.callee.rsplit(".", 1)[-1]
    offsets = callee.offset_params.get(callee_param)
    if offsets and forward.stride_roots:
        roots = {root for key, root in forward.stride_roots if callee.param_for(key) in offsets} - {forward.param}
        if len(roots) == 1 and (root := roots.pop()) in summary.params:
            return root, f"stepped through by `{short}` (line {forward.line}) with the strides of `{root}`"
        return None
    shared = callee.same_strides_as.get(callee_param)
    if shared is None:
        return None
    other, why = shared
    for sibling in summary.forwards:
        if sibling.callee == forward.callee and sibling.line == forward.line and callee.param_for(sibling.arg) == other:
            return sibling.param, f"passed on to `{short}` (line {forward.line}), where it is {why}"
    return None
