"""Every rule's VALID and INVALID examples are tests: the docs cannot drift from the behaviour."""

from __future__ import annotations

import pytest
from expectations import expected_in_text

from sync_lint.api import lint_text
from sync_lint.rules import all_rules

CHECKED_RULES = [rule for rule in all_rules() if not rule.tool_rule]
# Options the examples may rely on: the fixable ones show their fix.
EXAMPLE_OPTIONS = {"sync_guard": "reference_kernels.sync_check:gpu_sync_allowed", "preview": True}


def _cases(kind: str):
    for rule in CHECKED_RULES:
        for number, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.code}-{kind}-{number}")


def test_every_rule_has_examples_and_docs():
    for rule in all_rules():
        assert rule.code[:3] == "GPU" and rule.code[3:].isdigit() and len(rule.code) == 6, rule.code
        assert rule.name == rule.name.lower() and " " not in rule.name, rule.name
        for part in ("summary", "what", "why", "example", "fix_safety"):
            assert getattr(rule, part).strip(), f"{rule.code} lacks {part}"
    for rule in CHECKED_RULES:
        assert rule.valid and rule.invalid, f"{rule.code} needs VALID and INVALID examples"


@pytest.mark.parametrize(("rule", "example"), list(_cases("valid")))
def test_valid_example_is_silent(rule, example):
    found = [d for d in lint_text(example, select=[rule.code], **EXAMPLE_OPTIONS) if d.code == rule.code]
    assert found == [], f"{rule.code} flagged a VALID example: {found}"


@pytest.mark.parametrize(("rule", "example"), list(_cases("invalid")))
def test_invalid_example_is_flagged_on_marked_lines(rule, example):
    expected = {line for line, code in expected_in_text(example) if code == rule.code}
    assert expected, f"{rule.code}: an INVALID example must mark its lines with `# expect: {rule.code}`"
    found = {d.line for d in lint_text(example, select=[rule.code], **EXAMPLE_OPTIONS) if d.code == rule.code}
    assert found == expected


@pytest.mark.parametrize(("rule", "example"), [case for case in _cases("invalid") if case.values[0].reports_only_in_functions])
def test_a_rule_reporting_only_in_functions_does(rule, example):
    """``Rule.reports_only_in_functions`` lets a run of many files skip the parse of a file
    none of whose functions matter: each finding must be inside a function."""
    import ast

    functions = [
        (node.lineno, node.end_lineno) for node in ast.walk(ast.parse(example))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]  # fmt: skip
    found = [d for d in lint_text(example, select=[rule.code], **EXAMPLE_OPTIONS) if d.code == rule.code]
    assert found
    for d in found:
        assert any(first <= d.line <= last for first, last in functions), d
