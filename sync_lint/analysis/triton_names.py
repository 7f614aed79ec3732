"""Which decorators make a function a Triton kernel, by their resolved dotted names.

Free of libcst: the syntax scout (``pipeline.scout``) tells kernels apart too, before any libcst
import, and must agree with the analyses.
"""

TRITON_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit")


def is_triton_decorator(name: str) -> bool:
    """``triton.jit`` and its kin, or any ``*.jit`` of a module with ``triton`` in its name."""
    return name in TRITON_DECORATORS or (name.endswith(".jit") and "triton" in name)
