"""GPU204 (preview): a GPU->CPU sync inside a loop of a hot scope."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sync_lint.rules.base import Finding, HotScopeRule
from sync_lint.rules.triggers import (
    EXPLICIT_TRIGGERS,
    HOT_TRIGGERS,
    IMPLICIT_TRIGGERS,
)

if TYPE_CHECKING:
    from sync_lint.analysis.context import FileContext


class SyncInLoop(HotScopeRule):
    code = "GPU204"
    name = "sync-in-loop"
    summary = "A GPU->CPU sync inside a loop of a hot scope: one stall per iteration (per layer, per request)."
    what = (
        "Any sync GPU201 or GPU202 knows (explicit, implicit, or a call of a function that syncs) inside a "
        "`for` / `while` loop body, a `while` condition, or a comprehension, in a hot scope. Declared syncs "
        "count too: `gpu_sync_allowed()` makes a sync legal, not cheap. Syncs in debug-only or training-only branches and in "
        "run-once lazy initialisation (see GPU201) do not."
    )
    why = (
        "A loop over layers or requests multiplies the stall: the host waits for the GPU once per iteration, "
        "and the GPU idles between each short burst of kernels, so step time grows with the batch or the "
        "depth instead of being one round trip. Hoist the read out of the loop (one `.tolist()` before it) "
        "or read the host copy."
    )
    example = (
        "for i in range(num_reqs):\n"
        "    n = int(query_lens[i].item())        # GPU204 (and GPU201)\n"
        "# fixed: one transfer before the loop\n"
        "query_lens_list = query_lens.tolist()\n"
        "for i in range(num_reqs):\n"
        "    n = query_lens_list[i]"
    )
    fix_safety = "No fix: hoisting changes the code's structure."
    preview = True
    triggers = EXPLICIT_TRIGGERS + IMPLICIT_TRIGGERS + HOT_TRIGGERS
    valid = (
        ("class FlashMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        query_lens = common.query_lens_cpu.tolist()\n"
        "        for i in range(common.num_reqs):\n"
        "            n = query_lens[i] + common.seq_lens_cpu[i].item()\n"
        "        return n\n"),
    )
    invalid = (
        ("from vllm.utils.gpu_sync_debug import gpu_sync_allowed\n\n"
        "class FlashMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        for i in range(common.num_reqs):\n"
        "            with gpu_sync_allowed():\n"
        "                n = common.query_lens[i].item()  # expect: GPU204\n"
        "        return [x.item() for x in common.seq_lens]  # expect: GPU204\n"),
    )

    def check(self, ctx: FileContext) -> Iterable[Finding]:
        from sync_lint.analysis.syncs import (
            SyncAnalysis,
            callee_condition,
            site_message,
        )

        analysis = ctx.get(SyncAnalysis)
        for site in analysis.hot_sites(("explicit", "implicit", "call"), undeclared=False):
            if not site.in_loop:
                continue
            message = site_message(analysis, site, "GPU->CPU sync inside a loop") + ", once per iteration"
            yield Finding(site.node, message, None, callee_condition(site))
