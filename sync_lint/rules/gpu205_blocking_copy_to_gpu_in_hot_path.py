"""GPU205 (preview): a blocking copy of CPU data onto the GPU in a hot scope."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sync_lint.rules.base import Finding, HotScopeRule
from sync_lint.rules.triggers import UPLOAD_TRIGGERS

if TYPE_CHECKING:
    from sync_lint.analysis.context import FileContext


class BlockingCopyToGpuInHotPath(HotScopeRule):
    code = "GPU205"
    name = "blocking-copy-to-gpu-in-hot-path"
    summary = "A blocking copy of CPU data onto the GPU in a hot scope: the host waits for all queued GPU work."
    what = (
        "In a hot scope (see GPU201), outside a sync declaration or a debug-only or training-only branch, a copy from host memory "
        "to the GPU that does not pass `non_blocking=True`: `x_cpu.to(device)`, `x_cpu.cuda()`, "
        "`gpu_tensor.copy_(x_cpu)`, of a tensor known to be in host memory (`*_cpu` / `*_np` / `*_host` "
        "names, `device=\"cpu\"`, `pin_memory=True`, results of `.cpu()` / `torch.from_numpy`), and "
        "`torch.tensor(data, device=...)` / `torch.as_tensor(data, device=...)` of host data (a Python list or "
        "number, a CPU tensor) made straight on the GPU. A call in hot code of a function of the project that makes such a copy, "
        "itself or through the functions it calls, is reported at the call (as GPU201 reports a helper's "
        "sync); a helper that copies onto the device it is handed counts only where the call hands it a GPU "
        "device (`pad_rows(rows, device=\"cpu\")` copies nothing), and the flags a call binds are not read "
        "(a copy under `if scale is None:` counts whatever the call passes). Not reported: `non_blocking=True` copies (a copy from pinned memory is "
        "asynchronous; one from pageable memory stalls only above the driver's staging size, which the "
        "linter cannot tell), and device-side factories (`torch.zeros(n, device=...)`, `torch.full`, "
        "`torch.arange`), which copy nothing."
    )
    why = (
        "A copy without `non_blocking=True` returns only once the data is on the GPU, and it is queued behind "
        "every kernel already launched on the stream, so the host waits for the GPU to drain: measured on an "
        "H100 (PyTorch 2.11) behind 200 ms of queued GPU work, `x_cpu.to(device)`, `.cuda()`, `copy_()` and "
        "`torch.tensor([...], device=device)` each held the host for the full 200 ms, as `.item()` does, and "
        "each fails `torch.cuda.set_sync_debug_mode(\"error\")`, the check engines arm after warm-up. Inside "
        "`torch.cuda.graph` capture, a copy from pageable memory raises (\"Cannot copy between CPU and CUDA "
        "tensors during CUDA graph capture unless the CPU tensor is pinned\")."
    )
    example = (
        "query_start_loc = query_start_loc_cpu.to(self.device)            # GPU205\n"
        "slots = torch.tensor(slot_list, device=self.device)            # GPU205\n"
        "# fixed: stage in pinned memory, copy asynchronously\n"
        "query_start_loc = query_start_loc_cpu.to(self.device, non_blocking=True)\n"
        "slots = torch.tensor(slot_list, pin_memory=True).to(self.device, non_blocking=True)"
    )
    fix_safety = (
        "No fix: `non_blocking=True` is only safe from pinned memory that nothing writes before the copy "
        "runs, which the linter cannot tell."
    )
    preview = True
    triggers = UPLOAD_TRIGGERS
    # Its findings rest on nothing outside the hot function whose words they are.
    own_site_words = UPLOAD_TRIGGERS
    valid = (
        # Asynchronous copies, device-side factories, copies between GPU tensors.
        ("import torch\n\n"
        "class FlashMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        qsl = common.query_start_loc_cpu.to(self.device, non_blocking=True)\n"
        "        slots = torch.tensor(common.slot_list, pin_memory=True).to(self.device, non_blocking=True)\n"
        "        zeros = torch.zeros(common.num_reqs, device=self.device)\n"
        "        steps = torch.arange(8, device=self.device)\n"
        "        zeros.copy_(steps[: common.num_reqs])\n"
        "        return qsl, slots, zeros, torch.as_tensor(steps, device=self.device)\n"),
        # A helper handed the host as its device copies nothing onto the GPU.
        ("import numpy as np\n"
        "import torch\n\n"
        "def pad_rows(rows, device=None):\n"
        "    return torch.from_numpy(np.array(rows)).to(device)\n\n"
        "class Sampler(torch.nn.Module):\n"
        "    def forward(self, logits, rows):\n"
        "        padded = pad_rows(rows, device=\"cpu\")\n"
        "        return logits, padded.to(logits.device, non_blocking=True)\n"),
        # Outside hot code: set-up may copy freely.
        ("import torch\n\n"
        "class FlashMetadataBuilder:\n"
        "    def __init__(self, device):\n"
        "        self.table = torch.tensor([1, 2, 3], device=device)\n"
        "        self.lens = torch.zeros(8, dtype=torch.int32).to(device)\n"),
    )
    invalid = (
        ("import torch\n\n"
        "class FlashMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        qsl = common.query_start_loc_cpu.to(self.device)  # expect: GPU205\n"
        "        lens = common.seq_lens_cpu.cuda()  # expect: GPU205\n"
        "        slot_list = common.slot_mapping_cpu.tolist()\n"
        "        slots = torch.tensor(slot_list, device=self.device)  # expect: GPU205\n"
        "        self.block_table.gpu.copy_(common.block_table_cpu)  # expect: GPU205\n"
        "        return qsl, lens, slots\n"),
        ("import torch\n\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x: torch.Tensor):\n"
        "        scale = torch.as_tensor([0.5, 2.0], device=x.device)  # expect: GPU205\n"
        "        return x * scale\n"),
        # A helper's copy, reported at the hot call.
        ("import torch\n\n"
        "def slots_on(slot_list, device):\n"
        "    return torch.tensor(list(slot_list), device=device)\n\n"
        "class FlashMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        return slots_on(common.slot_list, self.device)  # expect: GPU205\n"),
    )

    def check(self, ctx: FileContext) -> Iterable[Finding]:
        from sync_lint.analysis.syncs import (
            SyncAnalysis,
            callee_condition,
            site_message,
        )

        analysis = ctx.get(SyncAnalysis)
        for site in analysis.hot_sites(("upload", "upload-call")):
            yield Finding(site.node, site_message(analysis, site, "blocking copy onto the GPU"),
                          if_callee=callee_condition(site))
