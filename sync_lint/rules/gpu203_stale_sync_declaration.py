"""GPU203: a sync declaration that declares nothing any more."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sync_lint.rules.base import (
    BLOCK_CALLEES,
    HOST_COPY,
    CalleeCondition,
    Finding,
    Rule,
)
from sync_lint.rules.triggers import DECLARATION_TRIGGERS

if TYPE_CHECKING:
    from sync_lint.analysis.context import FileContext


class StaleSyncDeclaration(Rule):
    code = "GPU203"
    name = "stale-sync-declaration"
    summary = "A `with gpu_sync_allowed():` block contains nothing that can sync."
    what = (
        "A sync declaration (`with gpu_sync_allowed():`, one item of a `with` of several, or `with cm:` where "
        "`cm = nullcontext() if cond else gpu_sync_allowed()`) in any function, whose block contains nothing "
        "that can sync: no explicit or implicit sync on a value that is not known to be host-side, and no call "
        "that might sync. Judged broadly, so as never to call a needed declaration stale: any receiver not "
        "known to be CPU-side counts (whatever `unknown-device` says), and so does any call that is not known "
        "to be sync-free: a call of a function of another file always keeps the block alive (its code is not "
        "seen here), a function of the same file is looked into, a `torch.ops` custom op counts, `await` and "
        "`yield` count. Reading an attribute named for a host copy (`common.seq_lens_cpu`, "
        "`batch.positions_np`) of another object may run a property that makes the copy on first read, and "
        "syncs there (vLLM's `CommonAttentionMetadata.seq_lens_cpu` was one, and is in forks of it): such a "
        "block is reported only if no file of the run defines a property of that name (`@property`, "
        "`@cached_property`); a property of the function's own class is judged as the function it is, and a "
        "field the class sets is no property."
    )
    why = (
        "The sync it declared is gone (the code now reads a host copy), but the exemption stays: the next sync "
        "anyone adds inside the block is silently allowed, so the post-warm-up sync check cannot catch it and "
        "the per-step stall it causes goes unnoticed. A declaration should mark exactly the syncs that remain."
    )
    example = (
        "seq_lens_cpu = common.seq_lens_cpu\n"
        "with gpu_sync_allowed():                                   # GPU203\n"
        "    max_seq_len = int(seq_lens_cpu.max())                 # a host tensor: no sync\n"
        "# fixed:\n"
        "max_seq_len = int(seq_lens_cpu.max())"
    )
    fix_safety = (
        "Unsafe: removes the declaration (dedents the block, or drops the item from a `with` of several) and "
        "the import it leaves unused. No fix for `with ... as name:` or the conditional `with cm:` form."
    )
    fix_applicability = "unsafe"
    triggers = DECLARATION_TRIGGERS
    trigger_options = ("sync-declarations",)
    summaries_from = frozenset({BLOCK_CALLEES})  # stale unless the block, or what it calls, syncs
    reports_only_in_functions = True  # a declaration's block is judged in its function
    valid = (
        ("from vllm.utils.gpu_sync_debug import gpu_sync_allowed\n\n"
        "class MLAMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        with gpu_sync_allowed():\n"
        "            n = int(self.indptr[-1].item())\n"
        "        with gpu_sync_allowed(first_only=True):\n"
        "            self.fill_cache(common)  # may sync: it is not known here\n"
        "        return n\n"),
        # A host copy that a property of the run makes on first read: reading it may sync.
        ("import torch\n"
        "from vllm.utils.gpu_sync_debug import gpu_sync_allowed\n\n"
        "class CommonAttentionMetadata:\n"
        "    @property\n"
        "    def seq_lens_cpu(self) -> torch.Tensor:\n"
        "        return self.seq_lens.to(\"cpu\")\n\n"
        "class FlashAttentionMetadataBuilder:\n"
        "    def build(self, common: CommonAttentionMetadata):\n"
        "        with gpu_sync_allowed():\n"
        "            seq_lens_cpu = common.seq_lens_cpu\n"
        "        return int(seq_lens_cpu.max())\n"),
    )
    invalid = (
        ("from vllm.utils.gpu_sync_debug import gpu_sync_allowed\n\n"
        "class FlashAttentionMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        seq_lens_cpu = common.seq_lens_cpu\n"
        "        with gpu_sync_allowed():  # expect: GPU203\n"
        "            max_seq_len = int(seq_lens_cpu.max())\n"
        "        return max_seq_len\n"),
    )

    def check(self, ctx: FileContext) -> Iterable[Finding]:
        from sync_lint.analysis.guards import unwrap_fix
        from sync_lint.analysis.syncs import SyncAnalysis

        analysis = ctx.get(SyncAnalysis)
        for block in analysis.stale:
            name = analysis.describe_declaration(block)
            fix = None if block.conditional else unwrap_fix(ctx, block.node, block.item, f"Remove the stale `{name}`")
            copies = analysis.stale_unless.get(id(block.node))
            # A host copy read off another object: stale unless some file defines it as a property.
            unless = CalleeCondition(HOST_COPY, "|".join(sorted(copies))) if copies else None
            yield Finding(
                block.node,
                f"stale sync declaration: nothing in this `{name}` block can sync; it would hide the next sync "
                "added here",
                fix,
                unless,
            )
