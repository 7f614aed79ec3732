"""The flake8 front end: the same engine, one file at a time.

flake8 owns selection and ``# noqa``: every sync-lint rule that is on by default (or enabled
by ``preview`` in ``[tool.sync-lint]``) runs, nothing is suppressed here, and GPU010 (unused
noqa) is left to flake8. Columns are 0-based because flake8 adds one. Each file is checked
alone (flake8 calls a plugin once per file, in its own processes): functions in other files
are not seen, and a finding that rests on one needs ``sync-lint check``, which reads the
functions its files call beyond them; only whether a class is an ``nn.Module`` by way of a base
another file defines, and the custom ops a finding rests on that a file beside implements in
Python, are read from beside it, as ``sync-lint check`` of the one file under
``follow-imports = "skip"`` does.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from sync_lint import __version__, config
from sync_lint.analysis.modules import is_package_init
from sync_lint.analysis.project_names import NOTHING_FROM_THE_PROJECT, FileProjectNames
from sync_lint.pipeline import project_plan
from sync_lint.pipeline.lint_file import FileFacts, lint_source, module_name_for
from sync_lint.pipeline.prefilter import rules_that_can_report
from sync_lint.pipeline.project import ProjectIndex
from sync_lint.pipeline.scout import Scout
from sync_lint.pipeline.source import SourceFile
from sync_lint.rules import all_rules


@lru_cache(maxsize=64)
def _rules_for(folder: str) -> tuple[config.Settings, list]:
    try:
        settings = config.load(None, start=Path(folder))
    except config.ConfigError:
        settings = config.Settings()
    rules = all_rules()
    settings.values = {**settings.values, "select": ["GPU"], "extend-select": [], "ignore": ["GPU010"]}
    enabled = config.enabled_codes(settings, {r.code for r in rules if r.preview}, [r.code for r in rules])
    return settings, [rule(settings) for rule in rules if rule.code in enabled and not rule.tool_rule]


class SyncLintChecker:
    name = "sync-lint"
    version = __version__

    def __init__(self, tree, filename: str, lines: list[str]) -> None:
        self.tree = tree
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        folder = str(Path(self.filename).resolve().parent) if self.filename not in ("stdin", "-") else "."
        settings, rules = _rules_for(folder)
        text = "".join(self.lines)
        source = SourceFile(path=self.filename, text=text, encoding="utf-8", raw=b"")
        # One file is all there is: only the rules that can report in it alone, only the
        # functions that can matter to it alone parsed.
        # flake8's own parse of the same lines, and the module name the lint gives the file
        module_name = module_name_for(self.filename)
        names = _beyond_the_file(source, settings, rules, module_name, self.tree)
        project = names.of(source.path) if names is not None else NOTHING_FROM_THE_PROJECT
        file_scout = Scout(text, settings, self.tree, module_name, project.module_bases)
        rules = rules_that_can_report(rules, [text], settings, file_scout)

        def lint(heard: FileProjectNames) -> FileFacts:
            return lint_source(source, settings, rules, alone=file_scout, project=heard)

        # A finding at a custom op a file beside implements in Python is judged by its function.
        facts, _ = project_plan.hearing_ops_alone(source, settings, lint(project), names, lint, self.tree)
        index = ProjectIndex([facts])
        found = list(facts.diagnostics)
        found.extend(d for d in (index.resolve(p) for p in facts.pending) if d is not None)
        for d in sorted(set(found), key=lambda d: (d.line, d.col, d.code)):
            if d.code == "GPU001":
                continue  # flake8 reports syntax errors itself (E999)
            yield d.line, d.col - 1, f"{d.code} {d.message}", type(self)


def _beyond_the_file(
    source: SourceFile, settings: config.Settings, rules: list, module_name: str, tree,
) -> project_plan.ProjectNames | None:
    """What the file hears of the files beside it, as ``sync-lint check`` of it alone would
    (``Linter.lone_scope``, under ``follow-imports = "skip"``): which of its classes' bases are ``nn.Module`` subclasses. None:
    nothing to ask (standard input, or no rule that reports in hot scopes)."""
    if source.path in ("stdin", "-") or not project_plan.may_hear_of_bases(rules, source.text):
        return None
    return project_plan.names_of_a_lone_file(source, settings, module_name, is_package_init(source.path), tree)
