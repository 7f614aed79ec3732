"""Cost of ``with gpu_sync_allowed():`` when the sync check is off (run by hand).

Compares, per ``with`` block: the guard with the check off; ``contextlib.nullcontext()``
built on each iteration; one pre-built, shared ``nullcontext`` (what the guard returns:
the floor, the guard adds one call and one mode test); an empty loop body (the loop's
own cost). Each variant runs ``--repeat`` times;
the table shows the median and the spread (min..max) in nanoseconds per iteration.

    .venv/bin/python bench/bench_sync_guard.py [--number N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import timeit

# The mode is read once, at import: make sure this measures the "off" path.
os.environ.pop("GPU_SYNC_CHECK", None)

# Imported only now, after the environment is cleared.
from reference_kernels.sync_check import sync_check_mode

VARIANTS = {
    "gpu_sync_allowed() [off]": "with gpu_sync_allowed():\n    pass",
    "contextlib.nullcontext()": "with nullcontext():\n    pass",
    "shared nullcontext object": "with shared:\n    pass",
    "bare loop": "pass",
}
SETUP = (
    "from contextlib import nullcontext\n"
    "from reference_kernels.sync_check import gpu_sync_allowed\n"
    "shared = nullcontext()"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=1_000_000, help="iterations per repetition")
    parser.add_argument("--repeat", type=int, default=7, help="repetitions per variant")
    args = parser.parse_args()
    assert sync_check_mode() == "off"

    medians = {}
    print(f"{'variant':<28} {'median ns':>10} {'spread ns':>16}")
    for name, statement in VARIANTS.items():
        times = timeit.repeat(statement, SETUP, number=args.number, repeat=args.repeat)
        per_iteration = [t / args.number * 1e9 for t in times]
        medians[name] = statistics.median(per_iteration)
        spread = f"{min(per_iteration):.1f}..{max(per_iteration):.1f}"
        print(f"{name:<28} {medians[name]:>10.1f} {spread:>16}")

    guard, fresh, shared, loop = medians.values()
    print(f"guard / nullcontext(): {guard / fresh:.2f}x")
    print(f"guard / shared nullcontext: {guard / shared:.2f}x")
    print(
        f"with-block cost over the bare loop: guard {guard - loop:.1f} ns, "
        f"nullcontext() {fresh - loop:.1f} ns, shared nullcontext {shared - loop:.1f} ns"
    )


if __name__ == "__main__":
    main()
