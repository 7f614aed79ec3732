"""A cache of ``FileFacts`` (and outlines) keyed by file path, module name and content, tool
version and effective config; and of the project plan of a whole run, keyed by all of those for
every file of the run (``Cache.whole_run``).

Cross-file resolution is not cached: it is redone each run from the cached facts of every
file, so that a change in one file is seen by the others.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

from sync_lint import __version__
from sync_lint.config import Settings
from sync_lint.pipeline.lint_file import FileFacts, module_name_for, tool_diagnostic
from sync_lint.pipeline.profile import span
from sync_lint.pipeline.source import SourceError, SourceFile, decode

T = TypeVar("T")


def _error_facts(path: str, error: SourceError) -> FileFacts:
    return FileFacts(path=path, diagnostics=[tool_diagnostic(path, error.code, error.message, error.line)])


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """A hash of sync-lint's own source, so that an edited rule never reads stale entries."""
    digest = hashlib.blake2b(digest_size=16)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder, _, names in sorted(os.walk(package)):
        for name in sorted(names):
            if name.endswith(".py"):
                with open(os.path.join(folder, name), "rb") as handle:
                    digest.update(name.encode() + handle.read())
    return digest.hexdigest()


class Cache:
    def __init__(self, folder: str, settings: Settings, enabled: list[str]) -> None:
        self.folder = folder
        self.salt = f"{__version__}|{_code_fingerprint()}|{settings.fingerprint()}|{','.join(enabled)}".encode()

    def _entry(self, path: str, raw: bytes, variant: tuple) -> str:
        digest = hashlib.blake2b(self.salt + b"\0" + os.path.abspath(path).encode() + b"\0" + raw, digest_size=20)
        digest.update(repr(variant).encode())  # what the facts depend on besides the file
        key = digest.hexdigest()
        return os.path.join(self.folder, key[:2], key)

    def lint_path(
        self, path: str, lint: Callable[[SourceFile], T], variant: tuple, source: SourceFile | None = None,
        on_error: Callable[[str, SourceError], T] | None = None,
    ) -> T:
        """Cached facts of ``path`` (or its outline), or ``lint``'s; ``source``: the file as the
        run already read it. ``on_error``: the result for a file that cannot be read or
        decoded (default: facts reporting it)."""
        on_error = on_error or _error_facts
        with span("cache lookup"):
            if source is not None:
                raw = source.raw
            else:
                try:
                    with open(path, "rb") as handle:
                        raw = handle.read()
                except OSError as exc:
                    return on_error(path, SourceError("GPU003", f"cannot read file: {exc.strerror}"))
            entry = self._entry(path, raw, variant)
            try:
                with open(entry, "rb") as handle:
                    return pickle.load(handle)
            except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
                pass  # a miss, or an entry from an incompatible version: lint again
        try:
            if source is None:
                with span("read and decode"):
                    source = decode(path, raw)
            facts = lint(source)
        except SourceError as exc:
            facts = on_error(path, exc)
        with span("cache store"):
            self._store(entry, facts)
        return facts

    def whole_run(
        self, paths: list[str], variant: tuple, make: Callable[[], T], sources: dict[str, SourceFile] | None = None,
    ) -> T:
        """A result of the whole run's files together (the project plan), keyed by every path,
        its module name and its content: any change to any of them makes it again. ``sources``:
        the files the run already read. A file that cannot be read is not cached around."""
        with span("cache lookup"):
            digest = hashlib.blake2b(self.salt + b"\0run\0" + repr(variant).encode(), digest_size=20)
            try:
                for path in paths:
                    source = sources.get(path) if sources else None
                    if source is not None:
                        raw = source.raw
                    else:
                        with open(path, "rb") as handle:
                            raw = handle.read()
                    digest.update(f"\0{os.path.abspath(path)}\0{module_name_for(path)}\0{len(raw)}\0".encode())
                    digest.update(raw)
            except OSError:
                return make()
            key = digest.hexdigest()
            entry = os.path.join(self.folder, key[:2], "run-" + key)
            try:
                with open(entry, "rb") as handle:
                    return pickle.load(handle)
            except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
                pass
        found = make()
        with span("cache store"):
            self._store(entry, found)
        return found

    def _store(self, entry: str, facts) -> None:
        # Written atomically so that a parallel run never reads half an entry; a failure to
        # write the cache never fails the run.
        try:
            if not os.path.isdir(self.folder):
                os.makedirs(self.folder, exist_ok=True)
                # As ruff and pytest do: the cache never shows up as untracked files.
                with open(os.path.join(self.folder, ".gitignore"), "w") as ignore:
                    ignore.write("*\n")
            os.makedirs(os.path.dirname(entry), exist_ok=True)
            handle, temp = tempfile.mkstemp(dir=os.path.dirname(entry))
            with os.fdopen(handle, "wb") as out:
                pickle.dump(facts, out, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temp, entry)
        except OSError:
            pass
