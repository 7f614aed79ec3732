"""MLA: the builder's work partition and the split-KV kernels against SDPA."""

from __future__ import annotations

import pytest
import torch

from reference_kernels._testing import mark_scheduler_tensors, random_mla_batch
from reference_kernels.mla.metadata import MLAMetadataBuilder, cdiv
from reference_kernels.mla.ops import mla_forward
from reference_kernels.mla.reference import mla_reference
from reference_kernels.sync_check import sync_checked_step

H, KV_LORA_RANK, ROPE_DIM, BLOCK_SIZE = 2, 32, 16, 16
QUERY_TILE, KV_TILE = 8, 16
FP32 = {"atol": 2e-5, "rtol": 2e-5}

# (query_lens, context_lens) per batch; a request with 0 new tokens contributes no work.
BATCHES = {
    "decodes": ([1, 1, 1], [5, 40, 17]),
    "mixed": ([12, 0, 1, 3, 20], [0, 33, 50, 0, 9]),
    "single_token_no_context": ([1], [0]),
    "prefill_split_over_kv_tiles": ([20], [30]),
    "no_split": ([4, 1], [3, 7]),
    "only_zero_query_requests": ([0, 0], [4, 9]),
}


def _builder(device) -> MLAMetadataBuilder:
    return MLAMetadataBuilder(
        max_num_reqs=8,
        max_num_batched_tokens=64,
        max_model_len=128,
        device=device,
        query_tile_size=QUERY_TILE,
        kv_tile_size=KV_TILE,
    )


def _expected_partition(query_lens: list[int], context_lens: list[int]) -> tuple[int, int, int]:
    """(groups, work items, partial tiles), counted directly on the host."""
    groups = work = partials = 0
    for query_len, context_len in zip(query_lens, context_lens):
        for q_first in range(0, query_len, QUERY_TILE):
            q_last = min(q_first + QUERY_TILE, query_len)
            tiles = cdiv(context_len + q_last, KV_TILE)
            groups += 1
            work += tiles
            partials += tiles if tiles > 1 else 0
    return groups, work, partials


@pytest.mark.parametrize("lens", BATCHES.values(), ids=BATCHES.keys())
def test_partition_covers_every_tile_once(generator, lens):
    batch = random_mla_batch(*lens, H, KV_LORA_RANK, ROPE_DIM, BLOCK_SIZE, generator)
    metadata = _builder("cpu").build(batch.common)
    groups, work, partials = _expected_partition(*lens)
    assert (metadata.num_groups, metadata.num_partial_tiles) == (groups, partials)
    assert metadata.work_indptr[-1].item() == work
    assert metadata.work_indptr.diff().min().item() >= 0
    # Each partial slot is written by exactly one work item and read by one reduce.
    written = metadata.work_info[:work, 5]
    assert sorted(written[written >= 0].tolist()) == list(range(partials))
    assert sorted(metadata.reduce_partial_map[:partials].tolist()) == list(range(partials))


@pytest.mark.parametrize("lens", BATCHES.values(), ids=BATCHES.keys())
def test_forward_matches_sdpa_with_bottom_right_mask(kernel_device, generator, lens):
    batch = random_mla_batch(*lens, H, KV_LORA_RANK, ROPE_DIM, BLOCK_SIZE, generator, kernel_device)
    metadata = _builder(kernel_device).build(batch.common)
    out = mla_forward(batch.q, batch.kv_cache, metadata, KV_LORA_RANK)
    expected = mla_reference(
        batch.q, batch.kv_cache, batch.common.block_table_tensor,
        batch.query_lens, batch.seq_lens, KV_LORA_RANK,
    )  # fmt: skip
    assert not out.isnan().any()
    torch.testing.assert_close(out, expected, **FP32)


def test_builder_syncs_only_where_declared(arm_sync_check, generator):
    """The reference builder (the upstream fix) passes the armed checker on the CPU."""
    batch = random_mla_batch(*BATCHES["mixed"], H, KV_LORA_RANK, ROPE_DIM, BLOCK_SIZE, generator)
    builder = _builder("cpu")
    builder.build(batch.common)  # warm-up
    arm_sync_check("error")
    mark_scheduler_tensors(batch.common)
    with sync_checked_step():
        metadata = builder.build(batch.common)
    assert metadata.num_partial_tiles == _expected_partition(*BATCHES["mixed"])[2]


def test_builder_rejects_batches_beyond_its_capacity(generator):
    batch = random_mla_batch([4], [200], H, KV_LORA_RANK, ROPE_DIM, BLOCK_SIZE, generator)
    with pytest.raises(ValueError, match="capacity"):
        _builder("cpu").build(batch.common)
