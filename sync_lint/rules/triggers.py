"""The text each rule's pre-filter looks for (``Rule.triggers``), apart from the analyses.

Kept free of libcst and of the analyses, so that deciding a file has nothing for any rule costs
no import of them: in a one-file run (what pre-commit does) that import is most of the time.
"""

from __future__ import annotations

import re

from sync_lint.patterns import word

# -- GPU1xx ----------------------------------------------------------------------------------------

# ``from torch import ops`` (or ``from torch import (nn, ops as o)``) calls custom ops as
# ``ops.ns.op(t)``, where "torch.ops" is never written.
TORCH_OPS_IMPORT = word("from", r"\s+torch\s+import\s+(?:\([^)]*|[^\n]*)\bops\b")
# Words without which a file neither holds a contiguity sink nor a function summary that
# another file needs; every GPU1xx rule lists them among its triggers.
SUMMARY_TRIGGERS = ("is_contiguous", "stride(", "triton", "tl.load", "tl.store", "torch.ops", TORCH_OPS_IMPORT, "data_ptr")
# A function can only report a GPU1xx finding at a sink it calls: a kernel launch, a custom op,
# `.view(dtype)`, `.data_ptr()`, or a function with a summary (whose callers the project plan
# keeps). Casts and views alone are common; sinks are not.
SINK_UNIT_TRIGGERS = SUMMARY_TRIGGERS + ("](", ".view(")
# A file checked on its own needs a sink it calls: a Triton kernel's body words (``triton``,
# ``tl.load``) only summarise it for launches (``](``), which may be in other files. A custom
# op and a raw address are sinks wherever they are called; a check (``is_contiguous``,
# ``stride(``) or a launch makes a finding in a one-file run only through a function of that
# file whose summary it shapes, and ``](`` and ``.view(`` are also ``list[int]()`` and
# ``x.view(-1, n)``: where these words are, the syntax scout decides (``Scout.may_report_at_a_sink``).
SINK_SHAPE_TRIGGERS = ("](", ".view(")  # the syntax of a launch and of ``.view(dtype)``
ALONE_SINK_TRIGGERS = ("torch.ops", TORCH_OPS_IMPORT, "data_ptr", "is_contiguous", "stride(", *SINK_SHAPE_TRIGGERS)
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
    ".gpu", ".equal(", ".allclose(",  # ``torch.equal(a, b)`` / ``a.allclose(b)``; "nonzero" has ``is_nonzero``
    "bincount", "one_hot(", "histc(",
)
# Copies onto the GPU (GPU205): ``.to(`` / ``.cuda(`` / ``.copy_(`` and ``torch.tensor(`` / ``as_tensor(``.
UPLOAD_TRIGGERS = (".to(", ".cuda(", ".copy_(", "tensor(")
# Only the configured ``sync-declarations`` are declarations; their names become triggers
# (``trigger_options``), so the default's is the only fixed one.
DECLARATION_TRIGGERS = ("gpu_sync_allowed",)

# Without one of these a file has no hot scope (``analysis.hot_scopes``), so a GPU2xx rule can
# find nothing in it unless another file's summaries are at hand. Broad on purpose: ``compile``
# and ``graph`` also catch ``th.compile`` and ``from torch.cuda import graph``.
HOT_SCOPE_MARKERS = HOT_TRIGGERS + (word("compile"), word("graph"))


def method_definitions(patterns) -> re.Pattern | None:
    """``def NAME(`` for method names matching any of the fnmatch ``patterns`` (``_build_*``):
    the text a file must contain to define such a method. None: no pattern."""
    alternatives = []
    for pattern in patterns:
        if any(c in pattern for c in "[]"):
            alternatives.append(r"\w+")  # a character class: any name may match
            continue
        alternatives.append("".join(r"\w*" if c == "*" else r"\w" if c == "?" else re.escape(c) for c in pattern))
    if not alternatives:
        return None
    return word("def", r"\s+(?:" + "|".join(alternatives) + r")\s*\(")
