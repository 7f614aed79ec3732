"""The command line as users and CI drive it: flags, formats, config, exit statuses.

GPU010 (an unused ``# noqa: GPU...``) is the finding used here: it is real, and safely fixable,
which lets these tests exercise the engine independently of the GPU rules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run

UNUSED_NOQA = "x = 1  # noqa: GPU001\n"



@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(UNUSED_NOQA)
    (tmp_path / "pkg" / "good.py").write_text("y = 2\n")
    return tmp_path


def assert_no_traceback(result: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout


def test_findings_exit_1_with_flake8_style_lines(project):
    result = run("check", "pkg", cwd=project)
    assert result.returncode == 1
    assert result.stdout == "pkg/bad.py:1:8: GPU010 [*] Unused `noqa` code: GPU001\n"
    assert "2 files checked, 1 finding (1 fixable)" in result.stderr


def test_clean_exit_0_and_exit_zero(project):
    assert run("check", "pkg/good.py", cwd=project).returncode == 0
    assert run("check", "--exit-zero", "pkg", cwd=project).returncode == 0


def test_no_python_files_is_exit_0(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run("check", "empty", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == ""


@pytest.mark.parametrize(
    ("flags", "status"),
    [
        (["--ignore", "GPU010"], 0),
        (["--ignore", "GPU0"], 0),
        (["--select", "GPU001"], 0),
        (["--select", "GPU001", "--extend-select", "GPU010"], 1),
        (["--select", "ALL"], 1),
    ],
)
def test_selection_flags(project, flags, status):
    assert run("check", *flags, "pkg", cwd=project).returncode == status


@pytest.mark.parametrize("flag", ["--select", "--ignore", "--extend-select"])
def test_unknown_code_is_a_one_line_error(project, flag):
    result = run("check", flag, "GPU999", "pkg", cwd=project)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "GPU999" in result.stderr
    assert_no_traceback(result)


def test_missing_path_is_exit_2(project):
    result = run("check", "nope.py", cwd=project)
    assert result.returncode == 2 and "nope.py" in result.stderr
    assert_no_traceback(result)


def test_config_is_read_from_nearest_pyproject(project):
    (project / "pyproject.toml").write_text('[tool.sync-lint]\nignore = ["GPU010"]\n')
    assert run("check", "pkg", cwd=project).returncode == 0
    # Flags win over the file; --isolated ignores it.
    assert run("check", "--select", "GPU010", "pkg", cwd=project).returncode == 0  # ignore still applies
    assert run("check", "--isolated", "pkg", cwd=project).returncode == 1


def test_explicit_config_file(project, tmp_path_factory):
    other = tmp_path_factory.mktemp("cfg") / "pyproject.toml"
    other.write_text('[tool.sync-lint]\nignore = ["GPU0"]\n')
    assert run("check", "--config", str(other), "pkg", cwd=project).returncode == 0
    result = run("check", "--config", str(other.parent / "missing.toml"), "pkg", cwd=project)
    assert result.returncode == 2 and "missing.toml" in result.stderr


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[tool.sync-lint]\nselct = ["GPU"]\n', "unknown option `selct`"),
        ('[tool.sync-lint]\nselect = ["GPU777"]\n', "unknown rule code or prefix `GPU777`"),
        ('[tool.sync-lint]\nselect = "GPU"\n', "must be a list of strings"),
        ('[tool.sync-lint]\nselect = [\n', "invalid TOML"),
        ('[tool.sync-lint]\nsync-guard = "no_colon"\n', "package.module:name"),
        ('[tool.sync-lint]\nstrided-sinks = "torch.ops._C.gemm"\n', "`strided-sinks` must be a list of strings"),
        ('[tool.sync-lint.per-file-ignores]\n"tests/*" = ["GPU7"]\n', "GPU7"),
        ('[tool.sync-lint]\nhot-class-methods = ["*Impl"]\n', "`hot-class-methods` must be a table"),
        ('[tool.sync-lint.hot-class-methods]\n"*Impl" = "forward"\n', "`hot-class-methods` entry `*Impl` must be a list"),
    ],
)
def test_config_errors_exit_2_naming_the_file(project, toml, message):
    (project / "pyproject.toml").write_text(toml)
    result = run("check", "pkg", cwd=project)
    assert result.returncode == 2
    assert "pyproject.toml" in result.stderr and message in result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert_no_traceback(result)


def test_per_file_ignores(project):
    (project / "pyproject.toml").write_text('[tool.sync-lint.per-file-ignores]\n"pkg/bad.py" = ["GPU010"]\n')
    assert run("check", "pkg", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text('[tool.sync-lint.per-file-ignores]\n"pkg/other_*.py" = ["GPU010"]\n')
    assert run("check", "pkg", cwd=project).returncode == 1


def test_exclude_and_default_exclusions(project):
    (project / ".venv").mkdir()
    (project / ".venv" / "vendored.py").write_text(UNUSED_NOQA)
    (project / "build").mkdir()
    (project / "build" / "gen.py").write_text(UNUSED_NOQA)
    result = run("check", ".", cwd=project)
    assert result.stdout.count("GPU010") == 1, result.stdout
    assert run("check", "--extend-exclude", "pkg/bad.py", ".", cwd=project).returncode == 0


def test_json_output(project):
    result = run("check", "--output-format", "json", "pkg", cwd=project)
    (item,) = json.loads(result.stdout)
    assert item["code"] == "GPU010" and item["filename"] == "pkg/bad.py"
    assert item["location"] == {"row": 1, "column": 8}
    assert item["fix"]["applicability"] == "safe"
    (edit,) = item["fix"]["edits"]
    assert edit["content"] == "" and edit["location"]["row"] == 1 and edit["end_location"]["column"] == 22
    assert item["url"].endswith("GPU010.md")


def test_github_output(project):
    result = run("check", "--output-format", "github", "pkg", cwd=project)
    assert result.stdout.startswith("::warning file=pkg/bad.py,line=1,col=8,endLine=1,endColumn=22,")
    assert "::GPU010 Unused `noqa` code%3A GPU001" not in result.stdout  # data part is not property-escaped
    assert result.stdout.rstrip().endswith("::GPU010 Unused `noqa` code: GPU001")


def test_output_file_and_statistics(project):
    result = run("check", "-o", "report.txt", "pkg", cwd=project)
    assert result.returncode == 1 and result.stdout == ""
    assert (project / "report.txt").read_text().startswith("pkg/bad.py:1:8: GPU010")
    stats = run("check", "--statistics", "pkg", cwd=project)
    assert stats.stdout.split() == ["1", "GPU010", "[*]", "unused-noqa"]


def test_fix_writes_once_and_second_run_changes_nothing(project):
    result = run("fix", "pkg", cwd=project)
    assert result.returncode == 0, result.stderr
    assert (project / "pkg" / "bad.py").read_text() == "x = 1\n"
    assert "1 fixed" in result.stderr
    again = run("fix", "pkg", cwd=project)
    assert again.returncode == 0 and "0 fixed" in again.stderr


def test_fix_diff_writes_nothing_and_exits_1(project):
    result = run("fix", "--diff", "pkg", cwd=project)
    assert result.returncode == 1
    assert "-x = 1  # noqa: GPU001" in result.stdout and "+x = 1" in result.stdout
    assert (project / "pkg" / "bad.py").read_text() == UNUSED_NOQA
    assert run("fix", "--diff", "pkg/good.py", cwd=project).returncode == 0


def test_fix_exit_non_zero_on_fix(project):
    assert run("fix", "--exit-non-zero-on-fix", "pkg", cwd=project).returncode == 1


def test_fix_keeps_crlf_bom_and_encoding(tmp_path):
    (tmp_path / "crlf.py").write_bytes(b"\xef\xbb\xbfa = 1\r\nx = 1  # noqa: GPU001\r\nb = 2\r\n")
    (tmp_path / "latin.py").write_bytes("# coding: latin-1\ns = 'é'  # noqa: GPU001\n".encode("latin-1"))
    assert run("fix", ".", cwd=tmp_path).returncode == 0
    assert (tmp_path / "crlf.py").read_bytes() == b"\xef\xbb\xbfa = 1\r\nx = 1\r\nb = 2\r\n"
    assert (tmp_path / "latin.py").read_bytes() == "# coding: latin-1\ns = 'é'\n".encode("latin-1")


def test_fix_keeps_file_mode(project):
    target = project / "pkg" / "bad.py"
    os.chmod(target, 0o640)
    run("fix", "pkg", cwd=project)
    assert (os.stat(target).st_mode & 0o777) == 0o640


def test_undecodable_and_unreadable_files_exit_2_and_others_still_checked(project):
    (project / "pkg" / "binary.py").write_bytes(b"x = '\xff'\n")
    os.symlink(project / "missing.py", project / "pkg" / "dangling.py")
    result = run("check", "pkg", cwd=project)
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert any(line.startswith("pkg/binary.py:1:1: GPU002") for line in lines), lines
    assert any(line.startswith("pkg/dangling.py:1:1: GPU003") for line in lines), lines
    assert any(line.startswith("pkg/bad.py:1:8: GPU010") for line in lines), lines
    assert_no_traceback(result)


def test_rule_pages(project):
    page = run("rule", "GPU010", cwd=project)
    assert page.returncode == 0 and page.stdout.startswith("# GPU010 unused-noqa")
    assert run("rule", "unused-noqa", cwd=project).stdout == page.stdout
    every = run("rule", "--all", cwd=project)
    assert every.returncode == 0 and "# GPU001 syntax-error" in every.stdout
    unknown = run("rule", "GPU999", cwd=project)
    assert unknown.returncode == 2 and "GPU999" in unknown.stderr


def test_no_command_prints_help_and_exits_2(project):
    result = run(cwd=project)
    assert result.returncode == 2 and "usage" in result.stderr


def test_cache_is_used_and_bypassed(project):
    first = run("check", "pkg", cwd=project)
    assert (project / ".sync_lint_cache").is_dir()
    second = run("check", "pkg", cwd=project)
    assert first.stdout == second.stdout
    (project / "pkg" / "bad.py").write_text("x = 1\n")  # the finding is gone: the cache must see it
    assert run("check", "pkg", cwd=project).returncode == 0
    import shutil

    shutil.rmtree(project / ".sync_lint_cache")
    assert run("check", "--no-cache", "pkg", cwd=project).returncode == 0
    assert not (project / ".sync_lint_cache").exists()


OP_WRAPPER = """\
import torch


def copy_rows(src, dst):
    torch.ops._C.copy_rows(dst, src)
"""

USES_THE_WRAPPER = """\
from lib.ops import copy_rows


def step(block_table, out):
    copy_rows(block_table[:, 0], out)
"""


def test_cache_sees_a_new_package(tmp_path):
    """Adding ``lib/__init__.py`` makes ``lib/ops.py`` the module ``lib.ops`` (it was ``ops``):
    no file's text changed, but the wrapper's summary now answers the caller's import. A warm
    run must find what a run without the cache finds."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "ops.py").write_text(OP_WRAPPER)
    (tmp_path / "step.py").write_text(USES_THE_WRAPPER)
    assert run("check", "--isolated", ".", cwd=tmp_path).returncode == 0  # ``lib.ops`` is no module yet
    (tmp_path / "lib" / "__init__.py").write_text("")
    cold = run("check", "--isolated", "--no-cache", ".", cwd=tmp_path)
    assert cold.returncode == 1 and "GPU102" in cold.stdout, cold.stdout
    warm = run("check", "--isolated", ".", cwd=tmp_path)
    assert warm.stdout == cold.stdout


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_profile_prints_time_per_phase_and_rule(jobs):
    # Over fixtures and reference_kernels (more files than the serial threshold), in one
    # process and with workers whose totals must come back to the parent.
    repo = Path(__file__).resolve().parent.parent
    result = run("check", "--profile", "--no-cache", "--isolated", "--jobs", jobs, "fixtures", "reference_kernels", cwd=repo)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("sync-lint profile: "))
    assert f"{jobs} job(s)" in lines[header]
    rows = {}
    for line in lines[header + 2 :]:
        if line.startswith("sync-lint: "):
            break
        label, seconds, _share, calls = line.rsplit(None, 3)
        rows[label.strip()] = (float(seconds), int(calls))
    for label in ("parse", "read and decode", "rule GPU101", "rule GPU201", "analysis SyncAnalysis", "positions and fixes"):
        assert label in rows and rows[label][1] > 0, label
    total = float(lines[header].split(" s in the pipeline")[0].rsplit(", ", 1)[1])
    assert abs(sum(seconds for seconds, _ in rows.values()) - total) < 0.01 * len(rows) + 0.01


def test_profile_says_how_many_workers_a_run_of_few_files_started(tmp_path):
    """A run of one file that reads nothing beyond it plans in its own process and parses in its
    lint worker (``runner._WarmWorker``, on Linux); one whose hot code calls into 20 files
    beyond it also outlines them in its spare pool of two workers (``runner._pool_for``), and
    parses them in its lint worker and the worker's twin (elsewhere, in the spare pool)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "op.py").write_text("import torch\n\n\ndef f(x, out):\n    torch.ops._C.silu(out, x[:, 0])\n")
    for i in range(20):
        (package / f"h{i}.py").write_text(f"import torch\n\n\ndef wait{i}(x):\n    torch.cuda.synchronize()\n")
    imports = "".join(f"from pkg.h{i} import wait{i}\n" for i in range(20))
    calls = "".join(f"        wait{i}(x)\n" for i in range(20))
    (package / "model.py").write_text(f"from torch import nn\n\n{imports}\n\nclass Model(nn.Module):\n    def forward(self, x):\n{calls}")
    alone = run("check", "--profile", "--no-cache", "--isolated", "--jobs", "2", "pkg/op.py", cwd=tmp_path)
    forks = 1 if sys.platform.startswith("linux") else 0
    assert f"sync-lint profile: 1 files, {1 + forks} job(s)" in alone.stderr, alone.stderr
    beyond = run("check", "--profile", "--no-cache", "--isolated", "--jobs", "2", "pkg/model.py", cwd=tmp_path)
    assert beyond.stdout.count("GPU201") == 20, beyond.stdout
    assert f"sync-lint profile: 1 files, {2 + 2 * forks} job(s)" in beyond.stderr, beyond.stderr


def test_summary_counts_the_fixes_that_need_unsafe_fixes(tmp_path):
    (tmp_path / "op.py").write_text("import torch\n\n\ndef f(x, out):\n    torch.ops._C.silu(out, x[:, 0])\n")
    plain = run("check", "--isolated", "--no-cache", "op.py", cwd=tmp_path)
    assert "1 finding (0 fixable, 1 more with --unsafe-fixes)" in plain.stderr, plain.stderr
    assert "GPU102 [*]" not in plain.stdout  # an unsafe fix is not marked without the flag
    unsafe = run("check", "--isolated", "--no-cache", "--unsafe-fixes", "op.py", cwd=tmp_path)
    assert "1 finding (1 fixable)" in unsafe.stderr and "GPU102 [*]" in unsafe.stdout


def test_fix_of_one_file_fixes_a_finding_that_rests_on_another_file(tmp_path):
    """``sync-lint fix FILE`` (pre-commit's fix hook with one staged file) reads what its findings
    rest on beyond the file, as ``check`` does: the kernel wrapper of another file. Under
    ``follow-imports = "skip"`` the file is checked alone, finds nothing and is left as it is."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "kernels.py").write_text(
        "import torch\n\n\ndef decode(block_table, out):\n    torch.ops._C.paged_decode(block_table, out)\n"
    )
    user = pkg / "user.py"
    original = (
        "import torch\n\nfrom pkg.kernels import decode\n\n\n"
        "def run(block_table: torch.Tensor, out: torch.Tensor):\n    decode(block_table[:, 0].to(torch.int32), out)\n"
    )
    user.write_text(original)
    (tmp_path / "pyproject.toml").write_text('[tool.sync-lint]\nfollow-imports = "skip"\n')
    alone = run("check", "pkg/user.py", "--no-cache", cwd=tmp_path)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert run("fix", "pkg/user.py", "--unsafe-fixes", "--no-cache", cwd=tmp_path).returncode == 0
    assert user.read_text() == original
    (tmp_path / "pyproject.toml").write_text("[tool.sync-lint]\n")
    found = run("check", "pkg/user.py", "--no-cache", cwd=tmp_path)
    assert found.returncode == 1 and "pkg/user.py:7:12: GPU101" in found.stdout, found.stdout + found.stderr
    fixed = run("fix", "pkg/user.py", "--unsafe-fixes", "--no-cache", cwd=tmp_path)
    assert fixed.returncode == 0 and "1 fixed" in fixed.stderr, fixed.stdout + fixed.stderr  # nothing left
    assert user.read_text() == original.replace("torch.int32)", "torch.int32).contiguous()")
    assert run("check", "pkg/user.py", "--no-cache", cwd=tmp_path).returncode == 0
