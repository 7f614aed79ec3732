"""Runs of a few files (pre-commit's staged files) against a run of the whole tree: does a run of
two files report, in them, what a run of every file reports there?

Run by hand from the repository root, after ``bench_scale.py`` has unpacked the corpora:

    .venv/bin/python bench/bench_staged_parity.py bench/corpus/src/sglang-0.5.23 --pairs 25 --seed 7
    .venv/bin/python bench/bench_staged_parity.py bench/corpus/src/vllm-0.33.0 --code /path/to/old/worktree

The whole tree is checked once (``sync-lint check . --preview``, isolated settings, no cache);
then ``--pairs`` pairs of files, each a file with a finding in that run and a file drawn from the
whole tree (``--seed``), are checked as one run of two files, as pre-commit checks two staged files
(``--staged 1``: the file with a finding alone, as pre-commit checks one staged file).
A pair is identical when its run reports, line for line, what the whole run reports in its
files. ``--code``: the sync-lint source to run (a worktree of another revision, put first on
``PYTHONPATH``), to compare revisions on the same pairs. ``--config``: a pyproject.toml both runs
read instead of the default settings. ``--cached``: pre-commit on a machine that checked the
whole tree before, on a copy of the tree in which each run's files get a comment appended
first (staged files are edited ones; restored after): the whole run fills a cache, and each pair's
run starts from a copy of it (``after-whole``: the first commit after a check of the whole tree) or
reads and adds to that one cache (``successive``: commits one after another). Prints each pair that differs, then the findings expected,
the findings reported (and how many of them the whole run does not report), the runs identical,
and the median and worst wall time of a pair's run, and of its ratio to ``flake8 --select E9,F``
on the same files (run once right after it, without sync-lint's own plugin).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_scale import flake8  # the peer, without sync-lint's own flake8 plugin


def check(
    tree: Path, code: Path, paths: list[str], settings: Path | None = None, cache: Path | None = None,
) -> tuple[list[str], float]:
    """The concise findings of one run (sorted), and its wall time. ``settings``: a pyproject.toml
    to read (``--config``) instead of the default settings (``--isolated``). ``cache``: the cache
    folder to use (default: none)."""
    environment = {**os.environ, "PYTHONPATH": str(code)}
    chosen = ["--config", str(settings)] if settings else ["--isolated"]
    caching = ["--cache-dir", str(cache)] if cache else ["--no-cache"]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "sync_lint", "check", *paths, *chosen, *caching, "--preview",
         "--output-format", "concise", "--exit-zero", "-q"],
        cwd=tree, env=environment, capture_output=True, text=True, check=False,
    )
    if done.returncode != 0 or "Traceback" in done.stderr:
        sys.exit(f"sync-lint failed on {paths[:3]}: {done.stderr.strip()[-400:]}")
    return sorted(line for line in done.stdout.splitlines() if line), time.perf_counter() - started


@contextlib.contextmanager
def staged(tree: Path, paths: list[str]):
    """The files edited as a commit stages them: a comment appended, which moves no finding."""
    originals = {path: (tree / path).read_bytes() for path in paths}
    try:
        for path, text in originals.items():
            (tree / path).write_bytes(text + b"\n# staged edit\n")
        yield
    finally:
        for path, text in originals.items():
            (tree / path).write_bytes(text)


def peer(tree: Path, paths: list[str]) -> float:
    """The wall time of ``flake8 --select E9,F`` on the same files (the one-file target's peer)."""
    started = time.perf_counter()
    subprocess.run(flake8("--isolated", "--select", "E9,F", "--exit-zero", *paths), cwd=tree, capture_output=True, check=False)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--pairs", type=int, default=25)
    parser.add_argument("--staged", type=int, choices=(1, 2), default=2,
                        help="files per run: a file with a finding, and (2) a file drawn from the tree")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--code", type=Path, default=ROOT, help="the sync-lint source to run (default: this checkout)")
    parser.add_argument("--verbose", action="store_true", help="print every pair, with its wall time")
    parser.add_argument("--config", type=Path, help="a pyproject.toml whose [tool.sync-lint] both runs read "
                        "(`follow-imports = \"skip\"`: what a staged run gives up for speed)")
    parser.add_argument("--cached", choices=("after-whole", "successive"), help="pre-commit after a run of the "
                        "whole tree, each pair's files edited (a comment appended) in a copy of the tree: each pair "
                        "from a copy of the whole run's cache, or all reading and adding to one")
    args = parser.parse_args()
    settings = args.config.resolve() if args.config else None
    with tempfile.TemporaryDirectory() as scratch:
        tree, cache = args.tree.resolve(), None
        if args.cached:
            tree, cache = Path(scratch) / "tree", Path(scratch) / "cache"
            shutil.copytree(args.tree.resolve(), tree, ignore=shutil.ignore_patterns(".sync_lint_cache"))
        return compare(tree, args, settings, cache)


def compare(tree: Path, args: argparse.Namespace, settings: Path | None, cache: Path | None) -> int:
    whole, seconds = check(tree, args.code.resolve(), ["."], settings, cache)
    whole_cache = None
    if args.cached == "after-whole":
        whole_cache = cache.with_name("after-whole")
        cache.rename(whole_cache)
    print(f"whole tree: {len(whole)} findings in {seconds:.1f} s")
    by_file: dict[str, list[str]] = {}
    for line in whole:
        by_file.setdefault(line.split(":", 1)[0], []).append(line)
    every = sorted(str(path.relative_to(tree)) for path in tree.rglob("*.py"))
    rng = random.Random(args.seed)
    with_findings = rng.sample(sorted(by_file), min(args.pairs, len(by_file)))
    expected = reported = identical = unwanted = 0
    times = []
    for path in with_findings:
        other = rng.choice([candidate for candidate in every if candidate != path])  # drawn either way: same pairs
        run = [path, other][: args.staged]
        want = sorted(line for staged_path in run for line in by_file.get(staged_path, []))
        if whole_cache is not None:
            shutil.rmtree(cache, ignore_errors=True)
            shutil.copytree(whole_cache, cache)
        with staged(tree, run if cache else []):
            got, seconds = check(tree, args.code.resolve(), run, settings, cache)
        times.append((seconds, seconds / peer(tree, run)))
        expected += len(want)
        reported += len(got)
        unwanted += len(set(got) - set(want))  # reported where the whole run reports nothing
        if got == want:
            identical += 1
            if args.verbose:
                print(f"same ({len(want)} findings, {seconds:.1f} s): {' '.join(run)}")
        else:
            print(f"differs ({len(want)} expected, {len(got)} reported, {seconds:.1f} s): {' '.join(run)}")
    print(f"runs of {args.staged} file(s): {len(with_findings)}; findings expected {expected}, reported {reported} "
          f"({unwanted} of them not in the whole run's report); runs identical {identical} of {len(with_findings)}")
    if times:
        walls = sorted(wall for wall, _ in times)
        ratios = sorted(ratio for _, ratio in times)
        print(f"wall per run: median {walls[len(walls) // 2]:.2f} s, worst {walls[-1]:.2f} s; against flake8 "
              f"--select E9,F on the same files, each run once after it: median {ratios[len(ratios) // 2]:.2f}x, "
              f"worst {ratios[-1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
