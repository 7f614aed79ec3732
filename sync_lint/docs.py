"""Rule pages, generated from the rules (never written twice): ``sync-lint rule CODE`` prints one,
``python -m sync_lint.docs DIR`` writes ``DIR/<CODE>.md`` for every rule, an index, and
``DIR/settings.md``, every ``[tool.sync-lint]`` key from ``config.OPTIONS``."""

from __future__ import annotations

import json
import os
import sys

from sync_lint.config import OPTIONS
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
    lines += ["", "Every `[tool.sync-lint]` key: [settings.md](settings.md)."]
    return "\n".join(lines) + "\n"


_KIND_NAMES = {list: "list of strings", dict: "table", str: "string", bool: "boolean"}


def toml_value(value) -> str:
    """``value`` as TOML writes it (the types ``config.Option`` allows)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(key)} = {toml_value(item)}" for key, item in value.items()) + " }" if value else "{}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def render_settings() -> str:
    """Each key's type, default (as it would be written in ``pyproject.toml``) and meaning."""
    parts = [
        "# sync-lint settings",
        "",
        "Keys of `[tool.sync-lint]` in the nearest `pyproject.toml`; a key not listed here is an error (exit 2).",
        "",
    ]
    for key, option in OPTIONS.items():
        parts += [f"## `{key}`", "", option.doc, "", f"Type: {_KIND_NAMES[option.kind]}. Default:", "",
                  "```toml", f"{key} = {toml_value(option.default)}", "```", ""]
    return "\n".join(parts)


def generated_pages() -> dict[str, str]:
    pages = {f"{rule.code}.md": render_rule(rule) for rule in all_rules()}
    pages["README.md"] = render_index()
    pages["settings.md"] = render_settings()
    return pages


def write_pages(folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    for name, text in generated_pages().items():
        with open(os.path.join(folder, name), "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)


if __name__ == "__main__":
    write_pages(sys.argv[1] if len(sys.argv) > 1 else "docs/rules")
