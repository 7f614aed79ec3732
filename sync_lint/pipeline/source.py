"""Reading a file into text exactly as Python would, remembering how to write it back."""

from __future__ import annotations

import bisect
import errno
import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# What ``str.splitlines`` also splits at, and Python's tokenizer does not.
_NOT_A_LINE_BREAK = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


class SourceError(Exception):
    """A file that cannot be read or decoded; carries the 1-based line to report."""

    def __init__(self, code: str, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.line = line


@dataclass(frozen=True)
class SourceFile:
    path: str
    text: str
    encoding: str  # as tokenize names it: "utf-8", "utf-8-sig" (a BOM), "latin-1", ...
    raw: bytes  # the bytes read, to detect a file that changed while we worked on it

    def encode(self, text: str) -> bytes:
        return text.encode(self.encoding)


def decode(path: str, raw: bytes) -> SourceFile:
    """Decode honouring a BOM and a PEP 263 coding line; raise SourceError otherwise."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:  # unknown codec, or a BOM contradicting the coding line
        try:  # no usable coding line: say where the bytes stop being UTF-8
            raw.decode("utf-8")
        except UnicodeDecodeError as decode_error:
            line = raw[: decode_error.start].count(b"\n") + 1
            raise SourceError(
                "GPU002", f"cannot decode file as utf-8: invalid byte 0x{raw[decode_error.start]:02x}", line
            ) from None
        raise SourceError("GPU002", f"cannot decode file: {exc.msg}", getattr(exc, "lineno", 1) or 1) from None
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SourceError(
            "GPU002", f"cannot decode file as {encoding}: invalid byte 0x{raw[exc.start]:02x}", line
        ) from None
    # For "utf-8-sig" decoding drops the BOM and encoding with the same codec restores it.
    return SourceFile(path=path, text=text, encoding=encoding, raw=raw)


def read(path: str) -> SourceFile:
    try:
        raw = read_bytes(path)
    except OSError as exc:
        raise SourceError("GPU003", f"cannot read file: {exc.strerror or exc}") from None
    return decode(path, raw)


def read_bytes(path: str) -> bytes:
    """A file's bytes; OSError where it cannot be read or is no regular file: a read of a FIFO
    named ``*.py`` would wait for a writer for ever, and one of a device might never end. Opened
    without blocking, for a FIFO's open waits for a writer too (no effect on a regular file)."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with open(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        return handle.read()


def split_lines(text: str) -> list[str]:
    """Lines with their endings, splitting only where Python's tokenizer does (not at \\f, \\x1c...)."""
    if _NOT_A_LINE_BREAK.search(text) is None:
        return text.splitlines(keepends=True)  # the same lines, split in C: most files
    lines = []
    start = 0
    for match in _LINE_BREAK.finditer(text):
        lines.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


class LineIndex:
    """Converts between 1-based (line, column) positions and offsets into a text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text)]

    def offset(self, line: int, col: int) -> int:
        """``col`` is 0-based, as libcst reports it."""
        return self.starts[line - 1] + col

    def line_text(self, line: int) -> str:
        start = self.starts[line - 1]
        end = self.starts[line] if line < len(self.starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def position(self, offset: int) -> tuple[int, int]:
        """(1-based line, 0-based column) of an offset."""
        line = bisect.bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1]
