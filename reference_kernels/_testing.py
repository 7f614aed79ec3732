"""Random batch builders and fixture helpers shared by the tests (not a public API)."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F


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

    The module keeps ``path`` as its file name, so tracebacks and the sync checker's
    messages point at the fixture's lines.
    """
    path = Path(path).resolve()
    name = f"_fixture_{path.parent.name}_{path.stem}"
    if source is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    module = ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module
