"""How a run of many files shares its work between worker processes (``runner._Pool``): the
costliest files first, in batches that shrink as the work left does, results in input order."""

from __future__ import annotations

import gc
import os
import random
from pathlib import Path

import pytest

from sync_lint.api import make_settings
from sync_lint.pipeline import collector, runner
from sync_lint.pipeline.project_plan import KeptUnits
from sync_lint.pipeline.source import split_lines
from sync_lint.pipeline.units import MaskPlan


def _echo_batch(batch: list[int]):
    """A worker's batch: each item back, and no profile."""
    return [item * 10 for item in batch], None


def _collector_state_batch(batch: list[int]):
    """A worker's batch: whether its garbage collector runs, per item."""
    return [gc.isenabled() for _ in batch], None


def test_workers_forked_while_the_collector_is_paused_collect(tmp_path):
    """A run pauses its main process's collector throughout (``collector``) and forks its
    workers meanwhile: they collect between their files all the same, and the run puts the
    collector back after."""
    assert gc.isenabled()
    with collector.paused(), runner._Pool(runner.Linter(make_settings()), 2) as pool:
        assert pool.map(_collector_state_batch, list(range(64))) == [True] * 64
        assert not gc.isenabled()
    assert gc.isenabled()
    for i in range(runner.PARALLEL_THRESHOLD):
        (tmp_path / f"m{i}.py").write_text("import torch\n\n\ndef f(x):\n    return x.item()\n")
    runner.Linter(make_settings()).run([str(p) for p in sorted(tmp_path.glob("*.py"))], jobs=2)
    assert gc.isenabled()


def _frozen_batch(batch: list[int]):
    """A worker's batch: how many objects its collector never looks at, per item."""
    return [gc.get_freeze_count() for _ in batch], None


def test_workers_freeze_what_they_start_with():
    """What a worker holds at its start (what the fork copied; a lint worker's libcst) is never
    scanned by its collector: without that, its first pass scanned every object of it (13 ms
    after the parser's import, which the run waited for)."""
    alive = len(gc.get_objects())
    with collector.paused(), runner._Pool(runner.Linter(make_settings()), 2) as pool:
        counts = pool.map(_frozen_batch, list(range(8)))
    assert min(counts) >= alive
    assert gc.get_freeze_count() == 0  # the run's own process frees what it can


def test_guided_batches_cover_every_item_once_costliest_first():
    random.seed(7)
    costs = [random.paretovariate(1.2) for _ in range(3000)]  # file sizes: a few huge, most small
    batches = runner._guided_batches(costs, jobs=2)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(costs)))
    assert [costs[i] for i in flat] == sorted(costs, reverse=True)
    totals = [sum(costs[i] for i in batch) for batch in batches]
    # The work left at the end is a sliver: no worker waits long on another's last batch.
    assert totals[-1] <= sum(costs) / 100
    assert max(totals[len(totals) // 2 :]) < max(totals)
    assert len(batches) < 100 and all(len(batch) <= 256 for batch in batches)


def test_guided_batches_of_nothing_and_of_zero_costs():
    assert runner._guided_batches([], jobs=2) == []
    batches = runner._guided_batches([0.0] * 10, jobs=2)
    assert sorted(i for batch in batches for i in batch) == list(range(10))


def test_pool_map_with_costs_returns_results_in_input_order():
    items = list(range(500))
    costs = [float((i * 7919) % 101) for i in items]
    with runner._Pool(runner.Linter(make_settings()), 2) as pool:
        assert pool.map(_echo_batch, items, costs=costs) == [i * 10 for i in items]
        assert pool.map(_echo_batch, items) == [i * 10 for i in items]


def test_lint_cost_is_the_share_of_a_file_that_is_parsed(tmp_path):
    path = tmp_path / "m.py"
    text = "import torch\n\n\ndef kept(x):\n    return x\n\n\n" + "".join(
        f"def masked_{i}(x):\n    y = x + {i}\n    return y\n\n\n" for i in range(20)
    )
    path.write_text(text)
    plan = MaskPlan(text, split_lines(text))
    kept_index = next(i for i, unit in enumerate(plan.units) if unit.name == "kept")
    size = path.stat().st_size
    some = runner._lint_cost(str(path), KeptUnits(0, (kept_index,), cuts=tuple(plan.units), active=("GPU101",)))
    none = runner._lint_cost(str(path), KeptUnits(0, (), True, cuts=tuple(plan.units), active=("GPU101",)))
    inactive = runner._lint_cost(str(path), KeptUnits(0, (), active=()))
    assert runner._lint_cost(str(path), None) == size
    assert none < some < size / 4 and inactive < size / 4
    assert runner._lint_cost(str(tmp_path / "gone.py"), None) == 0.0


def _dying_batch(*args, **kwargs):
    """A worker's batch that ends its process, as the kernel's out-of-memory killer would."""
    os._exit(137)


def test_a_worker_that_dies_ends_the_run_with_a_one_line_error(tmp_path, monkeypatch, capsys):
    """A worker process killed mid-run (out of memory, a crash in native code) leaves files
    without facts: the run ends with a one-line error and exit status 2, no traceback, for
    ``check`` and ``fix`` alike."""
    from sync_lint import cli

    for i in range(3):
        (tmp_path / f"m{i}.py").write_text("import torch\n\n\ndef f(x):\n    return x.item()\n")
    monkeypatch.setattr(runner, "PARALLEL_THRESHOLD", 2)
    monkeypatch.setattr(runner, "_worker_outline_batch", _dying_batch)
    for command in (["check"], ["fix", "--diff"]):
        capsys.readouterr()
        status = cli.main([*command, "--isolated", "--no-cache", "--jobs", "2", str(tmp_path)])
        err = capsys.readouterr().err
        assert status == 2, err
        assert err.strip().splitlines() == [
            (
                "sync-lint: error: a worker process died (killed, out of memory, or a crash in native code); "
                "`--jobs 1` runs in one process and shows where"
            )
        ], err


# -- a small run's lint worker (``runner._WarmWorker``) ------------------------------------------

needs_fork = pytest.mark.skipif(not runner._WarmWorker.available(), reason="the lint worker is forked (Linux)")

# A staged pair and what it reads beyond it: ``model.py``'s hot method calls a helper that syncs
# (a finding resting on a parse of both), ``util.py`` holds a trigger but nothing the plan keeps.
_SMALL_RUN = {
    "pkg/__init__.py": "",
    "pkg/helpers.py": "import torch\n\n\ndef wait(x):\n    torch.cuda.synchronize()\n    return x.item()\n",
    "pkg/model.py": (
        "from torch import nn\n\nfrom pkg.helpers import wait\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return wait(x)\n"
    ),
    "pkg/util.py": "import torch\n\n\ndef to_device(x):\n    return x.to('cuda')\n",
}

# Run in a fresh interpreter (this one has imported libcst long ago): a small run of two files,
# its findings, and whether its own process imported libcst (or multiprocessing). ``FALLBACK``:
# every names-only lint needs a parse after all (its masked text "does not parse").
_RUN_AND_REPORT = """
import json, sys
from sync_lint.api import make_settings
from sync_lint.pipeline import lint_file, runner
if sys.argv[2] == "fallback":
    lint_file._names_only = lambda *args: None
result = runner.Linter(make_settings()).run(["pkg/model.py", "pkg/util.py"], jobs=int(sys.argv[1]))
print(json.dumps({
    "found": sorted((d.path, d.line, d.code) for d in result.diagnostics),
    "libcst_here": "libcst" in sys.modules,
    "multiprocessing_here": "multiprocessing" in sys.modules,
    "workers": result.workers,
}))
"""


def _small_run(tmp_path, jobs: int, mode: str = "plain") -> dict:
    import json
    import subprocess
    import sys

    for name, text in _SMALL_RUN.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    done = subprocess.run(
        [sys.executable, "-c", _RUN_AND_REPORT, str(jobs), mode], check=False, cwd=tmp_path, capture_output=True,
        text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_fork
@pytest.mark.parametrize("mode", ["plain", "fallback"])
def test_a_small_run_parses_in_its_lint_worker_and_never_imports_libcst_itself(tmp_path, mode):
    """A small run (pre-commit's) hands its parses to its lint worker, which imports libcst while
    the run plans: the run's own process never imports it, also where a lint the plan keeps only
    names of needs a parse after all (``lint_file.WouldParse``); it reports what a run in one
    process reports."""
    alone = _small_run(tmp_path, jobs=1, mode=mode)
    assert alone["libcst_here"] and alone["workers"] == 1
    assert [code for _, _, code in alone["found"]] == ["GPU201"]
    forked = _small_run(tmp_path, jobs=2, mode=mode)
    assert not forked["libcst_here"]
    assert not forked["multiprocessing_here"]  # its import cost a small run about 10 ms (``runner._Forked``)
    assert forked["workers"] == 3  # this process, and both lint workers: one parses model.py, one helpers.py
    assert forked["found"] == alone["found"]


def _big_lint(self, path, *args, **kwargs):
    """A lint whose facts are bigger than a pipe holds."""
    return path * 200_000


@needs_fork
def test_the_lint_worker_reads_a_request_while_its_answer_waits(monkeypatch):
    """The run may send the lint worker a request bigger than a pipe holds while the worker sends
    an answer as big that the run has not read yet: neither may wait for the other."""
    import signal

    monkeypatch.setattr(runner.Linter, "lint_one", _big_lint)  # the worker is forked with it
    items = [(f"file{i}.py", None, "heard " * 100_000) for i in range(3)]

    def hung(*_):
        raise AssertionError("the run and its lint worker wait for each other")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        with runner._WarmWorker(runner.Linter(make_settings()), {}) as warm:
            first = warm.start_lint(items, None, beyond=True)
            second = warm.start_lint(items, None, beyond=False)  # while the first answer is written
            assert [len(facts) for facts in second()] == [len("file0.py") * 200_000] * 3
            assert first()[2] == "file2.py" * 200_000
            assert warm.used
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _failing_lint(self, path, *args, **kwargs):
    if path == "dies.py":
        os._exit(137)
    raise ValueError(f"a bug linting {path}")


@needs_fork
def test_the_lint_worker_s_error_or_death_reaches_the_run(monkeypatch):
    """An error in the lint worker is raised in the run, as a pool worker's is; its death (out of
    memory, a crash in native code) is ``WorkerDied``, the run's one-line error. An unused one is
    gone when the run is done."""
    monkeypatch.setattr(runner.Linter, "lint_one", _failing_lint)
    linter = runner.Linter(make_settings())
    with runner._WarmWorker(linter, {}) as warm:
        with pytest.raises(ValueError, match="a bug linting bug.py"):
            warm.start_lint([("bug.py", None, None)], None, beyond=False)()
        with pytest.raises(runner.WorkerDied):
            warm.start_lint([("dies.py", None, None)], None, beyond=False)()
    with runner._WarmWorker(linter, {}) as unused:
        assert not unused.used
    assert not unused._process.is_alive()


@needs_fork
def test_a_request_to_a_lint_worker_already_dead_is_its_death(monkeypatch):
    """The run may ask a worker that died since (killed, out of memory): its pipe is broken,
    which is ``WorkerDied``, the run's one-line error, not a traceback."""
    import signal
    import time

    monkeypatch.setattr(runner.Linter, "lint_one", _named_lint)
    with runner._WarmWorker(runner.Linter(make_settings()), {}) as warm:
        assert warm.start_lint([("a.py", None, None)], None, beyond=False)() == ["a.py"]
        os.kill(warm._process.pid, signal.SIGKILL)  # the twin dies with it
        deadline = time.monotonic() + 10
        while warm._process.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(runner.WorkerDied):
            warm.start_lint([("b.py", None, None)], None, beyond=False)()


def _named_lint(self, path, *args, **kwargs):
    return path


@needs_fork
def test_the_lint_worker_leaves_an_interrupt_to_the_run(monkeypatch, capfd):
    """Ctrl-C reaches the lint worker too (the terminal signals the whole process group): the
    run says it was interrupted in one line and kills the worker, which prints nothing of its own
    and does not die of it."""
    import signal

    monkeypatch.setattr(runner.Linter, "lint_one", _named_lint)
    with runner._WarmWorker(runner.Linter(make_settings()), {}) as warm:
        assert warm.start_lint([("a.py", None, None)], None, beyond=False)() == ["a.py"]  # at work
        os.kill(warm._process.pid, signal.SIGINT)
        assert warm.start_lint([("b.py", None, None)], None, beyond=False)() == ["b.py"]
    assert "Traceback" not in capfd.readouterr().err


def _pid_lint(self, path, *args, **kwargs):
    if Path(path).name == "dies.py":
        os._exit(137)
    return (Path(path).name, os.getpid())


def _gone(pid: int) -> bool:
    """No such process, or one that has exited and waits to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@needs_fork
def test_the_lint_worker_and_its_twin_split_each_request_by_cost_and_die_with_the_run(tmp_path, monkeypatch):
    """The lint worker forks a twin once it has imported the parser: a request is split between
    the two, costliest file first, each to the one handed the least work so far in the run (a
    second request evens out the first); the answers come back in the order asked. The twin
    dies when the run kills the first."""
    import time

    monkeypatch.setattr(runner.Linter, "lint_one", _pid_lint)
    sizes = {"a.py": 4000, "b.py": 3000, "c.py": 2000, "d.py": 1000, "e.py": 2500}
    for name, size in sizes.items():
        (tmp_path / name).write_text("#" * size)

    def item(name: str) -> tuple:
        return (str(tmp_path / name), None, None)

    with runner._WarmWorker(runner.Linter(make_settings()), {}) as warm:
        first = warm.start_lint([item(name) for name in ("a.py", "b.py", "c.py", "d.py")], None, beyond=True)()
        assert [name for name, _ in first] == ["a.py", "b.py", "c.py", "d.py"]
        by_pid: dict[int, set[str]] = {}
        for name, pid in first:
            by_pid.setdefault(pid, set()).add(name)
        first_worker = warm._process.pid
        (twin,) = set(by_pid) - {first_worker}
        assert by_pid == {first_worker: {"a.py", "d.py"}, twin: {"b.py", "c.py"}}  # 5000 bytes each
        assert twin != os.getpid()
        # Even so far: ``e.py`` goes to the first, which has the fewer files.
        assert warm.start_lint([item("e.py")], None, beyond=False)() == [("e.py", first_worker)]
        assert warm.used == 2
        # As a pool forked after the workers does, hold a copy of this end of the twin's pipes:
        # it never sees them closed.
        held = [os.dup(fd) for fd in warm._channels[1].connection.fds()]
    try:
        deadline = time.monotonic() + 10
        while not (_gone(first_worker) and _gone(twin)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(first_worker) and _gone(twin)
    finally:
        for fd in held:
            os.close(fd)


@needs_fork
def test_the_death_of_the_lint_worker_s_twin_reaches_the_run(monkeypatch):
    """A twin that dies (out of memory, a crash in native code) ends the run with ``WorkerDied``,
    as the first worker's death does, instead of leaving the run waiting for its answer."""
    import signal

    def hung(*_):
        raise AssertionError("the run waits for a dead twin")

    monkeypatch.setattr(runner.Linter, "lint_one", _pid_lint)
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        with runner._WarmWorker(runner.Linter(make_settings()), {}) as warm:
            first_worker = warm._process.pid
            assert warm.start_lint([("a.py", None, None)], None, beyond=False)() == [("a.py", first_worker)]
            dies = warm.start_lint([("dies.py", None, None)], None, beyond=False)  # the twin's: it has none yet
            assert warm._channels[1].items == 1
            with pytest.raises(runner.WorkerDied):
                dies()
            # The first is alive and answers still.
            assert warm.start_lint([("b.py", None, None)], None, beyond=False)() == [("b.py", first_worker)]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _no_fork() -> int:
    raise OSError(11, "Resource temporarily unavailable")


@needs_fork
def test_a_lint_worker_that_cannot_fork_its_twin_answers_for_both(monkeypatch):
    """Where the lint worker cannot fork its twin (a limit on processes, or memory), it answers
    the requests meant for the twin too, each in its order."""
    monkeypatch.setattr(runner.Linter, "lint_one", _pid_lint)
    monkeypatch.setattr(runner, "_fork", _no_fork)  # the worker is forked with it
    with runner._WarmWorker(runner.Linter(make_settings()), {}) as warm:
        first = warm.start_lint([("a.py", None, None), ("b.py", None, None)], None, beyond=True)  # one each
        second = warm.start_lint([("c.py", None, None), ("d.py", None, None)], None, beyond=False)
        assert second() == [("c.py", warm._process.pid), ("d.py", warm._process.pid)]
        assert first() == [("a.py", warm._process.pid), ("b.py", warm._process.pid)]
        assert warm.used == 2


# Run in a fresh interpreter: what a lint worker has (the run's linter made, then
# ``import_the_parser``), and the libcst and sync_lint modules a lint of every fixture, fixes
# planned, imports beyond it.
_IMPORTED_BY_A_LINT = """
import glob, json, sys
from sync_lint.api import make_settings
from sync_lint.pipeline import lint_file, runner
linter = runner.Linter(make_settings())
lint_file.import_the_parser()
before = set(sys.modules)
result = linter.run(sorted(glob.glob(sys.argv[1] + "/**/*.py", recursive=True)), jobs=1)
assert result.diagnostics and any(d.fix for d in result.diagnostics)
print(json.dumps(sorted(m for m in set(sys.modules) - before if m.partition(".")[0] in ("libcst", "sync_lint"))))
"""


def test_the_lint_worker_imports_ahead_every_module_a_lint_needs():
    """``lint_file.import_the_parser`` names the modules by hand: one left out would be imported
    at the worker's first lint that needs it, in the time the run waits for its answer."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED_BY_A_LINT, str(root / "fixtures")], check=False, capture_output=True,
        text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
