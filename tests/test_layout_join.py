"""layout.join: ``inner_unit`` (the last dim may have stride 1) of a merged view holds only if it
holds on both paths, whatever the order of the paths, so a callee that checks only
``x.stride(-1) == 1`` is still reported for a view that is a column select on one path."""

from __future__ import annotations

import textwrap

import pytest

from sync_lint.analysis.layout import GAPPED, PERMUTED, TUPLE, Layout, join
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
