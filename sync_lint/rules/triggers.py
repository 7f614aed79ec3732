"""The text each rule's pre-filter looks for (``Rule.triggers``), apart from the analyses.

Kept free of libcst and of the analyses, so that deciding a file has nothing for any rule costs
no import of them: in a one-file run (what pre-commit does) that import is most of the time.
"""

from __future__ import annotations

import re

# -- GPU1xx ----------------------------------------------------------------------------------------

# Words without which a file neither holds a contiguity sink nor a function summary that
# another file needs; every GPU1xx rule lists them among its triggers.
SUMMARY_TRIGGERS = ("is_contiguous", "stride(", "triton", "tl.load", "tl.store", "torch.ops", "data_ptr")
# A function can only report a GPU1xx finding at a sink it calls: a kernel launch, a custom op,
# `.view(dtype)`, `.data_ptr()`, or a function with a summary (whose callers the runner keeps in
# a later round). Casts and views alone are common; sinks are not.
SINK_UNIT_TRIGGERS = SUMMARY_TRIGGERS + ("](", ".view(")
CAST_TRIGGERS = (".to(", ".int()", ".long()", ".float()", ".half()", ".bfloat16()", ".double()", ".type(", ".cuda(")
VIEW_TRIGGERS = (
    # ``.T`` as a whole attribute: a bare ".T" would match every ``torch.Tensor`` annotation.
    "[:", "[...", "...]", "::", ":, ", ".t()", re.compile(r"\.T\b"), ".mT", ".mH", "transpose", "permute", "movedim",
    "moveaxis", "swapaxes", "swapdims", "expand", "broadcast_to", "select(", "narrow(", "unfold(",
    "diagonal(", "as_strided",
)  # fmt: skip
CONTIGUOUS_TRIGGERS = ("contiguous(",)

# -- GPU2xx ----------------------------------------------------------------------------------------

# Hot-scope markers (default patterns): a file with none and no sync word has nothing to report.
HOT_TRIGGERS = ("MetadataBuilder", "def forward", "torch.compile", "cuda.graph", "support_torch_compile")
EXPLICIT_TRIGGERS = (".item(", ".tolist(", ".cpu(", ".numpy(", "synchronize", '"cpu"', "'cpu'", ".copy_(")
IMPLICIT_TRIGGERS = (
    "nonzero", "argwhere", "unique", "masked_select", "repeat_interleave", "where(", "device", ".cuda(", "_gpu",
    ".gpu",
)
# Only the configured ``sync-declarations`` are declarations; their names become triggers
# (``trigger_options``), so the default's is the only fixed one.
DECLARATION_TRIGGERS = ("gpu_sync_allowed",)
