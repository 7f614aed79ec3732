"""Check that a change to the outline pass leaves every file's outline as it was.

The project plan reads nothing of a file but its outline (``project_plan.outline``), so a change
that keeps every outline equal keeps every plan, and so every finding, equal: a stronger check
of a speed-up to the outline than comparing reports, and a faster one (one serial pass, no lint).

    .venv/bin/python bench/compare_outlines.py bench/corpus/src/vllm-0.33.0 --save /tmp/before.pkl
    # ... change the outline pass ...
    .venv/bin/python bench/compare_outlines.py bench/corpus/src/vllm-0.33.0 --against /tmp/before.pkl

Prints the CPU seconds the pass took (serially, in this process: comparable between two runs on
a quiet machine, not a benchmark against the peers), and with ``--against`` the files whose
outlines differ; exits 1 if any does.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sync_lint import config
from sync_lint.pipeline.discover import DEFAULT_EXCLUDE, Discovery
from sync_lint.pipeline.runner import Linter


def outlines(tree: Path) -> tuple[list, float]:
    os.chdir(tree)
    settings = config.load(None, isolated=True)
    files = Discovery(DEFAULT_EXCLUDE, settings.root).files(["."])
    linter = Linter(settings)
    started = time.process_time()
    found = [linter.outline_one(path) for path in files]
    return found, time.process_time() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path, help="write the outlines here")
    group.add_argument("--against", type=Path, help="compare with outlines written by --save")
    args = parser.parse_args()
    found, seconds = outlines(args.tree.resolve())
    print(f"{args.tree}: {len(found)} files outlined in {seconds:.2f} s CPU (serial)")
    if args.save is not None:
        with open(args.save, "wb") as handle:
            pickle.dump(found, handle, protocol=pickle.HIGHEST_PROTOCOL)
        return 0
    with open(args.against, "rb") as handle:
        before = {outline.path: outline for outline in pickle.load(handle)}
    differ = [outline.path for outline in found if before.get(outline.path) != outline]
    missing = sorted(set(before) - {outline.path for outline in found})
    print(f"outlines differ in {len(differ)} files; {len(missing)} files outlined before are gone")
    for path in (differ + missing)[:20]:
        print(f"  {path}")
    return 1 if differ or missing else 0


if __name__ == "__main__":
    sys.exit(main())
