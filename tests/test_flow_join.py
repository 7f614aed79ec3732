"""flow.Walker: a path that ends (``return``, ``raise``, ``continue``, ``break``, ``assert False``,
``sys.exit()``...) takes no part in the join after its ``if``; its values go where the path goes (the
loop head, past the loop, the function exit, an exception handler, past a ``contextlib.suppress``).
``while True:`` is left only by ``break``; a ``match`` with a catch-all case takes one of its cases.
GPU1xx (layout) and GPU2xx (device) both walk this way."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from sync_lint.analysis.flow import Walker
from sync_lint.analysis.names import NameTable
from sync_lint.api import lint_text

GUARD = "reference_kernels.sync_check:gpu_sync_allowed"


def layout_findings(source: str) -> list[tuple[int, str]]:
    return [(d.line, d.code) for d in lint_text(textwrap.dedent(source), preview=True) if d.code.startswith("GPU1")]


def sync_findings(source: str) -> list[tuple[int, str]]:
    found = lint_text(textwrap.dedent(source), preview=True, sync_guard=GUARD)
    # GPU205 (a blocking copy onto the GPU: ``lens.cuda()`` below) is no GPU->CPU sync these
    # tests follow through a join.
    return [(d.line, d.code) for d in found if d.code.startswith("GPU2") and d.code != "GPU205"]


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


@pytest.mark.parametrize(
    ("end", "expected"),
    [
        ("return lens", []),
        ("raise RuntimeError", []),
        # statements that cannot complete
        ('assert False, "no GPU path yet"', []),
        ("assert 0", []),
        ("sys.exit(1)", []),
        ("os._exit(1)", []),
        ("exit(1)", []),
        # look-alikes that can
        ("pass", [(13, "GPU201")]),
        ("assert flag", [(13, "GPU201")]),
        ("print(lens.shape)", [(13, "GPU201")]),  # (``print(lens)`` would sync itself: GPU202)
    ],
)
def test_device_move_on_an_ending_branch(end: str, expected):
    assert sync_findings(f"""
        import os
        import sys

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


def _seen(source: str, resolve: bool = True) -> dict[str, frozenset[str]]:
    """The value of ``x`` at each ``probe_<tag>(x)`` call, and the exit environment's (``resolve``:
    the domain carries the module's ``NameTable``, as the rules' domains do)."""
    seen: dict[str, frozenset[str]] = {}

    def hook(node, env):
        if isinstance(node, cst.Expr) and isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Name):
            name = node.value.func.value
            if name.startswith("probe_"):
                seen[name[len("probe_"):]] = env.get("x", frozenset())

    module = cst.parse_module(textwrap.dedent(source))
    function = next(s for s in module.body if isinstance(s, cst.FunctionDef))
    domain = _Names()
    if resolve:
        domain.names = NameTable(module, "example", {})
    exit_env = Walker(domain, hook).walk(function.body.body, {"x": frozenset({"start"})})
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


# -- `with contextlib.suppress(...)`: what its body raises continues after the block -------------


def test_walker_raise_in_suppress_continues_after_the_with():
    seen = _seen("""
        import contextlib
        import contextlib as cl
        from contextlib import suppress
        from contextlib import suppress as ignoring

        def f():
            with suppress(ValueError):
                x = "sup"
                raise ValueError
            probe_after_suppress(x)
            with contextlib.suppress(KeyError), open(p) as fh:
                if a:
                    x = "dotted"
                    raise KeyError
                x = "through"
            probe_after_dotted(x)
            x = "reset"
            with ignoring(OSError):
                x = "alias"
                raise OSError
            with cl.suppress(OSError):
                raise OSError
            probe_after_aliases(x)
    """)
    # Like ``try: ... except: pass``: from the start, the end, or the ``raise``.
    assert seen["after_suppress"] == {"start", "sup"}
    assert seen["after_dotted"] == {"start", "sup", "dotted", "through"}
    assert seen["after_aliases"] == {"reset", "alias"}
    assert seen["exit"] == {"reset", "alias"}


def test_walker_raise_in_another_with_still_ends():
    seen = _seen("""
        from mylib import suppress

        def f():
            if a:
                with open(p) as fh:
                    x = "open"
                    raise ValueError
            if b:
                with suppress(ValueError):  # not contextlib's
                    x = "mine"
                    raise ValueError
            probe_after(x)
    """)
    assert seen["after"] == {"start"}


def test_walker_return_in_suppress_still_leaves_the_function():
    seen = _seen("""
        import contextlib

        def f():
            if a:
                with contextlib.suppress(OSError):
                    x = "ret"
                    return
                probe_after_with(x)
            probe_after_if(x)
    """)
    # ``return g()`` may raise inside the block: the code after it may run, with the values there.
    assert seen["after_with"] == {"start", "ret"}
    assert seen["after_if"] == {"start", "ret"}
    assert seen["exit"] == {"start", "ret"}


# -- `while True:` is left only by `break` ------------------------------------------------------


def test_walker_while_true_is_left_only_by_break():
    seen = _seen("""
        def f():
            while True:
                x = "loop"
                if a:
                    x = "brk"
                    break
            probe_after(x)
    """)
    assert seen["after"] == {"brk"}


@pytest.mark.parametrize("test", ["True", "1", "(True)"])
def test_walker_while_true_without_break_ends_the_path(test: str):
    seen = _seen(f"""
        def f():
            while {test}:
                x = "loop"
                for y in ys:
                    x = "inner"
                    break  # leaves the ``for``, not the ``while``
                if a:
                    x = "ret"
                    return
            else:
                probe_else(x)
            probe_after(x)
    """)
    assert seen["exit"] == {"ret"}  # nothing falls out of the loop (its ``else`` is dead code)


def test_walker_while_with_a_condition_may_run_zero_times():
    seen = _seen("""
        def f():
            while pending:
                x = "loop"
                if a:
                    return
            probe_after(x)
            while 0:
                x = "never"
            probe_after_zero(x)
    """)
    assert seen["after"] == {"start", "loop"}
    assert seen["after_zero"] == {"start", "loop", "never"}  # not a path end: treated as any test


# -- calls that never return, `assert False` ----------------------------------------------------


def test_walker_exit_calls_and_assert_false_end_the_path():
    seen = _seen("""
        import os
        import sys
        from sys import exit as bye

        def f():
            if a:
                x = "sys"
                sys.exit(1)
            if b:
                x = "os"
                os._exit(1)
            if c:
                x = "exit"
                exit()
            if d:
                x = "quit"
                quit(0)
            if e:
                x = "bye"
                bye(2)
            if g:
                x = "assert"
                assert False, "unreachable"
            if h:
                x = "zero"
                assert 0
            probe_after(x)
    """)
    assert seen["after"] == {"start"}
    assert seen["exit"] == {"start"}


def test_walker_calls_that_may_return_do_not_end_the_path():
    seen = _seen("""
        from mylib import quit

        def f(self):
            if a:
                x = "local"
                exit = make_exit()
                exit()
            if b:
                x = "imported"
                quit()
            if c:
                x = "method"
                self.exit(1)
            if d:
                x = "checked"
                assert x
            if e:
                x = "value"
                sys.exit  # not a call
            probe_after(x)
    """)
    assert seen["after"] == {"start", "local", "imported", "method", "checked", "value"}


def test_walker_exit_call_reaches_a_system_exit_handler():
    seen = _seen("""
        import sys

        def f():
            try:
                x = "body"
                sys.exit(1)
            except SystemExit:
                probe_handler(x)
                raise
            probe_dead(x)
    """)
    assert seen["handler"] == {"start", "body"}
    assert seen["exit"] == {"start", "body"}  # every path raises: the values at the end


def test_walker_exit_calls_without_a_name_table_are_read_as_written():
    seen = _seen("""
        def f():
            if a:
                x = "sys"
                sys.exit(1)
            if b:
                x = "builtin"
                exit(1)
            probe_after(x)
    """, resolve=False)
    assert seen["after"] == {"start"}


# -- `match` with a catch-all case --------------------------------------------------------------


@pytest.mark.parametrize("catch_all", ["_", "other", "(_)", '"b" | _', "_ as other", '("b" | _) as whole'])
def test_walker_match_with_a_catch_all_takes_one_of_its_cases(catch_all: str):
    seen = _seen(f"""
        def f():
            match cmd:
                case "a":
                    x = "a"
                case {catch_all}:
                    x = "b"
            probe_after(x)
            match cmd:
                case "c":
                    x = "c"
                    return
                case {catch_all}:
                    raise ValueError(cmd)
            probe_dead(x)
    """)
    assert seen["after"] == {"a", "b"}
    assert seen["exit"] == {"c"}  # only the ``return`` leaves


@pytest.mark.parametrize("last", ["other if other", '"z"', "[*_]", '"y" | "z"', '_ if other', '("y" | [*_]) as whole'])
def test_walker_match_without_a_catch_all_may_match_nothing(last: str):
    seen = _seen(f"""
        def f():
            match cmd:
                case "a":
                    x = "a"
                    return
                case {last}:
                    raise ValueError(cmd)
            probe_after(x)
    """)
    assert seen["after"] == {"start"}


# -- the same at rule level ---------------------------------------------------------------------


def test_view_kept_when_a_suppressed_raise_skips_the_copy():
    assert layout_findings("""
        import contextlib

        import torch

        def launch(x, check):
            y = x[:, 0]
            with contextlib.suppress(ValueError):
                if check(y):
                    raise ValueError("skip the copy")
                y = y.contiguous()
            torch.ops._C.op(y)
    """) == [(12, "GPU102")]


def test_view_on_a_raise_in_another_with_does_not_reach_the_call_after():
    assert layout_findings("""
        import torch

        def launch(x, path, single_column: bool):
            if single_column:
                x = x[:, 0]
                with open(path) as log:
                    log.write("single column")
                    raise NotImplementedError
            torch.ops._C.op(x)
    """) == []


@pytest.mark.parametrize(("loop", "expected"), [("while True:", []), ("while not ready(x):", [(10, "GPU102")])])
def test_view_before_a_loop_left_only_by_break(loop: str, expected):
    assert layout_findings(f"""
        import torch

        def launch(x, ready):
            x = x.t()
            {loop}
                x = x.contiguous()
                if ready(x):
                    break
            torch.ops._C.op(x)
    """) == expected


@pytest.mark.parametrize(("last", "expected"), [("_", []), ('"other"', [(13, "GPU102")])])
def test_view_before_a_match_whose_catch_all_raises(last: str, expected):
    assert layout_findings(f"""
        import torch

        def launch(x, layout: str):
            x = x.t()
            match layout:
                case "rows":
                    x = x.contiguous()
                case "cols":
                    x = x.t().contiguous()
                case {last}:
                    raise ValueError(layout)
            torch.ops._C.op(x)
    """) == expected



# -- rebinding a name forgets its old object's attributes ---------------------------------------


@pytest.mark.parametrize(
    ("rebind", "expected"),
    [
        ("weight = getattr(layer, name)", []),  # a new object each iteration: its .data is unknown
        ("pass", [(9, "GPU102")]),  # the same object: its .data was transposed last iteration
    ],
)
def test_rebinding_a_name_forgets_its_attributes(rebind: str, expected):
    assert layout_findings(f"""
        import torch

        def pack_weights(layer, names, fmt_cast):
            weight = layer.w13_weight
            for name in names:
                {rebind}
                weight.data = fmt_cast(
                    weight.data.view(torch.uint8),
                ).transpose(-1, -2)
    """) == expected
