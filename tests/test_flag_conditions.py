"""Needs that hold only where a flag parameter is false (or true).

fla's ``chunk_kda`` makes ``q`` and ``k`` contiguous itself when ``use_qk_l2norm_in_kernel=True``
(``if use_qk_l2norm_in_kernel: q = l2norm_fwd(q.contiguous())``) and hands them to its kernels as
they are otherwise; vLLM's ``bailing_moe_v3`` passes ``True`` with transposed ``q``/``k``. Such a
call is not a finding; one passing ``False``, nothing (the default), or a value the linter cannot
read still is. The summary learns this by walking the function again under each flag's truth
(``ContiguityAnalysis._flag_conditions``, ``Walker(decide=flags.deciding(...))``); the project closure carries the
condition through wrappers (``FunctionSummary.needs_unless``, ``Forward.unless``).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from sync_lint.analysis.flags import deciding
from sync_lint.analysis.flow import Walker
from sync_lint.api import lint_paths, lint_text

KERNEL = """
import torch
from vllm.triton_utils import tl, triton


@triton.jit
def _k(x_ptr, out_ptr, N: tl.constexpr):
    i = tl.program_id(0)
    tl.store(out_ptr + i, tl.load(x_ptr + i))


def l2norm(x):
    return x / x.norm(dim=-1, keepdim=True)

"""


def gpu1_lines(source: str) -> list[int]:
    found = lint_text(textwrap.dedent(source), preview=True)
    return [d.line for d in found if d.code.startswith("GPU1")]


def engine_package(tmp_path: Path, **modules: str) -> Path:
    """An ``engine`` package in ``tmp_path`` with these modules (name -> source, dedented)."""
    package = tmp_path / "engine"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, source in modules.items():
        (package / f"{name}.py").write_text(textwrap.dedent(source))
    return package


def caller_flagged(wrapper: str, call: str) -> bool:
    """Is the one call in ``caller`` (handing a transposed ``x`` to ``wrapper``) a finding?"""
    source = KERNEL + textwrap.dedent(wrapper) + f"\n\ndef caller(x, out, flag):\n    {call}\n"
    lines = gpu1_lines(source)
    call_line = source.count("\n", 0, source.index(call)) + 1
    assert set(lines) <= {call_line}, lines  # nothing else of the file is a finding
    return call_line in lines


NORMALIZING = """
def scores(q, out, use_l2norm: bool = False):
    if use_l2norm:
        q = l2norm(q.contiguous())
    _k[(4,)](q, out, N=4)
"""


@pytest.mark.parametrize(("call", "flagged"), [
    ("scores(x.t(), out, use_l2norm=True)", False),
    ("scores(x.t(), out, True)", False),  # by position
    ("scores(x.t(), out)", True),  # the default is False: `q` reaches the kernel as passed
    ("scores(x.t(), out, use_l2norm=False)", True),
    ("scores(x.t(), out, False)", True),
    ("scores(x.t(), out, use_l2norm=flag)", True),  # not known at the call
    ("scores(x.t(), out, use_l2norm=1)", True),  # only the literals True and False are read
])  # fmt: skip
def test_a_flag_that_makes_the_argument_contiguous_excuses_the_call(call, flagged):
    assert caller_flagged(NORMALIZING, call) == flagged


@pytest.mark.parametrize(("wrapper", "call", "flagged"), [
    # a flag defaulting to True: a call that does not pass it is excused
    (NORMALIZING.replace("use_l2norm: bool = False", "use_l2norm: bool = True"), "scores(x.t(), out)", False),
    # ... unless an unpacked argument may bind it
    (NORMALIZING.replace("use_l2norm: bool = False", "use_l2norm: bool = True"), "scores(x.t(), out, **flag)", True),
    (NORMALIZING.replace("use_l2norm: bool = False", "use_l2norm: bool = True"), "scores(x.t(), out, *flag)", True),
    (NORMALIZING, "scores(x.t(), out, **flag, use_l2norm=True)", False),
    # ``if not flag:``: excused where the call passes False
    ("def f(q, out, skip_copy=False):\n    if not skip_copy:\n        q = q.contiguous()\n    _k[(4,)](q, out, N=4)\n",
     "f(x.t(), out)", False),
    ("def f(q, out, skip_copy=False):\n    if not skip_copy:\n        q = q.contiguous()\n    _k[(4,)](q, out, N=4)\n",
     "f(x.t(), out, skip_copy=True)", True),
    # the copy is on the ``else`` branch
    ("def f(q, out, raw=False):\n    if raw:\n        pass\n    else:\n        q = q.contiguous()\n    _k[(4,)](q, out, N=4)\n",
     "f(x.t(), out, raw=False)", False),
    ("def f(q, out, raw=False):\n    if raw:\n        pass\n    else:\n        q = q.contiguous()\n    _k[(4,)](q, out, N=4)\n",
     "f(x.t(), out, raw=True)", True),
    # one-line suite
    ("def f(q, out, dense=False):\n    if dense: q = q.contiguous()\n    _k[(4,)](q, out, N=4)\n",
     "f(x.t(), out, dense=True)", False),
    # the flag is rebound before the test: what the call passes no longer decides it
    (("def f(q, out, dense=False):\n    dense = dense and q.shape[0] > 1\n    if dense:\n"
     "        q = q.contiguous()\n    _k[(4,)](q, out, N=4)\n"), "f(x.t(), out, dense=True)", True),
    # the argument reaches a kernel before the flag is looked at
    (("def f(q, out, dense=False):\n    _k[(4,)](q, out, N=4)\n    if dense:\n        q = q.contiguous()\n"
     "    _k[(4,)](q, out, N=4)\n"), "f(x.t(), out, dense=True)", True),
    # the copy is of another name: the flag does not change what reaches the kernel
    ("def f(q, out, dense=False):\n    if dense:\n        out = out.contiguous()\n    _k[(4,)](q, out, N=4)\n",
     "f(x.t(), out, dense=True)", True),
    # a custom op as the sink, in the same function
    ("def f(q, dense=False):\n    if dense:\n        q = q.contiguous()\n    torch.ops._C.op(q)\n",
     "f(x.t(), dense=True)", False),
    ("def f(q, dense=False):\n    if dense:\n        q = q.contiguous()\n    torch.ops._C.op(q)\n",
     "f(x.t())", True),
])  # fmt: skip
def test_which_flag_values_excuse_a_need(wrapper, call, flagged):
    assert caller_flagged(wrapper, call) == flagged


THROUGH_A_WRAPPER = NORMALIZING + """

def normalized_scores(q, out, normalize: bool = True):
    return scores(q, out, use_l2norm=normalize)


def fixed_flag(q, out):
    return scores(q, out, use_l2norm=True)


def both_ways(q, out, normalize: bool = False):
    scores(q, out, use_l2norm=normalize)  # excused where `normalize` is True
    _k[(4,)](q, out, N=4)  # never excused


def only_if_not(q, out, normalize: bool = False):
    if normalize:
        return l2norm(q.contiguous())
    return scores(q, out)  # reached only where `normalize` is False
"""


@pytest.mark.parametrize(("call", "flagged"), [
    ("normalized_scores(x.t(), out)", False),  # the wrapper's own default, True, is handed on
    ("normalized_scores(x.t(), out, normalize=True)", False),
    ("normalized_scores(x.t(), out, normalize=False)", True),
    ("fixed_flag(x.t(), out)", False),  # the wrapper passes True itself: no need at all
    ("both_ways(x.t(), out, normalize=True)", True),  # a second, unconditional need
    ("only_if_not(x.t(), out, normalize=True)", False),  # the forward happens only without the flag
    ("only_if_not(x.t(), out)", True),
])  # fmt: skip
def test_the_condition_is_carried_through_wrappers(call, flagged):
    assert caller_flagged(THROUGH_A_WRAPPER, call) == flagged


def test_the_condition_holds_across_files_as_in_vllm_bailing_moe(tmp_path: Path):
    """The shape of the vLLM case: a model file calls an imported ``chunk_kda``-like wrapper."""
    package = engine_package(tmp_path, kda=KERNEL + textwrap.dedent("""
        def chunk_kda(q, k, out, scale=None, use_qk_l2norm_in_kernel: bool = False):
            if use_qk_l2norm_in_kernel:
                q = l2norm(q.contiguous())
                k = l2norm(k.contiguous())
            _k[(4,)](q, out, N=4)
            _k[(4,)](k, out, N=4)
    """), model="""
        from engine.kda import chunk_kda


        def forward(q, k, out):
            q = q.transpose(0, 1)
            k = k.transpose(0, 1)
            chunk_kda(q=q, k=k, out=out, use_qk_l2norm_in_kernel=True)


        def forward_plain(q, k, out):
            q = q.transpose(0, 1)
            chunk_kda(q=q, k=k.transpose(0, 1), out=out)
    """)
    found = sorted((Path(d.path).name, d.line, d.code) for d in lint_paths([str(package)]))
    assert found == [("model.py", 13, "GPU102"), ("model.py", 13, "GPU102")]


# -- the walk under an assumption -----------------------------------------------------------------


class _Names:
    """A domain whose value of a name is the set of assignments that may have made it."""

    def evaluate(self, node, env):
        return frozenset({cst.Module([]).code_for_node(node)})

    def join(self, a, b):
        return a | b

    def element(self, value, index):
        return value

    def unknown(self):
        return frozenset()


def _walk(body: str, assume: dict | None) -> frozenset:
    function = cst.parse_module(textwrap.dedent(body)).body[0]
    env = {"flag": frozenset({"flag"}), "q": frozenset({"q"})}
    decide = deciding(assume, dict(env)) if assume else None
    seen: list[str] = []
    walker = Walker(_Names(), lambda node, env: seen.append(type(node).__name__), decide)
    end = walker.walk(function.body.body, env)
    return end["q"]


@pytest.mark.parametrize(("assume", "expected"), [
    (None, {"q", "a", "b"}),
    ({"flag": True}, {"a"}),
    ({"flag": False}, {"q", "b"}),
])  # fmt: skip
def test_the_walker_takes_only_the_assumed_branch(assume, expected):
    body = """
        def f(q, flag):
            if flag:
                q = a
            elif q:
                q = b
    """
    assert _walk(body, assume) == expected


def test_the_walker_ignores_an_assumption_once_the_flag_is_rebound():
    body = """
        def f(q, flag):
            flag = other
            if not flag:
                q = a
    """
    assert _walk(body, {"flag": True}) == {"q", "a"}


BACKEND_SWITCH = """
def rows(q, out, use_triton: bool = False):
    if use_triton:
        _k[(4,)](q, out, N=4)
    else:
        out.copy_(q)  # torch handles any strides
"""


@pytest.mark.parametrize(("wrapper", "call", "flagged"), [
    (BACKEND_SWITCH, "rows(x.t(), out)", False),  # the default takes the torch path
    (BACKEND_SWITCH, "rows(x.t(), out, use_triton=False)", False),
    (BACKEND_SWITCH, "rows(x.t(), out, use_triton=True)", True),
    (BACKEND_SWITCH, "rows(x.t(), out, use_triton=flag)", True),
    (BACKEND_SWITCH.replace("if use_triton:", "if not use_torch:").replace("use_triton: bool", "use_torch: bool"),
     "rows(x.t(), out, use_torch=True)", False),
    (BACKEND_SWITCH.replace("if use_triton:", "if not use_torch:").replace("use_triton: bool", "use_torch: bool"),
     "rows(x.t(), out)", True),
])  # fmt: skip
def test_a_kernel_taken_only_under_a_flag_needs_nothing_where_the_flag_rules_it_out(wrapper, call, flagged):
    assert caller_flagged(wrapper, call) == flagged


def test_a_position_past_star_args_binds_no_flag():
    """``f(x, a, True)`` hands ``True`` to ``*rest``, not to the keyword-only ``dense``."""
    wrapper = "def f(q, out, *rest, dense=False):\n    if dense:\n        q = q.contiguous()\n    _k[(4,)](q, out, N=4)\n"
    assert caller_flagged(wrapper, "f(x.t(), out, out, True)")
    assert not caller_flagged(wrapper, "f(x.t(), out, out, dense=True)")


# -- syncs under a flag, across files (in one file, ``clean_with_arguments`` binds the arguments) --

SYNC_HELPERS = """
import torch


def prepare(n, return_host: bool = False):
    out = torch.arange(n, device="cuda").cumsum(0)
    if return_host:
        return out, out.cpu()
    return out, None


def total(n, exact=True):
    x = torch.ones(n, device="cuda")
    if not exact:
        return x
    return x.sum().item()


def host_lens(n, to_host: bool = False):
    return prepare(n, return_host=to_host)


def always(n):
    return prepare(n, return_host=True)


def both(n, return_host=False):
    prepare(n, return_host=return_host)
    return torch.ones(n, device="cuda").sum().item()
"""


@pytest.mark.parametrize(("call", "flagged"), [
    ("prepare(n)", False),  # the default, False, skips the sync
    ("prepare(n, return_host=False)", False),
    ("prepare(n, False)", False),
    ("prepare(n, return_host=True)", True),
    ("prepare(n, return_host=flag)", True),
    ("prepare(n, **flag)", True),
    ("total(n, exact=False)", False),  # the branch that returns first
    ("total(n)", True),
    ("host_lens(n)", False),  # the wrapper's flag is handed on
    ("host_lens(n, to_host=True)", True),
    ("always(n)", True),  # the wrapper passes True itself
    ("both(n)", True),  # and syncs on its own too
])  # fmt: skip
def test_a_sync_under_a_flag_is_reported_only_where_the_call_sets_it(tmp_path: Path, call, flagged):
    package = engine_package(tmp_path, helpers=SYNC_HELPERS, model=f"""
        import torch
        from engine.helpers import always, both, host_lens, prepare, total


        class Model(torch.nn.Module):
            def forward(self, n, flag):
                return {call}
    """)
    found = [(Path(d.path).name, d.line) for d in lint_paths([str(package)]) if d.code.startswith("GPU2")]
    assert found == ([("model.py", 8)] if flagged else [])


@pytest.mark.parametrize("value", ["flag", "n > 2", "1", "self.normalize"])
def test_a_value_not_known_at_the_call_overrides_the_default(value):
    wrapper = NORMALIZING.replace("use_l2norm: bool = False", "use_l2norm: bool = True")
    assert caller_flagged(wrapper, f"scores(x.t(), out, use_l2norm={value})")


def test_a_rebound_flag_decides_no_sync(tmp_path: Path):
    package = engine_package(tmp_path, helpers="""
        import torch


        def prepare(n, return_host: bool = False):
            out = torch.arange(n, device="cuda")
            return_host = return_host or n > 4096
            if return_host:
                return out.cpu()
            return out
    """, model="""
        import torch
        from engine.helpers import prepare


        class Model(torch.nn.Module):
            def forward(self, n):
                return prepare(n, return_host=False)
    """)
    assert [d.line for d in lint_paths([str(package)]) if d.code == "GPU201"] == [8]


def test_only_a_flag_like_parameter_is_handed_on_as_a_flag():
    """A wrapper's parameter is taken for a flag if annotated ``bool`` or defaulting to a bool;
    handed on from any other parameter, the value is not known at the call, so it is reported."""
    wrapper = NORMALIZING + "\n\ndef typed(q, out, norm: bool):\n    scores(q, out, use_l2norm=norm)\n" \
        "\n\ndef untyped(q, out, norm):\n    scores(q, out, use_l2norm=norm)\n"
    assert not caller_flagged(wrapper, "typed(x.t(), out, True)")
    assert caller_flagged(wrapper, "untyped(x.t(), out, True)")


def test_the_message_names_the_flag_that_would_excuse_the_call(tmp_path: Path):
    source = KERNEL + NORMALIZING + "\n\ndef caller(x, out):\n    scores(x.t(), out)\n"
    (found,) = [d.message for d in lint_text(source, preview=True) if d.code == "GPU102"]
    assert found.endswith("`_k`; not so when called with `use_l2norm=True`). Add `.contiguous()`.")
    package = engine_package(tmp_path, helpers=SYNC_HELPERS, model="""
        import torch
        from engine.helpers import prepare


        class Model(torch.nn.Module):
            def forward(self, n):
                return prepare(n, return_host=True)
    """)
    (found,) = [d.message for d in lint_paths([str(package)]) if d.code == "GPU201"]
    assert found.endswith("syncs with `.cpu()` on `out` (line 8); not so when called with `return_host=False`")


@pytest.mark.parametrize(("call", "flagged"), [
    ("rows(x.t(), out, 8)", False),  # ``use_triton`` defaults to False: the kernel is never reached
    ("rows(x.t(), out, 8, use_triton=True)", True),
])  # fmt: skip
def test_a_flag_joined_with_another_test(call, flagged):
    wrapper = (
        "def rows(q, out, n, use_triton: bool = False):\n"
        "    if use_triton and n > 0:\n"
        "        _k[(4,)](q, out, N=4)\n"
        "    else:\n"
        "        out.copy_(q)\n"
    )
    assert caller_flagged(wrapper, call) == flagged


def test_the_walker_decides_a_test_joined_with_and():
    body = """
        def f(q, flag):
            if flag and q:
                q = a
    """
    assert _walk(body, {"flag": False}) == {"q"}
    assert _walk(body, {"flag": True}) == {"q", "a"}


def test_a_same_file_call_is_judged_on_the_path_its_constants_take():
    """A call whose constant takes a branch that returns does not reach the sync after it (in
    one file, ``clean_with_arguments`` walks the helper with the constants deciding its
    ``if``s; the summary's flag conditions say the same)."""
    source = textwrap.dedent("""
        import torch


        def lens(x_gpu, on_host: bool = False):
            if on_host:
                return None
            return x_gpu.tolist()


        class FlashMetadataBuilder:
            def build(self, common):
                a = lens(common.positions_gpu, on_host=True)
                b = lens(common.positions_gpu)
                return a, b
    """)
    found = [(d.line, d.code) for d in lint_text(source, preview=True) if d.code.startswith("GPU2")]
    assert found == [(14, "GPU201")]


# -- a flag tested by a conditional expression, as by an ``if`` --------------------------------

NORMALIZING_INLINE = """
def scores(q, out, use_l2norm: bool = False):
    q = l2norm(q.contiguous()) if use_l2norm else q
    _k[(4,)](q, out, N=4)
"""


@pytest.mark.parametrize(("wrapper", "call", "flagged"), [
    (NORMALIZING_INLINE, "scores(x.t(), out, use_l2norm=True)", False),
    (NORMALIZING_INLINE, "scores(x.t(), out, True)", False),
    (NORMALIZING_INLINE, "scores(x.t(), out)", True),  # the default takes the branch that keeps `q`
    (NORMALIZING_INLINE, "scores(x.t(), out, use_l2norm=flag)", True),
    # the branches the other way round, under ``not``
    (NORMALIZING_INLINE.replace("l2norm(q.contiguous()) if use_l2norm else q", "q if not use_l2norm else q.contiguous()"),
     "scores(x.t(), out, use_l2norm=True)", False),
    (NORMALIZING_INLINE.replace("l2norm(q.contiguous()) if use_l2norm else q", "q if not use_l2norm else q.contiguous()"),
     "scores(x.t(), out)", True),
    # the conditional expression handed straight to the kernel
    ("def f(q, out, dense=False):\n    _k[(4,)](q.contiguous() if dense else q, out, N=4)\n", "f(x.t(), out, dense=True)", False),
    ("def f(q, out, dense=False):\n    _k[(4,)](q.contiguous() if dense else q, out, N=4)\n", "f(x.t(), out)", True),
    # ... or to a custom op
    ("def f(q, dense=False):\n    torch.ops._C.op(q.contiguous() if dense else q)\n", "f(x.t(), dense=True)", False),
    ("def f(q, dense=False):\n    torch.ops._C.op(q.contiguous() if dense else q)\n", "f(x.t())", True),
    # a flag joined with another test: a flag-like parameter is assumed both ways
    ("def f(q, out, n, dense: bool = False):\n    q = q.contiguous() if dense or n > 8 else q\n    _k[(4,)](q, out, N=4)\n",
     "f(x.t(), out, 4, dense=True)", False),
    ("def f(q, out, n, dense: bool = False):\n    q = q.contiguous() if dense or n > 8 else q\n    _k[(4,)](q, out, N=4)\n",
     "f(x.t(), out, 4)", True),
    # a test of no flag decides nothing: the kernel may get the view
    ("def f(q, out):\n    q = q.contiguous() if q.shape[0] > 1 else q\n    _k[(4,)](q, out, N=4)\n", "f(x.t(), out)", True),
    # the flag picks between two other names: `q` reaches the kernel as passed either way
    ("def f(q, out, a, b, dense=False):\n    out = a if dense else b\n    _k[(4,)](q, out, N=4)\n",
     "f(x.t(), out, out, out, dense=True)", True),
    # the flag is rebound first: the call's value no longer decides it
    (("def f(q, out, dense=False):\n    dense = dense and q.shape[0] > 1\n    q = q.contiguous() if dense else q\n"
      "    _k[(4,)](q, out, N=4)\n"), "f(x.t(), out, dense=True)", True),
])  # fmt: skip
def test_a_flag_tested_by_a_conditional_expression_excuses_the_call(wrapper, call, flagged):
    assert caller_flagged(wrapper, call) == flagged


def test_the_excuse_is_carried_through_a_wrapper_of_a_conditional_expression():
    wrapper = NORMALIZING_INLINE + "\n\ndef normalized(q, out, normalize: bool = True):\n" \
        "    return scores(q, out, use_l2norm=normalize)\n"
    assert not caller_flagged(wrapper, "normalized(x.t(), out)")
    assert caller_flagged(wrapper, "normalized(x.t(), out, normalize=False)")


CONDITIONAL_SYNC_HELPERS = """
import torch


def prepare(n, return_host: bool = False):
    out = torch.arange(n, device="cuda").cumsum(0)
    return out, (out.cpu() if return_host else None)


def total(n, exact=True):
    x = torch.ones(n, device="cuda")
    return x.sum().item() if exact else x
"""


@pytest.mark.parametrize(("call", "flagged"), [
    ("prepare(n)", False),
    ("prepare(n, return_host=True)", True),
    ("prepare(n, return_host=flag)", True),
    ("total(n, exact=False)", False),
    ("total(n)", True),
])  # fmt: skip
def test_a_sync_in_a_conditional_expression_under_a_flag(tmp_path: Path, call, flagged):
    """Across files the summary's flag conditions decide; in the same file, the walk of the
    callee with the call's constants (``clean_with_arguments``, ``flags.decides_any``)."""
    model = textwrap.dedent(f"""
        import torch
        from engine.helpers import prepare, total


        class Model(torch.nn.Module):
            def forward(self, n, flag):
                return {call}
    """)
    package = engine_package(tmp_path, helpers=CONDITIONAL_SYNC_HELPERS, model=model)
    found = [(Path(d.path).name, d.line) for d in lint_paths([str(package)]) if d.code.startswith("GPU2")]
    assert found == ([("model.py", 8)] if flagged else [])
    same_file = CONDITIONAL_SYNC_HELPERS + model.replace("from engine.helpers import prepare, total\n", "")
    found_here = [d.line for d in lint_text(same_file, preview=True) if d.code.startswith("GPU2")]
    assert found_here == ([same_file.count("\n", 0, same_file.index(call)) + 1] if flagged else [])


def test_a_walk_without_an_assumption_evaluates_both_branches():
    """No oracle, or one that does not decide the test: a conditional expression joins both."""
    from sync_lint.analysis.flow import decided_branch

    node = cst.parse_expression("a if flag else b")
    assert decided_branch(node, None, {}) is None
    assert decided_branch(node, deciding({"other": True}), {}) is None
    assert decided_branch(node, deciding({"flag": True}), {}).value == "a"
    assert decided_branch(node, deciding({"flag": False}), {}).value == "b"


# -- a sync that only a ``None`` argument reaches (SGLang ``prepare_vision_attention_metadata``) --

NONE_TESTED_HELPERS = """
import torch


def prepare(cu_seqlens, device, *, max_seqlen=None):
    cu_seqlens = cu_seqlens.to(device=device, dtype=torch.int32, non_blocking=True)
    seq_lens = cu_seqlens[1:] - cu_seqlens[:-1]
    if max_seqlen is None:
        max_seqlen = int(seq_lens.max().item())
    return cu_seqlens, max_seqlen


def resolve(cu_seqlens, max_seqlen=None):
    cu_seqlens = cu_seqlens.cuda()
    if max_seqlen is not None:
        return max_seqlen
    return int((cu_seqlens[1:] - cu_seqlens[:-1]).max().item())


def inline(cu_seqlens, max_seqlen=None):
    cu_seqlens = cu_seqlens.cuda()
    max_seqlen = int(cu_seqlens.max().item()) if max_seqlen is None else max_seqlen
    return max_seqlen


def rebound(cu_seqlens, max_seqlen=None):
    cu_seqlens = cu_seqlens.cuda()
    max_seqlen = max_seqlen or None
    if max_seqlen is None:
        max_seqlen = int(cu_seqlens.max().item())
    return max_seqlen


def truthy(cu_seqlens, max_seqlen=None):
    cu_seqlens = cu_seqlens.cuda()
    if not max_seqlen:
        max_seqlen = int(cu_seqlens.max().item())
    return max_seqlen


def relay(cu_seqlens, device, max_seqlen=None):
    return prepare(cu_seqlens, device, max_seqlen=max_seqlen)


def relay_rebound(cu_seqlens, device, max_seqlen=None):
    max_seqlen = max_seqlen or None
    return prepare(cu_seqlens, device, max_seqlen=max_seqlen)
"""


@pytest.mark.parametrize(("call", "flagged"), [
    ("prepare(cu, x.device)", True),  # left out: the default, None, takes the syncing branch
    ("prepare(cu, x.device, max_seqlen=None)", True),
    ("prepare(cu, x.device, max_seqlen=maybe)", True),  # a parameter that may be None
    ("prepare(cu, x.device, max_seqlen=self.max_seqlen)", True),  # nothing known of an attribute
    ("prepare(cu, x.device, max_seqlen=x.shape[0])", False),
    ("prepare(cu, x.device, max_seqlen=4096)", False),
    ("prepare(cu, x.device, max_seqlen=given)", False),  # annotated `int`
    ("prepare(cu, x.device, max_seqlen=host_max)", False),  # a local assigned `int(...)` only
    ("prepare(cu, x.device, max_seqlen=either)", True),  # a local assigned `None` on one path
    ("prepare(cu, x.device, max_seqlen=max(lens) if lens else 0)", False),
    ("prepare(cu, x.device, max_seqlen=max(lens) if lens else None)", True),
    ("resolve(cu, 5)", False),  # `if max_seqlen is not None: return max_seqlen`
    ("resolve(cu)", True),
    ("inline(cu, max_seqlen=host_max)", False),  # `... if max_seqlen is None else max_seqlen`
    ("inline(cu)", True),
    ("rebound(cu, 5)", True),  # rebound before the test: the call's value no longer decides it
    ("truthy(cu, 5)", True),  # `if not max_seqlen:` is no `None` test (0 takes the branch too)
    # A wrapper that hands its own `None`-defaulting parameter on: its callers decide.
    ("relay(cu, x.device, max_seqlen=4096)", False),
    ("relay(cu, x.device, host_max)", False),
    ("relay(cu, x.device)", True),
    ("relay(cu, x.device, max_seqlen=maybe)", True),
    ("relay_rebound(cu, x.device, 4096)", True),  # rebound before it is handed on
])  # fmt: skip
def test_a_sync_only_a_none_argument_reaches(tmp_path: Path, call, flagged):
    package = engine_package(tmp_path, helpers=NONE_TESTED_HELPERS, model=f"""
        import torch
        from engine.helpers import inline, prepare, rebound, relay, relay_rebound, resolve, truthy


        class Model(torch.nn.Module):
            def forward(self, x, cu, lens: list, given: int, maybe=None):
                host_max = int(max(lens))
                either = host_max if lens else None
                return {call}
    """)
    found = [(Path(d.path).name, d.line) for d in lint_paths([str(package)]) if d.code.startswith("GPU2")]
    assert found == ([("model.py", 10)] if flagged else [])


def test_a_none_argument_excuse_is_told_and_carried_through_a_same_file_wrapper():
    """The message says how the call could avoid the sync; a summarised wrapper that passes a
    value certainly not None (SGLang muse_spark's ``_build_vision_attention_metadata``) is no
    sync, one that passes nothing still is."""
    source = NONE_TESTED_HELPERS + textwrap.dedent("""

        def build(cu, device, lengths):
            return prepare(cu, device, max_seqlen=max(lengths) if lengths else 0)


        def build_plain(cu, device):
            return prepare(cu, device)


        class Model(torch.nn.Module):
            def forward(self, x, cu, lens: list):
                a = build(cu, x.device, lens)
                b = build_plain(cu, x.device)
                c = prepare(cu, x.device)
                return a, b, c
    """)
    lines = source.splitlines()

    def line_of(text: str) -> int:
        return next(number for number, line in enumerate(lines, 1) if line.strip().startswith(text))

    found = {d.line: d.message for d in lint_text(source, preview=True) if d.code.startswith("GPU2")}
    plain, direct = line_of("b = build_plain("), line_of("c = prepare(")
    synced, called = line_of("max_seqlen = int(seq_lens"), line_of("return prepare(cu, device)")
    assert sorted(found) == [plain, direct]
    assert found[plain].endswith(f"`build_plain()` calls `prepare` (line {called}), which syncs with `.item()` on "
                                 f"`seq_lens.max()` (line {synced})")
    assert found[direct].endswith(f"syncs with `.item()` on `seq_lens.max()` (line {synced}); not so when called "
                                  "with `max_seqlen` other than None")


def test_a_not_none_binding_decides_only_none_tests():
    from sync_lint.analysis.flags import truth
    from sync_lint.analysis.summaries import NOT_NONE

    bound = {"n": NOT_NONE}
    assert truth(cst.parse_expression("n is None"), bound) is False
    assert truth(cst.parse_expression("n is not None"), bound) is True
    assert truth(cst.parse_expression("not (n is None)"), bound) is True
    for unknown in ("n", "not n", "n == 0", "n > 4", "n is True", "n is not False", "n == None"):
        assert truth(cst.parse_expression(unknown), bound) is None, unknown


@pytest.mark.parametrize(("expression", "certain"), [
    ("x.shape[0]", True), ("x.shape", True), ("x.size(0)", True), ("t.numel()", True), ("int(t)", True),
    ("len(xs)", True), ("n + 1", True), ("-n", True), ("0", True), ("'auto'", True), ("False", True),
    ("[1, 2]", True), ("a or 4", True), ("max(xs) if xs else 0", True), ("host", True),
    ("None", False), ("x", False), ("a and 4", False), ("a or b", False), ("f(x)", False),
    ("self.n", False), ("d.get('n')", False), ("x[0]", False), ("max(xs) if xs else None", False),
])  # fmt: skip
def test_which_arguments_are_certainly_not_none(expression, certain):
    from sync_lint.analysis.flags import not_none

    assert not_none(cst.parse_expression(expression), lambda name: name == "host") is certain
