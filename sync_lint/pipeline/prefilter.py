"""The cheap text pre-filter: skip the parse when no enabled rule can match a file, and
parse only the units of a file that can matter (``units``).

Each rule lists substrings or regular expressions (``Rule.triggers``) without which it cannot
find anything in a file, nor record a function summary that another file needs. A rule with no triggers always runs.
"""

from __future__ import annotations

import re
from functools import lru_cache

from sync_lint.pipeline.source import split_lines
from sync_lint.pipeline.units import MaskPlan
from sync_lint.rules.base import Rule


def may_match(rule: Rule, text: str, alone: bool = False) -> bool:
    """Whether ``rule`` can find anything in ``text``; ``alone``: in a file checked on its own,
    without other files' summaries (``Rule.alone_triggers``)."""
    if not _any_in(rule.triggers, text):
        return False
    return not alone or _any_in(rule.alone_triggers, text)


def rules_that_can_report(rules: list[Rule], texts: list[str]) -> list[Rule]:
    """The rules that can find anything in a run of just these files. A rule reports only in a
    file it may match alone, or through a summary that such a file records (a kernel wrapper's
    contiguity check lives where a sink word is), so a rule that no file of the run may match
    alone finds nothing anywhere in it: a small run (pre-commit's staged files, an editor's
    file) skips it, and most often every parse."""
    return [rule for rule in rules if any(may_match(rule, text, alone=True) for text in texts)]


def _any_in(triggers: tuple[str | re.Pattern, ...] | None, text: str) -> bool:
    return not triggers or any(
        trigger in text if type(trigger) is str else trigger.search(text) is not None for trigger in triggers
    )


@lru_cache(maxsize=64)
def _trigger_pattern(triggers: tuple[str | re.Pattern, ...]) -> re.Pattern:
    sources = {re.escape(t) if isinstance(t, str) else t.pattern for t in triggers}
    return re.compile("|".join(sorted(sources, key=len, reverse=True)))


def unit_plan(active: list[Rule], text: str) -> MaskPlan | None:
    """The function-level plan for a file, or None when a rule needs every unit (no triggers)."""
    if any(not rule.triggers for rule in active):
        return None
    triggers = tuple(t for rule in active for t in (rule.triggers if rule.unit_triggers is None else rule.unit_triggers))
    return MaskPlan(text, split_lines(text), _trigger_pattern(triggers))
