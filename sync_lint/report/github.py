"""GitHub Actions workflow commands: each finding becomes an annotation on the pull request."""

from __future__ import annotations

from sync_lint.diagnostics import Diagnostic


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def render(diagnostics: list[Diagnostic], unsafe: bool = False) -> str:
    lines = []
    for d in diagnostics:
        level = "error" if d.is_tool_error or d.code.startswith("GPU00") else "warning"
        properties = ",".join(
            [
                f"file={_escape_property(d.path)}",
                f"line={d.line}",
                f"col={d.col}",
                f"endLine={d.end_line}",
                f"endColumn={d.end_col}",
                f"title={_escape_property('sync-lint ' + d.code)}",
            ]
        )
        lines.append(f"::{level} {properties}::{_escape_data(d.code + ' ' + d.message)}")
    return "".join(line + "\n" for line in lines)
