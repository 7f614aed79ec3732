"""Golden fixes: ``fixtures/fixes/<CODE>_<case>.py`` must become ``<CODE>_<case>.py.fixed``.

The fixed code must parse, lint clean for that code, and a second fix must change nothing.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from sync_lint.api import fix_text, lint_text

FIXES = Path(__file__).resolve().parent.parent / "fixtures" / "fixes"
OPTIONS = {"preview": True, "sync_guard": "reference_kernels.sync_check:gpu_sync_allowed"}
CASES = sorted(FIXES.glob("GPU*.py")) if FIXES.is_dir() else []


def test_there_are_golden_fixes():
    assert CASES, "fixtures/fixes/ holds no golden fixes"


@pytest.mark.parametrize("before_path", CASES, ids=lambda p: p.stem)
def test_golden_fix(before_path: Path):
    code = before_path.name.split("_")[0]
    after_path = before_path.with_name(before_path.name + ".fixed")
    before = before_path.read_text(encoding="utf-8")
    assert any(d.code == code for d in lint_text(before, path=str(before_path), **OPTIONS)), "nothing to fix"
    fixed = fix_text(before, path=str(before_path), unsafe=True, **OPTIONS)
    assert fixed == after_path.read_text(encoding="utf-8")
    cst.parse_module(fixed)
    assert not [d for d in lint_text(fixed, path=str(before_path), **OPTIONS) if d.code == code]
    assert fix_text(fixed, path=str(before_path), unsafe=True, **OPTIONS) == fixed
