"""``--profile``: time per phase, per analysis and per rule.

Times are exclusive: while a rule asks for an analysis (computed on first use), the analysis's
time is counted under the analysis, not again under the rule; so the rows add up to the time
spent in the pipeline. Each worker process keeps its own profiler and sends its totals back
with its results; the runner adds them up. When profiling is off, ``span`` hands out one shared
no-op context manager, so the hot path pays a function call and nothing more.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter

_NOTHING = contextlib.nullcontext()


class Profiler:
    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self._stack: list[str] = []
        self._mark = 0.0

    def _enter(self, label: str) -> None:
        now = time.perf_counter()
        if self._stack:
            self.seconds[self._stack[-1]] += now - self._mark
        self._stack.append(label)
        self._mark = now

    def _exit(self) -> None:
        now = time.perf_counter()
        label = self._stack.pop()
        self.seconds[label] += now - self._mark
        self.calls[label] += 1
        self._mark = now

    @contextlib.contextmanager
    def _span(self, label: str):
        self._enter(label)
        try:
            yield
        finally:
            self._exit()

    def add(self, other: tuple[dict[str, float], dict[str, int]]) -> None:
        seconds, calls = other
        self.seconds.update(seconds)
        self.calls.update(calls)

    def take(self) -> tuple[dict[str, float], dict[str, int]]:
        """The totals so far, then start again (a worker sends them once per batch)."""
        totals = dict(self.seconds), dict(self.calls)
        self.seconds.clear()
        self.calls.clear()
        return totals

    def report(self, wall: float, files: int, jobs: int) -> str:
        total = sum(self.seconds.values()) or 1e-9
        lines = [
            (f"sync-lint profile: {files} files, {jobs} job(s), {wall:.2f} s wall, "
            f"{total:.2f} s in the pipeline (summed over processes)"),
            f"{'phase':<34}{'seconds':>10}{'share':>8}{'calls':>9}",
        ]
        for label, seconds in sorted(self.seconds.items(), key=lambda item: -item[1]):
            lines.append(f"{label:<34}{seconds:>10.3f}{seconds / total:>8.1%}{self.calls[label]:>9}")
        return "\n".join(lines)


_active: Profiler | None = None


def enable() -> Profiler:
    global _active
    _active = Profiler()
    return _active


def active() -> Profiler | None:
    return _active


def add_worker_totals(totals: tuple[dict[str, float], dict[str, int]] | None) -> None:
    """A worker's totals (``Profiler.take``; None where it was not profiling) counted in this
    process's profile, when profiling is on."""
    if _active is not None and totals is not None:
        _active.add(totals)


def span(label: str):
    """``with span("parse"):`` counts the block's time under ``label`` when profiling is on."""
    if _active is None:
        return _NOTHING
    return _active._span(label)
