"""Small Triton helpers shared by the KDA and MLA kernels."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def block_flag(flag, like):
    """The scalar condition ``flag`` as an int1 block shaped like ``like``.

    Masks must be built from blocks: the Triton interpreter rejects a scalar mask and
    ``block & scalar`` (``mask has unsupported dtype``), while ``zeros | scalar`` works.
    """
    return tl.zeros(like.shape, dtype=tl.int1) | flag


@triton.jit
def load_rows(ptr, row_offsets, cols, row_valid):
    """``[rows, cols]`` fp32 block at ``ptr + row_offsets[r] + cols[c]``; rows that are
    not valid load as zeros."""
    offsets = row_offsets[:, None] + cols[None, :]
    return tl.load(ptr + offsets, mask=row_valid[:, None], other=0.0).to(tl.float32)


@triton.jit
def dot(a, b):
    """fp32 matrix product: on a GPU ``tl.dot`` would use TF32 by default, too coarse
    for comparisons against an fp32 reference."""
    return tl.dot(a, b, input_precision="ieee")
