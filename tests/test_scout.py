"""The syntax scout (``pipeline.scout``): "no" only where the analysis it stands in for is sure to
find nothing, "may" for everything that could be a hot scope or a sink."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sync_lint.api import make_settings
from sync_lint.pipeline.runner import Linter
from sync_lint.pipeline.scout import Scout
from sync_lint.pipeline.scout import sinks as sinks_scout
from sync_lint.pipeline.scout import syncs as syncs_scout
from sync_lint.rules import all_rules

SETTINGS = make_settings()
ROOT = Path(__file__).resolve().parent.parent

# (source, may have a hot scope, may call a sink)
CASES = {
    # Engine code the text gate keeps: hot-method names, `](`, `.view(`.
    "generic constructors and shape views": (
        "x = list[str]()\ny = dict[str, int]()\nz = a.view(-1, 4)\nw = a.view(n)\n", False, False),
    "a cold class with a builder-named method": ("class Scheduler:\n    def _build_batch(self): pass\n", False, False),
    "forward of a plain class": ("class Request:\n    def forward(self, x): return x.item()\n", False, False),
    # Over-approximated: any module-level call of a `compile`.
    "re.compile at module level": ("import re\npattern = re.compile('x')\n", True, False),
    # Hot scopes, through every spelling the analysis resolves.
    "nn.Module via from-import": ("from torch import nn\nclass M(nn.Module):\n    def forward(self, x): pass\n", True, False),
    "nn.Module via aliased module": ("import torch.nn as tnn\nclass M(tnn.Module):\n    def forward(self, x): pass\n", True, False),
    "module of a module of this file": (
        "import torch\nclass A(torch.nn.Module): pass\nclass B(A):\n    def forward(self): pass\n", True, False),
    "support_torch_compile": (
        ("from vllm.compilation.decorators import support_torch_compile\n"
        "@support_torch_compile\nclass Model:\n    def forward(self, x): pass\n"), True, False),
    "builder base via alias": ("from m import FlashMetadataBuilder as B\nclass X(B):\n    def build(self): pass\n", True, False),
    "builder subscripted base": (
        "from m import AttentionMetadataBuilder\nclass X(AttentionMetadataBuilder[M]):\n    def build(self): pass\n",
        True, False),
    "builder by own name, nested method": (
        "class FooMetadataBuilder:\n    def helper(self):\n        def build(): pass\n", True, False),
    "decorated with compile(...)": ("import torch\n@torch.compile(mode='x')\ndef f(x): pass\n", True, False),
    "decorated with aliased compile": ("from torch import compile as c\n@c\ndef f(x): pass\n", True, False),
    "compiled by a module-level call": ("import torch\ndef f(x): pass\ng = torch.compile(f)\n", True, False),
    "graph block": ("import torch\ndef f():\n    with torch.cuda.graph(g):\n        pass\n", True, False),
    "async graph block": ("from torch.cuda import graph\nasync def f():\n    async with graph(g):\n        pass\n", True, False),
    # Sinks a one-file run can report at: a kernel or a checked wrapper of this file, `.view(dtype)`.
    "a launch of this file's kernel": (
        "import triton\n@triton.jit\ndef kern(p):\n    pass\n\ndef run(x):\n    kern[(1,)](x[:, 0])\n", False, True),
    "a call of this file's checked wrapper": (
        "def wrapper(x):\n    assert x.is_contiguous()\n\ndef user(t):\n    wrapper(t[:, 0])\n", False, True),
    "a method call of this class's checked method": (
        ("class A:\n    def run(self, x):\n        assert x.stride(-1) == 1\n"
        "    def step(self, t):\n        self.run(t.T)\n"), False, True),
    "view(torch dtype)": ("import torch\ny = x[:, 0].view(torch.int8)\n", False, True),
    "view(dtype=...)": ("import torch\ny = x.t().view(dtype=torch.float8_e4m3fn)\n", False, True),
    "view of a from-imported dtype": ("from torch import int8 as i8\ny = x[..., 1].view(i8)\n", False, True),
    "view of a legacy dtype name": ("import torch\ny = x.mT.view(torch.long)\n", False, True),
    # ... and look-alikes it cannot: summaries of other files are not at hand.
    "a launch of an imported kernel": ("from k import kern\nkern[(1,)](x)\n", False, False),
    "a check nothing here calls": ("def wrapper(x):\n    assert x.is_contiguous()\n    return x\n", False, False),
    "a call of a function whose only launch is a generic's constructor": (
        "def helper(x):\n    return list[int]()\n\ndef user(t):\n    return helper(t[:, 0])\n", False, False),
    "a call of a function that launches an imported kernel": (
        "import k\ndef helper(x):\n    k.kern[(1,)](x)\n\ndef user(t):\n    helper(t[:, 0])\n", False, False),
    "a call of a function that launches this file's kernel": (
        ("import triton\nimport triton.language as tl\n@triton.jit\ndef kern(p):\n    tl.load(p + tl.arange(0, 4))\n"
         "def helper(x):\n    kern[(1,)](x)\n\ndef user(t):\n    helper(t[:, 0])\n"), False, True),
    "a call that binds only what the function does not need": (
        ("import torch\ndef helper(x, n):\n    torch.ops._C.op(x)\n    return n[0]\n\n"
         "def user(t, n):\n    helper(t, n[:, 0])\n    helper(n=t[:, 0], x=t)\n"), False, False),
    "a call that binds a needed parameter by keyword or through self": (
        ("import torch\nclass A:\n    def helper(self, x, n):\n        y = x\n        torch.ops._C.op(y)\n\n"
         "    def user(self, t):\n        self.helper(t[:, 0], 1)\n"), False, True),

    "a call of a jit-decorated kernel without sink words": (
        "from triton import jit\n@jit\ndef kern(p):\n    pass\n\ndef user(t):\n    kern[(1,)](t.T)\n", False, True),
    "a call of a function without sink words": (
        "def helper(x):\n    return x + 1\n\ndef user(t):\n    return helper(t[:, 0]).view(-1, 2)\n", False, False),
    # A sink reports only what may be a view or a cast when it gets there: how it got there.
    "a custom op handed a transpose": ("import torch\ndef f(x):\n    torch.ops._C.op(x.t())\n", False, True),
    "a custom op through `from torch import ops`": (
        "from torch import ops\ndef f(x):\n    ops._C.op(out=x[:, 0])\n", False, True),
    "a custom op handed a cast of a parameter": (
        "import torch\ndef f(x):\n    torch.ops._C.op(x.to(torch.int32))\n", False, True),
    "a custom op handed a local bound to a view": (
        "import torch\ndef f(x):\n    y = x[:, 0]\n    z = y + 0 if x else y\n    torch.ops._C.op(z)\n", False, True),
    "a custom op handed an unpacked view": (
        "import torch\ndef f(x):\n    a, (b, c) = x, (x.T, x)\n    torch.ops._C.op(b)\n", False, True),
    "a custom op handed a loop variable over views": (
        "import torch\ndef f(xs):\n    for k in [x.t() for x in xs]:\n        torch.ops._C.op(k)\n", False, True),
    "a custom op handed an attribute another method sets to a view": (
        ("import torch\nclass A:\n    def __init__(self, bt):\n        self.col = bt[:, 0]\n"
         "    def run(self):\n        torch.ops._C.op(self.col)\n"), False, True),
    "a raw address of a view": ("def f(x, enc):\n    enc(x.T.data_ptr())\n", False, True),
    "a wrapper of a checked wrapper": (
        ("def a(x):\n    assert x.is_contiguous()\n\ndef b(y):\n    return a(y)\n\n"
         "def c(t):\n    b(t[:, 0])\n"), False, True),
    # A Triton kernel's body holds no sink uses (the analysis only summarises it), so the
    # broadcasts and calls of jit helpers there are not a caller's views.
    "a jit helper called in a kernel": (
        ("import triton\n@triton.jit\ndef helper(p):\n    pass\n\n@triton.jit\ndef kern(x):\n"
         "    helper(x[:, 0])\n"), False, False),
    "a jit helper called in a kernel of a re-exported triton": (
        ("from vllm.triton_utils import triton\n@triton.jit\ndef helper(p):\n    pass\n\n@triton.jit\n"
         "def kern(x):\n    helper(x[:, 0])\n"), False, False),
    "a jit helper called under another jit": (
        ("import triton\nfrom numba import jit\n@triton.jit\ndef helper(p):\n    pass\n\n@jit\n"
         "def kern(x):\n    helper(x[:, 0])\n"), False, True),
    "a jit helper called under a relatively imported triton": (
        ("from .compat import triton\n@triton.jit\ndef helper(p):\n    pass\n\n@triton.jit\n"
         "def kern(x):\n    helper(x[:, 0])\n"), False, True),
    "a method whose sink reads only its instance's state": (
        ("import torch\nclass A:\n    def helper(self, x):\n        torch.ops._C.op(self.buf)\n        return x\n\n"
         "    def user(self, t):\n        self.helper(t[:, 0])\n"), False, False),
    "a static method whose first parameter reaches a sink": (
        ("import torch\nclass A:\n    @staticmethod\n    def helper(x):\n        torch.ops._C.op(x)\n\n"
         "    def user(self, t):\n        A.helper(t[:, 0])\n"), False, True),
    "a class whose __init__ hands its argument to a custom op": (
        ("import torch\nclass A:\n    def __init__(self, x):\n        torch.ops._C.op(x)\n\n"
         "def f(t):\n    return A(t[:, 0])\n"), False, True),
    "a class that only keeps its argument": (
        ("import torch\nclass B:\n    def __init__(self, x):\n        self.x = x\n\n    def run(self, y):\n"
         "        torch.ops._C.op(y)\n\ndef f(t):\n    return B(t[:, 0])\n"), False, False),
    # ... and engine code that hands its sinks tensors as they came (vLLM's XPU MXFP4 kernel).
    "a custom op handed parameters, attributes and other calls' results": (
        ("import torch\nfrom q import quant\ndef apply(layer, x, bias):\n    x_q, x_s = quant(x)\n"
         "    w = layer.weight.view(torch.float8_e4m3fn)\n"
         "    return torch.ops._xpu_C.gemm(x_q, w, x_s, layer.weight_scale, x.dtype, bias)\n"), False, False),
    "a view that no sink gets": (
        ("import torch\ndef f(layer, x):\n    s = layer.s.t().contiguous()\n    keep(layer, s)\n"
         "    torch.ops._C.op(x, layer.w)\n"), False, False),
    "a local of another function": (
        "import torch\ndef f(x):\n    y = x.t()\n    return y\n\ndef g(y):\n    torch.ops._C.op(y)\n", False, False),
    "a shape slice": ("import torch\ndef f(x):\n    torch.ops._C.op(x, x.shape[1:])\n", False, False),
    "a raw address of a parameter": ("def f(x, enc):\n    enc(x.data_ptr())\n", False, False),
    "a strided-sink op handed a transpose": (
        "import torch\ndef f(a, b):\n    torch.ops._C.cutlass_scaled_mm(a, b.t())\n", False, False),
    "a launch of this file's kernel handed parameters": (
        "import triton\n@triton.jit\ndef kern(p):\n    pass\n\ndef run(x, n):\n    kern[(n,)](x, n)\n", False, False),
    "view(dtype) of a parameter": ("import torch\ndef f(x):\n    return x.view(torch.int8)\n", False, False),
    # When it cannot tell, "may".
    "a syntax error": ("def (:\n", True, True),
    "a null byte": ("x = 1\0\n", True, True),
}


@pytest.mark.parametrize("name", CASES)
def test_scout_answers(name):
    text, hot, sink = CASES[name]
    scout = Scout(text, SETTINGS)
    assert (scout.may_have_hot_scope(), scout.may_report_at_a_sink()) == (hot, sink)


# (text, ``contiguous-sinks``, whether the scout may report at a sink, whether the analysis does)
CONFIGURED_SINKS = {
    "a view to an imported sink": ("from k.ops import attend\ndef f(x):\n    attend(x.t())\n", ["k.ops.attend"], True, True),
    "through its module": ("from k import ops\ndef f(x):\n    ops.attend(x[:, 0])\n", ["k.ops.attend"], True, True),
    "renamed on import": ("from k.ops import attend as run\ndef f(x):\n    run(x.t())\n", ["k.ops.attend"], True, True),
    "a glob before the last name": ("from k.ops import attend\ndef f(x):\n    attend(x.t())\n", ["k.*.attend"], True, True),
    "defined here": ("def attend(x):\n    pass\ndef f(x):\n    attend(x.t())\n", ["*.attend"], True, True),
    "a wrapper here": (
        "from k.ops import attend\ndef wrap(y):\n    attend(y)\ndef f(x):\n    wrap(x.t())\n", ["k.ops.attend"], True, True,
    ),
    "only a parameter handed": ("from k.ops import attend\ndef f(x):\n    attend(x)\n", ["k.ops.attend"], False, False),
    "another callee": ("from k.ops import other\ndef f(x):\n    other(x.t())\n", ["k.ops.attend"], False, False),
    "a glob in the last name": ("from k.ops import other\ndef f(x):\n    other(x)\n", ["k.ops.att*"], True, False),
    "a bracket": ("from k.ops import other\ndef f(x):\n    other(x)\n", ["k.ops[.]attend"], True, False),
}


@pytest.mark.parametrize("name", CONFIGURED_SINKS)
def test_contiguous_sinks_are_sinks_to_the_scout(name):
    """A callee ``contiguous-sinks`` may name is a sink to the scout, as a custom op is: by its
    last name, which resolution keeps (a glob's last part that is not literal: any callee)."""
    from sync_lint.api import lint_text

    text, globs, may, reported = CONFIGURED_SINKS[name]
    assert Scout(text, make_settings(contiguous_sinks=globs)).may_report_at_a_sink() == may
    assert bool(lint_text(text, select=["GPU1"], contiguous_sinks=globs)) == reported
    assert not Scout(text, SETTINGS).may_report_at_a_sink()


def test_hot_functions_option_means_may_without_a_module_name():
    scout = Scout("def step(x): pass\n", make_settings(hot_functions=["pkg.other.step"]))
    assert scout.may_have_hot_scope()
    assert scout.may_sync_in_a_hot_scope()
    assert scout.hot_units() is None


NAMED_HOT = """
class Runner:
    def step(self, x):
        pass

    def load(self, x):
        pass

def outer(x):
    def inner_decode(y):
        pass
    try:
        pass
    except ValueError:
        def in_a_handler():
            pass
    return inner_decode(x)

def helper(x):
    class Local:
        def step(self):
            pass
    return x
"""


@pytest.mark.parametrize("globs, units", [
    (["pkg.mod.Runner.step"], {("Runner", "step")}),
    (["pkg.mod.*.step"], {("Runner", "step"), (None, "helper")}),  # ``pkg.mod.helper.Local.step`` too
    (["pkg.mod.outer.inner_*"], {(None, "outer")}),
    (["pkg.mod.outer.in_a_handler"], {(None, "outer")}),
    (["pkg.mod.Runner.st?p", "pkg.mod.[h]elper"], {("Runner", "step"), (None, "helper")}),
    (["pkg.other.Runner.step", "pkg.mod.Runner", "mod.Runner.step"], set()),
])
def test_hot_functions_are_matched_under_the_module_name(globs, units):
    settings = make_settings(hot_functions=globs)
    scout = Scout(NAMED_HOT, settings, module_name="pkg.mod")
    assert scout.hot_units() == units
    assert scout.may_have_hot_scope() == bool(units)


def test_a_named_hot_function_outside_every_unit_cannot_be_placed():
    text = "import torch\nif torch.cuda.is_available():\n    def step(x):\n        pass\n"
    scout = Scout(text, make_settings(hot_functions=["pkg.mod.step"]), module_name="pkg.mod")
    assert scout.may_have_hot_scope()
    assert scout.hot_units() is None


def test_the_scout_names_every_function_as_the_analysis_does():
    """``qualified_functions`` must name each function ``analysis.functions`` collects, with its
    line, or a ``hot-functions`` glob could make a function hot that the scout let be masked."""
    import ast

    import libcst as cst

    from sync_lint.analysis.functions import module_functions
    from sync_lint.analysis.names import NameTable
    from sync_lint.pipeline.scout.hot import qualified_functions

    root = Path(__file__).resolve().parents[1]
    paths = [*sorted((root / "fixtures").rglob("*.py")), *sorted((root / "sync_lint").rglob("*.py")),
             *sorted((root / "reference_kernels").rglob("*.py"))]
    compared = 0
    for path in paths:
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        module = cst.parse_module(text)
        by_scout = {(name, node.lineno) for name, node in qualified_functions(tree.body, "m")}
        wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
        lines = wrapper.resolve(cst.metadata.PositionProvider)
        for info in module_functions(module, NameTable(module, "m", {})):
            assert (info.qualname, lines[info.node.name].start.line) in by_scout, (path, info.qualname)
            compared += 1
    assert compared > 1000, compared


def test_configured_patterns_are_used():
    text = "class Planner:\n    def plan(self): pass\n"
    assert not Scout(text, SETTINGS).may_have_hot_scope()
    configured = make_settings(hot_class_patterns=["Planner"], hot_method_patterns=["plan"])
    assert Scout(text, configured).may_have_hot_scope()


def test_alias_modules_rename_what_the_scout_sees():
    # ``mm.Base`` stands for a builder through alias-modules: the class is hot.
    text = "import mm\nclass X(mm.Base):\n    def build(self): pass\n"
    assert not Scout(text, SETTINGS).may_have_hot_scope()
    assert Scout(text, make_settings(alias_modules={"mm.Base": "vllm.FlashMetadataBuilder"})).may_have_hot_scope()


def test_a_custom_op_through_alias_modules_is_a_sink():
    """A shim that ``alias-modules`` maps onto ``torch.ops`` makes its calls custom ops; a map
    onto anything else (the default Triton shims) cannot."""
    from sync_lint.api import lint_text

    text = "from vllm import shim\ndef f(x):\n    shim.op(x.t())\n"
    assert not Scout(text, SETTINGS).may_report_at_a_sink()
    assert Scout(text, make_settings(alias_modules={"vllm.shim": "torch.ops._C"})).may_report_at_a_sink()
    assert lint_text(text, alias_modules={"vllm.shim": "torch.ops._C"}), "the analysis reports it too"


# (module text, the aliases ``NameTable`` reads from it)
OP_ALIASES = {
    "namespace": ("import torch\n_C = torch.ops._C\n", {"_C": "torch.ops._C"}),
    "through an import": ("from torch import ops\nflash = ops._flashmla_C\n", {"flash": "torch.ops._flashmla_C"}),
    "an op through an alias": (
        "import torch\n_ops = torch.ops.deep_gemm\ngemm = _ops.fp8_gemm_nt\n",
        {"_ops": "torch.ops.deep_gemm", "gemm": "torch.ops.deep_gemm.fp8_gemm_nt"},
    ),
    "bound twice": ("import torch\n_C = torch.ops._C\nif X:\n    _C = None\n", {}),
    "bound again by a loop": ("import torch\nfor _C in ():\n    pass\n_C = torch.ops._C\n", {}),
    "also defined": ("import torch\n_C = torch.ops._C\ndef _C(): pass\n", {}),
    "under a block": ("import torch\nif HAS_OPS:\n    _C = torch.ops._C\n", {}),
    "no torch.ops": ("import torch\nF = torch.nn.functional\nops = my.ops._C\n", {}),
    "in a function": ("import torch\ndef f():\n    _C = torch.ops._C\n", {}),
}


@pytest.mark.parametrize("name", OP_ALIASES)
def test_module_level_aliases_of_torch_ops(name):
    """``NameTable`` reads a name bound once, at the top of a module, to a ``torch.ops`` chain as
    that chain; the scout's ``FileNames`` answers every such meaning (more, never fewer)."""
    import ast

    import libcst as cst

    from sync_lint.analysis.names import NameTable
    from sync_lint.pipeline.scout.syntax import FileNames

    text, expected = OP_ALIASES[name]
    assert NameTable(cst.parse_module(text), "pkg.mod", {}).op_aliases == expected
    scouted = FileNames(ast.parse(text), SETTINGS).op_aliases
    for alias, target in expected.items():
        assert target in scouted.get(alias, set()), (alias, scouted)


def test_a_custom_op_through_a_module_level_alias_is_a_sink():
    """A view handed to a custom op through an alias of its namespace reports, as it would
    written out; a parameter or a local of the same name hides the alias, and PyTorch's own
    operators (``aten``) take any strides."""
    from sync_lint.api import lint_text

    head = "import torch\n_C = torch.ops._C\naten = torch.ops.aten\n"
    reported = head + "def f(x, out):\n    _C.silu(out, x.t())\n"
    assert Scout(reported, SETTINGS).may_report_at_a_sink()
    assert [d.code for d in lint_text(reported)] == ["GPU102"]
    for body in ("def f(x, out, _C):\n    _C.silu(out, x.t())\n",
                 "def f(x, out):\n    _C = make()\n    _C.silu(out, x.t())\n",
                 "def f(x, out):\n    aten.silu(out, x.t())\n"):
        assert not lint_text(head + body), body


def test_every_reporting_example_is_a_may():
    """Each rule example that reports (``Rule.invalid``) must pass the scout questions its rule
    is gated by: the scout may never drop a real finding."""
    for rule_class in all_rules():
        rule = rule_class(SETTINGS)
        for example in rule.invalid:
            scout = Scout(example, SETTINGS)
            if rule.reports_only_in_hot_scopes:
                assert scout.may_have_hot_scope(), (rule.code, example)
                if rule.own_site_words is None:  # GPU205 asks only for a hot scope
                    assert scout.may_sync_in_a_hot_scope(), (rule.code, example)
            if rule.reports_only_at_sinks:
                assert scout.may_report_at_a_sink(), (rule.code, example)


def test_the_scout_imports_no_libcst():
    """Its point is to answer before (and instead of) the libcst import and parse."""
    code = (
        "import sys\nfrom sync_lint.api import make_settings\nfrom sync_lint.pipeline.scout import Scout\n"
        "Scout('class A:\\n    def forward(self): pass\\n', make_settings()).may_have_hot_scope()\n"
        "print('libcst' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_scout_has_no_say_in_a_run_of_several_files():
    """Alone, a file that only defines a checked wrapper cannot report; with the file that calls
    the wrapper it can, through the summary it records (the scout reads one file only)."""
    from sync_lint.pipeline.prefilter import rules_that_can_report

    rules = [rule_class(SETTINGS) for rule_class in all_rules()]
    boundary = "def wrapper(x, y):\n    assert x.is_contiguous()\n    return y\n"
    caller = "from boundary import wrapper\n\n\ndef f(bt):\n    return wrapper(bt.t(), bt[:, 0])\n"
    alone = {rule.code for rule in rules_that_can_report(rules, [boundary], SETTINGS)}
    together = {rule.code for rule in rules_that_can_report(rules, [boundary, caller], SETTINGS)}
    assert "GPU102" not in alone
    assert "GPU102" in together


MODULE_HEAD = "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n"
# (source, may a hot-scope rule report in it alone)
HOT_SYNC_CASES = {
    # A sync reported in a forward needs a tensor known to be on the GPU.
    "a parameter's item": (MODULE_HEAD + "    def forward(self, x):\n        return x.sum().item()\n", False),
    "a docstring that speaks of the GPU": (
        MODULE_HEAD + '    def forward(self, x):\n        """Runs on the GPU device."""\n        return int(x)\n', False),
    "a helper without a device": (
        MODULE_HEAD + "    def forward(self, x):\n        return helper(x)\n\n\ndef helper(t):\n    return t.tolist()\n", False),
    "a tensor moved to the GPU": (MODULE_HEAD + "    def forward(self, x):\n        return x.cuda().item()\n", True),
    "a factory given a device": (
        MODULE_HEAD + "    def forward(self, x):\n        n = torch.zeros(1, device=x.device)\n        return n.item()\n", True),
    "a name that says gpu": (MODULE_HEAD + "    def forward(self, lens_gpu):\n        return lens_gpu.tolist()\n", True),
    "a device named by a string": (MODULE_HEAD + "    def forward(self, x):\n        return x.to('npu').tolist()\n", True),
    "a synchronize": (MODULE_HEAD + "    def forward(self, x):\n        stream.synchronize()\n        return x\n", True),
    "an attribute another method puts on the GPU, through a local": (
        MODULE_HEAD + ("    def __init__(self):\n        buf = torch.zeros(4, device='cuda')\n        self.buf = buf\n"
                       "    def forward(self, x):\n        return self.buf.tolist()\n"), True),
    "a helper of this file that names a device": (
        MODULE_HEAD + ("    def forward(self, x):\n        return self.step(x)\n"
                       "    def step(self, x):\n        return x.to(self.device).tolist()\n"), True),
    # ... and reaches a sync site: host results and the tests and calls that read no data do not.
    "a device that reaches no sync site": (
        MODULE_HEAD + ("    def forward(self, x, means):\n        device = x.device\n        n = x.shape[0]\n"
                       "        y = x + means.to(device)\n        return y[:n].to(dtype=torch.float32)\n"), False),
    "a GPU tensor's shape, emptiness and placement": (
        MODULE_HEAD + ("    def forward(self, x):\n        y = x.cuda()\n        if y is None or y.size(0) > 4:\n"
                       "            return torch.where(y > 0, y, 0)\n        return torch.zeros(len(y), device=y.device)\n"),
        False),
    "a GPU tensor's truth": (
        MODULE_HEAD + "    def forward(self, x):\n        y = torch.ones(2, device='cuda') + x\n        if y:\n            pass\n", True),
    "a GPU tensor as a slice bound": (
        MODULE_HEAD + "    def forward(self, x):\n        m = torch.ones(1, device=x.device).sum()\n        return x[:m]\n", True),
    # An index is a sync only as a mask (a boolean tensor): a gather by integers is not.
    "a gather by a GPU index tensor": (
        MODULE_HEAD + "    def forward(self, x):\n        idx = torch.arange(4, device=x.device)\n        return x[idx], x[1:, idx]\n",
        False),
    "a GPU mask as an index": (
        MODULE_HEAD + "    def forward(self, x):\n        keep = x.cuda() > 0\n        return x[keep]\n", True),
    "a GPU mask through a mask method and a name": (
        MODULE_HEAD + "    def forward(self, x):\n        keep = x.cuda().isnan()\n        drop = ~keep\n        return x[:, drop]\n",
        True),
    "a GPU mask kept in an attribute": (
        MODULE_HEAD + ("    def __init__(self):\n        self.keep = torch.ones(4, device='cuda').bool()\n"
                       "    def forward(self, x):\n        return x[self.keep]\n"), True),
    "a metadata builder gathering by an index tensor": (
        "class FlashMetadataBuilder:\n    def build(self, common):\n        return common.seq_lens[common.query_start_loc]\n",
        False),
    "a metadata builder indexing by a comparison": (
        ("class FlashMetadataBuilder:\n    def build(self, common):\n        lens = common.seq_lens.sum(0)\n"
         "        return lens[lens > 0]\n"), True),
    "a GPU mask given to a one-argument torch.where": (
        MODULE_HEAD + "    def forward(self, x):\n        return torch.where(x.cuda() > 0)\n", True),
    "a copy of a GPU tensor to the host": (
        MODULE_HEAD + "    def forward(self, x):\n        return x.to(self.device).to('cpu')\n", True),
    "a hot class nothing hot reaches": (
        ("import torch\nfrom torch import nn\n\n\nclass FooMetadataBuilder:\n    def helper(self, x):\n"
         "        return x.tolist()\n\n\nclass M(nn.Module):\n    def forward(self, x):\n        return x.item()\n"),
        False),
    "a metadata builder (unknown devices count there)": (
        "class FlashMetadataBuilder:\n    def build(self, common):\n        return common.seq_lens.tolist()\n", True),
    # In a hot class any tensor may sync, on a named device or not: a method there counts only
    # with a sync site that may be handed one (not a host result: a shape, a length, ``is None``).
    "a metadata builder with no sync site": (
        ("class FlashMetadataBuilder:\n    def build(self, common):\n        seq_lens = common.seq_lens\n"
         "        return Metadata(seq_lens=seq_lens, max_len=common.max_seq_len, n=seq_lens.shape[0])\n"), False),
    "a metadata builder whose tests and slices read host results only": (
        ("class FlashMetadataBuilder:\n    def build(self, common):\n"
         "        if common.seq_lens is None or len(common.query_start_loc) > 1:\n            return None\n"
         "        return Metadata(common.seq_lens[:, :4], common.seq_lens.shape[0] > 2)\n"), False),
    "a metadata builder testing a tensor": (
        ("class FlashMetadataBuilder:\n    def build(self, common):\n        if (common.seq_lens > 4).any():\n"
         "            return None\n        return Metadata(common.seq_lens)\n"), True),
    "a metadata builder negating a tensor": (
        "class FlashMetadataBuilder:\n    def build(self, common):\n        return not common.seq_lens.sum()\n", True),
    "a metadata builder's helper method with int() of a tensor": (
        ("class FlashMetadataBuilder:\n    def build(self, common):\n        return self._count(common)\n\n"
         "    def _count(self, common):\n        return int(common.seq_lens.sum())\n"), True),
    # Names with a device word inside that name no device (``DeviceDomain`` reads them as nothing).
    "a CUDA graph, a GPU count and a CUDA-graph flag": (
        MODULE_HEAD + ("    def forward(self, x, entry):\n        if self.use_cuda_graph and self.num_gpus > 1:\n"
                       "            entry.cudagraph.replay()\n        return int(entry.cudagraph_output)\n"), False),
    # A function hot only for a graph capture: only what the capture runs is hot.
    "a sync after a graph capture": (
        ("import torch\n\n\nclass Runner:\n    def capture(self, graph, x):\n        with torch.cuda.graph(graph):\n"
         "            y = x + 1\n        torch.cuda.synchronize()\n        return y\n"), False),
    "a sync in a graph capture's arguments": (
        ("import torch\n\n\nclass Runner:\n    def capture(self, graph, x):\n"
         "        with torch.cuda.graph(graph, stream=self.pick(x.cuda().item())):\n            y = x + 1\n"), False),
    "a sync in a graph capture": (
        ("import torch\n\n\nclass Runner:\n    def capture(self, graph, x):\n        with torch.cuda.graph(graph):\n"
         "            torch.cuda.synchronize()\n"), True),
    "a sync in a method a graph capture calls": (
        ("import torch\n\n\nclass Runner:\n    def capture(self, graph, x):\n        with torch.cuda.graph(graph):\n"
         "            self.step(x)\n\n    def step(self, x):\n        torch.cuda.synchronize()\n"), True),
    "a keyword that names a CUDA graph, not a device": (
        MODULE_HEAD + ("    def __init__(self, sizes):\n        self.entries = {n: Entry(use_cudagraph=n > 4) for n in sizes}\n"
                       "    def forward(self, x, n):\n        entry = self.entries[n]\n        assert entry.addresses == [x.data_ptr()]\n"
                       "        return int(entry.count)\n"), False),
    # A builtin's result, or a helper's, is no tensor on a known device, whatever it is handed.
    "a GPU tensor handed to isinstance() and to a helper in a condition": (
        MODULE_HEAD + ("    def forward(self, x):\n        lens = torch.arange(4, device='cuda')\n"
                       "        if isinstance(lens, list) or describe(lens):\n            return x\n"
                       "        return x + 1\n"), False),
    "a GPU tensor handed to a torch function in a condition": (
        MODULE_HEAD + ("    def forward(self, x):\n        lens = torch.arange(4, device='cuda')\n"
                       "        if torch.any(lens):\n            return x\n        return x + 1\n"), True),
    "a GPU tensor's elements through list() in a condition": (
        MODULE_HEAD + ("    def forward(self, x):\n        lens = torch.arange(4, device='cuda')\n"
                       "        for n in list(lens):\n            if n:\n                return x\n"
                       "        return x + 1\n"), True),
    "a device named by its keyword alone": (
        MODULE_HEAD + "    def forward(self, x, n):\n        lens = torch.arange(n, device='cuda')\n        return lens.tolist()\n",
        True),
    # ``hot-class-methods``: a receiver of unknown device counts in a class of an engine's
    # contract that defines one of its methods, not in any class so named (SGLang's
    # ``CUDAPiecewiseBackend`` captures graphs, and is no attention backend).
    "an attention backend's step": (
        ("class TritonAttnBackend:\n    def forward_decode(self, q, forward_batch):\n"
        "        return forward_batch.seq_lens.max().item()\n"), True),
    "a graph block of a *Backend with no method of the contract": (
        ("import torch\n\n\nclass CUDAPiecewiseBackend:\n    def __call__(self, graph, runtime_shape):\n"
        "        with torch.cuda.graph(graph):\n            return runtime_shape.max().item()\n"), False),
    # A helper of the file that syncs only on what it is handed, handed a GPU value
    # (``SyncAnalysis.sync_on_device_arguments``), directly, through another, as a method.
    "a helper handed a GPU tensor": (
        MODULE_HEAD + "    def forward(self, x):\n        return helper(x.cuda())\n\n\ndef helper(t):\n    return t.tolist()\n",
        True),
    "a helper handed a GPU tensor, through another": (
        MODULE_HEAD + ("    def forward(self, x):\n        lens = torch.arange(4, device=x.device)\n        return outer(lens, 2)\n\n\n"
                       "def outer(t, n):\n    return inner(t[:n])\n\n\ndef inner(u):\n    return u[u > 0]\n"), True),
    "a helper method handed a GPU tensor": (
        MODULE_HEAD + ("    def forward(self, x):\n        keep = x.cuda() > 0\n        return self.pick(x, keep)\n"
                       "    def pick(self, x, mask):\n        return x[mask]\n"), True),
    "a method of this file's name called through another object": (
        MODULE_HEAD + ("    def forward(self, x):\n        return self.other.pick(x.cuda() > 0)\n"
                       "    def pick(self, mask):\n        return mask.nonzero()\n"), False),
    "a helper cold by its name handed a GPU tensor": (
        MODULE_HEAD + "    def forward(self, x):\n        return warmup_lens(x.cuda())\n\n\ndef warmup_lens(t):\n    return t.tolist()\n",
        False),
    "a helper handed a GPU tensor's shape": (
        MODULE_HEAD + ("    def forward(self, x):\n        lens = x.cuda()\n        return helper(lens.shape[0])\n\n\n"
                       "def helper(n):\n    return int(n)\n"), False),
    "a helper handed a GPU tensor that reads its shape only": (
        MODULE_HEAD + ("    def forward(self, x):\n        lens = x.cuda()\n        return helper(lens)\n\n\n"
                       "def helper(t):\n    return t.shape[0] if t is not None else 0\n"), False),
    "an attribute ending in _gpu, and one named gpu": (
        MODULE_HEAD + ("    def forward(self, x):\n        n = self.lens_gpu\n        m = self.buffer.gpu\n"
                       "        return n.tolist(), m.tolist()\n"), True),
}


@pytest.mark.parametrize("name", HOT_SYNC_CASES)
def test_scout_sync_in_hot_scope_answers(name):
    text, may = HOT_SYNC_CASES[name]
    scout = Scout(text, SETTINGS)
    assert scout.may_have_hot_scope()
    assert scout.may_sync_in_a_hot_scope() == may
    # The answer stands in for the analysis: where it says no, the analysis must find nothing;
    # each "may" here is a real finding the scout must keep.
    from sync_lint.api import lint_text

    assert bool([d for d in lint_text(text) if d.code.startswith("GPU2")]) == may


def test_a_helper_that_syncs_on_what_hot_code_hands_it_may_sync():
    """For a run of many files: a function of the file that syncs only on its parameter may sync
    where a unit of the file hands it a value from a named device (``inner`` through ``outer``),
    not where nothing does (``unused``), nor where what it is handed is a host result (``shaped``)."""
    text = MODULE_HEAD + (
        "    def forward(self, x):\n        lens = torch.arange(4, device=x.device)\n"
        "        return outer(lens, 2), shaped(lens.shape[0])\n\n\n"
        "def outer(t, n):\n    return inner(t[:n])\n\n\ndef inner(u):\n    return u.tolist()\n\n\n"
        "def unused(v):\n    return v.tolist()\n\n\ndef shaped(n):\n    return int(n)\n"
    )
    assert Scout(text, SETTINGS).sync_outline().may_sync == {(None, "inner")}


def test_the_units_that_may_sync_explicitly_on_a_parameter():
    """For a run of many files (``SyncOutline.on_parameters``): a function another file may hand
    a GPU value that it makes an explicit sync on, through its locals too (``n``); not a
    method's sync on its own ``self`` (``m``: no call hands that), which a static method's
    first parameter is not (``k``); nor a cast, or a copy to the GPU (``c``)."""
    text = (
        "class A:\n    def m(self, x):\n        return self.buf.cpu()\n\n"
        "    def n(self, x):\n        y = x[1:] - x[:-1]\n        return y.max().item()\n\n"
        "    @staticmethod\n    def k(x):\n        return x.tolist()\n\n"
        "    def c(self, x, device):\n        return x.to(torch.int32).to(device)\n"
    )
    assert Scout(text, SETTINGS).sync_outline().on_parameters == {("A", "n"), ("A", "k")}


def test_the_methods_of_a_hot_class_that_may_sync_hold_a_sync_site():
    """For a run of many files (``Scout.sync_outline``): of a hot class's methods, only those with
    a sync site that may be handed a tensor may record a sync; ``build`` syncs only through
    ``_count``, which the plan follows along the call."""
    text = (
        "class FlashMetadataBuilder:\n    def build(self, common):\n        return self._count(common)\n\n"
        "    def _count(self, common):\n        return int(common.seq_lens.sum())\n\n"
        "    def _shape(self, common):\n        if common.seq_lens is None:\n            return 0\n"
        "        return common.seq_lens.shape[0]\n"
    )
    assert Scout(text, SETTINGS).sync_outline().may_sync == {("FlashMetadataBuilder", "_count")}


@pytest.mark.parametrize(
    ("body", "may"),
    [
        ("    def f(self):\n        return self.lens.tolist()\n", True),  # set on a device in __init__
        ("    def f(self):\n        return self.lens.shape[0]\n", False),  # a host result of it
        ("    def f(self, x):\n        return x.to(self.device)\n", False),  # names a device, no sync site
        ("    def f(self, x):\n        if x.shape[0] > 2:\n            return x.to(self.device)\n", False),
        ("    def f(self):\n        if self.lens[0]:\n            return 1\n", True),
        ("    def f(self):\n        return self.sizes.tolist()\n", False),  # set from a parameter
        ("    def f(self):\n        torch.cuda.synchronize()\n", True),
        ("    def f(self, x):\n        y = torch.ones(4, device=x.device)\n        return bool(y.any())\n", True),
    ],
)
def test_a_unit_may_sync_only_where_a_sync_site_may_read_a_value_from_a_device(body, may):
    """For a run of many files (``Scout.sync_outline``): outside hot classes, a method may record
    a sync only where a sync site of it may be handed a value from a named device; naming a
    device, or testing host values, is not enough."""
    text = (
        "import torch\n\n\nclass Lens:\n    def __init__(self, n, sizes, device):\n"
        "        self.device = device\n        self.sizes = sizes\n"
        "        self.lens = torch.zeros(n, device=device)\n\n" + body
    )
    assert (("Lens", "f") in Scout(text, SETTINGS).sync_outline().may_sync) is may


def test_unknown_device_option_decides_for_hot_classes_and_everywhere():
    builder = HOT_SYNC_CASES["a metadata builder (unknown devices count there)"][0]
    assert not Scout(builder, make_settings(unknown_device="never")).may_sync_in_a_hot_scope()
    forward = HOT_SYNC_CASES["a parameter's item"][0]
    assert Scout(forward, make_settings(unknown_device="always")).may_sync_in_a_hot_scope()


def test_a_tree_the_caller_has_is_not_parsed_again(monkeypatch):
    """flake8 hands its plugins the file's ``ast`` tree: the scout answers on it."""
    import ast

    text = HOT_SYNC_CASES["a tensor moved to the GPU"][0]
    tree = ast.parse(text)
    monkeypatch.setattr(ast, "parse", lambda *args, **kwargs: pytest.fail("parsed again"))
    assert Scout(text, SETTINGS, tree).may_sync_in_a_hot_scope()


@pytest.mark.parametrize(
    ("index", "gaps", "reported"),
    [
        ("x[i]", False, False), ("x[:n]", False, False), ("x[a:b]", False, False), ("x[i, :k]", False, False),
        ("x[i, j]", False, False), ("x[:]", False, False), ("x[:, :]", False, False), ("x[a:b, :]", False, False),
        ("x[None, :n]", False, False), ("x[:, None]", False, False), ("x[::1]", False, False),
        ("x.shape[1:]", False, False),
        ("x[:, 0]", True, True), ("x[:, :k]", True, True), ("x[..., 0]", True, True), ("x[::2]", True, True),
        ("x[a:b, c:d]", True, True), ("x[..., :k]", True, True),
        # The domain may read these more kindly (``i`` may be an index tensor, a size-1 range
        # keeps ``is_contiguous()``): the scout may not.
        ("x[:n, i]", True, False), ("x[:1, 0]", True, False), ("x[*idx]", True, False),
    ],
)
def test_an_index_leaves_gaps_as_the_layout_domain_reads_it(index, gaps, reported):
    """The scout's reading of an index must never miss a gap the domain sees."""
    from sync_lint.api import lint_text

    text = f"import torch\n\n\ndef f(x, i, j, k, n, a, b, c, d, idx):\n    torch.ops._C.op({index})\n"
    assert Scout(text, SETTINGS).may_report_at_a_sink() == gaps
    assert bool(lint_text(text)) == reported


def assert_sink_answer(text: str, may: bool) -> None:
    """The scout's answer for ``text`` checked alone; where it says no, the analysis, which it
    stands in for, must find nothing."""
    from sync_lint.api import lint_text

    assert Scout(text, SETTINGS).may_report_at_a_sink() == may, text
    if not may:
        assert lint_text(text) == [], text


@pytest.mark.parametrize(
    ("receiver", "may"),
    [
        ("x[:, :k]", False), ("x[a:b, :k]", False), ("x[..., :k]", False), ("x[:n]", False),
        ("x[:, 0]", True), ("x[:, 0:1]", True), ("x[:, i:i + 1]", True), ("x[:, -1:]", True), ("x[..., ::2]", True),
        ("x.t()", True), ("x.expand(n, -1)", True), ("x.to(torch.int32)", True),
    ],
)
def test_a_dtype_view_needs_only_a_unit_last_stride(receiver, may):
    """``.view(dtype)`` reinterprets the last dim: a column range keeps its stride 1 and passes;
    where the scout says no, the analysis reports nothing."""
    assert_sink_answer(f"import torch\n\n\ndef f(x, i, k, n, a, b):\n    return {receiver}.view(torch.float8_e4m3fn).sum()\n", may)


@pytest.mark.parametrize(
    ("handed", "may", "may_when_viewed"),
    [
        # A new tensor, whatever it is made of: the domain reads none of these as a view or a cast.
        ("x.t().amax(-1)", False, False), ("x[:, 0] + 1", False, False), ("x.t() * 2", False, False),
        ("-x.t()", False, False), ("x[:, 0].clamp(0, 1)", False, False), ("x[:, 0] > 0", False, False),
        ("x.contiguous(memory_format=torch.channels_last)", False, False), ("x.t().sum(0).flip(0)", False, False),
        # Nor the result of a call that is no torch function and no method keeping its receiver's
        # layout: unknown (``Parameter``, a helper of the file, a method the domain does not know).
        ("Parameter(x.t())", False, False), ("nn.Parameter(x[:, 0])", False, False),
        ("helper(x.t())", False, False), ("x.t().unbind(0)[0]", False, False), ("x[:, 0].tolist()", False, False),
        ("F.pad(x.t(), (0, 1))", False, False), ("kernel[(1,)](x.t())", False, False),
        # A view or a cast around one, or beside one, is still suspect.
        ("x.t().contiguous().t()", True, True), ("(x + 1).to(torch.int32)", True, True), ("x.sum(0)[:, 1]", True, True),
        ("x[:, 0].contiguous() if n else x[:, 1]", True, True), ("x[:, 0].clone()", True, True),
        ("torch.transpose(x, 0, 1)", True, True), ("transpose(x, 0, 1)", True, True),
        ("helper(x).t()", True, True), ("x.t().view(n, -1)", True, True), ("x.t().add_(1)", True, True),
        # ``.contiguous()`` returns a size-1 view as it is (GPU103 at a stride-aware launch); its
        # last dim has stride 1 all the same, all ``.view(dtype)`` needs.
        ("x[:, 0].contiguous()", True, False),
    ],
)
def test_a_new_tensor_is_no_view_whatever_it_is_made_of(handed, may, may_when_viewed):
    """A file checked on its own: the scout says no for a value the layout domain reads as a new
    tensor or of unknown layout (and then the analysis reports nothing), directly or through a
    name bound to it."""
    header = "import torch\nimport torch.nn.functional as F\nfrom torch import nn, transpose\nfrom torch.nn import Parameter\n"
    header += "\n\ndef helper(t):\n    return t\n"
    direct = f"{header}\n\ndef f(x, n, kernel):\n    torch.ops._C.op({handed})\n"
    through_a_name = f"{header}\n\ndef f(x, n, kernel):\n    y = {handed}\n    z = y\n    torch.ops._C.op(z)\n"
    viewed = f"{header}\n\ndef f(x, n, kernel):\n    return ({handed}).view(torch.int8)\n"
    for text, expected in ((direct, may), (through_a_name, may), (viewed, may_when_viewed)):
        assert_sink_answer(text, expected)


@pytest.mark.parametrize(
    ("body", "may"),
    [
        # Attributes assigned through anything but the first parameter: followed by dotted name,
        # within the function (``flow.target_key``), as the domains follow them.
        ("layer.w.data = x.t()\n        torch.ops._C.op(layer.scale.data)", False),
        ("layer.w.data = x.t()\n        torch.ops._C.op(layer.w.data)", True),
        ("layer.w = x.t()\n        torch.ops._C.op(layer.w.data.view(n, -1))", True),
        ("layer.w = x.t()\n        w = layer.w\n        torch.ops._C.op(w)", True),
        ("rows[0].w = x.t()\n        torch.ops._C.op(rows[0].w)", False),  # no dotted name: not followed
        # ... and not in another method
        ("layer.w = x.t()\n\n    def other(self, layer):\n        torch.ops._C.op(layer.w)", False),
        # Through the first parameter: across the class
        ("self.w = x.t()\n\n    def other(self, layer):\n        torch.ops._C.op(self.w)", True),
        # deeper too: the device domain carries ``self.a.b`` from ``__init__`` (the layout
        # domain would not; the scout reads attributes one way for both)
        ("self.cache.w = x.t()\n\n    def other(self, layer):\n        torch.ops._C.op(self.cache.w)", True),
        # A shape is no tensor, whatever the tensor becomes later
        ("n = x.shape[0]\n        x = x.t()\n        torch.ops._C.op(n, x.size(1), x.stride(0), x.dtype)", False),
    ],
)
def test_attributes_are_followed_where_the_domains_follow_them(body, may):
    assert_sink_answer(f"import torch\n\n\nclass Method:\n    def process(self, layer, x, n, rows):\n        {body}\n", may)


@pytest.mark.parametrize(
    ("body", "may"),
    [
        # A binding on a later line does not reach a read (vLLM's nixl_ep: ``x_fp8, x_scales = x``
        # before ``x = dequant(...).to(dtype)``).
        ("y = x\n    torch.ops._C.op(y)\n    y = x.to(torch.int32)", False),
        ("torch.ops._C.op(x)\n    x = x.t()", False),
        ("a, b = x\n    torch.ops._C.op(a)\n    x = x.t()", False),
        ("y = x.t()\n    torch.ops._C.op(y)", True),
        ("y = x.t()\n    y = y + 1\n    torch.ops._C.op(y)", True),  # an earlier binding still reaches
        # ... unless a loop takes it round again,
        ("y = x\n    for _ in range(n):\n        torch.ops._C.op(y)\n        y = x.t()", True),
        ("y = x\n    while n:\n        torch.ops._C.op(y)\n        y = x.t()", True),
        # or the read runs later: a closure, a lambda, a generator expression,
        ("def g():\n        torch.ops._C.op(y)\n    y = x.t()\n    g()", True),
        ("g = lambda: torch.ops._C.op(y)\n    y = x.t()\n    g()", True),
        ("g = (torch.ops._C.op(y) for _ in range(n))\n    y = x.t()\n    list(g)", True),
        # or the binding comes first though written after: a comprehension's ``for``, a walrus,
        ("return [\n        torch.ops._C.op(v)\n        for v in (x.t(), x.t())\n    ]", True),
        ("return (\n        torch.ops._C.op(y)\n        if (y := x.t()) is not None\n        else None\n    )", True),
        # or the name is shared with other scopes.
        ("global y\n    torch.ops._C.op(y)\n    y = x.t()", True),
    ],
)
def test_a_read_sees_the_bindings_that_may_reach_it(body, may):
    assert_sink_answer(f"import torch\n\n\ndef f(x, n):\n    {body}\n", may)


def test_a_loop_of_the_module_code_takes_a_binding_round_too():
    """The rest scope's roots are statements: a loop among them is a loop of the scope."""
    import ast

    from sync_lint.pipeline.scout import flows
    from sync_lint.pipeline.scout.sinks import _makes_view

    for header in ("", "class Holder:\n"):
        indent = "    " if header else ""
        body = "y = x\nfor _ in range(2):\n    op(y)\n    y = x.t()\nop(y)\n"
        text = header + "".join(indent + line + "\n" for line in body.splitlines())
        tree = ast.parse(text)
        (rest,), _ = flows.suspects(tree, _makes_view)
        calls = [node for node in ast.walk(tree) if type(node) is ast.Call and getattr(node.func, "id", "") == "op"]
        assert [rest.suspect(call.args[0], set()) for call in sorted(calls, key=lambda c: c.lineno)] == [True, True], text


def test_a_binding_later_in_a_loop_is_a_finding():
    """What the scout must not miss: the domain goes round the loop."""
    from sync_lint.api import lint_text

    text = "import torch\n\n\ndef f(x, n):\n    y = x\n    for _ in range(n):\n        torch.ops._C.op(y)\n        y = x.t()\n"
    assert [d.code for d in lint_text(text)] == ["GPU102"]


@pytest.mark.parametrize(
    ("body", "may"),
    [
        ("if flag:\n        pass\n    flag = x.cuda().any()", False),
        ("flag = x.cuda().any()\n    if flag:\n        pass", True),
        ("flag = False\n    for t in x:\n        if flag:\n            pass\n        flag = t.cuda().any()", True),
    ],
)
def test_a_sync_site_sees_the_bindings_that_may_reach_it(body, may):
    from sync_lint.api import lint_text

    text = (
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x, flag):\n        "
        + body.replace("\n", "\n    ") + "\n        return x\n"
    )
    assert Scout(text, SETTINGS).may_sync_in_a_hot_scope() == may, text
    if not may:
        assert lint_text(text) == [], text
    elif "for" not in body:  # a real finding (around the loop the device domain is not sure)
        assert lint_text(text), text


def test_a_tensor_attribute_the_code_assigns_is_followed():
    """``x.shape`` is no tensor unless the file assigns an attribute of that name: the domain
    then reads ``self.shape`` as assigned."""
    from sync_lint.api import lint_text

    text = (
        "import torch\n\n\nclass Holder:\n    def __init__(self, x):\n        self.shape = x.t()\n\n"
        "    def run(self):\n        torch.ops._C.op(self.shape)\n"
    )
    assert Scout(text, SETTINGS).may_report_at_a_sink()
    assert [d.code for d in lint_text(text)] == ["GPU102"]


def test_a_contiguous_size1_view_is_still_suspect_alone(tmp_path):
    """``block_table[:1, :8].contiguous()`` is the view itself (already ``is_contiguous()``): a
    kernel that reads its row stride gets a size-1 dim's arbitrary stride. Checked on its own,
    with nothing else suspect in the file, the scout must still say may."""
    text = (
        "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def _rows_kernel(x_ptr, stride_row, out_ptr, N: tl.constexpr):\n"
        "    row = tl.program_id(0)\n    offs = tl.arange(0, N)\n"
        "    tl.store(out_ptr + row * N + offs, tl.load(x_ptr + row * stride_row + offs))\n\n\n"
        "def size1_strides(block_table, out):\n    first = block_table[:1, :8].contiguous()\n"
        "    _rows_kernel[(1,)](first, first.stride(0), out, N=8)\n"
    )
    assert Scout(text, SETTINGS).may_report_at_a_sink()
    path = tmp_path / "size1.py"
    path.write_text(text)
    alone = Linter(make_settings(preview=True)).run([str(path)]).diagnostics
    assert [d.code for d in alone] == ["GPU103"]


@pytest.mark.parametrize("method", sorted(sinks_scout._NEW_TENSOR_METHODS))
def test_every_new_tensor_method_is_read_as_one_by_the_domain(method):
    """Each method the scout reads as making a new tensor: called on a transpose, a column or a
    cast, and handed to a custom op or viewed as another dtype, the analysis reports nothing."""
    from sync_lint.api import lint_text

    for receiver in ("x.t()", "x[:, 0]", "x.to(torch.int32)"):
        for use in ("torch.ops._C.op({})", "({}).view(torch.int8)"):
            text = f"import torch\n\n\ndef f(x):\n    return {use.format(f'{receiver}.{method}()')}\n"
            assert not Scout(text, SETTINGS).may_report_at_a_sink(), text
            assert lint_text(text) == [], text
            # ``torch.<method>(...)`` is pruned too (a call of an attribute of that name): the
            # domain must read it as a new tensor as well, never as a torch view function.
            called = f"import torch\n\n\ndef f(x):\n    return {use.format(f'torch.{method}({receiver})')}\n"
            assert not Scout(called, SETTINGS).may_report_at_a_sink(), called
            assert lint_text(called) == [], called


SCOPES_SAMPLE = '''\
import torch


@torch.compile(mode=pick("x"))
def top(a, b=make()):
    c = [f(v) for v in a if (w := g(v))]
    with ctx(a) as (d, e):
        d.attr += h(e)
    for i, j in pairs(b):
        def inner(k=i):
            global GLOBAL
            return k.t()
    while i:
        i = (lambda: i - 1)() + sum(x for x in range(i))
    return c


class Holder(Base, meta=choose()):
    table = build()
    for name in names():
        pass

    def method(self, x):
        self.y: int = x.item()
        return self.y

    class Nested:
        def deep(self):
            z = q()


if torch.cuda.is_available():
    def under_if(p):
        r = p.cpu()
'''


# Every field that holds something other than nodes, or nodes mixed with other values:
# ``match`` patterns, ``global``, ``**`` in a dict, a keyword-only parameter without a default,
# ``import ... as``, an async comprehension, constants of every kind.
WALK_SAMPLE = """\
import os.path as p, sys
from . import x as y
def f(a, *, b, c=1, **k):
    global g
    def inner():
        nonlocal a
    match a:
        case {"k": 1, **rest}: pass
        case Point(x=0, y=[1, *others]) | None: pass
        case True | -1 | 1.5j | b"x": pass
        case str() as s if s: pass
    return {**k, "a": [i async for i in b if i]}, f"{a!r:>{c}}", ..., lambda q=None: q
"""


def _walked_as_ast_walks(tree):
    """What ``syntax.walk`` must find: the nodes ``ast.walk`` finds, but for the context and
    operator singletons and anything under a field of ``_LEAF_FIELDS`` (none holds code)."""
    import ast

    from sync_lint.pipeline.scout.syntax import _LEAF_FIELDS

    left_out = set()
    for node in ast.walk(tree):
        for name in _LEAF_FIELDS & set(node._fields):
            value = getattr(node, name, None)
            for inner in value if isinstance(value, list) else [value]:
                if isinstance(inner, ast.AST):
                    left_out.update(map(id, ast.walk(inner)))
    singletons = (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)
    return sorted(id(n) for n in ast.walk(tree) if not isinstance(n, singletons) and id(n) not in left_out)


@pytest.mark.parametrize("name", ["sample", *sorted(str(p) for p in (ROOT / "fixtures").rglob("*.py"))[:40]])
def test_walk_finds_every_node_that_may_hold_code_once_and_file_names_buckets_it(name):
    """``syntax.walk`` reads only the fields that may hold code (``_LEAF_FIELDS`` aside): it must
    find each node ``ast.walk`` does (less the singletons) exactly once, and nothing else, also
    where a field holds other values or nodes mixed with them (a name in ``global``, a None in
    ``Dict.keys``); ``FileNames`` the same nodes by kind, each kind's in ``walk``'s order."""
    import ast

    from sync_lint.pipeline.scout.syntax import FileNames, walk

    tree = ast.parse(WALK_SAMPLE if name == "sample" else Path(name).read_text())
    walked = walk(tree)
    assert all(isinstance(node, ast.AST) for node in walked)
    assert sorted(map(id, walked)) == _walked_as_ast_walks(tree)
    by_kind: dict[type, list] = {}
    for node in walked:
        by_kind.setdefault(type(node), []).append(node)
    assert FileNames(tree, SETTINGS).nodes == by_kind


@pytest.mark.parametrize("name", ["sample", *sorted(str(p) for p in (ROOT / "fixtures").rglob("*.py"))[:40]])
def test_scopes_from_nodes_by_kind_equal_a_walk_of_each_scope(name):
    """``suspects(nodes_of=...)`` buckets the file's nodes into scopes by line instead of walking
    each scope; both must find the same calls and bindings in each scope (``flows._binding``
    and ``flows._BINDING_KINDS`` must name the same kinds)."""
    import ast

    from sync_lint.pipeline.scout import flows
    from sync_lint.pipeline.scout.syntax import FileNames

    text = SCOPES_SAMPLE if name == "sample" else Path(name).read_text()
    tree = ast.parse(text)
    roots = flows._scopes(tree)
    walked = [flows._calls_and_bindings(scope) for scope in roots]
    scope_at = flows._scope_at(roots)
    bucketed = flows._calls_and_bindings_by_scope(scope_at, len(roots), FileNames(tree, SETTINGS).of)

    def ids(found):
        calls, bindings = found
        return sorted(map(id, calls)), sorted(id(value) for _, value, _ in bindings)

    assert [ids(found) for found in bucketed] == [ids(found) for found in walked]

    def order(found):
        return sorted(found.loops), sorted(found.later), sorted(found.unordered)

    names = FileNames(tree, SETTINGS)
    assert [order(o) for o in flows._Order.by_scope(roots, scope_at, names.of)] == [
        order(flows._Order.of_roots(r)) for r in roots
    ]


def _source_tests():
    """Each test ``suspects`` is asked with, and the kinds it declares it marks."""
    from sync_lint.pipeline.scout import sinks, syncs

    return {
        "views": (sinks._makes_view, sinks._VIEW_KINDS),
        "unit stride": (sinks._may_lose_unit_stride, sinks._VIEW_KINDS),
        "devices": (syncs._names_a_device, syncs._DEVICE_KINDS),
        "masks": (syncs._may_make_a_mask, syncs._MASK_KINDS),
    }


QUIET_SAMPLE = '''\
import torch

class Layer:
    def setup(self, w):
        self.table = w[:, 0]              # a view kept on the instance
        self.plain = w

    def reads_the_view(self, x):
        t = self.table                    # no view here, but an attribute that holds one
        return kernel(t, x)

    def reads_plain(self, x):
        y = self.plain
        return kernel(y, x)

    def quiet(self, x, n):
        z = x + n
        return kernel(z)

def helper(a, device):
    b = a.to(device)
    m = b > 0
    return b[m]
'''


def _bound_reads(scope) -> list[tuple[tuple[str, ...], set[str]]]:
    """Each binding's names and attributes, and what its value reads (``ScopeFacts.bound_values``)."""
    from sync_lint.pipeline.scout import flows

    return [
        (bound, value.keys() if isinstance(value, flows._ExprFacts) else flows._read_keys(value))
        for bound, value in scope.bound_values()
    ]


@pytest.mark.parametrize("name", ["sample", *sorted(str(p) for p in (ROOT / "fixtures").rglob("*.py"))[:60]])
def test_quiet_scopes_answer_as_scopes_walked_whole(name):
    """A scope with no node its source test marks (``flows.suspects(source_kinds=...)``) leaves
    its bindings' facts unmade; every question asked of it (each expression of the file, each
    binding's reads) must be answered as when every scope's facts are made; and each source
    test marks no node of a kind it does not declare."""
    import ast

    from sync_lint.pipeline.scout import flows
    from sync_lint.pipeline.scout.syntax import FileNames, walk

    text = QUIET_SAMPLE if name == "sample" else Path(name).read_text()
    tree = ast.parse(text)
    names = FileNames(tree, SETTINGS)
    tests = _source_tests()
    quiet_seen = False
    for label, (is_source, kinds) in tests.items():
        for node in walk(tree):
            assert not is_source(node) or isinstance(node, kinds), (label, ast.dump(node))
        whole, whole_attributes = flows.suspects(tree, is_source, names=names)
        lazy, lazy_attributes = flows.suspects(tree, is_source, names=names, source_kinds=kinds)
        assert lazy_attributes == whole_attributes, label
        for walked, quiet in zip(whole, lazy):
            quiet_seen |= quiet._bindings is None
            for root in walked.roots:
                for node in walk(root):
                    if isinstance(node, ast.expr):
                        assert quiet.suspect(node, lazy_attributes) == walked.suspect(node, whole_attributes), (
                            label, ast.dump(node)
                        )
            assert _bound_reads(quiet) == _bound_reads(walked), label
    assert quiet_seen or name != "sample"


IMPORTS_SAMPLE = '''\
import os, os.path
import torch.nn.functional as F
from . import ops
from .ops import chunk as chunk_op, fused
from ..layers import *
from typing import TYPE_CHECKING
if TYPE_CHECKING: import skipped_one_liner
if TYPE_CHECKING:
    from vllm.config import VllmConfig
elif sys.version_info >= (3, 12):
    import tomllib as toml
else:
    if x: import also_skipped
    import tomli as toml
try:
    import triton
except ImportError: import skipped_handler
except Exception:
    triton = None
    import fallback
else:
    import after_try
finally:
    import in_finally
try: import skipped_try
except ImportError: pass
with guard():
    import inside_with
async def run():
    import in_async_function
class Holder:
    import in_class_body
    def method(self):
        from os import path as ops
    class Nested:
        import nested_class
for item in items:
    import not_read_in_loops
while False:
    import nor_in_while
x = 1; import after_semicolon
def late():
    import os as late_os; import os
    if y: import inner_one_liner
    import ops
'''


@pytest.mark.parametrize("name", ["sample", *sorted(str(p) for p in (ROOT / "fixtures").rglob("*.py")),
                                  *sorted(str(p) for p in (ROOT / "sync_lint").rglob("*.py"))])
def test_first_imports_from_ast_equal_the_name_tables(name):
    """A file the project plan keeps nothing of is not parsed with libcst: its imports, which
    other files' calls follow, come from ``first_imports`` on CPython's ``ast``. They must be
    ``NameTable``'s, first meanings and the blocks it does not read alike, in a package and
    out of one."""
    import ast

    import libcst as cst

    from sync_lint.analysis.names import NameTable
    from sync_lint.pipeline.scout.syntax import first_imports
    from sync_lint.pipeline.source import split_lines

    text = IMPORTS_SAMPLE if name == "sample" else Path(name).read_text()
    for module_name, is_package in (("pkg.sub.mod", False), ("pkg.sub", True)):
        expected = NameTable(cst.parse_module(text), module_name, {}, is_package=is_package).imports
        found = first_imports(ast.parse(text), split_lines(text), module_name, is_package)
        assert found == expected
        assert list(found) == list(expected)  # the same order: the first meaning wins
    if name == "sample":
        assert "skipped_one_liner" not in found and "not_read_in_loops" not in found and found["toml"] == "tomllib"


# -- the device-word test of a unit's text -----------------------------------------------------

# Letters of the device words, their capitals, characters that fold to them only under the
# pattern's case-blind matching (long s, dotted capital I, Kelvin sign), and the `.to("` parts.
_DEVICE_ALPHABET = "devicDEVICEcudaCUDAgpuGPUsynchroniSYNCHRONIſİK .to(rbuf'\"\n_x"


@given(st.text(alphabet=_DEVICE_ALPHABET, max_size=40))
def test_device_text_test_equals_the_pattern(text):
    assert syncs_scout._holds_device_text(text) == (syncs_scout._DEVICE_TEXT.search(text) is not None)


@pytest.mark.parametrize("text, holds", [
    ("x = y.to(DEVICE)", True), ("torch.Cuda.Stream()", True), ("num_GPUs", True), ("ſynchronize()", True),
    ("x.to( rb'npu')", True), ("x.To(\"cpu\")", True), ("x.to(dtype)", False), ("deviation # 设备", False),
    ("# 设备: gpu", True),
])
def test_device_text_examples(text, holds):
    assert syncs_scout._holds_device_text(text) is holds


@given(
    st.lists(st.text(alphabet="ab.*?[]!-", max_size=6), max_size=4),
    st.text(alphabet="ab.[]!-", max_size=8),
)
def test_glob_matcher_answers_as_fnmatch_does(globs, name):
    from sync_lint.analysis.hot_words import glob_matcher, matches

    matcher = glob_matcher(tuple(globs))
    assert (matcher is not None and matcher(name)) == matches(name, globs)


ANY_VALUE_MODULE = """
import torch


def count(x):
    return x.sum().item()


def rows(x):
    return x.shape[0] + len(x)


class Model(torch.nn.Module):
    def forward(self, x):
        return rows(x)
"""


def test_unknown_device_always_lets_any_value_sync_in_every_function():
    """``unknown-device = "always"``: a sync site may read any value but a host result, in any
    function; the scout still tells the functions that hold none apart."""
    from sync_lint.api import lint_text

    always = make_settings(unknown_device="always")
    assert Scout(ANY_VALUE_MODULE, always).sync_outline().may_sync == {(None, "count")}
    assert Scout(ANY_VALUE_MODULE, SETTINGS).sync_outline().may_sync == set()
    assert not Scout(ANY_VALUE_MODULE, always).may_sync_in_a_hot_scope()
    assert lint_text(ANY_VALUE_MODULE, unknown_device="always") == []
    calls_count = ANY_VALUE_MODULE.replace("return rows(x)", "return count(x)")
    assert Scout(calls_count, always).may_sync_in_a_hot_scope()
    assert not Scout(calls_count, SETTINGS).may_sync_in_a_hot_scope()
    assert [d.code for d in lint_text(calls_count, unknown_device="always")] == ["GPU201"]
