"""How a run of many files shares its work between worker processes (``runner._Pool``): the
costliest files first, in batches that shrink as the work left does, results in input order."""

from __future__ import annotations

import gc
import random

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
    import os

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
