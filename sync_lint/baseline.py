"""Adopting sync-lint on a codebase that already has findings: a baseline file.

``sync-lint check --write-baseline FILE`` records today's findings; ``--baseline FILE`` then
reports only findings that are not in it. A finding is matched by its code, its path (relative
to the baseline file's folder) and the text of its flagged line with runs of whitespace
collapsed, never by line number: code added or removed above a finding does not resurrect it,
re-indenting it does not either, while a second copy of a recorded finding is new (entries
carry a count).

The file is JSON, sorted, one entry per (path, code, line text), so that it diffs well in review.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sync_lint.diagnostics import Diagnostic
from sync_lint.pipeline.source import LineIndex, SourceError, read

FORMAT_KEY = "sync-lint-baseline"
FORMAT_VERSION = 1

Key = tuple[str, str, str]  # (path, code, normalised line text)


class BaselineError(Exception):
    """A baseline file that cannot be read, parsed or written; one line, naming the file."""


def normalise(line_text: str) -> str:
    """The line's text with leading/trailing blanks dropped and inner runs of blanks collapsed."""
    return " ".join(line_text.split())


def _relative(path: str, root: Path) -> str:
    """Relative to the baseline's folder (with ``..`` if need be), so that the file works in any
    checkout of the repository; absolute only where no relative path exists (another drive)."""
    absolute = os.path.realpath(path)
    try:
        return Path(os.path.relpath(absolute, root)).as_posix()
    except ValueError:
        return Path(absolute).as_posix()


class _Lines:
    """The text of flagged lines, each file read once (only files that have findings)."""

    def __init__(self) -> None:
        self._files: dict[str, LineIndex | None] = {}

    def text(self, path: str, line: int) -> str:
        if path not in self._files:
            try:
                self._files[path] = LineIndex(read(path).text)
            except SourceError:
                self._files[path] = None
        index = self._files[path]
        if index is None or not 1 <= line <= len(index.starts):
            return ""
        return index.line_text(line)


def _root(baseline_path: str) -> Path:
    return Path(os.path.abspath(baseline_path)).parent.resolve()


def _keys(diagnostics: list[Diagnostic], root: Path) -> list[tuple[Key, Diagnostic]]:
    lines = _Lines()
    keyed = []
    for d in diagnostics:
        if d.is_tool_error:
            continue  # a file that could not be checked is never "known": it must fail the run
        keyed.append(((_relative(d.path, root), d.code, normalise(lines.text(d.path, d.line))), d))
    return keyed


@dataclass(frozen=True)
class Baseline:
    path: str
    counts: Counter  # Key -> how many findings it stands for

    @property
    def root(self) -> Path:
        return _root(self.path)

    def total(self) -> int:
        return sum(self.counts.values())


def load(path: str) -> Baseline:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such file (create it with --write-baseline {path})") from None
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise BaselineError(f"{path}: not a sync-lint baseline (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}: not a sync-lint baseline (invalid JSON at line {exc.lineno})") from None
    if not isinstance(data, dict) or FORMAT_KEY not in data:
        raise BaselineError(f"{path}: not a sync-lint baseline (no `{FORMAT_KEY}` key)")
    if data[FORMAT_KEY] != FORMAT_VERSION:
        raise BaselineError(f"{path}: unsupported baseline version {data[FORMAT_KEY]!r} (expected {FORMAT_VERSION})")
    entries = data.get("findings")
    if not isinstance(entries, list):
        raise BaselineError(f"{path}: not a sync-lint baseline (`findings` must be a list)")
    counts: Counter = Counter()
    for number, entry in enumerate(entries, start=1):
        if not (
            isinstance(entry, dict)
            and all(isinstance(entry.get(key), str) for key in ("path", "code", "source"))
            and isinstance(entry.get("count", 1), int)
            and not isinstance(entry.get("count", 1), bool)
            and entry.get("count", 1) >= 1
        ):
            raise BaselineError(
                f"{path}: invalid entry {number} in `findings` (needs string path, code, source and a count >= 1)"
            )
        counts[(entry["path"], entry["code"], entry["source"])] += entry.get("count", 1)
    return Baseline(path=path, counts=counts)


def write(path: str, diagnostics: list[Diagnostic]) -> int:
    """Record ``diagnostics`` (tool errors excepted); return how many were recorded."""
    counts = Counter(key for key, _ in _keys(diagnostics, _root(path)))
    entries = [
        {"path": p, "code": code, "source": source, "count": count}
        for (p, code, source), count in sorted(counts.items())
    ]
    text = json.dumps({FORMAT_KEY: FORMAT_VERSION, "findings": entries}, indent=2, ensure_ascii=False) + "\n"
    folder = os.path.dirname(os.path.abspath(path))
    try:
        handle, temp = tempfile.mkstemp(dir=folder, prefix=".sync-lint-baseline-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
                out.write(text)
            os.replace(temp, path)
        except BaseException:
            if os.path.exists(temp):
                os.unlink(temp)
            raise
    except OSError as exc:
        raise BaselineError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return sum(counts.values())


@dataclass(frozen=True)
class Filtered:
    new: list[Diagnostic]  # to report: not in the baseline (and every tool error)
    known: int  # findings the baseline accounted for
    gone: int  # baseline entries no current finding matched (fixed since: refresh the baseline)


def filter_new(diagnostics: list[Diagnostic], baseline: Baseline, checked: list[str] | None = None) -> Filtered:
    """Drop findings the baseline records, as many of each as it counts (first ones first).

    ``checked``: the files this run checked; entries of other files (a pre-commit run sees only
    the changed files) are not counted as gone.
    """
    budget = Counter(baseline.counts)
    keyed = {id(d): key for key, d in _keys(diagnostics, baseline.root)}
    new: list[Diagnostic] = []
    known = 0
    for d in sorted(diagnostics, key=Diagnostic.sort_key):
        key = keyed.get(id(d))
        if key is not None and budget[key] > 0:
            budget[key] -= 1
            known += 1
        else:
            new.append(d)
    if checked is not None:
        root = baseline.root
        seen = {_relative(path, root) for path in checked}
        gone = sum(count for key, count in budget.items() if key[0] in seen)
    else:
        gone = sum(budget.values())
    return Filtered(new=new, known=known, gone=gone)
