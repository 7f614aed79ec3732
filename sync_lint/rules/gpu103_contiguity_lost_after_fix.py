"""GPU103: `.contiguous()` applied, then undone (or made meaningless) before the sink."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sync_lint.rules._gpu1xx_text import CONTIGUOUS_FIX_SAFETY
from sync_lint.rules.base import Finding, SinkRule
from sync_lint.rules.triggers import (
    CONTIGUOUS_TRIGGERS,
    SUMMARY_TRIGGERS,
)

if TYPE_CHECKING:
    from sync_lint.analysis.context import FileContext


class ContiguityLostAfterFix(SinkRule):
    code = "GPU103"
    name = "contiguity-lost-after-fix"
    summary = "`.contiguous()` comes before a view, so the kernel still gets a strided tensor."
    what = (
        "`.contiguous()` followed by a view op before the tensor reaches a contiguity sink "
        "(`x.contiguous()[:, 0]`, `x.contiguous().t()`, `y = x.contiguous(); k[grid](y[..., 0])`), and a "
        "view that is contiguous only through a size-1 dim (`bt[:1, 0]`, with or without `.contiguous()`) "
        "whose strides a Triton launch reads (`t.stride(0)` among its arguments); the size-1 case is "
        "reported only with `preview` on, since a kernel that never steps along that dim is unaffected. "
        "`w.t().contiguous().t()` (the same transpose on both sides of `.contiguous()`: `T`, `mT`, "
        "`transpose(0, 1)`) is the idiom for a column-major copy, made on purpose for an op that wants one "
        "(a GEMM's weight), and so is a permutation undone after `.contiguous()` "
        "(`x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)`, an NCHW tensor laid out channels-last): "
        "neither is reported; appending `.contiguous()` would undo it. A callee named in "
        "`strided-sinks` (by default the matrix-multiply custom ops, such as `torch.ops._C.cutlass_scaled_mm`: a GEMM's operand order is its own, checked at the call) is never a sink."
    )
    why = (
        "The view op after `.contiguous()` makes a strided view again, so the kernel reads `ptr + i` "
        "through gaps (silently wrong values) or the op raises `must be contiguous`: the fix is in the "
        "wrong place. A view with a size-1 dim already passes `is_contiguous()`, so `.contiguous()` returns "
        "it unchanged and its `stride(0)` is still the parent's row width: a kernel that uses that stride "
        "as the row length of a compact tensor indexes out of place."
    )
    example = (
        "k[grid](x.contiguous()[:, 0], out)\n"
        "# fixed:\n"
        "k[grid](x[:, 0].contiguous(), out)   # or x.contiguous()[:, 0].contiguous()"
    )
    fix_safety = (
        "For a view after `.contiguous()`: appends `.contiguous()` to the sink argument (the earlier call is then"
        " redundant and may be removed by hand). " + CONTIGUOUS_FIX_SAFETY
        + " No fix for the size-1 case: `.contiguous()` does not change those strides."
    )
    fix_applicability = "unsafe"
    triggers = CONTIGUOUS_TRIGGERS + SUMMARY_TRIGGERS
    valid = (
        ("import torch\n\n"
        "def launch(x, out):\n"
        "    torch.ops._C.silu(out, x[:, 0].contiguous())\n"
        "    torch.ops._C.silu(out, x.contiguous()[0])  # a leading select stays contiguous\n"),
        # A column-major copy on purpose: the same transpose on both sides of `.contiguous()`.
        ("import torch\n\n"
        "def prepack(w):\n"
        "    return torch.ops._C.machete_prepack_B(w.t().contiguous().t())\n"),
        # A channels-last copy on purpose: a permutation undone after `.contiguous()`.
        ("import torch\n\n"
        "def conv(x, weight, out):\n"
        "    nhwc = x.permute(0, 2, 3, 1).contiguous()\n"
        "    torch.ops._C.conv_nhwc(out, nhwc.permute(0, 3, 1, 2), weight)\n"),
    )
    invalid = (
        ("import triton\n"
        "import triton.language as tl\n\n"
        "@triton.jit\n"
        "def col_kernel(x_ptr, out_ptr):\n"
        "    i = tl.program_id(0)\n"
        "    tl.store(out_ptr + i, tl.load(x_ptr + i))\n\n"
        "def run(block_table, out):\n"
        "    col_kernel[(out.numel(),)](block_table.contiguous()[:, 0], out)  # expect: GPU103\n"),
        ("import torch\n\n"
        "def norm(x, weight, out):\n"
        "    x = x.contiguous()\n"
        "    torch.ops._C.rms_norm(out, x.t(), weight, 1e-6)  # expect: GPU103\n"),
        # Not the inverse permutation: the result is still a permuted view.
        ("import torch\n\n"
        "def conv(x, weight, out):\n"
        "    nhwc = x.permute(0, 2, 3, 1).contiguous()\n"
        "    torch.ops._C.conv_nhwc(out, nhwc.permute(0, 2, 3, 1), weight)  # expect: GPU103\n"),
    )

    def check(self, ctx: FileContext) -> Iterable[Finding]:
        from sync_lint.analysis.layout import code_of
        from sync_lint.analysis.sinks import (
            ContiguityAnalysis,
            because,
            size1_strides_read,
            view_after_fix,
        )
        from sync_lint.rules._sink_findings import reported_uses, sink_finding

        analysis = ctx.get(ContiguityAnalysis)
        seen: set[int] = set()
        for use in reported_uses(analysis, view_after_fix, seen):
            layout = use.layout
            assert layout.refixed is not None
            fixed_at = analysis.finding_line(layout.refixed)
            message = (
                f"`.contiguous()` (line {fixed_at}) comes before {layout.what}, which is a strided view "
                f"again, so {use.sink} receives a non-contiguous tensor{because(use)}."
            )
            yield sink_finding(use, message, "Call `.contiguous()` after the view.")
        # The size-1 case is often harmless (a kernel that never steps along that dim): it is
        # reported only with `preview` on, and has no fix (`.contiguous()` returns it unchanged).
        if not ctx.settings["preview"]:
            return
        for use in analysis.uses:
            if (use.callee is not None and use.key is None) or id(use.arg) in seen or not size1_strides_read(use):
                continue
            seen.add(id(use.arg))
            layout = use.layout
            arg = code_of(ctx.module, use.arg)
            made = " and `.contiguous()` returns it unchanged" if layout.made_contiguous is not None else ""
            message = (
                f"`{arg}` is contiguous only through a size-1 dim: it passes `is_contiguous()`{made}, yet "
                f"its strides, which {use.sink} receives, are still those of the tensor it was sliced from."
            )
            yield sink_finding(use, message, fixable=False)  # no advice: no copy would help
