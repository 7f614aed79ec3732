"""``path:line:col: CODE [*] message``, as flake8 and ruff print it (``[*]``: fixable)."""

from __future__ import annotations

from collections import Counter

from sync_lint.diagnostics import Diagnostic


def fixable(diagnostic: Diagnostic, unsafe: bool) -> bool:
    fix = diagnostic.fix
    return fix is not None and (fix.applicability == "safe" or unsafe)


def render(diagnostics: list[Diagnostic], unsafe: bool = False) -> str:
    lines = []
    for d in diagnostics:
        marker = " [*]" if fixable(d, unsafe) else ""
        lines.append(f"{d.path}:{d.line}:{d.col}: {d.code}{marker} {d.message}")
    return "".join(line + "\n" for line in lines)


def statistics(diagnostics: list[Diagnostic], unsafe: bool = False) -> str:
    from sync_lint.rules import rule_by_code

    counts = Counter(d.code for d in diagnostics)
    fixables = Counter(d.code for d in diagnostics if fixable(d, unsafe))
    rows = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        rule = rule_by_code(code)
        name = rule.name if rule else ""
        marker = "[*]" if fixables[code] == count else "[-]" if fixables[code] else "   "
        rows.append(f"{count:5d}\t{code}\t{marker} {name}")
    return "".join(row + "\n" for row in rows)
