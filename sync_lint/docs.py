"""Rule pages, generated from the rules (never written twice): ``sync-lint rule CODE`` prints one,
``python -m sync_lint.docs DIR`` writes ``DIR/<CODE>.md`` for every rule plus an index."""

from __future__ import annotations

import os
import sys

from sync_lint.rules import all_rules
from sync_lint.rules.base import Rule


def _strip_expect(example: str) -> str:
    # ``# expect: CODE`` marks test expectations; on the page a plain marker reads better.
    import re

    return re.sub(r"#\s*expect:\s*([A-Z0-9, ]+)", lambda m: f"# {m.group(1).strip()}", example).strip("\n")


def render_rule(rule: type[Rule]) -> str:
    status = "preview" if rule.preview else ("tool diagnostic" if rule.tool_rule else "stable, on by default")
    fix = {"safe": "safe fix", "unsafe": "unsafe fix (`--unsafe-fixes`)", None: "no fix"}[rule.fix_applicability]
    parts = [
        f"# {rule.code} {rule.name}",
        "",
        f"{rule.summary}",
        "",
        f"Status: {status}. Fix: {fix}.",
        "",
        "## What it finds",
        "",
        rule.what.strip(),
        "",
        "## Why it is a bug",
        "",
        rule.why.strip(),
        "",
        "## Example",
        "",
        "```python",
        rule.example.strip("\n"),
        "```",
        "",
        "## Fix safety",
        "",
        rule.fix_safety.strip(),
        "",
    ]
    if rule.invalid:
        parts += ["## Flagged", ""]
        for example in rule.invalid:
            parts += ["```python", _strip_expect(example), "```", ""]
    if rule.valid:
        parts += ["## Not flagged", ""]
        for example in rule.valid:
            parts += ["```python", example.strip("\n"), "```", ""]
    return "\n".join(parts)


def render_index() -> str:
    lines = ["# sync-lint rules", "", "| code | name | summary | status |", "| --- | --- | --- | --- |"]
    for rule in all_rules():
        status = "preview" if rule.preview else ("tool" if rule.tool_rule else "default")
        lines.append(f"| [{rule.code}]({rule.code}.md) | {rule.name} | {rule.summary} | {status} |")
    return "\n".join(lines) + "\n"


def generated_pages() -> dict[str, str]:
    pages = {f"{rule.code}.md": render_rule(rule) for rule in all_rules()}
    pages["README.md"] = render_index()
    return pages


def write_pages(folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    for name, text in generated_pages().items():
        with open(os.path.join(folder, name), "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)


if __name__ == "__main__":
    write_pages(sys.argv[1] if len(sys.argv) > 1 else "docs/rules")
