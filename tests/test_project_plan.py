"""The project plan (``pipeline.project_plan``): which functions a run of many files parses.

Each case builds a small package, plans it, and checks that the functions a finding rests on
are kept across files (through imports, re-exports, inherited methods) while unrelated ones
are masked, and that the findings equal the plain path's (``fast=False``: every file whole).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import hypothesis
import pytest
from broken_files import BROKEN_KINDS, write_broken

from sync_lint.api import make_settings
from sync_lint.pipeline import lint_file, runner
from sync_lint.pipeline.discover import DEFAULT_EXCLUDE, Discovery
from sync_lint.pipeline.source import read, split_lines
from sync_lint.pipeline.units import MaskPlan

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n):
    offs = tl.arange(0, 128)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs))


def copy_rows(src, dst):
    _copy_kernel[(1,)](src, dst, src.numel())


def describe(x):
    return f"{x.shape}"
'''

OPS_INIT = "from .kernels import copy_rows\n"

CALLER = '''
import torch

from pkg.ops import copy_rows


def forward_step(block_table, out):
    copy_rows(block_table[:, 0], out)


def unrelated(x):
    return x + 1


def also_unrelated(y):
    return torch.zeros(y)
'''

HELPERS = '''
import torch


def host_count(x):
    torch.cuda.synchronize()
    return x.shape[0]


def never_called_from_hot_code(x):
    return x * 2
'''

BASE = '''
import torch


class BaseBackend:
    def sync_point(self, x):
        torch.cuda.synchronize()
        return x

    def cold_helper(self, x):
        return x


def stand_alone(x):
    return x
'''

MODEL = '''
import torch

from pkg.helpers import host_count
from pkg.base import BaseBackend


class AttnMetadataBuilder(BaseBackend):
    def build(self, x):
        n = host_count(x)
        y = self.sync_point(x)
        return x[:n] + y

    def describe(self):
        return "layer"
'''


def write_package(root: Path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / "pkg" / "__init__.py").touch()
    return Discovery(DEFAULT_EXCLUDE, root).files([str(root)])


def checked(root: Path, *args: str) -> tuple[list[str], int]:
    """``sync-lint check ARGS`` run in ``root`` as a user runs it: each finding as ``path:line:col:
    CODE``, and the exit status; never a traceback."""
    from cli_runner import run

    result = run("check", *args, "--output-format", "concise", cwd=root)
    assert "Traceback" not in result.stderr, result
    return [" ".join(line.split(" ", 2)[:2]) for line in result.stdout.splitlines()], result.returncode


def staged_pair(root: Path, files: dict[str, str]) -> list[str]:
    """A package of ``files`` and a ``util.py``: the run of its ``model.py`` and ``util.py``, as
    pre-commit checks two staged files."""
    written = write_package(root, {**files, "util.py": "def helper(x):\n    return x\n"})
    return [path for path in written if path.endswith(("/model.py", "/util.py"))]


def planned(run: list[str]) -> tuple[runner.Linter, object]:
    """A linter of the default settings, and its plan of ``run`` (``Linter._plan``)."""
    linter = runner.Linter(make_settings())
    return linter, linter._plan(run, None, {})


def read_beyond(plan, root: Path) -> list[str]:
    """The files a plan lints beyond its run (``ProjectPlan.silent``), relative to ``root``."""
    return sorted(Path(path).relative_to(root).as_posix() for path in plan.silent)


def kept_functions(linter: runner.Linter, files: list[str], plan=None) -> dict[str, set[str]]:
    """File name -> the names of the function units the plan keeps there (``plan``: of a run
    these files are read in, else of these files)."""
    plan = plan or linter.outline_all(files, None, {})
    found = {}
    for path in files:
        text = read(path).text
        units = MaskPlan(text, split_lines(text))
        kept = plan.units_to_keep(path)
        indices = range(len(units.units)) if kept is None else kept.indices
        found[Path(path).name] = {units.units[i].name for i in indices if units.units[i].kind in ("function", "method")}
    return found


def findings(files: list[str], fast: bool, **options) -> list[tuple]:
    linter = runner.Linter(make_settings(**options), fast=fast)
    return sorted((d.path, d.line, d.col, d.code, d.message, d.fix) for d in linter.run(files, jobs=1).diagnostics)


@pytest.fixture
def package(tmp_path) -> list[str]:
    return write_package(tmp_path, {
        "ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS, "caller.py": CALLER,
        "helpers.py": HELPERS, "base.py": BASE, "model.py": MODEL,
    })


def test_callers_of_a_kernel_wrapper_are_kept_through_a_reexport(package):
    kept = kept_functions(runner.Linter(make_settings()), package)
    assert {"_copy_kernel", "copy_rows"} <= kept["kernels.py"]
    assert "forward_step" in kept["caller.py"]  # calls it as ``pkg.ops.copy_rows``
    assert not {"unrelated", "also_unrelated"} & kept["caller.py"]


LOOKALIKES = '''
import torch

from pkg.ops import copy_rows


def forward(x):
    return x


def calls_by_name(t, out):
    copy_rows(t[:, 0], out)


def mentions_only(layer, x):
    # methods of an object of unknown class, named like functions of this file: no calls of them
    return layer.calls_by_name(x, x) + layer.forward(x)


class Model:
    def run(self, x):
        return self.forward(x)

    def forward(self, x):
        return forward(x)
'''


def test_a_unit_that_only_mentions_a_name_is_no_caller(tmp_path):
    """Calls are resolved as the analyses resolve them: ``layer.calls_by_name()`` on an object
    of unknown class reaches no function of the project, though a function of this file has
    that name (a caller of the kernel wrapper)."""
    files = write_package(tmp_path, {"ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS, "lookalikes.py": LOOKALIKES})
    kept = kept_functions(runner.Linter(make_settings()), files)
    assert kept["lookalikes.py"] == {"calls_by_name"}


MIDDLE = '''
from pkg.ops import copy_rows


def middle(x, out):
    copy_rows(x, out)
    return out.stride(0)


def other_wrapper(y, out):
    copy_rows(y, out)
    return out.stride(0)
'''

TOP = '''
import torch

from pkg.middle import middle, other_wrapper
from pkg.ops import copy_rows


def top(t, out):
    middle(t.t(), out)


def plain_values(out):
    scratch = torch.empty(4, 4)
    copy_rows(scratch, out)
    other_wrapper(scratch.contiguous(), out)


def plain_parameters(t, out):
    other_wrapper(t, out)
'''

UNDER_IF = '''
import torch

from pkg.middle import other_wrapper

if torch.cuda.is_available():

    def main(t):
        other_wrapper(t[:, 0], t)
'''


def test_only_calls_handed_a_view_or_a_cast_and_the_summaries_they_rest_on_are_kept(tmp_path):
    """A GPU1xx finding needs a sink, or a function whose summary may make one, handed a value
    that may be a view or a cast; the summaries it rests on are those of that function and of
    what it hands its parameters to. Callers handing only fresh tensors or their own
    parameters, which nothing hands a view, cannot report and carry no summary that matters."""
    files = write_package(tmp_path, {"ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS, "middle.py": MIDDLE, "top.py": TOP})
    kept = kept_functions(runner.Linter(make_settings()), files)
    assert kept["top.py"] == {"top"}
    assert kept["middle.py"] == {"middle"}  # ``other_wrapper`` is never handed a view
    assert kept["kernels.py"] == {"copy_rows", "_copy_kernel"}
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert [(Path(entry[0]).name, entry[3]) for entry in fast] == [("top.py", "GPU102")], fast


def test_a_function_outside_every_unit_handing_a_view_keeps_its_callee(tmp_path):
    """A function under a module-level ``if`` is in no unit of its own: the code outside every
    unit is always parsed, and the functions it hands a view to must be too."""
    files = write_package(tmp_path, {"ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS, "middle.py": MIDDLE, "script.py": UNDER_IF})
    kept = kept_functions(runner.Linter(make_settings()), files)
    assert kept["middle.py"] == {"other_wrapper"}
    assert kept["kernels.py"] == {"copy_rows", "_copy_kernel"}
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert [(Path(entry[0]).name, entry[3]) for entry in fast] == [("script.py", "GPU102")], fast


NEEDS = '''
from pkg.ops import copy_rows


def launch(x, scale, out):
    copy_rows(x, out)
    return out.data_ptr(), scale.numel()


def fill(y, out):
    copy_rows(out, out)
    return out.data_ptr(), y.shape
'''

HANDS_VIEWS = '''
import torch

from pkg.needs import fill, launch


def passes_a_view_to_a_needed_parameter(t, out):
    launch(t.t(), torch.ones(1), out)


def passes_a_view_to_a_parameter_not_needed(t, out):
    launch(t.contiguous(), t[:, 0], out)
    fill(t[:, 0], out)
'''


def test_only_parameters_that_may_reach_a_sink_count(tmp_path):
    """``launch`` hands ``x`` to a kernel wrapper, but only reads the metadata of ``scale``, and
    ``fill`` never hands ``y`` on: a view handed to those cannot make a finding. Of ``launch``'s
    callees, only those its parameter ``x`` reaches keep their summaries needed."""
    files = write_package(tmp_path, {
        "ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS, "needs.py": NEEDS, "views.py": HANDS_VIEWS,
    })
    kept = kept_functions(runner.Linter(make_settings()), files)
    assert kept["views.py"] == {"passes_a_view_to_a_needed_parameter"}
    assert kept["needs.py"] == {"launch"}
    assert kept["kernels.py"] == {"copy_rows", "_copy_kernel"}
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert [(Path(entry[0]).name, entry[1], entry[3]) for entry in fast] == [("views.py", 8, "GPU102")], fast


NEW_TENSORS = '''
from pkg.middle import middle


def hands_new_tensors(t, out):
    middle(t.t() * 2, out)
    middle(t[:, 0].amax(-1), out)
    scaled = t[:, 0].clamp(0, 1)
    middle(scaled, out)


def hands_a_view(t, out):
    middle(t.t(), out)


def relay(x, out):
    middle(x + 0, out)


def hands_a_view_to_the_relay(t, out):
    relay(t.t(), out)
'''


def test_a_new_tensor_made_of_a_view_is_not_handed_a_view(tmp_path):
    """Arithmetic, a reduction or an elementwise method makes a new tensor whatever it is made
    of (``scout.sinks._NeverAView``): a caller handing only those reports nothing and is not
    kept. Which parameters a value holds is still read from all of it: ``relay`` hands ``x + 0``
    on, so a view handed to ``relay`` keeps its caller (the analysis may read it more kindly)."""
    files = write_package(tmp_path, {
        "ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS, "middle.py": MIDDLE, "new.py": NEW_TENSORS,
    })
    kept = kept_functions(runner.Linter(make_settings()), files)
    assert kept["new.py"] == {"hands_a_view", "relay", "hands_a_view_to_the_relay"}
    assert kept["middle.py"] == {"middle"}
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert [(Path(entry[0]).name, entry[1], entry[3]) for entry in fast] == [("new.py", 13, "GPU102")], fast


def test_what_a_value_holds_includes_the_parts_never_suspect():
    """``keys`` (the parameters a value may hold) reads a pruned part too; ``suspect`` does not."""
    import ast

    from sync_lint.api import make_settings
    from sync_lint.pipeline.scout.flows import _ExprFacts
    from sync_lint.pipeline.scout.sinks import _makes_view, _NeverAView
    from sync_lint.pipeline.scout.syntax import FileNames

    def facts_of(text):
        tree = ast.parse(text)
        return _ExprFacts(tree.body[-1].value, _makes_view, _NeverAView(FileNames(tree, make_settings())))

    facts = facts_of("(a.t() + b, c[:, 0].amax(-1), self.w)")
    assert facts.keys() == {"a", ".t", "b", "c", ".amax", "self", ".w"}
    assert not facts.suspect({"a", "c"}, set())
    assert facts.suspect({"self"}, set())
    # a call of a function of the file is of unknown layout, whatever it is handed
    facts = facts_of("helper(self.w.t(), x)")
    assert facts.keys() == {"helper", "self", ".w", ".t", "x"}
    assert not facts.suspect({"self", "x"}, {"w"})


def test_callees_of_hot_code_are_kept_across_files(package):
    kept = kept_functions(runner.Linter(make_settings()), package)
    assert "build" in kept["model.py"]
    assert "host_count" in kept["helpers.py"]
    assert "never_called_from_hot_code" not in kept["helpers.py"]
    # ``self.sync_point`` of a base class in another file
    assert "sync_point" in kept["base.py"]
    assert not {"cold_helper", "stand_alone"} & kept["base.py"]


HOT_MODULES = '''
import torch
from torch import nn

from pkg.helpers import host_count, never_called_from_hot_code


class Quiet(nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            x = never_called_from_hot_code(x)
        return self.proj(x) * 2


class Loud(nn.Module):
    def forward(self, x):
        return host_count(x)


class Direct(nn.Module):
    def forward(self, x):
        positions = torch.arange(8, device=x.device)
        if positions[0]:
            return x
        return x + 1
'''


def test_hot_code_that_cannot_reach_a_sync_is_masked(tmp_path):
    """A hot scope reports only a sync on a value from a named device, its own or in what it
    calls: a ``forward`` whose code names no device and calls nothing that may sync is masked,
    and so is what it calls."""
    files = write_package(tmp_path, {"helpers.py": HELPERS, "hot.py": HOT_MODULES})
    plan = runner.Linter(make_settings()).outline_all(files, None, {})
    kept = {}
    for path in files:
        text = read(path).text
        units = MaskPlan(text, split_lines(text))
        found = plan.units_to_keep(path)
        kept[Path(path).name] = {units.qualified(i) for i in (found.indices if found else units.functions())}
    assert kept["hot.py"] == {("Loud", "forward"), ("Direct", "forward")}
    assert kept["helpers.py"] == {(None, "host_count")}
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert {(Path(entry[0]).name, entry[1]) for entry in fast} >= {("hot.py", 17), ("hot.py", 23)}, fast


HOST_BOUNDS = '''
def host_bounds(cu_seqlens):
    return tuple(int(bound) for bound in cu_seqlens.tolist())


def host_lengths(lens):
    return lens.tolist()


def host_tail(lens):
    return lens[-1].item()


def shape_of(x):
    return x.shape
'''

HANDING_GPU_VALUES = '''
import torch
from torch import nn

from pkg.bounds import host_bounds, host_lengths, host_tail, shape_of


class Packed(nn.Module):
    def forward(self, x, counts_cpu, lens):
        cu_seqlens = torch.cumsum(counts_cpu, 0).to(x.device)
        n = shape_of(cu_seqlens)
        return host_bounds(cu_seqlens), host_lengths(lens), n


class Plain(nn.Module):
    def forward(self, x, lens):
        return x * host_tail(lens)
'''


def test_a_function_of_another_file_handed_a_gpu_value_it_syncs_on_is_kept(tmp_path):
    """A function with an explicit sync on its parameter, and no sync of its own, syncs where a
    hot call of another file hands it a GPU value there (``FunctionSummary.syncs_on``): the plan
    keeps it where a function whose code may hold a value from a named device calls it
    (``host_bounds``, and ``host_lengths`` too: which argument the call hands is not told), not
    where only other code does (``host_tail``), nor a function with no such sync (``shape_of``)."""
    files = write_package(tmp_path, {"bounds.py": HOST_BOUNDS, "model.py": HANDING_GPU_VALUES})
    kept = kept_functions(runner.Linter(make_settings()), files)
    assert kept["bounds.py"] == {"host_bounds", "host_lengths"}
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert [(Path(path).name, line, code) for path, line, _, code, _, _ in fast] == [("model.py", 12, "GPU201")]
    assert "on the GPU value handed to `cu_seqlens`" in fast[0][4]

DEVICE_HELPERS = '''
import torch


def device_buffer(n, device):
    return torch.zeros(n, device=device)


def count_on_device(n, device):
    lens = torch.arange(n, device=device)
    return int(lens.sum())


def host_branch(x, device):
    if x.shape[0] > 1:
        return x.to(device)
    return x
'''

HOT_DEVICE_CALLER = '''
from torch import nn

from pkg.devices import count_on_device, device_buffer, host_branch


class Model(nn.Module):
    def forward(self, x):
        buf = device_buffer(4, x.device)
        y = host_branch(x, x.device)
        return count_on_device(4, x.device) + buf + y
'''


def test_a_function_that_names_a_device_but_syncs_on_no_value_from_it_is_masked(tmp_path):
    """Hot code's callees are kept only where they may sync on a value from a named device
    (``Scout.sync_outline``): a function that names a device and has no sync site
    (``device_buffer``), or whose only sync site reads a host value (``host_branch``), records
    no sync in its summary; one that syncs on a tensor it put on a device is kept."""
    files = write_package(tmp_path, {"devices.py": DEVICE_HELPERS, "hot.py": HOT_DEVICE_CALLER})
    kept = kept_functions(runner.Linter(make_settings()), files)
    assert kept["devices.py"] == {"count_on_device"}
    assert kept["hot.py"] == {"forward"}
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert [(Path(entry[0]).name, entry[1], entry[3]) for entry in fast] == [("hot.py", 11, "GPU201")], fast


MEMOISED = '''
import functools

import torch


@functools.lru_cache(maxsize=4)
def block_sizes(n, device):
    return torch.full((n,), 4, device=device)


@functools.lru_cache(maxsize=4)
def non_pad_index(sizes: torch.LongTensor, width: int):
    positions = torch.arange(sizes.shape[0] * width, device=sizes.device).view(-1, width)
    return positions[torch.arange(width, device=sizes.device)[None, :] < sizes[:, None]]


class CachedMetadataBuilder:
    def build(self, n, device):
        return non_pad_index(block_sizes(n, device), 4)


class FreshMetadataBuilder:
    def build(self, n, device):
        return non_pad_index(torch.full((n,), 4, device=device), 4)
'''


def test_a_memoised_function_whose_result_hot_code_hands_on_is_kept(tmp_path):
    """``non_pad_index`` syncs (a mask index), but on a tensor ``block_sizes``'s cache handed
    out it runs once per key (``SyncAnalysis.cached_call``), which the analysis can tell only
    from ``block_sizes``'s decorator: so that function is kept though it cannot sync itself.
    A tensor made per step (``FreshMetadataBuilder``) is still reported. SGLang's
    ``VideoSparseAttentionMetadataBuilder.build`` is the case."""
    files = write_package(tmp_path, {"memo.py": MEMOISED, "helpers.py": HELPERS})
    kept = kept_functions(runner.Linter(make_settings()), files)
    assert {"block_sizes", "non_pad_index", "build"} <= kept["memo.py"]
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert [(Path(entry[0]).name, entry[1], entry[3]) for entry in fast] == [("memo.py", 25, "GPU201")], fast


DECLARING = '''
from vllm.utils.gpu_sync_debug import gpu_sync_allowed

from pkg.remote import remote_count


def local_count(x):
    return x.shape[0]


class Runner:
    def step(self, x):
        with gpu_sync_allowed():
            n = local_count(x)
        with gpu_sync_allowed():
            m = remote_count(x)
        return n + m
'''

REMOTE = '''
from torch import nn


def remote_count(x):
    return x.shape[0]


class Head(nn.Module):
    def forward(self, x):
        return x + 1
'''


def test_a_declaration_block_keeps_only_what_it_calls_in_its_own_file(tmp_path):
    """GPU203 looks into the functions of the declaration's own file and takes a call of
    another file's as a possible sync, whatever it does (``SyncAnalysis.function_may_sync``):
    so ``local_count`` is kept (and the block calling it is stale), ``remote_count`` is not
    (and its block stays alive)."""
    files = write_package(tmp_path, {"declaring.py": DECLARING, "remote.py": REMOTE})
    kept = kept_functions(runner.Linter(make_settings()), files)
    assert kept["declaring.py"] == {"local_count", "step"}
    assert "remote_count" not in kept["remote.py"]
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert [(Path(entry[0]).name, entry[1], entry[3]) for entry in fast] == [("declaring.py", 13, "GPU203")], fast


OPS_UNDER_A_BLOCK = '''
import torch

if hasattr(torch.ops._C, "rms_norm"):

    def fused_norm(x):
        torch.ops._C.rms_norm(x)


class Loader:
    def make(self):
        def load(w):
            fused_norm(w.t())

        return load

    def unrelated(self, x):
        return x.view(-1, 2)
'''


def test_a_wrapper_defined_under_a_module_level_block_keeps_its_callers(tmp_path):
    """``fused_norm`` is no unit (it is defined under ``if hasattr(...)``): the module code's
    unit holds it, is a seed of the sink rules, and a call of it reaches that unit, so the
    method handing it a transpose is kept and reports, as on the plain path (SGLang's
    ``quark_w4a4_mxfp4.py``)."""
    files = write_package(tmp_path, {"wrapped.py": OPS_UNDER_A_BLOCK, "helpers.py": HELPERS})
    kept = kept_functions(runner.Linter(make_settings()), files)
    assert kept["wrapped.py"] == {"make"}
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert [(Path(entry[0]).name, entry[1], entry[3]) for entry in fast] == [("wrapped.py", 13, "GPU102")], fast


LAUNCH_UNDER_A_BLOCK = '''
import torch

from pkg.ops.kernels import _copy_kernel

if HAS_TRITON:

    def copy_fast(src, dst):
        _copy_kernel[(1,)](src, dst, src.numel())


class Embedding:
    def forward(self, x, out):
        copy_fast(x.t(), out)

    def unrelated(self, x):
        return x.view(-1, 2)


def also_unrelated(y):
    return y + 1
'''


def test_a_launch_under_a_module_level_block_keeps_its_callers_not_the_whole_file(tmp_path):
    """A launch in a function defined under ``if HAS_TRITON:`` is module code (vLLM's
    ``qwen3_vl.py``): the function is named by its callers, as a wrapper holding a sink's
    words is, so the method handing it a transpose is kept and reports, and the rest of the
    file is masked instead of parsed whole."""
    files = write_package(tmp_path, {"ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS, "embed.py": LAUNCH_UNDER_A_BLOCK})
    linter = runner.Linter(make_settings())
    plan = linter.outline_all(files, None, {})
    assert plan.units_to_keep(next(p for p in files if p.endswith("embed.py"))) is not None  # not parsed whole
    assert kept_functions(linter, files)["embed.py"] == {"forward"}
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert [(Path(entry[0]).name, entry[1], entry[3]) for entry in fast] == [("embed.py", 14, "GPU102")], fast


def test_findings_equal_the_plain_path(package):
    fast = findings(package, fast=True)
    assert fast == findings(package, fast=False)
    # the cross-file cases are really found: a re-exported wrapper, a helper, an inherited method
    messages = [entry[4] for entry in fast]
    assert any("copy_rows" in m for m in messages), messages
    assert any("host_count" in m for m in messages), messages
    assert any("sync_point" in m for m in messages), messages


def test_masked_file_with_a_finding_gets_the_whole_file_fix(tmp_path):
    """A fix that edits its node's own span (``.contiguous()``) is planned on the masked parse,
    which keeps lines and columns: the file is not linted again, and the fix equals the plain
    path's."""
    caller = CALLER.replace("block_table[:, 0]", "block_table[:, 0].to(torch.int32)")
    files = write_package(tmp_path, {"ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS, "caller.py": caller})
    fast = findings(files, fast=True)
    assert any(entry[5] is not None for entry in fast), fast
    assert fast == findings(files, fast=False)
    linter = runner.Linter(make_settings())
    plan = linter.outline_all(files, None, {})
    path = next(p for p in files if p.endswith("caller.py"))
    facts = linter.lint_one(path, plan.units_to_keep(path))
    assert "pkg.caller.unrelated" in facts.functions  # masked, but defined
    assert not facts.fixes_need_whole_file and [p.diagnostic.fix for p in facts.pending if p.diagnostic.fix is not None]


GUARD = "vllm.utils:gpu_sync_allowed"


SYNC_IN_BUILD = MODEL.replace("        n = host_count(x)\n", "        n = int(x.sum().item())\n")


def masked_lint(files: list[str], name: str, **options) -> lint_file.FileFacts:
    """The facts of the file ``name`` as a run of ``files`` lints it (some units masked)."""
    linter = runner.Linter(make_settings(**options))
    plan = linter.outline_all(files, None, {})
    path = next(p for p in files if p.endswith(name))
    kept = plan.units_to_keep(path)
    assert kept is not None  # some units are masked
    return linter.lint_one(path, kept)


def test_a_guard_fix_is_planned_on_the_masked_parse(tmp_path):
    """Wrapping a sync in ``with gpu_sync_allowed():`` edits the statement's lines and adds an
    import after the others: both are checked against the text (``Editor.replace_statement``,
    ``guards._import_edit``), so the masked parse plans the fix and the file is not linted
    again; the fix equals the plain path's."""
    files = write_package(tmp_path, {"model.py": SYNC_IN_BUILD, "base.py": BASE, "helpers.py": HELPERS})
    fast = findings(files, fast=True, sync_guard=GUARD)
    assert any(entry[3] == "GPU201" and entry[5] is not None for entry in fast), fast
    assert fast == findings(files, fast=False, sync_guard=GUARD)
    facts = masked_lint(files, "model.py", sync_guard=GUARD)
    assert not facts.fixes_need_whole_file
    assert [d.code for d in facts.diagnostics if d.fix is not None] == ["GPU201"]


# Guard fixes beside masked units, and the options of the run: without GPU203 (whose triggers
# are the declarations' names, the guard's by default), a unit naming the guard is masked.
# Where the fix's local edits cannot be placed: it renders the whole module (``Editor.transform``).
NEEDS_THE_WHOLE_MODULE = {
    # The statement's own rendering ends with a newline the text does not have.
    "the sync on the last line, without a newline": (
        SYNC_IN_BUILD.partition("    def build")[0]
        + '    def describe(self):\n        return "layer"\n\n'
        + "    def build(self, x):\n        y = self.sync_point(x)\n        return x[: int(x.sum().item())] + y",
        {},
    ),
}
# Masked units whose part in the fix the masked parse knows:
PLANNED_ON_THE_MASKED_PARSE = {
    # Two blank lines go between the new import and a ``def``, one before other code: the
    # import adds the one missing before this ``def``, not none as before a ``pass``
    # (``Editor.stands_for_a_function``).
    "a masked unit right after the imports": (SYNC_IN_BUILD.replace(
        "\n\nclass AttnMetadataBuilder", "\ndef stand_alone(x):\n    return x\n\n\nclass AttnMetadataBuilder"
    ), {}),
    "a decorated masked unit under a comment right after the imports": (SYNC_IN_BUILD.replace(
        "\n\nclass AttnMetadataBuilder",
        "\n# helpers\n@functools.cache\ndef stand_alone(x):\n    return x\n\n\nclass AttnMetadataBuilder",
    ), {}),
    # libcst renders a new block at the indent of the first indented line (``Editor.default_indent``).
    "the first indented line in a masked unit": (SYNC_IN_BUILD.replace(
        "\n\nclass AttnMetadataBuilder", "\nLAYERS = 2\n\n\ndef stand_alone(x):\n  return x\n\n\nclass AttnMetadataBuilder"
    ), {}),
    "a masked unit after other code": (SYNC_IN_BUILD.replace(
        "\n\nclass AttnMetadataBuilder", "\nLAYERS = 2\n\n\ndef stand_alone(x):\n    return x\n\n\nclass AttnMetadataBuilder"
    ), {}),
    # The file defines the guard: no import (``FileContext.masked`` lists the masked functions).
    "the guard defined in a masked unit": (SYNC_IN_BUILD.replace(
        "\n\nclass AttnMetadataBuilder",
        "\nLAYERS = 2\n\n\ndef gpu_sync_allowed():\n    return contextlib.nullcontext()\n\n\nclass AttnMetadataBuilder",
    ), {"select": ["GPU201"]}),
    # A function-level import binds nothing where the fix calls the guard: the import is added.
    "the guard imported in a masked unit": (SYNC_IN_BUILD.replace(
        '        return "layer"\n', '        from vllm.utils import gpu_sync_allowed\n\n        return gpu_sync_allowed\n'
    ), {"select": ["GPU201"]}),
}


@pytest.mark.parametrize("case", sorted(PLANNED_ON_THE_MASKED_PARSE))
def test_a_guard_fix_beside_masked_units_is_planned_on_the_masked_parse(tmp_path, case):
    text, options = PLANNED_ON_THE_MASKED_PARSE[case]
    files = write_package(tmp_path, {"model.py": text, "base.py": BASE, "helpers.py": HELPERS})
    fast = findings(files, fast=True, sync_guard=GUARD, **options)
    fixes = [entry[5] for entry in fast if entry[3] == "GPU201" and entry[5] is not None]
    assert fixes, fast
    assert fast == findings(files, fast=False, sync_guard=GUARD, **options)
    imports = [edit.content for fix in fixes for edit in fix.edits if "import" in edit.content]
    added = "" if "defined" in case else "from vllm.utils import gpu_sync_allowed\n" + "\n" * ("right after" in case)
    assert imports == ([added] * len(fixes) if added else []), imports
    facts = masked_lint(files, "model.py", sync_guard=GUARD, **options)
    assert len(facts.functions) > len(kept_functions(runner.Linter(make_settings(**options)), files)["model.py"])
    assert not facts.fixes_need_whole_file
    assert [d.code for d in facts.diagnostics if d.fix is not None] == ["GPU201"]


@pytest.mark.parametrize("case", sorted(NEEDS_THE_WHOLE_MODULE))
def test_a_guard_fix_the_masked_parse_cannot_plan_is_planned_on_the_whole_file(tmp_path, case):
    """Where the fix depends on a masked unit, the masked parse plans none
    (``FileFacts.fixes_need_whole_file``) and the run lints the file whole, so that the fix
    equals the plain path's."""
    text, options = NEEDS_THE_WHOLE_MODULE[case]
    files = write_package(tmp_path, {"model.py": text, "base.py": BASE, "helpers.py": HELPERS})
    fast = findings(files, fast=True, sync_guard=GUARD, **options)
    assert any(entry[3] == "GPU201" and entry[5] is not None for entry in fast), fast
    assert fast == findings(files, fast=False, sync_guard=GUARD, **options)
    facts = masked_lint(files, "model.py", sync_guard=GUARD, **options)
    assert facts.diagnostics and all(d.fix is None for d in facts.diagnostics)
    assert {(d.line, d.col, d.code) for d in facts.diagnostics} <= facts.fixes_need_whole_file


@pytest.mark.parametrize("text", [
    "def f():\n  return 1\n\n\ndef g():\n    return 2\n",
    "import x\n\nif x:\n\tx = 1\n",
    "def f(a,\n        b):\n      return a\n",
    'X = """\n    not an indent\n"""\nclass C:\n   y = 1\n',
    "x = (1,\n     2)\n",
])
def test_the_whole_files_default_indent_is_read_on_a_masked_parse(text):
    """``Editor.default_indent`` of a masked parse is what libcst takes for the whole file."""
    import libcst

    from sync_lint.fixes import Editor

    assert Editor(libcst.parse_module("pass\n"), text, {}, masked=True).default_indent == libcst.parse_module(text).default_indent


MODEL_WITH_A_LAUNCH = NEEDS_THE_WHOLE_MODULE["the sync on the last line, without a newline"][0].replace(
    "from pkg.base import BaseBackend\n", "from pkg.base import BaseBackend\nfrom pkg.ops import copy_rows\n"
).replace(
    "    def describe(self):\n",
    "    def forward(self, block_table, out):\n        copy_rows(block_table[:, 0].to(torch.int32), out)\n\n    def describe(self):\n",
)


@pytest.mark.parametrize("ignored", [True, False])
def test_a_file_is_linted_whole_only_for_a_reported_finding_whose_fix_needs_it(tmp_path, ignored):
    """The fix of GPU201's finding needs the whole module here; GPU101's edits its own span. A masked
    file whose GPU201 finding is not reported (``per-file-ignores`` here; in an engine, mostly
    findings conditional on a callee) keeps its masked parse and GPU101's fix planned there; one
    that reports it is linted whole (``FileFacts.fixes_need_whole_file`` is then empty). The
    findings and fixes equal the plain path's either way."""
    files = write_package(tmp_path, {
        "ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS, "model.py": MODEL_WITH_A_LAUNCH,
        "base.py": BASE, "helpers.py": HELPERS,
    })
    options = {"sync_guard": GUARD, "per_file_ignores": {"*model.py": ["GPU201"]} if ignored else {}}
    fast = findings(files, fast=True, **options)
    assert fast == findings(files, fast=False, **options)
    reported = {entry[3] for entry in fast if entry[0].endswith("model.py") and entry[5] is not None}
    assert reported == ({"GPU101"} if ignored else {"GPU101", "GPU201"}), fast
    result = runner.Linter(make_settings(**options)).run(files, jobs=1)
    model = next(facts for facts in result.facts if facts.path.endswith("model.py"))
    assert bool(model.fixes_need_whole_file) is ignored
    assert "pkg.model.AttnMetadataBuilder.describe" in model.functions  # defined either way


def test_a_file_changed_after_its_outline_is_parsed_whole(package):
    linter = runner.Linter(make_settings())
    plan = linter.outline_all(package, None, {})
    caller = next(p for p in package if p.endswith("caller.py"))
    kept = plan.units_to_keep(caller)
    assert kept is not None and len(kept.indices) == 1
    Path(caller).write_text(Path(caller).read_text() + "\n\ndef added(x):\n    return x\n")
    facts = linter.lint_one(caller, kept)
    assert not facts.fixes_need_whole_file and "pkg.caller.unrelated" in facts.functions


def test_masked_functions_still_count_as_defined(package):
    """A call of a masked function must not be followed through an import of the same name."""
    linter = runner.Linter(make_settings())
    plan = linter.outline_all(package, None, {})
    caller = next(p for p in package if p.endswith("caller.py"))
    facts = linter.lint_one(caller, plan.units_to_keep(caller))
    assert {"pkg.caller.unrelated", "pkg.caller.also_unrelated", "pkg.caller.forward_step"} <= facts.functions


FACADE = '''
import torch

from pkg.ops.kernels import copy_rows as copy_rows_fast


class Options:
    dtype = torch.float16

    def describe(self, x):
        return x.to(torch.int32)  # a cast no sink is handed: GPU101 runs on the file, nothing is kept
'''

THROUGH_THE_FACADE = '''
from pkg import facade


def step(block_table, out):
    facade.copy_rows_fast(block_table[:, 0], out)
'''


def test_a_file_kept_nothing_of_is_not_parsed_but_its_imports_are_followed(tmp_path):
    """``facade.py`` holds no function that matters (``KeptUnits.names_only``): it is not
    parsed, yet the call through its import still reaches the kernel wrapper, and its
    functions still count as defined."""
    files = write_package(tmp_path, {"ops/__init__.py": "", "ops/kernels.py": KERNELS, "facade.py": FACADE,
                                     "user.py": THROUGH_THE_FACADE})
    linter = runner.Linter(make_settings())
    plan = linter.outline_all(files, None, {})
    facade = next(p for p in files if p.endswith("facade.py"))
    kept = plan.units_to_keep(facade)
    assert kept is not None and kept.names_only and kept.active
    facts = linter.lint_one(facade, kept)
    assert not facts.parsed
    assert facts.imports["copy_rows_fast"] == "pkg.ops.kernels.copy_rows"
    assert "pkg.facade.Options.describe" in facts.functions
    found = findings(files, fast=True)
    assert [(Path(f[0]).name, f[3]) for f in found] == [("user.py", "GPU102")]
    assert found == findings(files, fast=False)


# A facade with none of any rule's words: only re-exports, so nothing of it is linted; calls
# through it must still be followed, by the plan (which outlines its imports) and by the
# findings (the index reads them: ``pipeline.unread``) alike.
PLAIN_FACADE = "from pkg.ops.kernels import copy_rows as copy_rows_fast\nfrom pkg.ops.kernels import describe\n"
SECOND_FACADE = "from pkg.facade import copy_rows_fast as copy\n"  # a facade of the facade

THROUGH_TWO_FACADES = '''
from pkg.outer import copy


def step_twice_removed(block_table, out):
    copy(block_table[:, 1], out)
'''


@pytest.mark.parametrize("fast", [True, False])
def test_calls_through_a_module_no_rule_reads_are_followed(tmp_path, fast):
    files = write_package(tmp_path, {
        "ops/__init__.py": "", "ops/kernels.py": KERNELS, "facade.py": PLAIN_FACADE, "outer.py": SECOND_FACADE,
        "user.py": THROUGH_THE_FACADE, "user2.py": THROUGH_TWO_FACADES,
    })
    linter = runner.Linter(make_settings())
    facade = next(p for p in files if p.endswith("facade.py"))
    outline = linter.outline_one(facade)
    assert outline.active == () and outline.imports["copy_rows_fast"] == ("pkg.ops.kernels.copy_rows",)
    assert not linter.lint_one(facade).imports  # not linted: the index reads it when a call goes through
    if fast:
        kept = kept_functions(linter, files)
        assert "step" in kept["user.py"] and "step_twice_removed" in kept["user2.py"]
    found = findings(files, fast=fast)
    assert [(Path(f[0]).name, f[1], f[3]) for f in found] == [("user.py", 6, "GPU102"), ("user2.py", 6, "GPU102")]


def test_a_function_outside_every_unit_keeps_the_file_parsed(tmp_path):
    """Findings and summaries are of functions; one defined under a module-level ``if`` is in no
    unit, so a file with one is parsed even where the plan keeps none of its units."""
    text = FACADE + "\nif torch.cuda.is_available():\n    def host(x):\n        return x.item()\n"
    files = write_package(tmp_path, {"ops/__init__.py": "", "ops/kernels.py": KERNELS, "facade.py": text})
    plan = runner.Linter(make_settings()).outline_all(files, None, {})
    kept = plan.units_to_keep(next(p for p in files if p.endswith("facade.py")))
    assert kept is not None and not kept.indices and not kept.names_only


def test_unparsable_file_is_planned_whole(tmp_path):
    files = write_package(tmp_path, {"broken.py": "def f(:\n    x.item()\n", "caller.py": CALLER})
    plan = runner.Linter(make_settings()).outline_all(files, None, {})
    assert plan.units_to_keep(next(p for p in files if p.endswith("broken.py"))) is None
    assert any(d.code == "GPU001" for d in runner.Linter(make_settings()).run(files, jobs=1).diagnostics)


HOT_UNDER_IF = '''
import torch

from pkg.helpers import host_count

HAS_FLASH = True

if HAS_FLASH:

    class FlashMetadataBuilder:
        def build(self, x):
            return host_count(x)
'''

WRAPPER_UNDER_IF = '''
import torch
import triton

from pkg.ops.kernels import _copy_kernel

if torch.cuda.is_available():

    def copy_rows_fast(src, dst):
        _copy_kernel[(1,)](src, dst, src.numel())
'''

CALLS_THE_FAST_WRAPPER = '''
import torch

from pkg.fast import copy_rows_fast


def step(block_table, out):
    copy_rows_fast(block_table[:, 0], out)


def unrelated(x):
    return x
'''


def test_code_under_a_module_level_if_is_followed(tmp_path):
    """A hot class, or a kernel wrapper, defined under a module-level ``if`` is no unit of its
    own: what it calls (a syncing helper in another file) and its callers (in another file)
    must still be parsed."""
    files = write_package(tmp_path, {
        "ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS, "helpers.py": HELPERS, "hot.py": HOT_UNDER_IF,
        "fast.py": WRAPPER_UNDER_IF, "user.py": CALLS_THE_FAST_WRAPPER,
    })
    kept = kept_functions(runner.Linter(make_settings()), files)
    assert "host_count" in kept["helpers.py"] and "never_called_from_hot_code" not in kept["helpers.py"]
    assert kept["user.py"] == {"step"}
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    messages = [(Path(entry[0]).name, entry[3], entry[4]) for entry in fast]
    assert any(name == "hot.py" and "host_count" in message for name, _, message in messages), messages
    assert any(name == "user.py" and code == "GPU102" for name, code, _ in messages), messages


BROKEN_CHAIN = '''
import torch

import pkg.ops as ops


def step(block_table, out):
    return (ops
            .copy_rows(block_table[:, 0], out))


def unrelated(x):
    return x
'''


def test_a_call_chain_broken_over_lines_is_followed(tmp_path):
    files = write_package(tmp_path, {"ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS, "chain.py": BROKEN_CHAIN})
    assert kept_functions(runner.Linter(make_settings()), files)["chain.py"] == {"step"}
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert any(Path(entry[0]).name == "chain.py" and entry[3] == "GPU102" for entry in fast), fast


def test_the_outline_hands_its_cut_and_rules_to_the_lint(package):
    """The lint of an outlined text takes the outline's unit cut and triggered rules instead of
    finding them again: they must be what it would find, less a family's rules where its
    closure keeps nothing of the file (``ProjectPlan._active_rules``): ``model.py`` is kept for
    its hot ``build`` alone, so its GPU1xx words run no GPU1xx rule; ``caller.py`` is kept for
    the view it hands a kernel wrapper alone, so its sync words run no hot-scope rule."""
    active = planned_rules(package)
    assert active["model.py"] == ({"GPU201", "GPU202"}, {"GPU102", "GPU201", "GPU202"})
    assert active["caller.py"] == ({"GPU102"}, {"GPU102", "GPU201", "GPU202"})
    assert active["kernels.py"][0] == active["kernels.py"][1] == {"GPU101", "GPU102", "GPU103"}


DECLARED = '''
import torch


def checked_once(x):
    with gpu_sync_allowed():
        return read_back(x)


def read_back(x):
    return x.sum().item()


def strides(x):
    return x.stride(0)
'''


def test_no_family_is_dropped_where_another_rule_keeps_a_function(tmp_path):
    """Any rule may read the summaries either family records (a sync, a contiguity need), so a
    file another rule's closure keeps a unit of (GPU203's declared block and what it calls)
    keeps every rule it triggers, though neither family's closure keeps anything of it."""
    files = write_package(tmp_path, {"declared.py": DECLARED})
    kept = kept_functions(runner.Linter(make_settings()), files)
    assert kept["declared.py"] == {"checked_once", "read_back"}
    planned, triggered = planned_rules(files)["declared.py"]
    assert {"GPU102", "GPU201", "GPU203"} <= triggered
    assert planned == triggered


def planned_rules(files: list[str]) -> dict[str, tuple[set[str], set[str]]]:
    """File name -> (the codes of the rules the plan hands the lint, those the text triggers),
    for the files the plan hands its cut to; the cut must be what the lint would make."""
    from sync_lint.pipeline import prefilter

    linter = runner.Linter(make_settings())
    plan = linter.outline_all(files, None, {})
    handed = 0
    active = {}
    for path in files:
        kept = plan.units_to_keep(path)
        if kept is None or kept.active is None:
            continue
        text = read(path).text
        triggered = {rule.code for rule in linter.rules if prefilter.may_match(rule, text)}
        active[Path(path).name] = (set(kept.active), triggered)
        assert set(kept.active) <= triggered
        if kept.cuts:
            handed += 1
            assert list(kept.cuts) == MaskPlan(text, split_lines(text)).units
    assert handed >= 1
    return active


MASKED_SOURCE = '''import torch


class Layer:
    def kept(self, x):
        return x[:, 0]

    def masked(self, x):
        y = x + 1

        # a comment
        return y
    def one_line(self, x): return x


def masked_too(x):
    """A docstring."""
    return x
z = masked_too(1)
'''


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_masked_text_keeps_lines_and_columns_and_holds_no_blank_lines_for_libcst(ending):
    """A masked unit is one ``pass`` continued by backslashes over its lines: the code kept
    parses at the lines and columns it has in the file, and libcst builds no ``EmptyLine`` for
    the masked lines (three objects each: most of what masking a line cost before)."""
    import ast

    import libcst as cst

    text = MASKED_SOURCE.replace("\n", ending).rstrip(ending)  # the last line without an ending too
    units = MaskPlan(text, split_lines(text))
    units.keep_units([i for i in units.functions() if units.units[i].name == "kept"])
    masked = units.masked_text()
    assert len(split_lines(masked)) == len(split_lines(text))
    def places(source: str) -> dict[str, tuple[int, int]]:
        """Functions and assigned names -> (line, column) of their statement."""
        found = {}
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef):
                found[node.name] = (node.lineno, node.col_offset)
            elif isinstance(node, ast.Assign):
                found[ast.unparse(node.targets[0])] = (node.lineno, node.col_offset)
        return found

    assert places(masked) == {key: places(text)[key] for key in ("kept", "z")}
    module = cst.parse_module(masked)
    empty_lines = []

    class Collect(cst.CSTVisitor):
        def visit_EmptyLine(self, node):
            empty_lines.append(node)

    module.visit(Collect())
    masked_lines = {i for index in units.functions() if not units.keep[index]
                    for i in range(units.units[index].first, units.units[index].last)}  # fmt: skip
    blank_elsewhere = [i for i, line in enumerate(split_lines(text)) if not line.strip() and i not in masked_lines]
    assert len(masked_lines) == 11 and len(empty_lines) == len(blank_elsewhere) == 3


def test_a_facade_edited_between_cached_runs_is_read_again(tmp_path):
    """The cache keeps each file's facts and the whole run's plan; what a facade re-exports is
    read by every run (the plan's key holds every file's text, the index reads the file)."""
    files = write_package(tmp_path, {
        "ops/__init__.py": "", "ops/kernels.py": KERNELS, "facade.py": PLAIN_FACADE, "user.py": THROUGH_THE_FACADE,
    })
    cache = str(tmp_path / "cache")

    def run() -> list[tuple[str, str]]:
        linter = runner.Linter(make_settings(), cache_dir=cache)
        return sorted((Path(d.path).name, d.code) for d in linter.run(files, jobs=1).diagnostics)

    assert run() == run() == [("user.py", "GPU102")]
    facade = next(p for p in files if p.endswith("facade.py"))
    Path(facade).write_text("def copy_rows_fast(src, dst):\n    return None\n")  # its own now; no rule reads it
    assert run() == []


def test_a_module_no_rule_reads_answers_for_its_own_functions_and_its_imports(tmp_path):
    """``pipeline.unread``: a name the module defines at its top level (under ``if`` / ``try``
    too, as ``analysis.functions`` finds them) is its own, even where it also imports it; a
    method or a nested function is no such name."""
    from sync_lint.pipeline.unread import UnreadModules

    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent('''
        import sys
        from impl import own, guarded, method, nested, only_imported

        def own(x):
            def nested(y):
                return y
            return x

        try:
            import fast
        except ImportError:
            def guarded(x):
                return x

        class Holder:
            def method(self):
                return 1
    '''))
    unread = UnreadModules({"m": str(path)})
    assert unread.imports_for("m", "own") is None
    assert unread.imports_for("m", "guarded") is None
    for name in ("method", "nested", "only_imported"):
        assert unread.imports_for("m", name)[name] == f"impl.{name}"
    assert unread.imports_for("other", "own") is None
    (tmp_path / "broken.py").write_text("from impl import x\ndef f(:\n")
    assert UnreadModules({"b": str(tmp_path / "broken.py")}).imports_for("b", "x") is None


BOTH_FAMILIES = '''
import torch

from pkg.ops import copy_rows


class Layer(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.table = torch.zeros(n, 4, dtype=torch.int32, device="cuda")

    def forward(self, x):
        count = int(self.table.sum())
        copy_rows(self.table, x)
        return x[:count]

    def launch(self, out):
        def column(t):
            return t[:, 0]
        copy_rows(self.table[:, 0], out)
        return column


def helper_of_nothing(x):
    return x.t()
'''


def test_the_contiguity_analysis_records_only_the_gpu1xx_closure_of_a_file(tmp_path, monkeypatch):
    """A function parsed for the hot-scope rules (``forward``) or for the state it sets
    (``__init__``) is no function of the GPU1xx closure: the contiguity analysis records no
    sink use and no summary of it (``KeptUnits.at_sinks``), as if it were masked, and the
    findings are the plain path's. ``launch`` and the function nested in it are recorded."""
    from sync_lint.analysis import sinks

    files = write_package(tmp_path, {
        "ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS, "layer.py": BOTH_FAMILIES,
    })
    linter = runner.Linter(make_settings())
    plan = linter.outline_all(files, None, {})
    path = next(p for p in files if p.endswith("layer.py"))
    kept = plan.units_to_keep(path)
    units = MaskPlan(read(path).text, split_lines(read(path).text)).units
    assert {units[i].name for i in kept.indices} == {"forward", "launch"}
    assert {units[i].name for i in kept.at_sinks} == {"launch"}

    recorded = []
    walk = sinks.ContiguityAnalysis._function
    monkeypatch.setattr(sinks.ContiguityAnalysis, "_function",
                        lambda self, info, env: (recorded.append(info.name), walk(self, info, env)))
    linter.lint_one(path, kept)
    assert recorded == ["launch", "column"]
    recorded.clear()
    linter.lint_one(path, None)  # parsed whole, as a file with a finding is linted again
    assert recorded == ["__init__", "forward", "launch", "column", "helper_of_nothing"]

    monkeypatch.undo()
    fast = findings(files, fast=True)
    assert fast == findings(files, fast=False)
    assert {(Path(f[0]).name, f[3]) for f in fast} >= {("layer.py", "GPU102"), ("layer.py", "GPU202")}


def test_functions_not_recorded_are_told_by_their_unit_and_take_their_nested_functions():
    from sync_lint.analysis import sinks
    from sync_lint.analysis.functions import module_functions
    from sync_lint.analysis.names import NameTable
    from sync_lint.analysis.nodes import parse_module

    module = parse_module(textwrap.dedent('''
        def f(x):
            def inner(y):
                class Local:
                    def method(self):
                        return 1
                return y
            return inner(x)

        if True:
            def f(x):  # not a unit: defined under a block, recorded
                return x

        class A:
            def f(self):
                def inner2():
                    return 2
                return inner2()

            def g(self):
                return 3

        def g(x):
            return x
    '''))
    functions = module_functions(module, NameTable(module, "m", {}))

    def recorded(skipped):
        return [info.qualname for info in sinks._recorded(functions, module, frozenset(skipped))]

    assert recorded(()) == [info.qualname for info in functions]
    assert recorded({(None, "f"), ("A", "f")}) == ["m.f", "m.A.g", "m.g"]
    assert recorded({("A", "g"), (None, "g")}) == ["m.f", "m.f.inner", "m.f.inner.Local.method", "m.f", "m.A.f", "m.A.f.inner2"]


# -- ``hot-functions``: hot by qualified name ------------------------------------------------
# The scout matches the option's globs under each file's module name, as ``HotScopes`` does, so
# a project that names its model runner's step keeps the plan: the step and what it calls are
# parsed, the rest of the file is masked (it used to be parsed whole, every file the option's
# words are in: a vLLM run took 2.8x as long with one name configured).

RUNNER = '''
import torch


def count_on_device(n):
    t = torch.ones(n, device="cuda")
    return int(t.sum().item())


def unrelated_sync():
    t = torch.ones(4, device="cuda")
    return t.sum().item()


class ModelRunner:
    def execute_model(self, n):
        lens = torch.arange(n, device="cuda")
        total = count_on_device(n)
        peak = lens.max().item()
        return total + peak

    def profile_run(self, n):
        return torch.zeros(n, device="cuda").sum().item()

    def load(self, n):
        return torch.zeros(n, device="cuda").tolist()


def decode_outer(n):
    def decode_inner(m):
        return torch.ones(m, device="cuda").nonzero()
    return decode_inner(n)


if torch.cuda.is_available():
    def decode_under_a_block(n):
        return torch.ones(n, device="cuda").sum().item()
'''

HOT_FUNCTIONS = ["pkg.runner.ModelRunner.execute_model", "pkg.runner.decode_outer.decode_*"]


def test_hot_functions_keep_the_plan(tmp_path):
    files = write_package(tmp_path, {"runner.py": RUNNER})
    linter = runner.Linter(make_settings(hot_functions=HOT_FUNCTIONS))
    kept = kept_functions(linter, files)["runner.py"]
    assert {"execute_model", "count_on_device", "decode_outer"} <= kept
    assert not kept & {"unrelated_sync", "load"}, kept
    expected = findings(files, fast=False, hot_functions=HOT_FUNCTIONS)
    assert findings(files, fast=True, hot_functions=HOT_FUNCTIONS) == expected
    reasons = {message.partition(":")[0] for *_, message, _ in expected}
    assert reasons == {
        "undeclared GPU->CPU sync in hot function `ModelRunner.execute_model`",
        "undeclared GPU->CPU sync in hot function `decode_inner`",
    }, reasons
    assert len(expected) == 3, expected


def test_a_hot_function_under_a_module_level_block_parses_the_file_whole(tmp_path):
    files = write_package(tmp_path, {"runner.py": RUNNER})
    options = {"hot_functions": [*HOT_FUNCTIONS, "pkg.runner.decode_under_a_block"]}
    assert "unrelated_sync" in kept_functions(runner.Linter(make_settings(**options)), files)["runner.py"]
    expected = findings(files, fast=False, **options)
    assert any("`decode_under_a_block`" in message for *_, message, _ in expected), expected
    assert findings(files, fast=True, **options) == expected


def test_hot_functions_of_another_module_keep_nothing_here(tmp_path):
    files = write_package(tmp_path, {"runner.py": RUNNER, "other.py": "def step():\n    pass\n"})
    options = {"hot_functions": ["pkg.other.step", "pkg.runners.ModelRunner.execute_model"]}
    kept = kept_functions(runner.Linter(make_settings(**options)), files)["runner.py"]
    assert not kept & {"execute_model", "decode_outer", "unrelated_sync"}, kept
    assert findings(files, fast=True, **options) == findings(files, fast=False, **options) == []


def test_a_file_checked_alone_keeps_its_plan_under_hot_functions(tmp_path):
    """The CLI on one file, and the flake8 plugin (pre-commit), name the file's module as the
    lint does: the scout keeps the named step, masks the rest, and finds what the plain path
    finds."""
    import ast

    from sync_lint import flake8_plugin
    from sync_lint.pipeline import prefilter

    (tmp_path / "pyproject.toml").write_text(f"[tool.sync-lint]\nhot-functions = {HOT_FUNCTIONS!r}\n")
    [path] = [p for p in write_package(tmp_path, {"runner.py": RUNNER}) if p.endswith("runner.py")]
    text = read(path).text
    settings = make_settings(hot_functions=HOT_FUNCTIONS)
    linter = runner.Linter(settings)
    scope = linter.scope_of([text], lint_file.module_name_for(path))
    plan = prefilter.one_file_plan([r for r in scope.rules if prefilter.may_match(r, text)], text, scope.scout)
    assert plan is not None and plan.is_masking()
    assert {"execute_model", "decode_outer"} <= {plan.units[i].name for i in plan.functions() if plan.keep[i]}
    expected = findings([path], fast=False, hot_functions=HOT_FUNCTIONS)
    assert len(expected) == 3, expected
    assert findings([path], fast=True, hot_functions=HOT_FUNCTIONS) == expected
    checker = flake8_plugin.SyncLintChecker(ast.parse(text), path, text.splitlines(keepends=True))
    assert sorted((line, message.split(" ", 1)[1]) for line, _, message, _ in checker.run()) == sorted(
        (line, message) for _, line, _, _, message, _ in expected
    )


# -- ``contiguous-sinks``: configured sinks, found by their last name ----------------------------

ATTENTION_OPS = '''
import torch


def attend(q, k):
    return torch.ops.my_ext.attend(q, k)


def paged_attend(q, k):
    return attend(q, k)


def unrelated(x):
    return x.t().sum()
'''

ATTENTION_CALLER = '''
from pkg.attention_ops import attend, paged_attend


def decode(q, k):
    attend(q[:, 0], k)


def prefill(q, k):
    paged_attend(q, k.t())


def passes_through(q, k):
    attend(q, k)


def reshape_only(x):
    return x.t().reshape(-1)
'''


def test_configured_sinks_keep_the_plan(tmp_path):
    """``contiguous-sinks`` names a wrapper its project says needs contiguous tensors: the plan
    keeps its callers, masks the rest, and finds what the plain path finds (it used to give
    the scout no say: a vLLM run with one name configured took 1.4x as long)."""
    files = write_package(tmp_path, {"attention_ops.py": ATTENTION_OPS, "caller.py": ATTENTION_CALLER})
    options = {"contiguous_sinks": ["pkg.attention_ops.paged_attend", "pkg.*.attend"]}
    kept = kept_functions(runner.Linter(make_settings(**options)), files)
    assert {"decode", "prefill"} <= kept["caller.py"]
    # Nothing calls ``passes_through``, which hands the sink its parameters as they came.
    assert not kept["caller.py"] & {"reshape_only", "passes_through"} and "unrelated" not in kept["attention_ops.py"], kept
    expected = findings(files, fast=False, **options)
    assert findings(files, fast=True, **options) == expected
    assert {(Path(path).name, line) for path, line, *_ in expected} == {("caller.py", 6), ("caller.py", 10)}, expected


# -- ``unknown-device = "always"``: any value may sync, in every function ------------------------

ANY_DEVICE_HELPERS = '''
def count(x):
    return x.sum().item()


def rows(x):
    return x.shape[0] + len(x)


def scale(x, factor):
    return rows(x) * factor
'''

ANY_DEVICE_MODEL = '''
import torch

from pkg.helpers import count, scale


class Model(torch.nn.Module):
    def forward(self, x):
        n = scale(x, 2)
        return count(x) + n

    def describe(self, x):
        return count(x)
'''


def test_unknown_device_always_keeps_only_callees_that_may_sync(tmp_path):
    """Hot code's callees are kept where their code may sync on any value (it used to keep every
    callee: the scout had no say under this option)."""
    files = write_package(tmp_path, {"helpers.py": ANY_DEVICE_HELPERS, "model.py": ANY_DEVICE_MODEL})
    options = {"unknown_device": "always"}
    kept = kept_functions(runner.Linter(make_settings(**options)), files)
    assert "forward" in kept["model.py"] and "count" in kept["helpers.py"]
    assert not kept["helpers.py"] & {"scale", "rows"}, kept
    expected = findings(files, fast=False, **options)
    assert findings(files, fast=True, **options) == expected
    assert [(Path(path).name, line, code) for path, line, _, code, *_ in expected] == [("model.py", 10, "GPU201")]


# -- the project index tells the same call whatever order the facts come in -----------------------


@pytest.mark.parametrize("order", [("a", "b", "c", "d"), ("d", "b", "c", "a"), ("c", "d", "a", "b")])
def test_the_call_a_sync_is_told_by_does_not_follow_the_facts_order(order):
    """``a`` syncs through both ``b`` (which syncs through ``d``) and ``c`` (which syncs itself).
    The fixpoint tells the first reason it finds, so without an order of its own the facts'
    order (which masking changes: a file's summaries come as its functions were analysed)
    decided which call the message names, and the fast and plain paths could differ."""
    from sync_lint.analysis.summaries import FunctionSummary, SyncCall
    from sync_lint.pipeline.lint_file import FileFacts
    from sync_lint.pipeline.project import ProjectIndex

    def summaries():
        return {
            "m.a": FunctionSummary("m.a", (), "m.py", sync_calls=[SyncCall("m.b", 3), SyncCall("m.c", 4)]),
            "m.b": FunctionSummary("m.b", (), "m.py", sync_calls=[SyncCall("m.d", 7)]),
            "m.c": FunctionSummary("m.c", (), "m.py", sync="syncs with `.item()` on `t` (line 10)"),
            "m.d": FunctionSummary("m.d", (), "m.py", sync="syncs with `.tolist()` on `t` (line 12)"),
        }

    told = set()
    for names in (("a", "b", "c", "d"), order):
        every = summaries()
        facts = FileFacts("m.py", "m", summaries={f"m.{name}": every[f"m.{name}"] for name in names})
        told.add(ProjectIndex([facts]).functions["m.a"].sync)
    assert len(told) == 1, told


@pytest.mark.parametrize(("layout", "module"), [
    ({"sglang/__init__.py", "sglang/srt/layers/vision.py"}, "sglang.srt.layers.vision"),  # PEP 420 portions
    ({"sglang/__init__.py", "sglang/srt/__init__.py", "sglang/srt/vision.py"}, "sglang.srt.vision"),
    ({"tools/bench.py"}, "bench"),  # no package above: a script
    ({"pkg/__init__.py", "pkg/sub/__init__.py"}, "pkg.sub"),  # a package itself
])
def test_a_module_is_named_from_the_top_most_package_above_it(tmp_path, layout, module):
    """A folder without ``__init__.py`` inside a package is a namespace portion of it (PEP 420):
    SGLang ships ``sglang/__init__.py`` and no ``sglang/srt/__init__.py``, and imports
    ``sglang.srt.layers...``; naming its modules from their nearest folder alone left three in
    four of its files unreachable by the calls of other files."""
    for name in layout:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    target = max(layout, key=lambda name: (name.count("/"), not name.endswith("__init__.py")))
    assert lint_file.module_name_for(str(tmp_path / target)) == module


NAMESPACE_HELPER = '''
import torch


def host_lens(device):
    return torch.arange(4, device=device).tolist()
'''

NAMESPACE_CALLER = '''
from torch import nn

from engine.srt.utils.lens import host_lens


class Model(nn.Module):
    def forward(self, x):
        return host_lens(x.device)
'''


@pytest.mark.parametrize("fast", [True, False])
def test_a_call_into_a_namespace_portion_of_a_package_is_followed(tmp_path, fast):
    """``engine/srt/`` has no ``__init__.py`` under ``engine/__init__.py``: the helper's summary is
    named ``engine.srt.utils.lens.host_lens``, as the caller imports it."""
    (tmp_path / "engine" / "srt" / "utils").mkdir(parents=True)
    (tmp_path / "engine" / "__init__.py").touch()
    (tmp_path / "engine" / "srt" / "utils" / "lens.py").write_text(NAMESPACE_HELPER)
    (tmp_path / "engine" / "srt" / "model.py").write_text(NAMESPACE_CALLER)
    files = Discovery(DEFAULT_EXCLUDE, tmp_path).files([str(tmp_path)])
    found = findings(files, fast=fast)
    assert [(Path(path).name, line, code) for path, line, _, code, _, _ in found] == [("model.py", 9, "GPU201")]


def test_a_file_beyond_the_run_is_read_by_its_skeleton(tmp_path):
    """A file read only for its classes' bases (``outlines_beyond``) is parsed as its
    top-level imports, decorated class headers of one or several lines, and nothing else;
    its classes come out as a parse of the whole text gives them. A scan misled by a string
    falls back to the whole text."""
    import ast

    from sync_lint.pipeline import project_plan

    settings = make_settings()
    imports = {"nn": ("torch.nn",), "support_torch_compile": ("pkg.compile.support_torch_compile",)}
    text = (
        "import torch\nfrom torch import nn\nfrom pkg.compile import support_torch_compile\n\n\n"
        "def helper(x):\n    import os\n    return x\n\n\n"
        "@support_torch_compile(\n    dynamic=True,\n)\nclass Model(\n    nn.Module,  # ( in a comment\n):\n"
        "    def forward(self, x):\n        return x\n\n\n"
        "@staticmethod_like\ndef decorated():\n    pass\n\n\n"
        "class Plain(Model, \\\n        object):\n    pass\n"
    )
    skeleton = project_plan._skeleton(text)
    assert "def " not in skeleton and "return" not in skeleton and "staticmethod_like" not in skeleton
    whole = ast.parse(text)
    assert [c.name for c in ast.parse(skeleton).body if isinstance(c, ast.ClassDef)] == ["Model", "Plain"]
    outline = project_plan._class_outlines(ast.parse(skeleton), "pkg.m", imports, settings)
    assert outline == project_plan._class_outlines(whole, "pkg.m", imports, settings)
    assert [c.torch_module for c in outline] == [True, False]
    misled = 'x = """\nimport (\n"""\n\n\nclass Late(Base):\n    pass\n'
    with pytest.raises(SyntaxError):
        ast.parse(project_plan._skeleton(misled))
    path = tmp_path / "late.py"
    path.write_text(misled)
    read = project_plan.read_names_outline(str(path), settings, skeleton=True)
    assert [c.qualname for c in read.classes] == ["late.Late"]


def test_a_run_of_part_of_a_package_reads_the_functions_it_calls_beyond_it(tmp_path):
    """A run of a folder, or of a few staged files, reports what a run of the whole package
    reports in them (``project_plan.plan_reading_callees``): a sync two files away from a
    model's ``forward``, and a wrapper re-exported by a package ``__init__`` that hands its
    argument to a custom op, by the plan and by the plain path; the findings of the files read
    beyond the run are not reported, nor fixed. A warm run whose plan the cache holds makes it
    again when a file it read beyond the run changes."""
    from cli_runner import run

    files = {
        "pkg/__init__.py": "",
        "pkg/models/__init__.py": "",
        "pkg/models/util.py": "def helper(x):\n    return x\n",
        "pkg/models/llama.py": (
            "from torch import nn\n\nfrom pkg.ops import run_op\nfrom pkg.utils.mm import embed\n\n\n"
            "class Model(nn.Module):\n    def forward(self, x, table):\n        y = embed(x)\n"
            "        run_op(table[:, 0])\n        return y\n"
        ),
        "pkg/utils/__init__.py": "",
        "pkg/utils/mm.py": (
            "from pkg.utils.deep import count_rows\n\n\ndef embed(x):\n    rows = count_rows(x)\n"
            "    return x[:rows].to(x.device)\n"
        ),
        "pkg/utils/deep.py": "import torch\n\n\ndef count_rows(x):\n    torch.cuda.synchronize()\n    return x.shape[0]\n",
        "pkg/utils/wait.py": "import torch\n\n\ndef wait_all():\n    torch.cuda.synchronize()\n",
        "pkg/ops/__init__.py": "from pkg.ops.kernels import run_op as run_op\n",
        "pkg/ops/kernels.py": (
            "import torch\n\n\ndef run_op(t):\n    torch.ops._C.gather_rows(t)\n\n\n"
            "def launch_first_column(table):\n    torch.ops._C.gather_rows(table[:, 0])\n"
        ),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    def found(*args: str) -> list[str]:
        return checked(tmp_path, *args)[0]

    sync, view = "pkg/models/llama.py:9:13: GPU201", "pkg/models/llama.py:10:16: GPU102"
    beyond = "pkg/ops/kernels.py:9:30: GPU102"
    assert found("pkg", "--no-cache") == [sync, view, beyond]
    for paths in (["pkg/models"], ["pkg/models/llama.py", "pkg/models/util.py"]):
        for extra in ([], ["--parse-whole-files"]):
            assert found(*paths, "--no-cache", *extra) == [sync, view], (paths, extra)
    # Warm: the plan of ``pkg/models`` is cached; a file it read beyond the run stops syncing,
    # then calls one in a file that run did not read, which syncs.
    assert found("pkg/models") == found("pkg/models") == [sync, view]
    deep = tmp_path / "pkg/utils/deep.py"
    deep.write_text("def count_rows(x):\n    return x.shape[0]\n")
    assert found("pkg/models") == found("pkg/models") == [view]
    deep.write_text(
        "from pkg.utils.wait import wait_all\n\n\ndef count_rows(x):\n    wait_all()\n    return x.shape[0], x.device\n"
    )
    assert found("pkg/models") == [sync, view]
    kernels = (tmp_path / "pkg/ops/kernels.py").read_text()
    fixed = run("fix", "pkg/models", "--unsafe-fixes", "--no-cache", cwd=tmp_path)
    assert fixed.returncode == 1 and fixed.stdout.startswith(sync), fixed  # the sync is left to a person
    assert "run_op(table[:, 0].contiguous())" in (tmp_path / "pkg/models/llama.py").read_text()
    assert (tmp_path / "pkg/ops/kernels.py").read_text() == kernels


def test_a_cached_plan_is_made_again_where_a_file_it_looked_for_beyond_the_run_appears_or_changes(tmp_path):
    """A run of part of a package looks beyond it for the files its calls may reach
    (``ModuleFiles``); a cached plan (``KeptPlan.beyond``) rests on the files it looked for and
    did not find, and on those it judged not worth reading, as on those it read: a helper
    module written after the first run, or a file that comes to define the function called,
    is read by the next warm run as by a cold one."""

    (tmp_path / "pkg/models").mkdir(parents=True)
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/models/__init__.py").write_text("")
    (tmp_path / "pkg/models/util.py").write_text("def helper(x):\n    return x\n")
    (tmp_path / "pkg/models/llama.py").write_text(
        "from torch import nn\n\nfrom pkg.helpers import wait\nfrom pkg.steps import step\n\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        wait(x)\n        step(x)\n        return x\n"
    )
    (tmp_path / "pkg/steps.py").write_text("def other(x):\n    return x\n")

    def found(*extra: str) -> list[str]:
        return checked(tmp_path, "pkg/models/llama.py", "pkg/models/util.py", *extra)[0]

    assert found() == found() == []  # the second run reads the plan from the cache
    syncing = "import torch\n\n\ndef {name}(x):\n    torch.cuda.synchronize()\n"
    (tmp_path / "pkg/helpers.py").write_text(syncing.format(name="wait"))
    assert found() == found("--no-cache") == ["pkg/models/llama.py:9:9: GPU201"]
    (tmp_path / "pkg/steps.py").write_text(syncing.format(name="step"))
    assert found() == found("--no-cache") == ["pkg/models/llama.py:9:9: GPU201", "pkg/models/llama.py:10:9: GPU201"]


def test_a_cached_plan_is_made_again_where_a_file_comes_to_register_a_custom_op_it_calls(tmp_path):
    """A run that calls a custom op looks in its packages for the op's Python registration
    (``ModuleFiles.registering``); a cached plan rests on that scan (``RegistrationScan``): a
    file written since that registers the op makes it again, as a cold run reads it (the op's
    function takes any strides, so the view handed to it is no finding); a file that changes
    without registering it leaves it."""

    run_files = staged_pair(tmp_path, {
        "model.py": (
            "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
            "    def forward(self, x):\n        return torch.ops.pkg.rms_norm(x[:, 0])\n"
        ),
    })

    def found(*extra: str) -> list[str]:
        return checked(tmp_path, *(str(Path(path).relative_to(tmp_path)) for path in run_files), *extra)[0]

    view = ["pkg/model.py:7:39: GPU102"]
    assert found() == found() == view  # the second run reads the plan from the cache
    scan = planned(run_files)[1].kept_by_file().registrations
    assert scan is not None and scan.ops == {("pkg", "rms_norm")} and scan.unchanged()
    (tmp_path / "pkg/notes.py").write_text("# rms_norm: a custom_op of the extension, one day\nLIMIT = 1\n")
    assert not scan.unchanged()  # a new file naming the op beside a registration word is read again
    (tmp_path / "pkg/notes.py").write_text("LIMIT = 2\n")
    assert scan.unchanged()
    assert found() == view
    (tmp_path / "pkg/registry.py").write_text(
        "import torch\n\n\n@torch.library.custom_op('pkg::rms_norm', mutates_args=())\n"
        "def rms_norm(x: torch.Tensor) -> torch.Tensor:\n    return x.clone()\n"
    )
    assert found() == found("--no-cache") == []
    (tmp_path / "pkg/registry.py").write_text((tmp_path / "pkg/registry.py").read_text().replace("rms_norm", "other"))
    assert found() == found("--no-cache") == view


@pytest.mark.parametrize("broken", BROKEN_KINDS)
def test_a_broken_file_the_registration_scan_reads_stops_no_run(tmp_path, broken):
    """A file of the package that would register the custom op a run calls, broken (a syntax
    error, bytes that are not UTF-8, a symlink loop, a folder named like a module): the scan
    (``RegistrationScan``), cold and warm, and after the file is mended, ends with no traceback,
    and a warm run reports what ``--no-cache`` reports."""

    registry = (
        "import torch\n\n\n@torch.library.custom_op('pkg::rms_norm', mutates_args=())\n"
        "def rms_norm(x: torch.Tensor) -> torch.Tensor:\n    return x.clone()\n"
    )
    run_files = staged_pair(tmp_path, {
        "model.py": (
            "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
            "    def forward(self, x):\n        return torch.ops.pkg.rms_norm(x[:, 0])\n"
        ),
    })
    write_broken(tmp_path / "pkg" / "registry.py", broken, registry)
    relative = [str(Path(path).relative_to(tmp_path)) for path in run_files]

    def found(*extra: str) -> tuple[list[str], int]:
        return checked(tmp_path, *relative, *extra)

    assert found() == found() == found("--no-cache")
    path = tmp_path / "pkg" / "registry.py"
    if path.is_dir():
        path.rmdir()
    else:
        path.unlink()
    path.write_text(registry)
    assert found() == found("--no-cache") == ([], 0)


@pytest.mark.parametrize("broken", BROKEN_KINDS)
def test_a_broken_file_a_run_calls_beyond_it_is_not_reported(tmp_path, broken):
    """A file read beyond the run (``plan_reading_callees``) that does not parse, is not UTF-8,
    is a symlink loop or a folder named like a module: the run reports its own findings only,
    with no traceback, and the exit status they give."""
    from cli_runner import run

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    write_broken(pkg / "helpers.py", broken, "import torch\n\n\ndef wait(x):\n    torch.cuda.synchronize()\n")
    (pkg / "util.py").write_text("def helper(x):\n    return x\n")
    (pkg / "model.py").write_text(
        "import torch\nfrom torch import nn\n\nfrom pkg.helpers import wait\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        wait(x)\n        torch.cuda.synchronize()\n        return x\n"
    )
    result = run("check", "pkg/model.py", "pkg/util.py", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert "Traceback" not in result.stderr, result
    assert [line.split(" ")[:2] for line in result.stdout.splitlines()] == [["pkg/model.py:10:9:", "GPU201"]], result
    assert result.returncode == 1, result


def test_a_run_reads_beyond_it_only_the_files_a_call_may_reach(tmp_path):
    """Of the files a run's hot code names beyond it (``ProjectPlan.unread_callees``), only those
    that may define a function it calls, or import one (a re-export, here in a parenthesized
    import over lines), are read: a class named in an annotation, or a constant, is no function
    of the plan's. A file that may register a custom op the run calls is found by the op's name
    as a word, and a module path through a package's ``ops`` folder is no op (``_op_calls``): the
    file that names its last part beside a registration word is not read."""
    run = staged_pair(tmp_path, {
        "types.py": "class Batch:\n    pass\n\n\nLIMIT = 4\n",
        "helpers/__init__.py": "from pkg.helpers.impl import (\n    other,\n    wait,\n)\n",
        "helpers/impl.py": "import torch\n\n\ndef other():\n    pass\n\n\ndef wait(x):\n    torch.cuda.synchronize()\n",
        "kernels/ops/moe/topk.py": "def fast_topk(x):\n    return x\n",
        "registry.py": (
            "import torch\n\n\n@torch.library.custom_op('pkg::rms_norm', mutates_args=())\n"
            "def rms_norm(x: torch.Tensor) -> torch.Tensor:\n    return x.clone()\n"
        ),
        "topk_ops.py": (
            "import torch\n\n\n@torch.library.custom_op('pkg::topk', mutates_args=())\n"
            "def topk(x: torch.Tensor) -> torch.Tensor:\n    return x.clone()\n"
        ),
        "model.py": (
            "import torch\nfrom torch import nn\n\nfrom pkg import types\nfrom pkg.helpers import wait\n\n\n"
            "class Model(nn.Module):\n    def forward(self, x, batch: types.Batch):\n        wait(x)\n"
            "        from pkg.kernels.ops.moe.topk import fast_topk\n\n"
            "        return torch.ops.pkg.rms_norm(fast_topk(x)[: types.LIMIT, 0])\n"
        ),
    })
    linter, plan = planned(run)
    assert read_beyond(plan, tmp_path) == [
        "pkg/helpers/__init__.py", "pkg/helpers/impl.py", "pkg/kernels/ops/moe/topk.py", "pkg/registry.py",
    ]
    found = linter.run(run, jobs=1).diagnostics
    assert [(Path(d.path).name, d.line, d.code) for d in found] == [("model.py", 10, "GPU201")]

    from sync_lint.pipeline.project_plan import files_registering

    texts = {"fused.py": b'direct_register_custom_op(op_name="fused_rms_norm", op_func=f)\n',
             "plain.py": b'direct_register_custom_op(op_name="rms_norm", op_func=g)\n'}
    assert files_registering(texts, {("vllm", "rms_norm")}, set()) == ["plain.py"]


def test_a_file_read_beyond_a_run_is_parsed_only_where_the_run_may_reach(tmp_path):
    """A file read beyond a run (``ProjectPlan.silent``) has hot methods and kernel wrappers of
    its own, seeds of the plan like the run's; its findings are not reported, so of its
    functions only those the run's kept functions may reach are parsed (``_needed_by_the_run``),
    and the run still reports what a run of every file reports in its files."""
    run = staged_pair(tmp_path, {
        "ops/__init__.py": OPS_INIT, "ops/kernels.py": KERNELS,
        "layers.py": (
            "import torch\nfrom torch import nn\n\nfrom pkg.ops import copy_rows\n\n\n"
            "def wait(x):\n    torch.cuda.synchronize()\n\n\n"
            "def gather(table):\n    copy_rows(table)\n\n\n"
            "def first_column(table):\n    copy_rows(table[:, 0])\n\n\n"
            "class Layer(nn.Module):\n    def forward(self, x):\n        return x[: int(x.sum().item())]\n"
        ),
        "model.py": (
            "import torch\nfrom torch import nn\n\nfrom pkg.layers import gather, wait\n\n\n"
            "class Model(nn.Module):\n    def forward(self, x, table):\n        wait(x)\n"
            "        gather(table[:, 1])\n        return x\n"
        ),
    })
    linter, plan = planned(run)
    layers = [path for path in plan.silent if path.endswith("layers.py")]
    assert layers, plan.silent
    assert kept_functions(linter, layers, plan) == {"layers.py": {"wait", "gather"}}

    def reported(paths: list[str], fast: bool) -> list[tuple]:
        return [d for d in findings(paths, fast) if Path(d[0]).name in ("model.py", "util.py")]

    whole = reported(Discovery(DEFAULT_EXCLUDE, tmp_path).files([str(tmp_path)]), True)
    assert [(Path(d[0]).name, d[1], d[3]) for d in whole] == [("model.py", 9, "GPU201"), ("model.py", 10, "GPU102")]
    assert reported(run, True) == reported(run, False) == whole


def test_a_plan_asks_where_a_call_goes_only_of_the_functions_it_needs_to(tmp_path, monkeypatch):
    """Each level of a run's reading beyond it (``plan_reading_callees``) makes a plan asked only
    which files the run's starting functions reach (``unread_callees``): the names that the
    other functions of the files read beyond it call are not resolved there (``_CallEdges``),
    level after level; its units to keep, asked of the last plan, still follow every call."""
    from sync_lint.pipeline import project_plan

    others = "".join(f"\n\ndef other{i}(x):\n    return unrelated{i}(x)\n\n\ndef unrelated{i}(x):\n    return x\n" for i in range(8))
    run = staged_pair(tmp_path, {
        "helpers.py": (
            "import torch\nfrom pkg.deep import settle\n\n\ndef wait(x):\n    settle(x)\n    return x.to(x.device)\n"
            + others
        ),
        "deep.py": "import torch\n\n\ndef settle(x):\n    torch.cuda.synchronize()\n" + others.replace("other", "deep_other"),
        "model.py": (
            "from torch import nn\n\nfrom pkg.helpers import wait\n\n\n"
            "class Model(nn.Module):\n    def forward(self, x):\n        wait(x)\n        return x\n"
        ),
    })
    asked: list[str] = []
    resolve = project_plan._Resolver._targets

    def recording(resolver, name: str) -> set[int]:
        asked.append(name)
        return resolve(resolver, name)

    monkeypatch.setattr(project_plan._Resolver, "_targets", recording)
    linter, plan = planned(run)
    assert read_beyond(plan, tmp_path) == ["pkg/deep.py", "pkg/helpers.py"]
    assert "pkg.deep.settle" in asked
    assert not [name for name in asked if ".unrelated" in name], asked
    assert plan.kept and "pkg.helpers.unrelated3" in asked  # the closure asks of every call
    found = linter.run(run, jobs=1).diagnostics
    assert [(Path(d.path).name, d.line, d.code) for d in found] == [("model.py", 8, "GPU201")]


@pytest.mark.parametrize("forks", [True, False])
def test_a_small_run_reads_the_files_beyond_it_in_its_spare_pool(tmp_path, monkeypatch, forks):
    """A run of two files whose hot method calls a helper in each of 20 files (one of which
    calls a 21st) outlines them in a pool of workers (``runner._pool_for``: the spare pool
    starts at ``SPARE_POOL_THRESHOLD`` files, then serves every level, the one file of the
    second too) and reports what a serial run does. It lints them in its lint workers, which
    have the parser imported (``runner._WarmWorker``), where it can fork them; else in the pool."""
    monkeypatch.setattr(runner._WarmWorker, "available", staticmethod(lambda: forks))
    helpers = {f"helpers/h{i}.py": f"import torch\n\n\ndef wait{i}(x):\n    torch.cuda.synchronize()\n" for i in range(1, 20)}
    helpers["helpers/h0.py"] = "from pkg.deep import settle\n\n\ndef wait0(x):\n    settle(x)\n    return x.to(x.device)\n"
    helpers["deep.py"] = "import torch\n\n\ndef settle(x):\n    torch.cuda.synchronize()\n"
    imports = "".join(f"from pkg.helpers.h{i} import wait{i}\n" for i in range(20))
    calls = "".join(f"        wait{i}(x)\n" for i in range(20))
    run = staged_pair(tmp_path, {
        **helpers, "helpers/__init__.py": "",
        "model.py": f"from torch import nn\n\n{imports}\n\nclass Model(nn.Module):\n    def forward(self, x):\n{calls}",
    })
    maps = count_pool_maps(monkeypatch)
    linter = runner.Linter(make_settings())
    serial = [(Path(d.path).name, d.line, d.code) for d in linter.run(run, jobs=1).diagnostics]
    assert not maps
    assert serial == [("model.py", 27 + i, "GPU201") for i in range(20)]
    assert [(Path(d.path).name, d.line, d.code) for d in linter.run(run, jobs=2).diagnostics] == serial
    outlines = [("_worker_outline_batch", 20), ("_worker_outline_batch", 1)]
    assert maps == (outlines if forks else [*outlines, ("_worker_lint_batch", 21)]), maps


def twenty_helpers_beyond(tmp_path: Path) -> list[str]:
    """A staged pair whose hot method calls a helper in each of 20 files beyond it, enough for
    its spare pool (``SPARE_POOL_THRESHOLD``); one helper declares a sync (GPU203's trigger),
    which neither file of the run holds."""
    helpers = {f"helpers/h{i}.py": f"import torch\n\n\ndef wait{i}(x):\n    torch.cuda.synchronize()\n" for i in range(20)}
    helpers["helpers/h0.py"] = (
        "import torch\nfrom pkg.sync import gpu_sync_allowed\n\n\ndef wait0(x):\n"
        "    with gpu_sync_allowed():\n        return x.item()\n"
    )
    imports = "".join(f"from pkg.helpers.h{i} import wait{i}\n" for i in range(20))
    calls = "".join(f"        wait{i}(x)\n" for i in range(20))
    return staged_pair(tmp_path, {
        **helpers, "helpers/__init__.py": "", "sync.py": "def gpu_sync_allowed():\n    pass\n",
        "model.py": f"from torch import nn\n\n{imports}\n\nclass Model(nn.Module):\n    def forward(self, x):\n{calls}",
    })


def count_pool_maps(monkeypatch) -> list[tuple[str, int]]:
    """From here on, each ``_Pool.start_map`` of a run (which ``map`` calls): the work's name and
    how many items it was given."""
    maps: list[tuple[str, int]] = []
    original = runner._Pool.start_map

    def counted(self, work, items, *args, **kwargs):
        maps.append((getattr(work, "func", work).__name__, len(items)))  # a lint batch is a ``functools.partial``
        return original(self, work, items, *args, **kwargs)

    monkeypatch.setattr(runner._Pool, "start_map", counted)
    return maps


@pytest.mark.parametrize("forks", [True, False])
def test_a_small_run_runs_its_own_rules_in_its_spare_pool(tmp_path, monkeypatch, forks):
    """The spare pool outlines the files beyond a small run with every rule
    (``Linter.outline_one``), and the run's lint workers (``forks``), else the pool, lint them
    with the run's rules, as the run does serially: the ways report the same and make the same
    cache entries, each in a cache of its own."""
    monkeypatch.setattr(runner._WarmWorker, "available", staticmethod(lambda: forks))
    run = twenty_helpers_beyond(tmp_path)

    def entries(cache: Path) -> set[str]:
        return {path.name for path in cache.rglob("*") if path.is_file()}

    serial = runner.Linter(make_settings(), cache_dir=str(tmp_path / "serial")).run(run, jobs=1).diagnostics
    assert [(Path(d.path).name, d.line, d.code) for d in serial] == [("model.py", 27 + i, "GPU201") for i in range(1, 20)]
    maps = count_pool_maps(monkeypatch)
    pooled = runner.Linter(make_settings(), cache_dir=str(tmp_path / "pooled")).run(run, jobs=2).diagnostics
    outlines = [("_worker_outline_batch", 20), ("_worker_outline_batch", 1)]
    assert maps == (outlines if forks else [*outlines, ("_worker_lint_batch", 21)]), maps
    assert [(d.line, d.code) for d in pooled] == [(d.line, d.code) for d in serial]
    assert entries(tmp_path / "pooled") == entries(tmp_path / "serial")


def test_a_small_run_after_a_run_of_the_whole_tree_reads_the_cache_without_a_pool(tmp_path, monkeypatch):
    """A commit's run after a run of the whole tree finds the outlines and facts of the files
    beyond it in the cache: it loads them itself (``Linter.cached_first``) and starts no pool
    for them, however many they are, and reports what the whole run reports in its files. A
    file beyond edited since is linted again, here, as the only one missing."""
    run = twenty_helpers_beyond(tmp_path)
    every = Discovery(DEFAULT_EXCLUDE, tmp_path).files([str(tmp_path)])
    cache = str(tmp_path / "cache")
    whole = runner.Linter(make_settings(), cache_dir=cache).run(every, jobs=1).diagnostics
    in_run = [(Path(d.path).name, d.line, d.code) for d in whole if d.path in run]
    assert len(in_run) == 19
    stage(run)
    maps = count_pool_maps(monkeypatch)
    linted_since = log_lints(monkeypatch, tmp_path / "linted.log")
    warm = runner.Linter(make_settings(), cache_dir=cache).run(run, jobs=2).diagnostics
    assert maps == []
    assert linted_since() == ["model.py", "util.py"]
    assert [(Path(d.path).name, d.line, d.code) for d in warm] == in_run

    helper = tmp_path / "pkg" / "helpers" / "h5.py"
    helper.write_text(helper.read_text().replace("torch.cuda.synchronize()", "pass"))
    stage(run, "# staged again\n")
    warm = runner.Linter(make_settings(), cache_dir=cache).run(run, jobs=2).diagnostics
    assert maps == []
    assert linted_since() == ["h5.py", "model.py", "util.py"]
    assert [(Path(d.path).name, d.line) for d in warm] == [(name, line) for name, line, _ in in_run if line != 32]


def test_a_small_run_starts_its_spare_pool_for_the_files_it_lints_beyond_it_by_what_they_parse():
    """``runner._pool_for``: a small run's spare pool serves the files it lints beyond it where
    their lints add up to ``SPARE_POOL_LINT_COST`` (what a lint that parses nothing costs is a
    twentieth of its file), its outlines where they are ``SPARE_POOL_THRESHOLD`` files; a started
    one serves every later level, and a run of many files has its own pool."""
    spare, own = runner._Pool(None, 2), runner._Pool(None, 2)
    many = [f"f{i}.py" for i in range(runner.SPARE_POOL_THRESHOLD)]
    assert runner._pool_for(many, None, spare) is spare
    assert runner._pool_for(many[:-1], None, spare) is None
    assert runner._pool_for(many, None, spare, [100.0] * len(many)) is None  # many, but little to parse
    assert runner._pool_for(many[:2], None, spare, [runner.SPARE_POOL_LINT_COST / 2] * 2) is spare
    assert runner._pool_for(many, own, spare, [0.0] * len(many)) is own
    assert runner._pool_for(many, None, None) is None
    spare._executor = object()  # started
    assert runner._pool_for(many[:1], None, spare, [0.0]) is spare


def test_cached_first_hands_only_the_misses_to_start_once_in_order(tmp_path):
    """``Linter.cached_first``: the cache's results where it has them, the others begun in one
    call, at once, and asked for when the results are, in the order of the paths; nothing begun
    where nothing is missing; without a cache, everything begun."""
    linter = runner.Linter(make_settings(), cache_dir=str(tmp_path / "cache"))
    calls = []

    def start(paths):
        calls.append(list(paths))
        return lambda: [f"made {path}" for path in paths]

    cached = {"b": "cached b", "d": "cached d"}
    results = linter.cached_first(["a", "b", "c", "d"], cached.get, start)
    assert calls == [["a", "c"]]  # begun before the results are asked for
    assert results() == ["made a", "cached b", "made c", "cached d"]
    assert linter.cached_first(["b", "d"], cached.get, start)() == ["cached b", "cached d"]
    assert calls == [["a", "c"]]
    assert runner.Linter(make_settings()).cached_first(["b", "a"], cached.get, start)() == ["made b", "made a"]
    assert calls[-1] == ["b", "a"]


@pytest.mark.parametrize("forks", [True, False])
def test_a_small_run_hands_the_files_beyond_it_to_its_spare_pool_before_it_lints_its_own(tmp_path, monkeypatch, forks):
    """The files beyond a small run are in other hands (``start_lint_all``) while the run lints
    its own files: what the pool or the lint workers are given, and each file this process
    lints, in the order they happen; the findings are a serial run's. Where it can fork
    (``forks``), the files to parse, beyond the run and in it, go to its lint workers
    (``runner._WarmWorker``: split between the two), and this process lints only the one whose
    names alone the plan keeps; else the pool lints those beyond, and this process both of its own."""
    monkeypatch.setattr(runner._WarmWorker, "available", staticmethod(lambda: forks))
    run = twenty_helpers_beyond(tmp_path)
    alone = runner.Linter(make_settings()).run(run, jobs=1)
    assert alone.workers == 1
    serial = alone.diagnostics
    events = []
    original_start, original_ask, original_lint = runner._Pool.start_map, runner._Channel.ask, runner.Linter.lint_one

    def start_map(self, work, items, *args, **kwargs):
        events.append(f"pool {getattr(work, 'func', work).__name__}")
        return original_start(self, work, items, *args, **kwargs)

    def ask(self, request):
        events.append(f"worker {' '.join(sorted(Path(path).stem for path, _, _ in request[0]))}")
        return original_ask(self, request)

    def lint_one(self, path, *args, **kwargs):
        events.append(f"here {Path(path).name}")  # in this process: a worker's events stay in the worker
        return original_lint(self, path, *args, **kwargs)

    monkeypatch.setattr(runner._Pool, "start_map", start_map)
    monkeypatch.setattr(runner._Channel, "ask", ask)
    monkeypatch.setattr(runner.Linter, "lint_one", lint_one)
    pooled = runner.Linter(make_settings()).run(run, jobs=2)
    if forks:
        # The files beyond, split between the two by cost, then model.py to the one handed less.
        halves = [set(event.split()[1:]) for event in events[-4:-2]]
        assert all(halves) and set.union(*halves) == {"sync", *(f"h{i}" for i in range(20))}, events
        assert events[-2:] == ["worker model", "here util.py"], events
        assert "pool _worker_lint_batch" not in events
    else:
        assert events[-3:] == ["pool _worker_lint_batch", "here model.py", "here util.py"], events
    assert [(d.path, d.line, d.code) for d in pooled.diagnostics] == [(d.path, d.line, d.code) for d in serial]
    # What ``--profile`` reports: the pool of two, and the lint workers that were handed work.
    assert pooled.workers == (4 if forks else 2)


def test_a_run_of_some_files_reads_the_outlines_a_run_of_the_whole_tree_cached(tmp_path, monkeypatch):
    """An outline is cached under the rules its file's text holds, not the run's: after a run of
    every file (whose rules include GPU203, one file declaring a sync), a run of two staged files
    (without it) outlines only its own files, and reports what it reports without a cache."""
    from sync_lint.pipeline import project_plan

    files = {
        "helpers.py": "import torch\n\n\ndef wait(x):\n    torch.cuda.synchronize()\n",
        "declared.py": "from pkg.sync import gpu_sync_allowed\n\n\ndef read(x):\n    with gpu_sync_allowed():\n        return x.item()\n",
        "sync.py": "def gpu_sync_allowed():\n    pass\n",
        "model.py": "from torch import nn\n\nfrom pkg.helpers import wait\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        wait(x)\n",
    }
    run = staged_pair(tmp_path, files)
    every = Discovery(DEFAULT_EXCLUDE, tmp_path).files([str(tmp_path)])
    cache = str(tmp_path / "cache")
    runner.Linter(make_settings(), cache_dir=cache).run(every, jobs=1)
    outlined = []
    original = project_plan.outline

    def counted(source, *args, **kwargs):
        outlined.append(Path(source.path).name)
        return original(source, *args, **kwargs)

    monkeypatch.setattr(project_plan, "outline", counted)
    for path in run:  # staged: edited since the run of every file
        Path(path).write_text(Path(path).read_text() + "# staged\n")
    warm = runner.Linter(make_settings(), cache_dir=cache).run(run, jobs=1).diagnostics
    assert sorted(outlined) == ["model.py", "util.py"]
    cold = runner.Linter(make_settings()).run(run, jobs=1).diagnostics
    assert [(Path(d.path).name, d.line, d.code) for d in warm] == [(Path(d.path).name, d.line, d.code) for d in cold]
    assert [(Path(d.path).name, d.code) for d in cold] == [("model.py", "GPU201")]


BEYOND_A_STAGED_PAIR = {
    "helpers.py": (
        "import torch\n\n\ndef wait(x):\n    torch.cuda.synchronize()\n\n\n"
        "def count(x):\n    return int(x.sum().item())\n"
    ),
    "declared.py": "from pkg.sync import gpu_sync_allowed\n\n\ndef read(x):\n    with gpu_sync_allowed():\n        return x.item()\n",
    "sync.py": "def gpu_sync_allowed():\n    pass\n",
    "model.py": "from torch import nn\n\nfrom pkg.helpers import wait\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        wait(x)\n",
}


def log_lints(monkeypatch, log: Path) -> Callable[[], list[str]]:
    """From here on, each file a run lints (``lint_file.lint_source`` as the runner calls it) is
    logged to ``log``, by worker processes too (forked with the patch); returns a reader of the
    names logged since the last read."""
    original = runner.lint_source

    def logged(source, *args, **kwargs):
        with open(log, "a") as out:
            out.write(Path(source.path).name + "\n")
        return original(source, *args, **kwargs)

    monkeypatch.setattr(runner, "lint_source", logged)

    def since() -> list[str]:
        names = sorted(log.read_text().split()) if log.exists() else []
        log.unlink(missing_ok=True)
        return names

    return since


def stage(paths: list[str], edit: str = "# staged\n") -> None:
    for path in paths:
        Path(path).write_text(Path(path).read_text() + edit)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_run_of_staged_files_reads_the_facts_a_run_of_the_whole_tree_cached_of_the_files_beyond_it(
    tmp_path, monkeypatch, jobs,
):
    """After a run of every file (its rules include GPU203, one file declaring a sync; it keeps
    all of ``helpers.py`` a hot function calls), a run of two staged files (without GPU203)
    lints only its own files: the facts that run made of ``helpers.py``, beyond the staged
    files, hold all this run reads of it (``cache.Wider``). It reports what it reports without
    a cache. A file beyond edited since is linted again, and what it holds now is what the run
    reads: its sync removed, the finding that rested on it goes. ``jobs=2``: the files beyond
    are linted in the small run's spare pool."""
    monkeypatch.setattr(runner, "SPARE_POOL_THRESHOLD", 1)
    run = staged_pair(tmp_path, BEYOND_A_STAGED_PAIR)
    every = Discovery(DEFAULT_EXCLUDE, tmp_path).files([str(tmp_path)])
    cache = str(tmp_path / "cache")
    runner.Linter(make_settings(), cache_dir=cache).run(every, jobs=jobs)
    linted_since = log_lints(monkeypatch, tmp_path / "linted.log")
    stage(run)
    warm = runner.Linter(make_settings(), cache_dir=cache).run(run, jobs=jobs).diagnostics
    assert linted_since() == ["model.py", "util.py"]
    cold = runner.Linter(make_settings()).run(run, jobs=jobs).diagnostics
    assert linted_since() == ["helpers.py", "model.py", "util.py"]  # the count sees a lint beyond
    assert [(Path(d.path).name, d.line, d.code) for d in warm] == [(Path(d.path).name, d.line, d.code) for d in cold]
    assert [(Path(d.path).name, d.code) for d in cold] == [("model.py", "GPU201")]

    helpers = tmp_path / "pkg" / "helpers.py"
    helpers.write_text(helpers.read_text().replace("torch.cuda.synchronize()", "pass"))
    stage(run, "# staged again\n")
    assert runner.Linter(make_settings(), cache_dir=cache).run(run, jobs=jobs).diagnostics == []
    assert linted_since() == ["helpers.py", "model.py", "util.py"]


def test_facts_of_a_file_beyond_a_run_made_with_fewer_rules_or_fewer_functions_serve_no_run_that_needs_more():
    """``Linter.lint_one``'s record of what a lint was made with (``runner._wider``): facts made
    under every rule a run needs and keeping every function it keeps serve it in place of a
    lint; facts made under fewer rules, keeping fewer functions or recording fewer at sinks, of
    another text, by a file checked alone, or by names alone, do not. Only a file beyond the
    run looks for them (its findings are not reported: those of more rules would be)."""
    from sync_lint.analysis.project_names import NOTHING_FROM_THE_PROJECT
    from sync_lint.pipeline.project_plan import KeptUnits

    rules = {rule.code: rule for rule in runner.Linter(make_settings()).rules}

    def scope(*codes):
        return runner.RunScope([rules[code] for code in codes])

    def wider(codes, kept, beyond=True):
        return runner._wider(scope(*codes), kept, "pkg.helpers", NOTHING_FROM_THE_PROJECT, beyond)

    needs = KeptUnits(7, (1, 2), at_sinks=(1,))
    need = wider(("GPU101", "GPU201"), needs)
    made = [
        wider(("GPU101", "GPU201", "GPU203"), KeptUnits(7, (0, 1, 2), at_sinks=(1, 2))),
        wider(("GPU101", "GPU201"), KeptUnits(7, (1, 2))),  # every function recorded at sinks
        wider(("GPU101", "GPU201"), None),  # the whole file
    ]
    assert [need.serves(m.made_with) for m in made] == [True, True, True]
    not_made = [
        wider(("GPU101",), KeptUnits(7, (0, 1, 2))),  # a rule fewer
        wider(("GPU101", "GPU201"), KeptUnits(7, (2,))),  # a function fewer
        wider(("GPU101", "GPU201"), KeptUnits(7, (1, 2), at_sinks=())),  # none recorded at sinks
        wider(("GPU101", "GPU201"), KeptUnits(8, (1, 2))),  # another text
    ]
    assert [need.serves(m.made_with) for m in not_made] == [False, False, False, False]
    assert not wider(("GPU101",), None).serves(made[0].made_with)  # the whole file is needed
    assert wider(("GPU101",), needs, beyond=False).serves is None  # a file of the run
    assert wider(("GPU101",), KeptUnits(7, (), names_only=True)) is None  # no parse to spare
    assert runner._wider(runner.RunScope([rules["GPU101"]], scout=object()), needs, "m", NOTHING_FROM_THE_PROJECT, True) is None
    assert needs.as_recorded() == needs and needs.as_recorded().cuts == ()


@pytest.mark.parametrize("follow", ["silent", "skip"])
def test_follow_imports_skip_reads_beyond_a_run_only_what_a_run_of_one_file_reads(tmp_path, follow):
    """``follow-imports = "skip"`` (a faster first run of pre-commit's staged files): a run of
    two files reads beyond it only the files that may register the custom ops it calls, as a run
    of one file does, so it neither reports a sync in a function of another file (of unknown
    code to it) nor a view handed to an op whose Python function takes any strides; by the plan
    and by the plain path. ``silent``, the default, reads the function too and reports the sync,
    as a run of the whole package does."""
    run = staged_pair(tmp_path, {
        "helpers.py": "import torch\n\n\ndef wait(x):\n    torch.cuda.synchronize()\n",
        "registry.py": (
            "import torch\n\n\n@torch.library.custom_op('pkg::rms_norm', mutates_args=())\n"
            "def rms_norm(x: torch.Tensor) -> torch.Tensor:\n    return x.clone()\n"
        ),
        "model.py": (
            "import torch\nfrom torch import nn\n\nfrom pkg.helpers import wait\n\n\n"
            "class Model(nn.Module):\n    def forward(self, x):\n        wait(x)\n"
            "        return torch.ops.pkg.rms_norm(x[:, 0])\n"
        ),
    })
    linter = runner.Linter(make_settings(follow_imports=follow))
    plan = linter._plan(run, None, {})
    expected = {"silent": ["pkg/helpers.py", "pkg/registry.py"], "skip": ["pkg/registry.py"]}[follow]
    assert read_beyond(plan, tmp_path) == expected
    found = {"silent": [("model.py", 9, "GPU201")], "skip": []}[follow]
    for fast in (True, False):
        assert [(Path(d[0]).name, d[1], d[3]) for d in findings(run, fast, follow_imports=follow)] == found, fast

    from sync_lint.config import ConfigError, validate

    with pytest.raises(ConfigError, match="`follow-imports` must be `silent` or `skip`"):
        validate({"follow-imports": "normal"}, "pyproject.toml")


def log_plan_reads(monkeypatch) -> list[str]:
    """The names of the files the plan reads from here on (``project_plan._raw``: a scan for
    registrations, the questions whether a file beyond may define a name)."""
    from sync_lint.pipeline import project_plan

    read_paths: list[str] = []
    original = project_plan._raw

    def counted(path):
        read_paths.append(Path(path).name)
        return original(path)

    monkeypatch.setattr(project_plan, "_raw", counted)
    return read_paths


def test_a_scan_for_registrations_reads_again_only_files_that_hold_a_registration_word_or_changed(tmp_path, monkeypatch):
    """``registration_texts`` with what earlier scans found (``RegistrationWords``): a file
    unchanged since that held no registration word is not read again; one that holds a word is
    (its text is searched for the ops), and so is one changed since, whose new word is then found."""
    import os
    import pickle

    from sync_lint.pipeline import project_plan

    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "plain.py").write_text("LIMIT = 1\n")
    (folder / "registry.py").write_text("import torch\n\n@torch.library.custom_op('pkg::op', mutates_args=())\ndef op(x): ...\n")
    (folder / "later.py").write_text("X = 1\n")
    read_paths = log_plan_reads(monkeypatch)
    words = project_plan.RegistrationWords()
    first = project_plan.registration_texts([str(folder)], words=words)
    assert sorted(Path(p).name for p in first) == ["registry.py"] and sorted(read_paths) == ["later.py", "plain.py", "registry.py"]
    assert words.changed
    read_paths.clear()
    words = pickle.loads(pickle.dumps(words))  # as the cache stores it, and a later run loads it
    assert not words.changed and len(words.files) == 3
    assert sorted(Path(p).name for p in project_plan.registration_texts([str(folder)], words=words)) == ["registry.py"]
    assert read_paths == ["registry.py"] and not words.changed
    later = folder / "later.py"
    later.write_text("from torch.library import custom_op\n")
    os.utime(later, ns=(later.stat().st_atime_ns, later.stat().st_mtime_ns + 10**9))  # a later time of change
    read_paths.clear()
    again = project_plan.registration_texts([str(folder)], words=words)
    assert sorted(Path(p).name for p in again) == ["later.py", "registry.py"] and sorted(read_paths) == ["later.py", "registry.py"]
    assert words.changed
    (folder / "plain.py").unlink()  # a file gone is forgotten, and nothing outside the folders scanned
    words.files["/elsewhere/kept.py"] = ((1, 1), False)
    words.changed = False
    project_plan.registration_texts([str(folder)], words=words)
    assert sorted(Path(p).name for p in words.files) == ["kept.py", "later.py", "registry.py"] and words.changed


def test_runs_of_staged_files_keep_what_their_scans_for_registrations_found(tmp_path, monkeypatch):
    """A run that calls a custom op scans its packages for the op's registration in Python; with
    the cache, the next run of other staged files (another plan) reads again only the files that
    hold a registration word, and a file that has come to register the op since is read, as a
    cold run reads it (the op's function takes any strides: the view handed to it is no finding)."""
    files = {
        "model.py": (
            "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
            "    def forward(self, x):\n        return torch.ops.pkg.rms_norm(x[:, 0])\n"
        ),
        "notes.py": "# a custom_op of the extension\nLIMIT = 1\n",
        **{f"plain_{i}.py": f"LIMIT = {i}\n" for i in range(5)},
    }
    run = staged_pair(tmp_path, files)
    cache = str(tmp_path / "cache")
    read_paths = log_plan_reads(monkeypatch)

    def staged_run() -> list[tuple[str, int, str]]:
        stage(run)  # another commit: another plan
        read_paths.clear()
        found = runner.Linter(make_settings(), cache_dir=cache).run(run, jobs=1).diagnostics
        return [(Path(d.path).name, d.line, d.code) for d in found]

    assert staged_run() == [("model.py", 7, "GPU102")]
    assert {"plain_0.py", "notes.py"} <= set(read_paths)
    assert staged_run() == [("model.py", 7, "GPU102")]
    assert "notes.py" in read_paths and not any(name.startswith("plain_") for name in read_paths)
    registry = tmp_path / "pkg" / "plain_3.py"
    registry.write_text(
        "import torch\n\n\n@torch.library.custom_op('pkg::rms_norm', mutates_args=())\n"
        "def rms_norm(x: torch.Tensor) -> torch.Tensor:\n    return x.clone()\n"
    )
    assert staged_run() == [] == [(d.path, d.line, d.code) for d in runner.Linter(make_settings()).run(run, jobs=1).diagnostics]
    assert "plain_3.py" in read_paths


def test_a_run_of_the_whole_tree_notes_which_files_hold_a_registration_word(tmp_path, monkeypatch):
    """A run of every file makes no scan for registrations, yet its outlines read every file:
    with the cache, what they found serves the next staged run's scan (``note_outlined``), which
    then reads only the files that hold a registration word, and a file changed too shortly
    before the whole run to be told from one changed while it ran (``runner._SETTLED_NS``). A file
    of no package is not noted: no scan would read it."""
    import os

    from sync_lint.pipeline import project_plan

    files = {
        "model.py": (
            "import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
            "    def forward(self, x):\n        return torch.ops.pkg.rms_norm(x[:, 0])\n"
        ),
        "notes.py": "# a custom_op of the extension\nLIMIT = 1\n",
        "layers.py": "import torch\n\n\ndef wait(x):\n    torch.cuda.synchronize()\n",
        **{f"plain_{i}.py": f"LIMIT = {i}\n" for i in range(5)},
    }
    run = staged_pair(tmp_path, files)
    every = Discovery(DEFAULT_EXCLUDE, tmp_path).files([str(tmp_path)])
    settled = os.stat(every[0]).st_mtime - 60
    for path in every:
        if not path.endswith("plain_4.py"):  # written just before the whole run
            os.utime(path, (settled, settled))
    script = tmp_path / "script.py"  # in no package: no scan reads it, nor would forget it
    script.write_text("import torch\n\n\ndef wait(x):\n    torch.cuda.synchronize()\n")
    os.utime(script, (settled, settled))
    cache = str(tmp_path / "cache")
    linter = runner.Linter(make_settings(), cache_dir=cache)
    linter.run([*every, str(script)], jobs=1)
    noted = linter.cache.load_shared(runner._REGISTRATION_WORDS, project_plan.RegistrationWords).files
    assert str(tmp_path / "pkg" / "layers.py") in noted and str(script) not in noted
    read_paths = log_plan_reads(monkeypatch)
    stage(run)
    found = runner.Linter(make_settings(), cache_dir=cache).run(run, jobs=1).diagnostics
    assert [(Path(d.path).name, d.line, d.code) for d in found] == [("model.py", 7, "GPU102")]
    assert sorted(set(read_paths)) == ["notes.py", "plain_4.py"]


def test_the_files_that_may_register_an_op_are_those_its_name_as_a_word_is_in():
    """``files_registering`` screens the texts by substring for a few op names before its
    pattern: the same files as the pattern alone, for few names and for many, over random texts
    of names, their parts and longer words around them."""
    import random
    import re

    from sync_lint.pipeline.project_plan import (
        _NAMES_SCREENED_BY_SUBSTRING,
        files_registering,
    )

    names = [f"op{i}" for i in range(40)] + ["rms_norm", "fused_rms_norm", "norm"]
    pieces = [*names, "_", "x", "op", "rms", " ", "\n", ".", "'", "::", "def ", "custom_op("]
    chosen = random.Random(7)
    texts = {
        f"f{i}.py": "".join(chosen.choice(pieces) for _ in range(chosen.randint(0, 30))).encode() for i in range(60)
    }
    sizes = set()
    for count in (1, 2, 5, _NAMES_SCREENED_BY_SUBSTRING, _NAMES_SCREENED_BY_SUBSTRING + 1, 40):
        for _ in range(25):
            ops = {("pkg", name) for name in chosen.sample(names, count)}
            named = re.compile(rb"\b(?:" + b"|".join(re.escape(n.encode()) for _, n in sorted(ops)) + rb")\b")
            expected = sorted(path for path, raw in texts.items() if path != "f0.py" and named.search(raw))
            assert files_registering(texts, ops, {"f0.py"}) == expected, ops
            sizes.add(len(expected))
    assert min(sizes) < 10 < max(sizes) < len(texts) - 1  # some texts hold a name, others none


def test_a_module_path_through_an_ops_folder_is_no_custom_op():
    """A run looks for the Python registration of each custom op its code may call
    (``ModuleFiles.registering``). ``torch.ops.<ns>.<name>`` is one, through ``import torch as
    th`` or ``from torch import ops`` too; a module path through a package's ``ops`` folder
    (``pkg.kernels.ops.moe.topk``, in an import or a string) is not, and sends the run to no file
    that merely names ``topk`` beside a registration word."""
    from sync_lint.pipeline.project_plan import _op_calls

    assert _op_calls("torch.ops.pkg.rms_norm(x)\nth.ops.pkg.silu(x)\nops.pkg.gelu(x)\n", {"th": ("torch",)}) == (
        ("pkg", "gelu"), ("pkg", "rms_norm"), ("pkg", "silu"),
    )
    module_paths = (
        "from pkg.kernels.ops.moe.topk import fast_topk\nimport aiter.ops.flydsl.kernels\n"
        "from .ops.attention.decode import run\nname = 'aiter.ops.flydsl.kimi_decode'\n"
    )
    assert _op_calls(module_paths, {"fast_topk": ("pkg.kernels.ops.moe.topk.fast_topk",)}) == ()


# Pieces of text an ``ops`` chain is made of, and what breaks or shares one: a word holding
# ``ops`` (``xops``, ``opsx``), Unicode spaces and letters (``\s`` and ``\w`` are Unicode's).
_CHAIN_PIECES = ["ops", ".", " ", "\n", "\t", "\u2003", "torch", "x", "_", "ops.", "(", "1", "\u00e9", "xops", "opsx", "a.b"]


@hypothesis.settings(max_examples=3000, deadline=None)
@hypothesis.given(hypothesis.strategies.lists(hypothesis.strategies.sampled_from(_CHAIN_PIECES), max_size=16))
def test_the_op_chains_of_a_text_are_those_the_pattern_finds_at_every_character(pieces):
    """``_op_chains`` tries ``_OP_CHAIN`` only where a match may start (at an ``ops``, or at the
    word before the dot before one) to spare the engine a try at every character; it must find
    what ``findall`` finds, overlaps and all (``ops.ops.a.b`` is ``ops`` through ``a.b``)."""
    from sync_lint.pipeline.project_plan import _OP_CHAIN, _op_chains

    text = "".join(pieces)
    assert _op_chains(text) == _OP_CHAIN.findall(text)


# A chain as written: a name not after a word character or a dot, then ``.name`` parts, with
# spaces around the dots. ``_CHAIN`` says the same with its first letter first (a faster scan).
_CHAIN_AS_READ = r"(?<![\w.])[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*"
_NAME_PIECES = ["a", "b_", "Z", "1", "9a", ".", " . ", " ", "\n", "\t", "\u2003", "\u00e9", "(", "x.y", ".."]


@hypothesis.settings(max_examples=3000, deadline=None)
@hypothesis.given(hypothesis.strategies.lists(hypothesis.strategies.sampled_from(_NAME_PIECES), max_size=14))
def test_the_chains_a_unit_may_call_are_read_as_the_plain_pattern_reads_them(pieces):
    import re

    from sync_lint.pipeline.project_plan import _CHAIN

    text = "".join(pieces)
    assert _CHAIN.findall(text) == re.findall(_CHAIN_AS_READ, text)


def test_the_op_chains_of_hand_picked_texts():
    from sync_lint.pipeline.project_plan import _op_chains

    assert _op_chains("ops.ops.a.b") == [("ops", "a", "b")]
    assert _op_chains("x = torch . ops .ns. f(y)\nth.ops.n2.g") == [("torch", "ns", "f"), ("th", "n2", "g")]
    assert _op_chains("torch.ops.ns.x.ops.a.b") == [("torch", "ns", "x")]  # the second head is the first's name
    assert _op_chains("y = (a). ops.ns.f") == [("", "ns", "f")]  # no word before the dot: no head
    assert _op_chains("xops.a.b loops.c.d") == []


def defines_or_imports_by_patterns(text: bytes, parts: tuple[str, ...]) -> bool:
    """What ``project_plan._defines_or_imports`` answers, as patterns over the whole text: a
    ``def`` of a part, a ``class`` of the first of two, or an ``import`` of the first on its
    line or in a bracket opened on that line."""
    import re

    words = [re.escape(part.encode()) for part in parts]
    if re.search(rb"\bdef\s+(?:" + b"|".join(words) + rb")\b", text):
        return True
    if len(parts) > 1 and re.search(rb"\bclass\s+" + words[0] + rb"\b", text):
        return True
    return re.search(rb"\bimport\b[^\n]*?(?:\([^)]*)?\b" + words[0] + rb"\b", text) is not None


@pytest.mark.parametrize(("text", "parts", "answer"), [
    (b"def foo(x):\n    pass\n", ("foo",), True),
    (b"def foobar(x):\n    pass\n", ("foo",), False),
    (b"async def  foo(x): ...\n", ("foo",), True),
    (b"def\n foo", ("foo",), True),  # as the pattern reads it
    (b"undef foo", ("foo",), False),
    (b"class Foo:\n    def run(self): ...\n", ("Foo", "run"), True),
    (b"class Foo(Base): ...\n", ("Foo", "missing"), True),
    (b"class Foo(Base): ...\n", ("Foo",), False),  # a class named alone is no function
    (b"from .impl import foo\n", ("foo",), True),
    (b"from .impl import (\n    bar,\n    foo,\n)\n", ("foo",), True),
    (b"from .impl import (bar)\nfoo = 1\n", ("foo",), False),
    (b"import os\nfoo = 1\n", ("foo",), False),
    (b"x = call(import_)\nfoo(1)\n", ("foo",), False),
    (b"import torch  # foo\n", ("foo",), True),
    (b"\xc3\xa9def foo", ("foo",), True),
    (b"_def foo", ("foo",), False),
])
def test_a_file_beyond_a_run_may_define_or_import_a_name_as_the_patterns_say(text, parts, answer):
    from sync_lint.pipeline.project_plan import _defines_or_imports

    assert _defines_or_imports(text, parts) == defines_or_imports_by_patterns(text, parts) == answer


def test_a_file_beyond_a_run_may_define_or_import_a_name_as_the_patterns_say_of_any_text():
    """``_defines_or_imports`` looks back from each occurrence of a name, the patterns scan the
    whole text: over random texts of the tokens that decide it, both answer alike."""
    import random

    from sync_lint.pipeline.project_plan import _defines_or_imports

    tokens = [
        b"def", b"class", b"import", b"from", b"(", b")", b"\n", b" ", b"\t", b"foo", b"bar", b"foobar",
        b"_foo", b"foo_", b",", b".", b"#", b"1", b"\xc3\xa9", b"defoo", b"import(", b"\r\n",
    ]
    names = [("foo",), ("foo", "bar"), ("bar", "foo"), ("foo_",), ("bar",)]
    chosen = random.Random(47)
    for _ in range(20000):
        text = b"".join(chosen.choice(tokens) for _ in range(chosen.randint(0, 24)))
        parts = chosen.choice(names)
        assert _defines_or_imports(text, parts) == defines_or_imports_by_patterns(text, parts), (text, parts)


def test_a_file_skipped_as_not_worth_reading_answers_no_name_it_was_asked_for():
    """``ModuleFiles._may_define_or_import`` skips a file beyond a run only where the plan could
    not resolve the name into it: over every module of this repository (engine and reference
    kernels, varied real code), each name a call may give, a function, a method, a class, a
    constant, an imported name, a method of an imported class, is asked of its own module's
    file; wherever the plan resolves it to a function of that file, or follows it through the
    file's imports, the file must be worth reading."""
    import ast as python_ast

    from sync_lint.pipeline.project_plan import ModuleFiles, _module_imports, _Resolver

    root = Path(__file__).resolve().parent.parent
    linter = runner.Linter(make_settings())
    paths = sorted(str(path) for folder in ("sync_lint", "reference_kernels") for path in (root / folder).rglob("*.py"))
    asked = 0
    for path in paths:
        outline = linter.outline_one(path)
        if not outline.module_name:
            continue
        files = ModuleFiles([outline])
        by_qualname: dict[str, list[int]] = {}
        for number, unit in enumerate(outline.units):
            by_qualname.setdefault(unit.qualname, []).append(number)
        resolver = _Resolver(by_qualname, _module_imports([outline]))
        tree = python_ast.parse(read(path).text)
        names = {unit.qualname[len(outline.module_name) + 1 :] for unit in outline.units if unit.index >= 0}
        names |= set(outline.imports) | {f"{name}.forward" for name in outline.imports}
        for node in tree.body:
            if isinstance(node, python_ast.ClassDef):
                names |= {node.name, f"{node.name}.__init__", f"{node.name}.missing"}
            elif isinstance(node, python_ast.Assign):
                names |= {target.id for target in node.targets if isinstance(target, python_ast.Name)}
        for name in sorted(n for n in names if n):
            full = f"{outline.module_name}.{name}"
            # The module's own code (``MODULE_CODE``) answers any name of the module where it
            # defines a function under a block; a constant then "resolves" to it, but no
            # analysis follows a call of a constant or a class, so only functions count.
            functions = [t for t in resolver.targets(full) if outline.units[t].index >= 0]
            resolves = bool(functions) or len(resolver.unresolved_through(full)) > 1
            if resolves:
                asked += 1
                assert files._may_define_or_import(str(Path(path).resolve()), name.split(".")), (path, name)
    assert asked > 500  # the question was asked of real names, not of a handful
