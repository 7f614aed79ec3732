"""The cheap text pre-filter: skip the parse when no enabled rule can match a file.

Each rule lists substrings (``Rule.triggers``) without which it cannot find anything in a file,
nor record a function summary that another file needs. A rule with no triggers always runs.
"""

from __future__ import annotations

from sync_lint.rules.base import Rule


def may_match(rule: Rule, text: str) -> bool:
    triggers = rule.triggers
    return not triggers or any(trigger in text for trigger in triggers)
