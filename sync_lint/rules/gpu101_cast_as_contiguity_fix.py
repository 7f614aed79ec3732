"""GPU101: a cast relied on to make a tensor contiguous before a kernel."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sync_lint.rules._gpu1xx_text import ADD_CONTIGUOUS, CONTIGUOUS_FIX_SAFETY
from sync_lint.rules.base import Finding, SinkRule
from sync_lint.rules.triggers import (
    CAST_TRIGGERS,
    SUMMARY_TRIGGERS,
)

if TYPE_CHECKING:
    from sync_lint.analysis.context import FileContext
    from sync_lint.analysis.sinks import ContiguityAnalysis, SinkUse


class CastAsContiguityFix(SinkRule):
    code = "GPU101"
    name = "cast-as-contiguity-fix"
    summary = "A cast that may be a no-op is relied on to hand a contiguous tensor to a kernel."
    what = (
        "A tensor that may be a strided view (a column slice, a transpose, a broadcast, or a parameter or "
        "attribute of unknown layout) is cast (`.to(dtype)`, `.to(device)`, `.int()`, `.long()`, `.float()`, "
        "`.half()`, `.bfloat16()`, `.type(...)`, `.cuda()`) and handed to something that needs a contiguous "
        "tensor, with no `.contiguous()` in between: a Triton kernel that reads the argument as `ptr + offset`, "
        "a `torch.ops` custom op (also through a module-level alias, `_C = torch.ops._C`; one the file implements in Python needs what its function needs, as GPU102 says), a function that checks `is_contiguous()` (in any checked file), "
        "`.view(dtype)`, a raw `.data_ptr()`, or a sink named in `contiguous-sinks`; never a callee named in "
        "`strided-sinks` (by default the matrix-multiply custom ops, such as `torch.ops._C.cutlass_scaled_mm`: a GEMM's operand order is its own, checked at the call). A function that checks only `p.stride(-1) == 1` (or calls `p.view(dtype)`, or hands "
        "`p.data_ptr()` on with `p`'s strides) needs "
        "no more than stride 1 in the last dim, so it counts only for a view whose last dim is strided (a "
        "transpose, a column select), not for a column-range slice `x[:, :k]`. A cast of a source known to be "
        "fresh, a cast that certainly changes the dtype of a gapped view, a cast of a parameter that "
        "another path skips (`x.to(torch.int32) if x.dtype != torch.int32 else x`: the parameter itself reaches "
        "the sink there), a cast followed by `.view(dtype)` to a dtype of the cast's element size "
        "(`x.to(torch.float8_e4m3fn).view(torch.uint8)` reinterprets each element in place, whatever the "
        "strides), a launch that also passes the tensor's strides, and a cast of a parameter of a function "
        "decorated with one of `contiguous-input-decorators` (fla's `@input_guard`, which calls `.contiguous()` "
        "on every tensor argument) are not reported."
    )
    why = (
        "A cast returns its input itself when there is nothing to convert (`x.to(torch.int32)` of an int32 "
        "tensor is `x`, strides included), and a dtype-changing cast of a permuted view keeps the permuted "
        "strides. So the cast fixes the layout only on the inputs the author tried. On the others the "
        "kernel reads `ptr + i` through a strided view: a Triton kernel silently reads (and stores to) the "
        "wrong elements, e.g. other requests' state slots; a checked boundary raises "
        "`ValueError: ... must be contiguous`."
    )
    example = (
        "state_indices = block_table[:, 0]          # int32 column: stride = row width\n"
        "fused_kda_chunk(q, k, v, g, beta, state, state_indices.to(torch.int32), cu_seqlens)\n"
        "# fixed:\n"
        "fused_kda_chunk(q, k, v, g, beta, state, state_indices.to(torch.int32).contiguous(), cu_seqlens)"
    )
    fix_safety = (
        "Appends `.contiguous()` to the argument, which copies only when the tensor is not contiguous and never "
        "changes values. " + CONTIGUOUS_FIX_SAFETY
    )
    fix_applicability = "unsafe"
    triggers = CAST_TRIGGERS + SUMMARY_TRIGGERS
    valid = (
        # A fresh tensor: the cast cannot leave a view behind.
        ("import torch\n"
        "import triton\n"
        "import triton.language as tl\n\n"
        "@triton.jit\n"
        "def copy_kernel(src_ptr, dst_ptr, n: tl.constexpr):\n"
        "    offs = tl.arange(0, n)\n"
        "    tl.store(dst_ptr + offs, tl.load(src_ptr + offs))\n\n"
        "def run(n):\n"
        "    idx = torch.arange(n)\n"
        "    out = torch.empty(n, dtype=torch.int32)\n"
        "    copy_kernel[(1,)](idx.to(torch.int32), out, n)\n"),
        # `.contiguous()` after the cast, and a stride-aware launch.
        ("import triton\n"
        "import triton.language as tl\n\n"
        "@triton.jit\n"
        "def gather_kernel(idx_ptr, out_ptr, stride):\n"
        "    i = tl.program_id(0)\n"
        "    tl.store(out_ptr + i, tl.load(idx_ptr + i * stride))\n\n"
        "def run(block_table, out):\n"
        "    col = block_table[:, 0]\n"
        "    gather_kernel[(out.numel(),)](col.to(torch.int32).contiguous(), out, 1)\n"
        "    gather_kernel[(out.numel(),)](col.to(torch.int32), out, col.stride(0))\n"),
        # A prefix of a 1-D tensor is contiguous.
        ("import torch\n\n"
        "def run(query_start_loc, num_reqs, out):\n"
        "    cu_seqlens = query_start_loc[: num_reqs + 1].to(torch.int32)\n"
        "    torch.ops._C.varlen_fwd(out, cu_seqlens)\n"),
        # A guarded cast: the other path hands the parameter on uncast, so no cast is relied on.
        ("import torch\n\n"
        "def store(loc, lens, out):\n"
        "    if loc.dtype != torch.int64:\n"
        "        loc = loc.to(torch.int64)\n"
        "    lens_i32 = lens.to(torch.int32) if lens.dtype != torch.int32 else lens\n"
        "    torch.ops._C.store_kv(out, loc, lens_i32)\n"),
        # A view to the cast's element size reinterprets in place: any strides will do.
        ("import torch\n\n"
        "def scale_bits(scale):\n"
        "    return scale.to(torch.float32).view(torch.int32) >> 23\n"),
        # A decorator of `contiguous-input-decorators` (fla's `input_guard`) copies every tensor
        # argument contiguous before the body runs.
        ("import torch\n"
        "from fla.utils import input_guard\n\n"
        "@input_guard\n"
        "def cumsum(g, out):\n"
        "    torch.ops._C.chunk_cumsum(out, g.float())\n"),
    )
    invalid = (
        ("import torch\n"
        "import triton\n"
        "import triton.language as tl\n\n"
        "@triton.jit\n"
        "def gather_kernel(idx_ptr, out_ptr):\n"
        "    i = tl.program_id(0)\n"
        "    tl.store(out_ptr + i, tl.load(idx_ptr + i))\n\n"
        "def run(block_table, out):\n"
        "    state_indices = block_table[:, 0]\n"
        "    gather_kernel[(out.numel(),)](state_indices.to(torch.int32), out)  # expect: GPU101\n"),
        ("import torch\n\n"
        "def rms_norm(out, x, weight, eps):\n"
        "    torch.ops._C.rms_norm(out, x.t().to(torch.bfloat16), weight, eps)  # expect: GPU101\n"),
        # Another element size: `.view(torch.uint8)` splits the last dim's elements, so needs stride 1 there.
        ("import torch\n\n"
        "def scale_bytes(scale):\n"
        "    return scale.to(torch.float32).view(torch.uint8)  # expect: GPU101\n"),
    )

    def check(self, ctx: FileContext) -> Iterable[Finding]:
        from sync_lint.analysis.sinks import ContiguityAnalysis, cast_relied_on
        from sync_lint.rules._sink_findings import reported_uses, sink_finding

        analysis = ctx.get(ContiguityAnalysis)
        for use in reported_uses(analysis, cast_relied_on):
            yield sink_finding(use, self._message(use, analysis), ADD_CONTIGUOUS)

    @staticmethod
    def _message(use: SinkUse, analysis: ContiguityAnalysis) -> str:
        from sync_lint.analysis.layout import PERMUTED
        from sync_lint.analysis.sinks import because

        layout = use.layout
        cast = layout.cast
        assert cast is not None
        if layout.kind == PERMUTED:
            effect = "keeps the permuted strides (even when it converts)"
        elif cast.target == "device":
            effect = "is a no-op when the tensor is already on that device"
        elif cast.same_dtype is not None:
            effect = f"is a no-op (the tensor is already `{cast.same_dtype}`)"
        elif cast.target == "dtype":
            effect = "is a no-op when the dtype already matches"
        else:
            effect = "is a no-op when there is nothing to convert"
        sink = use.sink
        if layout.kind == "unknown":
            kind = "a parameter" if layout.source == "param" else "an attribute"
            return (
                f"`{cast.source_text}` is {kind} of unknown layout and may be a strided view; `{cast.text}` "
                f"{effect} and is no contiguity fix, so {sink} may receive a non-contiguous tensor{because(use)}."
            )
        line = analysis.finding_line(layout.origin)
        return (
            f"`{cast.source_text}` is {layout.what} (line {line}); `{cast.text}` {effect}, so {sink} "
            f"receives a non-contiguous tensor{because(use)}."
        )
