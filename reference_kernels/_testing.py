"""Random batch builders and fixture helpers shared by the tests (not a public API)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F

from reference_kernels.kda.reference import kda_varlen_reference
from reference_kernels.mla.metadata import CommonAttentionMetadata, cdiv
from reference_kernels.sync_check import mark_device_resident


def cu_seqlens_from_lengths(lengths: list[int], device: torch.device | str) -> torch.Tensor:
    """Exclusive prefix sum as a contiguous int32 tensor: ``[0, l0, l0 + l1, ...]``."""
    offsets = [0]
    for length in lengths:
        offsets.append(offsets[-1] + length)
    return torch.tensor(offsets, dtype=torch.int32, device=device)


@dataclass
class KDAInputs:
    """A packed varlen KDA batch (see ``reference_kernels.kda`` for the layout)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor
    beta: torch.Tensor
    cu_seqlens: torch.Tensor
    lengths: list[int]

    def rows(self, start: int, end: int) -> tuple[torch.Tensor, ...]:
        """``(q, k, v, g, beta)`` restricted to packed rows ``start:end``."""
        return tuple(t[start:end].contiguous() for t in (self.q, self.k, self.v, self.g, self.beta))


def random_kda_inputs(
    lengths: list[int],
    num_heads: int,
    head_k: int,
    head_v: int,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
) -> KDAInputs:
    """L2-normalised q / k, log-decays in about [-2, 0), beta in (0, 1): the regime in
    which the delta rule is stable, as produced by the model's projections."""
    num_tokens = sum(lengths)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator)

    q = F.normalize(randn(num_tokens, num_heads, head_k), dim=-1)
    k = F.normalize(randn(num_tokens, num_heads, head_k), dim=-1)
    v = randn(num_tokens, num_heads, head_v)
    g = F.logsigmoid(randn(num_tokens, num_heads, head_k) + 2.0)
    beta = torch.sigmoid(randn(num_tokens, num_heads))
    q, k, v, g, beta = (t.to(device) for t in (q, k, v, g, beta))
    return KDAInputs(q, k, v, g, beta, cu_seqlens_from_lengths(lengths, device), list(lengths))


@dataclass
class KDAPoolCase:
    """A KDA prefill batch over a state pool, with the reference's expected results."""

    inputs: KDAInputs
    block_table: torch.Tensor  # [N, 2] int32: (state slot, checkpoint slot) per request
    has_initial_state: torch.Tensor  # [N] bool
    pool: torch.Tensor  # [num_slots, H, K, V] before the step
    expected_o: torch.Tensor
    expected_pool: torch.Tensor  # both slots of request n hold its final state


def kda_pool_case(
    lengths: list[int],
    has_initial_state: list[bool],
    num_heads: int,
    head_k: int,
    head_v: int,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
    spare_slots: int = 2,
) -> KDAPoolCase:
    """Requests get distinct random slots out of ``2 N + spare_slots``; the pool starts
    random so that a slot read by the wrong request gives visibly wrong numbers."""
    num_reqs = len(lengths)
    num_slots = 2 * num_reqs + spare_slots
    slots = torch.randperm(num_slots, generator=generator)[: 2 * num_reqs]
    block_table = slots.view(num_reqs, 2).to(torch.int32)
    pool = torch.randn(num_slots, num_heads, head_k, head_v, generator=generator)
    inputs = random_kda_inputs(lengths, num_heads, head_k, head_v, generator)
    state_slots = block_table[:, 0].tolist()
    initial_states = [pool[s] if has else None for s, has in zip(state_slots, has_initial_state)]
    expected_o, final_states = kda_varlen_reference(
        inputs.q, inputs.k, inputs.v, inputs.g, inputs.beta,
        inputs.cu_seqlens.tolist(), initial_states,
    )  # fmt: skip
    expected_pool = pool.clone()
    for (slot, checkpoint_slot), state in zip(block_table.tolist(), final_states):
        expected_pool[slot] = state
        expected_pool[checkpoint_slot] = state
    tensors = (inputs.q, inputs.k, inputs.v, inputs.g, inputs.beta, inputs.cu_seqlens)
    moved = KDAInputs(*(t.to(device) for t in tensors), inputs.lengths)
    return KDAPoolCase(
        moved,
        block_table.to(device),
        torch.tensor(has_initial_state, device=device),
        pool.to(device),
        expected_o.to(device),
        expected_pool.to(device),
    )


@dataclass
class MLABatch:
    """A random MLA step: scheduler metadata, queries and a paged latent cache."""

    common: CommonAttentionMetadata
    q: torch.Tensor
    kv_cache: torch.Tensor
    query_lens: list[int]
    seq_lens: list[int]


def random_mla_batch(
    query_lens: list[int],
    context_lens: list[int],
    num_heads: int,
    kv_lora_rank: int,
    rope_dim: int,
    block_size: int,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
) -> MLABatch:
    """Requests own shuffled physical blocks (plus two spare, never-referenced ones),
    so a wrong block-table read shows up as wrong numbers."""
    seq_lens = [c + q for q, c in zip(query_lens, context_lens)]
    blocks_per_request = [cdiv(s, block_size) for s in seq_lens]
    num_blocks = sum(blocks_per_request) + 2
    physical = torch.randperm(num_blocks, generator=generator).tolist()
    table_width = max(blocks_per_request, default=0) or 1
    block_table = torch.zeros(len(seq_lens), table_width, dtype=torch.int32)
    for request, count in enumerate(blocks_per_request):
        block_table[request, :count] = torch.tensor(physical[:count], dtype=torch.int32)
        physical = physical[count:]
    head_dim = kv_lora_rank + rope_dim
    kv_cache = torch.randn(num_blocks, block_size, head_dim, generator=generator)
    q = torch.randn(sum(query_lens), num_heads, head_dim, generator=generator)
    query_start_loc_cpu = cu_seqlens_from_lengths(query_lens, "cpu")
    seq_lens_cpu = torch.tensor(seq_lens, dtype=torch.int32)
    # copy=True: on the CPU, .to(device) would return the host copy itself, and marking
    # the "device" tensor as device-resident would then mark the host copy too.
    common = CommonAttentionMetadata(
        query_start_loc=query_start_loc_cpu.to(device, copy=True),
        query_start_loc_cpu=query_start_loc_cpu,
        seq_lens=seq_lens_cpu.to(device, copy=True),
        seq_lens_cpu=seq_lens_cpu,
        block_table_tensor=block_table.to(device),
        num_reqs=len(seq_lens),
        num_actual_tokens=sum(query_lens),
    )
    return MLABatch(common, q.to(device), kv_cache.to(device), list(query_lens), seq_lens)


def mark_scheduler_tensors(common: CommonAttentionMetadata) -> None:
    """On the CPU, mark the fields that live on the GPU in an engine (no-op on CUDA,
    where ``torch.cuda.set_sync_debug_mode`` sees real device tensors)."""
    for tensor in (common.query_start_loc, common.seq_lens, common.block_table_tensor):
        if tensor.device.type == "cpu":
            mark_device_resident(tensor)


_EXPECT = re.compile(r"#\s*expect:\s*([A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)")


def expected_findings(path: str | Path) -> set[tuple[int, str]]:
    """``(line, code)`` for every ``# expect: CODE[, CODE...]`` comment in a fixture."""
    findings = set()
    for lineno, line in enumerate(Path(path).read_text().splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            findings.update((lineno, code.strip()) for code in match.group(1).split(","))
    return findings


def load_fixture_module(path: str | Path, source: str | None = None) -> ModuleType:
    """Import a fixture file as a fresh module (optionally from edited ``source``).

    The code is compiled under ``path``, so tracebacks and the sync checker's messages
    point at the fixture's lines.
    """
    path = Path(path).resolve()
    module = ModuleType(f"_fixture_{path.parent.name}_{path.stem}")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module  # dataclasses look their module up by name
    code = compile(path.read_text() if source is None else source, str(path), "exec")
    exec(code, module.__dict__)  # noqa: S102 - running the fixture is the point
    return module
