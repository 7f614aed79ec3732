"""The text pre-filter: which rules a file's text lets run, in a project run and on its own.

Whether the skipped rules could have found anything is checked against the plain path in
``test_fast_path_equivalence``; here: the triggers that options add, and that a file no rule
needs is checked without importing libcst.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

from sync_lint.api import lint_text, make_settings
from sync_lint.pipeline.prefilter import may_match
from sync_lint.rules import all_rules
from sync_lint.rules.triggers import method_definitions

MODULE_METHOD = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Head(nn.Module):
        def decode(self, x: torch.Tensor):
            if x.any():
                return x
            return x + 1
    """
)


def rule(code: str, **options):
    (found,) = [r for r in all_rules() if r.code == code]
    return found(make_settings(**options))


def test_method_definitions_follow_the_globs():
    pattern = method_definitions(["build", "_build_*", "forward"])
    assert pattern.search("    def build(self, common):")
    assert pattern.search("    def _build_decode(self):")
    assert pattern.search("    async def forward (self, x):")
    assert not pattern.search("    def builder(self):")
    assert not pattern.search("    def rebuild(self):")
    assert not pattern.search("x = self.build(common)")
    assert method_definitions([]) is None
    assert method_definitions(["[ab]x"]).search("def anything(")  # a class: any name may match


def test_configured_hot_methods_reach_the_prefilter():
    """A hot ``nn.Module`` method named by ``hot-method-patterns``, in a file with no other
    trigger: found (it was skipped before the option's names became triggers)."""
    found = lint_text(MODULE_METHOD, unknown_device="always", hot_method_patterns=["forward", "decode"])
    assert [(d.line, d.code) for d in found] == [(7, "GPU202")]
    assert may_match(rule("GPU202", hot_method_patterns=["forward", "decode"]), MODULE_METHOD)


def test_unconfigured_method_is_not_hot():
    assert lint_text(MODULE_METHOD, unknown_device="always") == []


def test_alone_needs_a_hot_scope_for_gpu2xx():
    """On its own, a file with sync words but no hot scope has nothing for GPU201/202: only
    another file's hot caller could make its syncs findings."""
    helper = "import torch\n\ndef host_lens(t: torch.Tensor):\n    return t.tolist()\n"
    gpu201 = rule("GPU201")
    assert may_match(gpu201, helper)  # in a project: a summary other files may need
    assert not may_match(gpu201, helper, alone=True)
    builder = "class FooMetadataBuilder:\n    def build(self, common):\n        return common.seq_lens.tolist()\n"
    assert may_match(gpu201, builder, alone=True)
    assert [d.code for d in lint_text(builder)] == ["GPU201"]


def test_alone_needs_a_sink_for_gpu1xx():
    view_only = "def pick(block_table):\n    return block_table[:, 0].to(torch.int32)\n"
    gpu101 = rule("GPU101")
    assert may_match(gpu101, view_only) and not may_match(gpu101, view_only, alone=True)
    launch = view_only + "\ndef run(bt, out):\n    kernel[(1,)](pick(bt), out)\n"
    assert may_match(gpu101, launch, alone=True)


def test_alone_gate_widens_with_configured_names():
    """A configured hot function or sink name is a trigger on its own too."""
    text = "def run_step(x):\n    return x.item()\n"
    assert not may_match(rule("GPU201"), text, alone=True)
    assert may_match(rule("GPU201", hot_functions=["*run_step"]), text, alone=True)
    assert [d.code for d in lint_text(text, hot_functions=["*run_step"], unknown_device="always")] == ["GPU201"]
    sink_call = "def run(x):\n    my_ext.gather(x[:, 0])\n"
    assert not may_match(rule("GPU102"), sink_call, alone=True)
    assert may_match(rule("GPU102", contiguous_sinks=["my_ext.gather"]), sink_call, alone=True)


def test_one_file_run_without_a_trigger_does_not_import_libcst(tmp_path):
    plain = tmp_path / "plain.py"
    plain.write_text("def area(w, h):\n    return w * h\n")
    helper = tmp_path / "helper.py"  # sync words, no hot scope: nothing to find on its own
    helper.write_text("def host_lens(t):\n    return t.tolist()\n")
    for path in (plain, helper):
        assert check_alone(path) == ["0", "False"], path


def check_alone(path: Path) -> list[str]:
    """``sync-lint check`` of one file in a fresh interpreter: its exit status, and whether
    libcst was imported (most of a one-file run's time when it is)."""
    probe = (
        "import sys\n"
        "from sync_lint.cli import main\n"
        f"status = main(['check', '--no-cache', '--isolated', {str(path)!r}])\n"
        "print(status, 'libcst' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_an_alias_of_torch_ops_is_a_sink_word():
    """``alias-modules`` can make a plain-looking call a custom op: the alias is a trigger."""
    text = "from myproj import kernels\n\ndef run(x):\n    kernels.gather(x[:, 0])\n"
    aliased = {"alias_modules": {"myproj.kernels": "torch.ops.myproj"}}
    assert not may_match(rule("GPU102"), text, alone=True)
    assert may_match(rule("GPU102", **aliased), text, alone=True)
    assert [d.code for d in lint_text(text, **aliased)] == ["GPU102"]
    # the default aliases (to triton) add nothing: their files say "triton" anyway
    assert rule("GPU102").triggers == type(rule("GPU102")).triggers


def test_ops_imported_from_torch_is_a_sink_word(tmp_path):
    """``from torch import ops`` calls custom ops without ever writing "torch.ops": a file
    checked alone, and a wrapper file whose summary another file needs, must not be skipped."""
    from sync_lint.api import lint_paths

    for spelling in ("from torch import ops", "from torch import nn, ops", "from torch import (\n    nn,\n    ops,\n)"):
        text = f"{spelling}\n\n\ndef store(key, cache):\n    ops._C_cache_ops.reshape_and_cache(key[:, 0], cache)\n"
        assert may_match(rule("GPU102"), text, alone=True), spelling
        path = tmp_path / "store.py"
        path.write_text(text)
        assert [d.code for d in lint_paths([str(path)])] == ["GPU102"], spelling
    (tmp_path / "store.py").unlink()
    (tmp_path / "wrap.py").write_text("from torch import ops\n\n\ndef wrapper(key, cache):\n    ops._C.op(key, cache)\n")
    (tmp_path / "user.py").write_text("from wrap import wrapper\n\n\ndef user(key, cache):\n    wrapper(key[:, 0], cache)\n")
    assert [(Path(d.path).name, d.code) for d in lint_paths([str(tmp_path)])] == [("user.py", "GPU102")]
    # look-alikes: no custom op, or a contiguous argument
    assert not may_match(rule("GPU102"), "from torch import opset\n\ndef f(x):\n    g(x[:, 0])\n", alone=True)
    fixed = "from torch import ops\n\n\ndef store(key, cache):\n    ops._C.op(key[:, 0].contiguous(), cache)\n"
    assert lint_text(fixed) == []


def test_word_patterns_match_as_a_leading_word_boundary_would():
    from sync_lint.patterns import word

    samples = ["torch.compile(f)", "recompile()", "compile_fn", "x=compile", "graph\n", "subgraph", "def  build(", "undef build("]
    for literal, rest in (("compile", r"\b"), ("graph", r"\b"), ("def", r"\s+build\(")):
        fast = word(literal, rest)
        slow = re.compile(rf"\b{literal}{rest}")
        assert [bool(fast.search(s)) for s in samples] == [bool(slow.search(s)) for s in samples], literal


GEMM_ONLY = "import torch\n\n\ndef apply(x, w, out):\n    torch.ops._C.cutlass_scaled_mm(out, x, w.t())\n"


def test_a_file_whose_custom_ops_all_take_any_strides_is_checked_alone_without_libcst(tmp_path):
    """Its only custom ops are `strided-sinks` (by default the matrix multiplies): no GPU1xx
    rule can report in it on its own, so pre-commit's run of it parses nothing."""
    path = tmp_path / "gemm.py"
    path.write_text(GEMM_ONLY)
    assert check_alone(path) == ["0", "False"]


def test_a_custom_op_that_may_be_handed_a_view_still_needs_the_parse():
    from sync_lint.pipeline.runner import Linter

    def rules_alone(text: str, **options) -> list[str]:
        return [r.code for r in Linter(make_settings(**options)).scope_of([text]).rules if r.code.startswith("GPU1")]

    assert rules_alone(GEMM_ONLY) == []
    other_op = GEMM_ONLY + "    torch.ops._C.silu_and_mul(out, x[:, 0])\n"
    judged = GEMM_ONLY  # with the matrix multiplies judged as sinks too
    for text, options in ((other_op, {}), (judged, {"strided_sinks": []})):
        assert rules_alone(text, **options) == ["GPU101", "GPU102", "GPU103"], text
    assert [d.code for d in lint_text(other_op)] == ["GPU102"]
    assert [d.code for d in lint_text(judged, strided_sinks=[])] == ["GPU102"]
    # An op bound to a module-level name is a custom op too (``NameTable.op_aliases``): it needs
    # the parse, and reports. An op in a comment is no call: it cannot report, nor needs the parse.
    alias = GEMM_ONLY.replace("def apply", "GEMM = torch.ops._C.other\n\n\ndef apply") + "    GEMM(out, x[:, 0])\n"
    assert rules_alone(alias) == ["GPU101", "GPU102", "GPU103"]
    assert [d.code for d in lint_text(alias)] == ["GPU102"]
    comment = GEMM_ONLY + "    # torch.ops._C.silu_and_mul(out, x[:, 0]) was here\n"
    assert rules_alone(comment) == []
    assert [d.code for d in lint_text(comment)] == []
