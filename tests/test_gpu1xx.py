"""GPU1xx layout rules: the layout model against torch itself, sinks, summaries, options."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_runner import run

from sync_lint.api import fix_text, lint_paths, lint_text, make_settings
from sync_lint.pipeline.runner import Linter

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent


def codes(text: str, **options) -> list[tuple[int, str]]:
    options.setdefault("preview", True)
    return [(d.line, d.code) for d in lint_text(textwrap.dedent(text), **options) if d.code.startswith("GPU1")]


# -- the layout model predicts what torch does ----------------------------------------------------

# Expressions over ``x`` (a contiguous int32 [4, 8] tensor), ``y`` (a contiguous [2, 3, 4]
# tensor) and ``z`` (a contiguous [1, 3, 4] tensor, for squeezes that find a size-1 dim); GPU102
# must flag exactly the ones torch says are not contiguous.
VIEW_EXPRESSIONS = [
    "x[:, 0]", "x[:, 1:3]", "x[..., 2]", "x[::2]", "x[1:, ::2]", "x.select(1, 0)", "x.narrow(1, 0, 4)",
    "x.t()", "x.T", "x.mT", "x.transpose(0, 1)", "x.permute(1, 0)", "x.movedim(0, 1)", "x.swapaxes(0, 1)",
    "x.expand(2, 4, 8)", "torch.broadcast_to(x[0], (4, 8))", "x.diagonal()", "x[0].unfold(0, 4, 2)",
    "y[:, 0]", "y[:, :, 1]", "y.permute(2, 0, 1)",
    "x[:, ::2][0]", "x[1:, ::2][0]", "y[:, :, 1:3][0]", "y[:, 1:][:, 0]", "x.t()[0]", "x[:, 1:3][:, 0]",
    # contiguous ones
    "x[0]", "x[1:3]", "x[:2]", "x[2, 1:5]", "x[:1, 0]", "x[:1, 2:6]", "x[0:1, 3]", "x.select(0, 2)",
    "x.narrow(0, 1, 2)", "x.permute(0, 1)", "x.transpose(1, 1)", "x[:, 0] + 1", "x[:, 0].clone()",
    "x.t().contiguous()", "x[:, 0].sum()", "torch.cat([x[:, 0], x[:, 1]])", "x[[0, 2]]", "y[1]", "y[1, 2]",
    "x[None]", "x[0, None]",
    # a second index that selects the gap of the first away (``x[:, 1:3][0]`` is ``x[0, 1:3]``)
    "x[:, 1:3][0]", "x[:, 2:6][1, 1:3]", "x[:, 1:3][0:1]", "y[:, 1:][0]", "y[:, :2, :][1]", "y[:1, 1:][0]",
    "y[:, 0][0]", "y[:, 1:3][1][0]",
    # a mask (a comparison, or a logical combination of comparisons) as an index copies
    "y[:, :, 1:3][z[0, 0, :2] > 0]", "y[:, 1:][(z[0, 0, :2] >= 0) & (z[0, 0, :2] < 1)]",
    "x[:, 1:3][~(z[0, 0, :4] > 0)]", "x[:, 1:3][x[:, 0] > 0]",
    # a squeeze of a leading dim says its size is 1: the gap it led is gone (``z[0, 1:]``)
    "z[:, 1:].squeeze(0)", "z[:, 1:, :].squeeze(dim=0)", "z[:, :, 1:3].squeeze(0)", "y[:, 1:2].squeeze(1)",
    "y[:, :2].squeeze()", "y[:, :2].squeeze(2)",
    # as_strided: contiguous exactly when the explicit strides are the row-major ones of the size
    "x.as_strided((32,), (1,))", "x.as_strided((4, 8), (8, 1))", "torch.as_strided(x, (2, 4), (4, 1), 3)",
    "x.as_strided(size=(2, 2, 4), stride=(2 * 4, 4, 1))", "torch.as_strided(y, (6, 4), (4, 1))",
    "x.as_strided((4, 4), (8, 1))", "x.as_strided((16,), (2,))", "x.as_strided((8, 4), (1, 8))",
    "x.as_strided((2, 4), (8, 1))", "x.as_strided((2, 2, 4), (4, 4, 1))", "x.as_strided((4, 8), (16 // 2, 1))",
]  # fmt: skip


@pytest.mark.parametrize("expression", VIEW_EXPRESSIONS)
def test_view_model_matches_torch(expression: str):
    x = torch.arange(32, dtype=torch.int32).reshape(4, 8)
    y = torch.zeros(2, 3, 4)
    z = torch.zeros(1, 3, 4)
    value = eval(expression, {"torch": torch, "x": x, "y": y, "z": z})
    strided = not value.is_contiguous()
    source = f"""
    import torch

    def f(x, y, z):
        torch.ops._C.op({expression})
    """
    found = [code for _, code in codes(source)]
    assert ("GPU102" in found or "GPU101" in found) == strided, (expression, found, value.stride())


def test_an_index_that_selects_a_gap_away_is_followed_through_names_only_as_made():
    source = """
    import torch


    def f(x, y, buffers, flag, i):
        rows = x[:2, :3, :]
        torch.ops._C.op(rows[i])  # x[i, :3, :]: contiguous
        torch.ops._C.op(rows[(i - 1) % 2])
        torch.ops._C.op(rows[0][1])
        cols = x[:, :, :3]
        torch.ops._C.op(cols[0])  # x[0, :, :3]: strided
        cast = rows.float()
        torch.ops._C.op(cast[0])  # not the view the index made: not followed
        either = rows if flag else y[:, 1:]
        torch.ops._C.op(either[0])  # a view of two indices: not followed
        torch.ops._C.op(rows[i:])
    """
    assert codes(source) == [(11, "GPU102"), (13, "GPU102"), (15, "GPU102"), (16, "GPU102")]


def test_a_call_a_test_expects_to_fail_is_not_reported():
    source = """
    import unittest

    import pytest
    import torch
    from pytest import raises

    from mylib import checks


    def test_refuses_a_transpose(x, out):
        with pytest.raises(RuntimeError, match="contiguous"):
            torch.ops._C.rms_norm(out, x.t())
        with raises(RuntimeError) as info, torch.no_grad():
            if x.dim() == 2:
                torch.ops._C.rms_norm(out, x[:, 0].int())
        torch.ops._C.rms_norm(out, x.t())  # after the block: reported
        with pytest.warns(UserWarning):  # warns, runs on
            torch.ops._C.rms_norm(out, x.t())
        with checks.raises(RuntimeError):  # not pytest's
            torch.ops._C.rms_norm(out, x.t())


    class TestNorm(unittest.TestCase):
        def test_refuses(self):
            x = self.inputs
            with self.assertRaisesRegex(RuntimeError, "contiguous"):
                torch.ops._C.rms_norm(x, x.t())
            torch.ops._C.rms_norm(x, x.t())
    """
    assert codes(source) == [(17, "GPU102"), (19, "GPU102"), (21, "GPU102"), (29, "GPU102")]


def test_past_an_assert_of_contiguity_the_tensor_is_contiguous():
    """``assert x.is_contiguous()`` after a transpose says the data is stored transposed (torchao's
    MX tensors); the callee's own assert still asks its callers for a contiguous argument."""
    source = """
    import torch


    def unpack(data, out, transposed: bool):
        if transposed:
            data = data.t()
            assert data.is_contiguous()
        torch.ops._C.unpack(out, data)
        scales = data.t()
        assert data.is_contiguous()  # of another tensor
        torch.ops._C.unpack(out, scales)


    def needs_contiguous(x):
        assert x.is_contiguous()
        return x


    def caller(w):
        return needs_contiguous(w.t())
    """
    assert codes(source) == [(12, "GPU102"), (21, "GPU102")]


def test_a_launch_handed_a_helpers_dict_of_strides_is_stride_aware():
    """xformers' ``**_strides(q, "qz", "qm", ...)``: a function of the file whose every return
    holds its parameter's ``.stride()`` (but where that parameter is None) hands them on whole."""
    source = """
    import triton
    import triton.language as tl


    def _strides(x, *names):
        if x is None:
            return {f"stride_{n}": None for n in names}
        return {f"stride_{n}": s for n, s in zip(names, x.stride())}


    def _shape(x, *names):
        return {n: s for n, s in zip(names, x.shape)}


    def _sometimes(x, *names, dense=False):
        if dense:
            return {}
        return dict(zip(names, x.stride()))


    def _of_a_copy(x, *names):
        x = x.contiguous()
        return dict(zip(names, x.stride()))


    @triton.jit
    def _reduce(a_ptr, out_ptr, stride_az, stride_ak):
        i = tl.program_id(0)
        tl.store(out_ptr + i, tl.load(a_ptr + i * stride_az))


    def launch(a, out):
        _reduce[(4,)](a.t(), out, **_strides(a.t(), "az", "ak"))
        _reduce[(4,)](a.t(), out, **_shape(a.t(), "az", "ak"))
        _reduce[(4,)](a.t(), out, **_sometimes(a.t(), "az", "ak"))
        _reduce[(4,)](a.t(), out, **_of_a_copy(a.t(), "az", "ak"))
    """
    assert codes(source) == [(35, "GPU102"), (36, "GPU102"), (37, "GPU102")]


def test_a_jit_helper_defined_twice_under_one_name_ends(tmp_path):
    """unsloth's ``_lut_gather``, defined under ``if hasattr(tl, "gather")`` and again under
    ``else``: both definitions share one summary, and the kernel's pointer steps once went round
    for ever, each setting its own. Run as a subprocess, so a hang fails the test."""
    (tmp_path / "lut.py").write_text(textwrap.dedent("""
        import triton
        import triton.language as tl

        if hasattr(tl, "gather"):

            @triton.jit
            def _lut_gather(lut_ptr, n):
                table = tl.load(lut_ptr + tl.arange(0, 16))
                return tl.gather(table, n, 0)

        else:

            @triton.jit
            def _lut_gather(lut_ptr, n):
                return tl.load(lut_ptr + n)


        @triton.jit
        def _dequant_kernel(lut_ptr, w_ptr, out_ptr):
            i = tl.program_id(0)
            tl.store(out_ptr + i, _lut_gather(lut_ptr, tl.load(w_ptr + i)))


        def dequant(lut, w, out):
            _dequant_kernel[(4,)](lut.float(), w, out)
    """))
    result = run("check", "lut.py", "--isolated", "--no-cache", "--output-format", "concise", cwd=tmp_path, timeout=60)
    assert result.returncode == 1 and "lut.py:26:27: GPU101" in result.stdout, (result.stdout, result.stderr)


def test_a_custom_op_this_file_implements_in_python_is_judged_by_its_body():
    """``torch.ops.vllm.<name>`` registered here from a Python function (vLLM's and SGLang's
    ``direct_register_custom_op``, ``@torch.library.custom_op``, SGLang's ``@register_custom_op``)
    needs what that function needs; an op of unknown code (C++) still needs every tensor dense."""
    source = """
    import torch
    import triton
    import triton.language as tl

    from vllm.utils.torch_utils import direct_register_custom_op
    from sglang.srt.utils.custom_op import register_custom_op


    @triton.jit
    def _copy(src_ptr, dst_ptr):
        tl.store(dst_ptr + tl.arange(0, 4), tl.load(src_ptr + tl.arange(0, 4)))


    def _store_ids(ids: torch.Tensor, layer_name: str) -> None:
        STATE[layer_name] = ids  # kept for later: no kernel reads it here


    def _launch(src: torch.Tensor, dst: torch.Tensor) -> None:
        _copy[(1,)](src, dst)


    direct_register_custom_op(op_name="store_ids", op_func=_store_ids, mutates_args=[])
    direct_register_custom_op("launch_copy", _launch, mutates_args=["dst"])


    @torch.library.custom_op("mylib::scale", mutates_args=())
    def scale(x: torch.Tensor) -> torch.Tensor:
        return x * 2


    if hasattr(torch.ops, "sglang"):

        @register_custom_op(mutates_args=["dst"])
        def sgl_copy(src: torch.Tensor, dst: torch.Tensor) -> None:
            _copy[(1,)](src, dst)

    if torch.version.hip:
        _register = torch.library.custom_op
    else:
        _register = torch.library.triton_op


    @_register("unsloth::rope", mutates_args=())
    def _rope(q: torch.Tensor) -> torch.Tensor:
        return q * 2  # any strides


    def step(ids, x, out, name):
        torch.ops.vllm.store_ids(ids.to(torch.int32), name)
        torch.ops.vllm.launch_copy(x[:, 0], out)
        torch.ops.mylib.scale.default(x.t())
        torch.ops.mylib.shift(x.t())
        torch.ops.sglang.sgl_copy(x.t(), out)
        torch.ops.unsloth.rope(x.t())
    """
    assert codes(source) == [(51, "GPU102"), (53, "GPU102"), (54, "GPU102")]
    first = next(d for d in lint_text(textwrap.dedent(source), preview=True) if d.line == 51)
    assert "so the custom op `torch.ops.vllm.launch_copy` (in Python: `_launch`) receives" in first.message


def test_a_mask_bound_to_a_name_indexes_by_copy():
    """flashinfer's trace check: ``valid = torch.arange(m) < rows.unsqueeze(1)``, then
    ``q[valid].view(torch.uint8)`` of a permuted, sliced ``q``: a mask index copies."""
    source = """
    import torch


    def check(q, rows, m, k, i):
        q = q.permute(2, 0, 1)[:, :, :k]
        valid = torch.arange(m, device=q.device) < rows.unsqueeze(1)
        either = (rows >= 0) | ~valid
        a = q[valid].view(torch.uint8)
        b = q[either].view(torch.uint8)
        c = q[i].view(torch.uint8)
        return a, b, c
    """
    assert codes(source) == [(11, "GPU102")]


# A cast of an int32 column: a no-op (still strided) unless the dtype certainly changes.
CASTS = [
    ("torch.zeros(4, 8, dtype=torch.int32)", ".to(torch.int32)"),
    ("torch.zeros(4, 8, dtype=torch.int32)", ".int()"),
    ("torch.zeros(4, 8, dtype=torch.int64)", ".long()"),
    ("torch.zeros(4, 8, dtype=torch.int64)", ".to(torch.int32)"),
    ("torch.zeros(4, 8, dtype=torch.float32)", ".float()"),
    ("torch.zeros(4, 8, dtype=torch.float32)", ".half()"),
    ("torch.zeros(4, 8, dtype=torch.float32)", ".type(torch.float64)"),
]


@pytest.mark.parametrize(("factory", "cast"), CASTS)
def test_cast_model_matches_torch(factory: str, cast: str):
    value = eval(f"{factory}[:, 0]{cast}", {"torch": torch})
    source = f"""
    import torch

    def f():
        table = {factory}
        torch.ops._C.op(table[:, 0]{cast})
    """
    assert ([code for _, code in codes(source)] == ["GPU101"]) == (not value.is_contiguous())


def test_dtype_changing_cast_of_permuted_view_stays_strided():
    assert not torch.zeros(4, 8).t().to(torch.bfloat16).is_contiguous()
    source = """
    import torch

    def f(w):
        torch.ops._C.op(w.t().to(torch.bfloat16))
    """
    assert codes(source) == [(5, "GPU101")]


def test_size1_slice_is_contiguous_and_keeps_row_stride():
    bt = torch.zeros(4, 8, dtype=torch.int32)
    view = bt[:1, 0]
    assert view.is_contiguous() and view.contiguous() is view and view.stride(0) == 8


# -- provenance --------------------------------------------------------------------------------


def test_branches_tuples_and_loops():
    source = """
    import torch

    def f(x, flag, out):
        a, b = x[:, 0], x[1]
        torch.ops._C.op(out, a)
        torch.ops._C.op(out, b)
        y = x[0]
        if flag:
            y = x.t()
        torch.ops._C.op(out, y)
        z = x.flatten()
        for _ in range(3):
            torch.ops._C.op(out, z)
            z = x[..., 0]
    """
    assert codes(source) == [(6, "GPU102"), (11, "GPU102"), (14, "GPU102")]


def test_unknown_layout_is_flagged_only_for_a_cast_at_the_sink():
    source = """
    import torch

    def f(idx, meta, out, n):
        torch.ops._C.op(out, idx)
        torch.ops._C.op(out, meta.slots)
        torch.ops._C.op(out, idx[:n].int())
        torch.ops._C.op(out, (idx + 1).int())
        torch.ops._C.op(out, idx.int())
        torch.ops._C.op(out, meta.slots.long())
        rows = out[idx.long()]
    """
    assert codes(source) == [(9, "GPU101"), (10, "GPU101")]


def test_optional_cast_reports_and_fixes_the_cast_branch():
    source = textwrap.dedent(
        """
        import torch

        def f(bt, ckpt, out):
            idx = None if ckpt is None else bt[:, 1].to(torch.int32)
            torch.ops._C.op(out, idx)
        """
    )
    assert codes(source) == [(5, "GPU101")]
    assert "bt[:, 1].to(torch.int32).contiguous()\n" in fix_text(source, unsafe=True)
    assert "op(out, idx)" in fix_text(source, unsafe=True)
    assert fix_text(source) == source  # a custom op may write through it: the fix is unsafe


def test_message_quotes_the_origin():
    source = textwrap.dedent(
        """
        import torch

        def f(block_table, out):
            state_indices = block_table[:, 0]
            torch.ops._C.kda(out, state_indices.to(torch.int32))
        """
    )
    (diagnostic,) = lint_text(source)
    assert diagnostic.message.startswith(
        "`state_indices` is a column slice of `block_table` (line 5); `.to(torch.int32)` is a no-op"
    )
    assert (diagnostic.line, diagnostic.col) == (6, 27)


def test_message_quotes_the_cast_of_a_long_receiver():
    """The cast is what the call adds to its receiver, found before the texts are shortened for
    the message: a receiver longer than a message quotes left nothing of it (SGLang)."""
    source = textwrap.dedent(
        """
        import torch

        def f(self, q, out, bs, max_len):
            padded_q = self.padded_q_buffer_of_the_backend[
                :bs, :max_len, :, :
            ].to(dtype=q.dtype)
            torch.ops._C.pad(out, padded_q)
        """
    )
    (diagnostic,) = lint_text(source)
    assert "; `.to(dtype=q.dtype)` is a no-op when there is nothing to convert" in diagnostic.message
    assert diagnostic.message.startswith("`self.padded_q_buffer_of_the_backend[:bs, :max...` is a column-range")


# -- sinks -----------------------------------------------------------------------------------------

KERNEL = """
import torch
from vllm.triton_utils import tl, triton


@triton.jit
def _k(x_ptr, out_ptr, stride, N: tl.constexpr):
    i = tl.program_id(0)
    tl.store(out_ptr + i, tl.load(x_ptr + i * stride))
"""


def test_stride_aware_launches_are_silent():
    source = KERNEL + """
def f(x, out):
    s = x.stride(0)
    _k[(4,)](x[:, 0], out, x.stride(0), N=4)
    _k[(4,)](x[:, 0], out, s, N=4)
    _k[(4,)](x[:, 0], out, 1, N=4)
"""
    assert codes(source) == [(15, "GPU102")]


def test_strides_read_from_a_local_tuple_make_a_launch_stride_aware():
    """``strides = x.stride()`` then ``strides[0]`` (vLLM's fp8 KV-cache dequant wrapper) hands
    the kernel ``x``'s strides as surely as ``x.stride(0)`` does; another tensor's do not."""
    source = KERNEL + """
def wrapper(x, out):
    strides = x.stride()
    _k[(4,)](x, out, strides[0], N=4)


def other_strides(x, y, out):
    strides = y.stride()
    _k[(4,)](x, out, strides[0], N=4)


def caller(x, y, out):
    wrapper(x.t(), out)
    other_strides(x.t(), y, out)
"""
    assert codes(source) == [(source.count("\n"), "GPU102")]


SCALE_KERNELS = """
import triton
import triton.language as tl


@triton.jit
def _first(p):
    return tl.load(p)


@triton.jit
def _at(p, i):
    return tl.load(p + i)


@triton.jit
def _scaled(x_ptr, scale_ptr, out_ptr):
    i = tl.program_id(0)
    tl.store(out_ptr + i, tl.load(x_ptr + i) * tl.load(scale_ptr))


@triton.jit
def _scaled_by_helper(x_ptr, scale_ptr, out_ptr):
    i = tl.program_id(0)
    tl.store(out_ptr + i, tl.load(x_ptr + i) * _first(scale_ptr))


@triton.jit
def _scaled_moved(x_ptr, scale_ptr, out_ptr):
    i = tl.program_id(0)
    scale_ptr += i
    tl.store(out_ptr + i, tl.load(x_ptr + i) * tl.load(scale_ptr))


@triton.jit
def _scaled_per_row(x_ptr, scale_ptr, out_ptr):
    i = tl.program_id(0)
    tl.store(out_ptr + i, tl.load(x_ptr + i) * _at(scale_ptr, i))
"""


@pytest.mark.parametrize(("launch", "reported"), [
    ("_scaled[(4,)](x, scale.expand(4, 8), out)", False),  # only the first element is read
    ("_scaled_by_helper[(4,)](x, scale.expand(4, 8), out)", False),
    ("_scaled[(4,)](x.t(), scale, out)", True),  # the data is read as `ptr + i`
    ("_scaled_per_row[(4,)](x, scale.expand(4, 8), out)", True),  # so is the scale here
    ("_scaled_moved[(4,)](x, scale.expand(4, 8), out)", True),  # and here: `scale_ptr += i` first
])  # fmt: skip
def test_a_pointer_read_without_an_offset_needs_no_layout(launch, reported):
    """``tl.load(scale_ptr)`` reads the element the pointer points at, whatever the strides:
    vLLM's unified attention reads its per-tensor ``k_scale`` so, handed ``k_scale.expand(shape)``."""
    assert torch.ones(1).expand(4, 8).stride() == (0, 0)  # element 0 is the scale itself
    source = SCALE_KERNELS + f"\n\ndef f(x, scale, out):\n    {launch}\n"
    assert bool(codes(source)) == reported


@pytest.mark.parametrize(("wrapper", "reported"), [
    # None or contiguous after the `if`: never the argument as passed
    ("if bias is not None:\n        bias = bias.contiguous()", False),
    ("if None is not bias:\n        bias = bias.contiguous()", False),
    ("if bias is None:\n        pass\n    else:\n        bias = bias.contiguous()", False),
    # the argument itself reaches the kernel on the path that does not test None
    ("if bias is None:\n        bias = torch.zeros(4)", True),
    ("if out is not None:\n        bias = bias.contiguous()", True),
    ("if bias is not None and out is not None:\n        bias = bias.contiguous()", True),
])  # fmt: skip
def test_a_name_tested_against_none_is_none_on_that_branch(wrapper, reported):
    source = KERNEL + f"""
def add_bias(x, bias, out):
    {wrapper}
    _k[(4,)](bias, out, 1, N=4)


def caller(x, b, out):
    add_bias(x, b.expand(4), out)
"""
    assert bool(codes(source)) == reported


# -- a contiguity check: `if not x.is_contiguous(): x = x.contiguous()` ---------------------------

# Guards of ``q`` (a parameter, or the transpose ``x.t()`` of one) before ``q`` reaches a kernel
# that reads ``ptr + offset``. ``reported``: what GPU102 must say, which is whether torch hands
# the kernel a non-contiguous tensor (``test_a_contiguity_check_matches_torch`` runs each).
CONTIGUITY_GUARDS = [
    ("if not q.is_contiguous():\n        q = q.contiguous()", False),
    ("if q.is_contiguous():\n        pass\n    else:\n        q = q.contiguous()", False),
    ("q = q if q.is_contiguous() else q.contiguous()", False),
    ("q = q.contiguous() if not q.is_contiguous() else q", False),
    ("if not q.is_contiguous():\n        return out", False),  # a guard: the launch sees only contiguous q
    ("if not (q.is_contiguous() and out.is_contiguous()):\n        return out", False),
    ("if not q.is_contiguous() or not out.is_contiguous():\n        return out", False),
    # the copy taken on the wrong branch, or a test that says nothing of `q`
    ("q = q.contiguous() if q.is_contiguous() else q", True),
    ("if q.is_contiguous():\n        q = q.contiguous()", True),
    ("if not out.is_contiguous():\n        q = q.contiguous()", True),
    ("if not q.is_contiguous() and out.is_contiguous():\n        q = q.contiguous()", True),
    ("if q.is_contiguous() or out.is_contiguous():\n        pass\n    else:\n        return out", True),
    ("if not q.is_contiguous():\n        q = q.contiguous()\n    q = q.t()", True),  # a view taken after the check
]  # fmt: skip


def _guarded(guard: str) -> str:
    """``guard`` in a wrapper whose caller hands it a transpose."""
    return KERNEL + f"""
def scores(q, out):
    {guard}
    _k[(4,)](q, out, 1, N=4)
    return out


def caller(x, q, out):
    scores(x.t(), out)
"""


@pytest.mark.parametrize(("guard", "reported"), CONTIGUITY_GUARDS)
def test_a_contiguity_check_makes_the_tensor_contiguous_where_it_passes(guard, reported):
    """Checked in the wrapper: a caller handing it a transpose is reported only where the wrapper
    may still launch it as passed; and in the caller's own function, the view made there."""
    assert bool(codes(_guarded(guard))) == reported
    local = KERNEL + f"""
def scores(x, out):
    q = x.t()
    {guard}
    _k[(4,)](q, out, 1, N=4)
    return out
"""
    assert bool(codes(local)) == reported


@pytest.mark.parametrize(("guard", "reported"), CONTIGUITY_GUARDS)
def test_a_contiguity_check_matches_torch(guard, reported):
    """Whether a transpose may reach the launch, run with torch: reported exactly when it does for
    some ``out`` (contiguous, or a step slice)."""
    launched = []
    source = f"def scores(q, out):\n    {guard}\n    launched.append(q)\n    return out\n"
    namespace = {"launched": launched}
    exec(source, namespace)  # noqa: S102 -- this test's own source, run on torch
    for out in (torch.zeros(8), torch.zeros(16)[::2]):
        namespace["scores"](torch.zeros(4, 8).t(), out)
    assert any(not q.is_contiguous() for q in launched) == reported


@pytest.mark.parametrize(("arg", "reported"), [
    ("q if q.is_contiguous() else q.contiguous()", False),  # each branch with what its test says
    ("q.contiguous() if q.is_contiguous() else q", True),
    ("q.contiguous() if q is not None else q", False),  # the other branch is None
])  # fmt: skip
def test_a_conditional_expression_handed_to_the_kernel_is_judged_per_branch(arg, reported):
    source = KERNEL + f"""
def scores(x, out):
    q = x.t()
    _k[(4,)]({arg}, out, 1, N=4)
"""
    assert bool(codes(source)) == reported


def test_a_checked_fast_path_beside_a_torch_path_needs_nothing_as_in_vllm_repetition_penalties():
    """vLLM's ``apply_repetition_penalties`` calls its custom op only ``if logits.is_cuda and
    logits.is_contiguous()``, and a torch path otherwise: a caller may hand it any layout."""
    source = """
    import torch


    def apply_penalties(logits, penalties):
        if logits.is_cuda and logits.is_contiguous():
            torch.ops._C.apply_repetition_penalties_(logits, penalties)
        else:
            logits.div_(penalties)


    def sample(logits, penalties):
        logits = logits.to(torch.float32)
        apply_penalties(logits, penalties)
        apply_penalties(logits.t(), penalties)
    """
    assert codes(source) == []
    assert codes(source.replace(" and logits.is_contiguous()", "")) == [(14, "GPU101"), (15, "GPU102")]


@pytest.mark.parametrize(("check", "reported"), [
    ("assert x.stride(0) == y.stride(0)", False),  # the launch steps through y by x's strides, equal
    ("assert x.stride(0) == y.stride(0) == z.stride(0)", False),
    ("assert y.stride(0) == z.stride(0)\n    assert z.stride(0) == x.stride(0)", False),  # in two steps
    ("assert x.stride()[1:] == y.stride()[1:]", False),
    ("if x.stride(0) != y.stride(0):\n        raise ValueError('strides differ')", False),
    ("assert x.stride(0) == 8", True),  # says nothing of y
    ("assert x.stride(0) >= y.stride(0)", True),
    ("if x.stride(0) == y.stride(0):\n        pass", True),  # not a check: both paths go on
    ("assert x.stride(0) == y.stride(0)\n    y = y[:, :2]", True),  # y is another tensor at the launch
])  # fmt: skip
def test_a_check_that_strides_are_equal_makes_the_launch_stride_aware_for_both(check, reported):
    """vLLM's fused recurrent KDA wrapper asserts ``q.stride(1) == k.stride(1) == v.stride(1)``
    and hands the kernel ``q.stride(1)`` alone, for all three."""
    source = KERNEL + f"""
def wrapper(x, y, z, out):
    {check}
    _k[(4,)](y, out, x.stride(0), N=4)


def caller(a, out):
    wrapper(a, a[:, :4], a, out)
"""
    assert bool(codes(source)) == reported


def test_a_view_the_kernel_stores_through_gets_no_fix():
    """``.contiguous()`` on an output hands the kernel a copy: its stores land there and are lost."""
    source = KERNEL + """
def f(x, out):
    _k[(4,)](x, out[:, 0], 1, N=4)
"""
    (diagnostic,) = lint_text(source)
    assert diagnostic.code == "GPU102" and diagnostic.fix is None
    assert diagnostic.message.endswith(
        "by the Triton kernel `_k`). A `.contiguous()` copy would lose those writes: pass the strides, "
        "or hand it a contiguous tensor and copy the result back."
    )
    assert "Add `.contiguous()`" not in diagnostic.message
    assert fix_text(source, unsafe=True) == source


def test_a_view_the_kernel_only_reads_keeps_its_fix():
    source = KERNEL + """
def f(x, out):
    _k[(4,)](x[:, 0], out, 1, N=4)
"""
    (diagnostic,) = lint_text(source)
    assert diagnostic.fix is not None and diagnostic.message.endswith("Add `.contiguous()`.")
    assert "x[:, 0].contiguous()" in fix_text(source)


UPDATE_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def _reduce_into_first(state_ptr, N: tl.constexpr):
    total = tl.sum(tl.load(state_ptr + tl.arange(0, N)))
    tl.store(state_ptr, total)  # the first element only: no layout need, but a write


@triton.jit
def _set(out_ptr, N: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, N), 0)


@triton.jit
def _outer(out_ptr, N: tl.constexpr):
    _set(out_ptr, N)


def set_all(out):
    _outer[(1,)](out, N=4)


def filled(out):
    _outer[(1,)](out, N=4)
    return out


def filled_through(out):
    return filled(out)
"""


@pytest.mark.parametrize(("call", "written"), [
    # loaded as `ptr + offset` (the need), stored at the pointer itself: the message says both
    ("_reduce_into_first[(1,)](states[:, 0], N=4)",
     ("`_reduce_into_first` also writes through it (written by the Triton kernel `_reduce_into_first`), so a "
      "`.contiguous()` copy would lose them")),
    # stored in a jit helper the kernel hands the pointer to
    ("_outer[(1,)](states[:, 0], N=4)", "A `.contiguous()` copy would lose those writes"),
    # through a Python wrapper, then the kernel, then its helper
    ("set_all(states[:, 0])", "A `.contiguous()` copy would lose those writes"),
])  # fmt: skip
def test_writes_through_kernels_helpers_and_wrappers_drop_the_fix(call, written):
    source = UPDATE_KERNEL + f"""

def step(states):
    {call}
"""
    (diagnostic,) = lint_text(source)
    assert diagnostic.code == "GPU102" and diagnostic.fix is None
    assert written in diagnostic.message and "Add `.contiguous()`" not in diagnostic.message
    assert fix_text(source, unsafe=True) == source


@pytest.mark.parametrize("call", ["q = filled(states[:, 0])", "q = filled_through(states[:, 0])"])
def test_writes_a_wrapper_returns_keep_the_unsafe_fix(call):
    """SGLang's ``pad_draft_extend_query`` writes into ``padded_q`` and returns it: the caller
    reads the writes from the result, so a copy handed in loses nothing."""
    source = UPDATE_KERNEL + f"""

def step(states):
    {call}
    return q
"""
    (diagnostic,) = lint_text(source)
    assert diagnostic.code == "GPU102" and diagnostic.fix is not None and diagnostic.fix.applicability == "unsafe"
    assert diagnostic.message.endswith("Add `.contiguous()`.")


def test_writes_through_a_wrapper_in_another_file_drop_the_fix(tmp_path: Path):
    (tmp_path / "kernels.py").write_text(UPDATE_KERNEL)
    (tmp_path / "caller.py").write_text("from kernels import set_all\n\n\ndef step(states):\n    set_all(states.t())\n")
    (diagnostic,) = lint_paths([str(tmp_path)])
    assert (Path(diagnostic.path).name, diagnostic.line, diagnostic.code) == ("caller.py", 5, "GPU102")
    assert diagnostic.fix is None and "would lose those writes" in diagnostic.message


def test_a_custom_op_is_not_known_to_write_and_keeps_its_unsafe_fix():
    source = """
import torch


def f(out, x):
    torch.ops._C.rms_norm(out[:, :4], x)
"""
    (diagnostic,) = lint_text(source)
    assert diagnostic.fix is not None and diagnostic.fix.applicability == "unsafe"
    assert diagnostic.message.endswith("Add `.contiguous()`.")


def test_configured_sink():
    source = """
    from fast_ext import kernels

    def f(x):
        kernels.gemm(x.t())
        kernels.other(x.t())
    """
    assert codes(source) == []
    assert codes(source, contiguous_sinks=["fast_ext.kernels.gemm"]) == [(5, "GPU102")]
    assert codes(source, contiguous_sinks=["fast_ext.kernels.*"]) == [(5, "GPU102"), (6, "GPU102")]


def test_plain_torch_calls_are_not_sinks():
    source = """
    import torch

    def f(x, w, out):
        out.copy_(x[:, 0].int())
        torch.matmul(x, w.t())
        print(x.t())
        torch.ops.aten.mm(x.t(), w)  # PyTorch's own operators handle any strides
        torch.ops.prims.convert_element_type(x[:, 0].int(), torch.int64)
        return x[:, 0].long() * 2
    """
    assert codes(source) == []


@pytest.mark.parametrize(
    ("check", "flagged"),
    [
        ("assert x.is_contiguous()", True),
        ("assert x.is_contiguous(), 'dense please'", True),
        ("if not x.is_contiguous():\n        raise ValueError('x')", True),
        ("if x.dtype != torch.int32 or not x.is_contiguous():\n        raise ValueError('x')", True),
        ("torch._check(x.is_contiguous())", True),
        ("assert x.stride(-1) == 1", True),
        ("if not x.is_contiguous():\n        x = x.contiguous()", False),
        ("print(x.is_contiguous())", False),
    ],
)
def test_checked_boundaries_need_contiguity(tmp_path: Path, check: str, flagged: bool):
    (tmp_path / "boundary.py").write_text(f"import torch\n\n\ndef wrapper(x, y):\n    {check}\n    return y\n")
    (tmp_path / "caller.py").write_text(
        "from boundary import wrapper\n\n\ndef f(bt):\n    return wrapper(bt.t(), bt[:, 0])\n"
    )
    found = [(Path(d.path).name, d.line, d.code) for d in lint_paths([str(tmp_path)])]
    assert found == ([("caller.py", 5, "GPU102")] if flagged else [])


SHARED_STRIDE_KERNELS = """
import triton
import triton.language as tl


@triton.jit
def _load_tile(base, head, tokens, head_stride: tl.constexpr, token_stride: tl.constexpr):
    offsets = head * head_stride + tokens[:, None] * token_stride + tl.arange(0, 128)[None, :]
    return tl.load(base + offsets)


@triton.jit
def _amax_qkv(q, k, v, out, head_stride: tl.constexpr, token_stride: tl.constexpr, block: tl.constexpr):
    head = tl.program_id(0)
    tokens = tl.program_id(1) * block + tl.arange(0, block)
    q_tile = _load_tile(q, head, tokens, head_stride, token_stride)
    k_tile = _load_tile(k, head, tokens, head_stride, token_stride)
    v_tile = _load_tile(v, head, tokens, head_stride, token_stride)
    tl.store(out + head, tl.max(q_tile) + tl.max(k_tile) + tl.max(v_tile))


@triton.jit
def _rows(x_ptr, y_ptr, out_ptr, stride_x):
    row = tl.program_id(0)
    cols = tl.arange(0, 128)
    x_ptr += row * stride_x
    tl.store(out_ptr + row * 128 + cols, tl.load(x_ptr + cols) + tl.load(y_ptr + row * stride_x + cols))


@triton.jit
def _rows_and_flat(x_ptr, y_ptr, out_ptr, stride_x):
    row = tl.program_id(0)
    cols = tl.arange(0, 128)
    stepped = tl.load(x_ptr + row * stride_x + cols) + tl.load(y_ptr + row * stride_x + cols)
    tl.store(out_ptr + row * 128 + cols, stepped + tl.load(y_ptr + row * 128 + cols))  # y read dense too


@triton.jit
def _pair(a, b, stride):
    i = tl.program_id(0)
    return tl.load(a + i * stride) + tl.load(b + i)


@triton.jit
def _pair_kernel(q, k, out, stride):
    tl.store(out + tl.program_id(0), _pair(q, k, stride))


@triton.jit
def _gather_rows(cache_ptr, positions_ptr, out_ptr, positions_stride, rd: tl.constexpr):
    pid = tl.program_id(0)
    t = tl.load(positions_ptr + 0 * positions_stride + pid)
    cols = tl.arange(0, rd)
    tl.store(out_ptr + pid * rd + cols, tl.load(cache_ptr + t * rd + cols))
"""

SHARED_STRIDE_HOSTS = """
import torch

def prepare(q, k, v, out):
    head_stride = q.stride(0)
    token_stride = q.stride(1)
    _amax_qkv[(q.shape[0], 4)](q, k, v, out, head_stride=head_stride, token_stride=token_stride, block=64)


def add_rows(x, y, out):
    _rows[(x.shape[0],)](x, y, out, x.stride(0))


def outer(q, k, v, out):  # hands all three on: the caller's views decide
    prepare(q, k, v, out)


def outer_fresh(k, v, out):  # k is stepped with a fresh tensor's strides, two calls down
    prepare(torch.empty(k.shape), k, v, out)


def add_rows_and_flat(x, y, out):
    _rows_and_flat[(x.shape[0],)](x, y, out, x.stride(0))


def add_dense_rows(x, y, out):  # y is stepped with the strides of a dense copy of x
    x = x.contiguous()
    _rows[(x.shape[0],)](x, y, out, x.stride(0))


def two_ways(q, r, k, out):
    _rows[(4,)](q, k, out, q.stride(0))
    _rows[(4,)](r, k, out, r.stride(0))


def prepare_fresh(k, v, out):
    q = torch.empty(k.shape, dtype=k.dtype)
    _amax_qkv[(q.shape[0], 4)](q, k, v, out, head_stride=q.stride(0), token_stride=q.stride(1), block=64)


def pair(q, k, out):
    _pair_kernel[(q.shape[0],)](q, k, out, q.stride(0))


def gather_rows(cache, positions, out):
    _gather_rows[(out.shape[0],)](cache, positions, out, positions.stride(0), rd=128)
"""


@pytest.mark.parametrize(("call", "reported"), [
    # k and v are read with q's strides, through a jit helper (SGLang's fp8 attention prologue):
    # they must have q's layout, which the same permute gives them, and `.contiguous()` would
    # break that
    ("prepare(q.permute(1, 0, 2), k.permute(1, 0, 2), v.permute(1, 0, 2), out)", False),
    ("prepare(q.permute(1, 0, 2), k.permute(0, 2, 1), v.permute(1, 0, 2), out)", True),  # another view
    ("prepare(q, k.permute(1, 0, 2), v, out)", True),  # q's strides may be a dense tensor's
    # one tensor handed as q and k: one layout, whatever it is
    ("kc = k.float()\n    prepare(kc, kc, v, out)", False),
    ("kc = k.float()\n    prepare(q, kc, v, out)", True),  # the cast is no contiguity fix
    ("prepare_fresh(k.permute(1, 0, 2), v, out)", True),  # read with a fresh tensor's strides
    ("outer(q.permute(1, 0, 2), k.permute(1, 0, 2), v.permute(1, 0, 2), out)", False),
    # names bound to the views stand for them
    ("qp = q.permute(1, 0, 2)\n    kp = k.permute(1, 0, 2)\n    prepare(qp, kp, v.permute(1, 0, 2), out)", False),
    ("qp = q.permute(1, 0, 2)\n    kp = k.permute(0, 2, 1)\n    prepare(qp, kp, v.permute(1, 0, 2), out)", True),
    ("outer(q, k.permute(1, 0, 2), v, out)", True),
    ("outer_fresh(k.permute(1, 0, 2), v, out)", True),
    ("add_rows(x[:, :128], y[:, :128], out)", False),  # y's rows are stepped with x's row stride
    ("add_rows(x, y[:, :128], out)", True),
    ("add_rows(x, y, out[:, 0])", True),  # out is written as `ptr + row * 128 + col`
    ("two_ways(x[:, :128], x[:, 128:], y[:, :128], out)", True),  # two tensors' strides: only dense is safe
    ("add_rows(x[:, 128:], y[:, :128], out)", False),  # any column range keeps the row stride
    ("add_dense_rows(x[:, :128], y[:, :128], out)", True),
    ("add_rows_and_flat(x[:, :128], y[:, :128], out)", True),  # one of y's reads assumes it dense
    ("pair(q, k.t(), out)", True),  # the helper steps through k without the stride it gets
    ("pair(q.t(), k, out)", False),  # q's own strides are handed: stride-aware
    # the index loaded through positions' strides is data: the cache is still read as `ptr + i`
    ("gather_rows(x[:, :128], y, out)", True),
])  # fmt: skip
def test_a_pointer_stepped_with_another_tensors_strides_needs_those_not_contiguity(call, reported):
    source = SHARED_STRIDE_KERNELS + SHARED_STRIDE_HOSTS + f"\n\ndef caller(q, k, v, x, y, out):\n    {call}\n"
    found = codes(source)
    assert bool(found) == reported and {line for line, _ in found} <= {source.count("\n")}  # the call's line


def test_a_pointer_stepped_with_another_tensors_strides_across_files(tmp_path: Path):
    """The kernels in one module, the launches in another, the calls in a third: the offsets
    recorded in the kernel's summary decide at the launch, as in one file."""
    package = tmp_path / "engine"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "kernels.py").write_text(textwrap.dedent(SHARED_STRIDE_KERNELS))
    (package / "hosts.py").write_text("from engine.kernels import _amax_qkv, _gather_rows, _pair_kernel, _rows, _rows_and_flat\n"
                                      + textwrap.dedent(SHARED_STRIDE_HOSTS))  # fmt: skip
    (package / "model.py").write_text(textwrap.dedent(
        """
        from engine.hosts import add_rows, pair, prepare


        def step(q, k, v, x, y, out):
            prepare(q.permute(1, 0, 2), k.permute(1, 0, 2), v.permute(1, 0, 2), out)
            prepare(q, k.permute(1, 0, 2), v, out)
            add_rows(x[:, :128], y[:, :128], out)
            add_rows(x, y, out[:, 0])
            pair(q, k.t(), out)
        """
    ))
    for fast in (True, False):
        linter = Linter(make_settings(), fast=fast)
        found = [(Path(d.path).name, d.line, d.code, d.message)
                 for d in linter.run([str(p) for p in package.glob("*.py")], jobs=1).diagnostics]  # fmt: skip
        assert [f[:3] for f in found] == [("model.py", 7, "GPU102"), ("model.py", 9, "GPU102"), ("model.py", 10, "GPU102")]
        assert "stepped through by `_amax_qkv` (line 8) with the strides of `q`, which is not handed the same view" in found[0][3]


def test_summaries_cross_files_through_an_unparsed_shim(tmp_path: Path):
    package = tmp_path / "engine"
    (package / "ops").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "ops" / "__init__.py").write_text("from ._impl import gather\n")  # no trigger: not parsed
    (package / "ops" / "_impl.py").write_text(textwrap.dedent(KERNEL) + textwrap.dedent(
        """

        def _launch(idx, out):
            _k[(out.numel(),)](idx, out, 1, N=4)


        def gather(idx, out):
            _launch(idx, out)
        """
    ))
    (package / "model.py").write_text(textwrap.dedent(
        """
        import torch

        from engine.ops import gather


        def step(block_table, out):
            gather(block_table[:, 0].to(torch.int32), out)
            gather(block_table[:, 0], out)
            gather(block_table[:, 0].contiguous(), out)
            gather(out, block_table[:, 0])
        """
    ))
    found = [(Path(d.path).name, d.line, d.code, d.message) for d in lint_paths([str(package)])]
    assert [f[:3] for f in found] == [("model.py", 8, "GPU101"), ("model.py", 9, "GPU102"), ("model.py", 11, "GPU102")]
    assert "passed on to `_launch`" in found[0][3] and "Triton kernel `_k`" in found[0][3]


def test_a_rule_alone_records_the_summaries_it_needs():
    source = KERNEL + """
def f(x, out):
    _k[(4,)](x.t(), out, 1, N=4)
    _k[(4,)](x.contiguous().t(), out, 1, N=4)
    _k[(4,)](x[:, 0].int(), out, 1, N=4)
"""
    for code, line in (("GPU101", 14), ("GPU102", 12), ("GPU103", 13)):
        assert [(d.line, d.code) for d in lint_text(source, select=[code])] == [(line, code)]


def test_size1_strides_only_in_preview():
    source = KERNEL + """
def f(bt, out):
    first = bt[:1, 0].contiguous()
    _k[(1,)](first, out, first.stride(0), N=4)
"""
    assert codes(source, preview=True) == [(13, "GPU103")]
    assert codes(source, preview=False) == []


def test_fixed_code_lints_clean():
    for path in sorted((ROOT / "fixtures" / "gpu1xx").glob("*.py")):
        fixed = fix_text(path.read_text(), path=str(path), unsafe=True)
        assert [d for d in lint_text(fixed, path=str(path)) if d.code in ("GPU101", "GPU102")] == [], path


@pytest.mark.parametrize(("receiver", "fixed"), [
    # flashinfer's `cake_gated_act_mxfp8_backend`: the fix went before the `)`, onto the `else`
    # arm, and the finding stayed, so `fix` appended `.contiguous()` there ten times.
    ("(col.t() if colwise else col)", "(col.t() if colwise else col).contiguous()"),
    ("(\n        col.t() if colwise else col  # stored transposed\n    )",
     "(\n        col.t() if colwise else col  # stored transposed\n    ).contiguous()"),
    ("((col.t() if colwise else col))", "((col.t() if colwise else col)).contiguous()"),
    ("(col.t())", "(col.t().contiguous())"),  # atomic: inside its parentheses is the same
])  # fmt: skip
def test_the_fix_of_a_parenthesised_expression_goes_after_its_parentheses(receiver, fixed):
    source = f"import torch\n\n\ndef f(col, colwise):\n    return {receiver}.view(torch.uint8)\n"
    once = fix_text(source, unsafe=True)
    assert once == source.replace(receiver, fixed)
    assert [d for d in lint_text(once) if d.code.startswith("GPU1")] == []
    assert fix_text(once, unsafe=True) == once


def test_fast_path_agrees_with_plain_path():
    files = sorted(str(p) for p in (ROOT / "fixtures" / "gpu1xx").rglob("*.py"))
    settings = make_settings(preview=True)
    fast = Linter(settings, fast=True).run(files, jobs=1).diagnostics
    plain = Linter(settings, fast=False).run(files, jobs=1).diagnostics
    assert fast == plain and fast


def test_a_python_op_whose_function_is_masked_is_known_on_every_path(tmp_path):
    """xformers' ``@torch.library.custom_op("xformers_python::..._impl", ...)`` on a top-level
    ``def`` no finding needs: the plan masks it out of the parse, decorator and all, yet the op
    it registers must be read as on the plain path."""
    (tmp_path / "ops.py").write_text(textwrap.dedent("""
        import torch


        @torch.library.custom_op(
            "mylib::_scale_impl",
            mutates_args=(),
        )
        def _scale_custom_op(x: torch.Tensor) -> torch.Tensor:
            return x * 2


        def scale(weight):
            return torch.ops.mylib._scale_impl(weight.t())


        def shift(weight):
            return torch.ops.mylib.shift(weight.t())
    """))
    settings = make_settings(preview=True)
    files = [str(tmp_path / "ops.py")]
    fast = Linter(settings, fast=True).run(files, jobs=1).diagnostics
    plain = Linter(settings, fast=False).run(files, jobs=1).diagnostics
    assert [(d.line, d.code) for d in fast] == [(d.line, d.code) for d in plain] == [(18, "GPU102")]


def test_transpose_trigger_is_the_attribute_not_a_prefix():
    # `.T` in `torch.Tensor` is not a transpose: a file with only annotations is not parsed
    # for GPU102, while `x.T`, even as the file's last token, is.
    from sync_lint.pipeline.prefilter import may_match
    from sync_lint.rules import rule_by_code

    rule = rule_by_code("GPU102")()
    assert not may_match(rule, "def f(x: Tensor, y: Type) -> Tensor:\n    return g(x, y)\n")
    for text in ("y = x.T\n", "y = x.T", "y = f(x.T, 1)\n", "y = x.T[0]\n", "y = x.T@w\n"):
        assert may_match(rule, text), text


def test_a_cast_that_one_path_skips_is_not_relied_on():
    # SGLang `triton_store_cache.py` / `memory_pool.py`: the cast is guarded by a dtype test, and the
    # other path hands the parameter itself to the kernel: the author relies on no cast for the layout.
    source = """
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def store_kernel(idx_ptr, out_ptr):
        i = tl.program_id(0)
        tl.store(out_ptr + tl.load(idx_ptr + i), i)

    def store(indices, out):
        indices_i32 = indices.to(torch.int32) if indices.dtype != torch.int32 else indices
        store_kernel[(out.numel(),)](indices_i32, out)

    def store_loc(loc, lens, out):
        if loc.dtype != torch.int64:
            loc = loc.to(torch.int64)
        lens = lens if lens.dtype == torch.int32 else lens.int()
        store_kernel[(out.numel(),)](loc, out)
        store_kernel[(out.numel(),)](lens, out)

    def store_unguarded(loc, out):
        store_kernel[(out.numel(),)](loc.to(torch.int64), out)

    def store_column(block_table, out):
        col = block_table[:, 0]
        col = col.to(torch.int32) if col.dtype != torch.int32 else col
        store_kernel[(out.numel(),)](col, out)

    def store_optional(k, out):
        # The path that skips the cast has no tensor: every tensor reaching the kernel is cast.
        k2 = k.to(torch.int32) if k is not None else k
        store_kernel[(out.numel(),)](k2, out)
    """
    assert codes(source) == [(23, "GPU101"), (28, "GPU102"), (32, "GPU101")]


def test_strides_unpacked_from_stride_or_taken_conditionally_make_a_launch_stride_aware():
    # vLLM `causal_conv1d_update`: `a, b, c = conv_state.stride()` and
    # `s = idx.stride(0) if idx is not None else 0`, passed to the launch.
    source = """
    import triton
    import triton.language as tl

    @triton.jit
    def update_kernel(state_ptr, idx_ptr, out_ptr, s_seq, s_dim, s_tok, s_idx):
        i = tl.program_id(0)
        slot = tl.load(idx_ptr + i * s_idx)
        tl.store(out_ptr + i, tl.load(state_ptr + slot * s_seq + s_dim + s_tok))

    def conv_update(conv_state, state_indices, out):
        s_seq, s_dim, s_tok = conv_state.stride()
        s_idx = state_indices.stride(0) if state_indices is not None else 0
        update_kernel[(out.numel(),)](conv_state, state_indices, out, s_seq, s_dim, s_tok, s_idx)

    def conv_update_dense(conv_state, state_indices, out):
        s_seq, s_dim, s_tok = out.stride()
        update_kernel[(out.numel(),)](conv_state, state_indices, out, s_seq, s_dim, s_tok, 1)

    def forward(cache, block_table, out):
        conv_state = cache.transpose(-1, -2)
        conv_update(conv_state, block_table[:, 0], out)
        conv_update_dense(conv_state, block_table[:, 0], out)
    """
    assert codes(source) == [(23, "GPU102"), (23, "GPU102")]


def test_as_strided_with_row_major_strides_is_contiguous():
    # SGLang `flash_mla_sm120_triton.py`: a flat byte view of the paged cache,
    # `k_cache.as_strided((total_elems,), (1,))`, retyped with `.view(dtype)` and handed to a
    # kernel that addresses it with its own page arithmetic: a 1-D unit-stride view is contiguous.
    source = """
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def decode_kernel(fp8_ptr, u8_ptr, out_ptr, page_bytes):
        i = tl.program_id(0)
        tl.store(out_ptr + i, tl.load(fp8_ptr + i * page_bytes) + tl.load(u8_ptr + i))

    def run(k_cache, out, num_pages, n, h, d):
        page_bytes = k_cache.stride(0)
        raw_flat = k_cache.as_strided((num_pages * page_bytes,), (1,))
        raw_uint8 = raw_flat.view(torch.uint8)
        raw_fp8 = raw_uint8.view(torch.float8_e4m3fn)
        decode_kernel[(n,)](raw_fp8, raw_uint8, out, int(page_bytes))
        rows = torch.as_strided(k_cache, size=(n, h, d), stride=(h * d, d, 1), storage_offset=4)
        torch.ops._C.gather(rows, out)
        torch.ops._C.gather(k_cache.contiguous().as_strided((n, d), (d, 1)), out)
    """
    assert codes(source) == []


def test_as_strided_with_other_strides_still_reports():
    # Look-alikes that are real bugs: a unit last stride with a row stride wider than the row (one
    # head of a [tokens, heads, dim] cache), strides taken from another tensor, a column-major
    # view, strides in a variable, and a non-unit last stride.
    source = """
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def copy_kernel(src_ptr, out_ptr):
        i = tl.program_id(0)
        tl.store(out_ptr + i, tl.load(src_ptr + i))

    def run(kv_flat, x, out, total_k, heads, dim, sizes, strides):
        head = torch.as_strided(kv_flat, size=(total_k, dim), stride=(heads * dim, 1), storage_offset=dim)
        copy_kernel[(total_k * dim,)](head, out)
        copy_kernel[(4,)](x.as_strided((total_k, dim), out.stride()), out)
        copy_kernel[(4,)](x.as_strided((dim, total_k), (1, dim)), out)
        copy_kernel[(4,)](x.as_strided(sizes, strides), out)
        copy_kernel[(4,)](x.as_strided((total_k,), (2,)), out)
    """
    assert codes(source) == [(13, "GPU102"), (14, "GPU102"), (15, "GPU102"), (16, "GPU102"), (17, "GPU102")]


def test_launch_with_the_strides_of_the_parameter_a_local_aliases_is_stride_aware():
    # vLLM `triton_unified_attention.py`: the scale cache (an `as_strided` view with its own
    # strides, built in `triton_attn.py`) is bound to a local only when it is used
    # (`k_scale_ptr = k_scale_cache`, else None), and the launch gets `k_scale_cache.stride()`.
    source = """
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def attn_kernel(out_ptr, ks_ptr, s_blk, s_slot, s_head):
        i = tl.program_id(0)
        tl.store(out_ptr + i, tl.load(ks_ptr + i * s_blk + s_slot + s_head))

    def unified_attention(out, k_scale_cache, use_scales):
        if use_scales:
            ks = k_scale_cache.stride()
            s_blk, s_slot, s_head = ks[0], ks[1], ks[2]
            k_scale_ptr = k_scale_cache
        else:
            s_blk = s_slot = s_head = None
            k_scale_ptr = None
        attn_kernel[(4,)](out, k_scale_ptr, s_blk, s_slot, s_head)

    def forward(base_f32, out, nb, bs, nkv, b, s, h, off):
        k_scale_cache = torch.as_strided(base_f32, size=(nb, bs, nkv), stride=(b, s, h), storage_offset=off)
        unified_attention(out, k_scale_cache, True)
    """
    assert codes(source) == []


def test_launch_with_the_strides_of_another_tensor_than_the_alias_still_reports():
    # The alias may be either of two parameters and only one's strides are passed, or the launch
    # passes the output's strides: the view's strides never reach the kernel.
    source = """
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def attn_kernel(out_ptr, ks_ptr, s_blk):
        i = tl.program_id(0)
        tl.store(out_ptr + i, tl.load(ks_ptr + i * s_blk))

    def either(out, k_scale_cache, v_scale_cache, use_k):
        scales = k_scale_cache if use_k else v_scale_cache
        attn_kernel[(4,)](out, scales, k_scale_cache.stride(0))

    def other(out, k_scale_cache):
        k_scale_ptr = k_scale_cache
        attn_kernel[(4,)](out, k_scale_ptr, out.stride(0))

    def forward(base_f32, out, nb, bs, b):
        k_scale_cache = torch.as_strided(base_f32, size=(nb, bs), stride=(b, 1))
        v_scale_cache = torch.as_strided(base_f32, size=(nb, bs), stride=(1, b))
        either(out, k_scale_cache, k_scale_cache, True)  # expect: GPU102
        other(out, k_scale_cache)  # expect: GPU102
        either(out, k_scale_cache, v_scale_cache, False)  # expect: GPU102
    """
    # `either` steps through `v_scale_cache` with `k_scale_cache`'s strides: the first call hands
    # both one tensor (only its `k_scale_cache` is reported: which path runs is not followed),
    # the third a `v_scale_cache` with other strides.
    assert codes(source) == [(22, "GPU102"), (23, "GPU102"), (24, "GPU102"), (24, "GPU102")]


def _gemm_project(tmp_path: Path) -> Path:
    """vLLM's shape: a `_custom_ops` wrapper around the CUTLASS op, called with transposed
    (column-major) weights on purpose, and a prepack given a transpose of a `.contiguous()` copy."""
    package = tmp_path / "engine"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_custom_ops.py").write_text(textwrap.dedent(
        """
        import torch


        def cutlass_scaled_mm(a, b, scale_a, scale_b, out_dtype):
            out = torch.empty((a.shape[0], b.shape[1]), dtype=out_dtype, device=a.device)
            torch.ops._C.cutlass_scaled_mm(out, a, b, scale_a, scale_b, None)
            return out


        def cutlass_scaled_mm_azp(a, b, scale_a, scale_b, out_dtype, azp_adj):
            out = torch.empty((a.shape[0], b.shape[1]), dtype=out_dtype, device=a.device)
            torch.ops._C.cutlass_scaled_mm_azp(out, a, b, scale_a, scale_b, azp_adj, None, None)
            return out
        """
    ))
    (package / "cutlass.py").write_text(textwrap.dedent(
        """
        import torch

        from engine import _custom_ops as ops


        def apply_block_scaled_mm(A, B, As, Bs):
            return ops.cutlass_scaled_mm(A, B.T, out_dtype=torch.bfloat16, scale_a=As, scale_b=Bs.T)


        def apply_azp(A, B, As, Bs, azp_adj):
            return ops.cutlass_scaled_mm_azp(A, B.T, As, Bs, torch.bfloat16, azp_adj)


        def prepack(w, out, x):
            w.data = torch.ops._C.machete_prepack_B(w.data.contiguous().t(), torch.int8)
            torch.ops._C.silu_and_mul(out, x.t())
        """
    ))
    return package


def _gemm_findings(package: Path, **options) -> list[tuple[str, int, str]]:
    return [(Path(d.path).name, d.line, d.code) for d in lint_paths([str(package)], **options) if d.code.startswith("GPU1")]


ALL_GEMM_FINDINGS = [
    ("cutlass.py", 8, "GPU102"), ("cutlass.py", 8, "GPU102"), ("cutlass.py", 12, "GPU102"),
    ("cutlass.py", 16, "GPU103"), ("cutlass.py", 17, "GPU102"),
]  # fmt: skip


def test_strided_sinks_are_not_contiguity_sinks(tmp_path: Path):
    package = _gemm_project(tmp_path)
    assert _gemm_findings(package, strided_sinks=[]) == ALL_GEMM_FINDINGS
    # The wrapper by name: its calls are not judged (the azp wrapper, not named, still is).
    named_wrapper = _gemm_findings(package, strided_sinks=["engine._custom_ops.cutlass_scaled_mm"])
    assert named_wrapper == [f for f in ALL_GEMM_FINDINGS if f[1] != 8]
    # The op itself: the wrapper hands `b` to a strided sink only, so it needs nothing either.
    named_op = _gemm_findings(package, strided_sinks=["torch.ops._C.cutlass_scaled_mm", "torch.ops._C.machete_prepack_B"])
    assert named_op == [("cutlass.py", 12, "GPU102"), ("cutlass.py", 17, "GPU102")]
    # Globs, as in `contiguous-sinks`; an op left out of the glob (`silu_and_mul`) still reports.
    assert _gemm_findings(package, strided_sinks=["torch.ops._C.cutlass_*", "torch.ops._C.machete_*"]) == [
        ("cutlass.py", 17, "GPU102")
    ]


def test_the_matrix_multiply_ops_are_strided_sinks_by_default(tmp_path: Path):
    """A GEMM's operand order is op-specific and checked at the call (CUTLASS's scaled mm wants
    its weight column-major, ``b.T``): by default the ops named as matrix multiplies are not
    judged; the others are, and ``extend-strided-sinks`` adds to the default."""
    package = _gemm_project(tmp_path)
    assert _gemm_findings(package) == [("cutlass.py", 16, "GPU103"), ("cutlass.py", 17, "GPU102")]
    assert _gemm_findings(package, extend_strided_sinks=["torch.ops._C.machete_*"]) == [("cutlass.py", 17, "GPU102")]


@pytest.mark.parametrize(("op", "matrix_multiply"), [
    ("torch.ops._C.cutlass_scaled_mm", True), ("torch.ops._C.cutlass_scaled_mm_azp", True),
    ("torch.ops._C.bmm_cpu", True), ("torch.ops.vllm.xpu_fp8_bmm", True), ("torch.ops._xpu_C.fp8_gemm", True),
    ("torch.ops._C.dsv3_fused_a_gemm", True), ("torch.ops.symm_mem.fused_matmul_reduce_scatter", True),
    ("torch.ops._C.create_onednn_mm_handler", True), ("torch.ops.aten.mm", True),
    ("torch.ops._C.cutlass_scaled_mm.default", True), ("torch.ops.aten.mm.out", True),
    ("torch.ops._C.silu_and_mul", False), ("torch.ops._C.all_reduce_comm", False), ("torch.ops._C.rms_norm", False),
    ("torch.ops._C.fused_moe_gemm_like", True), ("torch.ops._C.reshape_and_cache_flash", False),
    ("torch.ops._C.comm_mma_layout", False), ("engine.ops.gemm", False),  # only `torch.ops` custom ops
])  # fmt: skip
def test_which_ops_the_default_names_as_matrix_multiplies(op, matrix_multiply):
    import fnmatch

    from sync_lint.config import MATRIX_MULTIPLY_OPS

    assert any(fnmatch.fnmatchcase(op, glob) for glob in MATRIX_MULTIPLY_OPS) == matrix_multiply


def test_strided_sinks_default_and_read_from_pyproject(tmp_path: Path):
    from sync_lint import config

    assert config.OPTIONS["strided-sinks"].default == list(config.MATRIX_MULTIPLY_OPS)
    package = _gemm_project(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.sync-lint]\nstrided-sinks = ["torch.ops._C.cutlass_scaled_mm"]\n')
    settings = config.load(None, start=tmp_path)
    assert settings["strided-sinks"] == ["torch.ops._C.cutlass_scaled_mm"]
    found = [
        (Path(d.path).name, d.line, d.code)
        for d in Linter(settings).run([str(p) for p in sorted(package.glob("*.py"))], jobs=1).diagnostics
        if d.code.startswith("GPU1")
    ]
    assert found == [f for f in ALL_GEMM_FINDINGS if f[1] != 8]
    with pytest.raises(config.ConfigError, match="`strided-sinks` must be a list of strings"):
        config.validate({"strided-sinks": "torch.ops._C.cutlass_scaled_mm"}, "<test>")
    with pytest.raises(config.ConfigError, match="`extend-strided-sinks` must be a list of strings"):
        config.validate({"extend-strided-sinks": "torch.ops._C.machete_*"}, "<test>")


def test_findings_do_not_depend_on_the_other_rules_selected(tmp_path):
    """A module that imports a name on one platform and defines a fallback of it on another:
    a call of it elsewhere is judged by the fallback whatever rules run (a GPU2 rule summarised
    the fallback, which syncs; with the GPU1 rules alone it had no summary, and the call went
    through the import instead, to a custom op)."""
    (tmp_path / "kernels.py").write_text(
        "import torch\n\n\ndef varlen(q, scale):\n    torch.ops._fa_C.fwd(q, scale)\n"
    )
    (tmp_path / "utils.py").write_text(
        "import sys\n\nif sys.platform == 'linux':\n    from kernels import varlen\nelse:\n\n"
        "    def varlen(q, scale):\n        return q * scale.item()\n"
    )
    (tmp_path / "backend.py").write_text(
        "from utils import varlen\n\n\ndef forward(q, scale):\n    return varlen(q, scale.expand(4, 8))\n"
    )
    runs = [
        sorted((Path(d.path).name, d.line, d.code) for d in lint_paths([str(tmp_path)], select=select) if d.code.startswith("GPU1"))
        for select in (["GPU1"], ["GPU1", "GPU202"], ["GPU"])
    ]
    assert runs[0] == runs[1] == runs[2] == [], runs


DTYPE_VIEW_GUARDS = """
import torch


def early_exit(k_cache):
    k = k_cache.transpose(1, 2)
    if k.element_size() != 1:
        raise ValueError("fp8 cache expected")
    return k.view(torch.uint8)


def asserted(k_cache):
    k = k_cache.transpose(1, 2)
    assert k.dtype == torch.float8_e4m3fn
    return k.view(torch.uint8)


def not_in(k_cache):
    k = k_cache.transpose(1, 2)
    if k.dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
        return None
    return k.view(torch.uint8)


def no_exit(k_cache):
    k = k_cache.transpose(1, 2)
    if k.element_size() != 1:
        print("not fp8")
    return k.view(torch.uint8)


def wrong_size(k_cache):
    k = k_cache.transpose(1, 2)
    assert k.dtype == torch.bfloat16
    return k.view(torch.uint8)


def scoped(k_cache, flag):
    k = k_cache.transpose(1, 2)
    if flag:
        assert k.dtype == torch.float8_e4m3fn
    return k.view(torch.uint8)
"""


def test_what_a_test_says_of_the_element_size_holds_where_the_walk_is():
    """An enclosing `if`, an `assert` or a guard that ends the path tells the element size of the
    receiver of `.view(dtype)`; a check that does not end the path, a wrong size, and an
    `assert` inside a branch that the view is not in say nothing."""
    found = {(d.line, d.code) for d in lint_text(DTYPE_VIEW_GUARDS)}
    assert found == {(29, "GPU102"), (35, "GPU102"), (42, "GPU102")}


# ``w.t().contiguous().t()``: a column-major copy on purpose (vLLM's machete and cutlass prepacks).
# (argument, reported) for an op that checks contiguity
TRANSPOSED_BACK = [
    ("w.t().contiguous().t()", False),
    ("w.T.contiguous().T", False),
    ("w.t().contiguous().T", False),
    ("w.transpose(0, 1).contiguous().transpose(1, 0)", False),
    ("w.mT.contiguous().mT", False),
    ("w.t().contiguous().transpose(1, 2)", True),  # another transpose than the one undone
    ("w.contiguous().t()", True),
    ("w.transpose(0, 1).contiguous().transpose(0, 2)", True),
    ("w.t().contiguous(memory_format=torch.contiguous_format).t()", True),
    # A permutation undone after `.contiguous()`: an NCHW tensor laid out channels-last.
    ("w.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)", False),
    ("w.permute((0, 2, 3, 1)).contiguous().permute(0, -1, 1, 2)", False),  # a tuple, a dim from the end
    ("w.permute(1, 2, 0).contiguous().permute(2, 0, 1)", False),
    ("w.permute(0, 2, 1).contiguous().transpose(1, 2)", False),  # a transpose of the permute's dims
    ("w.mT.contiguous().permute(0, 2, 1)", False),
    ("w.t().contiguous().permute(1, 0)", False),
    ("w.transpose(0, 1).contiguous().permute(0, 2, 1)", True),  # another swap than the one undone
    ("w.permute(1, 2, 0).contiguous().permute(1, 2, 0)", True),  # the same again: not the inverse
    ("w.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1)", True),  # not every dim
    ("w.permute(0, 2, 3, 1).contiguous().permute(0, 3, n, 2)", True),  # a dim not written out
]


@pytest.mark.parametrize(("argument", "reported"), TRANSPOSED_BACK)
def test_a_transpose_undone_around_contiguous_is_a_column_major_copy(argument: str, reported: bool):
    source = f"import torch\n\n\ndef prepack(w):\n    return torch.ops._C.prepack_b({argument})\n"
    assert [d.code for d in lint_text(source) if d.code.startswith("GPU1")] == (["GPU103"] if reported else [])


def test_a_permutation_undone_around_contiguous_is_channels_last_in_torch():
    """What the permuted idiom makes: the same values, laid out channels-last, not contiguous."""
    torch = pytest.importorskip("torch")
    x = torch.arange(24.0).reshape(1, 2, 3, 4)
    made = x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    assert torch.equal(made, x) and made.is_contiguous(memory_format=torch.channels_last)
    assert not made.is_contiguous()


def test_a_transpose_undone_around_contiguous_is_column_major_in_torch():
    """What the idiom makes, and what the fix GPU103 would suggest there (`.contiguous()` after
    it) would turn it into: a row-major copy, no longer the layout the op was given."""
    torch = pytest.importorskip("torch")
    w = torch.arange(12.0).reshape(3, 4)
    column_major = w.t().contiguous().t()
    assert column_major.stride() == (1, 3) and torch.equal(column_major, w)
    assert column_major.contiguous().stride() == (4, 1)


# The `.contiguous()` fix is safe only where the linter sees that nothing is written through
# the argument: a Triton kernel that only loads through it, reached directly or through
# wrappers, in this file or another, that only hand it on. Where a kernel is known to store
# through it, no fix at all: the copy would lose the writes. (sink code, safe / unsafe / None)
FIX_SAFETY = [
    ("_load_kernel[(1,)](x[:, 0], out)", True),  # loads through `x_ptr`, stores through `out_ptr` only
    ("_store_kernel[(1,)](out, x[:, 0])", None),  # stores through its second pointer
    ("_helper_kernel[(1,)](x[:, 0], out)", False),  # hands the pointer to a jit helper
    ("_block_kernel[(1,)](x[:, 0], out)", False),  # also stores through a block pointer made from it
    ("torch.ops._C.silu_and_mul(x[:, 0], out)", False),  # a custom op may write into any argument
    ("y = x[:, 0].view(torch.uint8)", False),
    ("wrapper(x[:, 0])", None),  # forwards to a kernel of another file that stores through it
    # wrappers in another file that read only metadata and hand it on to a loading kernel
    ("read_wrapper(x[:, 0], out)", True),
    ("outer_wrapper(x[:, 0], out)", True),  # two hops
    ("local_wrapper(x[:, 0], out)", True),  # a wrapper of this file
    ("checked_wrapper(x[:, 0], out)", True),  # past its `assert t.is_contiguous()`, still the parameter
    # ... and wrappers that may write through it, or let it escape
    ("zeroing_wrapper(x[:, 0], out)", False),  # `t.zero_()`
    ("returning_wrapper(x[:, 0], out)", False),  # `return t`: the caller may write into it
    ("viewing_wrapper(x[:, 0], out)", False),  # `t[0].fill_(0)` writes through a view of it
    ("storing_wrapper(x[:, 0], out)", False),  # `CACHE.append(t)`
    ("op_wrapper(x[:, 0], out)", False),  # also hands it to a custom op
    ("rebinding_wrapper(x[:, 0], out)", False),  # `t, n = t, ...`: a name bound again is not followed
    ("storing_kernel_wrapper(x[:, 0], out)", None),  # its kernel also stores through it
    # the fix goes on the cast upstream (the value may be None), whose other uses would get the copy
    ("idx = None if out is None else x[:, 1].to(torch.int32)\n    _load_kernel[(1,)](idx, out)", False),
]

FIX_SAFETY_KERNELS = '''
import torch
import triton
import triton.language as tl

from ops import (
    checked_wrapper, op_wrapper, outer_wrapper, read_wrapper, rebinding_wrapper, returning_wrapper, storing_kernel_wrapper,
    storing_wrapper, viewing_wrapper, wrapper, zeroing_wrapper,
)


@triton.jit
def _load_kernel(x_ptr, out_ptr):
    offs = tl.arange(0, 4)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def _store_kernel(src_ptr, dst_ptr):
    offs = tl.arange(0, 4)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs))


@triton.jit
def _helper_kernel(x_ptr, out_ptr):
    _store_kernel(x_ptr, out_ptr)  # a jit helper may store through what it is given


@triton.jit
def _block_kernel(x_ptr, out_ptr):
    offs = tl.arange(0, 4)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))
    block = tl.make_block_ptr(x_ptr, shape=(4,), strides=(1,), offsets=(0,), block_shape=(4,), order=(0,))
    tl.store(block, tl.zeros((4,), tl.float32))


def local_wrapper(t, out):
    if t is None or t.shape[0] == 0:
        return out
    _load_kernel[(1,)](t, out)


def step(x, out):
    {sink}
'''


def write_fix_safety_project(tmp_path: Path, sink: str) -> None:
    (tmp_path / "ops.py").write_text(FIX_SAFETY_OPS)
    (tmp_path / "step.py").write_text(FIX_SAFETY_KERNELS.replace("{sink}", sink))


@pytest.mark.parametrize(("sink", "safe"), FIX_SAFETY)
def test_the_contiguous_fix_is_safe_only_where_nothing_is_written_through_the_argument(tmp_path, sink, safe):
    write_fix_safety_project(tmp_path, sink)
    found = [d for d in lint_paths([str(tmp_path)]) if d.code.startswith("GPU1") and d.path.endswith("step.py")]
    assert len(found) == 1, found
    if safe is None:
        assert found[0].fix is None and "would lose" in found[0].message, found
    else:
        assert found[0].fix is not None and found[0].fix.applicability == ("safe" if safe else "unsafe")


def test_sync_lint_fix_applies_a_fix_made_safe_by_a_wrapper_of_another_file(tmp_path):
    write_fix_safety_project(tmp_path, "outer_wrapper(x[:, 0], out)")
    ops = (tmp_path / "ops.py").read_text()
    result = run("fix", "--isolated", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "outer_wrapper(x[:, 0].contiguous(), out)" in (tmp_path / "step.py").read_text()
    assert (tmp_path / "ops.py").read_text() == ops


FIX_SAFETY_OPS = textwrap.dedent('''
        import torch
        import triton
        import triton.language as tl


        @triton.jit
        def _fill(dst_ptr):
            tl.store(dst_ptr + tl.arange(0, 4), 0)


        @triton.jit
        def _sum(src_ptr, out_ptr):
            tl.store(out_ptr, tl.sum(tl.load(src_ptr + tl.arange(0, 4))))


        @triton.jit
        def _sum_and_clear(src_ptr, out_ptr):
            tl.store(out_ptr, tl.sum(tl.load(src_ptr + tl.arange(0, 4))))
            tl.store(src_ptr + tl.arange(0, 4), 0)


        CACHE = []


        def wrapper(t):
            _fill[(1,)](t)


        def read_wrapper(t, out):
            assert t.stride(-1) == 1 and len(t) == t.shape[0]
            scratch = torch.empty_like(t)
            _sum[(t.size(0),)](t, out if out is not None else scratch)


        def checked_wrapper(t, out):
            assert t.is_contiguous()
            _sum[(1,)](t, out)


        def outer_wrapper(t, out):
            read_wrapper(t, out)


        def zeroing_wrapper(t, out):
            _sum[(1,)](t, out)
            t.zero_()


        def returning_wrapper(t, out):
            _sum[(1,)](t, out)
            return t


        def viewing_wrapper(t, out):
            _sum[(1,)](t, out)
            t[0].fill_(0)


        def storing_wrapper(t, out):
            CACHE.append(t)
            _sum[(1,)](t, out)


        def op_wrapper(t, out):
            _sum[(1,)](t, out)
            torch.ops._C.scale_(t)


        def rebinding_wrapper(t, out):
            t, n = t, 1
            _sum[(n,)](t, out)


        def storing_kernel_wrapper(t, out):
            _sum_and_clear[(1,)](t, out)
    ''')


# A permutation of a buffer just allocated is a layout chosen on purpose (a column-major buffer
# for an op that wants one: ``torch.empty(k, m).t()``); a permutation of anything else is still
# reported, and so is a gap in an allocation. (code in `f(x, flag)`, reported)
PERMUTED_ALLOCATIONS = [
    ("torch.ops._C.quant(x, torch.empty(k, n, dtype=torch.float32).t())", False),
    ("s = torch.empty(shape, device=x.device).permute(-1, -2)\n    torch.ops._C.quant(x, s)", False),
    ("s = x.new_empty(k, n)\n    torch.ops._C.quant(x, s.t())", False),
    ("torch.ops._C.quant(x, torch.transpose(torch.empty_like(x), 0, 1))", False),
    ("torch.ops._C.quant(x, torch.zeros(k, n).T)", False),
    ("torch.ops._C.quant(x, (x * 2).t())", True),
    ("torch.ops._C.quant(x, torch.cat([x, x]).t())", True),
    ("torch.ops._C.quant(x, x.t())", True),
    ("s = torch.empty(k, n)\n    if flag:\n        s = x\n    torch.ops._C.quant(x, s.t())", True),
    ("torch.ops._C.quant(x, torch.empty(k, n)[:, 0])", True),
]


@pytest.mark.parametrize(("code", "reported"), PERMUTED_ALLOCATIONS)
def test_a_permuted_allocation_is_a_layout_made_on_purpose(code, reported):
    source = f"import torch\n\nk, n, shape = 4, 8, (8, 4)\n\n\ndef f(x, flag):\n    {code}\n"
    found = [c for _, c in codes(source) if c.startswith("GPU1")]
    assert bool(found) == reported, found
    if not reported:  # not a claim about layout: the view really is strided
        assert not torch.empty(4, 8).t().is_contiguous()


PACKED_KERNELS = """
import torch
import triton
import triton.language as tl


@triton.jit
def _store_scales(Scales, row):
    tl.store(Scales + row * ({stride}) + tl.arange(0, 32), 1.0)


@triton.jit
def _pack(Packed, Scales):
    row = tl.program_id(0)
    tl.store(Packed + row * (32 * 260) + tl.arange(0, 32), 0)
    _store_scales(Scales, row)


def pack(n):
    packed = torch.empty((n, 32 * 260), device="cuda", dtype=torch.uint8)
    _pack[(n,)](packed, {scales})
    return packed
"""


@pytest.mark.parametrize(("stride", "scales", "reported"), [
    # vLLM's step5 indexer: scales packed after the data of each 8320-byte row, written by a
    # kernel that steps the float32 view by the row's 2080 floats: laid out as it reads it
    ("32 * 260 // 4", "packed[:, 32 * 256 :].view(torch.float32)", False),
    ("2080", "packed[:, 8192:].view(torch.float32)", False),
    # a kernel that steps by the slice's own width reads it as dense rows: the bug
    ("32", "packed[:, 32 * 256 :].view(torch.float32)", True),
    # the row stride of the view is not 2080 (another dtype, another range start, rows reshaped)
    ("32 * 260 // 4", "packed[:, 32 * 256 :].view(torch.int16)", True),
    ("32 * 260 // 4", "packed.view(n, -1)[:, 32 * 256 :].view(torch.float32)", True),
    ("32 * 260 // 4", "packed[1:, 32 * 256 :].view(torch.float32)[:, :16]", False),
    ("32 * 260 // 4", "packed[:, 32 * 256 :].view(torch.float32).t()", True),
])  # fmt: skip
def test_a_kernel_stepping_a_view_by_its_own_row_stride_reads_it_as_laid_out(stride, scales, reported):
    source = PACKED_KERNELS.replace("{stride}", stride).replace("{scales}", scales)
    assert [code for _, code in codes(source)] == (["GPU102"] if reported else [])


@pytest.mark.parametrize(("accesses", "reported"), [
    # every access steps by the row stride: laid out as the kernel reads it
    ("tl.store(Scales + row * 2080 + c, 1.0)\n    tl.store(Scales + 2080 * row + c + 16, 1.0)", False),
    # one access that does not: it may read the view as dense rows
    ("tl.store(Scales + row * 2080 + c, 1.0)\n    tl.store(Scales + row * 32 + c, 1.0)", True),
    # a pointer cast or moved through a local steps in units the launch cannot tell
    ("tl.store(Scales.to(tl.pointer_type(tl.int32)) + row * 2080 + c, 1)", True),
    ("p = Scales + row * 2080\n    tl.store(p + c, 1.0)", True),
])  # fmt: skip
def test_every_access_must_step_by_the_row_stride(accesses, reported):
    source = f"""
import torch
import triton
import triton.language as tl


@triton.jit
def _scales(Scales):
    row = tl.program_id(0)
    c = tl.arange(0, 16)
    {accesses}


def pack(n):
    packed = torch.empty((n, 32 * 260), dtype=torch.uint8)
    _scales[(n,)](packed[:, 32 * 256 :].view(torch.float32))
"""
    assert [code for _, code in codes(source)] == (["GPU102"] if reported else [])


# -- decorators that make a function's tensor arguments contiguous (fla's ``input_guard``) -------

GUARDED_KERNEL = """
import torch
import triton
import triton.language as tl

from fla.utils import contiguous, input_guard


@triton.jit
def _cumsum(g_ptr, o_ptr, T: tl.constexpr):
    offs = tl.arange(0, T)
    tl.store(o_ptr + offs, tl.cumsum(tl.load(g_ptr + offs), 0))


def local_cumsum(g):
    out = torch.empty_like(g)
    _cumsum[(1,)](g, out, g.shape[-1])
    return out
"""


@pytest.mark.parametrize(("decorators", "body", "reported"), [
    # The guard copies a strided argument before the body runs: a cast of it is no fix relied on.
    (["@input_guard"], "local_cumsum(g.float())", False),
    (["@input_guard()"], "local_cumsum(g.float())", False),
    (["@contiguous"], "local_cumsum(g.to(torch.float32))", False),
    (["@staticmethod", "@input_guard"], "local_cumsum(g.float())", False),
    (["@staticmethod"], "local_cumsum(g.float())", True),
    (["@input_guard(no_guard_contiguous=False)"], "local_cumsum(g.float())", False),
    (["@input_guard(no_guard_contiguous=['h'])"], "local_cumsum(g.float())", False),
    # Exempted, or a guard whose arguments are not understood: the parameter is as passed.
    (["@input_guard(no_guard_contiguous=['g'])"], "local_cumsum(g.float())", True),
    (["@input_guard(no_guard_contiguous=('g', 'h'))"], "local_cumsum(g.float())", True),
    (["@input_guard(no_guard_contiguous=True)"], "local_cumsum(g.float())", True),
    (["@input_guard(no_guard_contiguous=EXEMPT)"], "local_cumsum(g.float())", True),
    (["@input_guard(strict=True)"], "local_cumsum(g.float())", True),
    ([], "local_cumsum(g.float())", True),
    (["@torch.compile"], "local_cumsum(g.float())", True),
    # A view taken inside the guarded function is still a view.
    (["@input_guard"], "local_cumsum(g[:, 0])", True),
    (["@input_guard"], "local_cumsum(g.t().float())", True),
])  # fmt: skip
def test_a_contiguity_guard_decorator_makes_the_parameters_contiguous(decorators, body, reported):
    if decorators[:1] == ["@staticmethod"]:  # an autograd Function's ``forward(ctx, ...)``
        source = GUARDED_KERNEL + "\n\nclass Op(torch.autograd.Function):\n" + "".join(f"    {d}\n" for d in decorators)
        source += f"    def forward(ctx, g, h=None):\n        return {body}\n"
    else:
        source = GUARDED_KERNEL + "\n\n" + "".join(f"{d}\n" for d in decorators) + f"def run(g, h=None):\n    return {body}\n"
    assert bool(codes(source)) == reported, codes(source)


GUARDED_WRAPPERS = """
from engine.kernels import input_guard, local_cumsum


@input_guard
def guarded(g):
    assert g.is_contiguous()
    return local_cumsum(g)


def unguarded(g):
    return local_cumsum(g)
"""


def test_a_view_handed_to_a_guarded_function_is_copied_by_the_guard(tmp_path: Path):
    """Across files, and on the fast and the plain path: the guarded function's summary needs
    nothing of its callers, its assert included; the unguarded one's does."""
    package = tmp_path / "engine"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "kernels.py").write_text(
        textwrap.dedent(GUARDED_KERNEL).replace("from fla.utils import contiguous, input_guard\n", "")
        + "\n\ndef input_guard(fn):\n    return fn\n"
    )
    (package / "wrappers.py").write_text(textwrap.dedent(GUARDED_WRAPPERS))
    (package / "model.py").write_text(textwrap.dedent(
        """
        from engine.wrappers import guarded, unguarded


        def step(x):
            guarded(x[:, 0])
            unguarded(x[:, 0])
        """
    ))
    for fast in (True, False):
        linter = Linter(make_settings(), fast=fast)
        found = [(Path(d.path).name, d.line, d.code)
                 for d in linter.run([str(p) for p in sorted(package.glob("*.py"))], jobs=1).diagnostics]  # fmt: skip
        assert found == [("model.py", 7, "GPU102")]


def test_contiguous_input_decorators_setting(tmp_path: Path):
    from sync_lint import config

    source = GUARDED_KERNEL.replace("from fla.utils import contiguous, input_guard", "from engine.guards import tensors_on")
    source += "\n\n@tensors_on\ndef run(g):\n    return local_cumsum(g.float())\n"
    assert codes(source) != []
    assert codes(source, extend_contiguous_input_decorators=["engine.guards.tensors_on"]) == []
    assert codes(source, contiguous_input_decorators=["engine.*.tensors_on"]) == []
    # Replacing the default drops fla's names.
    assert codes(GUARDED_KERNEL + "\n\n@input_guard\ndef run(g):\n    return local_cumsum(g.float())\n",
                 contiguous_input_decorators=[]) != []  # fmt: skip
    with pytest.raises(config.ConfigError, match="`contiguous-input-decorators` must be a list of strings"):
        config.validate({"contiguous-input-decorators": "input_guard"}, "<test>")


def test_a_custom_op_another_file_implements_in_python_is_judged_by_its_body(tmp_path):
    """In a run of many files, ``torch.ops.pkg.<name>`` that another file registers from a
    Python function (here with the project's ``direct_register_custom_op``, which registers into
    the ``pkg`` library, even where called inside a function) is a call of that function; one
    whose function hands the tensor to a C++ op of the same name (``torch.ops._C.copy_rows``,
    no registration of the project's) is reported through it; an op of unknown code, one two
    files register (a platform each), or one registered into another library (``target_lib=``)
    still needs every tensor dense. Checked alone (the editor's engine, the flake8 plugin, a
    run of one file under ``follow-imports = "skip"``), the file hears of the ops its findings
    rest on from a scan of its package: what it reports is what the run reports, but where the
    finding rests on the op's function in another file (``_copy_impl``), which it does not read;
    a run of one file or two (the CLI, pre-commit) reads that function too, and reports all
    that the whole run reports in them."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "utils.py").write_text("def direct_register_custom_op(op_name, op_func, target_lib=None):\n    pass\n")
    (pkg / "ops_impl.py").write_text(textwrap.dedent("""
        import torch

        from pkg.utils import direct_register_custom_op


        def _scale_impl(x: torch.Tensor, out: torch.Tensor) -> None:
            out.copy_(x * 2)


        def _copy_impl(x: torch.Tensor, out: torch.Tensor) -> None:
            torch.ops._C.copy_rows(x, out)


        def _shift_impl(x: torch.Tensor, out: torch.Tensor) -> None:
            out.copy_(x + 1)


        def register_all():
            direct_register_custom_op(op_name="scale_rows", op_func=_scale_impl)
            direct_register_custom_op("shift_rows", _shift_impl, target_lib=OTHER)
            direct_register_custom_op("twice", _scale_impl)


        direct_register_custom_op(op_name="copy_rows", op_func=_copy_impl)
    """))
    (pkg / "ops_xpu.py").write_text(textwrap.dedent("""
        from pkg.utils import direct_register_custom_op


        def _twice_xpu(x, out):
            out.copy_(x)


        direct_register_custom_op("twice", _twice_xpu)
    """))
    user = """
        import torch


        def run(block_table: torch.Tensor, out: torch.Tensor):
            first = block_table[:, 0]
            torch.ops.pkg.scale_rows(first, out)
            torch.ops.pkg.copy_rows(first, out)
            torch.ops.pkg.gather_rows(first, out)
            torch.ops.pkg.shift_rows(first, out)
            torch.ops.pkg.twice(first, out)
    """
    (pkg / "user.py").write_text(textwrap.dedent(user))
    # A finding its summaries would confirm: a wrapper of this file hands the op its argument.
    (pkg / "wrapped.py").write_text(textwrap.dedent("""
        import torch


        def _scale(x: torch.Tensor, out: torch.Tensor):
            torch.ops.pkg.scale_rows(x, out)


        def run(block_table: torch.Tensor, out: torch.Tensor):
            _scale(block_table[:, 0], out)
    """))
    settings = make_settings()
    files = sorted(str(path) for path in pkg.glob("*.py"))
    fast = Linter(settings, fast=True).run(files, jobs=1).diagnostics
    plain = Linter(settings, fast=False).run(files, jobs=1).diagnostics
    assert [(d.line, d.code) for d in fast] == [(d.line, d.code) for d in plain] == [
        (8, "GPU102"), (9, "GPU102"), (10, "GPU102"), (11, "GPU102"),
    ]
    assert "the custom op `torch.ops.pkg.copy_rows` (in Python: `_copy_impl`) receives" in fast[0].message
    assert "(the argument is passed to the custom op `torch.ops._C.copy_rows`)" in fast[0].message
    skipping = make_settings(follow_imports="skip")
    alone = Linter(skipping).run([str(pkg / "user.py")], jobs=1).diagnostics
    assert [d.line for d in alone] == [9, 10, 11]
    assert Linter(skipping).run([str(pkg / "wrapped.py")], jobs=1).diagnostics == []
    for fast_path in (True, False):
        one = Linter(settings, fast=fast_path).run([str(pkg / "user.py")], jobs=1).diagnostics
        assert [(d.line, d.message) for d in one] == [(d.line, d.message) for d in fast[:4]]
        assert Linter(settings, fast=fast_path).run([str(pkg / "wrapped.py")], jobs=1).diagnostics == []
    # A run of two files (pre-commit's staged files) reads the registrations beyond it, and the
    # functions it calls (``plan_reading_callees``): it reports what the whole run reports there.
    for fast_path in (True, False):
        staged = Linter(settings, fast=fast_path).run([str(pkg / "user.py"), str(pkg / "wrapped.py")], jobs=1)
        assert [(Path(d.path).name, d.line) for d in staged.diagnostics] == [
            ("user.py", 8), ("user.py", 9), ("user.py", 10), ("user.py", 11),
        ]
        assert staged.diagnostics[0].message == fast[0].message
    from sync_lint.codemods import DocumentLinter

    buffer = DocumentLinter().lint(textwrap.dedent(user), str(pkg / "user.py"))
    assert [d.line for d in buffer if d.code == "GPU102"] == [9, 10, 11]
    fixed = DocumentLinter().fix(textwrap.dedent(user), str(pkg / "user.py"), unsafe=True).fixed
    assert "scale_rows(first, out)" in fixed and "copy_rows(first, out)" in fixed  # their calls left as they are
    plugin = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "GPU", "pkg/user.py"], cwd=tmp_path, capture_output=True, text=True,
        check=False, timeout=120,
    )
    assert [line.split(":")[1] for line in plugin.stdout.splitlines()] == ["9", "10", "11"], plugin
