"""The parse floor that ``bench/bench_scale.py`` prints (run by hand, not in CI) rests on capturing
what a run of sync-lint parses, by wrapping ``ast.parse`` and ``libcst.parse_module``. Should the
pipeline stop calling them that way, the bench would time nothing and print a floor of zero:
this checks, on the fixtures, that both sets are captured and parse again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_parse_floor_captures_what_a_run_parses(tmp_path):
    files = sorted(str(path) for path in (ROOT / "fixtures").rglob("*.py"))
    assert len(files) > 1  # a run of many files: outlined (ast), then linted (libcst)
    listed = tmp_path / "files.txt"
    listed.write_text("".join(f"{path}\n" for path in files))
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_scale.py"), "--_parse_floor", str(listed), "--_workers", "2"],
        check=False, capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    floor = json.loads(done.stdout.strip().splitlines()[-1])
    # Every fixture is outlined, and the ones the plan keeps a function of are linted.
    assert floor["ast"]["texts"] >= len(files), floor
    assert 0 < floor["libcst"]["texts"] <= len(files), floor
    # The same ast texts again, each tree visited node by node (the floor of any ast analysis).
    assert floor["ast_walk"]["texts"] == floor["ast"]["texts"], floor
    for parser in ("ast", "libcst", "ast_walk"):
        assert floor[parser]["failures"] == 0, floor
        assert floor[parser]["lines"] > 0 and floor[parser]["seconds"] > 0, floor
