"""Kernel boundary for KDA: argument checks, then the raw Triton launch.

``fused_kda_chunk`` / ``fused_kda_decode`` reject index tensors that are not contiguous
int32 with ``ValueError("... must be contiguous int32 ...")``, as the upstream kernel's
C++ boundary does. The check is on dtype and layout only: reading index values would
be a GPU->CPU sync.

``_launch_kda_prefill`` skips the checks. Tests use it to show what the check prevents:
handed a strided view (``block_table[:, 0]``), the kernel reads ``ptr + i``, i.e. the
wrong slots, and overwrites other requests' states.
"""

from __future__ import annotations

import torch

from reference_kernels._boundary import (
    check_block_size,
    check_dense,
    check_index_tensor,
)
from reference_kernels.kda.triton_kernels import (
    kda_chunk_prefill_kernel,
    kda_decode_kernel,
)


def _check_token_tensors(q, k, v, g, beta, state_cache) -> None:
    num_tokens, num_heads, head_k = q.shape
    head_v = v.shape[-1]
    check_block_size("key head dim", head_k)
    check_block_size("value head dim", head_v)
    for name, tensor in (("q", q), ("k", k), ("g", g)):
        check_dense(name, tensor, (num_tokens, num_heads, head_k))
    check_dense("v", v, (num_tokens, num_heads, head_v))
    check_dense("beta", beta, (num_tokens, num_heads))
    check_dense("state_cache", state_cache, (state_cache.shape[0], num_heads, head_k, head_v))
    if state_cache.dtype != torch.float32:
        raise ValueError(f"state_cache must be float32, got {state_cache.dtype}")


def fused_kda_chunk(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state_cache: torch.Tensor,
    state_indices: torch.Tensor,
    cu_seqlens: torch.Tensor,
    has_initial_state: torch.Tensor | None = None,
    checkpoint_state_indices: torch.Tensor | None = None,
    scale: float | None = None,
    chunk_size: int = 16,
) -> torch.Tensor:
    """Chunked KDA prefill over a packed varlen batch; returns ``o [T, H, V]``.

    ``state_cache[num_slots, H, K, V]`` (fp32) is read and written in place through
    ``state_indices[num_seqs]``; ``has_initial_state[num_seqs]`` (bool or int32; None
    means all true) selects zeros instead of the stored state; the final state is also
    written to ``checkpoint_state_indices[num_seqs]`` when given. Sequences may be
    empty (their state is copied, or zeroed, unchanged). ``chunk_size``, K and V are
    powers of two >= 16.
    """
    check_index_tensor("cu_seqlens", cu_seqlens)
    num_seqs = cu_seqlens.shape[0] - 1
    check_index_tensor("state_indices", state_indices, num_seqs)
    if checkpoint_state_indices is not None:
        check_index_tensor("checkpoint_state_indices", checkpoint_state_indices, num_seqs)
    if has_initial_state is not None and (
        has_initial_state.dtype not in (torch.bool, torch.int32)
        or not has_initial_state.is_contiguous()
        or has_initial_state.shape != (num_seqs,)
    ):
        raise ValueError(
            f"has_initial_state must be a contiguous bool or int32 tensor of {num_seqs} rows"
        )
    _check_token_tensors(q, k, v, g, beta, state_cache)
    check_block_size("chunk_size", chunk_size)
    return _launch_kda_prefill(
        q, k, v, g, beta, state_cache, state_indices, cu_seqlens,
        has_initial_state, checkpoint_state_indices, scale, chunk_size,
    )  # fmt: skip


def _launch_kda_prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state_cache: torch.Tensor,
    state_indices: torch.Tensor,
    cu_seqlens: torch.Tensor,
    has_initial_state: torch.Tensor | None = None,
    checkpoint_state_indices: torch.Tensor | None = None,
    scale: float | None = None,
    chunk_size: int = 16,
) -> torch.Tensor:
    """The raw launch behind :func:`fused_kda_chunk` (same signature, no checks)."""
    _, num_heads, head_k = q.shape
    head_v = v.shape[-1]
    num_seqs = cu_seqlens.shape[0] - 1
    o = torch.empty_like(v)
    if num_seqs == 0:
        return o
    kda_chunk_prefill_kernel[(num_seqs, num_heads)](
        q, k, v, g, beta, o, state_cache,
        cu_seqlens, state_indices, has_initial_state, checkpoint_state_indices,
        head_k**-0.5 if scale is None else scale,
        H=num_heads, K=head_k, V=head_v,
        BT=chunk_size, LOG2_BT=chunk_size.bit_length() - 1,
        HAS_INITIAL_STATE_FLAGS=has_initial_state is not None,
        HAS_CHECKPOINT=checkpoint_state_indices is not None,
    )  # fmt: skip
    return o


def fused_kda_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state_cache: torch.Tensor,
    state_indices: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """One token per sequence: ``q, k, g: [N, H, K]``, ``v: [N, H, V]``, ``beta: [N, H]``.

    Reads and updates ``state_cache[state_indices[n]]`` in place; returns ``o [N, H, V]``.
    """
    num_seqs, num_heads, head_k = q.shape
    head_v = v.shape[-1]
    check_index_tensor("state_indices", state_indices, num_seqs)
    _check_token_tensors(q, k, v, g, beta, state_cache)
    o = torch.empty_like(v)
    if num_seqs == 0:
        return o
    kda_decode_kernel[(num_seqs, num_heads)](
        q, k, v, g, beta, o, state_cache, state_indices,
        head_k**-0.5 if scale is None else scale,
        H=num_heads, K=head_k, V=head_v,
    )  # fmt: skip
    return o
