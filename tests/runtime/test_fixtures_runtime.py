"""Run the linter fixtures: every "before" fails at run time, every "after" passes.

The ``# expect: CODE`` annotations are checked against run-time evidence, not just
counted: for layout fixtures, the arguments that reach the kernel (or the kernel
boundary) non-contiguous must sit exactly on the annotated lines; for sync fixtures,
the lines the armed checker reports (warn mode) must be exactly the annotated ones.
The same tests lint the same file: sync-lint must flag exactly those lines.
"""

from __future__ import annotations

import ast
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from reference_kernels._testing import (
    expected_findings,
    kda_pool_case,
    load_fixture_module,
    mark_scheduler_tensors,
    random_mla_batch,
)
from reference_kernels.kda.ops import _launch_kda_prefill
from reference_kernels.mla.metadata import cdiv
from reference_kernels.mla.ops import mla_forward
from reference_kernels.mla.reference import mla_reference
from reference_kernels.sync_check import (
    GPUSyncError,
    GPUSyncWarning,
    mark_device_resident,
    sync_checked_step,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
UPSTREAM, RUNTIME = FIXTURES / "upstream", FIXTURES / "runtime"
FP32 = {"atol": 2e-5, "rtol": 2e-5}

LAYOUT_CODES = {"GPU101", "GPU102"}
SYNC_CODES = {"GPU201", "GPU202"}


def _pair(directory: Path, stem: str) -> tuple[Path, Path]:
    return directory / f"{stem}_before.py", directory / f"{stem}_after.py"


def _annotated_lines(path: Path, codes: set[str]) -> set[int]:
    return {line for line, code in expected_findings(path) if code in codes}


def _linted_lines(path: Path, codes: set[str]) -> set[int]:
    """The lines sync-lint flags in this fixture, linted with the kernels it calls."""
    from sync_lint.api import lint_paths

    diagnostics = lint_paths([str(path), str(FIXTURES.parent / "reference_kernels")])
    return {d.line for d in diagnostics if Path(d.path).resolve() == path.resolve() and d.code in codes}


def test_every_fixture_comes_in_an_annotated_pair():
    befores = sorted(FIXTURES.glob("*/*_before.py"))
    assert len(befores) == 12
    for before in befores:
        after = before.with_name(before.name.replace("_before.py", "_after.py"))
        assert expected_findings(before), before
        assert after.exists() and not expected_findings(after), after


# --- layout fixtures -------------------------------------------------------------


class _CallSpy:
    """Stands in for a kernel (``kernel[grid](...)``) or a boundary function and records
    which tensor arguments arrive non-contiguous, then calls the real one."""

    def __init__(self, real: Callable) -> None:
        self.real = real
        self.non_contiguous: set[int | str] = set()

    def _record(self, args: tuple, kwargs: dict) -> None:
        named = [*enumerate(args), *kwargs.items()]
        self.non_contiguous = {
            key
            for key, value in named
            if isinstance(value, torch.Tensor) and not value.is_contiguous()
        }

    def __call__(self, *args, **kwargs):
        self._record(args, kwargs)
        return self.real(*args, **kwargs)

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self._record(args, kwargs)
            return self.real[grid](*args, **kwargs)

        return launch


def _argument_lines(path: Path, callee: str) -> dict[int | str, int]:
    """Source line of each argument (position or keyword) of the call to ``callee``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.value if isinstance(node.func, ast.Subscript) else node.func
        if isinstance(func, ast.Name) and func.id == callee:
            lines: dict[int | str, int] = {i: arg.lineno for i, arg in enumerate(node.args)}
            lines.update({kw.arg: kw.value.lineno for kw in node.keywords})
            return lines
    raise LookupError(f"no call to {callee} in {path}")


def _spy_on(module, monkeypatch, callee: str) -> _CallSpy:
    spy = _CallSpy(getattr(module, callee))
    monkeypatch.setattr(module, callee, spy)
    return spy


def _assert_flagged_lines_reach_the_call_strided(path: Path, spy: _CallSpy, callee: str):
    lines = _argument_lines(path, callee)
    strided = {lines[key] for key in spy.non_contiguous}
    # What fails at run time is what is annotated, and what the linter flags.
    assert strided == _annotated_lines(path, LAYOUT_CODES)
    assert strided == _linted_lines(path, LAYOUT_CODES)


KDA_LENGTHS = [5, 9, 3, 12]


def _kda_case(generator, device):
    return kda_pool_case(KDA_LENGTHS, [True] * len(KDA_LENGTHS), 2, 16, 32, generator, device)


def _kda_step(module, case, pool):
    x = case.inputs
    return module.kda_prefill_step(
        x.q, x.k, x.v, x.g, x.beta, pool, case.block_table, x.cu_seqlens, case.has_initial_state
    )


def test_kda_wrapper_before_trips_the_boundary_check(generator, monkeypatch):
    path = _pair(UPSTREAM, "kda_wrapper")[0]
    module = load_fixture_module(path)
    spy = _spy_on(module, monkeypatch, "fused_kda_chunk")
    case = _kda_case(generator, "cpu")
    with pytest.raises(ValueError, match="state_indices must be contiguous int32"):
        _kda_step(module, case, case.pool.clone())
    _assert_flagged_lines_reach_the_call_strided(path, spy, "fused_kda_chunk")


def test_kda_wrapper_before_without_the_check_corrupts_other_requests(
    kernel_device, generator, monkeypatch
):
    """The raw kernel reads state slot ``n`` as element ``n`` of the flattened
    ``[num_reqs, 2]`` table (and checkpoint slot ``n`` as element ``n + 1``), so
    request ``n`` lands on the slots of request ``n // 2``, roughly."""
    module = load_fixture_module(_pair(UPSTREAM, "kda_wrapper")[0])
    monkeypatch.setattr(module, "fused_kda_chunk", _launch_kda_prefill)
    case = _kda_case(generator, kernel_device)
    pool = case.pool.clone()
    o = _kda_step(module, case, pool)

    assert not torch.allclose(o, case.expected_o, **FP32)
    (_, _), (_, _), (slot2, checkpoint2), (slot3, checkpoint3) = case.block_table.tolist()
    for never_written in (checkpoint2, slot3, checkpoint3):
        torch.testing.assert_close(pool[never_written], case.pool[never_written])
        assert not torch.allclose(pool[never_written], case.expected_pool[never_written], **FP32)
    # Request 3's final state overwrote request 2's slot.
    assert not torch.allclose(pool[slot2], case.pool[slot2], **FP32)
    assert not torch.allclose(pool[slot2], case.expected_pool[slot2], **FP32)


def test_kda_wrapper_after_matches_the_reference(kernel_device, generator, monkeypatch):
    path = _pair(UPSTREAM, "kda_wrapper")[1]
    module = load_fixture_module(path)
    spy = _spy_on(module, monkeypatch, "fused_kda_chunk")
    case = _kda_case(generator, kernel_device)
    pool = case.pool.clone()
    o = _kda_step(module, case, pool)
    assert spy.non_contiguous == set()
    torch.testing.assert_close(o, case.expected_o, **FP32)
    torch.testing.assert_close(pool, case.expected_pool, **FP32)


def _temperature_case(generator, device):
    logits = torch.randn(5, 40, generator=generator)
    temperature = torch.rand(5, generator=generator) + 0.5
    top_p = torch.rand(5, generator=generator)
    top_k = torch.randint(1, 50, (5,), generator=generator).float()
    sampling_params = torch.stack([temperature, top_p, top_k], dim=1)
    expected = logits / temperature[:, None]
    return [t.to(device) for t in (logits, sampling_params, expected)]


def _lm_head_case(generator, device):
    hidden_states = torch.randn(3, 32, generator=generator)
    weight = torch.randn(64, 32, generator=generator).to(torch.bfloat16)
    expected = hidden_states @ weight.float().t()
    return [t.to(device) for t in (hidden_states, weight, expected)]


def _token_norms_case(generator, device):
    x_by_dim = torch.randn(8, 5, generator=generator)
    expected = (x_by_dim.t() ** 2).sum(-1)
    return [t.to(device) for t in (x_by_dim, expected)]


# stem: (entry point, kernel it launches, case builder)
LAYOUT_FIXTURES = {
    "temperature_column_slice": (
        "apply_temperature", "_apply_temperature_kernel", _temperature_case,
    ),
    "lm_head_permuted_cast": ("compute_logits", "_logits_kernel", _lm_head_case),
    "token_norms_guarded_copy": ("token_sq_norms", "_row_sq_norm_kernel", _token_norms_case),
}


@pytest.mark.parametrize("variant", ["before", "after"])
@pytest.mark.parametrize("stem", LAYOUT_FIXTURES)
def test_layout_fixture(kernel_device, generator, monkeypatch, stem, variant):
    path = _pair(RUNTIME, stem)[variant == "after"]
    entry_point, kernel, make_case = LAYOUT_FIXTURES[stem]
    module = load_fixture_module(path)
    spy = _spy_on(module, monkeypatch, kernel)
    *inputs, expected = make_case(generator, kernel_device)
    out = getattr(module, entry_point)(*inputs)
    if variant == "before":
        assert not torch.allclose(out, expected, atol=1e-3)
        _assert_flagged_lines_reach_the_call_strided(path, spy, kernel)
    else:
        assert spy.non_contiguous == set()
        torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


@pytest.mark.parametrize("variant", ["before", "after"])
def test_flag_conditional_copy_fixture(kernel_device, generator, monkeypatch, variant):
    """A wrapper that copies ``q`` and ``k`` itself under ``use_qk_l2norm=True``: the call passing
    the flag with transposed inputs is correct (and not flagged); the call without it hands the
    transposed ``q`` to the kernel, which reads the wrong elements (flagged, until fixed)."""
    path = _pair(RUNTIME, "qk_norm_flag")[variant == "after"]
    module = load_fixture_module(path)
    spy = _spy_on(module, monkeypatch, "_token_dot_kernel")
    q_by_dim, k_by_dim = (torch.randn(16, 5, generator=generator).to(kernel_device) for _ in range(2))
    k = torch.randn(5, 16, generator=generator).to(kernel_device)

    scores = module.normalized_scores(q_by_dim, k_by_dim)
    assert spy.non_contiguous == set()
    torch.testing.assert_close(scores, (_l2norm(q_by_dim.t()) * _l2norm(k_by_dim.t())).sum(-1), **FP32)

    scores = module.raw_scores(q_by_dim, k)
    expected = (q_by_dim.t() * k).sum(-1)
    if variant == "before":
        assert spy.non_contiguous == {0}
        assert not torch.allclose(scores, expected, atol=1e-3)
    else:
        assert spy.non_contiguous == set()
        torch.testing.assert_close(scores, expected, atol=1e-4, rtol=1e-4)
    # Flagged exactly where annotated: the call without the flag, not the one passing it.
    assert _linted_lines(path, LAYOUT_CODES) == _annotated_lines(path, LAYOUT_CODES)


@pytest.mark.parametrize("variant", ["before", "after"])
def test_shared_strides_fixture(kernel_device, generator, variant):
    """A kernel that steps through ``k`` with ``q``'s strides: the same permutation of both is
    correct as written (not flagged), and a ``.contiguous()`` on ``k`` alone would break it; a
    permuted ``k`` beside a contiguous ``q`` is read wrong (flagged) until ``k`` is made dense."""
    path = _pair(RUNTIME, "head_major_strides")[variant == "after"]
    module = load_fixture_module(path)
    q_heads, k_heads = (torch.randn(2, 3, 4, generator=generator).to(kernel_device) for _ in range(2))
    q = torch.randn(3, 2, 4, generator=generator).to(kernel_device)

    both_permuted = (q_heads + k_heads).permute(1, 0, 2)
    torch.testing.assert_close(module.add_heads_from_head_major(q_heads, k_heads), both_permuted, **FP32)
    one_sided_fix = module.add_heads(q_heads.permute(1, 0, 2), k_heads.permute(1, 0, 2).contiguous())
    assert not torch.allclose(one_sided_fix, both_permuted, atol=1e-3)

    mixed = module.add_to_head_major(q, k_heads)
    expected = q + k_heads.permute(1, 0, 2)
    if variant == "before":
        assert not torch.allclose(mixed, expected, atol=1e-3)
    else:
        torch.testing.assert_close(mixed, expected, **FP32)
    assert _linted_lines(path, LAYOUT_CODES) == _annotated_lines(path, LAYOUT_CODES)


# --- sync fixtures -----------------------------------------------------------------


def _is_sync_report(warning: warnings.WarningMessage) -> bool:
    # GPUSyncWarning from the CPU detector; PyTorch's own warning from the CUDA one
    # (not its one-time notice that the debug mode is a prototype).
    message = str(warning.message)
    return warning.category is GPUSyncWarning or "called a synchronizing CUDA operation" in message


def _reported_lines(step: Callable[[], object], arm_sync_check) -> set[tuple[str, int]]:
    """Warm up, arm in warn mode, run one checked step: where were syncs reported?"""
    step()
    arm_sync_check("warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with sync_checked_step():
            step()
    return {(w.filename, w.lineno) for w in caught if _is_sync_report(w)}


def _assert_error_mode(step: Callable[[], object], arm_sync_check, path: Path, fails: bool):
    arm_sync_check("error")
    if not fails:
        with sync_checked_step():
            return step()
    with pytest.raises(GPUSyncError) as caught, sync_checked_step():
        step()
    first_line = min(_annotated_lines(path, SYNC_CODES))
    assert f"{path}:{first_line}" in str(caught.value)
    return None


def _check_sync_fixture(path: Path, step: Callable[[], object], arm_sync_check):
    """Reported lines == annotated lines; error mode raises iff there are any."""
    expected = {(str(path), line) for line in _annotated_lines(path, SYNC_CODES)}
    reported = _reported_lines(step, arm_sync_check)
    # What the armed checker reports is what is annotated, and what the linter flags.
    assert reported == expected
    assert {line for _, line in reported} == _linted_lines(path, SYNC_CODES)
    return _assert_error_mode(step, arm_sync_check, path, fails=bool(expected))


def _lines_in_function(path: Path, function: str) -> range:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return range(node.lineno, node.end_lineno + 1)
    raise LookupError(f"no function {function} in {path}")


def _callees_at(path: Path, line: int) -> set[str]:
    """The names of the functions called on ``line``."""
    return {
        node.func.id
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.lineno == line
    }


@pytest.mark.parametrize("variant", ["before", "after"])
def test_vision_max_seqlen_fixture(kernel_device, generator, arm_sync_check, variant):
    """A sync inside a helper of the same file, which only the call in ``forward`` makes one: the
    armed checker reports it where it happens, in the helper; sync-lint flags the call that hands
    the helper a GPU tensor, and the checker's error unwinds through that very call. The fix
    hands the helper a host tensor, with the same result."""
    path = _pair(RUNTIME, "vision_max_seqlen")[variant == "after"]
    module = load_fixture_module(path)
    counts_cpu = torch.tensor([3, 7, 5])
    counts = counts_cpu.clone().to(kernel_device)
    patches = torch.randn(15, 8, generator=generator).to(kernel_device)
    if kernel_device.type == "cpu":
        mark_device_resident(counts)
        mark_device_resident(patches)
    attention = module.PackedVisionAttention()

    def step():
        return attention(patches, counts, counts_cpu)

    flagged = _linted_lines(path, SYNC_CODES)
    assert flagged == _annotated_lines(path, SYNC_CODES)
    reported = _reported_lines(step, arm_sync_check)
    arm_sync_check("error")
    if variant == "after":
        assert reported == set() and flagged == set()
        with sync_checked_step():
            padded, cu_seqlens = step()
    else:
        helper = _lines_in_function(path, "max_seqlen")
        ((filename, sync_line),) = reported
        assert filename == str(path) and sync_line in helper
        ((call_line,),) = [flagged]
        assert _callees_at(path, call_line) == {"max_seqlen"}
        with pytest.raises(GPUSyncError) as caught, sync_checked_step():
            step()
        # The CPU detector raises inside the step; on CUDA the checked step turns PyTorch's
        # error into ours as it leaves, ``from`` it: the frames are that error's.
        error = caught.value.__cause__ or caught.value
        unwound = {(frame.f_code.co_filename, line) for frame, line in traceback.walk_tb(error.__traceback__)}
        assert {(str(path), call_line), (str(path), sync_line)} <= unwound
        padded, cu_seqlens = step()  # unchecked
    assert cu_seqlens.tolist() == [0, 3, 10, 15]
    expected = torch.zeros(3, 7, 8)
    for image, (start, count) in enumerate(zip([0, 3, 10], [3, 7, 5])):
        expected[image, :count] = patches[start : start + count].cpu()
    torch.testing.assert_close(padded.cpu(), expected)


MLA_LENS = ([12, 0, 1, 3, 20], [0, 33, 50, 0, 9])  # mixed, with split groups


@pytest.mark.parametrize("variant", ["before", "after"])
def test_mla_builder_fixture(kernel_device, generator, arm_sync_check, variant):
    path = _pair(UPSTREAM, "mla_builder")[variant == "after"]
    module = load_fixture_module(path)
    batch = random_mla_batch(*MLA_LENS, 2, 32, 16, 16, generator, kernel_device)
    mark_scheduler_tensors(batch.common)
    builder = module.AiterMLAMetadataBuilder(
        max_num_reqs=8, max_num_batched_tokens=64, max_model_len=128, device=kernel_device
    )

    def step():
        return mla_forward(batch.q, batch.kv_cache, builder.build(batch.common), 32)

    out = _check_sync_fixture(path, step, arm_sync_check)
    if variant == "after":
        expected = mla_reference(
            batch.q, batch.kv_cache, batch.common.block_table_tensor,
            batch.query_lens, batch.seq_lens, 32,
        )  # fmt: skip
        torch.testing.assert_close(out, expected, **FP32)


def _decode_first_batch(generator, device):
    """Two decodes, then two prefills (one continuing a context)."""
    batch = random_mla_batch([1, 1, 5, 12], [3, 9, 0, 7], 2, 32, 16, 16, generator, device)
    mark_scheduler_tensors(batch.common)
    return batch.common


@pytest.mark.parametrize("variant", ["before", "after"])
def test_gdn_builder_fixture(kernel_device, generator, arm_sync_check, variant):
    path = _pair(RUNTIME, "gdn_builder_implicit_sync")[variant == "after"]
    module = load_fixture_module(path)
    common = _decode_first_batch(generator, kernel_device)
    builder = module.GDNAttentionMetadataBuilder(kernel_device)
    _check_sync_fixture(path, lambda: builder.build(common), arm_sync_check)

    metadata = builder.build(common)  # outside a checked step
    state_slots = common.block_table_tensor[:, 0].tolist()
    assert (metadata.num_decodes, metadata.num_prefills) == (2, 2)
    assert metadata.has_initial_state.tolist() == [False, True]
    assert metadata.prefill_query_start_loc.tolist() == [0, 5, 17]
    assert metadata.prefill_state_indices.tolist() == state_slots[2:]
    assert metadata.decode_state_indices.tolist() == state_slots[:2]


@pytest.mark.parametrize("variant", ["before", "after"])
def test_flashinfer_builder_fixture(kernel_device, generator, arm_sync_check, variant):
    path = _pair(RUNTIME, "flashinfer_builder_host_copy")[variant == "after"]
    module = load_fixture_module(path)
    common = _decode_first_batch(generator, kernel_device)
    builder = module.FlashInferMetadataBuilder(block_size=16)
    _check_sync_fixture(path, lambda: builder.build(common), arm_sync_check)

    plan = builder.build(common)
    seq_lens = [4, 10, 5, 19]
    pages = [cdiv(s, 16) for s in seq_lens]
    assert plan.qo_indptr_host.device.type == "cpu"
    assert plan.qo_indptr_host.tolist() == [0, 1, 2, 7, 19]
    assert plan.paged_kv_indptr_host.tolist() == [0, 1, 2, 3, 5]
    assert plan.paged_kv_last_page_len_host.tolist() == [
        s - (p - 1) * 16 for s, p in zip(seq_lens, pages)
    ]


@pytest.mark.parametrize("variant", ["before", "after"])
def test_attention_impl_fixture(kernel_device, generator, arm_sync_check, variant):
    """An attention implementation's ``forward`` (hot by its class's contract) that reads the
    lengths off the device fails the armed check every step; the scale it caches on the layer
    module on the first call is read in warm-up only, and is not flagged."""
    path = _pair(RUNTIME, "attention_impl_step_read")[variant == "after"]
    module = load_fixture_module(path)
    common = _decode_first_batch(generator, kernel_device)
    output_scale = torch.tensor(0.5, device=kernel_device)
    if output_scale.device.type == "cpu":
        mark_device_resident(output_scale)
    layer = SimpleNamespace(_o_scale_float=None)
    query = torch.randn(4, 32, generator=generator).to(kernel_device)
    impl = module.PaddedAttentionImpl()
    out = _check_sync_fixture(path, lambda: impl.forward(layer, query, common, output_scale), arm_sync_check)
    assert layer._o_scale_float == 0.5
    if variant == "after":
        torch.testing.assert_close(out, query[:, :19] * 0.5, **FP32)


STALE = _pair(RUNTIME, "flash_builder_stale_allow")
# A later edit that reads the device tensor again, applied to both variants.
HOST_READ = "int(common_attn_metadata.seq_lens_cpu.max())"
DEVICE_READ = "int(common_attn_metadata.seq_lens.max())"


@pytest.mark.parametrize("path", STALE, ids=["before", "after"])
def test_stale_allow_fixture_is_harmless_as_written(kernel_device, generator, arm_sync_check, path):
    module = load_fixture_module(path)
    common = _decode_first_batch(generator, kernel_device)
    builder = module.FlashAttentionMetadataBuilder()
    metadata = _check_sync_fixture(path, lambda: builder.build(common), arm_sync_check)
    assert (metadata.max_query_len, metadata.max_seq_len) == (12, 19)


@pytest.mark.parametrize("path", STALE, ids=["before", "after"])
def test_stale_allow_hides_a_sync_added_later(kernel_device, generator, arm_sync_check, path):
    source = path.read_text()
    assert source.count(HOST_READ) == 1
    edited_line = source[: source.index(HOST_READ)].count("\n") + 1
    module = load_fixture_module(path, source.replace(HOST_READ, DEVICE_READ))
    common = _decode_first_batch(generator, kernel_device)
    builder = module.FlashAttentionMetadataBuilder()
    reported = _reported_lines(lambda: builder.build(common), arm_sync_check)
    if path == STALE[0]:
        # The new sync sits in the stale block that opens on the annotated line.
        assert _annotated_lines(path, {"GPU203"}) == {edited_line - 1}
        assert reported == set()
    else:
        assert reported == {(str(path), edited_line)}


UPLOAD_CODES = {"GPU205"}


@pytest.mark.gpu
def test_blocking_copies_onto_the_gpu_fixture(generator, arm_sync_check):
    """GPU205 (preview) on ``fixtures/gpu2xx/uploads.py``: on CUDA the armed checker (PyTorch's
    sync debug mode) reports exactly the lines GPU205 flags, the blocking copies of host data
    onto the GPU, and none of the look-alikes: the asynchronous copies, the device-side
    factories, the copy between GPU tensors, the declared copy, the module's own state. A
    helper's copy is flagged at its hot call and reported by the checker where it copies. There
    is no CPU variant: on the CPU a copy to the device copies nothing."""
    from sync_lint.api import lint_paths

    path, only = FIXTURES / "gpu2xx" / "uploads.py", FIXTURES / "gpu2xx" / "uploads_only.py"
    module, module_only = load_fixture_module(path), load_fixture_module(only)
    device = torch.device("cuda")
    batch = random_mla_batch([3, 1], [5, 2], num_heads=2, kv_lora_rank=16, rope_dim=8, block_size=4,
                             generator=generator, device=device)
    builder = module.StagedMLAMetadataBuilder(device)
    norm = module.ScaledNorm(8).to(device)
    projection = module_only.BiasedProjection(8).to(device)
    x = torch.randn(4, 8, generator=generator).to(device)

    def step():
        builder.build(0, batch.common)
        return norm(x, [0.5] * 8), projection(x, [0.5] * 8)

    diagnostics = lint_paths([str(path), str(only), str(FIXTURES.parent / "reference_kernels")], preview=True)
    flagged = {(str(f), d.line) for d in diagnostics for f in (path, only)
               if Path(d.path).resolve() == f.resolve() and d.code in UPLOAD_CODES}
    assert flagged == {(str(f), line) for f in (path, only) for line in _annotated_lines(f, UPLOAD_CODES)}
    assert len(flagged) == 7
    lines = path.read_text().splitlines()
    call = next(n for n, text in enumerate(lines, 1) if "= request_ranks_on(" in text)
    copy = next(n for n, text in enumerate(lines, 1) if "copies here, for its hot call" in text)
    assert _reported_lines(step, arm_sync_check) == (flagged - {(str(path), call)}) | {(str(path), copy)}
