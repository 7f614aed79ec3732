"""The project plan (the default) against the plain path (``--parse-whole-files``), with ruff
on the same files in the same run. Run by hand:

    .venv/bin/python bench/bench_project_plan.py bench/corpus/src/vllm-0.33.0 [--repeat 2]

Each path runs as its own ``sync-lint check --isolated --no-cache --output-format json`` process
(a run in this process would fork its workers from a heap the previous run filled);
``--config FILE`` reads a project's options from that file instead of ``--isolated``
(``hot-functions``, say, which the scout answers by module name). Prints the
median wall time of each, the ratios, and whether the two JSON reports are identical, fixes
included (exit 1 if not).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def timed(cmd: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=False, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree")
    parser.add_argument(
        "--config", help="a pyproject.toml for sync-lint to read instead of `--isolated` (a project's own options)"
    )
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    settings = ["--config", os.path.abspath(args.config)] if args.config else ["--isolated"]
    paths = {"plain": ["--parse-whole-files"], "project plan": []}
    times: dict[str, list[float]] = {name: [] for name in (*paths, "ruff --select ALL")}
    reports: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.repeat):
            for name, extra in paths.items():
                report = Path(folder) / f"{name.replace(' ', '_')}.json"
                cmd = [str(BIN / "sync-lint"), "check", args.tree, *settings, "--no-cache", "--output-format", "json",
                       "-o", str(report), *extra]
                times[name].append(timed(cmd))
                reports[name] = report.read_bytes()
            ruff = [str(BIN / "ruff"), "check", "--select", "ALL", "--no-cache", "--exit-zero", "--isolated", "-q", args.tree]
            times["ruff --select ALL"].append(timed(ruff))
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.tree} (median of {args.repeat})")
    for name, seconds in median.items():
        print(f"  {name:20s} {seconds:7.1f} s   {seconds / median['ruff --select ALL']:6.1f}x ruff")
    print(f"  project plan / plain: {median['project plan'] / median['plain']:.2f}")
    same = reports["plain"] == reports["project plan"]
    print(f"  JSON reports identical (fixes included): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
