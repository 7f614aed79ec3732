"""The data every front end consumes: diagnostics, fixes and text edits.

Everything here is plain, picklable data (no libcst nodes), so that results can cross
process boundaries and be stored in the cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Applicability = Literal["safe", "unsafe"]


@dataclass(frozen=True, order=True)
class Edit:
    """Replace ``text[start:end]`` (character offsets into the decoded source) by ``content``."""

    start: int
    end: int
    content: str


@dataclass(frozen=True)
class Fix:
    message: str
    applicability: Applicability
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Diagnostic:
    """One finding. Lines and columns are 1-based; the end is exclusive."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    code: str
    message: str
    fix: Fix | None = None
    # Tool diagnostics (a file that cannot be read or decoded) make the run fail with exit 2.
    is_tool_error: bool = False

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.col, self.code)
