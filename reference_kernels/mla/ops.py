"""``mla_forward``: split-KV attention, then the log-sum-exp reduce, from the builder's
metadata (layouts: ``reference_kernels.mla.triton_kernels``)."""

from __future__ import annotations

import torch

from reference_kernels._boundary import (
    check_block_size,
    check_dense,
    check_index_tensor,
)
from reference_kernels.mla.metadata import WORK_INFO_FIELDS, MLAAttentionMetadata
from reference_kernels.mla.triton_kernels import (
    mla_reduce_partials_kernel,
    mla_split_kv_attention_kernel,
)


def _check_metadata(metadata: MLAAttentionMetadata, num_heads: int) -> None:
    for name in (
        "query_start_loc", "seq_lens", "work_indptr", "work_info",
        "reduce_indptr", "reduce_final_map", "reduce_partial_map",
    ):  # fmt: skip
        check_index_tensor(name, getattr(metadata, name))
    block_table = metadata.block_table
    # The kernel takes the row stride, so only the block dimension must be dense.
    if block_table.dtype != torch.int32 or block_table.stride(-1) != 1:
        raise ValueError(
            f"block_table must be int32 with unit stride in its last dim, got "
            f"dtype={block_table.dtype}, stride={block_table.stride()}"
        )
    check_block_size("query_tile_size * num_heads", metadata.query_tile_size * num_heads)
    check_block_size("kv_tile_size", metadata.kv_tile_size)


def mla_forward(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    metadata: MLAAttentionMetadata,
    kv_lora_rank: int,
    sm_scale: float | None = None,
) -> torch.Tensor:
    """Attention of ``q [T, H, kv_lora_rank + rope]`` over the paged ``kv_cache
    [num_blocks, block_size, kv_lora_rank + rope]``; returns ``[T, H, kv_lora_rank]``.

    ``sm_scale`` defaults to ``(kv_lora_rank + rope) ** -0.5``.
    """
    num_tokens, num_heads, head_dim = q.shape
    num_blocks, block_size, _ = kv_cache.shape
    rope_dim = head_dim - kv_lora_rank
    check_dense("q", q, (metadata.num_actual_tokens, num_heads, head_dim))
    check_dense("kv_cache", kv_cache, (num_blocks, block_size, head_dim))
    check_block_size("kv_lora_rank", kv_lora_rank)
    check_block_size("rope dim", rope_dim)
    _check_metadata(metadata, num_heads)

    out = q.new_empty(num_tokens, num_heads, kv_lora_rank)
    if metadata.num_groups == 0:
        return out
    rows = metadata.query_tile_size * num_heads
    partial_out = q.new_empty(metadata.num_partial_tiles, rows, kv_lora_rank, dtype=torch.float32)
    partial_lse = q.new_empty(metadata.num_partial_tiles, rows, dtype=torch.float32)
    num_workers = metadata.work_indptr.shape[0] - 1
    mla_split_kv_attention_kernel[(num_workers,)](
        q, kv_cache, out, partial_out, partial_lse,
        metadata.query_start_loc, metadata.seq_lens,
        metadata.block_table, metadata.block_table.stride(0),
        metadata.work_indptr, metadata.work_info,
        head_dim**-0.5 if sm_scale is None else sm_scale,
        H=num_heads, LORA_RANK=kv_lora_rank, ROPE_DIM=rope_dim, BLOCK_SIZE=block_size,
        QUERY_TILE=metadata.query_tile_size, KV_TILE=metadata.kv_tile_size,
        WORK_INFO_STRIDE=len(WORK_INFO_FIELDS),
    )  # fmt: skip
    mla_reduce_partials_kernel[(metadata.num_groups,)](
        out, partial_out, partial_lse,
        metadata.reduce_indptr, metadata.reduce_final_map, metadata.reduce_partial_map,
        H=num_heads, LORA_RANK=kv_lora_rank, QUERY_TILE=metadata.query_tile_size,
    )  # fmt: skip
    return out
