"""The cache stays bounded: pruning by last use and by count of run plans, reads refreshing what
is in use, and ``sync-lint clean`` removing only the cache.

Times are set on the entries (``os.utime``) and handed to ``Cache.prune`` as ``now``, so no
test waits."""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import pytest
from cli_runner import run

from sync_lint.api import make_settings
from sync_lint.pipeline import cache as cache_stage
from sync_lint.pipeline.runner import Linter

DAY = 24 * 3600
SYNC_IN_FORWARD = """\
import torch


class ModelMetadataBuilder:
    def build(self, common_attn_metadata):
        return common_attn_metadata.query_start_loc.cpu()
"""


def entries(folder: Path) -> dict[str, Path]:
    return {p.name: p for p in folder.glob("[0-9a-f][0-9a-f]/*")}


def age(path: Path, days: float, now: float) -> None:
    when = now - days * DAY
    os.utime(path, (when, when))


def after_an_hour(now: float) -> float:
    """A time when a run that pruned at ``now`` (or just before) prunes again."""
    return now + cache_stage.PRUNE_EVERY_SECONDS + 60


def make_project(root: Path, files: int = 3) -> list[str]:
    paths = []
    for i in range(files):
        path = root / f"model_{i}.py"
        path.write_text(SYNC_IN_FORWARD.replace("Model", f"Model{i}"))
        paths.append(str(path))
    return paths


@pytest.fixture
def linter(tmp_path: Path) -> Linter:
    return Linter(make_settings(), cache_dir=str(tmp_path / "cache"))


def test_prune_removes_what_no_run_used_for_two_weeks(tmp_path, linter):
    paths = make_project(tmp_path)
    found = linter.run(paths, jobs=1).diagnostics
    assert found, "the sample must report, or the cache holds nothing worth keeping"
    folder = tmp_path / "cache"
    stored = entries(folder)
    now = time.time()
    old, *recent = sorted(stored)
    age(stored[old], 15, now)
    for name in recent:
        age(stored[name], 13, now)
    removed, freed = linter.cache.prune(now=after_an_hour(now))
    assert (removed, sorted(entries(folder))) == (1, recent)
    assert freed > 0
    # What was pruned is made again, and the run finds the same.
    assert linter.run(paths, jobs=1).diagnostics == found


def test_a_read_refreshes_an_entry_so_pruning_keeps_it(tmp_path):
    """A file checked alone: its warm run reads every entry its cold run wrote (a run that
    reads beyond its files reads its cached plan, not the outlines it was made of)."""
    linter = Linter(make_settings(follow_imports="skip"), cache_dir=str(tmp_path / "cache"))
    paths = make_project(tmp_path, files=1)
    linter.run(paths, jobs=1)
    folder = tmp_path / "cache"
    now = time.time()
    for path in entries(folder).values():
        age(path, 13, now)
    linter.run(paths, jobs=1)  # a warm run reads every entry
    assert all(now - p.stat().st_mtime < 60 for p in entries(folder).values())
    removed, _ = linter.cache.prune(now=after_an_hour(now + 2 * DAY))
    assert removed == 0


def test_a_read_of_a_fresh_entry_writes_nothing(tmp_path, linter):
    """Refreshing costs a write: done at most once a day per entry."""
    paths = make_project(tmp_path, files=1)
    linter.run(paths, jobs=1)
    now = time.time()
    stored = list(entries(tmp_path / "cache").values())
    for path in stored:
        age(path, 0.5, now)
    linter.run(paths, jobs=1)
    assert all(abs(p.stat().st_mtime - (now - 0.5 * DAY)) < 1 for p in stored)


def test_only_the_newest_run_plans_are_kept(tmp_path, linter):
    """Each state of a tree gets its own plan; a plan serves only that state."""
    paths = make_project(tmp_path, files=2)
    now = time.time()
    for state in range(cache_stage.KEEP_RUN_PLANS + 3):
        Path(paths[0]).write_text(SYNC_IN_FORWARD + f"\nSTATE = {state}\n")
        linter.run(paths, jobs=1)
        for path in entries(tmp_path / "cache").values():
            if path.name.startswith("run-") and now - path.stat().st_mtime < 60:
                age(path, (cache_stage.KEEP_RUN_PLANS + 3 - state) / 100, now)  # older states are older

    def plans() -> list[tuple[float, str]]:
        stored = entries(tmp_path / "cache").items()
        return sorted((path.stat().st_mtime, name) for name, path in stored if name.startswith("run-"))

    before = plans()
    assert len(before) == cache_stage.KEEP_RUN_PLANS + 3
    linter.cache.prune(now=after_an_hour(now))
    assert plans() == before[3:]


def test_prune_runs_at_most_once_an_hour(tmp_path, linter):
    paths = make_project(tmp_path, files=1)
    linter.run(paths, jobs=1)  # prunes (nothing to prune) and marks the time
    now = time.time()
    for path in entries(tmp_path / "cache").values():
        age(path, 30, now)
    count = len(entries(tmp_path / "cache"))
    assert linter.cache.prune(now=now + 60) == (0, 0)
    assert len(entries(tmp_path / "cache")) == count
    assert linter.cache.prune(now=after_an_hour(now))[0] == count
    assert entries(tmp_path / "cache") == {}


def test_prune_removes_half_written_entries_of_killed_runs_only_when_old(tmp_path, linter):
    paths = make_project(tmp_path, files=1)
    linter.run(paths, jobs=1)
    shard = next((tmp_path / "cache").glob("[0-9a-f][0-9a-f]"))
    stale, live = shard / "tmpstale", shard / "tmplive"
    stale.write_bytes(b"half")
    live.write_bytes(b"being written")
    later = after_an_hour(time.time())
    age(stale, 2 / 24, later)
    age(live, 0.5 / 24, later)
    linter.cache.prune(now=later)
    assert not stale.exists() and live.exists()


def test_prune_leaves_what_is_not_an_entry(tmp_path, linter):
    paths = make_project(tmp_path, files=1)
    linter.run(paths, jobs=1)
    shard = next((tmp_path / "cache").glob("[0-9a-f][0-9a-f]"))
    foreign = [shard / "notes.txt", shard / ("0" * 38)]
    now = time.time()
    for path in foreign:
        path.write_text("mine")
        age(path, 100, now)
    linter.cache.prune(now=after_an_hour(now))
    assert all(path.exists() for path in foreign)


def test_prune_never_fails_a_run_on_an_unusable_folder(tmp_path):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    paths = make_project(tmp_path, files=1)
    result = Linter(make_settings(), cache_dir=str(blocker)).run(paths, jobs=1)
    assert [d.code for d in result.diagnostics] == ["GPU201"]


def test_clean_removes_the_cache_and_nothing_else(tmp_path):
    make_project(tmp_path, files=2)
    assert run("check", "--isolated", ".", cwd=tmp_path).returncode == 1
    folder = tmp_path / ".sync_lint_cache"
    assert (folder / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    count = len(entries(folder))
    kept = folder / "mine.txt"
    kept.write_text("not the cache's")
    result = run("clean", "--isolated", cwd=tmp_path)
    assert result.returncode == 0 and f"({count} entries," in result.stderr, result.stderr
    # Still marked as a cache (and ignored by git) while something else is in it.
    assert sorted(p.name for p in folder.iterdir()) == [".gitignore", ".last-pruned", "CACHEDIR.TAG", "mine.txt"]
    kept.unlink()
    assert run("clean", "--isolated", cwd=tmp_path).returncode == 0
    assert not folder.exists()
    again = run("clean", "--isolated", cwd=tmp_path)
    assert again.returncode == 0 and "no cache at" in again.stderr


def test_clean_refuses_a_folder_that_is_not_a_cache(tmp_path):
    """A mistaken ``--cache-dir`` (here shaped like git's object store) loses nothing."""
    shard = tmp_path / "objects" / "ab"
    shard.mkdir(parents=True)
    (shard / ("c" * 38)).write_text("a git object")
    (shard / ("c" * 40)).write_text("shaped like an entry")
    result = run("clean", "--cache-dir", "objects", cwd=tmp_path)
    assert result.returncode == 0 and "no cache at objects" in result.stderr
    assert len(list(shard.iterdir())) == 2


def test_clean_reports_a_bad_config_on_one_line(tmp_path):
    result = run("clean", "--config", "missing.toml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "sync-lint: error: --config missing.toml: no such file"


DAMAGE = {
    "truncated": lambda raw: raw[: len(raw) // 2],
    "empty": lambda raw: b"",
    "garbage": lambda raw: bytes(range(256)) * 4,
    "a flipped byte": lambda raw: raw[:5] + bytes([raw[5] ^ 0xFF]) + raw[6:],
    "a pickle of something else": lambda raw: pickle.dumps({"not": "facts"}),
    "a pickle of a huge length": lambda raw: b"\x80\x05\x95" + b"\xff" * 8 + b"B" + b"\xff" * 4,
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_entry_is_a_miss_never_an_error(tmp_path, damage):
    """A full disk, a killed machine or another version of the tool leaves entries ``pickle``
    fails on with almost any exception, or loads as something else: each is linted again."""
    paths = make_project(tmp_path, files=2)  # two files: facts, outlines and a run plan
    linter = Linter(make_settings(), cache_dir=str(tmp_path / "cache"))
    expected = linter.run(paths, jobs=1).diagnostics
    stored = entries(tmp_path / "cache")
    assert any(name.startswith("run-") for name in stored) and len(stored) >= 5
    for path in stored.values():
        path.write_bytes(DAMAGE[damage](path.read_bytes()))
    again = Linter(make_settings(), cache_dir=str(tmp_path / "cache")).run(paths, jobs=1)
    assert again.diagnostics == expected
    # The run stored sound entries over the damaged ones.
    assert Linter(make_settings(), cache_dir=str(tmp_path / "cache")).run(paths, jobs=1).diagnostics == expected


def test_an_entry_that_cannot_be_refreshed_is_still_a_hit(tmp_path, linter, monkeypatch):
    """A cache restored read-only (or owned by another user) answers; only pruning suffers."""
    paths = make_project(tmp_path, files=1)
    linter.run(paths, jobs=1)
    now = time.time()
    for path in entries(tmp_path / "cache").values():
        age(path, 3, now)

    def refuse(*args, **kwargs):
        raise PermissionError("read-only")

    def linted_again(*args, **kwargs):
        pytest.fail("a miss: the file was linted and stored again")

    monkeypatch.setattr(os, "utime", refuse)
    monkeypatch.setattr(cache_stage.Cache, "_store", linted_again)
    assert [d.code for d in linter.run(paths, jobs=1).diagnostics] == ["GPU201"]


LEDGER_DAMAGE = {
    "records of another shape": [("made with",), 5, (((), None), "../../outside"), (((), None), "0" * 40)],
    "not a list": {"made with": "facts"},
    **{name: damage for name, damage in DAMAGE.items() if name != "a pickle of something else"},
}


@pytest.mark.parametrize("damage", sorted(LEDGER_DAMAGE))
def test_a_damaged_ledger_is_a_miss_never_an_error(tmp_path, damage):
    """A run of a few files reads the facts of the files beyond it that a run of every file
    cached, through the ledger each text has (``cache.Wider``): a damaged one, or one listing
    entries that are gone or no entries at all, serves nothing, and the file is linted again.
    (``declared.py`` gives the run of every file a rule the run of ``model.py`` lacks: the facts
    of ``helpers.py`` it needs are not those that run made, but those made with less.)"""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").touch()
    (package / "sync.py").write_text("def gpu_sync_allowed():\n    pass\n")
    (package / "declared.py").write_text(
        "from pkg.sync import gpu_sync_allowed\n\n\ndef read(x):\n    with gpu_sync_allowed():\n        return x.item()\n"
    )
    (package / "helpers.py").write_text("import torch\n\n\ndef wait(x):\n    torch.cuda.synchronize()\n")
    model = package / "model.py"
    model.write_text(
        "from torch import nn\n\nfrom pkg.helpers import wait\n\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        wait(x)\n"
    )
    cache = tmp_path / "cache"
    every = [str(path) for path in sorted(package.glob("*.py"))]
    Linter(make_settings(), cache_dir=str(cache)).run(every, jobs=1)
    ledgers = [path for path in entries(cache).values() if isinstance(cache_stage._load(str(path), object), list)]
    assert len(ledgers) >= 2  # helpers.py's and model.py's, both parsed
    damaged = LEDGER_DAMAGE[damage]
    for path in ledgers:
        path.write_bytes(damaged(path.read_bytes()) if callable(damaged) else pickle.dumps(damaged))
    model.write_text(model.read_text() + "# staged\n")
    found = Linter(make_settings(), cache_dir=str(cache)).run([str(model)], jobs=1).diagnostics
    assert [(Path(d.path).name, d.line, d.code) for d in found] == [("model.py", 8, "GPU201")]
