"""flow.Walker: a path that ends (``return``, ``raise``, ``continue``, ``break``) takes no part in
the join after its ``if``; its values go where the path goes (the loop head, past the loop, the
function exit, an exception handler). GPU1xx (layout) and GPU2xx (device) both walk this way."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from sync_lint.analysis.flow import Walker
from sync_lint.api import lint_text

GUARD = "reference_kernels.sync_check:gpu_sync_allowed"


def layout_findings(source: str) -> list[tuple[int, str]]:
    return [(d.line, d.code) for d in lint_text(textwrap.dedent(source), preview=True) if d.code.startswith("GPU1")]


def sync_findings(source: str) -> list[tuple[int, str]]:
    found = lint_text(textwrap.dedent(source), preview=True, sync_guard=GUARD)
    return [(d.line, d.code) for d in found if d.code.startswith("GPU2")]


# -- GPU1xx: a view made on a path that returns is not what the code after the `if` sees -------


def test_view_on_a_returning_branch_does_not_reach_the_call_after_the_if():
    assert layout_findings("""
        import torch

        def launch(x, single_column: bool):
            if single_column:
                x = x[:, 0]
                return torch.ops._C.op(x.contiguous())
            torch.ops._C.op(x)
    """) == []


def test_view_on_a_raising_branch_does_not_reach_the_call_after_the_if():
    assert layout_findings("""
        import torch

        def launch(x):
            if x.dim() != 2:
                x = x.t()
                raise ValueError(f"bad shape {x.shape}")
            torch.ops._C.op(x)
    """) == []


def test_elif_chain_only_the_falling_through_branches_join():
    assert layout_findings("""
        import torch

        def launch(x, mode: int):
            if mode == 0:
                x = x[:, 0]
                return torch.ops._C.op(x.contiguous())
            elif mode == 1:
                x = x.t()
                raise NotImplementedError
            else:
                x = x[:4]
            torch.ops._C.op(x)
    """) == []


def test_view_on_a_branch_that_falls_through_still_flags():
    assert layout_findings("""
        import torch

        def launch(x, single_column: bool):
            if single_column:
                x = x[:, 0]
            torch.ops._C.op(x)
    """) == [(7, "GPU102")]


def test_return_in_an_inner_if_ends_only_the_inner_branch():
    assert layout_findings("""
        import torch

        def launch(x, single_column: bool, done: bool):
            if single_column:
                x = x[:, 0]
                if done:
                    return None
            torch.ops._C.op(x)
    """) == [(9, "GPU102")]


def test_view_made_in_a_handler_that_returns_does_not_reach_the_code_after_the_try():
    assert layout_findings("""
        import torch

        def launch(x, prepare):
            try:
                x = prepare(x)
            except RuntimeError:
                x = x[:, 0]
                return torch.ops._C.op(x.contiguous())
            torch.ops._C.op(x)
    """) == []


def test_handler_still_sees_the_values_of_a_body_that_returned_or_raised():
    assert layout_findings("""
        import torch

        def launch(x, y, check: bool):
            try:
                x = x[:, 0]
                return torch.ops._C.op(x.contiguous())
            except RuntimeError:
                torch.ops._C.op(x)
            try:
                if check:
                    y = y.t()
                    raise ValueError("y")
            except ValueError:
                torch.ops._C.op(y)
    """) == [(9, "GPU102"), (15, "GPU102")]


# -- loops: `continue` goes to the loop head, `break` past the loop ------------------------------


def test_view_on_a_continue_branch_does_not_reach_the_rest_of_the_iteration():
    assert layout_findings("""
        import torch

        def launch(xs, skip: bool):
            for x in xs:
                if skip:
                    x = x[:, 0]
                    continue
                torch.ops._C.op(x)
    """) == []


def test_view_on_a_continue_branch_reaches_the_next_iteration_and_the_exit():
    assert layout_findings("""
        import torch

        def launch(x, n: int, narrow: bool):
            for _ in range(n):
                torch.ops._C.op(x)
                if narrow:
                    x = x[:, 0]
                    continue
                x = x.contiguous()
            torch.ops._C.op(x)
    """) == [(6, "GPU102"), (11, "GPU102")]


def test_view_on_a_break_branch_reaches_the_code_after_the_loop_but_not_its_else():
    assert layout_findings("""
        import torch

        def launch(x, n: int, found: bool):
            for _ in range(n):
                if found:
                    x = x[:, 0]
                    break
                torch.ops._C.op(x)
            else:
                torch.ops._C.op(x)
            torch.ops._C.op(x)
    """) == [(12, "GPU102")]


def test_return_inside_a_loop_leaves_the_function_not_the_loop():
    assert layout_findings("""
        import torch

        def launch(x, n: int, found: bool):
            for _ in range(n):
                if found:
                    x = x[:, 0]
                    return torch.ops._C.op(x.contiguous())
            torch.ops._C.op(x)
    """) == []


# -- GPU2xx: a tensor moved to the GPU on a path that returns ------------------------------------


@pytest.mark.parametrize(("end", "expected"), [("return lens", []), ("raise RuntimeError", []), ("pass", [(10, "GPU201")])])
def test_device_move_on_an_ending_branch(end: str, expected):
    assert sync_findings(f"""
        import torch

        class FooMetadataBuilder:
            def build(self, common, flag: bool):
                lens = common.seq_lens_cpu
                if flag:
                    lens = lens.cuda()
                    {end}
                return lens.tolist()
    """) == expected


def test_device_move_with_a_return_in_an_inner_if_still_flags():
    assert sync_findings("""
        import torch

        class FooMetadataBuilder:
            def build(self, common, flag: bool, empty: bool):
                lens = common.seq_lens_cpu
                if flag:
                    lens = lens.cuda()
                    if empty:
                        return None
                return lens.tolist()
    """) == [(11, "GPU201")]


def test_attributes_set_before_an_early_return_of_init_count():
    # ``__init__`` exits through its ``return`` too: ``self.buf`` may be the GPU buffer.
    assert sync_findings("""
        import torch

        class FooMetadataBuilder:
            def __init__(self, device, on_gpu: bool):
                self.buf = torch.zeros(8)
                if on_gpu:
                    self.buf = torch.zeros(8, device=device)
                    return
                self.ready = True

            def build(self, common):
                return self.buf.tolist()
    """) == [(13, "GPU201")]


# -- the walker itself ---------------------------------------------------------------------------


class _Names:
    """A toy domain: a name's value is the set of literal strings it may hold."""

    def evaluate(self, node, env):
        if isinstance(node, cst.SimpleString):
            return frozenset({node.evaluated_value})
        if isinstance(node, cst.Name) and node.value in env:
            return env[node.value]
        return frozenset({"?"})

    def join(self, a, b):
        return a | b

    def element(self, value, index):
        return frozenset({"?"})

    def unknown(self):
        return frozenset({"?"})


def _seen(source: str) -> dict[str, frozenset[str]]:
    """The value of ``x`` at each ``probe_<tag>(x)`` call, and the exit environment's."""
    seen: dict[str, frozenset[str]] = {}

    def hook(node, env):
        if isinstance(node, cst.Expr) and isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name):
            name = node.value.func.value
            if name.startswith("probe_"):
                seen[name[len("probe_"):]] = env.get("x", frozenset())

    function = cst.parse_module(textwrap.dedent(source)).body[0]
    exit_env = Walker(_Names(), hook).walk(function.body.body, {"x": frozenset({"start"})})
    seen["exit"] = exit_env.get("x", frozenset())
    return seen


def test_walker_paths():
    seen = _seen("""
        def f():
            if a:
                x = "ret"
                return
            probe_after_if(x)
            while b:
                if c:
                    x = "cont"
                    continue
                probe_in_loop(x)
                if d:
                    x = "brk"
                    break
                x = "end"
            else:
                probe_else(x)
            probe_after_loop(x)
            try:
                x = "try"
                raise E
            except E:
                probe_handler(x)
            else:
                probe_try_else(x)
            probe_after_try(x)
    """)
    assert seen["after_if"] == {"start"}
    assert seen["in_loop"] == {"start", "cont", "end"}
    assert seen["else"] == {"start", "cont", "end"}
    assert seen["after_loop"] == {"start", "cont", "end", "brk"}
    assert seen["handler"] == {"start", "cont", "end", "brk", "try"}
    assert seen["after_try"] == {"start", "cont", "end", "brk", "try"}
    assert seen["exit"] == {"ret", "start", "cont", "end", "brk", "try"}
    assert "try_else" in seen  # dead code is still walked (with the values at the path's end)


def test_walker_both_branches_end():
    seen = _seen("""
        def f():
            if a:
                x = "one"
                return
            else:
                x = "two"
                raise E
            probe_dead(x)
    """)
    assert seen["dead"] == {"one", "two"}  # unreachable: walked, with both ends' values
    assert seen["exit"] == {"one"}  # only the return reaches the exit
