"""SARIF 2.1.0, as GitHub code scanning accepts it: relative URIs, rule metadata with help."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from sync_lint import __version__
from sync_lint.diagnostics import Diagnostic

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(path: str) -> str:
    absolute = Path(path).resolve()
    try:
        # A URI reference: spaces and non-ASCII letters percent-encoded, `/` kept.
        return quote(absolute.relative_to(Path.cwd().resolve()).as_posix())
    except ValueError:
        return absolute.as_uri()


def _artifact(path: str) -> dict:
    uri = _uri(path)
    # Relative to the checkout (what code scanning expects); absolute only outside it.
    return {"uri": uri} if uri.startswith("file:") else {"uri": uri, "uriBaseId": "%SRCROOT%"}


def _rule_descriptor(rule) -> dict:
    help_text = f"{rule.what}\n\nWhy: {rule.why}\n\nFix: {rule.fix_safety}"
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.what},
        "help": {"text": help_text, "markdown": help_text},
        "helpUri": rule.url(),
        "defaultConfiguration": {"level": "error" if rule.tool_rule and rule.code != "GPU010" else "warning"},
        "properties": {"tags": ["gpu", "correctness" if rule.code.startswith("GPU1") else "performance"]},
    }


def render(diagnostics: list[Diagnostic], unsafe: bool = False) -> str:
    from sync_lint.rules import all_rules

    rules = list(all_rules())
    position = {rule.code: i for i, rule in enumerate(rules)}
    results = []
    for d in diagnostics:
        results.append(
            {
                "ruleId": d.code,
                "ruleIndex": position[d.code],
                "level": "error" if d.is_tool_error else "warning",
                "message": {"text": d.message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": _artifact(d.path),
                            "region": {
                                "startLine": d.line,
                                "startColumn": d.col,
                                "endLine": d.end_line,
                                "endColumn": max(d.end_col, 1),
                            },
                        }
                    }
                ],
            }
        )
    log = {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "sync-lint",
                        "version": __version__,
                        "informationUri": "https://github.com/sync-lint/sync-lint",
                        "rules": [_rule_descriptor(rule) for rule in rules],
                    }
                },
                "results": results,
                "columnKind": "unicodeCodePoints",
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"
