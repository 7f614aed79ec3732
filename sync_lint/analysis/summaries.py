"""Facts about functions that cross file boundaries, and the calls that need them.

Per file, analyses record for each function (keyed by its dotted qualified name):
- which parameters reach a contiguity-requiring sink (``needs_contiguous``), directly or by
  being passed on to another function (``forwards``), and
- whether it performs an undeclared GPU->CPU sync (``sync``), directly or by calling another
  function that does (``sync_calls``).
Rules yield a ``PendingCall`` for each call whose verdict depends on the callee's summary.
``sync_lint.pipeline.project`` closes the summaries over the call graph once per run and turns
pending calls into diagnostics. Everything here is plain picklable data (it is cached).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sync_lint.diagnostics import Diagnostic

# A callee argument: a position (0-based, ``self`` excluded for methods) or a keyword name.
ArgKey = int | str


@dataclass(frozen=True)
class Forward:
    """``param`` of this function is passed unchanged (layout-wise) as ``arg`` of ``callee``."""

    param: str
    callee: str
    arg: ArgKey
    line: int


@dataclass(frozen=True)
class SyncCall:
    """An undeclared call of ``callee`` from this function (it syncs if the callee does)."""

    callee: str
    line: int


@dataclass
class FunctionSummary:
    qualname: str
    params: tuple[str, ...]  # without ``self`` / ``cls``
    path: str
    # param -> why it must be contiguous ("read as `ptr + i` by the Triton kernel `k`")
    needs_contiguous: dict[str, str] = field(default_factory=dict)
    forwards: list[Forward] = field(default_factory=list)
    # why calling this function syncs ("`.tolist()` at line 12"), or None
    sync: str | None = None
    sync_calls: list[SyncCall] = field(default_factory=list)

    def param_for(self, arg: ArgKey) -> str | None:
        if isinstance(arg, str):
            return arg if arg in self.params else None
        return self.params[arg] if 0 <= arg < len(self.params) else None


@dataclass(frozen=True)
class PendingCall:
    """A diagnostic to emit only if the callee's closed summary says so.

    ``kind`` is "contiguity" (emit if the callee needs argument ``arg`` contiguous) or "sync"
    (emit if the callee syncs). ``diagnostic.message`` may contain ``{reason}`` and ``{callee}``,
    filled from the summary.
    """

    kind: str
    callee: str
    arg: ArgKey | None
    diagnostic: Diagnostic
