"""Module names, without libcst: what both the analyses and the libcst-free outline pass need."""

from __future__ import annotations

import os

# Roots of libraries whose functions are never the project's own: a call into one has no summary.
LIBRARY_ROOTS = frozenset({
    "torch", "numpy", "math", "triton", "logging", "os", "sys", "typing", "functools", "itertools", "collections",
    "contextlib", "dataclasses", "time", "random", "re", "json", "copy", "abc", "enum", "warnings", "inspect",
    "operator", "threading", "asyncio", "weakref", "gc", "pickle", "builtins", "typing_extensions",
})


def is_package_init(path: str) -> bool:
    """A package's ``__init__.py``: its module is the package (relative imports start there)."""
    return os.path.basename(path) == "__init__.py"


def resolve_relative(module_name: str, is_package: bool, level: int, target: str) -> str:
    """The absolute module of ``from <level dots><target> import ...`` written in ``module_name``."""
    if level == 0:
        return target
    parts = module_name.split(".") if module_name else []
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
    base = ".".join(parts)
    return f"{base}.{target}" if base and target else base or target
