"""Pausing CPython's cyclic garbage collector where sync-lint builds much data and no cycle.

Each allocation counts towards the collector's next pass, and a pass of the oldest generation
scans every object alive. A libcst parse allocates about one object per character of source:
about 40% of the parse time went to passes that found nothing, since the tree is in no reference
cycle and is freed by reference counting when its file is done (``FileContext.release``;
``tests/test_tree_freed.py``). So a file's lint and outline pause the collector, and so does a
run of many files as a whole (``Linter.run``): its main process holds every file's outline, then
every file's facts, all plain data, and the passes over them were about 45% of the project
plan's time (serial, while the workers wait; ``bench/HISTORY.md``, stop 28). A run's cyclic
garbage is too little to matter: with the collector off throughout, a run of all of vLLM peaks
at the same memory.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """The collector off inside, and back as it was found after (a pause inside a pause
    leaves it off: the outer one restores it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def resume_in_worker() -> None:
    """A worker process is forked from a main process that may be inside a pause; it pauses
    the collector per file itself, and collects between files.

    What it holds by then (what the fork copied, the modules it imported: a lint worker imports
    libcst first) lives as long as it does, and none of it was ever scanned: the first pass
    would scan it all, about 54,000 objects and 13 ms after the parser's import, in the time
    the run waits for the worker's first answer, and touch every page the fork shares. So it is
    frozen first (``gc.freeze``): no later pass looks at it."""
    gc.freeze()
    gc.enable()
