"""What GPU101, GPU102 and GPU103 share: choosing the sink uses to report and building their
finding (report at the argument, fix by appending ``.contiguous()``, conditional on the callee's
summary when the sink is a function that may live in another file)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sync_lint.analysis.expected_failures import ExpectedFailures
from sync_lint.analysis.sinks import (
    ContiguityAnalysis,
    SinkUse,
    append_contiguous,
    callee_need,
    fix_target,
    reported,
)
from sync_lint.rules.base import CalleeCondition, Finding


def reported_uses(analysis: ContiguityAnalysis, verdict: Callable, seen: set[int] | None = None) -> Iterator[SinkUse]:
    """The uses ``verdict`` reports, one per argument node. A call whose argument cannot be
    matched to a callee parameter (``*args``) is skipped: its summary could not decide; so is a
    call a test makes in order to see it fail (``ExpectedFailures``)."""
    seen = set() if seen is None else seen
    expected_failures = analysis.ctx.get(ExpectedFailures)
    for use in analysis.uses:
        if use.callee is not None and use.key is None:
            continue
        if expected_failures.contains(use.call):
            continue
        if not reported(use, verdict):
            continue
        node = fix_target(use) or use.arg
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield use


def sink_finding(use: SinkUse, message: str, advice: str = "", fixable: bool = True) -> Finding:
    """The finding of ``use``: ``message``, then ``advice`` (what to do: a contiguous copy),
    which gives way to a warning where the callee turns out to write through the argument
    (``PendingCall.advice``)."""
    target = fix_target(use) if fixable else None
    condition = None
    if use.callee is not None:
        condition = CalleeCondition(callee_need(use), use.callee, use.key, fix_safe_if_read_only=target is use.arg,
                                    arg_views=use.arg_views, flags=use.flags, advice=advice,
                                    row_stride=use.layout.row_stride)
        message = f"{message} {{advice}}" if advice else message
    elif advice:
        message = f"{message} {advice}"
    return Finding(
        node=target if target is not None else use.arg,
        message=message,
        # Unsafe: the sink may write through the argument, and the writes would go to the copy.
        # Safe once the callee's summary shows that it only reads through it (``PendingCall``),
        # if the fix is on the argument itself: not on the cast or view upstream (``idx = None if
        # c is None else bt[:, 1].to(...)``), whose other uses would get the copy too.
        fix=append_contiguous(target) if target is not None else None,
        if_callee=condition,
    )
