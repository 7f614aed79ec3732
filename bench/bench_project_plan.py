"""The project plan (the default) against the plain path (``--parse-whole-files``), with ruff
on the same files in the same run. Run by hand:

    .venv/bin/python bench/bench_project_plan.py bench/corpus/src/vllm-0.33.0

Prints the wall time of each, the ratios, and whether both paths report identical findings,
fixes included (exit 1 if not).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from sync_lint.api import make_settings
from sync_lint.pipeline.discover import DEFAULT_EXCLUDE, Discovery
from sync_lint.pipeline.runner import Linter


def main(tree: str, jobs: int = 2) -> int:
    files = Discovery(DEFAULT_EXCLUDE, Path.cwd()).files([tree])
    settings = make_settings()
    timings: dict[str, float] = {}
    findings = {}
    for name, fast in (("plain", False), ("project plan", True)):
        started = time.perf_counter()
        result = Linter(settings, fast=fast).run(files, jobs=jobs)
        timings[name] = time.perf_counter() - started
        findings[name] = {(d.path, d.line, d.col, d.end_line, d.end_col, d.code, d.message, d.fix) for d in result.diagnostics}
    ruff = Path(sys.executable).with_name("ruff")
    started = time.perf_counter()
    subprocess.run([str(ruff), "check", "--select", "ALL", "--no-cache", "--exit-zero", "-q", tree], check=False, capture_output=True)
    timings["ruff --select ALL"] = time.perf_counter() - started
    print(f"{len(files)} files in {tree}")
    for name, seconds in timings.items():
        print(f"  {name:20s} {seconds:7.1f} s   {seconds / timings['ruff --select ALL']:6.1f}x ruff")
    print(f"  project plan / plain: {timings['project plan'] / timings['plain']:.2f}")
    same = findings["plain"] == findings["project plan"]
    print(f"  findings: {len(findings['plain'])} plain, identical (fixes included): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
