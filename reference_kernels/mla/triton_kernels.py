"""Raw Triton kernels for split-KV MLA over a paged latent cache.

Layouts (contiguous; ``D = LORA_RANK + ROPE_DIM``): ``q [T, H, D]``,
``kv_cache [num_blocks, BLOCK_SIZE, D]``, ``out [T, H, LORA_RANK]``,
``partial_out [num_partial_tiles, QUERY_TILE * H, LORA_RANK]``,
``partial_lse [num_partial_tiles, QUERY_TILE * H]``. Work items and reduce maps come
from ``metadata.MLAMetadataBuilder``. A program's rows are (query, head) pairs,
``row = query_in_tile * H + head``, so all heads of a query tile share one pass over
the latent keys, as MLA's shared cache allows.
"""

from __future__ import annotations

import triton
import triton.language as tl

from reference_kernels._triton_utils import block_flag, dot, load_rows


@triton.jit
def _tile_rows(q_start, q_end, H: tl.constexpr, QUERY_TILE: tl.constexpr):
    rows = tl.arange(0, QUERY_TILE * H)
    token = q_start + rows // H
    return rows, token, rows % H, token < q_end


@triton.jit
def mla_split_kv_attention_kernel(
    q_ptr,
    kv_cache_ptr,
    out_ptr,
    partial_out_ptr,
    partial_lse_ptr,
    query_start_loc_ptr,
    seq_lens_ptr,
    block_table_ptr,
    block_table_row_stride,
    work_indptr_ptr,
    work_info_ptr,
    sm_scale,
    H: tl.constexpr,
    LORA_RANK: tl.constexpr,
    ROPE_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    QUERY_TILE: tl.constexpr,
    KV_TILE: tl.constexpr,
    WORK_INFO_STRIDE: tl.constexpr,
):
    """Persistent grid ``(num_workers,)``: each worker runs its range of work items;
    one item = one query tile of one request against one tile of its keys."""
    D: tl.constexpr = LORA_RANK + ROPE_DIM
    worker = tl.program_id(0)
    work_begin = tl.load(work_indptr_ptr + worker)
    work_end = tl.load(work_indptr_ptr + worker + 1)
    latent_cols = tl.arange(0, LORA_RANK)
    rope_cols = LORA_RANK + tl.arange(0, ROPE_DIM)
    for item in range(work_begin, work_end):
        info = work_info_ptr + item * WORK_INFO_STRIDE
        request = tl.load(info)
        q_start = tl.load(info + 1)
        q_end = tl.load(info + 2)
        kv_start = tl.load(info + 3)
        kv_end = tl.load(info + 4)
        partial_slot = tl.load(info + 5)

        request_start = tl.load(query_start_loc_ptr + request)
        query_len = tl.load(query_start_loc_ptr + request + 1) - request_start
        context_len = tl.load(seq_lens_ptr + request) - query_len

        rows, token, head, row_valid = _tile_rows(q_start, q_end, H, QUERY_TILE)
        q_row = (token.to(tl.int64) * H + head) * D
        q_latent = load_rows(q_ptr, q_row, latent_cols, row_valid)
        q_rope = load_rows(q_ptr, q_row, rope_cols, row_valid)

        kv_pos = kv_start + tl.arange(0, KV_TILE)
        kv_valid = kv_pos < kv_end
        block = tl.load(
            block_table_ptr + request.to(tl.int64) * block_table_row_stride + kv_pos // BLOCK_SIZE,
            mask=kv_valid,
            other=0,
        )
        cache_row = (block.to(tl.int64) * BLOCK_SIZE + kv_pos % BLOCK_SIZE) * D
        latent = load_rows(kv_cache_ptr, cache_row, latent_cols, kv_valid)
        rope = load_rows(kv_cache_ptr, cache_row, rope_cols, kv_valid)

        scores = (dot(q_latent, tl.trans(latent)) + dot(q_rope, tl.trans(rope))) * sm_scale
        query_in_request = token - request_start
        visible = (
            row_valid[:, None]
            & kv_valid[None, :]
            & (kv_pos[None, :] <= context_len + query_in_request[:, None])
        )
        scores = tl.where(visible, scores, float("-inf"))

        # A row can see no key of this tile (an early query against a later tile):
        # shift by 0 instead of -inf so that exp gives 0, not NaN.
        row_max = tl.max(scores, axis=1)
        shift = tl.where(row_max == float("-inf"), 0.0, row_max)
        p = tl.exp(scores - shift[:, None])
        row_sum = tl.sum(p, axis=1)
        safe_sum = tl.where(row_sum == 0.0, 1.0, row_sum)
        o = dot(p, latent) / safe_sum[:, None]
        lse = tl.where(row_sum == 0.0, float("-inf"), shift + tl.log(safe_sum))

        is_partial = block_flag(partial_slot >= 0, rows)
        out_row = (token.to(tl.int64) * H + head) * LORA_RANK
        tl.store(
            out_ptr + out_row[:, None] + latent_cols[None, :],
            o,
            mask=(row_valid & ~is_partial)[:, None],
        )
        partial_row = tl.maximum(partial_slot, 0).to(tl.int64) * (QUERY_TILE * H) + rows
        is_partial = is_partial & row_valid
        tl.store(
            partial_out_ptr + partial_row[:, None] * LORA_RANK + latent_cols[None, :],
            o,
            mask=is_partial[:, None],
        )
        tl.store(partial_lse_ptr + partial_row, lse, mask=is_partial)


@triton.jit
def mla_reduce_partials_kernel(
    out_ptr,
    partial_out_ptr,
    partial_lse_ptr,
    reduce_indptr_ptr,
    reduce_final_map_ptr,
    reduce_partial_map_ptr,
    H: tl.constexpr,
    LORA_RANK: tl.constexpr,
    QUERY_TILE: tl.constexpr,
):
    """Grid ``(num_groups,)``: softmax-merge a split group's partial tiles by their
    log-sum-exp. Unsplit groups have an empty range and store nothing."""
    group = tl.program_id(0)
    first = tl.load(reduce_indptr_ptr + group)
    last = tl.load(reduce_indptr_ptr + group + 1)
    q_start = tl.load(reduce_final_map_ptr + group * 2)
    q_end = tl.load(reduce_final_map_ptr + group * 2 + 1)
    rows, token, head, row_valid = _tile_rows(q_start, q_end, H, QUERY_TILE)
    cols = tl.arange(0, LORA_RANK)

    running_max = tl.full((QUERY_TILE * H,), float("-inf"), tl.float32)
    weight_sum = tl.zeros((QUERY_TILE * H,), tl.float32)
    acc = tl.zeros((QUERY_TILE * H, LORA_RANK), tl.float32)
    for j in range(first, last):
        slot = tl.load(reduce_partial_map_ptr + j).to(tl.int64)
        partial_row = slot * (QUERY_TILE * H) + rows
        lse = tl.load(partial_lse_ptr + partial_row, mask=row_valid, other=float("-inf"))
        o = load_rows(partial_out_ptr, partial_row * LORA_RANK, cols, row_valid)
        new_max = tl.maximum(running_max, lse)
        # A tile in which a row saw no key carries lse = -inf. The builder lists tile 0
        # (which every query sees) first, but the merge must not depend on that order:
        # keep the shift finite so that an all -inf prefix gives weights 0, not NaN.
        shift = tl.where(new_max == float("-inf"), 0.0, new_max)
        old_scale = tl.exp(running_max - shift)
        tile_weight = tl.exp(lse - shift)
        acc = acc * old_scale[:, None] + o * tile_weight[:, None]
        weight_sum = weight_sum * old_scale + tile_weight
        running_max = new_max

    safe_sum = tl.where(weight_sum == 0.0, 1.0, weight_sum)
    out_row = (token.to(tl.int64) * H + head) * LORA_RANK
    tl.store(
        out_ptr + out_row[:, None] + cols[None, :],
        acc / safe_sum[:, None],
        mask=(row_valid & block_flag(last > first, rows))[:, None],
    )
