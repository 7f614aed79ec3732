"""GPU1xx: a callee that needs only a unit last stride (``p.stride(-1) == 1``, ``p.view(dtype)``)
is no contiguity sink for a view whose last dim keeps stride 1 (a column-range slice), and is one
for a view whose last dim does not (a transpose, a column select, a step slice on the last dim).
Same file and across files, directly and through forwarding wrappers."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from sync_lint.analysis.summaries import Forward, FunctionSummary
from sync_lint.api import lint_paths, lint_text
from sync_lint.pipeline.lint_file import FileFacts
from sync_lint.pipeline.project import ProjectIndex

torch = pytest.importorskip("torch")


def findings(text: str, **options) -> list[tuple[int, str]]:
    options.setdefault("preview", True)
    return [(d.line, d.code) for d in lint_text(textwrap.dedent(text), **options) if d.code.startswith("GPU1")]


UNIT_STRIDE_CHECKS = [
    "assert x.stride(-1) == 1",
    "assert x.stride(-1) == 1, 'last dim must be dense'",
    "if x.stride(-1) != 1:\n        raise ValueError('x')",
    "if x.ndim != 2 or x.stride(-1) != 1:\n        raise ValueError('x')",
    "torch._check(x.stride(-1) == 1)",
    "y = x.view(torch.int8)",
    # Either check passes it: the weaker need is enough.
    "assert x.is_contiguous() or x.stride(-1) == 1",
    "assert x.stride(-1) == 1 or x.is_contiguous()",
    "if not x.is_contiguous() and x.stride(-1) != 1:\n        raise ValueError('x')",
    "if not (x.is_contiguous() or x.stride(-1) == 1):\n        raise ValueError('x')",
    "torch._check(x.is_contiguous() or x.stride(-1) == 1)",
]

# (argument, flagged by a unit-last-stride callee, flagged by a contiguity callee)
ARGUMENTS = [
    ("bt[:, :n]", False, True),  # a column-range slice: last dim still stride 1
    ("bt[..., 1:n]", False, True),
    ("bt[:, 2:]", False, True),
    ("bt.narrow(1, 0, n)", False, True),
    ("bt.t()", True, True),  # a transpose: last dim has the row stride
    ("bt.transpose(0, 1)", True, True),
    ("bt.permute(1, 0)", True, True),
    ("bt[:, 0]", True, True),  # a column select: a 1-D view with the row stride
    ("bt.select(1, 0)", True, True),
    ("bt[:, ::2]", True, True),  # a step slice on the last dim
    ("bt.t()[:, :n]", True, True),  # a column range of a transpose keeps the transpose's last stride
    ("bt.t().narrow(1, 0, n)", True, True),
    ("bt[:n]", False, False),  # contiguous
    ("bt[:, :n].contiguous()", False, False),
]


@pytest.mark.parametrize(("argument", "unit_flagged", "flagged"), ARGUMENTS)
def test_expectations_match_torch(argument: str, unit_flagged: bool, flagged: bool):
    value = eval(argument, {"bt": torch.zeros(4, 8), "n": 3})
    assert (value.stride(-1) != 1) == unit_flagged
    assert (not value.is_contiguous()) == flagged


def _caller(argument: str) -> str:
    return f"def caller(bt, n):\n    return wrapper({argument})\n"


@pytest.mark.parametrize("check", UNIT_STRIDE_CHECKS)
@pytest.mark.parametrize(("argument", "flagged", "_"), ARGUMENTS)
def test_unit_stride_check_same_file(check: str, argument: str, flagged: bool, _: bool):
    source = f"import torch\n\n\ndef wrapper(x):\n    {check}\n    return x\n\n\n" + _caller(argument)
    line = source.count("\n")  # the caller's call is the last line
    assert findings(source) == ([(line, "GPU102")] if flagged else [])


CONTIGUITY_CHECKS = [
    "assert x.is_contiguous()",
    "if not x.is_contiguous():\n        raise ValueError('x')",
    # Both must hold: the stronger need.
    "assert x.is_contiguous() and x.stride(-1) == 1",
    "if not x.is_contiguous() or x.stride(-1) != 1:\n        raise ValueError('x')",
    "assert x is None or x.is_contiguous()",  # None or contiguous: a view is never None
]


@pytest.mark.parametrize("check", CONTIGUITY_CHECKS)
@pytest.mark.parametrize(("argument", "_", "flagged"), ARGUMENTS)
def test_contiguity_check_still_flags_every_strided_view(check: str, argument: str, _: bool, flagged: bool):
    source = f"import torch\n\n\ndef wrapper(x):\n    {check}\n    return x\n\n\n" + _caller(argument)
    line = source.count("\n")
    assert findings(source) == ([(line, "GPU102")] if flagged else [])


# A permutation of a 4-D cache that leaves the last dim in place keeps its stride 1 (vLLM's
# ``k_cache.permute(0, 2, 1, 3).view(torch.uint8)`` for an fp8 kernel's byte view); one that moves
# it, or whose dims are not known to leave it, is still a sink. (argument, unit-flagged, flagged)
KV_CACHE_ARGUMENTS = [
    ("kc.permute(0, 2, 1, 3)", False, True),
    ("kc.permute((0, 2, 1, 3))", False, True),
    ("kc.permute(0, 2, 1, -1)", False, True),
    ("kc.transpose(-3, -2)", False, True),
    ("kc.swapaxes(-4, -2)", False, True),
    ("kc.view(2, 3, 4, 5).transpose(1, 2)", False, True),  # the dims are known: 1 and 2 are not the last
    ("kc.view(2, 3, 4, 5).movedim(0, 2)", False, True),
    ("kc.permute(0, 2, 1, 3).transpose(-1, -2)", True, True),
    ("kc.permute(0, 1, 3, 2)", True, True),
    ("kc.permute(3, 2, 1, 0)", True, True),
    ("kc.transpose(-1, -2)", True, True),
    ("kc.transpose(2, 3)", True, True),  # kc's dims are not known here
    ("kc.mT", True, True),
]


@pytest.mark.parametrize(("argument", "unit_flagged", "flagged"), KV_CACHE_ARGUMENTS)
def test_kv_cache_expectations_match_torch(argument: str, unit_flagged: bool, flagged: bool):
    value = eval(argument, {"kc": torch.zeros(2, 3, 4, 5), "torch": torch})
    if argument != "kc.transpose(2, 3)":  # flagged because the analysis cannot know kc has 4 dims
        assert (value.stride(-1) != 1) == unit_flagged
        if unit_flagged:  # float32 viewed as bytes regroups the last dim: it needs stride 1 there
            with pytest.raises(RuntimeError):
                value.view(torch.uint8)
        else:
            assert value.view(torch.uint8).shape[-1] == 4 * value.shape[-1]
    assert (not value.is_contiguous()) == flagged


@pytest.mark.parametrize(("argument", "flagged", "_"), KV_CACHE_ARGUMENTS)
def test_unit_stride_callee_of_a_kv_cache_permutation(argument: str, flagged: bool, _: bool):
    source = f"import torch\n\n\ndef wrapper(x):\n    return x.view(torch.uint8)\n\n\ndef caller(kc):\n    return wrapper({argument})\n"
    assert findings(source) == ([(source.count("\n"), "GPU102")] if flagged else [])


@pytest.mark.parametrize(("argument", "_", "flagged"), KV_CACHE_ARGUMENTS)
def test_contiguity_callee_of_a_kv_cache_permutation(argument: str, _: bool, flagged: bool):
    source = f"import torch\n\n\ndef wrapper(x):\n    assert x.is_contiguous()\n    return x\n\n\ndef caller(kc):\n    return wrapper({argument})\n"
    assert findings(source) == ([(source.count("\n"), "GPU102")] if flagged else [])


def test_unit_stride_message_says_the_callee_needs_stride_1_in_its_last_dim():
    source = """
    def wrapper(x):
        if x.stride(-1) != 1:
            raise ValueError("x")
        return x


    def caller(bt):
        return wrapper(bt.t())
    """
    (message,) = [d.message for d in lint_text(textwrap.dedent(source)) if d.code == "GPU102"]
    assert "checked with `x.stride(-1) != 1` in `wrapper`, which raises unless its last dim has stride 1" in message
    source = source.replace('if x.stride(-1) != 1:\n            raise ValueError("x")', "assert x.stride(-1) == 1")
    (message,) = [d.message for d in lint_text(textwrap.dedent(source)) if d.code == "GPU102"]
    assert "asserted to have stride 1 in its last dim in `wrapper`" in message


def _project(tmp_path: Path, boundary: str, caller: str) -> list[tuple[str, int, str, str]]:
    (tmp_path / "boundary.py").write_text(textwrap.dedent(boundary))
    (tmp_path / "caller.py").write_text(textwrap.dedent(caller))
    return [(Path(d.path).name, d.line, d.code, d.message) for d in lint_paths([str(tmp_path)], preview=True)]


CROSS_FILE_CALLER = """\
import torch

from boundary import checked, dense, forwards_both, outer


def step(bt, n):
    checked(bt[:, :n])
    checked(bt[..., 1:n])
    checked(bt.t())
    outer(bt[:, :n])
    outer(bt[:, 0])
    dense(bt[:, :n])
    forwards_both(bt[:, :n])
    checked(bt.t().to(torch.int32))
    checked(bt[:, :n].to(torch.int32))
    checked(bt.contiguous().t())
    checked(bt.contiguous()[:, :n])
"""


@pytest.mark.parametrize(
    "boundary",
    [
        # the checks in the callee itself
        """
        import torch


        def checked(x):
            assert x.stride(-1) == 1
            return x


        def dense(x):
            assert x.is_contiguous()
            return x


        def _inner(x):
            if x.stride(-1) != 1:
                raise ValueError("x")


        def _middle(x):
            _inner(x)


        def outer(x):
            _middle(x)  # a chain of forwards keeps a unit-stride need one


        def forwards_both(x):
            _middle(x)
            dense(x)  # forwarded to both: contiguity wins
        """,
    ],
)
def test_unit_stride_need_across_files_and_forwards(tmp_path: Path, boundary: str):
    found = _project(tmp_path, boundary, CROSS_FILE_CALLER)
    assert [f[:3] for f in found] == [
        ("caller.py", 9, "GPU102"),  # checked(bt.t())
        ("caller.py", 11, "GPU102"),  # outer(bt[:, 0]), through _middle and _inner
        ("caller.py", 12, "GPU102"),  # dense(bt[:, :n])
        ("caller.py", 13, "GPU102"),  # forwards_both(bt[:, :n])
        ("caller.py", 14, "GPU101"),  # checked(bt.t().to(torch.int32))
        ("caller.py", 16, "GPU103"),  # checked(bt.contiguous().t())
    ]
    messages = {line: message for _, line, _, message in found}
    assert "passed on to `_middle`" in messages[11] and "passed on to `_inner`" in messages[11]
    assert "unless its last dim has stride 1" in messages[11]
    assert "asserted contiguous in `dense`" in messages[13]


def test_a_contiguity_need_wins_over_a_unit_stride_need_in_one_function():
    for checks in (
        "assert x.stride(-1) == 1\n    assert x.is_contiguous()",
        "assert x.is_contiguous()\n    assert x.stride(-1) == 1",
        "assert x.stride(-1) == 1\n    torch.ops._C.silu(x, x)",
        "y = x.view(torch.int8)\n    torch.ops._C.silu(y, x)",
    ):
        source = f"import torch\n\n\ndef wrapper(x):\n    {checks}\n\n\ndef caller(bt, n):\n    wrapper(bt[:, :n])\n"
        assert findings(source) == [(source.count("\n"), "GPU102")], checks


def test_summary_keeps_the_two_needs_apart():
    summary = FunctionSummary("m.f", ("x", "y"), "m.py")
    summary.need_unit_stride("x", "checked")
    assert summary.needs_unit_stride == {"x": "checked"} and summary.needs_contiguous == {}
    assert summary.need_of("x", unit_stride_counts=False) is None
    assert summary.need_of("x", unit_stride_counts=True) == "checked"
    summary.need_contiguous("x", "dense")
    summary.need_unit_stride("x", "checked again")
    assert summary.needs_contiguous == {"x": "dense"} and summary.needs_unit_stride == {}
    assert summary.need_of("x", unit_stride_counts=False) == "dense"
    assert summary.need_of("y", unit_stride_counts=True) is None


def test_closing_over_forwards_propagates_each_need():
    inner = FunctionSummary("m.inner", ("x",), "m.py", needs_unit_stride={"x": "checked"})
    dense = FunctionSummary("m.dense", ("x",), "m.py", needs_contiguous={"x": "dense"})
    one = FunctionSummary("m.one", ("a",), "m.py", forwards=[Forward("a", "m.inner", 0, 3)])
    both = FunctionSummary("m.both", ("a",), "m.py",
                           forwards=[Forward("a", "m.one", 0, 3), Forward("a", "m.dense", "x", 4)])  # fmt: skip
    facts = FileFacts(path="m.py", module_name="m")
    facts.summaries = {s.qualname: s for s in (both, one, inner, dense)}
    index = ProjectIndex([facts])
    assert index.lookup("m.one").needs_unit_stride == {"a": "passed on to `inner` (line 3), where it is checked"}
    assert index.lookup("m.one").needs_contiguous == {}
    assert index.lookup("m.both").needs_contiguous == {"a": "passed on to `dense` (line 4), where it is dense"}
    assert index.lookup("m.both").needs_unit_stride == {}



DATA_PTR = """\
import cuda.bindings.driver as driver


def encode(t):
    strides = [driver.cuuint64_t(t.stride(0) * t.element_size())]
    return driver.encode(t.data_ptr(), strides)


def leading(t):
    return driver.gemm(t.data_ptr(), t.stride(0))


def raw(t):
    return driver.copy(t.data_ptr(), t.numel())


def run(kv, n):
    encode(kv[:, :n])
    encode(kv.t())
    leading(kv[..., 1:n])
    leading(kv[:, 0])
    raw(kv[:, :n])
    driver.gemm(kv[:, :n].data_ptr(), kv.stride(0))
    driver.gemm(kv.t().data_ptr(), kv.stride(0))
    driver.copy(kv[:, :n].data_ptr(), n)
"""


def test_raw_data_ptr_handed_with_its_strides_needs_only_a_unit_last_stride():
    found = [(d.line, d.code, d.message) for d in lint_text(DATA_PTR) if d.code.startswith("GPU1")]
    assert [f[:2] for f in found] == [(19, "GPU102"), (21, "GPU102"), (22, "GPU102"), (24, "GPU102"), (25, "GPU102")]
    messages = {line: message for line, _, message in found}
    assert "with its strides, which assumes stride 1 in the last dim" in messages[19]
    assert "as a raw `.data_ptr()`)" in messages[22]  # no strides: the address is read densely
    assert "read with stride 1 in the last dim" in messages[24]
    assert "read as dense memory" in messages[25]


def test_a_local_that_carries_strides_stops_when_reassigned():
    source = """\
    import cuda.bindings.driver as driver


    def encode(t, n):
        strides = [t.stride(0)]
        strides = [n]
        return driver.encode(t.data_ptr(), strides)


    def run(kv, n):
        encode(kv[:, :n], n)
    """
    assert findings(source) == [(11, "GPU102")]


@pytest.mark.parametrize(("check", "quoted"), [
    ("assert x.is_contiguous() or x.stride(-1) == 1",
     "asserted to have stride 1 in its last dim in `wrapper` (`assert x.is_contiguous() or x.stride(-1) == 1`)"),
    ("if not (x.is_contiguous() or x.stride(-1) == 1):\n        raise ValueError('x')",
     "checked with `x.is_contiguous() or x.stride(-1) == 1` in `wrapper`, which raises unless its last dim"),
])  # fmt: skip
def test_an_or_of_checks_is_quoted_whole(check: str, quoted: str):
    source = f"import torch\n\n\ndef wrapper(x):\n    {check}\n    return x\n\n\n" + _caller("bt.t()")
    (message,) = [d.message for d in lint_text(source) if d.code == "GPU102"]
    assert quoted in message


# -- broadcast views: an expanded last dim has stride 0 --------------------------------------------

# (argument, its last stride is certainly the base's) for ``bt`` [4, 8], ``col`` [4, 1], n = 3
BROADCASTS = [
    ("bt[0].expand(n, -1)", True),
    ("bt.expand(2, -1, -1)", True),
    ("bt.expand((2, -1, -1))", True),
    ("torch.broadcast_to(bt[0], (n, -1))", True),
    ("bt[0].expand(n, bt[0].shape[-1])", True),
    ("bt[0].expand(n, bt[0].size(-1))", True),
    ("col.expand(-1, 8)", False),  # the last dim is the expanded one: stride 0
    ("col.expand(4, 8)", False),
    ("col.expand_as(bt)", False),
    ("torch.broadcast_to(col, (4, 8))", False),
    ("bt.t().expand(2, -1, -1)", False),  # keeps the transpose's last stride
    # the last size of a view written alike (a rope table broadcast over the heads)
    ("bt.view(4, 1, 8).expand(4, n, 8)", True),
    ("bt.reshape(4, 1, d).expand(4, n, d)", True),
    ("bt.view((4, 1, d)).expand((4, n, d))", True),
    ("col.view(4, 1, 1).expand(4, n, 1)", True),
    ("col.view(4, 1).expand(4, d)", False),
    ("col.view(4, 1).expand(4, 8)", False),
]


@pytest.mark.parametrize(("argument", "kept"), BROADCASTS)
def test_broadcast_expectations_match_torch(argument: str, kept: bool):
    value = eval(argument, {"bt": torch.zeros(4, 8), "col": torch.zeros(4, 1), "n": 3, "d": 8, "torch": torch})
    assert (value.stride(-1) == 1) == kept
    assert not value.is_contiguous()


@pytest.mark.parametrize(("argument", "kept"), BROADCASTS)
def test_broadcast_to_a_unit_stride_callee(argument: str, kept: bool):
    source = "import torch\n\n\ndef wrapper(x):\n    assert x.stride(-1) == 1\n    return x\n\n\n"
    source += f"def caller(bt, col, n, d):\n    return wrapper({argument})\n"
    assert findings(source) == ([] if kept else [(source.count("\n"), "GPU102")])
    dense = source.replace("x.stride(-1) == 1", "x.is_contiguous()")
    assert findings(dense) == [(dense.count("\n"), "GPU102")]  # a broadcast is never contiguous


@pytest.mark.parametrize("argument", ["bt[0].expand(n, d)", "bt[0].expand(shape)", "bt[0].expand(*shape)",
                                      "bt[0].expand(-1, *shape)", "bt.view(4, 1, -1).expand(4, n, d)",
                                      "bt.view(4, 1, d()).expand(4, n, d())"])  # fmt: skip
def test_a_written_out_last_size_may_expand_a_size1_dim(argument: str):
    # Fine when ``bt[0]`` has ``d`` elements, stride 0 when it has one: not known, so reported.
    source = "import torch\n\n\ndef wrapper(x):\n    assert x.stride(-1) == 1\n    return x\n\n\n"
    source += f"def caller(bt, n, d, shape):\n    return wrapper({argument})\n"
    assert findings(source) == [(source.count("\n"), "GPU102")]


# -- a step or select on a middle dim leaves the last stride 1 -------------------------------------

# (the tensor ``x``, argument, last stride 1) for tensors whose number of dims the code spells out
SHAPED = [
    ("torch.empty(n, 4, 8)", "x[:, ::2]", True),
    ("torch.empty([n, 4, 8])", "x[:, ::2]", True),
    ("torch.empty(size=(n, 4, 8))", "x[:, ::2]", True),
    ("torch.zeros(shape)", "x[:, ::2]", True),  # ``shape = (n, 4, 8)``
    ("torch.full((n, 4, 8), 0.0)", "x[:, ::2]", True),
    ("torch.empty(n, 4, 8)", "x[:, 0]", True),
    ("torch.empty(n, 4, 8)", "x.select(1, 0)", True),
    ("torch.empty(n, 4, 8)", "x[None, :, ::2]", True),
    ("torch.empty(n, 32).view(n, 4, 8)", "x[:, ::2]", True),
    ("torch.empty(n, 4, 8).to(torch.int32)", "x[:, ::2]", True),
    ("torch.empty(n, 8)", "x[::2]", True),
    ("torch.empty(4, 8).unsqueeze(0)", "x[:, ::2]", True),
    ("torch.empty(n, 4, 8)", "x[:, :, ::2]", False),  # the last dim itself
    ("torch.empty(n, 4, 8)", "x[..., ::2]", False),
    ("torch.empty(n, 4, 8)", "x[:, 0, 0]", False),
    ("torch.empty(n, 4, 8)", "x.select(-1, 0)", False),
    ("torch.empty(n, 4, 8)", "x.select(2, 0)", False),
    ("torch.empty(n, 4, 8).view(n, 32)", "x[:, ::2]", False),
    ("torch.empty(n, 8)", "x[:, ::2]", False),
    ("torch.empty(n, 4, 8).transpose(1, 2)", "x[:, ::2]", False),  # a transpose's last stride
    ("torch.empty(n, 4, 8)[0]", "x[:, ::2]", False),
]


@pytest.mark.parametrize(("tensor", "argument", "unit"), SHAPED)
def test_shaped_expectations_match_torch(tensor: str, argument: str, unit: bool):
    scope = {"torch": torch, "n": 3, "shape": (3, 4, 8)}
    value = eval(argument, {"x": eval(tensor, scope)})
    assert (value.stride(-1) == 1) == unit
    assert not value.is_contiguous()


@pytest.mark.parametrize(("tensor", "argument", "unit"), SHAPED)
def test_middle_dim_views_of_shaped_tensors(tensor: str, argument: str, unit: bool):
    source = "import torch\n\n\ndef wrapper(x):\n    assert x.stride(-1) == 1\n    return x\n\n\n"
    source += f"def caller(n):\n    shape = (n, 4, 8)\n    x = {tensor}\n    return wrapper({argument})\n"
    assert findings(source) == ([] if unit else [(source.count("\n"), "GPU102")])
    dense = source.replace("x.stride(-1) == 1", "x.is_contiguous()")
    assert findings(dense) == [(dense.count("\n"), "GPU102")]  # none of them is contiguous


def test_vllm_unpadded_heads_keep_a_unit_last_stride():
    # vLLM's ROCm sparse MLA path: a 3-D output, every ``head_stride``-th head kept.
    source = """
    import torch


    def view_as_bytes(o):
        return o.view(torch.uint8)


    def head_slice(num_tokens, mla_num_heads, base_heads, rank):
        output = torch.empty([num_tokens, mla_num_heads, rank], dtype=torch.bfloat16)
        head_stride = mla_num_heads // base_heads
        output = output[:, ::head_stride]
        view_as_bytes(output)
        torch.ops._C.merge_heads(output)  # a custom op wants it dense: still reported
        flat = output.reshape(num_tokens, -1)
        view_as_bytes(flat[:, ::2])  # two dims, the last stepped
    """
    assert findings(source) == [(14, "GPU102"), (16, "GPU102")]


# -- `.view(dtype)` to the same element size reinterprets in place: any strides will do ------------

# (setup, expression, flagged). ``x`` has an unknown dtype; the setup may fix one. Flagged: some
# dtype of ``x`` (and value of ``flag``) makes the view raise for its strides (the test below
# checks that against torch); a view of a source whose dtype is not known is always flagged.
DTYPE_VIEWS = [
    # the source's dtype is known and has the target's element size
    ("w = torch.empty(n, m, dtype=torch.float8_e4m3fn)", "w.t().view(torch.uint8)", False),
    ("w = torch.empty(n, m, dtype=torch.uint8)", "w.t().view(torch.float8_e4m3fn)", False),
    ("w = torch.empty(n, m, dtype=torch.int32)", "w.t().view(torch.float32)", False),
    ("w = torch.empty(n, m, dtype=torch.bfloat16)", "w.t().view(torch.float16)", False),
    ("w = torch.empty(n, m, dtype=torch.bfloat16)", "w[:, ::2].view(torch.int16)", False),
    ("w = torch.empty(n, m, dtype=torch.half)", "w.t().view(torch.short)", False),  # legacy spellings
    ("w = torch.empty(n, m, dtype=torch.float8_e4m3fn)", "w.new_empty((m, n)).t().view(torch.uint8)", False),
    ("w = torch.empty(n, m, dtype=torch.float8_e4m3fn)", "torch.empty_like(w).t().view(torch.uint8)", False),
    ("w = torch.empty(n, m, dtype=torch.bfloat16)", "w.softmax(-1).t().view(torch.int16)", False),
    ("w = torch.empty(n, m, dtype=torch.bfloat16)", "w.sum(0, keepdim=True).t().view(torch.int16)", False),
    ("w = torch.empty(n, m, dtype=torch.float8_e4m3fn)",
     "w.to(torch.float8_e5m2, memory_format=torch.contiguous_format).t().view(torch.uint8)", False),
    ("", "x.to(torch.float8_e4m3fn).t().view(torch.uint8)", False),
    ("", "x.t().to(torch.float8_e4m3fn).view(torch.uint8)", False),
    ("", "x.to(torch.float8_e8m0fnu).t().view(torch.uint8)", False),
    ("", "x.view(torch.int32).t().view(torch.float32)", False),
    # another element size, or a source dtype not known: the last dim needs stride 1
    ("w = torch.empty(n, m, dtype=torch.float32)", "w.t().view(torch.uint8)", True),
    ("w = torch.empty(n, m, dtype=torch.uint8)", "w.t().view(torch.int32)", True),
    ("w = torch.empty(n, m, dtype=torch.bfloat16)", "w[:, ::2].view(torch.uint8)", True),
    ("", "x.t().view(torch.uint8)", True),
    ("", "x.t().view(torch.float32)", True),
    ("", "x.to(torch.float32).t().view(torch.uint8)", True),
    ("w = torch.empty(n, m, dtype=torch.bfloat16)", "w.t().view(torch.float4_e2m1fn_x2)", True),
    ("", "x.to(torch.float32).t().view(torch.float4_e2m1fn_x2)", True),
    ("w = torch.empty(n, m, dtype=torch.float8_e4m3fn) if flag else torch.empty(n, m, dtype=torch.float32)",
     "w.t().view(torch.uint8)", True),  # fp8 on one path only
    # results whose dtype is not the receiver's
    ("f = torch.zeros(n, m, dtype=torch.bool)", "f.cumsum(-1).t().view(torch.uint8)", True),  # int64
    ("f = torch.zeros(n, m, dtype=torch.bool)", "f.sum(0, keepdim=True).t().view(torch.uint8)", True),
    ("w = torch.empty(n, m, dtype=torch.bfloat16)", "w.argmax(0, keepdim=True).t().view(torch.int16)", True),
    ("w = torch.empty(n, m, dtype=torch.bfloat16)", "w.softmax(-1, dtype=torch.float32).t().view(torch.int16)", True),
    ("w = torch.empty(n, m, dtype=torch.bfloat16)", "w.softmax(-1, torch.float32).t().view(torch.int16)", True),
    ("w = torch.empty(n, m, dtype=torch.float8_e4m3fn)",
     "w.new_empty((m, n), dtype=torch.float32).t().view(torch.uint8)", True),
    ("w = torch.empty(n, m, dtype=torch.float8_e4m3fn)",
     "torch.empty_like(w, dtype=out_dtype).t().view(torch.uint8)", True),
    ("w = torch.empty(n, m, dtype=torch.float8_e4m3fn)",
     "w.to(torch.float32, memory_format=torch.contiguous_format).t().view(torch.uint8)", True),
    # the conditional expression that takes the view says the element size
    ("t = x.t()", "t.view(torch.uint8) if t.element_size() == 1 else t", False),
    ("t = x.t()", "t.view(torch.uint8) if t.itemsize == 1 else t", False),
    ("t = x.t()", "t.view(torch.uint8) if 1 == t.dtype.itemsize else t", False),
    ("t = x.t()", "t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t", False),
    ("t = x.t()", "t.view(torch.uint8) if t.dtype is torch.float8_e5m2 else t", False),
    ("t = x.t()", "t.view(torch.uint8) if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else t", False),
    ("t = x.t()", "t.view(torch.uint8) if flag and t.element_size() == 1 else t", False),
    ("t = x.t()", "(t.view(torch.uint8) if t.element_size() == 1 else t).sum()", False),
    ("t = x.t()", "t.view(torch.uint8) if t.dtype in (torch.float8_e4m3fn, torch.bfloat16) and t.itemsize == 1 else t",
     False),  # both hold
    ("t = x.t()", "t.view(torch.uint8) if t.dtype in (torch.float8_e4m3fn, torch.bfloat16) else t", True),
    ("t = x.t()", "t.view(torch.uint8) if flag or t.element_size() == 1 else t", True),
    ("t = x.t()", "t if t.element_size() == 1 else t.view(torch.uint8)", True),
    ("t = x.t()", "t.view(torch.uint8) if t.element_size() != 1 else t", True),
    ("t = x.t()", "t.view(torch.uint8) if t.element_size() == 2 else t", True),
    ("t = x.t()", "t.view(torch.int16) if t.element_size() == 1 else t", True),
]
_X_DTYPES = ["float8_e4m3fn", "float8_e5m2", "uint8", "bfloat16", "float32", "float64"]


def _dtype_view_source(setup: str, expression: str) -> str:
    body = f"    {setup}\n" if setup else ""
    return f"import torch\n\n\ndef f(x, n, m, flag, out_dtype):\n{body}    return {expression}\n"


@pytest.mark.parametrize(("setup", "expression", "flagged"), DTYPE_VIEWS)
def test_dtype_view_expectations_match_torch(setup: str, expression: str, flagged: bool):
    raised = []
    for dtype in _X_DTYPES:
        for flag in (True, False):
            scope = {"torch": torch, "x": torch.zeros(4, 8, dtype=getattr(torch, dtype)), "n": 4, "m": 8,
                     "flag": flag, "out_dtype": torch.float32}  # fmt: skip
            try:
                if setup:  # ``name = value``
                    name, _, value = setup.partition(" = ")
                    scope[name] = eval(value, scope)
                eval(expression, scope)
            except RuntimeError as error:
                assert "stride" in str(error)  # the strides, not a size the view cannot divide
                raised.append((dtype, flag))
    assert bool(raised) == flagged


@pytest.mark.parametrize(("setup", "expression", "flagged"), DTYPE_VIEWS)
def test_dtype_view_needs_a_unit_last_stride_only_across_element_sizes(setup: str, expression: str, flagged: bool):
    source = _dtype_view_source(setup, expression)
    assert findings(source) == ([(source.count("\n"), "GPU102")] if flagged else [])


@pytest.mark.parametrize("expression", [
    "x.t().view(torch.float4_e2m1fn_x2)",
    "x.permute(1, 0)[:, ::2].view(torch.float4_e2m1fn_x2)",
    "x[:, 1:].t().view(torch.float4_e2m1fn_x2)",
])  # fmt: skip
def test_a_view_as_packed_fp4_is_of_bytes_whatever_the_strides(expression: str):
    """Torch copies nothing into packed FP4 (``.to()`` raises), so a tensor of unknown dtype viewed
    as it holds bytes already (fp4 weights stored as ``uint8``, the CuTe DSL's permuted operands):
    the view reinterprets in place. Checked against torch for the 1-byte dtypes."""
    with pytest.raises(NotImplementedError):
        torch.zeros(2, 2).to(torch.float4_e2m1fn_x2)
    for dtype in ("uint8", "int8", "float8_e4m3fn", "float8_e5m2"):
        eval(expression, {"torch": torch, "x": torch.zeros(4, 8, dtype=getattr(torch, dtype))})
    assert findings(_dtype_view_source("", expression)) == []


def test_same_size_view_in_a_wrapper_needs_nothing_of_its_parameter():
    source = """
    import torch


    def as_bytes(p):
        return p.view(torch.uint8) if p.element_size() == 1 else p


    def fp8_bytes(p):
        return p.to(torch.float8_e4m3fn).view(torch.uint8)


    def raw_bytes(p):
        return p.view(torch.uint8)


    def caller(w):
        as_bytes(w.t())
        fp8_bytes(w.t())
        raw_bytes(w.t())  # the callee cannot know the dtype
    """
    assert findings(source) == [(20, "GPU102")]


# -- strides a same-file helper returns (``M, N, row_stride = flatten(x)``) ----------------------

FLATTENING_WRAPPER = """
import torch
import triton
import triton.language as tl


@triton.jit
def quant_kernel(x_ptr, out_ptr, M, x_row_stride, N: tl.constexpr):
    rows = tl.program_id(0) + tl.arange(0, 4)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :])
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], x)


def flatten_to_2d(x):
    assert x.stride(-1) == 1
    n = x.shape[-1]
    if x.ndim == 1:
        return 1, n, n
    row_stride = x.stride(-2)
    return x.numel() // n, n, row_stride


def quantize(x, out):
    m, n, {row_stride} = flatten_to_2d(x)
    quant_kernel[(m,)](x, out, m, {launched}, N=n)
    return out


def caller(kv, out):
    quantize(kv[..., 64:], out)  # a column range: unit last stride, rows a stride apart
    quantize(kv.t(), out)
"""


@pytest.mark.parametrize(
    ("row_stride", "launched", "expected"),
    [
        # the kernel gets the row stride the helper returns: it needs a unit last stride only
        ("x_row_stride", "x_row_stride", [(32, "GPU102")]),
        # the helper's result is ignored and the kernel assumes dense rows: contiguity
        ("_", "n", [(31, "GPU102"), (32, "GPU102")]),
    ],
)
def test_strides_returned_by_a_helper_make_a_launch_stride_aware(row_stride, launched, expected):
    source = FLATTENING_WRAPPER.format(row_stride=row_stride, launched=launched)
    assert findings(source) == expected


# A check that a dim has stride 1 (a column-major weight: ``assert w.stride(0) == 1``) makes the
# transpose that moves that dim last a view with a unit last stride: ``.view(dtype)`` works on it.
# (check, argument, flagged by ``.view(dtype)``)
STRIDE_CHECKED = [
    ("assert w.stride(0) == 1", "w.t()", False),
    ("assert w.stride()[0] == 1", "w.T", False),
    ("assert w.dim() == 2 and 1 == w.stride(0)", "w.transpose(0, -1)", False),
    ("if w.stride(0) != 1:\n        raise ValueError('w')", "w.t()", False),
    ("if not w.stride(0) == 1:\n        raise ValueError('w')", "w.t()", False),
    ("assert w.stride(-2) == 1", "w.mT", False),
    ("assert w.stride(-2) == 1", "w.permute(1, 0)", False),  # two dims: -2 is dim 0
    ("assert w.stride(1) == 1", "w.t()", True),  # the last dim already: the transpose moves it away
    ("assert w.stride(0) == 1 or w.stride(1) == 1", "w.t()", True),
    ("if w.stride(0) != 1:\n        print('w')", "w.t()", True),  # the check does not end the path
]


def _stride_checked_source(check: str, argument: str) -> str:
    return f"import torch\n\n\ndef f(w):\n    {check}\n    return {argument}.view(torch.uint8)\n"


@pytest.mark.parametrize(("check", "argument", "flagged"), STRIDE_CHECKED)
def test_a_checked_unit_stride_is_kept_by_the_transpose_that_moves_it_last(check, argument, flagged):
    source = _stride_checked_source(check, argument)
    assert findings(source) == ([(source.count("\n"), "GPU102")] if flagged else [])  # the last line


@pytest.mark.parametrize(("check", "argument", "flagged"), STRIDE_CHECKED)
def test_stride_checked_expectations_match_torch(check, argument, flagged):
    """Not flagged: every input the check lets through can be viewed. Flagged: some can not."""
    namespace: dict = {}
    exec(_stride_checked_source(check, argument), namespace)  # noqa: S102 -- this test's own source, run on torch
    failed_views = 0
    for w in (torch.zeros(4, 5), torch.zeros(5, 4).t()):  # row-major, column-major
        try:
            namespace["f"](w)
        except (AssertionError, ValueError):
            continue  # the check refused it
        except RuntimeError:
            failed_views += 1
    assert (failed_views > 0) == flagged


def test_a_checked_unit_stride_does_not_make_a_transpose_contiguous():
    source = "import torch\n\n\ndef f(w):\n    assert w.stride(0) == 1\n    torch.ops._C.rms_norm(w.t())\n"
    assert findings(source) == [(6, "GPU102")]


def test_a_unit_stride_check_of_a_value_since_rebound_says_nothing():
    source = "import torch\n\n\ndef f(w, v):\n    assert w.stride(0) == 1\n    w = v\n    return w.t().view(torch.uint8)\n"
    assert findings(source) == [(7, "GPU102")]
