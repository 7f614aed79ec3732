"""Cold runs of several revisions of sync-lint on one tree, alternating, with ruff in the same
rounds. Run by hand from the repository root (not in CI):

    .venv/bin/python bench/bench_revisions.py bench/corpus/src/vllm-0.33.0 df28a4a HEAD --repeat 3

Each revision is checked out into a temporary git worktree and run as
``sync-lint check . --isolated --no-cache --output-format json`` with the tree as working
directory and the worktree first on ``PYTHONPATH`` (this environment's libcst and the rest are
shared); ``--config FILE`` reads a project's options from that file instead of ``--isolated``.
Each round runs every revision once, then ``ruff check --select ALL --no-cache``, so that load
on a shared machine falls on all of them alike. Prints each one's times, median, ratio to
ruff and to the first revision, and whether every revision's JSON report equals the first's
(exit 1 if not).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench_scale import install_as_a_user_has_it

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@contextlib.contextmanager
def checked_out(revisions: list[str], folder: str) -> Iterator[dict[str, Path]]:
    """Each revision in a git worktree of its own under ``folder``, its ``sync_lint``
    installed as a user has it (``bench_scale.install_as_a_user_has_it``); removed after."""
    checkouts: dict[str, Path] = {}
    try:
        for revision in revisions:
            path = Path(folder) / f"rev{len(checkouts)}"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), revision], check=True)
            checkouts[revision] = path
            install_as_a_user_has_it(path)
        yield checkouts
    finally:
        for path in checkouts.values():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)


def timed(cmd: list[str], cwd: str, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=False, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree")
    parser.add_argument("revisions", nargs="+", help="git revisions of this repository (the first is the baseline)")
    parser.add_argument(
        "--config", help="a pyproject.toml for sync-lint to read instead of `--isolated` (a project's own options)"
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    settings = ["--config", os.path.abspath(args.config)] if args.config else ["--isolated"]
    tree = str(Path(args.tree).resolve())
    with tempfile.TemporaryDirectory() as folder, checked_out(args.revisions, folder) as checkouts:
        times: dict[str, list[float]] = {name: [] for name in (*checkouts, "ruff --select ALL")}
        reports: dict[str, bytes] = {}
        for _ in range(args.repeat):
            for revision, path in checkouts.items():
                report = Path(folder) / f"{path.name}.json"
                env = {**os.environ, "PYTHONPATH": str(path)}
                cmd = [str(BIN / "sync-lint"), "check", ".", *settings, "--no-cache", "--output-format", "json",
                       "-o", str(report)]
                times[revision].append(timed(cmd, tree, env))
                reports[revision] = report.read_bytes()
            ruff = [str(BIN / "ruff"), "check", ".", "--select", "ALL", "--no-cache", "--exit-zero", "--isolated", "-q"]
            times["ruff --select ALL"].append(timed(ruff, tree))
    median = {name: statistics.median(values) for name, values in times.items()}
    first = args.revisions[0]
    print(f"{args.tree}: cold runs, {args.repeat} rounds (seconds, in round order)")
    for name, values in times.items():
        runs = ", ".join(f"{value:.2f}" for value in values)
        line = f"  {name:20s} {runs:30s} median {median[name]:6.2f}  {median[name] / median['ruff --select ALL']:5.2f}x ruff"
        if name in checkouts:
            line += f"  {median[name] / median[first]:5.2f}x {first}"
        print(line)
    same = all(reports[revision] == reports[first] for revision in checkouts)
    print(f"  JSON reports identical to {first}'s: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
