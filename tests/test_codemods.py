"""The fixes as libcst codemod commands, run through libcst's own CLI in a subprocess."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext

from sync_lint.codemods import SyncLintAddNoqa, SyncLintFix

UNUSED_NOQA = "x = 1  # noqa: GPU001\ny = 2  # noqa: E501, GPU001\n"


def codemod(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "libcst.tool", "codemod", *args], check=False,
        cwd=cwd, capture_output=True, text=True, timeout=300, input=stdin,
    )


def sync_lint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sync_lint", *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=300)


def realistic_source() -> tuple[str, str]:
    """A real rule's INVALID example whose fix is safe (a GPU1xx fix is, where its kernel only
    loads through the argument), and the rule's code."""
    from sync_lint.api import lint_text
    from sync_lint.rules import rule_by_code

    for code in ("GPU101", "GPU102", "GPU103", "GPU201"):
        for example in rule_by_code(code).invalid:
            source = re.sub(r"\s*#\s*expect:[^\n]*", "", example)
            found = [d for d in lint_text(source) if d.code == code]
            if found and all(d.fix is not None and d.fix.applicability == "safe" for d in found):
                return source, code
    raise AssertionError("no rule example has a safe fix")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "noqa.py").write_text(UNUSED_NOQA)
    (tmp_path / "pkg" / "clean.py").write_text("z = 3\n")
    return tmp_path


def test_fix_command_by_import_path(project):
    result = codemod("-x", "sync_lint.codemods.SyncLintFix", "--no-format", "--hide-progress", "pkg", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "Failed to codemod 0 files" in result.stderr
    assert (project / "pkg" / "noqa.py").read_text() == "x = 1\ny = 2  # noqa: E501\n"
    assert (project / "pkg" / "clean.py").read_text() == "z = 3\n"
    assert sync_lint("check", "pkg", cwd=project).returncode == 0


def test_fix_command_matches_sync_lint_fix(project):
    source, code = realistic_source()
    (project / "a").mkdir()
    (project / "a" / "engine.py").write_text(source)
    shutil.copytree(project / "a", project / "b")
    result = codemod("-x", "sync_lint.codemods.SyncLintFix", "--no-format", "--hide-progress", "a", cwd=project)
    assert result.returncode == 0, result.stderr
    assert sync_lint("fix", "b", cwd=project).returncode == 0
    fixed = (project / "a" / "engine.py").read_text()
    assert fixed != source
    assert fixed == (project / "b" / "engine.py").read_text()
    assert sync_lint("check", "--select", code, "a", cwd=project).returncode == 0


def test_unsafe_fixes_flag_and_project_configuration(project):
    # The project's [tool.sync-lint] is honoured: with GPU010 ignored nothing is fixed.
    (project / "pyproject.toml").write_text('[tool.sync-lint]\nignore = ["GPU010"]\n')
    result = codemod("-x", "sync_lint.codemods.SyncLintFix", "--no-format", "--unsafe-fixes", "pkg", cwd=project)
    assert result.returncode == 0, result.stderr
    assert (project / "pkg" / "noqa.py").read_text() == UNUSED_NOQA
    # A broken configuration skips the file with the reason, and leaves it alone.
    (project / "pyproject.toml").write_text('[tool.sync-lint]\nselect = ["NOPE1"]\n')
    result = codemod("-x", "sync_lint.codemods.SyncLintFix", "--no-format", "pkg", cwd=project)
    assert "unknown rule code or prefix `NOPE1`" in result.stderr
    assert (project / "pkg" / "noqa.py").read_text() == UNUSED_NOQA


def test_command_found_through_libcst_config(project):
    (project / ".libcst.codemod.yaml").write_text(
        "generated_code_marker: '@generated'\nformatter: []\nblacklist_patterns: []\nmodules:\n  - 'sync_lint'\n"
        "repo_root: '.'\n"
    )
    result = codemod("codemods.SyncLintFix", "--no-format", "pkg", cwd=project)
    assert result.returncode == 0, result.stderr
    assert (project / "pkg" / "noqa.py").read_text() == "x = 1\ny = 2  # noqa: E501\n"


def test_stdin_to_stdout(project):
    result = codemod("-x", "sync_lint.codemods.SyncLintFix", "--no-format", "-", cwd=project, stdin=UNUSED_NOQA)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "x = 1\ny = 2  # noqa: E501\n\n"  # libcst prints the module, then a newline


def test_add_noqa_command(project):
    source, code = realistic_source()
    (project / "pkg" / "engine.py").write_text(source)
    result = codemod("-x", "sync_lint.codemods.SyncLintAddNoqa", "--no-format", "pkg/engine.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert f"# noqa: {code}" in (project / "pkg" / "engine.py").read_text()
    assert sync_lint("check", "pkg/engine.py", cwd=project).returncode == 0


def test_commands_in_process(tmp_path):
    path = str(tmp_path / "m.py")
    module = cst.parse_module(UNUSED_NOQA)
    fixed = SyncLintFix(CodemodContext(filename=path)).transform_module(module)
    assert fixed.code == "x = 1\ny = 2  # noqa: E501\n"
    clean = cst.parse_module("z = 3\n")
    assert SyncLintFix(CodemodContext(filename=path)).transform_module(clean).code == "z = 3\n"
    # GPU010 is never silenced by a noqa (it is fixed instead): add-noqa leaves the module as it is.
    assert SyncLintAddNoqa(CodemodContext(filename=path)).transform_module(module).code == UNUSED_NOQA
