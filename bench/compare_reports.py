"""Two JSON reports of ``sync-lint check --output-format json`` compared finding by finding: what a
change to the analyses did to a tree. Run by hand:

    (cd bench/corpus/src/vllm-0.33.0 && ../../../../.venv/bin/sync-lint check . --isolated \
        --no-cache --output-format json -o /tmp/before.json)
    ... change the code, run again into /tmp/after.json ...
    .venv/bin/python bench/compare_reports.py /tmp/before.json /tmp/after.json

A finding is keyed by file, line, column and code. The script prints the counts per rule and of
safe fixes on each side, then each finding only one side has, and each one both have with another
message or fix. It exits 0 when the reports are identical and 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

MESSAGE_SHOWN = 160  # characters of a message printed per finding


def load(path: Path) -> dict[tuple, dict]:
    findings = json.loads(path.read_text())
    return {(f["filename"], f["location"]["row"], f["location"]["column"], f["code"]): f for f in findings}


def summary(findings: dict[tuple, dict]) -> str:
    per_rule = Counter(code for *_, code in findings)
    safe = sum(1 for f in findings.values() if (f.get("fix") or {}).get("applicability") == "safe")
    rules = ", ".join(f"{code} {count}" for code, count in sorted(per_rule.items()))
    return f"{len(findings)} findings ({rules}); {safe} safe fixes"


def where(key: tuple) -> str:
    filename, row, column, code = key
    return f"{filename}:{row}:{column} {code}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    before, after = load(args.before), load(args.after)
    print(f"before: {summary(before)}")
    print(f"after:  {summary(after)}")
    removed = sorted(set(before) - set(after))
    added = sorted(set(after) - set(before))
    changed = sorted(key for key in set(before) & set(after) if before[key] != after[key])
    for sign, keys, side in (("-", removed, before), ("+", added, after)):
        for key in keys:
            print(f"  {sign} {where(key)} {side[key]['message'][:MESSAGE_SHOWN]}")
    for key in changed:
        print(f"  ~ {where(key)}")
        for label, side in (("before", before), ("after", after)):
            fix = side[key].get("fix") or {}
            print(f"      {label}: [{fix.get('applicability', 'no fix')}] {side[key]['message'][:MESSAGE_SHOWN]}")
    identical = not (removed or added or changed)
    print("identical" if identical else f"{len(removed)} removed, {len(added)} added, {len(changed)} changed")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
