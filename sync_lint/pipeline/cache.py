"""A cache of ``FileFacts`` (and outlines) keyed by file path, module name and content, tool
version and effective config; of the project plan of a whole run, keyed by all of those for
every file of the run (``Cache.whole_run``); and of what runs share whatever their files, keyed
by tool version and config alone (``Cache.load_shared``: which files hold a custom op's
registration word, ``project_plan.RegistrationWords``).

Cross-file resolution is not cached: it is redone each run from the cached facts of every
file, so that a change in one file is seen by the others.

Facts also depend on what a run makes them with: the rules it runs and the functions its plan
keeps of the file. A run of a few files reads the files beyond it for their summaries alone, and
the facts a run of the whole tree (or of other files) made of one, under more rules and keeping
more, hold all it reads there: a ledger per text lists what each lint of it was made with
(``Wider``), and such a run reads facts listed there before it lints the file again.

Entries are never updated, only added: each edit of a file, each new version of the tool or of
the configuration adds its own. A run of a project checked on every commit would grow the cache
without end, so the runner prunes it (``Cache.prune``): what no run has read or written for
``MAX_AGE_SECONDS``, and all but the newest ``KEEP_RUN_PLANS`` plans (one is made for each state
of a tree, and serves only that state: a branch checked out again). A read refreshes an entry's
time (at most once a day per entry), so what is still in use stays.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from sync_lint import __version__
from sync_lint.config import Settings
from sync_lint.pipeline.lint_file import FileFacts, module_name_for, tool_diagnostic
from sync_lint.pipeline.profile import span
from sync_lint.pipeline.source import SourceError, SourceFile, decode, read_bytes

T = TypeVar("T")

MAX_AGE_SECONDS = 14 * 24 * 3600
KEEP_RUN_PLANS = 8  # a vLLM plan is about 2.6 MB
PRUNE_EVERY_SECONDS = 3600  # pruning lists every entry: not on every run
_REFRESH_AFTER_SECONDS = 24 * 3600  # a read that finds an entry older refreshes its time
_ORPHAN_AFTER_SECONDS = 3600  # a half-written entry (``_store``'s temporary file) of a killed run
_RUN_PREFIX = "run-"
_PRUNED_MARKER = ".last-pruned"
# The standard tag that tells backup and archiving tools a folder holds only a cache.
_CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by sync-lint.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
_OWN_FILES = (".gitignore", "CACHEDIR.TAG", _PRUNED_MARKER)
# The facts of one text a ledger lists (``Wider``): each different run of few files adds its own.
_LEDGER_LENGTH = 8
_HEX = frozenset("0123456789abcdef")


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


@dataclass(frozen=True)
class Wider:
    """What a lint's facts are made with, beyond what its cache key holds, and what facts of the
    same file made with more may serve it. A run of few files lints the files beyond it keeping
    only the functions it reaches, under the rules it needs; a run of the whole tree (or another
    small run) linted them keeping more, and facts that hold more hold all a run reads of them
    (``Linter.lint_one``). Each lint records what it was made with in a ledger of the file's
    text and ``variant``; a lint with ``serves`` reads the first facts listed there it accepts.

    ``variant``: what the facts depend on besides the text and what they are made with (their
    facts differ for any change of it); ``made_with``: recorded for later runs; ``serves``:
    whether facts made with such a ``made_with`` hold all of this lint's (None: look for none)."""

    variant: tuple
    made_with: tuple
    serves: Callable[[tuple], bool] | None = None


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
        on_error: Callable[[str, SourceError], T] | None = None, kind: type = FileFacts,
        wider: Wider | None = None,
    ) -> T:
        """Cached facts of ``path`` (or its outline: ``kind``), or ``lint``'s; ``source``: the
        file as the run already read it. ``on_error``: the result for a file that cannot be read
        or decoded (default: facts reporting it). ``wider``: facts made with more may serve, and
        what this lint makes is recorded for later runs (``Wider``)."""
        on_error = on_error or _error_facts
        with span("cache lookup"):
            if source is not None:
                raw = source.raw
            else:
                try:
                    raw = read_bytes(path)
                except OSError as exc:
                    return on_error(path, SourceError("GPU003", f"cannot read file: {exc.strerror}"))
            entry, found = self._find(path, raw, variant, kind, wider)
            if found is not None:
                return found
        try:
            if source is None:
                with span("read and decode"):
                    source = decode(path, raw)
            facts = lint(source)
        except SourceError as exc:
            facts = on_error(path, exc)
        with span("cache store"):
            self._store(entry, facts)
            if wider is not None:
                self._record(path, raw, wider, entry)
        return facts

    def lookup(self, path: str, variant: tuple, kind: type = FileFacts, wider: Wider | None = None):
        """What ``lint_path`` would find in the cache for ``path``, or None (a miss, or a file it
        cannot read: ``lint_path`` reports that): a run looks its files up first and hands only
        the misses to its workers (``Linter.cached_first``)."""
        with span("cache lookup"):
            try:
                raw = read_bytes(path)
            except OSError:
                return None
            return self._find(path, raw, variant, kind, wider)[1]

    def _find(self, path: str, raw: bytes, variant: tuple, kind: type, wider: Wider | None) -> tuple[str, object]:
        """The entry of ``path``'s text under ``variant``, and what it holds (or what facts made
        with more hold, ``wider``), else None."""
        entry = self._entry(path, raw, variant)
        found = _load(entry, kind)
        if found is None and wider is not None and wider.serves is not None:
            found = self._served_wider(path, raw, wider, kind)
        return entry, found

    def _ledger(self, path: str, raw: bytes, wider: Wider) -> str:
        return self._entry(path, raw, ("made with", *wider.variant))

    def _served_wider(self, path: str, raw: bytes, wider: Wider, kind: type):
        assert wider.serves is not None
        for made_with, name in _ledger_items(self._ledger(path, raw, wider)):
            if wider.serves(made_with):
                found = _load(os.path.join(self.folder, name[:2], name), kind)
                if found is not None:  # else pruned since, or damaged: a miss
                    return found
        return None

    def _record(self, path: str, raw: bytes, wider: Wider, entry: str) -> None:
        """Lists ``entry`` in its text's ledger. Two runs recording at once may lose one of their
        records: a later miss, never a wrong answer."""
        ledger = self._ledger(path, raw, wider)
        name = os.path.basename(entry)
        listed = [item for item in _ledger_items(ledger) if item[1] != name]
        self._store(ledger, [*listed[-(_LEDGER_LENGTH - 1):], (wider.made_with, name)])

    def load_shared(self, name: str, kind: type):
        """A result every run of this tool version and configuration shares (``name``: what it
        is; a ``kind``), or None."""
        return _load(self._shared(name), kind)

    def store_shared(self, name: str, value) -> None:
        self._store(self._shared(name), value)

    def _shared(self, name: str) -> str:
        key = hashlib.blake2b(self.salt + b"\0shared\0" + name.encode(), digest_size=20).hexdigest()
        return os.path.join(self.folder, key[:2], key)

    def whole_run(
        self, paths: list[str], variant: tuple, make: Callable[[], T], kind: type,
        sources: dict[str, SourceFile] | None = None, still_valid: Callable[[T], bool] | None = None,
    ) -> T:
        """A result of the whole run's files together (the project plan, a ``kind``), keyed by
        every path, its module name and its content: any change to any of them makes it again.
        ``sources``: the files the run already read. A file that cannot be read is not cached
        around. ``still_valid``: whether a result found still holds, for what else it rests
        on (the files outside the run a plan read): made again and stored where not."""
        with span("cache lookup"):
            digest = hashlib.blake2b(self.salt + b"\0run\0" + repr(variant).encode(), digest_size=20)
            try:
                for path in paths:
                    source = sources.get(path) if sources else None
                    if source is not None:
                        raw = source.raw
                    else:
                        raw = read_bytes(path)
                    digest.update(f"\0{os.path.abspath(path)}\0{module_name_for(path)}\0{len(raw)}\0".encode())
                    digest.update(raw)
            except OSError:
                return make()
            key = digest.hexdigest()
            entry = os.path.join(self.folder, key[:2], _RUN_PREFIX + key)
            found = _load(entry, kind)
            if found is not None and (still_valid is None or still_valid(found)):
                return found
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
                # As ruff and pytest do: the cache never shows up as untracked files, nor in backups.
                with open(os.path.join(self.folder, ".gitignore"), "w") as ignore:
                    ignore.write("*\n")
                with open(os.path.join(self.folder, "CACHEDIR.TAG"), "w") as tag:
                    tag.write(_CACHEDIR_TAG)
            os.makedirs(os.path.dirname(entry), exist_ok=True)
            handle, temp = tempfile.mkstemp(dir=os.path.dirname(entry))
            with os.fdopen(handle, "wb") as out:
                pickle.dump(facts, out, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temp, entry)
        except OSError:
            pass

    def prune(self, now: float | None = None) -> tuple[int, int]:
        """Remove what no run has used for ``MAX_AGE_SECONDS``, the run plans past the newest
        ``KEEP_RUN_PLANS``, and temporary files of killed runs; at most once per
        ``PRUNE_EVERY_SECONDS``. Returns (files removed, bytes freed). A run in parallel may
        lose an entry it was about to read: that is a miss, never an error; and nothing here
        ever fails the run."""
        now = time.time() if now is None else now
        marker = os.path.join(self.folder, _PRUNED_MARKER)
        try:
            if now - os.stat(marker).st_mtime < PRUNE_EVERY_SECONDS:
                return 0, 0
        except OSError:
            pass  # never pruned (or no cache yet)
        removed = freed = 0
        plans: list[tuple[float, str, int]] = []

        def remove(path: str, size: int) -> None:
            nonlocal removed, freed
            try:
                os.remove(path)
            except OSError:
                return
            removed += 1
            freed += size

        for shard in _shards(self.folder):
            try:
                entries = list(os.scandir(shard))
            except OSError:
                continue
            for entry in entries:
                if not _is_entry(entry.name):
                    continue
                try:
                    stat = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                age = now - stat.st_mtime
                if entry.name.startswith("tmp"):
                    if age > _ORPHAN_AFTER_SECONDS:
                        remove(entry.path, stat.st_size)
                elif age > MAX_AGE_SECONDS:
                    remove(entry.path, stat.st_size)
                elif entry.name.startswith(_RUN_PREFIX):
                    plans.append((stat.st_mtime, entry.path, stat.st_size))
            try:
                os.rmdir(shard)  # only when empty
            except OSError:
                pass
        for _, path, size in sorted(plans, reverse=True)[KEEP_RUN_PLANS:]:
            remove(path, size)
        try:
            with open(marker, "w"):
                pass
            os.utime(marker, (now, now))
        except OSError:
            pass
        return removed, freed


def _load(entry: str, kind: type):
    """An entry's content, if it is a ``kind``; None: a miss. A read refreshes the entry's time
    (once a day at most) so that pruning keeps it.

    Any failure is a miss: an entry of an incompatible version of the tool, or one a full disk
    or a killed machine left damaged, makes ``pickle`` raise almost any exception (or load
    something else), and a damaged cache must cost a lint, never the run."""
    try:
        with open(entry, "rb") as handle:
            found = pickle.load(handle)
            stale = time.time() - os.fstat(handle.fileno()).st_mtime > _REFRESH_AFTER_SECONDS
    except Exception:  # noqa: BLE001 -- a miss (no such entry) or a damaged one: see the docstring
        return None
    if not isinstance(found, kind):
        return None
    if stale:
        try:
            os.utime(entry)
        except OSError:
            pass  # a cache on a read-only disk still answers
    return found


def _ledger_items(ledger: str) -> list[tuple[tuple, str]]:
    """A ledger's records (``Cache._record``); what a damaged one holds besides is a miss."""
    return [
        item for item in _load(ledger, list) or ()
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str) and _is_entry(item[1])
    ]  # fmt: skip


def _shards(folder: str) -> list[str]:
    """The entry folders of a cache (named by the first two hex digits of their keys)."""
    try:
        return [
            entry.path for entry in os.scandir(folder)
            if len(entry.name) == 2 and _HEX.issuperset(entry.name) and entry.is_dir(follow_symlinks=False)
        ]  # fmt: skip
    except OSError:
        return []


def _is_entry(name: str) -> bool:
    """A name ``_entry``, ``whole_run`` or ``_store``'s temporary file gives: never anything
    else in a folder mistaken for the cache (git's object folders hold 38-digit names)."""
    key = name.removeprefix(_RUN_PREFIX)
    return (len(key) == 40 and _HEX.issuperset(key)) or name.startswith("tmp")


def _is_cache(folder: str) -> bool:
    """A folder this tool made a cache of: its tag, or the ``.gitignore`` of earlier versions."""
    for name, content in (("CACHEDIR.TAG", _CACHEDIR_TAG), (".gitignore", "*\n")):
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                if handle.read() == content:
                    return True
        except (OSError, UnicodeDecodeError):
            continue
    return False


def clean(folder: str) -> tuple[int, int] | None:
    """Remove the cache in ``folder`` (``sync-lint clean``): its entries, and its own files and
    the folder if nothing else is left in it. Files that are not the cache's are left alone,
    so a mistaken ``--cache-dir`` never deletes anything else. None: there is no cache there
(``_is_cache``). An entry that cannot be removed raises ``OSError``.
    Returns (files removed, bytes freed)."""
    if not _is_cache(folder):
        return None
    removed = freed = 0
    for shard in _shards(folder):
        for entry in list(os.scandir(shard)):
            if _is_entry(entry.name) and entry.is_file(follow_symlinks=False):
                freed += entry.stat(follow_symlinks=False).st_size
                os.remove(entry.path)
                removed += 1
        if not os.listdir(shard):
            os.rmdir(shard)
    if set(os.listdir(folder)) <= set(_OWN_FILES):
        for name in _OWN_FILES:
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                os.remove(path)
        os.rmdir(folder)
    return removed, freed
