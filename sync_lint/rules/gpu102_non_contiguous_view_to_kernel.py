"""GPU102: a known strided view handed to something that needs a contiguous tensor."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sync_lint.rules._gpu1xx_text import ADD_CONTIGUOUS, CONTIGUOUS_FIX_SAFETY
from sync_lint.rules.base import Finding, SinkRule
from sync_lint.rules.triggers import (
    SUMMARY_TRIGGERS,
    VIEW_TRIGGERS,
)

if TYPE_CHECKING:
    from sync_lint.analysis.context import FileContext


# A wrapper that makes `q` contiguous itself only under a flag (fla's `chunk_kda` and
# `use_qk_l2norm_in_kernel`), for the examples of a call passing the flag and one that does not.
_COPIES_UNDER_A_FLAG = (
    "import triton\n"
    "import triton.language as tl\n\n"
    "@triton.jit\n"
    "def dot_kernel(q_ptr, k_ptr, out_ptr):\n"
    "    i = tl.program_id(0)\n"
    "    tl.store(out_ptr + i, tl.load(q_ptr + i) * tl.load(k_ptr + i))\n\n"
    "def scores(q, k, out, use_qk_l2norm=False):\n"
    "    if use_qk_l2norm:\n"
    "        q = q.contiguous() / q.norm()\n"
    "    dot_kernel[(out.numel(),)](q, k, out)\n\n"
)


class NonContiguousViewToKernel(SinkRule):
    code = "GPU102"
    name = "non-contiguous-view-to-kernel"
    summary = "A strided view reaches a kernel or op that needs a contiguous tensor."
    what = (
        "A strided view handed, with no cast and no `.contiguous()`, to something that needs a contiguous "
        "tensor.\n\n"
        "Strided views:\n"
        "- gapped: `x[:, i]`, `x[:, :k]`, `x[..., i]`, step slices, `select` / `narrow` off dim 0, `unfold`, "
        "`diagonal`, `as_strided` unless its literal strides are the row-major ones of its literal size (as "
        "in `as_strided((n,), (1,))` or `as_strided((t, h, d), (h * d, d, 1))`);\n"
        "- permuted: `t`, `T`, `mT`, `transpose`, `permute`, `movedim`, `swapaxes`;\n"
        "- broadcast: `expand`, `broadcast_to`.\n\n"
        "Views that keep contiguity (`x[i]`, `x[:n]`, `x[1:]`, `x[i, :k]`, `x[:1, 0]`, and an index that selects "
        "a gap away: `rows = x[:2, :n, :]`, then `rows[i]`, is `x[i, :n, :]`) are not strided ones. A broadcast "
        "keeps the last stride where the last size is certainly unchanged (`-1`, `x.shape[-1]`, or the last "
        "size of a `view` / `reshape` written alike: `cos.view(t, 1, d).expand(t, h, d)`).\n\n"
        "Sinks: a Triton kernel that reads it as `ptr + offset`; a `torch.ops` custom op (also through a "
        "module-level alias: `_C = torch.ops._C`, then `_C.op(...)`), unless the same file (or, in a run of "
        "many files, one file of the run; checked alone, a file of its package the op's name leads to) "
        "implements it in Python (`@torch.library.custom_op(\"ns::op\")` or "
        "`triton_op`, also through a module-level name bound to either, or a `*register_custom_op` helper such "
        "as vLLM's `direct_register_custom_op(op_name=\"op\", op_func=impl)`, which registers into the "
        "library named as the helper's top-level package, `torch.ops.vllm`): that function then needs what its"
        " body needs; a function that checks "
        "`is_contiguous()` or passes it on to such a sink (in any checked file); `.view(dtype)`; a raw "
        "`.data_ptr()`; a sink named in `contiguous-sinks`. Never a callee named in `strided-sinks` (by "
        "default the matrix-multiply custom ops, such as `torch.ops._C.cutlass_scaled_mm`: a GEMM's operand "
        "order is its own, checked at the call). A `.view(dtype)` to a dtype of the same element size "
        "(`float8_e4m3fn` to `uint8`, `int32` to `float32`, `bfloat16` to `float16`) works on any strides and"
        " is no sink where the source's dtype is known (a factory's `dtype=`, a cast, an earlier "
        "`.view(dtype)`, the test of the conditional expression that takes the view: `t.view(torch.uint8) if "
        "t.element_size() == 1 else t`, of an enclosing `if`, of an `assert`, or of an `if` whose body ends "
        "the path (`if t.element_size() != 1: raise ...`), while `t` is not rebound); of an unknown dtype it "
        "is one, except a view as packed FP4 (`torch.float4_e2m1fn_x2`): torch converts nothing to that dtype, "
        "so what is viewed as it holds bytes already.\n\n"
        "Not reported:\n"
        "- a view handed to a function decorated with one of `contiguous-input-decorators` (fla's "
        "`@input_guard`, which calls `.contiguous()` on every tensor argument before the body runs);\n"
        "- launches that also pass the strides: the argument's, those of the parameter a local stands for "
        "(`ptr = x` then `x.stride()`), or those of a tensor a check says strides alike (`assert q.stride(1) "
        "== k.stride(1)` then `k` launched with `q.stride(1)`);\n"
        "- a kernel that steps through one pointer with another parameter's strides (its offsets for `k` "
        "built from `head_stride`, launched with `head_stride=q.stride(0)`) needs the two to share a layout, "
        "not contiguity: a call handing both the same view of their bases (`q.permute(1, 0, 2)` and "
        "`k.permute(1, 0, 2)`, or any column ranges of them) is not reported; handing the strided one beside "
        "another view, a plain tensor or a fresh one is;\n"
        "- a function that makes the tensor contiguous itself under a flag parameter (`if use_qk_l2norm: q = "
        "l2norm(q.contiguous())` before the kernel, or `if not flag:`, or a branch that returns, or a "
        "conditional expression: `q = l2norm(q.contiguous()) if use_qk_l2norm else q`), or that reaches the "
        "kernel only under one (`if use_triton: kernel[grid](q)` beside a torch path), needs nothing of a "
        "call that passes that flag as the literal `True` (`False`), or leaves it to a default of that value;"
        " a call passing the other value, or a value not known at the call, is reported. A wrapper that hands"
        " the flag on from a parameter of its own carries the condition to its callers;\n"
        "- a tensor on a path where its own `is_contiguous()` check passed: copied where it fails (`if not "
        "x.is_contiguous(): x = x.contiguous()`, `x if x.is_contiguous() else x.contiguous()`), or handed to "
        "the kernel only then (`if x.is_cuda and x.is_contiguous(): op(x)` beside a torch path, or after `if "
        "not x.is_contiguous(): return ...`); a function that does so needs nothing of its callers;\n"
        "- a tensor whose kernel only reads or writes the element its pointer points at "
        "(`tl.load(scale_ptr)`, as for a per-tensor scale handed as `scale.expand(n, h)`);\n"
        "- a permutation of a buffer just allocated (`torch.empty(k, n).t()`, `x.new_empty(k, n).permute(1, "
        "0)`: the usual way to make a column-major buffer for the kernel or op it is handed to), a layout "
        "chosen on purpose; `.view(dtype)` still judges it;\n"
        "- where a function checks only `p.stride(-1) == 1`, reinterprets `p.view(dtype)`, or hands "
        "`p.data_ptr()` on together with `p`'s strides (`encode(p.data_ptr(), p.stride(0))`, or a local built"
        " from them), it needs no more than stride 1 in the last dim: only a view whose last dim is strided "
        "is reported (a transpose or permutation that moves the last dim, a column select `x[:, i]`, a "
        "last-dim step slice), not a column-range slice such as `x[:, :k]`, nor a permutation that leaves the"
        " last dim in place (`k.permute(0, 2, 1, 3)`, `k.transpose(-3, -2)`, or `transpose(0, 1)` of a tensor"
        " known to have more than two dims), nor one that moves a dim checked to have stride 1 last (`w.t()` "
        "after `assert w.stride(0) == 1`, or below `if w.stride(0) != 1: raise ...`, while `w` is not "
        "rebound). Nor does one that checks `p.is_contiguous() or p.stride(-1) == 1` need more: the second "
        "check alone lets a column-range slice through;\n"
        "- a Triton kernel handed a column range whose row stride literal sizes tell (a range of a 2-D "
        "factory with a literal last size, through `.view(dtype)`: `torch.empty((n, 32 * 260), "
        "dtype=torch.uint8)[:, 32 * 256:].view(torch.float32)` has rows 2080 floats apart) where every load "
        "and store through that pointer, in the kernel or a jit helper of its file, steps by that stride "
        "written as a constant (`Scales + row * (32 * 260 // 4) + tl.arange(0, 32)`): it reads the view as "
        "laid out."
    )
    why = (
        "A Triton kernel that loads `ptr + i` assumes stride 1: given a column of `block_table` it reads "
        "every row's first element as if they were adjacent, i.e. the wrong values, with no error; a store "
        "through such indices overwrites other requests' data. C++/CUDA ops and checked Python boundaries "
        "raise `... must be contiguous`."
    )
    example = (
        "slots = block_table[:, 0]\n"
        "copy_blocks_kernel[(n,)](slots, cache)            # reads block_table[0, 0..n), not the column\n"
        "# fixed:\n"
        "copy_blocks_kernel[(n,)](slots.contiguous(), cache)"
    )
    fix_safety = (
        "Appends `.contiguous()` to the argument (a copy with the same values). " + CONTIGUOUS_FIX_SAFETY
    )
    fix_applicability = "unsafe"
    triggers = VIEW_TRIGGERS + SUMMARY_TRIGGERS
    valid = (
        # PyTorch's own operators take any strides, through a module-level alias too.
        ("import torch\n\n"
        "aten = torch.ops.aten\n\n"
        "def add_into(x, out):\n"
        "    aten.add.out(x.t(), x.t(), out=out)\n"),
        # Scales packed after each row's data, stepped by the row's own stride (vLLM's step5 indexer).
        ("import torch\nimport triton\nimport triton.language as tl\n\n"
        "@triton.jit\n"
        "def _pack(Packed, Scales):\n"
        "    row = tl.program_id(0)\n"
        "    tl.store(Packed + row * (32 * 260) + tl.arange(0, 32), 0)\n"
        "    tl.store(Scales + row * (32 * 260 // 4) + tl.arange(0, 32), 1.0)\n\n"
        "def pack(n):\n"
        "    packed = torch.empty((n, 32 * 260), dtype=torch.uint8)\n"
        "    _pack[(n,)](packed, packed[:, 32 * 256 :].view(torch.float32))\n"
        "    return packed\n"),
        # A GEMM takes its weight in the order it wants (CUTLASS's scaled mm: column-major).
        ("import torch\n\n"
        "def gemm(a, b, out):\n"
        "    torch.ops._C.cutlass_scaled_mm(out, a, b.t())\n"),
        ("import torch\n\n"
        "def launch(x, out, n):\n"
        "    torch.ops._C.silu(out, x[:n])          # a prefix of rows stays contiguous\n"
        "    torch.ops._C.silu(out, x[:, 0].contiguous())\n"
        "    torch.ops._C.silu(out, x[:, 0] * 2)    # arithmetic gives a fresh tensor\n"),
        # A test that hands a kernel a transpose to see it refused.
        ("import pytest\nimport torch\n\n"
        "def test_refuses_a_transpose(x, out):\n"
        "    with pytest.raises(RuntimeError):\n"
        "        torch.ops._C.rms_norm(out, x.t())\n"),
        # Squeezing the leading dim away says it has size 1, so the slice after it cuts no gap
        # (`g[0, :n]`: vllm-ascend's GDN decode, on fla's [1, tokens, heads] layout).
        ("import torch\n\n"
        "def decode(g, state, n):\n"
        "    return torch.ops._C.recurrent(g[:, :n].squeeze(0), state)\n"),
        ("import triton\n"
        "import triton.language as tl\n\n"
        "@triton.jit\n"
        "def col_kernel(x_ptr, out_ptr, stride_x):\n"
        "    i = tl.program_id(0)\n"
        "    tl.store(out_ptr + i, tl.load(x_ptr + i * stride_x))\n\n"
        "def run(x, out):\n"
        "    col_kernel[(out.numel(),)](x[:, 0], out, x.stride(0))  # stride-aware\n"),
        # Strides unpacked from `.stride()`, or taken only when the tensor is there.
        ("import triton\n"
        "import triton.language as tl\n\n"
        "@triton.jit\n"
        "def conv_kernel(state_ptr, idx_ptr, out_ptr, s_seq, s_dim, s_idx):\n"
        "    i = tl.program_id(0)\n"
        "    slot = tl.load(idx_ptr + i * s_idx)\n"
        "    tl.store(out_ptr + i, tl.load(state_ptr + slot * s_seq + i * s_dim))\n\n"
        "def conv_update(conv_state, idx, out):\n"
        "    s_seq, s_dim = conv_state.stride()\n"
        "    s_idx = idx.stride(0) if idx is not None else 0\n"
        "    conv_kernel[(out.numel(),)](conv_state, idx, out, s_seq, s_dim, s_idx)\n\n"
        "def run(cache, block_table, out):\n"
        "    conv_update(cache.transpose(-1, -2), block_table[:, 0], out)\n"),
        # `k` is stepped through with `q`'s strides: the two need one layout, which the same
        # slice of one buffer gives them (a dense `k` would be read wrong).
        ("import triton\n"
        "import triton.language as tl\n\n"
        "@triton.jit\n"
        "def add_kernel(q_ptr, k_ptr, out_ptr, stride_row):\n"
        "    row = tl.program_id(0)\n"
        "    cols = tl.arange(0, 64)\n"
        "    q = tl.load(q_ptr + row * stride_row + cols)\n"
        "    tl.store(out_ptr + row * 64 + cols, q + tl.load(k_ptr + row * stride_row + cols))\n\n"
        "def add_heads(q, k, out):\n"
        "    add_kernel[(q.shape[0],)](q, k, out, q.stride(0))\n\n"
        "def run(qkv, out):\n"
        "    add_heads(qkv[:, :64], qkv[:, 64:128], out)\n"),
        # The callee copies `q` itself when the flag is set.
        _COPIES_UNDER_A_FLAG + "def run(q_by_dim, k, out):\n    scores(q_by_dim.t(), k, out, use_qk_l2norm=True)\n",
        # A callee that checks only the last stride takes a column-range slice.
        ("def encode(tensor_2d):\n"
        "    if tensor_2d.stride(-1) != 1:\n"
        "        raise ValueError('the last dim must be dense')\n"
        "    return tensor_2d.stride(0)\n\n"
        "def run(kv, n):\n"
        "    return encode(kv[:, :n])\n"),
        # Either check passes: a column-range slice has stride 1 in its last dim.
        ("def pack(x):\n"
        "    assert x.is_contiguous() or x.stride(-1) == 1\n"
        "    return x.stride(0)\n\n"
        "def run(kv, n):\n"
        "    return pack(kv[:, :n])\n"),
        # Same element size: fp8 -> uint8 reinterprets each byte in place, whatever the strides.
        ("import torch\n\n"
        "def as_bytes(n, k):\n"
        "    w = torch.empty(n, k, dtype=torch.float8_e4m3fn)\n"
        "    return w.t().view(torch.uint8)\n"),
        # The enclosing `if` says the element size: fp8 viewed as bytes, whatever the strides.
        ("import torch\n\n"
        "def as_bytes(k_cache):\n"
        "    k = k_cache.transpose(1, 2)\n"
        "    if k.dtype == torch.float8_e4m3fn:\n"
        "        k = k.view(torch.uint8)\n"
        "    return k\n"),
        # A guard that ends the path: below it the element size is known.
        ("import torch\n\n"
        "def as_bytes(k_cache):\n"
        "    k = k_cache.transpose(1, 2)\n"
        "    if k.element_size() != 1:\n"
        "        raise ValueError('an fp8 cache is expected')\n"
        "    return k.view(torch.uint8)\n"),
        # A permutation that leaves the last dim in place keeps its stride 1, all `.view(dtype)` needs.
        ("import torch\n\n"
        "def as_bytes(k_cache):\n"
        "    k_perm = k_cache.permute(0, 2, 1, 3)\n"
        "    return k_perm.view(torch.uint8)\n"),
        # A column-major weight, checked: its transpose has stride 1 in its last dim.
        ("import torch\n\n"
        "def as_words(mat_b):\n"
        "    assert mat_b.stride(0) == 1, 'mat_b must be column-major'\n"
        "    weight = mat_b.t()\n"
        "    return weight.view(torch.int32)\n"),
        # A flat byte view with unit stride is contiguous, whatever `k_cache`'s layout.
        ("import torch\n\n"
        "def decode(k_cache, out, total_bytes):\n"
        "    raw = k_cache.as_strided((total_bytes,), (1,)).view(torch.uint8)\n"
        "    torch.ops._C.sparse_decode(out, raw)\n"),
    )
    invalid = (
        ("import triton\n"
        "import triton.language as tl\n\n"
        "@triton.jit\n"
        "def col_kernel(x_ptr, out_ptr):\n"
        "    i = tl.program_id(0)\n"
        "    tl.store(out_ptr + i, tl.load(x_ptr + i))\n\n"
        "def run(block_table, out):\n"
        "    slots = block_table[:, 0]\n"
        "    col_kernel[(out.numel(),)](slots, out)  # expect: GPU102\n"),
        ("import torch\n\n"
        "def norm(x, weight, out):\n"
        "    torch.ops._C.rms_norm(out, x.t(), weight, 1e-6)  # expect: GPU102\n"),
        # A custom op through a module-level alias of its namespace (vLLM's `flash_mla_cuda`).
        ("import torch\n\n"
        "_C = torch.ops._C\n\n"
        "def norm(x, weight, out):\n"
        "    _C.rms_norm(out, x.t(), weight, 1e-6)  # expect: GPU102\n"),
        # The callee copies `q` only under a flag this call does not pass.
        _COPIES_UNDER_A_FLAG + "def run(q_by_dim, k, out):\n    scores(q_by_dim.t(), k, out)  # expect: GPU102\n",
        # One head of a [tokens, heads, dim] cache: unit last stride, but rows `heads * dim` apart.
        ("import torch\n\n"
        "def gather_head(kv, out, tokens, heads, dim, h):\n"
        "    head = kv.as_strided((tokens, dim), (heads * dim, 1), h * dim)\n"
        "    torch.ops._C.gather(out, head)  # expect: GPU102\n"),
        # A transpose has the row stride in its last dim: even a last-stride check fails on it.
        ("def encode(tensor_2d):\n"
        "    if tensor_2d.stride(-1) != 1:\n"
        "        raise ValueError('the last dim must be dense')\n"
        "    return tensor_2d.stride(0)\n\n"
        "def run(kv, n):\n"
        "    return encode(kv[:, :n].t())  # expect: GPU102\n"),
        # The enclosing `if` guards a 2-byte dtype (or `k` is another tensor by the time of the view).
        ("import torch\n\n"
        "def as_bytes(k_cache, other):\n"
        "    k = k_cache.transpose(1, 2)\n"
        "    if k.dtype == torch.bfloat16:\n"
        "        return k.view(torch.uint8)  # expect: GPU102\n"
        "    if k.dtype == torch.float8_e4m3fn:\n"
        "        k = other.transpose(0, 1)\n"
        "        return k.view(torch.uint8)  # expect: GPU102\n"
        "    return k\n"),
        # A check that does not end the path says nothing below it.
        ("import torch\n\n"
        "def as_bytes(k_cache, log):\n"
        "    k = k_cache.transpose(1, 2)\n"
        "    if k.element_size() != 1:\n"
        "        log('not an fp8 cache')\n"
        "    return k.view(torch.uint8)  # expect: GPU102\n"),
        # float32 -> uint8 regroups the last dim's bytes: it needs stride 1 there.
        ("import torch\n\n"
        "def as_bytes(n, k):\n"
        "    w = torch.empty(n, k, dtype=torch.float32)\n"
        "    return w.t().view(torch.uint8)  # expect: GPU102\n"),
    )

    def check(self, ctx: FileContext) -> Iterable[Finding]:
        from sync_lint.analysis.sinks import ContiguityAnalysis, because, plain_view
        from sync_lint.rules._sink_findings import reported_uses, sink_finding

        analysis = ctx.get(ContiguityAnalysis)
        for use in reported_uses(analysis, plain_view):
            layout = use.layout
            line = analysis.finding_line(layout.origin)
            arg = ctx.module.code_for_node(use.arg).strip()
            named = f"`{arg}` is {layout.what}" if len(arg) <= 48 else f"the argument is {layout.what}"
            message = (
                f"{named} (line {line}), not contiguous, so {use.sink} receives a strided view"
                f"{because(use)}."
            )
            yield sink_finding(use, message, ADD_CONTIGUOUS)
