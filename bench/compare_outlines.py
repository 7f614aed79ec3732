"""Check that a change to the outline pass leaves every file's outline as it was, and time it.

The project plan reads nothing of a file but its outline (``project_plan.outline``), so a change
that keeps every outline equal keeps every plan, and so every finding, equal: a stronger check
of a speed-up to the outline than comparing reports, and a faster one (one serial pass, no lint).

    .venv/bin/python bench/compare_outlines.py bench/corpus/src/vllm-0.33.0 --save /tmp/before.pkl
    # ... change the outline pass ...
    .venv/bin/python bench/compare_outlines.py bench/corpus/src/vllm-0.33.0 --against /tmp/before.pkl

Prints the CPU seconds the pass took (serially, in this process: comparable between two runs on
a quiet machine, not a benchmark against the peers), and with ``--against`` the files whose
outlines differ; exits 1 if any does.

``--revisions OLD NEW ...`` times the pass of each git revision instead (each checked out into a
temporary worktree, byte-compiled, and run in a process of its own), ``--rounds`` times in
alternating order, and prints each one's CPU seconds and the median over the rounds of its ratio
to the first revision's in the same round: on a machine whose speed drifts by a tenth between
runs minutes apart, two separate runs cannot tell a change of a few percent.

    .venv/bin/python bench/compare_outlines.py bench/corpus/src/vllm-0.33.0 --revisions 46661f3 HEAD --rounds 3
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def outlines(tree: Path) -> tuple[list, float]:
    """Every file's outline under every rule enabled, by the ``sync_lint`` first on the path,
    and the CPU seconds the pass took."""
    from sync_lint import config
    from sync_lint.pipeline.discover import DEFAULT_EXCLUDE, Discovery
    from sync_lint.pipeline.runner import Linter

    os.chdir(tree)
    settings = config.load(None, isolated=True)
    files = Discovery(DEFAULT_EXCLUDE, settings.root).files(["."])
    linter = Linter(settings)
    started = time.process_time()
    found = [linter.outline_one(path) for path in files]
    return found, time.process_time() - started


def time_revisions(tree: Path, revisions: list[str], rounds: int) -> int:
    # Run as a script, this folder is first on the path.
    from bench_revisions import checked_out

    with tempfile.TemporaryDirectory() as folder, checked_out(revisions, folder) as checkouts:
        seconds: dict[str, list[float]] = {revision: [] for revision in revisions}
        for round_number in range(rounds):
            order = revisions if round_number % 2 == 0 else revisions[::-1]
            for revision in order:
                env = {**os.environ, "PYTHONPATH": str(checkouts[revision])}
                done = subprocess.run(
                    [sys.executable, __file__, str(tree), "--_time_only"], env=env, check=True,
                    capture_output=True, text=True,
                )
                where, taken = done.stdout.split()
                if not Path(where).is_relative_to(checkouts[revision]):
                    raise SystemExit(f"{revision}: timed the sync_lint of {where}, not of its worktree")
                seconds[revision].append(float(taken))
    first = revisions[0]
    print(f"{tree}: the outline pass, serial CPU seconds, {rounds} rounds in alternating order")
    for revision, values in seconds.items():
        line = f"  {revision:12s} {', '.join(f'{value:.2f}' for value in values):40s} median {statistics.median(values):6.2f}"
        if revision != first:
            ratios = [value / base for value, base in zip(values, seconds[first])]
            line += f"  per round / {first}: median {statistics.median(ratios):.3f} ({min(ratios):.3f} to {max(ratios):.3f})"
        print(line)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path, help="write the outlines here")
    group.add_argument("--against", type=Path, help="compare with outlines written by --save")
    group.add_argument("--revisions", nargs="+", help="time the pass of these git revisions (the first is the baseline)")
    group.add_argument("--_time_only", action="store_true", help=argparse.SUPPRESS)  # one timing, for --revisions
    parser.add_argument("--rounds", type=int, default=3, help="with --revisions: how many times each runs")
    args = parser.parse_args()
    tree = args.tree.resolve()
    if args.revisions:
        return time_revisions(tree, args.revisions, args.rounds)
    if args._time_only:  # the sync_lint of PYTHONPATH, a revision's worktree
        import sync_lint

        print(Path(sync_lint.__file__).parent, f"{outlines(tree)[1]:.3f}")
        return 0
    sys.path.insert(0, str(REPO))
    found, seconds = outlines(tree)
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
