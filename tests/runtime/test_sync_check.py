"""The sync checker itself: cost when off, arming, detection, exemption scoping."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import warnings

import pytest
import torch

from reference_kernels import sync_check
from reference_kernels.sync_check import (
    GPUSyncError,
    GPUSyncWarning,
    gpu_sync_allowed,
    mark_device_resident,
    sync_checked_step,
)

THIS_FILE = __file__


def _line_of(marker: str) -> int:
    """Line number of the first source line of this file containing ``marker``."""
    with open(THIS_FILE) as source:
        for lineno, line in enumerate(source, start=1):
            if marker in line and "_line_of" not in line:
                return lineno
    raise LookupError(marker)


def test_off_mode_returns_one_shared_nullcontext():
    previous = sync_check.set_sync_check_mode("off")
    try:
        shared = gpu_sync_allowed()
        assert isinstance(shared, contextlib.nullcontext)
        assert gpu_sync_allowed() is shared
        assert gpu_sync_allowed(first_only=True) is shared
    finally:
        sync_check.set_sync_check_mode(previous)


def test_mode_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv(sync_check.ENV_VAR, "warn")
    previous = sync_check.set_sync_check_mode(None)
    try:
        assert sync_check.sync_check_mode() == "warn"
        monkeypatch.setenv(sync_check.ENV_VAR, "bogus")
        with pytest.raises(ValueError, match="GPU_SYNC_CHECK"):
            sync_check.set_sync_check_mode(None)
    finally:
        sync_check.set_sync_check_mode(previous)


def test_off_mode_checks_nothing(arm_sync_check):
    arm_sync_check("off")
    x = mark_device_resident(torch.arange(4))
    with sync_checked_step():
        assert x[-1].item() == 3


def test_unarmed_step_checks_nothing():
    """Warm-up: the mode is on but enable_sync_check() has not been called."""
    previous = sync_check.set_sync_check_mode("error")
    try:
        x = mark_device_resident(torch.arange(4))
        with sync_checked_step():
            assert x[-1].item() == 3
    finally:
        sync_check.set_sync_check_mode(previous)
        sync_check.clear_device_resident()


def test_error_names_the_offending_line(arm_sync_check):
    arm_sync_check("error")
    x = mark_device_resident(torch.arange(4))
    with pytest.raises(GPUSyncError) as caught, sync_checked_step():
        x[-1].item()  # the offending line
    assert f"{THIS_FILE}:{_line_of('# the offending line')}" in str(caught.value)
    assert "test_error_names_the_offending_line" in str(caught.value)


def test_warn_mode_warns_with_the_same_text_at_the_offending_line(arm_sync_check):
    arm_sync_check("warn")
    x = mark_device_resident(torch.arange(4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with sync_checked_step():
            value = int(x.sum())  # warned here
    assert value == 6
    [warning] = caught
    assert warning.category is GPUSyncWarning
    line = _line_of("# warned here")
    assert (warning.filename, warning.lineno) == (THIS_FILE, line)
    assert f"{THIS_FILE}:{line}" in str(warning.message)


# Each entry syncs on a device-resident x (a view or a result derived from it counts).
SYNCING_READS = {
    "item": lambda x: x[0].item(),
    "int": lambda x: int(x[1]),
    "float": lambda x: float(x[1]),
    "bool_any": lambda x: bool((x > 2).any()),
    "range": lambda x: range(x[2]),
    "slice_by_tensor": lambda x: torch.arange(8)[: x[2]],
    "derived_result": lambda x: (x * 2 + 1).max().item(),
    "column_view": lambda x: x.view(2, 2)[:, 0].sum().item(),
    "boolean_mask": lambda x: x[x > 1],
    "mask_assign": lambda x: x.clone().__setitem__(x > 1, 0),
    "nonzero": lambda x: torch.nonzero(x),
    "where_one_arg": lambda x: torch.where(x > 1),
    "masked_select": lambda x: torch.masked_select(x, x > 1),
    "unique": lambda x: torch.unique(x),
    "repeat_interleave": lambda x: torch.repeat_interleave(x),
    "tolist": lambda x: x.tolist(),
    "numpy": lambda x: x.numpy(),
    "cpu": lambda x: x.cpu(),
    "to_cpu": lambda x: x.to("cpu"),
    "f_string": lambda x: f"lens {x}",
    "str": lambda x: str(x[:2]),
    "format_spec": lambda x: f"{x.max():d}",
}


@pytest.mark.parametrize("read", SYNCING_READS.values(), ids=SYNCING_READS.keys())
def test_detects_syncing_reads(arm_sync_check, read):
    arm_sync_check("error")
    x = mark_device_resident(torch.arange(4))
    with pytest.raises(GPUSyncError, match="GPU->CPU sync"), sync_checked_step():
        read(x)


SYNC_FREE_OPS = {
    "arithmetic": lambda x: x * 2 + 1,
    "reductions": lambda x: (x.sum(), x.cumsum(0), x.max()),
    "gather": lambda x: x[torch.tensor([0, 2])],
    "dtype_cast": lambda x: x.to(torch.int32),
    "where_three_args": lambda x: torch.where(x > 1, x, 0),
    "repeat_interleave_with_size": lambda x: torch.repeat_interleave(x, output_size=6),
    "searchsorted": lambda x: torch.searchsorted(x, torch.tensor([1, 2])),
    "formatted_metadata": lambda x: f"{x.shape} {x.dtype} {x.device} {x.numel()} {len(x)}",
}


@pytest.mark.parametrize("op", SYNC_FREE_OPS.values(), ids=SYNC_FREE_OPS.keys())
def test_sync_free_ops_pass(arm_sync_check, op):
    arm_sync_check("error")
    x = mark_device_resident(torch.arange(4))
    with sync_checked_step():
        op(x)


def test_host_tensors_may_be_read(arm_sync_check):
    arm_sync_check("error")
    mark_device_resident(torch.arange(4))
    seq_lens_cpu = torch.arange(4)
    with sync_checked_step():
        assert seq_lens_cpu.tolist() == [0, 1, 2, 3]
        assert int(seq_lens_cpu.max()) == 3


def test_allowed_region_exempts_and_nests(arm_sync_check):
    arm_sync_check("error")
    x = mark_device_resident(torch.arange(4))
    with sync_checked_step():
        with gpu_sync_allowed():
            with gpu_sync_allowed():
                x[0].item()
            x.tolist()
        with pytest.raises(GPUSyncError):
            x[0].item()


def test_first_only_exempts_the_first_entry_of_a_call_site(arm_sync_check):
    arm_sync_check("error")
    x = mark_device_resident(torch.arange(4))

    def lazily_filled_cache():
        with gpu_sync_allowed(first_only=True):
            return x[-1].item()

    with sync_checked_step():
        assert lazily_filled_cache() == 3
        with pytest.raises(GPUSyncError):
            lazily_filled_cache()


def test_decorator_form_and_disarming(arm_sync_check):
    arm_sync_check("error")
    x = mark_device_resident(torch.arange(4))

    @sync_checked_step()
    def execute_model():
        return x[-1].item()

    for _ in range(2):  # a fresh check per call
        with pytest.raises(GPUSyncError):
            execute_model()
    sync_check.disable_sync_check()
    assert execute_model() == 3


def test_allowed_region_is_per_thread(arm_sync_check):
    arm_sync_check("error")
    x = mark_device_resident(torch.arange(4))
    inside = threading.Event()
    release = threading.Event()
    errors, allowed_reads = [], []

    def holds_an_allowed_region():
        with sync_checked_step(), gpu_sync_allowed():
            inside.set()
            release.wait(timeout=10)
            allowed_reads.append(x[0].item())

    def syncs_without_one():
        inside.wait(timeout=10)
        try:
            with sync_checked_step():
                x[0].item()
        except GPUSyncError as error:
            errors.append(error)
        finally:
            release.set()

    threads = [
        threading.Thread(target=holds_an_allowed_region),
        threading.Thread(target=syncs_without_one),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert len(errors) == 1
    assert allowed_reads == [0]


def test_allowed_region_is_per_asyncio_task(arm_sync_check):
    arm_sync_check("error")
    x = mark_device_resident(torch.arange(4))

    async def main():
        inside = asyncio.Event()
        release = asyncio.Event()

        async def holds_an_allowed_region():
            with gpu_sync_allowed():
                inside.set()
                await release.wait()
                return x[0].item()

        async def syncs_without_one():
            await inside.wait()
            try:
                x[0].item()
            finally:
                release.set()

        # Tasks copy the step's context: both are inside the checked step.
        with sync_checked_step():
            return await asyncio.gather(
                holds_an_allowed_region(), syncs_without_one(), return_exceptions=True
            )

    allowed, unallowed = asyncio.run(main())
    assert allowed == 0
    assert isinstance(unallowed, GPUSyncError)


@pytest.mark.gpu
def test_cuda_error_names_the_offending_line(arm_sync_check):
    arm_sync_check("error")
    x = torch.arange(4, device="cuda")
    with pytest.raises(GPUSyncError) as caught, sync_checked_step():
        x[-1].item()  # the offending CUDA line
    assert f"{THIS_FILE}:{_line_of('# the offending CUDA line')}" in str(caught.value)
    assert torch.cuda.get_sync_debug_mode() == 0  # disarmed after the step


@pytest.mark.gpu
def test_cuda_allowed_region_and_warn_mode(arm_sync_check):
    arm_sync_check("error")
    x = torch.arange(4, device="cuda")
    with sync_checked_step():
        with gpu_sync_allowed():
            assert x.tolist() == [0, 1, 2, 3]
        assert torch.cuda.get_sync_debug_mode() == 2  # re-armed after the region
    arm_sync_check("warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with sync_checked_step():
            torch.nonzero(x)  # warned CUDA line
    assert (THIS_FILE, _line_of("# warned CUDA line")) in {(w.filename, w.lineno) for w in caught}
