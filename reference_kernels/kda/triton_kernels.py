"""Raw Triton kernels for KDA over a pool of recurrent states.

Like production kernels these trust their arguments: index tensors are read as
``ptr + i`` (stride 1), data tensors are assumed contiguous. ``ops`` checks first.

State pool: ``state[num_slots, H, K, V]`` fp32. Sequence ``n`` reads its initial state
from slot ``state_indices[n]`` (zeros when ``has_initial_state[n]`` is false) and writes
its final state back to that slot and, when checkpoint indices are given, also to slot
``checkpoint_state_indices[n]`` (the prefix-cache copy of the state at the end of this
chunk of the prompt).
"""

from __future__ import annotations

import triton
import triton.language as tl

from reference_kernels._triton_utils import block_flag, dot, load_rows


@triton.jit
def _state_offsets(slot, head, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr):
    rk = tl.arange(0, K)
    rv = tl.arange(0, V)
    base = (slot.to(tl.int64) * H + head) * K * V
    return base + rk[:, None] * V + rv[None, :]


@triton.jit
def kda_chunk_prefill_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    beta_ptr,
    o_ptr,
    state_ptr,
    cu_seqlens_ptr,
    state_indices_ptr,
    has_initial_state_ptr,
    checkpoint_state_indices_ptr,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    LOG2_BT: tl.constexpr,
    HAS_INITIAL_STATE_FLAGS: tl.constexpr,
    HAS_CHECKPOINT: tl.constexpr,
):
    """Grid ``(num_seqs, H)``: one program runs one sequence and head, chunk by chunk.

    Per chunk of ``BT`` tokens (WY form, see ``reference.kda_chunked_reference``) with
    ``G`` the inclusive cumulative log-decay inside the chunk:
    ``U = (I + diag(beta) A)^-1 diag(beta) (V - (k*exp(G)) S)``, then
    ``O = scale ((q*exp(G)) S + Aqk U)`` and ``S = exp(G_last) S + (k*exp(G_last-G))^T U``.
    """
    seq = tl.program_id(0)
    head = tl.program_id(1)
    bos = tl.load(cu_seqlens_ptr + seq)
    eos = tl.load(cu_seqlens_ptr + seq + 1)
    slot = tl.load(state_indices_ptr + seq)

    rk = tl.arange(0, K)
    rv = tl.arange(0, V)
    rt = tl.arange(0, BT)
    state_offsets = _state_offsets(slot, head, H, K, V)
    if HAS_INITIAL_STATE_FLAGS:
        # A masked load, not a multiply by 0: a slot that never held a state may
        # contain NaN garbage.
        has_initial_state = tl.load(has_initial_state_ptr + seq) != 0
        state = tl.load(
            state_ptr + state_offsets, mask=block_flag(has_initial_state, state_offsets), other=0.0
        )
    else:
        state = tl.load(state_ptr + state_offsets)

    causal = rt[:, None] >= rt[None, :]
    strictly_causal = rt[:, None] > rt[None, :]
    eye = (rt[:, None] == rt[None, :]).to(tl.float32)
    for chunk_start in range(bos, eos, BT):
        tokens = chunk_start + rt
        valid = tokens < eos
        token_head = tokens.to(tl.int64) * H + head
        # Rows past the end of the sequence load as zeros: k = v = g = beta = 0 makes
        # them contribute nothing and leave the cumulative decay unchanged.
        q = load_rows(q_ptr, token_head * K, rk, valid)
        k = load_rows(k_ptr, token_head * K, rk, valid)
        g = load_rows(g_ptr, token_head * K, rk, valid)
        v = load_rows(v_ptr, token_head * V, rv, valid)
        beta = tl.load(beta_ptr + token_head, mask=valid, other=0.0).to(tl.float32)

        cum = tl.cumsum(g, axis=0)
        # exp(G_t - G_s) per key channel for s <= t; -inf elsewhere so exp gives 0 and
        # no positive exponent is ever evaluated.
        pairwise = cum[:, None, :] - cum[None, :, :]
        decay = tl.exp(tl.where(causal[:, :, None], pairwise, float("-inf")))
        a_kk = tl.sum(k[:, None, :] * k[None, :, :] * decay, axis=2)
        a_qk = tl.sum(q[:, None, :] * k[None, :, :] * decay, axis=2)

        # (I - M)^-1 with M = -diag(beta) A strictly lower triangular, so M^BT = 0 and
        # (I - M)^-1 = (I + M)(I + M^2)(I + M^4)...(I + M^(BT/2)).
        m = tl.where(strictly_causal, -beta[:, None] * a_kk, 0.0)
        inverse = eye + m
        power = m
        for _ in tl.static_range(LOG2_BT - 1):
            power = dot(power, power)
            inverse = inverse + dot(inverse, power)

        decay_from_start = tl.exp(cum)
        w = beta[:, None] * (v - dot(k * decay_from_start, state))
        u = dot(inverse, w)
        o = scale * (dot(q * decay_from_start, state) + dot(a_qk, u))
        tl.store(o_ptr + token_head[:, None] * V + rv[None, :], o, mask=valid[:, None])

        total = tl.sum(g, axis=0)  # G at the chunk's last valid row
        k_to_end = k * tl.exp(total[None, :] - cum)
        state = state * tl.exp(total)[:, None] + dot(tl.trans(k_to_end), u)

    tl.store(state_ptr + state_offsets, state)
    if HAS_CHECKPOINT:
        checkpoint_slot = tl.load(checkpoint_state_indices_ptr + seq)
        tl.store(state_ptr + _state_offsets(checkpoint_slot, head, H, K, V), state)


@triton.jit
def kda_decode_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    beta_ptr,
    o_ptr,
    state_ptr,
    state_indices_ptr,
    scale,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
):
    """Grid ``(num_seqs, H)``: one new token per sequence, state updated in place."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    rk = tl.arange(0, K)
    rv = tl.arange(0, V)
    row = seq.to(tl.int64) * H + head
    q = tl.load(q_ptr + row * K + rk).to(tl.float32)
    k = tl.load(k_ptr + row * K + rk).to(tl.float32)
    g = tl.load(g_ptr + row * K + rk).to(tl.float32)
    v = tl.load(v_ptr + row * V + rv).to(tl.float32)
    beta = tl.load(beta_ptr + row).to(tl.float32)

    state_offsets = _state_offsets(tl.load(state_indices_ptr + seq), head, H, K, V)
    state = tl.load(state_ptr + state_offsets) * tl.exp(g)[:, None]
    u = beta * (v - tl.sum(state * k[:, None], axis=0))
    state = state + k[:, None] * u[None, :]
    o = scale * tl.sum(state * q[:, None], axis=0)
    tl.store(o_ptr + row * V + rv, o)
    tl.store(state_ptr + state_offsets, state)
