"""pre-commit and CI entry points, run for real.

The hook repository is a git repository made from this working tree (``sync_lint/``,
``pyproject.toml``, ``README.md``, ``.pre-commit-hooks.yaml``), so what is tested is the code
here, committed or not (``pre-commit try-repo`` on this checkout would take HEAD plus tracked
changes only, missing new files). A user repository then installs the hooks with
``pre-commit install`` and commits: pre-commit builds its own virtualenv and pip-installs the
package into it, as it does for users.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import run

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
UNUSED_NOQA = "x = 1  # noqa: GPU001\n"
# A sync on the per-step hot path: what sync-lint exists to stop (GPU201, once registered).
BUILDER = (
    "import torch\n\n\n"
    "class FooMetadataBuilder:\n"
    "    def build(self, seq_lens: torch.Tensor):\n"
    "        max_len = seq_lens.max().item()\n"
    "        return max_len\n"
)


def gpu201_registered() -> bool:
    from sync_lint.rules import rule_by_code

    return rule_by_code("GPU201") is not None


def _env(home: Path) -> dict:
    env = dict(os.environ)
    env.update(
        PRE_COMMIT_HOME=str(home / "pre-commit-home"),
        GIT_CONFIG_GLOBAL=str(home / "gitconfig"),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid",
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        PRE_COMMIT_COLOR="never",
    )
    (home / "gitconfig").write_text("[init]\n\tdefaultBranch = main\n[commit]\n\tgpgsign = false\n")
    return env


def git(*args: str, cwd: Path, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=check, timeout=120)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> tuple[Path, str, dict]:
    home = tmp_path_factory.mktemp("precommit-home")
    env = _env(home)
    repo = tmp_path_factory.mktemp("hook-repo")
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy2(ROOT / name, repo / name)
    shutil.copytree(ROOT / "sync_lint", repo / "sync_lint", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git("init", "-q", cwd=repo, env=env)
    git("add", "-A", cwd=repo, env=env)
    git("commit", "-q", "-m", "hooks", cwd=repo, env=env)
    rev = git("rev-parse", "HEAD", cwd=repo, env=env).stdout.strip()
    return repo, rev, env


def user_repo(tmp_path: Path, hook_repo, hooks: str) -> tuple[Path, dict]:
    repo_path, rev, env = hook_repo
    repo = tmp_path / "project"
    repo.mkdir()
    git("init", "-q", cwd=repo, env=env)
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {repo_path}\n    rev: {rev}\n    hooks:\n{hooks}"
    )
    (repo / ".gitignore").write_text(".sync_lint_cache/\n")
    subprocess.run([str(BIN / "pre-commit"), "install"], cwd=repo, env=env, check=True, capture_output=True, timeout=60)
    return repo, env


def commit(repo: Path, env: dict, *paths: str) -> subprocess.CompletedProcess:
    git("add", *paths, cwd=repo, env=env)
    return git("commit", "-m", "change", cwd=repo, env=env, check=False)


def test_hook_definitions_are_valid():
    result = subprocess.run(
        [str(BIN / "pre-commit"), "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")], check=False,
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_hook_fails_a_commit_with_a_finding_and_skips_commits_without_python(tmp_path, hook_repo):
    started = time.perf_counter()
    repo, env = user_repo(tmp_path, hook_repo, "      - id: sync-lint\n")
    (repo / "README.txt").write_text("docs\n")
    (repo / "bad.py").write_text(UNUSED_NOQA)
    (repo / "attn.py").write_text(BUILDER)
    result = commit(repo, env, ".pre-commit-config.yaml", ".gitignore", "README.txt", "bad.py", "attn.py")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "bad.py:1:8: GPU010 [*] Unused `noqa` code: GPU001" in output
    if gpu201_registered():
        assert "attn.py:6:19: GPU201 " in output
    git("reset", "-q", "attn.py", cwd=repo, env=env)
    assert git("rev-list", "--all", cwd=repo, env=env).stdout == ""  # nothing was committed

    # Without the Python file the commit goes through; the hook has no file to check.
    git("reset", "-q", "bad.py", cwd=repo, env=env)
    result = commit(repo, env, ".pre-commit-config.yaml", ".gitignore", "README.txt")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "sync-lint" in output and "(no files to check)Skipped" in output

    # A clean Python file passes.
    (repo / "good.py").write_text("y = 2\n")
    result = commit(repo, env, "good.py")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "sync-lint....." in output and "Passed" in output
    print(f"pre-commit check hook test: {time.perf_counter() - started:.1f}s")


def test_fix_hook_rewrites_the_file_then_the_check_passes(tmp_path, hook_repo):
    repo, env = user_repo(tmp_path, hook_repo, "      - id: sync-lint-fix\n      - id: sync-lint\n")
    (repo / "bad.py").write_text(UNUSED_NOQA)
    result = commit(repo, env, ".pre-commit-config.yaml", ".gitignore", "bad.py")
    output = result.stdout + result.stderr
    # pre-commit fails a hook that modified files, so that the user reviews and re-stages them.
    assert result.returncode != 0, output
    assert "files were modified by this hook" in output
    assert (repo / "bad.py").read_text() == "x = 1\n"
    result = commit(repo, env, "bad.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_try_repo_on_explicit_files(tmp_path, hook_repo):
    repo_path, rev, env = hook_repo
    project = tmp_path / "p"
    project.mkdir()
    git("init", "-q", cwd=project, env=env)
    (project / "bad.py").write_text(UNUSED_NOQA)
    (project / "good.py").write_text("y = 2\n")
    git("add", "-A", cwd=project, env=env)

    def try_repo(hook: str, *files: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BIN / "pre-commit"), "try-repo", str(repo_path), hook, "--ref", rev, "--files", *files], check=False,
            cwd=project, env=env, capture_output=True, text=True, timeout=600,
        )

    # try-repo builds a fresh environment on every call (about 20 s here): one call only.
    result = try_repo("sync-lint", "bad.py", "good.py")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "bad.py:1:8: GPU010" in output and "good.py" not in output.split("Failed", 1)[1]


def test_always_run_with_zero_files_checks_nothing(tmp_path, hook_repo):
    # `always_run: true` makes pre-commit call the hook with no file at all. The hook must not
    # fall back to checking every tracked file (bad.py, committed with --no-verify).
    repo, env = user_repo(tmp_path, hook_repo, "      - id: sync-lint\n        always_run: true\n")
    (repo / "bad.py").write_text(UNUSED_NOQA)
    git("add", "-A", cwd=repo, env=env)
    git("commit", "-q", "--no-verify", "-m", "old code", cwd=repo, env=env)
    (repo / "notes.txt").write_text("notes\n")
    result = commit(repo, env, "notes.txt")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "sync-lint....." in output and "Passed" in output


# -- the same flags, straight from the command line (fast) --------------------------------------

def test_no_default_paths_with_zero_files_is_clean_and_quick(tmp_path):
    (tmp_path / "bad.py").write_text(UNUSED_NOQA)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "bad.py"], cwd=tmp_path, check=True)
    # Without the flag, no paths means the tracked files: bad.py is found ...
    assert run("check", cwd=tmp_path).returncode == 1
    # ... with it, nothing is checked.
    for command in ("check", "fix"):
        result = run(command, "--no-default-paths", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout == "" and "0 files checked" in result.stderr
    assert (tmp_path / "bad.py").read_text() == UNUSED_NOQA


def test_git_tracked_files_are_the_default(tmp_path):
    (tmp_path / "tracked.py").write_text(UNUSED_NOQA)
    (tmp_path / "untracked.py").write_text(UNUSED_NOQA)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.py").write_text(UNUSED_NOQA)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "tracked.py", "sub/deep.py"], cwd=tmp_path, check=True)
    result = run("check", cwd=tmp_path)
    assert result.returncode == 1
    assert sorted(line.split(":")[0] for line in result.stdout.splitlines()) == ["sub/deep.py", "tracked.py"]
    # Outside a git repository: the current folder, walked.
    shutil.rmtree(tmp_path / ".git")
    result = run("check", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in result.stdout.splitlines()) == [
        "sub/deep.py", "tracked.py", "untracked.py"
    ]


def test_force_exclude_applies_exclusions_to_explicit_files(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.sync-lint]\nextend-exclude = ["generated"]\n')
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "bad.py").write_text(UNUSED_NOQA)
    (tmp_path / "bad.py").write_text(UNUSED_NOQA)
    # Named explicitly, a file is checked even if excluded (as in flake8 and ruff) ...
    assert run("check", "generated/bad.py", cwd=tmp_path).returncode == 1
    # ... unless --force-exclude says otherwise, which is what pre-commit needs.
    result = run("check", "--force-exclude", "generated/bad.py", "bad.py", cwd=tmp_path)
    assert result.returncode == 1
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["bad.py"]
