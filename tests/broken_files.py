"""Files a run reads beside the ones it checks, broken each way a user's tree may break them."""

from __future__ import annotations

from pathlib import Path

# A syntax error, bytes that are not UTF-8, a symlink to itself, a folder named like the module.
BROKEN_KINDS = ("syntax", "bytes", "loop", "folder")


def write_broken(path: Path, kind: str, text: str) -> None:
    """``path`` as ``text`` broken the ``kind`` way (``BROKEN_KINDS``); a syntax error is its
    first closing parenthesis left out (``class Layer(nn.Module:``, ``def wait(x:``)."""
    if kind == "syntax":
        path.write_text(text.replace(")", "", 1))
    elif kind == "bytes":
        path.write_bytes(text.encode() + b"\n# \xff\xfe\n")
    elif kind == "loop":
        path.symlink_to(path)
    else:
        path.mkdir()
