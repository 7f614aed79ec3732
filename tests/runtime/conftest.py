"""Runtime tests of the reference kernels, the sync checker and the fixtures.

Without CUDA, Triton kernels run in the interpreter on CPU tensors; the variable must
be set before any kernel module is imported (``triton.jit`` reads it when a kernel is
defined). With CUDA the kernels are compiled and the CPU variants of kernel tests are
skipped; tests marked ``gpu`` run only with CUDA.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

CUDA = torch.cuda.is_available()
if not CUDA:
    os.environ["TRITON_INTERPRET"] = "1"

# Imported only now: reference_kernels modules may import Triton kernels.
from reference_kernels import sync_check

_HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped without one")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if _HERE in item.path.parents and "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(
    params=[
        pytest.param(
            "cpu",
            marks=pytest.mark.skipif(
                CUDA, reason="with CUDA, Triton compiles for the GPU instead of interpreting"
            ),
        ),
        pytest.param("cuda", marks=pytest.mark.gpu),
    ]
)
def kernel_device(request: pytest.FixtureRequest) -> torch.device:
    """Where Triton kernels run: the CPU interpreter, or the GPU."""
    return torch.device(request.param)


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


@pytest.fixture
def arm_sync_check():
    """``arm_sync_check(mode)``: set the mode and arm the checker as after warm-up.

    Teardown disarms, restores the previous mode and drops device-resident marks.
    """
    previous = sync_check.sync_check_mode()

    def arm(mode: str) -> None:
        sync_check.set_sync_check_mode(mode)
        sync_check.enable_sync_check()

    yield arm
    sync_check.disable_sync_check()
    sync_check.set_sync_check_mode(previous)
    sync_check.clear_device_resident()
