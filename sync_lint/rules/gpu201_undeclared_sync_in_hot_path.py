"""GPU201: an explicit GPU->CPU sync on the per-step hot path, not declared."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sync_lint.rules.base import Finding, HotScopeRule
from sync_lint.rules.triggers import EXPLICIT_TRIGGERS, HOT_TRIGGERS

if TYPE_CHECKING:
    from sync_lint.analysis.context import FileContext


class UndeclaredSyncInHotPath(HotScopeRule):
    code = "GPU201"
    name = "undeclared-sync-in-hot-path"
    summary = "An explicit GPU->CPU sync on the per-step hot path, outside a sync declaration."
    what = (
        "An explicit sync on a tensor that may live on the GPU, in a hot scope: `.item()`, `.tolist()`, "
        "`.cpu()`, `.numpy()`, `.to(\"cpu\")`, a blocking `cpu_tensor.copy_(gpu_tensor)`, "
        "`torch.cuda.synchronize()` and stream / event `.synchronize()`.\n\n"
        "Hot scopes:\n"
        "- the `build` / `_build_*` / `build_for_cudagraph_capture` methods of `*MetadataBuilder` classes;\n"
        "- `forward` of `nn.Module` subclasses, and their other methods named like `hot-method-patterns` "
        "(`_build_*`...), also a class that is one only by way of a base another file of its package "
        "defines, as vLLM's layers derived from `CustomOp` (a run of some files reads the bases' files "
        "from beside them);\n"
        "- the per-step methods of the engines' attention classes (`hot-class-methods`): vLLM's `*Impl` "
        "(`forward`, `forward_mqa`, `forward_mha`), SGLang's `*Backend` (`forward`, `forward_decode`, "
        "`forward_extend`, `init_forward_metadata_in_graph`; not the host-side `init_forward_metadata` / "
        "`init_forward_metadata_out_graph`);\n"
        "- `torch.compile`d functions, code inside `with torch.cuda.graph(...)`, and `hot-functions`.\n\n"
        "A hot call of a function (of any checked file) that syncs is reported at the call, naming the "
        "function and its sync:\n"
        "- a function of the same file is judged with the call's host arguments too: a helper that syncs only"
        " on a parameter the call passes a CPU tensor or numpy array for is no sync there, unless a call it "
        "still makes syncs (the message then names it);\n"
        "- and with its GPU arguments: one that syncs only on a parameter (`def max_len(lens): return "
        "int(lens.max().item())`, no sync by itself, its parameter's place being unknown there) is reported "
        "where a hot call hands it a value known to be on the GPU (`max_len(lens)` after `lens = "
        "lens_cpu.to(x.device)`), directly or through another function of the file it hands the value on to; "
        "not where it is handed a host tensor or a value of unknown place;\n"
        "- a function of another file, where it makes an explicit sync (`.item()`, `.tolist()`, `.cpu()`...) "
        "on the parameter a hot call hands a GPU value (its summary records which parameters it syncs on that"
        " way, not its implicit syncs nor what it hands on to other functions);\n"
        "- a function of any file that syncs only under a flag parameter (`if return_host: out.cpu()`, or "
        "`out.cpu() if return_host else None`): only where the call passes that flag as the literal that "
        "takes the sync, another value the call cannot tell, or leaves it to such a default;\n"
        "- one that syncs only where a parameter is `None` (`if max_seqlen is None: max_seqlen = "
        "int(lens.max().item())`, or `if max_seqlen is not None: return max_seqlen` before the sync): only "
        "where the call leaves it out, passes `None`, or a value that may be `None`; not where it passes a "
        "literal, a shape (`x.shape[0]`), a call of `int` / `len` / `max`..., arithmetic, a local only ever "
        "assigned such values, or a parameter annotated with a type that excludes `None` (`max_seqlen: int`)."
        " A wrapper that hands on a flag parameter of its own (annotated `bool` or defaulting to `True` / "
        "`False`), or one defaulting to `None`, unchanged, carries the condition to its callers.\n\n"
        "Not reported:\n"
        "- syncs inside `with gpu_sync_allowed():` (see `sync-declarations`);\n"
        "- a debug-only branch: `if envs.VLLM_DEBUG:`, `if self.debug:`, `if __debug__:`, or a flag named for"
        " another opt-in diagnostic mode (`if envs.SGLANG_TRACE_LOGITS_E2E_SYNC.get():`, `if "
        "envs.VLLM_X_PROFILE:`, `if self.enable_trace:`; not `if self.enable_trace_free_path:`);\n"
        "- a check switched on from the environment: `if _GATHER_CHECK:` where the module binds, once, "
        "`_GATHER_CHECK = os.environ.get(\"X_GATHER_CHECK\", \"0\") == \"1\"` (or `os.getenv`, "
        "`get_bool_env_var(...)` defaulting to false) to a name that says check, validate, verify or sanity; "
        "a check on unless switched off, or one whose default the file does not write (`envs.X_CHECK`), counts;\n"
        "- a training-only branch: `if self.training:`, the `else` of `if not self.training:` (vLLM and "
        "SGLang serve models in eval mode, their model loaders returning `model.eval()`); either kind of "
        "branch also as an arm of a conditional expression (`t.item() if self.debug else 0`);\n"
        "- CPU-side receivers: `*_cpu`, `*_np`, `*_host`, `device=\"cpu\"`, `pin_memory=True`, results of "
        "`.cpu()` / `.numpy()` / `.tolist()`, numpy arrays, Python values, a tensor where a test says it is "
        "on the CPU (`if t.is_cpu:`, `if t.device.type == \"cpu\":`; not `if not t.is_cuda:`, which another "
        "accelerator passes too);\n"
        "- shape arithmetic: `x.shape[0]`, `x.size(0)`, `x.numel()`, `len(x)`;\n"
        "- cold code: `__init__`, weight loading, warm-up, capture set-up (`cold-function-patterns`); "
        "functions and methods memoized with `functools.lru_cache` / `functools.cache` and no "
        "tensor-annotated parameter, which run once per key;\n"
        "- lazy initialisation, which also runs once per key: the body of `if self._pool is None:` / `if not "
        "self._ready:` / `if key not in self._cache:` / `if not hasattr(self, \"_frames\"):` (or `if pool is "
        "None:` after `pool = self._pools.get(key)`) that itself sets what it tests, or the code after `if "
        "key in self._done: return` that records `key` (or calls a method of the module-level object whose "
        "attribute it tests: `TRANSPORT.init(group)` after `if TRANSPORT.inited: return True`), where the "
        "state outlives the step: on `self`, a module-level name, or the `layer` module an attention class is"
        " handed (`if layer._o_scale is None:`, `cached = getattr(layer, \"_scale\", None)`), not on the step's"
        " metadata or batch. Likewise a high-water mark, which runs once per new maximum (warm-up meets the "
        "largest): the body of `if n > self.cap:` (or `if h > self.size[0] or w > self.size[1]:`) that sets "
        "`self.cap`, where no other method but `__init__` sets it. Not a single-entry cache (`if key != self._last_key:`, which runs whenever the "
        "key changes), a test with more conditions, nor state another method sets back to `None` or empty (a "
        "per-step memo).\n\n"
        "A receiver of unknown device is reported in the methods of metadata builders and of those attention "
        "classes only (`unknown-device`)."
    )
    why = (
        "The host waits for the GPU to drain its queue, every step: the CPU can no longer run ahead to prepare "
        "the next launches, so the GPU idles (a stall per step, worse per layer). An engine that arms "
        "`torch.cuda.set_sync_debug_mode(\"error\")` after warm-up (the post-warm-up sync check) fails every "
        "request with \"called a synchronizing CUDA operation\"; inside CUDA-graph capture the sync is illegal "
        "and the capture fails (`cudaErrorStreamCaptureUnsupported`); under `torch.compile` `.item()` is a graph "
        "break. A sync that is truly needed (the host must size an allocation) must be declared with "
        "`with gpu_sync_allowed():`, a no-op unless the check is on."
    )
    example = (
        "class AiterMLAMetadataBuilder(MLAMetadataBuilder):\n"
        "    def _build_fp8_prefill_ps_metadata(self, ...):\n"
        "        num_partial_tiles = int(self.fp8_ps_reduce_indptr[-1].item())   # GPU201\n"
        "# fixed:\n"
        "        with gpu_sync_allowed():\n"
        "            num_partial_tiles = int(self.fp8_ps_reduce_indptr[-1].item())"
    )
    fix_safety = (
        "Unsafe (only with `--unsafe-fixes`), and only when `sync-guard = \"package.module:gpu_sync_allowed\"` "
        "is configured: wraps the smallest enclosing statement in `with gpu_sync_allowed():` and imports it. "
        "It declares the sync rather than removing it; whether the sync is acceptable (or should read a host "
        "copy instead) is the author's call."
    )
    fix_applicability = "unsafe"
    triggers = EXPLICIT_TRIGGERS + HOT_TRIGGERS
    # The configured declarations too: the words of a hot scope and of a declared sync.
    trigger_options = (*HotScopeRule.trigger_options, "sync-declarations")
    valid = (
        # Host copies: `.item()` / `.tolist()` on CPU tensors are free.
        ("class FlashMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        seq_lens = common.seq_lens_cpu.tolist()\n"
        "        num_tokens = common.query_start_loc_cpu[-1].item()\n"
        "        return seq_lens, num_tokens\n"),
        # Declared, debug-only, shape arithmetic, and cold set-up.
        ("import torch\n"
        "from vllm.utils.gpu_sync_debug import gpu_sync_allowed\n\n"
        "class MLAMetadataBuilder:\n"
        "    def __init__(self, device):\n"
        "        self.indptr = torch.zeros(8, device=device)\n"
        "        self.capacity = int(self.indptr[-1].item())\n\n"
        "    def build(self, common):\n"
        "        with gpu_sync_allowed():\n"
        "            n = int(self.indptr[-1].item())\n"
        "        if self.debug:\n"
        "            print(self.indptr.tolist())\n"
        "        return n, common.seq_lens.shape[0], common.seq_lens.numel()\n"),
        # Not hot: a plain function no hot scope calls.
        ("import torch\n\n"
        "def summarize(x):\n"
        "    return torch.zeros(4, device='cuda').tolist()\n"),
        # A memoized probe: it syncs once per device, not per step.
        ("import functools\n"
        "import torch\n\n"
        "@functools.lru_cache\n"
        "def supports_fast_path(device: torch.device) -> bool:\n"
        "    return torch.ones(2, device=device).sum().item() == 2\n\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x: torch.Tensor):\n"
        "        x = x.to(self.device)\n"
        "        return x * 2 if supports_fast_path(x.device) else x\n"),
        # Lazy initialisation through `hasattr`, and a training-only branch (served in eval mode).
        ("import torch\n\n"
        "class Embedding(torch.nn.Module):\n"
        "    def forward(self, x: torch.Tensor):\n"
        "        if not hasattr(self, 'table'):\n"
        "            self.table = torch.arange(8, device='cuda')\n"
        "            self.width = int(self.table.max().item())\n"
        "        if self.training:\n"
        "            print(self.table.sum().item())\n"
        "        return x + self.table[: self.width]\n"),
        # Lazy initialisation: the first launch per group syncs, later ones find the key recorded.
        ("import torch\n\n"
        "class MegaMoEExperts(torch.nn.Module):\n"
        "    def _synchronize_first_launch(self, group):\n"
        "        key = (id(group), torch.accelerator.current_device_index())\n"
        "        if key in self._synchronized_groups:\n"
        "            return\n"
        "        torch.accelerator.synchronize()\n"
        "        self._synchronized_groups.add(key)\n\n"
        "    def forward(self, x: torch.Tensor, group):\n"
        "        self._synchronize_first_launch(group)\n"
        "        if self._pool is None:\n"
        "            torch.cuda.synchronize()\n"
        "            self._pool = make_pool(x.device)\n"
        "        return x\n"),
        # An opt-in trace switch (an environment field): the sync runs only when someone traces.
        ("import torch\n"
        "from sglang.srt.environ import envs\n\n"
        "class LogitsProcessor(torch.nn.Module):\n"
        "    def forward(self, hidden_states, lm_head):\n"
        "        if envs.SGLANG_TRACE_LOGITS_E2E_SYNC.get():\n"
        "            torch.cuda.synchronize()\n"
        "        return lm_head(hidden_states)\n"),
        # SGLang's attention-backend contract: host work before the graph, in `_out_graph`.
        ("class FlashAttentionBackend(AttentionBackend):\n"
        "    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):\n"
        "        self.max_seq_len = forward_batch.seq_lens.max().item()\n"),
    )
    invalid = (
        ("class AiterMLAMetadataBuilder(MLAMetadataBuilder):\n"
        "    def _build_fp8_prefill_ps_metadata(self, common):\n"
        "        num_partial_tiles = int(self.fp8_ps_reduce_indptr[-1].item())  # expect: GPU201\n"
        "        return num_partial_tiles\n"),
        # A helper that syncs, reported where the hot scope calls it.
        ("import torch\n\n"
        "def host_lens(device):\n"
        "    return torch.ones(4, device=device).tolist()\n\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x: torch.Tensor):\n"
        "        x = x.to(self.device, non_blocking=True)\n"
        "        lens = host_lens(x.device)  # expect: GPU201\n"
        "        torch.cuda.synchronize()  # expect: GPU201\n"
        "        return x.cpu(), lens  # expect: GPU201\n"),
        # A helper that syncs on what it is handed: handed a GPU tensor, not its host copy.
        ("import torch\n\n"
        "def max_len(lens):\n"
        "    return int(lens.max().item())\n\n"
        "class VisionAttention(torch.nn.Module):\n"
        "    def forward(self, x: torch.Tensor, lens_cpu: torch.Tensor):\n"
        "        lens = lens_cpu.to(x.device)\n"
        "        n = max_len(lens)  # expect: GPU201\n"
        "        m = max_len(lens_cpu)\n"
        "        return x[:n], lens, m\n"),
        # A fast-path switch whose name only contains `trace`: it runs every step.
        ("import torch\n\n"
        "class LogitsProcessor(torch.nn.Module):\n"
        "    def forward(self, hidden_states, lm_head):\n"
        "        if self.enable_trace_free_path:\n"
        "            torch.cuda.synchronize()  # expect: GPU201\n"
        "        return lm_head(hidden_states)\n"),
        # A single-entry cache keyed by the step's lengths: it syncs whenever they change.
        ("import torch\n\n"
        "class SparseMLAMetadataBuilder:\n"
        "    def build(self, common_prefix_len, common):\n"
        "        key = common.seq_lens_cpu.numpy().tobytes()\n"
        "        if key != self._prev_key:\n"
        "            torch.cuda.current_stream().synchronize()  # expect: GPU201\n"
        "            self._prev_key = key\n"
        "        return key\n"),
        # An attention implementation's step, and SGLang's graph-recorded metadata step.
        ("class FlashAttentionImpl(AttentionImpl):\n"
        "    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output):\n"
        "        max_len = attn_metadata.seq_lens.max().item()  # expect: GPU201\n"
        "        return output[:max_len]\n\n"
        "class FlashAttentionBackend(AttentionBackend):\n"
        "    def init_forward_metadata_in_graph(self, forward_batch):\n"
        "        self.lens = forward_batch.seq_lens.tolist()  # expect: GPU201\n"),
    )

    def check(self, ctx: FileContext) -> Iterable[Finding]:
        from sync_lint.analysis.syncs import declared_findings

        return declared_findings(ctx, ("explicit", "call"))
