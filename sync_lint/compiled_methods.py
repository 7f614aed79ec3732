"""Dataclass methods compiled once and kept between runs, as Python keeps bytecode.

Python 3.10-3.12 write each dataclass's ``__init__``, ``__eq__``, ``__repr__`` ... as source text
and compile it at every import, one ``exec`` each (3.13, one per class). libcst's node classes
are dataclasses: compiling their methods is about 70 ms of libcst's 135 ms import on this
machine, which a run that parses pays before its first parse; sync-lint's own (about 30) take
about 12 ms of each run's start. Inside ``compiled_methods(name)``, the ``exec`` that ``dataclasses``
calls is one that looks the text up first, among the code objects an earlier run compiled from
the same text, and compiles only what it has not seen; at the end, new code is written to a file
named by the interpreter's cache tag in the user's cache folder (``$XDG_CACHE_HOME/sync-lint``,
by default ``~/.cache/sync-lint``), or under ``sys.pycache_prefix`` where Python is told to keep
its bytecode apart. Not beside this package's bytecode: ``pip uninstall`` removes only the files
it installed, and an installed package's folder may not be writable. It is written as bytecode
is, though: not under ``PYTHONDONTWRITEBYTECODE`` (or ``-B``), and a folder that cannot be
written only costs the compile.

A text compiles to the same code object in every run of one interpreter (the key is the text
itself, with the ``__future__`` flags the caller's code compiles under), so a class made from
the file is the class made without it. A file that is unreadable, damaged (its checksum) or from
another interpreter (its magic number) is ignored and written again.
"""

from __future__ import annotations
import __future__

import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
import tempfile
import zlib
from collections.abc import Iterator

_FORMAT = b"sync-lint dataclass methods 1\n" + importlib.util.MAGIC_NUMBER
# The flags an exec'd text inherits from the code that calls exec (``dataclasses``'s own):
# part of the key, so that a text is never run as compiled under other ``__future__`` imports.
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag
# Above this many entries a file is written again with only what its last run used: texts
# change only when Python, libcst or sync-lint do, so the file would otherwise only grow.
_MOST_ENTRIES = 4000


class _Codes:
    """The code objects of one file: those read (``known``), those used, those compiled now."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.known: dict[tuple[int, str], object] = _read(path) if path else {}
        self.used: set[tuple[int, str]] = set()
        self.compiled: dict[tuple[int, str], object] = {}

    def exec(self, source, globals=None, locals=None, /):
        if not isinstance(source, str):
            return builtins.exec(source, globals, locals)  # noqa: S102  (dataclasses' own exec, passed on)
        flags = sys._getframe(1).f_code.co_flags & _FUTURE_FLAGS
        key = (flags, source)
        code = self.known.get(key) or self.compiled.get(key)
        if code is None:
            code = self.compiled[key] = compile(source, "<string>", "exec", flags=flags, dont_inherit=True)
        else:
            self.used.add(key)
        return builtins.exec(code, globals, locals)  # noqa: S102  (the code dataclasses asked for)

    def save(self) -> None:
        if not self.compiled or self.path is None or sys.dont_write_bytecode:
            return
        kept = self.known if len(self.known) + len(self.compiled) <= _MOST_ENTRIES else {
            key: self.known[key] for key in self.used
        }
        _write(self.path, {**kept, **self.compiled})


@contextlib.contextmanager
def compiled_methods(name: str, folder: str | None = None) -> Iterator[_Codes | None]:
    """Dataclasses made inside reuse the methods compiled by an earlier run that made them under
    the same ``name`` (one file each: the run's start and the lint worker's parser import make
    different classes). ``folder``: where the file is (default: ``_default_folder``).
    A block inside another (the lint worker's, forked inside the command's) uses its own file
    until it ends. Yields the file's codes, or None where something else put an ``exec`` in
    ``dataclasses`` (then nothing is reused: it is theirs)."""
    outer = vars(dataclasses).get("exec")
    if outer is not None and not isinstance(getattr(outer, "__self__", None), _Codes):
        yield None
        return
    codes = _Codes(_path(name, folder))
    dataclasses.exec = codes.exec
    try:
        yield codes
    finally:
        if outer is None:
            del dataclasses.exec
        else:
            dataclasses.exec = outer
        codes.save()


def _path(name: str, folder: str | None) -> str | None:
    tag = sys.implementation.cache_tag
    if tag is None:  # an interpreter that keeps no bytecode
        return None
    if folder is None:
        folder = _default_folder()
        if folder is None:
            return None
    optimized = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
    return os.path.join(folder, f"dataclass-methods.{name}.{tag}{optimized}.marshal")


def _default_folder() -> str | None:
    """None: no home to keep it in (a user with no ``HOME`` and no entry in the password file,
    as in some containers), where ``~`` would stay a folder named ``~`` under the working one."""
    if sys.pycache_prefix:
        return os.path.join(sys.pycache_prefix, "sync-lint")
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return os.path.join(os.environ["LOCALAPPDATA"], "sync-lint", "Cache")
    if os.environ.get("XDG_CACHE_HOME"):
        return os.path.join(os.environ["XDG_CACHE_HOME"], "sync-lint")
    home = os.path.expanduser("~")
    return None if home == "~" else os.path.join(home, ".cache", "sync-lint")


def _read(path: str) -> dict:
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError:
        return {}
    head = len(_FORMAT)
    if data[:head] != _FORMAT or int.from_bytes(data[head:head + 4], "little") != zlib.crc32(data[head + 4:]):
        return {}
    try:
        codes = marshal.loads(data[head + 4:])
    except (EOFError, ValueError, TypeError):
        return {}
    return codes if isinstance(codes, dict) else {}


def _write(path: str, codes: dict) -> None:
    payload = marshal.dumps(codes)
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".dataclass-methods-")
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(_FORMAT + zlib.crc32(payload).to_bytes(4, "little") + payload)
            os.replace(temporary, path)  # whole or not at all: runs at once each write their own
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        pass  # a folder this user cannot write: the next run compiles again, as Python does
