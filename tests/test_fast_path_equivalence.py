"""The fast paths must find exactly what the plain path finds.

Plain path: serial, no cache, every file parsed whole (``Linter(fast=False)``) and the text
pre-filter off (``prefilter.may_match`` always True). Each fast path is compared with it on the
fixtures and on a generated corpus above the parallel threshold: a process pool (``jobs=2``), the
cache (cold, then warm: the warm run must not lint anything), the pre-filter, and the
project plan's function-level masking (``fast=True``).

The real rules run, plus two probe rules registered here so that the comparison never becomes
vacuous whatever the GPU rules do: GPU991 flags ``.item()`` calls (a local finding) and records a
``sync`` summary for each top-level function that makes one; GPU992 flags every call by name, in
any function of a file marked ``# probe-hot`` (its trigger), conditionally on the callee's summary
(a cross-file finding in a unit without triggers: the case the project plan's closure over callers exists for).
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import libcst as cst
import pytest

from sync_lint.api import make_settings
from sync_lint.pipeline import lint_file as lint_file_stage
from sync_lint.pipeline import prefilter, runner, scout
from sync_lint.pipeline.discover import DEFAULT_EXCLUDE, Discovery
from sync_lint.rules import all_rules
from sync_lint.rules.base import CalleeCondition, Finding, Rule

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
OPTIONS = {"sync_guard": "reference_kernels.sync_check:gpu_sync_allowed"}


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.depth = 0
        self.function: list[str] = []
        self.item_calls: list[cst.Call] = []
        self.named_calls: list[tuple[cst.Call, str]] = []
        self.syncing: set[str] = set()  # top-level functions with an ``.item()`` call
        self._stack: list[tuple[str, bool]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._stack.append((node.name.value, len(self._stack) == 0 and self.depth == 0))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._stack.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.depth += 1

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.depth -= 1

    def visit_Call(self, node: cst.Call) -> None:
        if not self._stack:
            return
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "item":
            self.item_calls.append(node)
            name, top_level = self._stack[0]
            if top_level:
                self.syncing.add(name)
        elif isinstance(node.func, cst.Name):
            self.named_calls.append((node, node.func.value))


class _CallsAnalysis:
    def __init__(self, ctx) -> None:
        self.visitor = _Calls()
        ctx.module.visit(self.visitor)


class ProbeItemCall(Rule):
    code = "GPU991"
    name = "probe-item-call"
    summary = "Probe: an `.item()` call inside a function."
    what = why = example = fix_safety = "Test probe."
    triggers = (".item()",)

    def check(self, ctx):
        calls = ctx.get(_CallsAnalysis).visitor
        functions = {info.qualname: info for info in ctx.functions()}
        for name in calls.syncing:
            ctx.summary(functions[f"{ctx.module_name}.{name}"]).sync = "calls `.item()`"
        for node in calls.item_calls:
            yield Finding(node, "probe: `.item()` call")


class ProbeSyncingCallee(Rule):
    code = "GPU992"
    name = "probe-syncing-callee"
    summary = "Probe: a call of a function whose summary says it syncs, in a file marked `# probe-hot`."
    what = why = example = fix_safety = "Test probe."
    # The marker is what makes the trigger honest: without it the rule finds nothing in a file.
    triggers = ("probe-hot",)

    def check(self, ctx):
        if "probe-hot" not in ctx.source.text:
            return
        for node, name in ctx.get(_CallsAnalysis).visitor.named_calls:
            callee = ctx.names.resolve(node.func)
            if callee:
                yield Finding(node, "probe: `{callee}` {reason}", if_callee=CalleeCondition("sync", callee))


PROBES = (ProbeItemCall, ProbeSyncingCallee)


@pytest.fixture(autouse=True)
def with_probes(monkeypatch):
    rules = tuple(sorted(all_rules() + PROBES, key=lambda rule: rule.code))
    monkeypatch.setattr(runner, "all_rules", lambda: rules)


# -- corpora -------------------------------------------------------------------------------------
HELPER = '''\
import torch


def host_read_{i}(x):
    return int(x.sum().item())


def pure_helper_{i}(x):
    return x + 1
'''

USER_HEAD = '''\
# probe-hot
import torch
import triton
import triton.language as tl

from gen.helpers_{j} import pure_helper_{j}, host_read_{j}
'''

USER_PARTS = [
    '''
@triton.jit
def _copy_kernel_{i}(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def launch_copy_{i}(src, dst):
    _copy_kernel_{i}[(triton.cdiv(src.numel(), 128),)](src, dst, src.numel(), BLOCK=128)
''',
    '''
def calls_helper_{i}(x):
    return host_read_{j}(x)


def calls_pure_{i}(x):
    return pure_helper_{j}(x)
''',
    '''
def indirect_{i}(x):
    y = calls_helper_{i}(x)
    return y
''',
    '''
class Fake{i}MetadataBuilder:
    def __init__(self, device):
        self.device = device
        self.buf = torch.zeros(16, 4, device=device)
        self.counts = torch.zeros(8, dtype=torch.int32, device=device)

    def build(self, common_prefix_len, common):
        total = self.counts.sum().item()
        lens = common.seq_lens.tolist()
        launch_copy_{i}(self.buf[:, 0], self.buf[:, 1])
        return total, lens

    def helper(self):
        return self.counts.max()
''',
    '''
TEMPLATE_{i} = """
def not_code():
    x.item()
"""


def uses_template_{i}():
    return TEMPLATE_{i}.count("item")
''',
    '''
@torch.compile
def decorated_{i}(x):
    return host_read_{j}(x)
''',
    '''
if torch.cuda.is_available():

    def conditional_{i}(x):
        return x.item()
''',
    '''
def loop_{i}(xs):
    out = []
    for x in xs:
        out.append(x.item())
    return out
''',
    # ``hot-class-methods``: only the contract's methods are hot, and a helper of the class is
    # judged as in a hot class; the host-work method calls the same helper, unreported.
    '''
class Fake{i}AttentionImpl:
    def forward(self, layer, query, attn_metadata):
        return self._lens(attn_metadata) + host_read_{j}(query)

    def _lens(self, attn_metadata):
        return attn_metadata.seq_lens.tolist()


class Fake{i}AttnBackend:
    def init_forward_metadata_in_graph(self, forward_batch):
        self.total = host_read_{j}(forward_batch.seq_lens)

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        self.total = host_read_{j}(forward_batch.seq_lens)
''',
]


# Only cross-file findings, in a unit without triggers: the case of the project plan's closure over callers.
CALLERS = '''\
# probe-hot
import torch

from gen.helpers_{j} import host_read_{j}


def wrapper_{i}(x):
    return host_read_{j}(x)


def unrelated_{i}(a):
    return a + 1


def where_{i}(t):
    return t.device
'''

# GPU1xx across files (``project_plan.ProjectPlan._sink_closure``): kernel wrappers taking their
# tensors by position, keyword, ``*args`` / ``**kwargs`` and through a method, each with a
# parameter it only reads; the callers hand views and casts to some parameters that reach the
# kernel and to some that do not.
WRAPPERS = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask) * 2, mask=mask)


def scale_into(src, dst, *, note=None):
    _scale_kernel[(triton.cdiv(src.numel(), 128),)](src, dst, src.numel(), BLOCK=128)
    return dst.data_ptr(), note


def forward_all(*tensors, **options):
    return scale_into(*tensors, **options)


def by_keyword(meta, out=None, src=None):
    return scale_into(src, out, note=meta.shape)


_C = torch.ops._C  # a custom op's namespace through a module-level alias


def norm_into(src, dst):
    _C.rms_norm(dst, src, 1e-6)


class Scaler:
    def __init__(self, out):
        self.out = out

    def run(self, src, label):
        return scale_into(src, self.out, note=label)

    def twice(self, src, label):
        self.run(src, label)
        return self.run(src.contiguous(), label)

    @staticmethod
    def plain(src, dst):
        return scale_into(src, dst)
'''

VIEWS = '''\
import torch

from gen.wrappers import Scaler, by_keyword, forward_all, norm_into, scale_into


def hands_views_{i}(t, out):
    scale_into(t.contiguous(), out, note=t[:, 1])
    by_keyword(t[:, 0], out=out, src=t.contiguous())
    Scaler.plain(t.contiguous(), out)
    {extra}


class Local{i}(Scaler):
    def go(self, t):
        return self.twice(t.contiguous(), t[:, 0])
'''

VIEW_CALLS = [
    "scale_into(t[:, 0], out)",
    "forward_all(t.t(), out)",
    "by_keyword(t, out=out, src=t.transpose(0, 1))",
    "Scaler.plain(t[::2], out)",
    "norm_into(t.t(), out)",
]

# Code whose words pass the one-file gate of GPU1xx and GPU2xx rules but whose syntax does not
# (``pipeline.scout``): a ``forward`` of no module, ``list[str]()``, ``.view(-1, 2)``. Every
# other one also holds a real module's ``forward`` (through an aliased import), which must report.
LOOKALIKE = '''\
import torch
from torch import nn as tnn


class Scheduler{i}:
    def forward(self, request):
        return request.tokens.item()


def shapes_{i}(t):
    names = list[str]()
    table = dict[str, int]()
    flat = t[:, 0].to(torch.int32).view(-1, 2)
    return names, table, flat
'''

LOOKALIKE_MODULE = '''

class Head{i}(tnn.Module):
    def forward(self, x):
        return x.to(self.device).sum().item()
'''

# Trigger-free code, always present: what the masking replaces by ``pass``.
PLAIN_PART = '''

def plain_math_{i}(a, b):
    return a * b + 1


def uses_pure_{i}(v):
    return pure_helper_{j}(v)


class Plain{i}:
    def __init__(self, v):
        self.v = v

    def method(self, w):
        return self.v + w
'''


# ``nn.Module`` subclasses by way of another file (``project_plan.ModuleClasses``): ``Layer{i}``'s
# base is a module in ``layer_base.py``, ``Sub{i}``'s is ``Layer{i}``; both forwards are hot in a
# run of many files. ``Layer{i}.refresh`` overrides the base's syncing ``refresh`` and syncs on
# nothing, so the plan masks it: the call must still go to it, not to the base's.
LAYER_BASE = '''\
import torch
from torch import nn


class LayerBase(nn.Module):
    def refresh(self, x):
        return torch.ones(4, device="cuda").tolist()
'''

LAYERS = '''\
import torch

from gen.helpers_{j} import host_read_{j}
from gen.layer_base import LayerBase


class Layer{i}(LayerBase):
    def forward(self, x):
        torch.cuda.synchronize()
        return self.refresh(x)

    def refresh(self, x):
        return x + 1


class Sub{i}(Layer{i}):
    def forward(self, x):
        return host_read_{j}(x.cuda())
'''


def generated_module(rng: random.Random, i: int, helpers: int) -> str:
    j = rng.randrange(helpers)
    parts = [PLAIN_PART] + [part for part in USER_PARTS if rng.random() < 0.7]
    if USER_PARTS[2] in parts and USER_PARTS[1] not in parts:
        parts.insert(0, USER_PARTS[1])
    if USER_PARTS[3] in parts and USER_PARTS[0] not in parts:
        parts.insert(0, USER_PARTS[0])
    text = USER_HEAD.format(i=i, j=j) + "".join(part.format(i=i, j=j) for part in parts)
    return text.replace("\n", "\r\n") if rng.random() < 0.15 else text


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Fixture copies in several packages, and generated engine-like modules: above the threshold."""
    root = tmp_path_factory.mktemp("corpus")
    for copy in range(1):
        for folder in ("gpu1xx", "gpu2xx"):
            shutil.copytree(FIXTURES / folder, root / f"copy{copy}" / folder)
        (root / f"copy{copy}" / "__init__.py").write_text("")
    gen = root / "gen"
    gen.mkdir()
    (gen / "__init__.py").write_text("")
    rng = random.Random(20261203)
    helpers = 6
    for i in range(helpers):
        (gen / f"helpers_{i}.py").write_text(HELPER.format(i=i))
    for i in range(30):
        (gen / f"user_{i}.py").write_bytes(generated_module(rng, i, helpers).encode())
    for i in range(8):
        (gen / f"callers_{i}.py").write_text(CALLERS.format(i=i, j=i % helpers))
    (gen / "wrappers.py").write_text(WRAPPERS)
    for i in range(len(VIEW_CALLS) + 1):
        extra = VIEW_CALLS[i] if i < len(VIEW_CALLS) else "return out"
        (gen / f"views_{i}.py").write_text(VIEWS.format(i=i, extra=extra))
    (gen / "layer_base.py").write_text(LAYER_BASE)
    for i in range(3):
        (gen / f"layers_{i}.py").write_text(LAYERS.format(i=i, j=i % helpers))
    for i in range(4):
        (gen / f"lookalike_{i}.py").write_text(LOOKALIKE.format(i=i) + (LOOKALIKE_MODULE.format(i=i) if i % 2 else ""))
    files = python_files(root)
    assert len(files) > runner.PARALLEL_THRESHOLD + 5, len(files)
    return root


def python_files(root: Path) -> list[str]:
    return Discovery(DEFAULT_EXCLUDE, root).files([str(root)])


def key(diagnostics) -> list[tuple]:
    return sorted((d.path, d.line, d.col, d.end_line, d.end_col, d.code, d.message, d.fix) for d in diagnostics)


def plain(files: list[str], monkeypatch, options: dict = OPTIONS) -> list[tuple]:
    with monkeypatch.context() as patch:
        patch.setattr(prefilter, "may_match", lambda rule, text, alone=False: True)
        without_scout(patch)
        linter = runner.Linter(make_settings(**options), fast=False)
        return key(linter.run(files, jobs=1).diagnostics)


def without_scout(patch) -> None:
    """The syntax scout answers "may" to every question, and a file checked on its own is
    parsed whole."""
    patch.setattr(scout.Scout, "may_have_hot_scope", lambda self: True)
    patch.setattr(scout.Scout, "may_sync_in_a_hot_scope", lambda self: True)
    patch.setattr(scout.Scout, "may_report_at_a_sink", lambda self: True)
    patch.setattr(prefilter, "one_file_plan", lambda active, text, file_scout: None)


def fast(files: list[str], jobs: int = 1, cache_dir: str | None = None, options: dict = OPTIONS) -> list[tuple]:
    linter = runner.Linter(make_settings(**options), cache_dir=cache_dir, fast=True)
    return key(linter.run(files, jobs=jobs).diagnostics)


@pytest.fixture(scope="module")
def corpus_files(corpus) -> list[str]:
    return python_files(corpus)


@pytest.fixture(scope="module")
def corpus_plain(corpus_files) -> list[tuple]:
    patch = pytest.MonkeyPatch()
    try:
        rules = tuple(sorted(all_rules() + PROBES, key=lambda rule: rule.code))
        patch.setattr(runner, "all_rules", lambda: rules)
        return plain(corpus_files, patch)
    finally:
        patch.undo()


def test_corpus_is_not_vacuous(corpus_plain):
    codes = {entry[5] for entry in corpus_plain}
    # local and cross-file probe findings, and findings of the real rules
    assert {"GPU991", "GPU992"} <= codes, codes
    assert any(entry[6].startswith("probe: `host_read_") for entry in corpus_plain)
    assert any("callers_" in entry[0] and entry[5] == "GPU992" for entry in corpus_plain)
    # GPU1xx findings through the cross-file wrappers: views handed to parameters that reach the
    # kernel (``forward_all``'s ``*tensors`` is not followed by the analyses), or the custom op
    # behind a module-level alias (``norm_into``)
    # hot by ``hot-class-methods``: an attention implementation's ``forward``, an SGLang
    # backend's ``init_forward_metadata_in_graph``
    hot = {entry[6].split("`")[1] for entry in corpus_plain if entry[5] == "GPU201" and "user_" in entry[0]}
    assert any(scope.endswith("AttentionImpl.forward") for scope in hot), hot
    assert any(scope.endswith("AttnBackend.init_forward_metadata_in_graph") for scope in hot), hot
    # hot by way of another file: a module base there, and a class of the file derived from one
    layers = {entry[6].split("`")[1] for entry in corpus_plain if "layers_" in entry[0] and entry[5] == "GPU201"}
    assert {"Layer0.forward", "Sub0.forward"} <= layers, layers
    assert not any("refresh" in entry[6] for entry in corpus_plain if "layers_" in entry[0]), "refresh is overridden"
    views = {entry[0].rsplit("views_", 1)[1] for entry in corpus_plain if "views_" in entry[0] and entry[5].startswith("GPU1")}
    assert views == {"0.py", "2.py", "3.py", "4.py"}, sorted(views)
    real = {code for code in codes if code not in ("GPU991", "GPU992")}
    if any(not rule.tool_rule for rule in all_rules()):
        assert real, codes


def test_fast_serial_equals_plain(corpus_files, corpus_plain):
    assert fast(corpus_files) == corpus_plain


def test_parallel_equals_serial(corpus_files, corpus_plain):
    assert fast(corpus_files, jobs=2) == corpus_plain


def test_prefilter_off_equals_on(corpus_files, corpus_plain, monkeypatch):
    monkeypatch.setattr(prefilter, "may_match", lambda rule, text, alone=False: True)
    without_scout(monkeypatch)
    assert fast(corpus_files) == corpus_plain


def test_masking_off_equals_on(corpus_files, corpus_plain):
    linter = runner.Linter(make_settings(**OPTIONS), fast=False)
    assert key(linter.run(corpus_files, jobs=1).diagnostics) == corpus_plain


def test_a_masked_override_is_the_method_called(tmp_path, monkeypatch):
    """``Layer0.refresh`` syncs on nothing, so the plan masks it; ``self.refresh(x)`` must still
    call it, not the base's syncing ``refresh``. Without a sync guard: a finding with a fix
    makes the runner lint its file again whole, which would hide a wrong masked finding."""
    monkeypatch.setattr(runner, "all_rules", all_rules)  # undo ``with_probes``
    gen = tmp_path / "gen"
    gen.mkdir()
    (gen / "__init__.py").write_text("")
    (gen / "helpers_0.py").write_text(HELPER.format(i=0))
    (gen / "layer_base.py").write_text(LAYER_BASE)
    (gen / "layers_0.py").write_text(LAYERS.format(i=0, j=0))
    files = python_files(tmp_path)
    expected = plain(files, monkeypatch, {})
    assert [entry[6].split("`")[1] for entry in expected] == ["Layer0.forward", "Sub0.forward"], expected
    assert fast(files, options={}) == expected


def test_masking_is_actually_used(corpus_files, monkeypatch):
    """Otherwise test_fast_serial_equals_plain compares the plain path with itself: the project
    plan must mask functions in some files, among them files with findings (whose fixes the
    runner then plans on the whole file)."""
    masked: list[str] = []
    original = lint_file_stage._parse_and_check
    monkeypatch.setattr(
        lint_file_stage, "_parse_and_check",
        lambda source, text, *a, **k: (text is not source.text and masked.append(source.path)) or original(source, text, *a, **k),
    )
    linter = runner.Linter(make_settings(**OPTIONS), fast=True)
    result = linter.run(corpus_files, jobs=1)
    assert len(set(masked)) >= 5, masked
    assert {d.path for d in result.diagnostics} & set(masked)


def test_cache_cold_then_warm_equals_plain(corpus_files, corpus_plain, tmp_path, monkeypatch):
    cache_dir = str(tmp_path / "cache")
    assert fast(corpus_files, jobs=2, cache_dir=cache_dir) == corpus_plain
    calls = []
    original = lint_file_stage.lint_path
    monkeypatch.setattr(lint_file_stage, "lint_path", lambda *a, **k: calls.append(a) or original(*a, **k))
    monkeypatch.setattr(runner, "lint_path", lambda *a, **k: calls.append(a) or original(*a, **k))
    parsed = []
    original_parse = cst.parse_module
    monkeypatch.setattr(cst, "parse_module", lambda *a, **k: parsed.append(1) or original_parse(*a, **k))
    assert fast(corpus_files, jobs=1, cache_dir=cache_dir) == corpus_plain
    assert parsed == [], f"warm run parsed {len(parsed)} files"


def test_a_warm_run_reuses_the_plan(corpus, corpus_files, corpus_plain, tmp_path, monkeypatch):
    """A warm run reads back what the plan keeps of each file instead of outlining and planning
    again; a changed file makes it plan again (``Cache.whole_run``)."""
    cache_dir = str(tmp_path / "cache")
    assert fast(corpus_files, jobs=1, cache_dir=cache_dir) == corpus_plain
    outlined = []
    original = runner.Linter.outline_one
    monkeypatch.setattr(runner.Linter, "outline_one", lambda self, *a, **k: outlined.append(a[0]) or original(self, *a, **k))
    assert fast(corpus_files, jobs=1, cache_dir=cache_dir) == corpus_plain
    assert outlined == []
    work = tmp_path / "work"
    shutil.copytree(corpus, work)
    files = python_files(work)
    assert fast(files, jobs=1, cache_dir=cache_dir) == fast(files, jobs=1)  # other paths: planned again
    assert outlined


def test_cache_sees_a_changed_callee(corpus, corpus_files, tmp_path, monkeypatch):
    """A warm run after an edit in one file must see its effect on callers in other files."""
    work = tmp_path / "work"
    shutil.copytree(corpus / "gen", work / "gen")
    files = python_files(work)
    cache_dir = str(tmp_path / "cache")
    before = fast(files, jobs=1, cache_dir=cache_dir)
    helper = work / "gen" / "helpers_0.py"
    helper.write_text(HELPER.format(i=0).replace("int(x.sum().item())", "x.sum()"))
    after_warm = fast(files, jobs=1, cache_dir=cache_dir)
    with monkeypatch.context() as patch:
        after_plain = plain(files, patch)
    assert after_warm == after_plain
    assert after_warm != before


def test_fixtures_fast_equals_plain(monkeypatch):
    files = python_files(FIXTURES)
    expected = plain(files, monkeypatch)
    assert expected, "the fixtures produce findings"
    assert fast(files) == expected
    assert fast(files, jobs=2) == expected


ALONE = {**OPTIONS, "follow_imports": "skip"}  # a run of one file is checked alone


def test_one_file_runs_equal_plain(corpus_files, monkeypatch):
    """A run of one file checked alone skips the rules that could only find something there
    with another file's summaries (``Rule.alone_triggers``): each file checked on its own must
    still find exactly what the plain path finds for it on its own."""
    for path in corpus_files:
        assert fast([path], options=ALONE) == plain([path], monkeypatch, ALONE), path


def test_a_run_of_one_file_reports_what_the_whole_run_reports_in_it(corpus_files, monkeypatch):
    """Unless it is checked alone, a run of one file (pre-commit with one staged file) reads what
    its findings rest on beyond it, as a run of two files does: each file reports what a run of
    every file reports in it, on both paths. Checked alone, some files report less (a hot
    forward that calls another file's syncing helper). The real rules: a probe's summary of
    ``.item()`` would stand in the message for the real reason where it runs beyond the file."""
    monkeypatch.setattr(runner, "all_rules", all_rules)  # undo ``with_probes``
    whole = fast(corpus_files)
    fewer_alone = 0
    for path in corpus_files:
        expected = [entry for entry in whole if entry[0] == path]
        assert fast([path]) == expected, path
        assert plain([path], monkeypatch) == expected, path
        fewer_alone += fast([path], options=ALONE) != expected
    assert fewer_alone >= 3, fewer_alone


# Options the scout reads as the analyses do (stop 34: each used to leave every question to the
# analyses), each set over the generated corpus and the fixtures copied into it.
CONFIGURED = {
    "hot-functions": {
        "hot_functions": [
            "gen.user_*.calls_helper_*", "gen.user_3.indirect_3", "any_device_model.step", "*.outer.inner_*",
        ],
    },
    "contiguous-sinks": {
        "contiguous_sinks": ["gen.helpers_0.pure_helper_0", "*.launch_copy_1", "gen.wrappers.scale_into"],
    },
    "unknown-device always": {"unknown_device": "always"},
}


# A model whose forward hands a parameter to a helper that reads it on the host: a sync only
# where ``unknown-device = "always"`` counts a value of unknown device. ``step`` and
# ``outer.inner_step`` sync, but are hot only where ``hot-functions`` names them.
ANY_DEVICE_MODEL = """
import torch


def count(x):
    return x.sum().item()


def rows(x):
    return x.shape[0]


class Model(torch.nn.Module):
    def forward(self, x):
        return count(x) + rows(x)


def step(n):
    return torch.ones(n, device="cuda").sum().item()


def outer(n):
    def inner_step(m):
        return torch.ones(m, device="cuda").tolist()
    return inner_step(n)
"""


@pytest.mark.parametrize("name", CONFIGURED)
def test_configured_runs_equal_plain(name, corpus_files, tmp_path, monkeypatch):
    """The real rules only: the probes' summaries count every ``.item()`` as a sync, which
    would hide what ``unknown-device`` changes (and which the scout does not model)."""
    monkeypatch.setattr(runner, "all_rules", all_rules)  # undo ``with_probes``
    (tmp_path / "any_device_model.py").write_text(ANY_DEVICE_MODEL)
    files = [*corpus_files, str(tmp_path / "any_device_model.py")]
    options = {**OPTIONS, **CONFIGURED[name]}
    expected = plain(files, monkeypatch, options)
    assert expected != plain(files, monkeypatch), "the options change what is found: the test compares something"
    assert fast(files, options=options) == expected
    for path in files:
        assert fast([path], options=options) == plain([path], monkeypatch, options), path


@pytest.mark.parametrize("options", [OPTIONS, ALONE], ids=["reading-beyond", "alone"])
def test_fixture_files_alone_equal_plain(monkeypatch, options):
    """The fixtures hold the real rules' cases (builders, kernels and their wrappers, models):
    each checked on its own (reading beyond it, or alone) must find what the plain path finds
    for it, masked or not. Without
    the probes: GPU991 marks every function with an ``.item()`` as syncing, which GPU201 reads
    too, so a hot call that hands such a helper a host tensor (``max_seqlen(cu_seqlens_cpu)``,
    no sync) would be one on the plain path only, where the scout does not judge the file."""
    monkeypatch.setattr(runner, "all_rules", all_rules)  # undo ``with_probes``
    files = python_files(FIXTURES) + python_files(ROOT / "reference_kernels")
    found = 0
    for path in files:
        expected = plain([path], monkeypatch, options)
        assert fast([path], options=options) == expected, path
        found += len(expected)
    assert found > 20, found


def test_fixtures_with_preview_rules_fast_equal_plain(monkeypatch):
    """The preview rules too: GPU204, and GPU205, a hot-scope rule that reports at sites of a
    hot function's own (a copy onto the GPU) whether or not that function may sync
    (``Rule.own_site_words``). Over all the fixtures, and each file on its own."""
    monkeypatch.setattr(runner, "all_rules", all_rules)  # without the probes, as above
    options = {**OPTIONS, "preview": True}
    files = python_files(FIXTURES)
    expected = plain(files, monkeypatch, options)
    assert {"GPU204", "GPU205"} <= {entry[5] for entry in expected}
    assert fast(files, options=options) == expected
    for path in files:
        assert fast([path], options=options) == plain([path], monkeypatch, options), path


def test_one_file_plan_is_actually_used(corpus_files):
    """Otherwise test_one_file_runs_equal_plain is vacuous for it: some files checked alone
    must be parsed with functions masked, and yet have findings."""
    linter = runner.Linter(make_settings(**OPTIONS))
    masked_with_findings = 0
    for path in corpus_files:
        scope = linter.scope_of([Path(path).read_text()])
        text = Path(path).read_text()
        active = [rule for rule in scope.rules if prefilter.may_match(rule, text)]
        plan = prefilter.one_file_plan(active, text, scope.scout) if active else None
        if plan is not None and plan.is_masking() and linter.run([path], jobs=1).diagnostics:
            masked_with_findings += 1
    assert masked_with_findings >= 3, masked_with_findings


def test_small_runs_equal_plain(corpus_files, monkeypatch):
    """A small run (pre-commit's staged files) runs only the rules that some file of it may
    match alone: random groups of files must find what the plain path finds for them."""
    rng = random.Random(7)
    for _ in range(25):
        group = rng.sample(corpus_files, rng.randint(2, 6))
        assert fast(group) == plain(group, monkeypatch), group


def test_one_file_gate_is_actually_used(corpus_files):
    """Otherwise test_one_file_runs_equal_plain compares the plain path with itself: some file
    must pass a real rule's triggers yet fail its ``alone_triggers``."""
    rules = [rule(make_settings(**OPTIONS)) for rule in all_rules() if not rule.tool_rule]
    skipped = set()
    for path in corpus_files:
        text = Path(path).read_text()
        skipped.update(r.code for r in rules if prefilter.may_match(r, text) and not prefilter.may_match(r, text, alone=True))
    assert skipped & {"GPU101", "GPU102", "GPU201", "GPU202"}, skipped


def test_scout_gate_is_actually_used(corpus_files):
    """Otherwise the scout's part of test_one_file_runs_equal_plain is vacuous: some file must
    pass a hot-scope rule's and a sink rule's one-file triggers, yet lose both to the scout;
    and the files with a real module must keep the hot-scope rules."""
    linter = runner.Linter(make_settings(**OPTIONS), fast=True)
    dropped: dict[str, set[str]] = {}
    for path in corpus_files:
        text = Path(path).read_text()
        kept = {rule.code for rule in linter.scope_of([text]).rules}
        dropped[Path(path).name] = {
            rule.code for rule in linter.rules if prefilter.may_match(rule, text, alone=True) and rule.code not in kept
        }
    assert {"GPU101", "GPU201", "GPU202"} <= dropped["lookalike_0.py"], dropped["lookalike_0.py"]
    assert "GPU201" not in dropped["lookalike_1.py"], dropped["lookalike_1.py"]
    assert "GPU101" in dropped["lookalike_1.py"], dropped["lookalike_1.py"]


@pytest.mark.parametrize("with_cache", [False, True])
def test_a_small_run_reads_each_file_once(tmp_path, monkeypatch, with_cache):
    """A small run reads its files to choose its rules (``Linter.scope_of``), and lints what it
    read: reading again would be work done twice, and could lint other text than it chose for."""
    files = []
    for i, body in enumerate(["x = 1\n", "def forward(self, x):\n    return x.item()\n", "y = t[:, 0].to(torch.int32)\n"]):
        path = tmp_path / f"m{i}.py"
        path.write_text(body)
        files.append(str(path))
    opened: list[str] = []
    real_open = os.open  # what ``source.read_bytes`` opens a file with

    def counting_open(file, *args, **kwargs):
        if str(file) in files:
            opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    linter = runner.Linter(make_settings(), cache_dir=str(tmp_path / "cache") if with_cache else None)
    result = linter.run(files, jobs=1)
    assert sorted(opened) == sorted(files)
    assert result.files_checked == 3
