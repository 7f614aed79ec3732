"""Output formats. Each reporter turns sorted diagnostics into the text written to stdout."""

from __future__ import annotations

from collections.abc import Callable

from sync_lint.diagnostics import Diagnostic
from sync_lint.report import github, json_format, sarif, text

Reporter = Callable[[list[Diagnostic], bool], str]

FORMATS: dict[str, Reporter] = {
    "text": text.render,
    "concise": text.render,
    "json": json_format.render,
    "github": github.render,
    "sarif": sarif.render,
}
