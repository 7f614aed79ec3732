"""JSON, with the fields ruff users script against."""

from __future__ import annotations

import json

from sync_lint.diagnostics import Diagnostic
from sync_lint.report.positions import location


def as_dict(d: Diagnostic) -> dict:
    from sync_lint.rules import rule_by_code

    rule = rule_by_code(d.code)
    fix = None
    if d.fix is not None:
        fix = {
            "applicability": d.fix.applicability,
            "message": d.fix.message,
            "edits": [
                {
                    "content": edit.content,
                    "location": location(d.path, edit.start),
                    "end_location": location(d.path, edit.end),
                }
                for edit in d.fix.edits
            ],
        }
    return {
        "code": d.code,
        "name": rule.name if rule else None,
        "message": d.message,
        "filename": d.path,
        "location": {"row": d.line, "column": d.col},
        "end_location": {"row": d.end_line, "column": d.end_col},
        "fix": fix,
        "url": rule.url() if rule else None,
        "noqa_row": d.line,
    }


def render(diagnostics: list[Diagnostic], unsafe: bool = False) -> str:
    return json.dumps([as_dict(d) for d in diagnostics], indent=2) + "\n"
