"""File discovery: paths and folders -> the Python files to check, in a stable order."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

# Folders that hold no project code (the defaults ruff and flake8 users expect).
DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", ".eggs", "*.egg-info", "__pycache__",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".sync_lint_cache", "build", "dist", "node_modules",
    "site-packages", "__pypackages__", ".ipynb_checkpoints",
)


class Discovery:
    def __init__(self, exclude: list[str] | tuple[str, ...], root: Path) -> None:
        self.patterns = tuple(exclude)
        self.root = root

    def is_excluded(self, path: str) -> bool:
        """A path is excluded if its name, or its path relative to the config root, matches."""
        name = os.path.basename(path.rstrip(os.sep)) or path
        if any(fnmatch.fnmatch(name, pattern) for pattern in self.patterns):
            return True
        try:
            relative = Path(path).resolve().relative_to(self.root).as_posix()
        except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop (Python 3.11)
            relative = Path(path).as_posix()
        return any(
            fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(relative, pattern.rstrip("/") + "/*")
            for pattern in self.patterns
            if "/" in pattern or "*" in pattern
        )

    def files(self, paths: list[str]) -> list[str]:
        """Files named explicitly are always checked (as in flake8); folders are walked."""
        found: list[str] = []
        seen: set[str] = set()
        for path in paths:
            if os.path.isdir(path):
                candidates = self._walk(path)
            else:
                # A missing file is kept: reading it reports GPU003 naming it.
                candidates = [path]
            for candidate in candidates:
                key = os.path.normpath(candidate)
                if key not in seen:
                    seen.add(key)
                    found.append(candidate)
        return found

    def _walk(self, top: str) -> list[str]:
        files: list[str] = []
        # followlinks=False: a symlink loop cannot make us walk forever.
        for folder, subfolders, names in os.walk(top, followlinks=False):
            subfolders[:] = sorted(d for d in subfolders if not self.is_excluded(os.path.join(folder, d)))
            for name in sorted(names):
                if name.endswith((".py", ".pyi")):
                    full = os.path.join(folder, name)
                    if not self.is_excluded(full):
                        files.append(os.path.normpath(full))
        return files


def git_tracked_python_files(cwd: str = ".") -> list[str] | None:
    """The Python files git tracks under ``cwd``, or None outside a git work tree."""
    import subprocess  # here: most runs are given their files and never ask git (a one-file run's start-up)

    try:
        result = subprocess.run(
            ["git", "ls-files", "-z", "--", "*.py", "*.pyi"],
            cwd=cwd, capture_output=True, check=True, timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return [name for name in result.stdout.decode("utf-8", "surrogateescape").split("\0") if name]
