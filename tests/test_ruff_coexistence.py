"""sync-lint next to ruff in one project: each tool's unused-noqa report keeps the other's codes.

- ruff, told ``lint.external = ["GPU"]``, keeps ``GPU`` codes when its RUF100 fix rewrites a
  ``# noqa`` (without it, ruff drops them: the control case below).
- sync-lint's GPU010 only ever judges its own codes: ``# noqa: E501, GPU101`` keeps ``E501``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
pytestmark = pytest.mark.skipif(RUFF is None, reason="ruff is not installed")


def our_code() -> str:
    """A real rule code of ours (GPU010 judges only codes that exist and are enabled)."""
    from sync_lint.rules import rule_by_code

    for code in ("GPU201", "GPU101"):
        if rule_by_code(code) is not None:
            return code
    return "GPU001"


def ruff_fix(folder: Path, name: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [RUFF, "check", "--no-cache", "--select", "F401,RUF100", "--fix", name], check=False,
        cwd=folder, capture_output=True, text=True, timeout=120,
    )


def sync_lint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sync_lint", *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=120)


RUFF_CONFIG = '[tool.ruff.lint]\nexternal = ["GPU"]\n'


def test_ruff_unused_noqa_fix_keeps_our_codes(tmp_path):
    gpu = our_code()
    text = f"import os  # noqa: F401, {gpu}\nx = 1  # noqa: E501, {gpu}\ny = 2  # noqa: {gpu}\n"
    (tmp_path / "pyproject.toml").write_text(RUFF_CONFIG)
    (tmp_path / "m.py").write_text(text)
    result = ruff_fix(tmp_path, "m.py")
    assert result.returncode == 0, result.stdout + result.stderr
    # E501 is not enabled in ruff here: RUF100 removes it, and only it.
    assert (tmp_path / "m.py").read_text() == f"import os  # noqa: F401, {gpu}\nx = 1  # noqa: {gpu}\ny = 2  # noqa: {gpu}\n"


def test_without_external_ruff_drops_our_codes(tmp_path):
    # The control: the `external` setting is what protects our codes.
    gpu = our_code()
    (tmp_path / "pyproject.toml").write_text("[tool.ruff.lint]\n")
    (tmp_path / "m.py").write_text(f"x = 1  # noqa: E501, {gpu}\n")
    ruff_fix(tmp_path, "m.py")
    assert gpu not in (tmp_path / "m.py").read_text()


@pytest.mark.parametrize(
    "comment",
    ["# noqa: E501, {gpu}", "# noqa:E501,{gpu}", "# NOQA: E501 {gpu}", "# noqa: {gpu}, E501", "# noqa: E501,  {gpu}"],
)
def test_our_unused_noqa_ignores_other_tools_codes(tmp_path, comment):
    gpu = our_code()
    (tmp_path / "m.py").write_text(f"x = 1  {comment.format(gpu=gpu)}\n")
    result = sync_lint("check", "m.py", cwd=tmp_path)
    assert result.returncode == 1
    assert re.fullmatch(rf"m\.py:1:8: GPU010 \[\*\] Unused `noqa` code: {gpu}\n", result.stdout), result.stdout
    assert sync_lint("fix", "m.py", cwd=tmp_path).returncode == 0
    assert (tmp_path / "m.py").read_text() == "x = 1  # noqa: E501\n"


@pytest.mark.parametrize("comment", ["# noqa: E501", "# noqa: F401, W291", "# noqa", "# noqa: RUF100"])
def test_other_tools_codes_alone_are_not_ours_to_report(tmp_path, comment):
    (tmp_path / "m.py").write_text(f"x = 1  {comment}\n")
    result = sync_lint("check", "m.py", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == ""


def test_both_tools_clean_on_a_real_suppressed_finding(tmp_path):
    from sync_lint.rules import rule_by_code

    gpu = our_code()
    rule = rule_by_code(gpu)
    if rule is None or not rule.invalid or gpu == "GPU001":
        pytest.skip("no GPU1xx/GPU2xx rule registered yet")
    source = rule.invalid[0]
    marked = re.sub(rf"#\s*expect:\s*{gpu}[^\n]*", f"# noqa: E501, {gpu}", source)
    assert marked != source
    (tmp_path / "pyproject.toml").write_text(RUFF_CONFIG)
    (tmp_path / "engine.py").write_text(marked)
    assert sync_lint("check", "engine.py", cwd=tmp_path).returncode == 0  # our code is used: kept
    ruff_fix(tmp_path, "engine.py")
    after = (tmp_path / "engine.py").read_text()
    assert f"# noqa: {gpu}" in after and "E501" not in after
    assert sync_lint("check", "engine.py", cwd=tmp_path).returncode == 0
    result = subprocess.run(
        [RUFF, "check", "--no-cache", "--select", "RUF100", "engine.py"], check=False, cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_this_repository_is_clean_under_its_own_ruff_configuration():
    """A linter's own code follows the conventions it asks of others (``[tool.ruff]`` in
    pyproject.toml says what is excluded and ignored, and why)."""
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run([RUFF, "check", "--no-cache", "."], check=False, cwd=root, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "warning" not in result.stderr.lower(), result.stderr
