"""Which torch operations make the host wait for the GPU: the facts GPU202 and GPU205 rest on.

Needs a CUDA device (run by hand, on a machine that has one):

    python bench/cuda_sync_facts.py

Each operation runs twice on warm tensors: once under ``torch.cuda.set_sync_debug_mode("error")``
(the check an engine arms after warm-up: does it raise?), and once right behind about 200 ms of
GPU work queued with ``torch.cuda._sleep`` (how long the host is held: the whole 200 ms means
it waited for the queue to drain, as ``.item()`` does); then a few copies inside a CUDA-graph
capture. The debug mode sees only the syncs PyTorch itself asks for; the timing sees the
driver's too (a large copy from pageable memory with ``non_blocking=True``). Exits 1 without
CUDA.
"""

from __future__ import annotations

import sys
import time

import torch
import torch.nn.functional as F

QUEUED_CYCLES = 400_000_000  # about 200 ms of ``torch.cuda._sleep`` on an H100


def operations(device: torch.device) -> dict[str, object]:
    ids = torch.randint(0, 8, (64,), device=device)
    values = torch.rand(64, device=device)
    mask = ids > 3
    pageable = torch.arange(1 << 20, dtype=torch.int32)  # 4 MiB: above the driver's staging size
    small_pageable = torch.arange(64, dtype=torch.int32)
    pinned = pageable.pin_memory()
    target = torch.empty_like(pageable, device=device)
    return {
        # output sizes read from the data (GPU202)
        "torch.bincount(ids)": lambda: torch.bincount(ids),
        "torch.bincount(ids, minlength=16)": lambda: torch.bincount(ids, minlength=16),
        "F.one_hot(ids)": lambda: F.one_hot(ids),
        "F.one_hot(ids, num_classes=8)": lambda: F.one_hot(ids, num_classes=8),
        "torch.histc(values)": lambda: torch.histc(values),
        "torch.histc(values, bins=4, min=0, max=1)": lambda: torch.histc(values, bins=4, min=0, max=1),
        "torch.where(mask)": lambda: torch.where(mask),
        "torch.unique(ids)": lambda: torch.unique(ids),
        "values[mask] = 0": lambda: values.clone().__setitem__(mask, 0.0),
        "torch.count_nonzero(mask)": lambda: torch.count_nonzero(mask),
        # copies onto the GPU (GPU205)
        "pageable.to(device)": lambda: pageable.to(device),
        "pinned.to(device)": lambda: pinned.to(device),
        "pageable.cuda()": lambda: pageable.cuda(),
        "target.copy_(pageable)": lambda: target.copy_(pageable),
        "torch.tensor([1, 2, 3], device=device)": lambda: torch.tensor([1, 2, 3], device=device),
        "torch.as_tensor([1, 2, 3], device=device)": lambda: torch.as_tensor([1, 2, 3], device=device),
        "pinned.to(device, non_blocking=True)": lambda: pinned.to(device, non_blocking=True),
        "pageable.to(device, non_blocking=True), 4 MiB": lambda: pageable.to(device, non_blocking=True),
        "small_pageable.to(device, non_blocking=True)": lambda: small_pageable.to(device, non_blocking=True),
        "torch.full((4,), 3, device=device)": lambda: torch.full((4,), 3, device=device),
        "torch.arange(8, device=device)": lambda: torch.arange(8, device=device),
    }


def flagged_by_debug_mode(operation) -> bool:
    torch.cuda.set_sync_debug_mode("error")
    try:
        operation()
    except RuntimeError:
        return True
    finally:
        torch.cuda.set_sync_debug_mode(0)
        torch.cuda.synchronize()
    return False


def held_ms(operation, repeat: int = 3) -> float:
    """The least time the host spent in ``operation`` behind the queued GPU work."""
    best = float("inf")
    for _ in range(repeat):
        torch.cuda._sleep(QUEUED_CYCLES)
        started = time.perf_counter()
        operation()
        best = min(best, (time.perf_counter() - started) * 1e3)
        torch.cuda.synchronize()
    return best


def captured(operation) -> str:
    """Whether ``operation`` can be captured into a CUDA graph, or the error it raises."""
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            operation()
    except RuntimeError as error:
        return "raises: " + str(error).splitlines()[0].strip()
    finally:
        torch.cuda.synchronize()
    return "captured"


def main() -> int:
    if not torch.cuda.is_available():
        print("cuda_sync_facts: needs a CUDA device", file=sys.stderr)
        return 1
    device = torch.device("cuda")
    table = operations(device)
    for operation in table.values():  # warm up: allocator, kernels, the debug mode's notice
        operation()
    torch.cuda.synchronize()
    torch.cuda._sleep(QUEUED_CYCLES)
    started = time.perf_counter()
    torch.cuda.synchronize()
    queued = (time.perf_counter() - started) * 1e3
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; GPU work queued ahead: {queued:.0f} ms")
    print(f"{'operation':48s} {'debug mode':>10s} {'host held':>10s}")
    for name, operation in table.items():
        flagged = "raises" if flagged_by_debug_mode(operation) else "-"
        print(f"{name:48s} {flagged:>10s} {held_ms(operation):8.2f} ms")
    print("\ninside torch.cuda.graph capture:")
    pinned = torch.arange(4, dtype=torch.int32).pin_memory()
    for name, operation in {
        "pageable.to(device)": lambda: torch.arange(4).to(device),
        "torch.tensor([1, 2], device=device)": lambda: torch.tensor([1, 2], device=device),
        "pinned.to(device, non_blocking=True)": lambda: pinned.to(device, non_blocking=True),
    }.items():
        print(f"{name:48s} {captured(operation)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
