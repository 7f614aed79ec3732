"""GPU203: a sync declaration that declares nothing any more."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sync_lint.rules.base import BLOCK_CALLEES, Finding, Rule
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
        "`yield` count."
    )
    why = (
        "The sync it declared is gone (the code now reads a host copy), but the exemption stays: the next sync "
        "anyone adds inside the block is silently allowed, so the post-warm-up sync check cannot catch it and "
        "the per-step stall it causes goes unnoticed. A declaration should mark exactly the syncs that remain."
    )
    example = (
        "with gpu_sync_allowed():                                   # GPU203\n"
        "    max_seq_len = int(common.seq_lens_cpu.max())          # a host copy: no sync\n"
        "# fixed:\n"
        "max_seq_len = int(common.seq_lens_cpu.max())"
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
    )
    invalid = (
        ("from vllm.utils.gpu_sync_debug import gpu_sync_allowed\n\n"
        "class FlashAttentionMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        with gpu_sync_allowed():  # expect: GPU203\n"
        "            max_seq_len = int(common.seq_lens_cpu.max())\n"
        "        return max_seq_len\n"),
    )

    def check(self, ctx: FileContext) -> Iterable[Finding]:
        from sync_lint.analysis.guards import unwrap_fix
        from sync_lint.analysis.syncs import SyncAnalysis

        analysis = ctx.get(SyncAnalysis)
        for block in analysis.stale:
            name = analysis.describe_declaration(block)
            fix = None if block.conditional else unwrap_fix(ctx, block.node, block.item, f"Remove the stale `{name}`")
            yield Finding(
                block.node,
                f"stale sync declaration: nothing in this `{name}` block can sync; it would hide the next sync "
                "added here",
                fix,
            )
