"""KDA: the two references agree, the Triton kernels match them through the state
pool, and the kernel boundary rejects index tensors the raw kernels would misread."""

from __future__ import annotations

import pytest
import torch

from reference_kernels._testing import kda_pool_case, random_kda_inputs
from reference_kernels.kda.ops import fused_kda_chunk, fused_kda_decode
from reference_kernels.kda.reference import (
    kda_chunked_reference,
    kda_recurrent_reference,
)

H, K, V = 2, 16, 32
FP32 = {"atol": 2e-5, "rtol": 2e-5}


@pytest.mark.parametrize("length", [0, 1, 15, 16, 37])
@pytest.mark.parametrize("chunk_size", [4, 16])
@pytest.mark.parametrize("with_initial_state", [False, True])
def test_chunked_reference_matches_recurrent(generator, length, chunk_size, with_initial_state):
    x = random_kda_inputs([length], H, K, V, generator)
    initial_state = torch.randn(H, K, V, generator=generator) if with_initial_state else None
    args = (x.q, x.k, x.v, x.g, x.beta, initial_state)
    o_naive, state_naive = kda_recurrent_reference(*args)
    o_chunked, state_chunked = kda_chunked_reference(*args, chunk_size=chunk_size)
    torch.testing.assert_close(o_chunked, o_naive, **FP32)
    torch.testing.assert_close(state_chunked, state_naive, **FP32)


def _random_lengths(seed: int) -> list[int]:
    lengths_generator = torch.Generator().manual_seed(seed)
    num_reqs = int(torch.randint(1, 5, (1,), generator=lengths_generator))
    return torch.randint(0, 40, (num_reqs,), generator=lengths_generator).tolist()


PREFILL_BATCHES = {
    "edge_lengths": [5, 0, 1, 33, 16],
    "single_token": [1],
    "all_empty": [0, 0],
    **{f"random{seed}": _random_lengths(seed) for seed in range(3)},
}


def _run_prefill(case, **overrides):
    pool = case.pool.clone()
    kwargs = {
        "has_initial_state": case.has_initial_state,
        "checkpoint_state_indices": case.block_table[:, 1].contiguous(),
        **overrides,
    }
    x = case.inputs
    state_indices = case.block_table[:, 0].contiguous()
    o = fused_kda_chunk(x.q, x.k, x.v, x.g, x.beta, pool, state_indices, x.cu_seqlens, **kwargs)
    return o, pool


@pytest.mark.parametrize("lengths", PREFILL_BATCHES.values(), ids=PREFILL_BATCHES.keys())
def test_prefill_kernel_matches_reference(kernel_device, generator, lengths):
    has_initial_state = [n % 2 == 0 for n in range(len(lengths))]
    case = kda_pool_case(lengths, has_initial_state, H, K, V, generator, kernel_device)
    o, pool = _run_prefill(case)
    torch.testing.assert_close(o, case.expected_o, **FP32)
    torch.testing.assert_close(pool, case.expected_pool, **FP32)


def test_prefill_optional_arguments_default_to_stored_state_and_no_checkpoint(
    kernel_device, generator
):
    case = kda_pool_case([7, 20], [True, True], H, K, V, generator, kernel_device)
    o, pool = _run_prefill(case, has_initial_state=None, checkpoint_state_indices=None)
    torch.testing.assert_close(o, case.expected_o, **FP32)
    checkpoint_slots = case.block_table[:, 1].long()
    expected_pool = case.expected_pool.clone()
    expected_pool[checkpoint_slots] = case.pool[checkpoint_slots]
    torch.testing.assert_close(pool, expected_pool, **FP32)


def test_prefill_then_decode_matches_one_long_sequence(kernel_device, generator):
    prompt_lens, decode_steps = [3, 20, 1], 3
    full = random_kda_inputs([p + decode_steps for p in prompt_lens], H, K, V, generator)
    starts = full.cu_seqlens.tolist()
    slots = torch.tensor([4, 0, 2], dtype=torch.int32, device=kernel_device)
    pool = torch.full((6, H, K, V), float("nan"), device=kernel_device)  # never read

    def packed(rows: list[int]) -> list[torch.Tensor]:
        index = torch.tensor(rows)
        return [t[index].to(kernel_device) for t in (full.q, full.k, full.v, full.g, full.beta)]

    prompt_rows = [r for n, p in enumerate(prompt_lens) for r in range(starts[n], starts[n] + p)]
    prompt_cu = torch.tensor([0, 3, 23, 24], dtype=torch.int32, device=kernel_device)
    outputs = {}
    o = fused_kda_chunk(
        *packed(prompt_rows), pool, slots, prompt_cu,
        has_initial_state=torch.zeros(3, dtype=torch.bool, device=kernel_device),
    )  # fmt: skip
    outputs.update(zip(prompt_rows, o))
    for step in range(decode_steps):
        rows = [starts[n] + p + step for n, p in enumerate(prompt_lens)]
        outputs.update(zip(rows, fused_kda_decode(*packed(rows), pool, slots)))

    for n in range(len(prompt_lens)):
        rows = range(starts[n], starts[n + 1])
        o_ref, state_ref = kda_recurrent_reference(*full.rows(starts[n], starts[n + 1]))
        got = torch.stack([outputs[r] for r in rows]).cpu()
        torch.testing.assert_close(got, o_ref, **FP32)
        torch.testing.assert_close(pool[slots[n].item()].cpu(), state_ref, **FP32)


def _int32_block_table(num_reqs: int) -> torch.Tensor:
    return torch.arange(2 * num_reqs, dtype=torch.int32).view(num_reqs, 2)


BAD_INDICES = {
    "int32_column_view": lambda bt: bt[:, 0],
    "noop_cast_of_column_view": lambda bt: bt[:, 0].to(torch.int32),
    "step_slice": lambda bt: bt.flatten()[::2],
    "int64": lambda bt: bt[:, 0].contiguous().long(),
}


@pytest.mark.parametrize("make_bad", BAD_INDICES.values(), ids=BAD_INDICES.keys())
@pytest.mark.parametrize("argument", ["state_indices", "checkpoint_state_indices"])
def test_prefill_boundary_rejects_bad_indices(generator, make_bad, argument):
    x = random_kda_inputs([3, 4], H, K, V, generator)
    pool = torch.zeros(4, H, K, V)
    good = _int32_block_table(2)[:, 0].contiguous()
    indices = {"state_indices": good, "checkpoint_state_indices": good.clone()}
    indices[argument] = make_bad(_int32_block_table(2))
    with pytest.raises(ValueError, match=f"{argument} must be contiguous int32"):
        fused_kda_chunk(x.q, x.k, x.v, x.g, x.beta, pool, cu_seqlens=x.cu_seqlens, **indices)


def test_prefill_boundary_rejects_int64_cu_seqlens(generator):
    x = random_kda_inputs([3], H, K, V, generator)
    state_indices = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(ValueError, match="cu_seqlens must be contiguous int32"):
        fused_kda_chunk(
            x.q, x.k, x.v, x.g, x.beta, torch.zeros(1, H, K, V), state_indices, x.cu_seqlens.long()
        )


@pytest.mark.parametrize("make_bad", BAD_INDICES.values(), ids=BAD_INDICES.keys())
def test_decode_boundary_rejects_bad_indices(generator, make_bad):
    x = random_kda_inputs([1, 1], H, K, V, generator)
    with pytest.raises(ValueError, match="state_indices must be contiguous int32"):
        fused_kda_decode(
            x.q, x.k, x.v, x.g, x.beta, torch.zeros(4, H, K, V), make_bad(_int32_block_table(2))
        )


def test_dtype_changing_cast_of_a_column_is_accepted(kernel_device, generator):
    """Casting an int64 column to int32 copies it into a contiguous tensor, so only the
    no-op cast of an int32 column needs the explicit ``.contiguous()``."""
    case = kda_pool_case([4, 9], [True, False], H, K, V, generator, kernel_device)
    state_indices = case.block_table.long()[:, 0].to(torch.int32)
    assert state_indices.is_contiguous()
    x = case.inputs
    pool = case.pool.clone()
    o = fused_kda_chunk(
        x.q, x.k, x.v, x.g, x.beta, pool, state_indices, x.cu_seqlens,
        has_initial_state=case.has_initial_state,
    )  # fmt: skip
    torch.testing.assert_close(o, case.expected_o, **FP32)
