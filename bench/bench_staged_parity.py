"""Runs of a few files (pre-commit's staged files) against a run of the whole tree: does a run of
two files report, in them, what a run of every file reports there?

Run by hand from the repository root, after ``bench_scale.py`` has unpacked the corpora:

    .venv/bin/python bench/bench_staged_parity.py bench/corpus/src/sglang-0.5.23 --pairs 25 --seed 7
    .venv/bin/python bench/bench_staged_parity.py bench/corpus/src/vllm-0.33.0 --code /path/to/old/worktree

The whole tree is checked once (``sync-lint check . --preview``, isolated settings, no cache);
then ``--pairs`` pairs of files, each a file with a finding in that run and a file drawn from the
whole tree (``--seed``), are checked as one run of two files, as pre-commit checks two staged files
(``--staged 1``: the file with a finding alone, as pre-commit checks one staged file).
A pair is identical when its run reports, finding for finding and fix for fix (the JSON
report's edits), what the whole run reports in its files; a pair whose findings agree and whose
fixes do not is counted apart. ``--code``: the sync-lint source to run (a worktree of another revision, put first on
``PYTHONPATH``), to compare revisions on the same pairs. ``--config``: a pyproject.toml both runs
read instead of the default settings. ``--cached``: pre-commit on a machine that checked the
whole tree before, on a copy of the tree in which each run's files get a comment appended
first (staged files are edited ones; restored after): the whole run fills a cache, and each pair's
run starts from a copy of it (``after-whole``: the first commit after a check of the whole tree) or
reads and adds to that one cache (``successive``: commits one after another). Prints each pair that differs, then the findings expected,
the findings reported (and how many of them the whole run does not report), the runs identical,
and the median and worst wall time of a pair's run, and of its ratio to ``flake8 --select E9,F``
on the same files (run once right after it, without sync-lint's own plugin).

``--against BASE``: also runs the sync-lint source at ``BASE`` (another revision's worktree) on
the same pairs, each pair's two runs back to back in alternating order (then flake8), each
revision with its own whole run and cache: the figures of both, and the median of each pair's
ratio of this revision's time to BASE's, which the machine's drift over a run of minutes moves
far less than either median (two runs of the bench, one per revision, can differ by a fifth on
an idle machine).
"""

from __future__ import annotations

import argparse
import contextlib
import json
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

from bench_scale import flake8, install_as_a_user_has_it  # flake8: the peer, without sync-lint's own flake8 plugin


def check(
    tree: Path, code: Path, paths: list[str], settings: Path | None = None, cache: Path | None = None,
) -> tuple[list[str], float]:
    """The findings of one run, each with its fix (``finding_line``; sorted), and its wall time.
    ``settings``: a pyproject.toml to read (``--config``) instead of the default settings
    (``--isolated``). ``cache``: the cache folder to use (default: none)."""
    environment = {**os.environ, "PYTHONPATH": str(code)}
    chosen = ["--config", str(settings)] if settings else ["--isolated"]
    caching = ["--cache-dir", str(cache)] if cache else ["--no-cache"]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "sync_lint", "check", *paths, *chosen, *caching, "--preview",
         "--output-format", "json", "--exit-zero", "-q"],
        cwd=tree, env=environment, capture_output=True, text=True, check=False,
    )
    if done.returncode != 0 or "Traceback" in done.stderr:
        sys.exit(f"sync-lint failed on {paths[:3]}: {done.stderr.strip()[-400:]}")
    return sorted(finding_line(tree, finding) for finding in json.loads(done.stdout)), time.perf_counter() - started


def finding_line(tree: Path, finding: dict) -> str:
    """One finding as a line to compare and print: ``path:row:col: CODE message``, then its fix
    (applicability and edits) where it has one, so that a run that reports a finding with
    another fix, or without the fix the whole run offers, differs."""
    path = os.path.relpath(os.path.join(tree, finding["filename"]), tree)
    where = finding["location"]
    line = f"{path}:{where['row']}:{where['column']}: {finding['code']} {finding['message']}"
    fix = finding.get("fix")
    if fix:
        edits = "; ".join(
            f"{e['location']['row']}:{e['location']['column']}-{e['end_location']['row']}:{e['end_location']['column']}"
            f" {e['content']!r}" for e in fix["edits"]
        )
        line += f"  [fix, {fix['applicability']}: {edits}]"
    return line


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
    parser.add_argument("--against", type=Path, help="another sync-lint source to run on the same pairs, "
                        "alternating with --code, for the ratio of their times")
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


class Revision:
    """One sync-lint source under test: its whole run's findings by file, its cache, and what its
    runs of the pairs reported and took."""

    def __init__(self, label: str, code: Path, cache: Path | None) -> None:
        self.label, self.code, self.cache = label, code.resolve(), cache
        self.whole_cache: Path | None = None
        self.by_file: dict[str, list[str]] = {}
        self.expected = self.reported = self.identical = self.unwanted = self.other_fixes = 0
        self.walls: list[float] = []

    def check_whole(self, tree: Path, args: argparse.Namespace, settings: Path | None) -> None:
        whole, seconds = check(tree, self.code, ["."], settings, self.cache)
        if args.cached == "after-whole":
            self.whole_cache = self.cache.with_name(self.cache.name + "-after-whole")
            self.cache.rename(self.whole_cache)
        print(f"{self.label}: whole tree: {len(whole)} findings in {seconds:.1f} s")
        for line in whole:
            self.by_file.setdefault(line.split(":", 1)[0], []).append(line)

    def run(self, tree: Path, run: list[str], settings: Path | None, verbose: bool) -> float:
        want = sorted(line for staged_path in run for line in self.by_file.get(staged_path, []))
        if self.whole_cache is not None:
            shutil.rmtree(self.cache, ignore_errors=True)
            shutil.copytree(self.whole_cache, self.cache)
        with staged(tree, run if self.cache else []):
            got, seconds = check(tree, self.code, run, settings, self.cache)
        self.walls.append(seconds)
        self.expected += len(want)
        self.reported += len(got)
        self.unwanted += len(set(got) - set(want))  # reported where the whole run reports nothing
        if got == want:
            self.identical += 1
            if verbose:
                print(f"{self.label}: same ({len(want)} findings, {seconds:.1f} s): {' '.join(run)}")
        elif [_without_fix(line) for line in got] == [_without_fix(line) for line in want]:
            self.other_fixes += 1
            print(f"{self.label}: same findings, other fixes ({seconds:.1f} s): {' '.join(run)}")
            for line in sorted(set(got) ^ set(want)):
                print(f"    {'reported' if line in got else 'expected'}: {line}")
        else:
            print(f"{self.label}: differs ({len(want)} expected, {len(got)} reported, {seconds:.1f} s): {' '.join(run)}")
        return seconds


def compare(tree: Path, args: argparse.Namespace, settings: Path | None, cache: Path | None) -> int:
    revisions = [Revision("this", args.code, cache)]
    if args.against is not None:
        revisions.append(Revision("against", args.against, cache.with_name("cache-against") if cache else None))
    for revision in revisions:
        install_as_a_user_has_it(revision.code)
        revision.check_whole(tree, args, settings)
    by_file = revisions[0].by_file
    every = sorted(str(path.relative_to(tree)) for path in tree.rglob("*.py"))
    rng = random.Random(args.seed)
    with_findings = rng.sample(sorted(by_file), min(args.pairs, len(by_file)))
    peers = []
    for number, path in enumerate(with_findings):
        other = rng.choice([candidate for candidate in every if candidate != path])  # drawn either way: same pairs
        run = [path, other][: args.staged]
        for revision in revisions[::-1] if number % 2 else revisions:  # neither always first
            revision.run(tree, run, settings, args.verbose)
        peers.append(peer(tree, run))
    for revision in revisions:
        label = f"{revision.label} ({revision.code})" if len(revisions) > 1 else "runs"
        print(f"{label}: runs of {args.staged} file(s): {len(with_findings)}; findings expected {revision.expected}, "
              f"reported {revision.reported} ({revision.unwanted} of them not in the whole run's report); runs "
              f"identical {revision.identical} of {len(with_findings)} (the same findings with other fixes: "
              f"{revision.other_fixes})")
        if revision.walls:
            walls = sorted(revision.walls)
            ratios = sorted(wall / flake8_wall for wall, flake8_wall in zip(revision.walls, peers))
            print(f"  wall per run: median {median(walls):.2f} s, worst {walls[-1]:.2f} s; against flake8 --select "
                  f"E9,F on the same files, each pair once after it: median {median(ratios):.2f}x, worst {ratios[-1]:.2f}x")
    if len(revisions) > 1 and peers:
        paired = sorted(this / base for this, base in zip(revisions[0].walls, revisions[1].walls))
        print(f"this / against, per pair: median {median(paired):.3f}, least {paired[0]:.3f}, most {paired[-1]:.3f}; "
              f"summed {sum(revisions[0].walls) / sum(revisions[1].walls):.3f}")
    return 0


def _without_fix(line: str) -> str:
    return line.split("  [fix, ", 1)[0]


def median(values: list[float]) -> float:
    """The middle of sorted ``values`` (the upper of two)."""
    return values[len(values) // 2]


if __name__ == "__main__":
    sys.exit(main())
