"""MLA (multi-head latent attention) decode/prefill over a paged latent cache.

Per cached token the cache row holds ``[latent (kv_lora_rank) | rope (qk_rope_head_dim)]``;
all heads share it. Keys are the whole row, values the latent part, queries
(absorbed form) have the row's width: ``q [T, H, kv_lora_rank + rope]``, output
``[T, H, kv_lora_rank]``. Causality is bottom-right aligned: query ``i`` of a request
with ``q_len`` new tokens and ``seq_len`` keys sees keys ``j <= seq_len - q_len + i``.

Modules: ``metadata`` (the builder computing a persistent split-KV work partition on
the device), ``triton_kernels`` (split-KV attention and the log-sum-exp reduce),
``ops`` (``mla_forward``), ``reference`` (SDPA reference).
"""
