"""GPU202: an implicit GPU->CPU sync (no sync keyword) on the per-step hot path."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sync_lint.rules.base import Finding, HotScopeRule
from sync_lint.rules.triggers import HOT_TRIGGERS, IMPLICIT_TRIGGERS

if TYPE_CHECKING:
    from sync_lint.analysis.context import FileContext


class ImplicitSyncInHotPath(HotScopeRule):
    code = "GPU202"
    name = "implicit-sync-in-hot-path"
    summary = (
        "A GPU->CPU sync without a sync keyword (a Python conversion, a condition, a data-dependent shape) "
        "on the hot path."
    )
    what = (
        "An implicit sync in a hot scope (see GPU201), outside a sync declaration or a debug-only or "
        "training-only branch:\n"
        "- a tensor read as a Python value: `int()` / `float()` / `bool()` of a tensor; a tensor as an `if` /"
        " `while` / `assert` condition, a conditional-expression test, or an operand of `and` / `or` / `not`;"
        " `.any()` / `.all()` in a condition;\n"
        "- an output whose size depends on the data: boolean-mask indexing `x[mask]`; `torch.nonzero` / "
        "`.nonzero()` / `argwhere`, one-argument `torch.where(cond)`, `torch.unique`, `masked_select`, "
        "`torch.bincount` / `.bincount()` (with `minlength=` too: its length is the largest value plus one), "
        "`F.one_hot(t)` without `num_classes=`, `torch.histc(t)` without `min=` and `max=` (its range is the "
        "data's), `repeat_interleave` with tensor repeats and no `output_size=`;\n"
        "- a Python bool read from the data: `torch.equal(a, b)` / `torch.allclose(a, b)` / "
        "`torch.is_nonzero(t)` (and the methods `a.equal(b)`, `a.allclose(b)`, `t.is_nonzero()`), reported at"
        " the call (a later `if same:` on that bool is no second sync; `torch.isclose` returns a tensor and "
        "is none);\n"
        "- a device scalar used as a Python int: `range(t)`, a slice bound `x[:t]`, a size of "
        "`torch.arange(t)` / `torch.empty(t)`;\n"
        "- a tensor formatted as text: `f\"{t}\"`, `str(t)`, `repr(t)`, `format(t)`, `print(t)`; not its "
        "metadata (`f\"{t.shape}\"`), nor a logger's lazy `%s` argument, nor the message of a `raise` or of an "
        "`assert`, paid only on the error path.\n\n"
        "The tensor must be known to be on the GPU, or, in metadata builders and the attention classes of "
        "`hot-class-methods` (`unknown-device`), certainly a tensor of unknown device (a torch op's result, "
        "`x[1:] - x[:-1]`, `x[:, 0]`, `x.sum()`): an unknown value that may be a Python int is never "
        "reported. CPU-side values and shape arithmetic are never reported."
    )
    why = (
        "Each of these needs a value (or an output size) that only the GPU knows, so PyTorch copies it to the "
        "host and waits (`aten._local_scalar_dense`, `aten.nonzero`): the same stall per step as `.item()`, "
        "the same failure of the post-warm-up sync check, the same broken CUDA-graph capture, but invisible "
        "in review because no sync keyword appears. About a third of real sync fixes are of this kind."
    )
    example = (
        "is_prefill = query_lens > 1\n"
        "num_prefills = int(is_prefill.sum())          # GPU202\n"
        "if is_prefill.any():                          # GPU202\n"
        "    idx = torch.nonzero(is_prefill)           # GPU202\n"
        "decode_slots = state_indices[~is_prefill]     # GPU202\n"
        "# fixed: count on the host copy, slice instead of masking\n"
        "num_prefills = int((query_lens_cpu > 1).sum())\n"
        "decode_slots = state_indices[:num_decodes]"
    )
    fix_safety = (
        "Unsafe, and only with `sync-guard` configured: wraps the statement in `with gpu_sync_allowed():` (plus "
        "the import). The better fix (a host copy, a static `output_size=`, slicing instead of a mask) changes "
        "the code's logic and is left to the author."
    )
    fix_applicability = "unsafe"
    triggers = IMPLICIT_TRIGGERS + HOT_TRIGGERS
    valid = (
        # Host-side counts and shape arithmetic.
        ("class GDNAttentionMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        query_lens_cpu = common.query_start_loc_cpu[1:] - common.query_start_loc_cpu[:-1]\n"
        "        num_prefills = int((query_lens_cpu > 1).sum())\n"
        "        if common.num_reqs and common.seq_lens.shape[0] > 1:\n"
        "            return num_prefills, range(common.seq_lens.size(0))\n"
        "        return num_prefills, int(common.max_query_len)\n"),
        # `repeat_interleave` with a static output size; three-argument `torch.where`.
        ("import torch\n\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x: torch.Tensor, repeats: torch.Tensor):\n"
        "        y = x.repeat_interleave(repeats, output_size=x.shape[0] * 2)\n"
        "        return torch.where(x > 0, x, y[: x.shape[0]])\n"),
        # Predicates on a tensor's metadata are Python values.
        ("import torch\n\n"
        "class Attention(torch.nn.Module):\n"
        "    def forward(self, q: torch.Tensor, mask: torch.Tensor):\n"
        "        mask = mask.to(q.device)\n"
        "        if torch.is_floating_point(mask) and not torch.is_complex(mask):\n"
        "            mask = mask.to(q.dtype)\n"
        "        return q, mask\n"),
        # Comparing host copies is free; `torch.isclose` gives a tensor that stays on the GPU.
        ("import torch\n\n"
        "class PoolingMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        partial = not torch.equal(common.prompt_lens_cpu, common.num_scheduled_tokens_cpu)\n"
        "        close = torch.isclose(common.seq_lens.to(self.device), common.query_lens.to(self.device))\n"
        "        return partial, close\n"),
        # A fixed number of classes; counting on a host copy.
        ("import torch\nimport torch.nn.functional as F\n\n"
        "class MoE(torch.nn.Module):\n"
        "    def forward(self, topk_ids: torch.Tensor, topk_ids_cpu: torch.Tensor):\n"
        "        topk_ids = topk_ids.to(self.device, non_blocking=True)\n"
        "        per_expert = torch.bincount(topk_ids_cpu.flatten(), minlength=self.num_experts)\n"
        "        spread = topk_ids.float().histc(8, 0, self.num_experts)\n"
        "        return per_expert, F.one_hot(topk_ids, num_classes=self.num_experts), F.one_hot(topk_ids, 8), spread\n"),
    )
    invalid = (
        ("import torch\n\n"
        "class GDNAttentionMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        query_lens = common.query_start_loc[1:] - common.query_start_loc[:-1]\n"
        "        is_prefill = query_lens > 1\n"
        "        num_prefills = int(is_prefill.sum())  # expect: GPU202\n"
        "        if is_prefill.any():  # expect: GPU202\n"
        "            idx = torch.nonzero(is_prefill)  # expect: GPU202\n"
        "        return common.block_table_tensor[:, 0][~is_prefill]  # expect: GPU202\n"),
        ("import torch\n\n"
        "class Sampler(torch.nn.Module):\n"
        "    def forward(self, logits: torch.Tensor):\n"
        "        logits = logits.to(self.device, non_blocking=True)\n"
        "        n = logits.argmax(-1).max()\n"
        "        for i in range(n):  # expect: GPU202\n"
        "            pass\n"
        "        return logits[:n]  # expect: GPU202\n"),
        # A Python bool read from GPU tensors: the call syncs (once), not the later use of the bool.
        ("import torch\n\n"
        "class Indexer(torch.nn.Module):\n"
        "    def forward(self, raw_positions: torch.Tensor, positions: torch.Tensor):\n"
        "        positions = positions.to(self.device, non_blocking=True)\n"
        "        same = positions.equal(raw_positions)  # expect: GPU202\n"
        "        if same or not torch.allclose(positions, raw_positions.float()):  # expect: GPU202\n"
        "            return positions\n"
        "        return torch.is_nonzero(positions[:1])  # expect: GPU202\n"),
        # Output sizes read from the data: the largest expert id, the largest class.
        ("import torch\nimport torch.nn.functional as F\n\n"
        "class MoE(torch.nn.Module):\n"
        "    def forward(self, topk_ids: torch.Tensor, labels: torch.Tensor):\n"
        "        topk_ids = topk_ids.to(self.device, non_blocking=True)\n"
        "        per_expert = torch.bincount(topk_ids.flatten(), minlength=self.num_experts)  # expect: GPU202\n"
        "        ids = topk_ids.bincount()  # expect: GPU202\n"
        "        labels = labels.to(self.device, non_blocking=True)\n"
        "        wide = F.one_hot(labels)  # expect: GPU202\n"
        "        also_wide = F.one_hot(labels, -1)  # expect: GPU202\n"
        "        spread = torch.histc(topk_ids.float(), bins=8)  # expect: GPU202\n"
        "        return per_expert, ids, wide, also_wide, spread\n"),
        # A debug print, or a log message built eagerly, formats the tensor's values on the host.
        ("import logging\n\nimport torch\n\nlogger = logging.getLogger(__name__)\n\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, positions: torch.Tensor):\n"
        "        positions = positions.to(self.device, non_blocking=True)\n"
        "        print(positions)  # expect: GPU202\n"
        "        logger.debug(f\"positions {positions}\")  # expect: GPU202\n"
        "        logger.debug(\"positions %s, shape %s\", positions, positions.shape)\n"
        "        return positions\n"),
    )

    def check(self, ctx: FileContext) -> Iterable[Finding]:
        from sync_lint.analysis.syncs import declared_findings

        return declared_findings(ctx, ("implicit",))
