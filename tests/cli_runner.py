"""Running the real command line in a subprocess, as users and CI do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run(*args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sync_lint", *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
