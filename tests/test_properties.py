"""Property tests: generated programs never make the checker fail, and fixes are idempotent.

Two generators: hypothesmith (arbitrary valid Python, rarely anything a rule fires on) and a
template strategy of engine-like code (metadata builders with ``.item()`` / ``.tolist()``, Triton
kernels and their launches with sliced and transposed arguments, sync declarations, loops) that
makes the GPU rules fire and offer fixes. For each program:

- ``lint_text`` returns normally and reports no tool error (GPU004 internal error, GPU005);
- ``fix_text(..., unsafe=True)`` returns code that parses (CPython and libcst), and fixing it
  again changes nothing;
- the project plan (function-level masking over a run of many files) finds what the whole-file parse finds;
- a run of part of a package (the staged files) reports in its files what a run of the whole
  package reports there, the program being a file beyond it that its findings rest on;
- and after any history of edits to the files beyond it, a warm run of that part (its plan read
  from the cache) reports what a cold run reports.
"""

from __future__ import annotations

import os
import tempfile

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sync_lint.api import fix_text, lint_text, make_settings
from sync_lint.pipeline.runner import Linter

hypothesmith = pytest.importorskip("hypothesmith")

OPTIONS = {"sync_guard": "reference_kernels.sync_check:gpu_sync_allowed", "unknown_device": "always"}
TOOL_ERRORS = {"GPU002", "GPU003", "GPU004", "GPU005"}
# A function with triggers of the sync and layout rules, appended to hypothesmith programs so
# that the rules (and the masking) run on them instead of being skipped by the pre-filter.
TRIGGER_TAIL = (
    "\n\nclass _ProbeMetadataBuilder:\n"
    "    def build(self, common_prefix_len, common):\n"
    "        n = common.seq_lens.max().item()\n"
    "        return common.block_table[:, 0].contiguous(), n\n"
)

def examples(n: int) -> settings:
    return settings(
        max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
    )


def tool_errors(diagnostics) -> list:
    return [d for d in diagnostics if d.code in TOOL_ERRORS]


def assert_parses(text: str) -> None:
    compile(text, "<fixed>", "exec", dont_inherit=True)
    cst.parse_module(text)


def _caller_of(text: str) -> str:
    """A hot method calling each top-level function of ``example`` with a column view: the
    callers and callees the plan must keep across files; and a subclass of each of its classes
    whose ``forward`` syncs, hot where ``example`` makes that class a module (the run's question
    of module classes, ``project_plan.ModuleClasses``)."""
    import ast

    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError):
        body = []
    names = [node.name for node in body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    calls = "".join(f"        example.{name}(table[:, 0])\n" for name in names) or "        pass\n"
    subclasses = "".join(
        f"\n\nclass Sub{index}(example.{node.name}):\n    def forward(self, x):\n        torch.cuda.synchronize()\n"
        for index, node in enumerate(node for node in body if isinstance(node, ast.ClassDef))
    )
    return f"import example\nimport torch\n\n\nclass CallerMetadataBuilder:\n    def build(self, table):\n{calls}{subclasses}"


def masked_equals_whole(text: str) -> None:
    """The project plan (outline, closure over calls, masked parse, whole-file re-lint of masked
    files whose fixes need the whole module) finds what the plain path finds. Two files, so that the run is one of
    many files (a run of one file has its own plan): the program and a caller of it."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "example.py")
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        caller = os.path.join(folder, "caller.py")
        with open(caller, "w", encoding="utf-8") as handle:
            handle.write(_caller_of(text))

        def run(fast: bool):
            result = Linter(make_settings(**OPTIONS), fast=fast).run([path, caller], jobs=1)
            # fixes too: one that edits only its finding's span is planned on the masked parse
            return sorted(((d.line, d.col, d.code, d.message, d.fix) for d in result.diagnostics), key=repr)

        assert run(True) == run(False)


def check_program(text: str) -> list:
    found = lint_text(text, **OPTIONS)
    assert not tool_errors(found), tool_errors(found)
    fixed = fix_text(text, unsafe=True, **OPTIONS)
    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError:
        # CPython accepts a few programs libcst cannot parse (``"\\\r\n"`` at the end of a
        # file): nothing is fixed in them, and they must come back untouched.
        assert fixed == text
        return found
    assert_parses(fixed)
    assert fix_text(fixed, unsafe=True, **OPTIONS) == fixed
    assert not tool_errors(lint_text(fixed, **OPTIONS))
    masked_equals_whole(text)
    return found


def _compiles(text: str) -> bool:
    try:
        compile(text, "<generated>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


# -- arbitrary programs ----------------------------------------------------------------------------
@examples(10)
@given(hypothesmith.from_grammar().filter(_compiles))
def test_arbitrary_programs_never_fail(source):
    check_program(source)


@examples(10)
@given(hypothesmith.from_node().filter(_compiles))
def test_arbitrary_programs_with_triggers_never_fail(source):
    text = source if source.endswith("\n") else source + "\n"
    check_program(text + TRIGGER_TAIL)


# -- engine-like programs ---------------------------------------------------------------------------
TENSORS = ["common.seq_lens", "self.counts", "self.buf", "seq_lens", "common.query_start_loc", "x"]
SLICES = ["", "[:, 0]", "[0]", "[:n]", ".t()", ".transpose(0, 1)", "[..., 1:]", ".permute(1, 0)", ".view(-1)", ".contiguous()"]
SYNCS = [".item()", ".tolist()", ".cpu()", ".numpy()", ".max().item()", ".sum().item()", ".nonzero()"]


@st.composite
def sync_statement(draw) -> str:
    tensor = draw(st.sampled_from(TENSORS))
    sync = draw(st.sampled_from(SYNCS))
    target = draw(st.sampled_from(["total", "n", "lens", "_"]))
    form = draw(st.sampled_from(["plain", "int", "declared", "if", "loop", "noqa"]))
    core = f"{tensor}{sync}"
    if form == "int":
        return f"{target} = int({core})"
    if form == "declared":
        return f"with gpu_sync_allowed():\n    {target} = {core}"
    if form == "if":
        return f"if {tensor}{sync}:\n    {target} = 1"
    if form == "loop":
        return f"for i in range(4):\n    {target} = {tensor}[i]{sync}"
    if form == "noqa":
        return f"{target} = {core}  # noqa: GPU201"
    return f"{target} = {core}"


@st.composite
def launch_statement(draw) -> str:
    args = [draw(st.sampled_from(TENSORS)) + draw(st.sampled_from(SLICES)) for _ in range(2)]
    form = draw(st.sampled_from(["kernel", "wrapper", "reshape", "shared strides", "flag"]))
    if form == "kernel":
        return f"_copy_kernel[(4,)]({args[0]}, {args[1]}, 128, BLOCK=128)"
    if form == "wrapper":
        return f"launch_copy({args[0]}, {args[1]})"
    if form == "flag":  # the wrapper copies its source itself only under a flag
        flag = draw(st.sampled_from(["", ", dense=True", ", dense=False", ", True", ", dense=n > 2", ", **{}"]))
        return f"launch_copy_dense({args[0]}, {args[1]}{flag})"
    if form == "shared strides":  # one tensor stepped through with the other's strides
        return f"launch_rows({args[0]}, {args[1]}, {draw(st.sampled_from(TENSORS))})"
    return f"y = {args[0]}.reshape(-1).contiguous()\nlaunch_copy(y, {args[1]})"


HEADER = '''\
import torch
import triton
import triton.language as tl

from reference_kernels.sync_check import gpu_sync_allowed


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def launch_copy(src, dst):
    _copy_kernel[(triton.cdiv(src.numel(), 128),)](src, dst, src.numel(), BLOCK=128)


def launch_copy_dense(src, dst, dense=False):
    if dense:
        src = src.contiguous()
    launch_copy(src, dst)


@triton.jit
def _load_row(ptr, row, stride, BLOCK: tl.constexpr):
    return tl.load(ptr + row * stride + tl.arange(0, BLOCK))


@triton.jit
def _rows_kernel(x_ptr, y_ptr, out_ptr, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    total = _load_row(x_ptr, row, stride_x, BLOCK) + _load_row(y_ptr, row, stride_x, BLOCK)
    tl.store(out_ptr + row * BLOCK + tl.arange(0, BLOCK), total)


def launch_rows(x, y, out):
    _rows_kernel[(x.shape[0],)](x, y, out, x.stride(0), BLOCK=128)


def sync_helper_if(x, host: bool = False):
    if host:
        return x.cpu()
    return x


def sync_helper(x):
    return int(x.sum().item())

'''


def indent(block: str, by: str) -> str:
    return "\n".join(by + line for line in block.splitlines())


# Calls of the header's sync helpers; ``sync_helper_if`` syncs only under its flag.
HELPER_CALLS = ["n = sync_helper(x)", "n = sync_helper_if(x)", "n = sync_helper_if(x, host=True)",
                "n = sync_helper_if(x, n > 2)"]


@st.composite
def engine_module(draw) -> str:
    body = draw(st.lists(st.one_of(sync_statement(), launch_statement(), st.sampled_from(HELPER_CALLS)), min_size=1, max_size=6))
    name = draw(st.sampled_from(["build", "_build_decode", "forward", "prepare", "__init__"]))
    owner = draw(st.sampled_from(["FlashMetadataBuilder", "Model(torch.nn.Module)", "Helper"]))
    method = "\n".join(indent(statement, "        ") for statement in body)
    text = HEADER + (
        f"\nclass {owner}:\n"
        "    def __init__(self, device):\n"
        "        self.counts = torch.zeros(8, dtype=torch.int32, device=device)\n"
        "        self.buf = torch.zeros(16, 4, device=device)\n"
        "\n"
        f"    def {name}(self, common_prefix_len, common, seq_lens=None, x=None, n=4):\n"
        f"{method}\n"
        "        return None\n"
    )
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return text


@pytest.fixture(scope="module")
def fired() -> set[str]:
    return set()


@examples(20)
@given(engine_module())
def test_engine_like_programs(fired, source):
    found = check_program(source)
    fired.update(d.code for d in found)


@examples(12)
@given(engine_module())
def test_a_run_of_part_of_a_package_reports_what_the_whole_run_reports(source):
    """The generated program is ``pkg/example.py``; ``pkg/caller.py`` calls each of its functions
    with a column view from a hot method and derives a module from each of its classes
    (``_caller_of``). A run of the caller and another file of the package (pre-commit's staged
    files) reads the program beyond it (``project_plan.plan_reading_callees``): by the plan and by
    the plain path, it reports in its two files what a run of the whole package reports there."""
    with tempfile.TemporaryDirectory() as folder:
        package = os.path.join(folder, "pkg")
        os.mkdir(package)
        texts = {
            "__init__.py": "", "example.py": source, "util.py": "def helper(x):\n    return x\n",
            "caller.py": _caller_of(source).replace("import example\n", "from pkg import example\n", 1),
        }
        for name, text in texts.items():
            with open(os.path.join(package, name), "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
        part = [os.path.join(package, "caller.py"), os.path.join(package, "util.py")]

        def run(paths: list[str], fast: bool = True) -> list:
            result = Linter(make_settings(**OPTIONS), fast=fast).run(paths, jobs=1)
            return sorted(((d.path, d.line, d.col, d.code, d.message) for d in result.diagnostics if d.path in part), key=repr)

        whole = run([os.path.join(package, name) for name in texts])
        assert run(part) == whole
        assert run(part, fast=False) == whole


# What the modules beyond a run of ``pkg/models`` may become between two runs (None: no file).
HELPERS_VERSIONS = {
    "syncs": "import torch\n\n\ndef wait(x):\n    torch.cuda.synchronize()\n",
    "quiet": "import torch\n\n\ndef wait(x):\n    return x.to(x.device)\n",
    "another function": "import torch\n\n\ndef settle(x):\n    torch.cuda.synchronize()\n",
    "re-export": "from pkg.deep import wait as wait\n",
    "absent": None,
}
DEEP_VERSIONS = {
    "syncs": "import torch\n\n\ndef wait(x):\n    x.cpu()\n    torch.cuda.synchronize()\n",
    "quiet": "def wait(x):\n    return x\n",
    "absent": None,
}


@examples(15)
@given(st.lists(st.tuples(st.sampled_from(sorted(HELPERS_VERSIONS)), st.sampled_from(sorted(DEEP_VERSIONS))), min_size=1, max_size=4))
def test_a_warm_run_of_part_of_a_package_reports_what_a_cold_one_does(history):
    """A run of ``pkg/models`` whose ``forward`` calls ``pkg.helpers.wait`` caches its plan, which
    rests on the files it read beyond the run, and on those it looked for and did not find or
    did not read (``KeptPlan.beyond``). After each step of a history of edits to
    ``pkg/helpers.py`` and ``pkg/deep.py`` (a sync, none, another function, a re-export, no file),
    the run with the cache reports what a run without it does."""
    with tempfile.TemporaryDirectory() as folder:
        texts = {
            "pkg/__init__.py": "", "pkg/models/__init__.py": "", "pkg/models/util.py": "def helper(x):\n    return x\n",
            "pkg/models/model.py": (
                "from torch import nn\n\nfrom pkg.helpers import wait\n\n\n"
                "class Model(nn.Module):\n    def forward(self, x):\n        wait(x)\n        return x\n"
            ),
        }
        for name, text in texts.items():
            os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
            with open(os.path.join(folder, name), "w", encoding="utf-8") as handle:
                handle.write(text)
        part = [os.path.join(folder, "pkg/models", name) for name in ("model.py", "util.py")]
        cache = os.path.join(folder, "cache")

        def run(cache_dir: str | None) -> list:
            result = Linter(make_settings(**OPTIONS), cache_dir=cache_dir).run(part, jobs=1)
            return sorted(((d.path, d.line, d.code, d.message) for d in result.diagnostics), key=repr)

        run(cache)
        for helpers, deep in history:
            for name, text in (("pkg/helpers.py", HELPERS_VERSIONS[helpers]), ("pkg/deep.py", DEEP_VERSIONS[deep])):
                path = os.path.join(folder, name)
                if text is None:
                    if os.path.exists(path):
                        os.remove(path)
                else:
                    with open(path, "w", encoding="utf-8") as handle:
                        handle.write(text)
            assert run(cache) == run(None), (helpers, deep)


def test_engine_like_programs_make_rules_fire(fired):
    """The template strategy is only worth its time if rules fire (run after the test above)."""
    from sync_lint.rules import all_rules

    if not any(not rule.tool_rule for rule in all_rules()):
        pytest.skip("no GPU rules registered yet")
    if not fired:
        pytest.skip("run together with test_engine_like_programs")
    assert {code for code in fired if code.startswith(("GPU1", "GPU2"))}, fired
