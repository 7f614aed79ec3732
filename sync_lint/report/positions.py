"""Fix edits hold character offsets; machine formats want line/column. Converting needs the
file's text, read again only for files whose findings carry a fix."""

from __future__ import annotations

from functools import lru_cache

from sync_lint.pipeline.source import LineIndex, SourceError, read


@lru_cache(maxsize=256)
def line_index(path: str) -> LineIndex | None:
    try:
        return LineIndex(read(path).text)
    except SourceError:
        return None


def location(path: str, offset: int) -> dict[str, int]:
    index = line_index(path)
    if index is None:
        return {"row": 1, "column": 1}
    line, col = index.position(offset)
    return {"row": line, "column": col + 1}
