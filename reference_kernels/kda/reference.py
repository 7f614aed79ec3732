"""PyTorch fp32 references for KDA (convention: see ``reference_kernels.kda``).

``kda_recurrent_reference`` is the token-by-token definition. ``kda_chunked_reference``
is the chunked (WY) form the Triton prefill kernel implements; within a chunk of
length ``C`` with inclusive cumulative log-decay ``G_t = g_1 + ... + g_t``:

    A[t, s]   = sum_k k_t[k] k_s[k] exp(G_t[k] - G_s[k])           (s < t)
    (I + diag(beta) A) U = diag(beta) (V - (k * exp(G)) S0)       # U: rows u_t
    O         = scale * ((q * exp(G)) S0 + Aqk U),  Aqk like A with q_t, s <= t
    S_C       = exp(G_C) * S0 + (k * exp(G_C - G))^T U

The pairwise decays are formed as ``exp(G_t - G_s)`` with ``s <= t`` (exponent <= 0),
never as ``exp(G_t) * exp(-G_s)``, which overflows fp32 for strong decay.
"""

from __future__ import annotations

import torch


def _default_scale(head_dim: int, scale: float | None) -> float:
    return head_dim**-0.5 if scale is None else scale


def _initial_state(
    initial_state: torch.Tensor | None, k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """fp32 copy of ``initial_state`` (zeros if None) for token-major ``k`` / ``v``."""
    if initial_state is not None:
        return initial_state.float().clone()
    return k.new_zeros(k.shape[1], k.shape[2], v.shape[2], dtype=torch.float32)


def kda_recurrent_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence: ``q, k, g: [T, H, K]``, ``v: [T, H, V]``, ``beta: [T, H]``,
    ``initial_state: [H, K, V]`` (zeros if None). Returns ``(o [T, H, V], S [H, K, V])``."""
    scale = _default_scale(q.shape[-1], scale)
    q, k, v, g, beta = (x.float() for x in (q, k, v, g, beta))
    state = _initial_state(initial_state, k, v)
    o = torch.empty_like(v)
    for t in range(q.shape[0]):
        state = state * g[t].exp()[:, :, None]
        error = v[t] - torch.einsum("hkv,hk->hv", state, k[t])
        state = state + torch.einsum("hk,hv->hkv", k[t], beta[t][:, None] * error)
        o[t] = scale * torch.einsum("hkv,hk->hv", state, q[t])
    return o, state


def kda_chunked_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor | None = None,
    scale: float | None = None,
    chunk_size: int = 16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same contract as :func:`kda_recurrent_reference`, computed chunk by chunk."""
    scale = _default_scale(q.shape[-1], scale)
    state = _initial_state(initial_state, k, v)
    # Work head-major: [H, T, D].
    q, k, v, g = (x.float().transpose(0, 1) for x in (q, k, v, g))
    beta = beta.float().transpose(0, 1)
    o = torch.empty_like(v)
    for start in range(0, q.shape[1], chunk_size):
        chunk = slice(start, start + chunk_size)
        qc, kc, vc, gc, bc = q[:, chunk], k[:, chunk], v[:, chunk], g[:, chunk], beta[:, chunk]
        length = qc.shape[1]
        cum = gc.cumsum(dim=1)  # G_t, [H, C, K]
        causal = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
        # exp(G_t - G_s) for s <= t, 0 above the diagonal: [H, C, C, K].
        decay = torch.where(
            causal[None, :, :, None],
            (cum[:, :, None, :] - cum[:, None, :, :]).exp(),
            0.0,
        )
        a_kk = torch.einsum("htk,hsk,htsk->hts", kc, kc, decay).tril(diagonal=-1)
        a_qk = torch.einsum("htk,hsk,htsk->hts", qc, kc, decay)
        eye = torch.eye(length, device=q.device)
        rhs = bc[..., None] * (vc - torch.einsum("htk,hkv->htv", kc * cum.exp(), state))
        u = torch.linalg.solve_triangular(
            eye + bc[..., None] * a_kk, rhs, upper=False, unitriangular=True
        )
        o[:, chunk] = scale * (torch.einsum("htk,hkv->htv", qc * cum.exp(), state) + a_qk @ u)
        last = cum[:, -1]  # G_C, [H, K]
        state = state * last.exp()[..., None] + torch.einsum(
            "htk,htv->hkv", kc * (last[:, None, :] - cum).exp(), u
        )
    return o.transpose(0, 1).contiguous(), state


def kda_varlen_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    cu_seqlens: list[int],
    initial_states: list[torch.Tensor | None],
    scale: float | None = None,
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Packed batch through :func:`kda_recurrent_reference`, one sequence at a time.

    Returns the packed outputs ``[T, H, V]`` and each sequence's final state."""
    outputs, final_states = [], []
    for n, initial_state in enumerate(initial_states):
        rows = slice(cu_seqlens[n], cu_seqlens[n + 1])
        o, state = kda_recurrent_reference(
            q[rows], k[rows], v[rows], g[rows], beta[rows], initial_state, scale
        )
        outputs.append(o)
        final_states.append(state)
    return torch.cat(outputs), final_states
