"""The rule registry: every rule module is listed here, in code order."""

from __future__ import annotations

import importlib
from functools import cache

from sync_lint.rules.base import Rule

RULE_MODULES = (
    "sync_lint.rules.gpu0xx_tool",
    "sync_lint.rules.gpu201_undeclared_sync_in_hot_path",
    "sync_lint.rules.gpu202_implicit_sync_in_hot_path",
    "sync_lint.rules.gpu203_stale_sync_declaration",
    "sync_lint.rules.gpu204_sync_in_loop",
    "sync_lint.rules.gpu205_blocking_copy_to_gpu_in_hot_path",
    "sync_lint.rules.gpu101_cast_as_contiguity_fix",
    "sync_lint.rules.gpu102_non_contiguous_view_to_kernel",
    "sync_lint.rules.gpu103_contiguity_lost_after_fix",
)


@cache
def all_rules() -> tuple[type[Rule], ...]:
    rules: list[type[Rule]] = []
    for module_name in RULE_MODULES:
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule and value.__module__ == module_name:
                rules.append(value)
    rules.sort(key=lambda rule: rule.code)
    codes = [rule.code for rule in rules]
    assert len(codes) == len(set(codes)), f"duplicate rule codes: {codes}"
    return tuple(rules)


def all_codes() -> list[str]:
    return [rule.code for rule in all_rules()]


def rule_by_code(code: str) -> type[Rule] | None:
    for rule in all_rules():
        if rule.code == code or rule.name == code:
            return rule
    return None
