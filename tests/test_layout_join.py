"""layout.join: ``inner_unit`` (the last dim may have stride 1) of a merged view holds only if it
holds on both paths, whatever the order of the paths, so a callee that checks only
``x.stride(-1) == 1`` is still reported for a view that is a column select on one path."""

from __future__ import annotations

import textwrap

import pytest

from sync_lint.analysis.layout import (
    BROADCAST,
    FRESH,
    GAPPED,
    NONE,
    OTHER,
    PERMUTED,
    SCALAR,
    TUPLE,
    UNKNOWN,
    Layout,
    join,
)  # fmt: skip
from sync_lint.api import lint_text

torch = pytest.importorskip("torch")

UNIT_CALLEE = "import torch\n\n\ndef wrapper(x):\n    assert x.stride(-1) == 1\n    return x\n\n\n"
CONTIGUOUS_CALLEE = "import torch\n\n\ndef wrapper(x):\n    assert x.is_contiguous()\n    return x\n\n\n"


def findings(source: str) -> list[tuple[int, str]]:
    return [(d.line, d.code) for d in lint_text(textwrap.dedent(source), preview=True) if d.code.startswith("GPU1")]


def _branches(callee: str, then: str, otherwise: str) -> str:
    return callee + (
        "def caller(bt, n, flag: bool):\n"
        "    if flag:\n"
        f"        v = {then}\n"
        "    else:\n"
        f"        v = {otherwise}\n"
        "    return wrapper(v)\n"
    )


# (one path, the other path, last dim strided on some path, not contiguous on some path)
PAIRS = [
    ("bt[:, :n]", "bt[:, 0]", True, True),  # a column-range slice and a column select
    ("bt[:, :n]", "bt.select(1, 0)", True, True),
    ("bt[:, :n]", "bt[:, ::2]", True, True),  # ... and a last-dim step slice
    ("bt[:, :n]", "bt.t()", True, True),  # ... and a transpose
    ("bt[:, :n]", "bt[:, 1:n]", False, True),  # two column-range slices
    ("bt[:, :n]", "bt[:n]", False, True),  # a column-range slice and a contiguous prefix
    ("bt[:n]", "bt[1:]", False, False),
]


@pytest.mark.parametrize(("one", "other", "unit_flagged", "flagged"), PAIRS)
def test_expectations_match_torch(one: str, other: str, unit_flagged: bool, flagged: bool):
    values = [eval(e, {"bt": torch.zeros(4, 8), "n": 3}) for e in (one, other)]
    assert any(v.stride(-1) != 1 for v in values) == unit_flagged
    assert any(not v.is_contiguous() for v in values) == flagged


@pytest.mark.parametrize("swap", [False, True], ids=["as-written", "swapped"])
@pytest.mark.parametrize(("one", "other", "unit_flagged", "flagged"), PAIRS)
def test_unit_stride_callee_after_a_merge(one: str, other: str, unit_flagged: bool, flagged: bool, swap: bool):
    then, otherwise = (other, one) if swap else (one, other)
    source = _branches(UNIT_CALLEE, then, otherwise)
    assert findings(source) == ([(source.count("\n"), "GPU102")] if unit_flagged else [])


@pytest.mark.parametrize("swap", [False, True], ids=["as-written", "swapped"])
@pytest.mark.parametrize(("one", "other", "unit_flagged", "flagged"), PAIRS)
def test_contiguity_callee_after_a_merge(one: str, other: str, unit_flagged: bool, flagged: bool, swap: bool):
    then, otherwise = (other, one) if swap else (one, other)
    source = _branches(CONTIGUOUS_CALLEE, then, otherwise)
    assert findings(source) == ([(source.count("\n"), "GPU102")] if flagged else [])


@pytest.mark.parametrize("swap", [False, True], ids=["as-written", "swapped"])
def test_message_names_the_path_strided_in_its_last_dim(swap: bool):
    then, otherwise = ("bt[:, 0]", "bt[:, :n]") if swap else ("bt[:, :n]", "bt[:, 0]")
    source = _branches(UNIT_CALLEE, then, otherwise)
    (message,) = [d.message for d in lint_text(source, preview=True) if d.code == "GPU102"]
    assert "a column slice of `bt`" in message and "column-range" not in message
    assert f"(line {11 if swap else 13})" in message  # where the column select was made


@pytest.mark.parametrize("swap", [False, True], ids=["as-written", "swapped"])
def test_cast_of_a_merged_view_to_a_unit_stride_callee(swap: bool):
    then, otherwise = "bt[:, :n].to(torch.int32)", "bt[:, 0].to(torch.int32)"
    if swap:
        then, otherwise = otherwise, then
    source = _branches(UNIT_CALLEE, then, otherwise)
    assert findings(source) == [(source.count("\n"), "GPU101")]
    source = _branches(UNIT_CALLEE, "bt[:, :n].to(torch.int32)", "bt[:, 1:n].to(torch.int32)")
    assert findings(source) == []


@pytest.mark.parametrize("first", ["bt[:, :n]", "bt[:, 0]"])
def test_if_without_else_and_loops_merge_the_same_way(first: str):
    second = "bt[:, 0]" if first == "bt[:, :n]" else "bt[:, :n]"
    source = UNIT_CALLEE + (
        "def caller(bt, n, flag: bool):\n"
        f"    v = {first}\n"
        "    if flag:\n"
        f"        v = {second}\n"
        "    wrapper(v)\n"
        f"    w = {first}\n"
        "    for _ in range(n):\n"
        "        wrapper(w)\n"
        f"        w = {second}\n"
    )
    assert findings(source) == [(13, "GPU102"), (16, "GPU102")]


# -- join itself -------------------------------------------------------------------------------

RANGE = Layout(GAPPED, what="a column-range slice of `bt`")
SELECT = Layout(GAPPED, what="a column slice of `bt`", inner_unit=False, vector=True)
RANGE2 = Layout(GAPPED, what="a column-range slice of `x`")
TRANSPOSE = Layout(PERMUTED, what="a transpose of `bt`", inner_unit=False)


@pytest.mark.parametrize(("a", "b", "inner_unit"), [
    (RANGE, SELECT, False), (RANGE, RANGE2, True), (RANGE, TRANSPOSE, False), (SELECT, TRANSPOSE, False),
    (RANGE, Layout("fresh"), True), (SELECT, Layout("unknown"), False), (SELECT, Layout("none"), False),
])  # fmt: skip
def test_join_is_weakest_in_either_order(a: Layout, b: Layout, inner_unit: bool):
    for left, right in ((a, b), (b, a)):
        assert join(left, right).inner_unit is inner_unit


def test_join_of_tuples_joins_the_elements():
    joined = join(Layout(TUPLE, elements=(RANGE, RANGE)), Layout(TUPLE, elements=(SELECT, RANGE2)))
    assert [e.inner_unit for e in joined.elements] == [False, True]


# -- symmetry and the weaker guarantee, field by field ------------------------------------------

OP = "import torch\n\n\n"


def _both_orders(then: str, otherwise: str, use: str, setup: str = "") -> list[list[tuple[str, str]]]:
    """The GPU1 findings (code, message) of ``use`` after ``v = then if flag else otherwise`` and
    after the same with the branches swapped (line numbers left out: they move with the text)."""
    results = []
    for one, other in ((then, otherwise), (otherwise, then)):
        source = OP + f"def caller(bt, x, y, out, n, flag: bool):\n{setup}    v = {one} if flag else {other}\n    {use}\n"
        results.append([(d.code, d.message) for d in lint_text(source, preview=True) if d.code.startswith("GPU1")])
    return results


def test_a_plain_view_on_one_path_is_a_plain_view_whatever_the_other_path_casts():
    # `bt[:, 1].to(torch.int32)` is a no-op on an int32 table: strided either way, but on the
    # other path there is no cast at all, so GPU102 (not GPU101) holds on every path.
    first, second = _both_orders("bt[:, 0]", "bt[:, 1].to(torch.int32)", "torch.ops._C.fill(out, v)")
    assert [code for code, _ in first] == [code for code, _ in second] == ["GPU102"]
    # Both paths cast: the cast is relied on on every path (GPU101), the same one named either way.
    first, second = _both_orders("bt[:, 0].int()", "bt[:, 1].to(torch.int32)", "torch.ops._C.fill(out, v)")
    assert first == second and [code for code, _ in first] == ["GPU101"]


def test_a_view_of_a_contiguous_result_on_one_path_only_is_a_plain_view():
    first, second = _both_orders("bt.contiguous()[:, 0]", "bt[:, 1]", "torch.ops._C.fill(out, v)")
    assert [code for code, _ in first] == [code for code, _ in second] == ["GPU102"]
    first, second = _both_orders("bt.contiguous()[:, 0]", "bt.contiguous().t()", "torch.ops._C.fill(out, v)")
    assert first == second and [code for code, _ in first] == ["GPU103"]


@pytest.mark.parametrize("dtypes", [("int32", "int64"), ("int64", "int64")])
def test_dtype_is_known_after_a_merge_only_if_the_same_on_every_path(dtypes: tuple[str, str]):
    # A cast to int32 certainly converts (and so copies the column) only if no path holds int32.
    setup = "".join(f"    t{i} = torch.zeros(n, 4, dtype=torch.{d})\n" for i, d in enumerate(dtypes))
    first, second = _both_orders("t0[:, 0]", "t1[:, 1]", "torch.ops._C.fill(out, v.to(torch.int32))", setup)
    expected = ["GPU101"] if "int32" in dtypes else []
    assert [code for code, _ in first] == [code for code, _ in second] == expected


KERNEL = (
    "import torch\nimport triton\nimport triton.language as tl\n\n\n"
    "@triton.jit\ndef col_kernel(x_ptr, stride, out_ptr):\n    i = tl.program_id(0)\n"
    "    tl.store(out_ptr + i, tl.load(x_ptr + i * stride))\n\n\n"
)


@pytest.mark.parametrize(("other", "flagged"), [("y[:, 0]", True), ("x[:, 1]", False)])
def test_a_launch_is_stride_aware_after_a_merge_only_with_every_paths_strides(other: str, flagged: bool):
    for one, two in (("x[:, 0]", other), (other, "x[:, 0]")):
        source = KERNEL + (
            "def run(x, y, out, flag: bool):\n"
            f"    v = {one} if flag else {two}\n"
            "    col_kernel[(out.numel(),)](v, x.stride(0), out)\n"
        )
        found = [d.code for d in lint_text(source) if d.code.startswith("GPU1")]
        assert found == (["GPU102"] if flagged else []), (one, two)


def test_a_reshape_keeps_a_view_if_it_does_on_some_path():
    # `bt[:, 0].reshape(-1)` is still the strided column; `bt[:, ::2].reshape(-1)` is a copy.
    first, second = _both_orders("bt[:, 0]", "bt[:, ::2]", "torch.ops._C.fill(out, v.reshape(-1))")
    assert [code for code, _ in first] == [code for code, _ in second] == ["GPU102"]
    first, second = _both_orders("bt[:, ::3]", "bt[:, ::2]", "torch.ops._C.fill(out, v.reshape(-1))")
    assert first == second == []


def test_a_size1_view_on_one_path_keeps_its_strides_after_a_merge():
    source = KERNEL + (
        "def run(block_table, out, flag: bool):\n"
        "    if flag:\n"
        "        first = block_table[:1, :8].contiguous()\n"
        "    else:\n"
        "        first = torch.zeros(1, 8)\n"
        "    col_kernel[(1,)](first, first.stride(0), out)\n"
    )
    assert [(d.line, d.code) for d in lint_text(source, preview=True)] == [(source.count("\n"), "GPU103")]
    look_alike = source.replace("block_table[:1, :8].contiguous()", "block_table[:2, :8].contiguous()")
    assert [d.code for d in lint_text(look_alike, preview=True)] == []


def test_two_casts_of_parameters_name_the_same_cast_in_either_order():
    first, second = _both_orders("x.int()", "y.to(torch.int32)", "torch.ops._C.fill(out, v)")
    assert first == second and [code for code, _ in first] == ["GPU101"]


CAST_A = Layout(GAPPED, what="a column slice of `bt`", inner_unit=False, vector=True, dtype="torch.int32")
SAMPLES = [
    RANGE, SELECT, RANGE2, TRANSPOSE, CAST_A,
    Layout(GAPPED, what="a step slice of `bt`", inner_unit=False, base_root="bt", ndim=2),
    Layout(GAPPED, what="a column slice of `kv`", base_root="kv", ndim=2, size1=True),
    Layout(BROADCAST, what="a broadcast (stride-0) view of `s`", inner_unit=False, dtype="torch.float32"),
    Layout(FRESH, dtype="torch.int32", ndim=2), Layout(FRESH, size1=True, base_root="bt"), Layout(FRESH),
    Layout(UNKNOWN, params=frozenset({"x"}), source="param"), Layout(UNKNOWN, params=frozenset({"y"}), source="param"),
    Layout(UNKNOWN, ndim=3), Layout(SCALAR, stride_of="x"), Layout(SCALAR), Layout(OTHER), Layout(NONE),
    Layout(TUPLE, elements=(RANGE, Layout(SCALAR))), Layout(TUPLE, elements=(SELECT, Layout(NONE))),
    Layout(TUPLE, elements=(RANGE,), maybe_none=True),
]  # fmt: skip


@pytest.mark.parametrize("a", SAMPLES)
@pytest.mark.parametrize("b", SAMPLES)
def test_join_is_symmetric(a: Layout, b: Layout):
    assert join(a, b) == join(b, a)


def test_join_keeps_the_weaker_guarantee_field_by_field():
    size1 = Layout(GAPPED, what="a column-range slice of `kv`", base_root="kv", ndim=2, size1=True)
    for left, right in ((RANGE, size1), (size1, RANGE)):
        joined = join(left, right)
        assert joined.size1 and joined.base_root is None and joined.ndim is None and joined.inner_unit
    for left, right in ((SELECT, CAST_A), (CAST_A, SELECT)):
        joined = join(left, right)
        assert joined.cast is None and joined.dtype is None and joined.vector
    fresh = join(Layout(FRESH, size1=True, ndim=2), Layout(FRESH, ndim=2))
    assert fresh.size1 and fresh.ndim == 2
    maybe = join(join(Layout(NONE), Layout(TUPLE, elements=(RANGE,))), Layout(TUPLE, elements=(SELECT,)))
    assert maybe.maybe_none and maybe.elements[0].inner_unit is False
