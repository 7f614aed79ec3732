"""Apply fixes to a file: all of a file's fixes together, re-linted until stable, re-parsed
before anything is written, written atomically, never over a file that changed meanwhile."""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass, field

import libcst as cst

from sync_lint.diagnostics import Diagnostic
from sync_lint.fixes import apply_fixes
from sync_lint.pipeline.lint_file import tool_diagnostic
from sync_lint.pipeline.project import ProjectIndex
from sync_lint.pipeline.runner import Linter
from sync_lint.pipeline.source import SourceError, SourceFile, decode, read, read_bytes

# Each round applies every non-overlapping fix; fixes that overlapped, or that the new code
# makes necessary, go in the next. A fix that keeps re-creating its finding stops here.
MAX_ROUNDS = 10


@dataclass
class FixOutcome:
    source: SourceFile  # as read: its bytes tell whether the file changed meanwhile
    fixed: str
    fixes_applied: int = 0
    remaining: list[Diagnostic] = field(default_factory=list)
    error: Diagnostic | None = None

    @property
    def path(self) -> str:
        return self.source.path

    @property
    def original(self) -> str:
        return self.source.text

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


def allowed(diagnostic: Diagnostic, unsafe: bool) -> bool:
    return diagnostic.fix is not None and (diagnostic.fix.applicability == "safe" or unsafe)


def fix_source(linter: Linter, source: SourceFile, index: ProjectIndex, unsafe: bool) -> FixOutcome:
    """Fix in memory. ``index`` holds the project's summaries (cross-file findings)."""
    outcome = FixOutcome(source=source, fixed=source.text)
    current = source
    for _ in range(MAX_ROUNDS):
        diagnostics = linter.finalize(linter.lint_source(current, project=index.project_names_of(source.path)), index)
        fixes = [d.fix for d in diagnostics if allowed(d, unsafe)]
        outcome.remaining = [d for d in diagnostics if not allowed(d, unsafe)]
        if not fixes:
            outcome.remaining = diagnostics
            break
        new_text, applied = apply_fixes(current.text, fixes)
        if applied == 0 or new_text == current.text:
            break
        try:
            cst.parse_module(new_text)
        except (cst.ParserSyntaxError, RecursionError):
            outcome.error = tool_diagnostic(
                source.path, "GPU005", "fix not applied: the fixed code would not parse (please report this)"
            )
            break
        outcome.fixes_applied += applied
        current = SourceFile(path=source.path, text=new_text, encoding=source.encoding, raw=source.raw)
        outcome.fixed = new_text
    else:
        outcome.remaining = linter.finalize(linter.lint_source(current, project=index.project_names_of(source.path)), index)
    return outcome


def fix_path(linter: Linter, path: str, index: ProjectIndex, unsafe: bool) -> FixOutcome | Diagnostic:
    try:
        source = read(path)
    except SourceError as exc:
        return tool_diagnostic(path, exc.code, exc.message, exc.line)
    return fix_source(linter, source, index, unsafe)


def write_atomically(outcome: FixOutcome) -> Diagnostic | None:
    """Write the fixed text in the file's encoding; refuse if the file changed since it was read."""
    path = outcome.path
    try:
        on_disk = read_bytes(path)
    except OSError as exc:
        return tool_diagnostic(path, "GPU005", f"fix not written: cannot re-read file: {exc.strerror}")
    if on_disk != outcome.source.raw:
        return tool_diagnostic(path, "GPU005", "fix not written: the file changed while it was being fixed")
    try:
        data = outcome.source.encode(outcome.fixed)
    except UnicodeEncodeError:
        return tool_diagnostic(path, "GPU005", f"fix not written: the fixed code cannot be encoded as {outcome.source.encoding}")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if not os.access(path, os.W_OK):
            return tool_diagnostic(path, "GPU005", "fix not written: the file is read-only")
        handle, temp = tempfile.mkstemp(dir=folder, prefix=".sync-lint-", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temp, mode)
            os.replace(temp, path)
        except BaseException:
            os.unlink(temp)
            raise
    except OSError as exc:
        return tool_diagnostic(path, "GPU005", f"fix not written: {exc.strerror or exc}")
    return None


def fix_text_once(linter: Linter, text: str, path: str, unsafe: bool) -> str:
    source = decode(path, text.encode("utf-8"))
    facts = linter.lint_source(source)
    return fix_source(linter, source, ProjectIndex([facts]), unsafe).fixed
