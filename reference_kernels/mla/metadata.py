"""Attention metadata builder for split-KV MLA, in an engine backend's style.

Each step, ``MLAMetadataBuilder.build`` turns the scheduler's batch description into a
persistent-kernel work partition. It works on the device tensors with tensor ops only
(no host reads): the partition is what a GPU scheduling kernel would produce into
fixed-capacity buffers. Host-side sizes come from the CPU copies
(``query_start_loc_cpu``, ``seq_lens_cpu``), which is free.

Partition:

* a *group* is one request's tile of up to ``query_tile_size`` consecutive queries;
* a group needs the keys up to its last query's causal limit, cut into tiles of
  ``kv_tile_size``: one *work item* per (group, kv tile);
* work items are numbered kv-tile-major (tile 0 of every group, then tile 1, ...), so
  that a long request's tiles land on different workers; worker ``w`` of the
  persistent kernel runs items ``work_indptr[w]:work_indptr[w + 1]``;
* a group with one kv tile is written straight to the output; a group with several
  (*split*) writes one partial output + log-sum-exp per tile into a workspace slot,
  numbered in work order so that each worker's partials are adjacent;
* the reduce combines, for group ``g``, the partial slots
  ``reduce_partial_map[reduce_indptr[g]:reduce_indptr[g + 1]]`` (empty for unsplit
  groups) into output rows ``reduce_final_map[g] = (q_start, q_end)``.

The workspace's size, ``reduce_indptr[-1]``, exists only on the device, and the host
needs it to allocate the workspace: one declared sync per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from reference_kernels.sync_check import gpu_sync_allowed

# Columns of a work_info row, in the order the attention kernel reads them.
WORK_INFO_FIELDS = ("request", "q_start", "q_end", "kv_start", "kv_end", "partial_slot")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class CommonAttentionMetadata:
    """What the scheduler hands every attention backend for one step."""

    query_start_loc: torch.Tensor  # [num_reqs + 1] int32, device
    query_start_loc_cpu: torch.Tensor  # host copy
    seq_lens: torch.Tensor  # [num_reqs] int32, device: context + new tokens
    seq_lens_cpu: torch.Tensor  # host copy
    block_table_tensor: torch.Tensor  # [num_reqs, max_blocks_per_req] int32, device
    num_reqs: int
    num_actual_tokens: int


@dataclass
class MLAAttentionMetadata:
    num_actual_tokens: int
    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    block_table: torch.Tensor
    query_tile_size: int
    kv_tile_size: int
    num_groups: int  # grid of the reduce kernel
    num_partial_tiles: int  # rows of the partial-output workspace
    work_indptr: torch.Tensor  # [num_workers + 1]
    work_info: torch.Tensor  # [capacity, len(WORK_INFO_FIELDS)]
    reduce_indptr: torch.Tensor  # [num_groups + 1]
    reduce_final_map: torch.Tensor  # [num_groups, 2]
    reduce_partial_map: torch.Tensor  # [capacity]


def _tile_major_rank(mask: torch.Tensor) -> torch.Tensor:
    """Rank of each True entry of ``mask [G, T]`` when entries are counted column by
    column (all of column 0 top to bottom, then column 1, ...)."""
    counts = mask.long()
    per_column = counts.sum(dim=0)
    in_earlier_columns = torch.cumsum(per_column, dim=0) - per_column
    above_in_column = torch.cumsum(counts, dim=0) - counts
    return in_earlier_columns[None, :] + above_in_column


class MLAMetadataBuilder:
    def __init__(
        self,
        *,
        max_num_reqs: int,
        max_num_batched_tokens: int,
        max_model_len: int,
        device: torch.device | str,
        num_workers: int = 4,
        query_tile_size: int = 8,
        kv_tile_size: int = 16,
    ) -> None:
        self.device = torch.device(device)
        self.num_workers = num_workers
        self.query_tile_size = query_tile_size
        self.kv_tile_size = kv_tile_size
        # Every request adds at most one group beyond its full query tiles.
        self.max_groups = max_num_reqs + max_num_batched_tokens // query_tile_size
        self.max_kv_tiles = cdiv(max_model_len, kv_tile_size)
        max_work = self.max_groups * self.max_kv_tiles
        # Buffers sized once for the scheduler limits and refilled every step, so that
        # their addresses stay fixed for CUDA-graph replay. The extra last row of the
        # scattered buffers is a sink for the padding entries of the dense grids.
        self._sink = max_work
        int32 = {"dtype": torch.int32, "device": self.device}
        self._work_indptr_buffer = torch.zeros(num_workers + 1, **int32)
        self._work_info_buffer = torch.zeros(max_work + 1, len(WORK_INFO_FIELDS), **int32)
        self._reduce_indptr_buffer = torch.zeros(self.max_groups + 1, **int32)
        self._reduce_final_map_buffer = torch.zeros(self.max_groups, 2, **int32)
        self._reduce_partial_map_buffer = torch.zeros(max_work + 1, **int32)

    def build(self, common_attn_metadata: CommonAttentionMetadata) -> MLAAttentionMetadata:
        common = common_attn_metadata
        # Host-side sizes from the CPU copies: no device round trip.
        query_lens = (common.query_start_loc_cpu[1:] - common.query_start_loc_cpu[:-1]).tolist()
        num_groups = sum(cdiv(q_len, self.query_tile_size) for q_len in query_lens)
        max_seq_len = int(common.seq_lens_cpu.max().item()) if common.num_reqs else 0
        num_kv_tiles = cdiv(max_seq_len, self.kv_tile_size)
        if num_groups > self.max_groups or num_kv_tiles > self.max_kv_tiles:
            raise ValueError(
                f"batch needs {num_groups} query tiles x {num_kv_tiles} kv tiles, builder "
                f"capacity is {self.max_groups} x {self.max_kv_tiles}"
            )
        num_partial_tiles = self._build_fp8_prefill_ps_metadata(common, num_groups, num_kv_tiles)
        return MLAAttentionMetadata(
            num_actual_tokens=common.num_actual_tokens,
            query_start_loc=common.query_start_loc,
            seq_lens=common.seq_lens,
            block_table=common.block_table_tensor,
            query_tile_size=self.query_tile_size,
            kv_tile_size=self.kv_tile_size,
            num_groups=num_groups,
            num_partial_tiles=num_partial_tiles,
            work_indptr=self.fp8_ps_work_indptr,
            work_info=self.fp8_ps_work_info,
            reduce_indptr=self.fp8_ps_reduce_indptr,
            reduce_final_map=self.fp8_ps_reduce_final_map,
            reduce_partial_map=self.fp8_ps_reduce_partial_map,
        )

    def _build_fp8_prefill_ps_metadata(
        self, common: CommonAttentionMetadata, num_groups: int, num_kv_tiles: int
    ) -> int:
        """Fill the persistent-scheduling (ps) buffers; return the workspace size.

        The name follows the upstream AITER backend, whose fp8 prefill path owns this
        partition; the cache here is not fp8.
        """
        self._fill_ps_work_partition(common, num_groups, num_kv_tiles)
        with gpu_sync_allowed():
            num_partial_tiles = int(self.fp8_ps_reduce_indptr[-1].item())
        return num_partial_tiles

    def _fill_ps_work_partition(
        self, common: CommonAttentionMetadata, num_groups: int, num_kv_tiles: int
    ) -> None:
        """Device-side partition (module docstring); sync-free tensor ops only."""
        device = self.device
        query_tile, kv_tile = self.query_tile_size, self.kv_tile_size
        qo_indptr = common.query_start_loc.long()
        query_lens = qo_indptr[1:] - qo_indptr[:-1]
        context_lens = common.seq_lens.long() - query_lens

        # Groups, request-major: which request and which of its query tiles.
        tiles_per_request = (query_lens + query_tile - 1) // query_tile
        group_ends = torch.cumsum(tiles_per_request, dim=0)
        group_ids = torch.arange(num_groups, device=device)
        group_request = torch.searchsorted(group_ends, group_ids, right=True)
        tile_in_request = group_ids - (group_ends - tiles_per_request)[group_request]
        request_start = qo_indptr[group_request]
        q_start = request_start + tile_in_request * query_tile
        q_end = torch.minimum(q_start + query_tile, qo_indptr[group_request + 1])
        # The group's last query sees keys < context_len + its index in the request + 1.
        kv_len = context_lens[group_request] + (q_end - request_start)
        kv_tiles_per_group = (kv_len + kv_tile - 1) // kv_tile

        # Work items on a dense [group, kv tile] grid.
        tile_ids = torch.arange(num_kv_tiles, device=device)
        is_work = tile_ids[None, :] < kv_tiles_per_group[:, None]
        is_split = kv_tiles_per_group > 1
        is_partial = is_work & is_split[:, None]
        partial_slot = torch.where(is_partial, _tile_major_rank(is_partial), -1)
        kv_start = (tile_ids * kv_tile)[None, :].expand(num_groups, -1)
        kv_end = torch.minimum(kv_start + kv_tile, kv_len[:, None])
        work_rows = torch.stack(
            [
                group_request[:, None].expand(-1, num_kv_tiles),
                q_start[:, None].expand(-1, num_kv_tiles),
                q_end[:, None].expand(-1, num_kv_tiles),
                kv_start,
                kv_end,
                partial_slot,
            ],
            dim=-1,
        )
        work_position = torch.where(is_work, _tile_major_rank(is_work), self._sink)
        self._work_info_buffer.index_copy_(
            0, work_position.flatten(), work_rows.reshape(-1, len(WORK_INFO_FIELDS)).int()
        )
        # Items cost about the same (one kv tile each): equal shares per worker.
        num_work = is_work.sum()
        workers = torch.arange(self.num_workers + 1, device=device)
        self._work_indptr_buffer.copy_(workers * num_work // self.num_workers)

        partials_per_group = torch.where(is_split, kv_tiles_per_group, 0)
        reduce_indptr = self._reduce_indptr_buffer[: num_groups + 1]
        # Entry 0 keeps the 0 it got in __init__: `reduce_indptr[0] = 0` would copy a
        # host scalar to the device, which torch's sync debug mode reports as a sync.
        reduce_indptr[1:] = torch.cumsum(partials_per_group, dim=0)
        self._reduce_final_map_buffer[:num_groups] = torch.stack([q_start, q_end], dim=-1)
        map_position = torch.where(
            is_partial, reduce_indptr[:-1, None].long() + tile_ids[None, :], self._sink
        )
        self._reduce_partial_map_buffer.index_copy_(
            0, map_position.flatten(), partial_slot.flatten().int()
        )

        capacity = num_groups * num_kv_tiles
        self.fp8_ps_work_indptr = self._work_indptr_buffer
        self.fp8_ps_work_info = self._work_info_buffer[:capacity]
        self.fp8_ps_reduce_indptr = reduce_indptr
        self.fp8_ps_reduce_final_map = self._reduce_final_map_buffer[:num_groups]
        self.fp8_ps_reduce_partial_map = self._reduce_partial_map_buffer[:capacity]
