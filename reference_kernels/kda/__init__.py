"""Kimi Delta Attention (gated delta rule with per-key-channel decay).

Convention, per head, state ``S`` in ``R^{K x V}`` and token ``t``::

    S  <- diag(exp(g_t)) S                      # g_t in R^K, log-decay <= 0
    u_t = beta_t * (v_t - S^T k_t)              # delta-rule error, uses the decayed S
    S  <- S + k_t u_t^T
    o_t = scale * S^T q_t                       # read after the update

``scale`` defaults to ``K ** -0.5``. Tokens are packed varlen: ``q, k, g: [T, H, K]``,
``v: [T, H, V]``, ``beta: [T, H]``, sequence ``n`` owning rows
``cu_seqlens[n]:cu_seqlens[n + 1]``. The kernels leave normalising ``q`` / ``k`` to the
caller.

Modules: ``reference`` (PyTorch fp32 references), ``triton_kernels`` (raw kernels),
``ops`` (the checked kernel boundary).
"""
