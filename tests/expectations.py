"""``# expect: CODE[, CODE]`` comments: the findings a fixture or example must produce, by line."""

from __future__ import annotations

import re
from pathlib import Path

_EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>GPU\d{3}(?:\s*,\s*GPU\d{3})*)")


def expected_in_text(text: str) -> set[tuple[int, str]]:
    found = set()
    for number, line in enumerate(text.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            for code in re.findall(r"GPU\d{3}", match.group("codes")):
                found.add((number, code))
    return found


def expected_in_file(path: Path) -> set[tuple[int, str]]:
    return expected_in_text(path.read_text(encoding="utf-8"))
