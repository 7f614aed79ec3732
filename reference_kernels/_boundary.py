"""Argument checks at a kernel boundary, in the style of a C++/HIP custom op.

The raw Triton kernels read index tensors as ``ptr + i`` (stride 1) and data tensors
with strides derived from their shapes, so a strided view reaches them silently and
makes them read the wrong elements. The public entry points call these checks first.
"""

from __future__ import annotations

import torch


def check_index_tensor(name: str, tensor: torch.Tensor, length: int | None = None) -> None:
    """Raise unless ``tensor`` is a contiguous int32 tensor (of ``length`` rows)."""
    if tensor.dtype != torch.int32 or not tensor.is_contiguous():
        raise ValueError(
            f"{name} must be contiguous int32, got dtype={tensor.dtype}, "
            f"shape={tuple(tensor.shape)}, stride={tensor.stride()}"
        )
    if length is not None and tensor.shape[0] != length:
        raise ValueError(f"{name} must have {length} rows, got shape={tuple(tensor.shape)}")


def check_dense(name: str, tensor: torch.Tensor, shape: tuple[int, ...]) -> None:
    """Raise unless ``tensor`` is contiguous with exactly ``shape``."""
    if tuple(tensor.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(tensor.shape)}")
    if not tensor.is_contiguous():
        raise ValueError(f"{name} must be contiguous, got stride={tensor.stride()}")


# tl.dot needs every block dimension >= 16.
MIN_DOT_BLOCK = 16


def check_block_size(name: str, value: int) -> None:
    """Block sizes are powers of two (``tl.arange``) of at least 16 (``tl.dot``)."""
    if value < MIN_DOT_BLOCK or value & (value - 1):
        raise ValueError(f"{name} must be a power of two >= {MIN_DOT_BLOCK}, got {value}")
