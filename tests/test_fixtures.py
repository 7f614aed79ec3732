"""Each folder of fixtures is linted as one project; its findings must equal its `# expect:` marks.

This is where rules meet realistic code: every marked line must be flagged with exactly those
codes, and every unmarked line (the correct look-alikes) must stay silent.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from expectations import expected_in_file

from sync_lint.api import lint_paths

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# Preview rules are on here so that their fixtures are checked too.
OPTIONS = {"preview": True, "sync_guard": "reference_kernels.sync_check:gpu_sync_allowed"}
PROJECT_FOLDERS = sorted(p for p in FIXTURES.iterdir() if p.is_dir() and p.name != "fixes") if FIXTURES.is_dir() else []


@pytest.mark.parametrize("folder", PROJECT_FOLDERS, ids=lambda p: p.name)
def test_fixture_folder_findings_match_expectations(folder: Path):
    files = sorted(folder.rglob("*.py"))
    assert files, f"{folder} holds no fixtures"
    expected = {(str(path.relative_to(ROOT)), line, code) for path in files for line, code in expected_in_file(path)}
    # The reference kernels are linted with the fixtures, as a project would be: calls into
    # them are judged by their code (cross-file summaries).
    diagnostics = lint_paths([str(folder), str(ROOT / "reference_kernels")], **OPTIONS)
    found = set()
    for d in diagnostics:
        path = Path(d.path).resolve()
        if path.is_relative_to(folder):
            found.add((str(path.relative_to(ROOT)), d.line, d.code))
    missing = sorted(expected - found)
    unexpected = sorted(found - expected)
    assert not missing and not unexpected, f"missing: {missing}\nunexpected: {unexpected}"


def test_fixture_folders_exist():
    names = {p.name for p in PROJECT_FOLDERS}
    assert {"gpu1xx", "gpu2xx", "upstream"} <= names, names
