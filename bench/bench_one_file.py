"""One-file runs (what pre-commit, the flake8 plugin and an editor do) on a real tree: does the
default path find exactly what the plain one-file path finds, and what does it save?

Run by hand from the repository root, after ``bench_scale.py`` has unpacked the corpora:

    .venv/bin/python bench/bench_one_file.py                      # every file of both trees
    .venv/bin/python bench/bench_one_file.py --only vllm --sample 400

For each file, in this process, ``Linter.run([file])`` three times with isolated settings (or
those of ``--config FILE``: a project's options, such as ``hot-functions``, which the scout
matches under the file's module name):
- default: the rules chosen by the text gate and the syntax scout, and only the functions that
  can matter parsed: of the file alone (``prefilter.one_file_plan``) under ``follow-imports =
  "skip"``, else of it and the files beyond it that it reads (the project plan);
- unplanned: the same rules, every file parsed whole (``--parse-whole-files``);
- plain: every rule whose triggers occur, the scout answering "may" (a hot scope, a sink, a
  custom op that is a sink), every file parsed whole.
It prints the files whose findings or fixes differ (there must be none), how many files and lines each
path parsed, and the CPU seconds of each path, also by file size.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sync_lint import config
from sync_lint.api import make_settings
from sync_lint.pipeline import lint_file, prefilter, runner, scout

CORPUS = ROOT / "bench" / "corpus" / "src"
SIZE_BUCKETS = ((0, 300), (300, 1000), (1000, 3000), (3000, 10**9))
LABELS = ("plain", "unplanned", "default")


def key(result) -> list[tuple]:
    """Each finding with its fix: a one-file run plans fixes on its masked parse where they
    edit only the finding's own span, so they are compared too."""
    return sorted(((d.line, d.col, d.code, d.message, d.fix) for d in result.diagnostics), key=repr)


class Counter:
    """How many files a path parsed with libcst, and how many lines of them it kept."""

    def __init__(self) -> None:
        self.files = 0
        self.lines = 0

    def wrap(self, original):
        def parse_and_check(source, text, *args, **kwargs):
            self.files += 1
            self.lines += sum(1 for line in text.splitlines() if line.strip())
            return original(source, text, *args, **kwargs)

        return parse_and_check


def measure(tree: Path, files: list[Path], settings: config.Settings) -> dict:
    original_parse = lint_file._parse_and_check
    results: dict[str, dict] = {}
    for label in ("default", "unplanned", "plain"):
        # Without the plan, a run that follows imports parses its file and the files beyond whole.
        linter = runner.Linter(settings, fast=label == "default")
        counter = Counter()
        saved = (prefilter.one_file_plan, scout.Scout.may_sync_in_a_hot_scope, scout.Scout.may_report_at_a_sink)
        lint_file._parse_and_check = counter.wrap(original_parse)
        if label in ("unplanned", "plain"):
            prefilter.one_file_plan = lambda active, text, file_scout: None
        if label == "plain":
            scout.Scout.may_sync_in_a_hot_scope = lambda self: True
            scout.Scout.may_report_at_a_sink = lambda self: True
        found = {}
        cpu: dict[str, float] = {}
        started = time.process_time()
        try:
            for path in files:
                before = time.process_time()
                found[str(path)] = key(linter.run([str(path)], jobs=1))
                cpu[str(path)] = time.process_time() - before
        finally:
            lint_file._parse_and_check = original_parse
            prefilter.one_file_plan, scout.Scout.may_sync_in_a_hot_scope, scout.Scout.may_report_at_a_sink = saved
        results[label] = {
            "found": found, "per_file": cpu, "cpu": time.process_time() - started, "files": counter.files, "lines": counter.lines,
        }
    differ = [
        path for path in results["plain"]["found"]
        if not results["plain"]["found"][path] == results["unplanned"]["found"][path] == results["default"]["found"][path]
    ]
    findings = sum(len(v) for v in results["plain"]["found"].values())
    sizes = {str(p): p.read_bytes().count(b"\n") for p in files}
    buckets = []
    for low, high in SIZE_BUCKETS:
        inside = [path for path, size in sizes.items() if low <= size < high]
        buckets.append((low, high, len(inside), *(sum(results[label]["per_file"][p] for p in inside) for label in LABELS)))
    total_lines = sum(sum(1 for line in p.read_text(errors="replace").splitlines() if line.strip()) for p in files)
    return {"tree": tree.name, "files": len(files), "findings": findings, "differ": differ, "total_lines": total_lines,
            "buckets": buckets,
            **{f"{label}_{k}": v for label, r in results.items() for k, v in r.items() if k not in ("found", "per_file")}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["vllm", "sglang"])
    parser.add_argument("--sample", type=int, default=0, help="a random sample of N files per tree (0: all)")
    parser.add_argument("--config", type=Path, help="a pyproject.toml whose [tool.sync-lint] options to use")
    args = parser.parse_args()
    settings = config.load(args.config) if args.config else make_settings()
    trees = sorted(p for p in CORPUS.glob("*-*") if (p / ".unpacked").exists() and (not args.only or p.name.startswith(args.only)))
    if not trees:
        print("no unpacked corpus: run bench/bench_scale.py first", file=sys.stderr)
        return 2
    status = 0
    for tree in trees:
        files = sorted(p for p in tree.rglob("*.py"))
        if args.sample:
            files = sorted(random.Random(20261204).sample(files, min(args.sample, len(files))))
        r = measure(tree, files, settings)
        print(f"{r['tree']}: {r['files']} files checked one at a time, {r['findings']} findings (plain path)")
        print(f"  findings differ in {len(r['differ'])} files" + (": " + ", ".join(r["differ"][:10]) if r["differ"] else ""))
        print("  parsed (files, non-blank lines): " + "; ".join(f"{label} {r[label + '_files']}, {r[label + '_lines']}" for label in LABELS)
              + f" (the tree has {r['total_lines']})")
        print("  CPU seconds in this process: " + ", ".join(f"{label} {r[label + '_cpu']:.1f}" for label in LABELS)
              + f"; default / unplanned {r['default_cpu'] / max(1e-9, r['unplanned_cpu']):.2f}x")
        for low, high, count, *cpu in r["buckets"]:
            print(f"    files of {low}-{high if high < 10**9 else 'more'} lines: {count}, CPU "
                  + ", ".join(f"{label} {value:.1f} s" for label, value in zip(LABELS, cpu))
                  + f" (default / unplanned {cpu[2] / max(1e-9, cpu[1]):.2f}x)")
        status = status or bool(r["differ"])
    return status


if __name__ == "__main__":
    sys.exit(main())
