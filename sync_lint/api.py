"""A small Python API over the engine, for tests, scripts and the runtime cross-checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sync_lint import config
from sync_lint.diagnostics import Diagnostic
from sync_lint.pipeline.discover import DEFAULT_EXCLUDE, Discovery
from sync_lint.pipeline.project import ProjectIndex
from sync_lint.pipeline.runner import Linter
from sync_lint.pipeline.source import decode


def make_settings(select: list[str] | None = None, **options: Any) -> config.Settings:
    """Isolated settings (no pyproject.toml is read); option names use underscores or dashes."""
    values = {key.replace("_", "-"): value for key, value in options.items()}
    if select is not None:
        values["select"] = select
    return config.Settings(values=config.validate(values, "<api>"), root=Path.cwd())


def lint_paths(paths: list[str], select: list[str] | None = None, **options: Any) -> list[Diagnostic]:
    """Lint files and folders together as one project (cross-file summaries included)."""
    settings = make_settings(select, **options)
    files = Discovery(DEFAULT_EXCLUDE, settings.root).files([str(p) for p in paths])
    return Linter(settings).run(files, jobs=1).diagnostics


def lint_text(text: str, path: str = "example.py", select: list[str] | None = None, **options: Any) -> list[Diagnostic]:
    """Lint one in-memory module."""
    linter = Linter(make_settings(select, **options))
    facts = linter.lint_source(decode(path, text.encode("utf-8")))
    return linter.finalize(facts, ProjectIndex([facts]))


def fix_text(text: str, path: str = "example.py", unsafe: bool = False, select: list[str] | None = None, **options: Any) -> str:
    """The text after ``sync-lint fix`` (``--unsafe-fixes`` with ``unsafe``) on one in-memory module."""
    from sync_lint.pipeline.fix import fix_text_once

    return fix_text_once(Linter(make_settings(select, **options)), text, path, unsafe)
