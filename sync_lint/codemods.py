"""sync-lint's fixes as libcst codemod commands, for teams that drive refactors with libcst.

    python -m libcst.tool codemod -x sync_lint.codemods.SyncLintFix --no-format src/
    python -m libcst.tool codemod -x sync_lint.codemods.SyncLintFix --no-format --unsafe-fixes src/
    python -m libcst.tool codemod -x sync_lint.codemods.SyncLintAddNoqa --no-format src/

(``-x`` names the command by its import path; a ``.libcst.codemod.yaml`` listing ``sync_lint``
under ``modules`` lets ``codemods.SyncLintFix`` be written instead.) The commands run the very
engine ``sync-lint fix`` runs: the module's code is linted with the configuration of the project
the file lives in, the same fix loop applies the fixes, and the result is re-parsed before libcst
writes it. Like the flake8 plugin, a codemod sees one file at a time, so findings that need a
function defined in another file are left to ``sync-lint check``/``fix``.

``DocumentLinter`` (one file in memory, configured from its project) also serves the language
server.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext, SkipFile

from sync_lint import config
from sync_lint.analysis.project_names import NOTHING_FROM_THE_PROJECT
from sync_lint.diagnostics import Diagnostic
from sync_lint.pipeline import project_plan
from sync_lint.pipeline.fix import FixOutcome, fix_source
from sync_lint.pipeline.project import ProjectIndex
from sync_lint.pipeline.runner import Linter
from sync_lint.pipeline.source import SourceFile


class DocumentLinter:
    """Lint or fix one in-memory file with the ``[tool.sync-lint]`` of the project it lives in.

    ``select``/``ignore`` extend that configuration as the command-line flags would.
    """

    def __init__(self, select: list[str] | None = None, ignore: list[str] | None = None) -> None:
        self.select = select
        self.ignore = ignore or []
        self._linters: dict[tuple, Linter] = {}

    def linter_for(self, path: str) -> Linter:
        """Raises ``config.ConfigError`` for a broken configuration (callers report it)."""
        folder = Path(os.path.abspath(path)).parent
        found = config.find_pyproject(folder)
        stamp = None
        if found is not None:
            try:
                stamp = os.stat(found).st_mtime_ns
            except OSError:
                stamp = None
        key = (str(found or folder), stamp)
        linter = self._linters.get(key)
        if linter is None:
            settings = config.load(found, start=folder) if found else config.Settings(root=Path.cwd())
            values = dict(settings.values)
            if self.select is not None:
                values["select"] = self.select
            values["ignore"] = list(settings["ignore"]) + self.ignore
            for name in ("select", "ignore"):
                config.check_codes(values.get(name, []), f"--{name}")
            settings.values = values
            linter = Linter(settings)
            self._linters[key] = linter
        return linter

    @staticmethod
    def source(text: str, path: str) -> SourceFile:
        return SourceFile(path=path, text=text, encoding="utf-8", raw=text.encode("utf-8", "surrogatepass"))

    def lint(self, text: str, path: str) -> list[Diagnostic]:
        linter = self.linter_for(path)
        facts = linter.lint_source(self.source(text, path), alone=True)
        return linter.finalize(facts, ProjectIndex([facts]))

    def fix(self, text: str, path: str, unsafe: bool = False) -> FixOutcome:
        linter = self.linter_for(path)
        source = self.source(text, path)
        _, names = linter.lone_scope(path, source)  # what the file hears of those beside it, as ``lint``
        facts = linter.lint_source(source, project=names.of(path) if names is not None else NOTHING_FROM_THE_PROJECT)
        facts, names = project_plan.hearing_ops_alone(
            source, linter.settings, facts, names, lambda heard: linter.lint_source(source, project=heard)
        )
        return fix_source(linter, source, ProjectIndex([facts], names=names), unsafe)


def _codes(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


class _SyncLintCommand(CodemodCommand):
    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument("--select", type=_codes, default=None, help="sync-lint codes or prefixes to enable")
        arg_parser.add_argument("--ignore", type=_codes, default=None, help="sync-lint codes or prefixes to disable")

    def __init__(self, context: CodemodContext, select: list[str] | None = None, ignore: list[str] | None = None) -> None:
        super().__init__(context)
        self.engine = DocumentLinter(select=select, ignore=ignore)

    def _path(self) -> str:
        return self.context.filename or "<stdin>.py"

    def _linter_or_skip(self) -> None:
        try:
            self.engine.linter_for(self._path())
        except config.ConfigError as exc:
            raise SkipFile(f"sync-lint: {exc}") from None

    def _warn_left(self, remaining: list[Diagnostic]) -> None:
        for d in remaining:
            self.warn(f"{d.line}:{d.col}: {d.code} {d.message}")


class SyncLintFix(_SyncLintCommand):
    DESCRIPTION: str = "Apply sync-lint's fixes (safe ones; unsafe ones too with --unsafe-fixes)."

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        _SyncLintCommand.add_args(arg_parser)
        arg_parser.add_argument(
            "--unsafe-fixes", action="store_true", default=False, help="also apply fixes marked unsafe"
        )

    def __init__(
        self,
        context: CodemodContext,
        unsafe_fixes: bool = False,
        select: list[str] | None = None,
        ignore: list[str] | None = None,
    ) -> None:
        super().__init__(context, select=select, ignore=ignore)
        self.unsafe_fixes = unsafe_fixes

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self._linter_or_skip()
        outcome = self.engine.fix(tree.code, self._path(), self.unsafe_fixes)
        if outcome.error is not None:
            raise SkipFile(f"sync-lint: {outcome.error.message}")
        self._warn_left(outcome.remaining)
        if not outcome.changed:
            return tree
        # fix_source re-parsed the text already; this parse cannot fail.
        return cst.parse_module(outcome.fixed)


class SyncLintAddNoqa(_SyncLintCommand):
    DESCRIPTION: str = "Add `# noqa: CODE` to every line with a sync-lint finding (adopting it on old code)."

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        from sync_lint.add_noqa import NoqaError, add_noqa_text, check_result

        self._linter_or_skip()
        found = self.engine.lint(tree.code, self._path())
        try:
            new_text, added = add_noqa_text(tree.code, found)
            check_result(new_text, found)
        except NoqaError as exc:
            raise SkipFile(f"sync-lint: noqa not added: {exc}") from None
        if not added:
            return tree
        return cst.parse_module(new_text)
