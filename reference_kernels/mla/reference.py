"""MLA reference through ``torch.nn.functional.scaled_dot_product_attention``.

SDPA's ``is_causal=True`` is top-left aligned, wrong when a request has fewer new
queries than keys, so the bottom-right mask is passed explicitly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def bottom_right_causal_mask(query_len: int, seq_len: int, device: torch.device) -> torch.Tensor:
    """``[query_len, seq_len]`` bool: query ``i`` sees key ``j`` iff
    ``j <= seq_len - query_len + i``."""
    query = torch.arange(query_len, device=device)[:, None]
    key = torch.arange(seq_len, device=device)[None, :]
    return key <= seq_len - query_len + query


def mla_reference(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    block_table: torch.Tensor,
    query_lens: list[int],
    seq_lens: list[int],
    kv_lora_rank: int,
    sm_scale: float | None = None,
) -> torch.Tensor:
    """fp32 reference for ``mla_forward``; lengths are host lists."""
    block_size, head_dim = kv_cache.shape[1], kv_cache.shape[2]
    out = q.new_empty(q.shape[0], q.shape[1], kv_lora_rank, dtype=torch.float32)
    start = 0
    for request, (query_len, seq_len) in enumerate(zip(query_lens, seq_lens)):
        if query_len == 0:
            continue
        num_blocks = -(-seq_len // block_size)
        rows = kv_cache[block_table[request, :num_blocks].long()].reshape(-1, head_dim)[:seq_len]
        keys = rows.float()[None]  # [1, S, D], broadcast over heads
        values = rows[:, :kv_lora_rank].float()[None]
        queries = q[start : start + query_len].float().transpose(0, 1)  # [H, Q, D]
        mask = bottom_right_causal_mask(query_len, seq_len, q.device)
        attended = F.scaled_dot_product_attention(
            queries, keys.expand(q.shape[1], -1, -1), values.expand(q.shape[1], -1, -1),
            attn_mask=mask, scale=sm_scale,
        )  # fmt: skip
        out[start : start + query_len] = attended.transpose(0, 1)
        start += query_len
    return out
