"""Configuration: ``[tool.sync-lint]`` of the nearest ``pyproject.toml``, then command-line flags.

Every key users may write is declared once in ``OPTIONS`` (engine keys and the options of the
shared analyses alike); anything else is an error, as is a rule code that matches no rule.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(Exception):
    """A configuration problem; the CLI prints it on one line and exits 2."""


@dataclass(frozen=True)
class Option:
    kind: type  # list (of str), dict (str -> str or list), str, bool
    default: Any
    doc: str


# The matrix-multiply custom ops, by name: a GEMM reads each operand through its leading dimension,
# which order it wants is op-specific (CUTLASS's scaled mm takes its weight column-major, as
# ``b.t()``) and checked at the call, so a transposed operand is most often intended and
# ``.contiguous()`` would break it. A view handed to one is not reported (``strided-sinks``).
MATRIX_MULTIPLY_OPS = (
    "torch.ops.*.*gemm*", "torch.ops.*.*matmul*", "torch.ops.*.*bmm*",
    "torch.ops.*.mm", "torch.ops.*.mm_*", "torch.ops.*.*_mm", "torch.ops.*.*_mm_*",
    "torch.ops.*.mm.*", "torch.ops.*.*_mm.*",  # an overload: ``torch.ops._C.cutlass_scaled_mm.default``
)  # fmt: skip

# flash-linear-attention's guards (``fla.utils.input_guard``, and ``contiguous``, its alias without
# arguments), vendored by vLLM and SGLang under other module names, so matched by their last name:
# each calls ``.contiguous()`` on every tensor argument before the wrapped function runs.
CONTIGUOUS_INPUT_DECORATORS = ("input_guard", "*.input_guard", "contiguous", "*.contiguous")

OPTIONS: dict[str, Option] = {
    # Rule selection (ruff's names and meaning).
    "select": Option(list, ["GPU"], "Rule codes or prefixes to enable (`GPU`, `GPU1`, `GPU201`, `ALL`)."),
    "extend-select": Option(list, [], "Codes or prefixes enabled on top of `select`."),
    "ignore": Option(list, [], "Codes or prefixes to disable."),
    "per-file-ignores": Option(dict, {}, "Glob -> codes disabled in matching files."),
    "preview": Option(bool, False, "Enable preview rules matched by a prefix (an exact code always enables)."),
    # File discovery.
    "exclude": Option(list, [], "Globs of files and folders not to check (replaces the default list)."),
    "extend-exclude": Option(list, [], "Globs added to the default exclusions."),
    # Shared analysis.
    "alias-modules": Option(
        dict,
        {"vllm.triton_utils.triton": "triton", "vllm.triton_utils.tl": "triton.language"},
        "Re-export shims: a dotted name -> the name it stands for.",
    ),
    "contiguous-sinks": Option(
        list,
        [],
        "Dotted names or fnmatch globs of functions whose tensor arguments must be contiguous (`pkg.mod.func`, "
        "`pkg.*.attend`). Keep each one's last part literal: the pre-filter finds the callers by that name, and "
        "a wildcard there (`pkg.ops.attend_*`) leaves it nothing to skip.",
    ),
    "strided-sinks": Option(
        list,
        list(MATRIX_MULTIPLY_OPS),
        "Dotted names or fnmatch globs of functions, custom ops and kernels that accept tensors of any strides "
        "(`vllm._custom_ops.cutlass_scaled_mm`, `torch.ops._C.machete_*`): a view handed to one is not reported. "
        "Wins over `contiguous-sinks` and the custom-op rule. The default names the matrix-multiply custom ops "
        "(`gemm`, `matmul`, `bmm`, `mm` in the op's name), whose operand order is op-specific and checked.",
    ),
    "extend-strided-sinks": Option(list, [], "Names or globs added to `strided-sinks`."),
    "contiguous-input-decorators": Option(
        list,
        list(CONTIGUOUS_INPUT_DECORATORS),
        "Dotted names or fnmatch globs of decorators that make every tensor argument of the function they wrap "
        "contiguous before it runs: its parameters are read as contiguous, so a cast of one is no contiguity "
        "fix relied on (GPU101), and a view a caller hands it is not reported. A call of one with "
        "`no_guard_contiguous=` (fla's way to exempt parameters) exempts the parameters a literal list names; "
        "any other argument leaves the function unguarded. The default names fla's `input_guard` and "
        "`contiguous`, which vLLM and SGLang vendor.",
    ),
    "extend-contiguous-input-decorators": Option(list, [], "Names or globs added to `contiguous-input-decorators`."),
    "hot-class-patterns": Option(list, ["*MetadataBuilder"], "Classes whose methods are hot (fnmatch globs)."),
    "hot-method-patterns": Option(
        list,
        ["build", "_build_*", "build_for_cudagraph_capture", "forward"],
        "Methods that are hot inside hot classes and inside nn.Module subclasses (for a model, `forward`; "
        "a model's method named like a builder's, `_build_*`, counts too).",
    ),
    # The engines' per-step classes besides the metadata builders, each with the methods of its
    # own contract: vLLM's attention implementations (``FlashAttentionImpl.forward``,
    # ``FlashMLAImpl.forward_mqa``) and SGLang's attention backends (``forward_decode``, and
    # ``init_forward_metadata_in_graph``, whose docstring forbids ``.item()`` / ``.cpu()`` /
    # ``.tolist()``). Hot code reaches them only through a custom op or a backend object, which
    # no call graph follows. Per class, not crossed with ``hot-method-patterns``: an SGLang
    # backend's ``init_forward_metadata_out_graph`` and ``_build_*`` helpers hold the host work
    # by that contract, and are not hot.
    "hot-class-methods": Option(
        dict,
        {
            "*Impl": ["forward", "forward_mqa", "forward_mha"],
            "*Backend": ["forward", "forward_decode", "forward_extend", "init_forward_metadata_in_graph"],
        },
        "Class glob -> the method globs that are hot in it (by the class's own name or a base's).",
    ),
    "extend-hot-class-methods": Option(dict, {}, "Entries added to `hot-class-methods` (a class glob's lists joined)."),
    "hot-functions": Option(
        list,
        [],
        "Extra hot functions by dotted name or glob (`pkg.mod.Runner.step`, `*.decode_*`), matched against "
        "`<module>.<Class>.<function>` (a nested function: `<outer function>.<name>`).",
    ),
    "cold-function-patterns": Option(
        list,
        ["__init__", "load_weights", "*warmup*", "*warm_up*", "capture_model", "profile_run", "_dummy_run"],
        "Functions that are never hot, even inside hot classes or when called from hot code.",
    ),
    "sync-declarations": Option(
        list,
        ["gpu_sync_allowed"],
        "Context managers that declare an intended sync. A bare name matches that name imported from any module, "
        "under its own name or another (`from debug import gpu_sync_allowed as allowed`); a dotted name must match "
        "exactly.",
    ),
    "sync-guard": Option(
        str, "", "`package.module:name` imported by the GPU201/GPU202 fix; no fix is offered when unset."
    ),
    "follow-imports": Option(
        str,
        "silent",
        "What a run of part of a package (one file or more: pre-commit's staged files, a folder) reads of the "
        "package beside it: `silent` (as mypy's option of that name) also reads the files its findings may rest "
        "on, the functions its hot code calls and those it hands a view or a cast to, to any depth, lints them and "
        "reports none of their findings, so that it reports in its files what a run of the whole package reports "
        "there; `skip` reads only what a file checked alone reads (its classes' bases, and the Python "
        "registrations of the custom ops it calls), for a faster first run, judges a call of another file's "
        "function as of unknown code, and checks a run of one file alone, as the flake8 plugin and the editor "
        "always do.",
    ),
    "unknown-device": Option(
        str,
        "hot-classes",
        "Report syncs on tensors of unknown device: `always`, `hot-classes` (only in the classes of "
        "`hot-class-patterns` and `hot-class-methods`) or `never`.",
    ),
}

_CODE_LISTS = ("select", "extend-select", "ignore")


@dataclass
class Settings:
    values: dict[str, Any] = field(default_factory=dict)
    root: Path = field(default_factory=Path.cwd)  # paths in config are relative to this
    config_path: Path | None = None

    def __getitem__(self, key: str) -> Any:
        if key in self.values:
            return self.values[key]
        return OPTIONS[key].default

    def fingerprint(self) -> str:
        """Identifies the effective configuration, for the cache key."""
        effective = {key: self[key] for key in OPTIONS}
        return hashlib.sha256(json.dumps(effective, sort_keys=True, default=str).encode()).hexdigest()[:16]


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml with a [tool.sync-lint] table, from ``start`` upwards (the
    folder of ``start`` where it is no folder: a file, a dangling link, a link loop)."""
    try:
        current = start.resolve()
    except (OSError, RuntimeError):  # a link loop (RuntimeError before Python 3.13): the lint reports it
        current = Path(os.path.abspath(start))
    if not current.is_dir():
        current = current.parent
    for folder in (current, *current.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                if "sync-lint" in _read_toml(candidate).get("tool", {}):
                    return candidate
            except ConfigError:
                return candidate  # report its error rather than silently skipping it
    return None


def _read_toml(path: Path) -> dict:
    # Here: an isolated run, or a project without a pyproject.toml, reads no TOML. Python 3.10
    # has no tomllib; tomli is the same parser, installed there with sync-lint.
    try:
        import tomllib
    except ModuleNotFoundError:
        import tomli as tomllib

    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def load(config_path: Path | None, isolated: bool = False, start: Path | None = None) -> Settings:
    """Settings from an explicit file, the nearest pyproject.toml, or defaults (``isolated``)."""
    if isolated:
        return Settings(root=Path.cwd())
    path = config_path or find_pyproject(start or Path.cwd())
    if path is None:
        return Settings(root=Path.cwd())
    table = _read_toml(path).get("tool", {}).get("sync-lint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.sync-lint] must be a table")
    return Settings(values=validate(table, str(path)), root=path.parent.resolve(), config_path=path)


def validate(table: dict, where: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in table.items():
        option = OPTIONS.get(key)
        if option is None:
            raise ConfigError(f"{where}: unknown option `{key}` in [tool.sync-lint]")
        if option.kind is list and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ConfigError(f"{where}: `{key}` must be a list of strings")
        if option.kind is dict and not isinstance(value, dict):
            raise ConfigError(f"{where}: `{key}` must be a table")
        if option.kind is str and not isinstance(value, str):
            raise ConfigError(f"{where}: `{key}` must be a string")
        if option.kind is bool and not isinstance(value, bool):
            raise ConfigError(f"{where}: `{key}` must be true or false")
        values[key] = value
    for key in _CODE_LISTS:
        check_codes(values.get(key, []), f"{where}: `{key}`")
    for pattern, codes in values.get("per-file-ignores", {}).items():
        if isinstance(codes, str):
            codes = [codes]
        if not (isinstance(codes, list) and all(isinstance(c, str) for c in codes)):
            raise ConfigError(f"{where}: `per-file-ignores` entry `{pattern}` must be a list of codes")
        check_codes(codes, f"{where}: `per-file-ignores` entry `{pattern}`")
        values["per-file-ignores"][pattern] = codes
    for key in ("hot-class-methods", "extend-hot-class-methods"):
        for pattern, methods in values.get(key, {}).items():
            if not (isinstance(methods, list) and all(isinstance(m, str) for m in methods)):
                raise ConfigError(f"{where}: `{key}` entry `{pattern}` must be a list of method names or globs")
    if values.get("follow-imports", "silent") not in ("silent", "skip"):
        raise ConfigError(f"{where}: `follow-imports` must be `silent` or `skip`")
    if values.get("unknown-device", "hot-classes") not in ("always", "hot-classes", "never"):
        raise ConfigError(f"{where}: `unknown-device` must be `always`, `hot-classes` or `never`")
    guard = values.get("sync-guard", "")
    if guard and ":" not in guard:
        raise ConfigError(f"{where}: `sync-guard` must look like `package.module:name`")
    return values


def check_codes(codes: list[str], where: str) -> None:
    from sync_lint.rules import all_codes

    known = all_codes()
    for code in codes:
        if code == "ALL":
            continue
        if not any(k.startswith(code) for k in known):
            raise ConfigError(f"{where}: unknown rule code or prefix `{code}`")


def _matches(code: str, selectors: list[str]) -> str | None:
    """The most specific selector matching ``code`` (None if none does)."""
    best = None
    for selector in selectors:
        if selector == "ALL" or code.startswith(selector):
            if best is None or (selector != "ALL" and (best == "ALL" or len(selector) > len(best))):
                best = selector
    return best


def enabled_codes(settings: Settings, preview_codes: set[str], known: list[str]) -> set[str]:
    """Codes enabled by select / extend-select / ignore; a more specific selector wins (as in ruff)."""
    select = list(settings["select"]) + list(settings["extend-select"])
    ignore = list(settings["ignore"])
    enabled = set()
    for code in known:
        chosen = _matches(code, select)
        if chosen is None:
            continue
        if code in preview_codes and not settings["preview"] and chosen != code:
            continue
        dropped = _matches(code, ignore)
        if dropped is not None and (dropped == code or len(dropped) >= len(chosen) or chosen == "ALL"):
            continue
        enabled.add(code)
    return enabled


def hot_class_methods(settings: Settings) -> dict[str, list[str]]:
    """``hot-class-methods`` with ``extend-hot-class-methods`` added (a glob in both: its lists joined)."""
    joined = {glob: list(methods) for glob, methods in settings["hot-class-methods"].items()}
    for glob, methods in settings["extend-hot-class-methods"].items():
        joined[glob] = list(dict.fromkeys([*joined.get(glob, []), *methods]))
    return joined


def is_strided_sink(settings: Settings, name: str) -> bool:
    """Does ``strided-sinks`` (with ``extend-strided-sinks``) name this dotted callee?"""
    return any(
        fnmatch.fnmatchcase(name, glob) for glob in (*settings["strided-sinks"], *settings["extend-strided-sinks"])
    )


def is_contiguous_input_decorator(settings: Settings, name: str) -> bool:
    """Does ``contiguous-input-decorators`` (with its ``extend-`` list) name this decorator?"""
    return any(
        fnmatch.fnmatchcase(name, glob)
        for glob in (*settings["contiguous-input-decorators"], *settings["extend-contiguous-input-decorators"])
    )


def ignored_for_file(settings: Settings, path: str) -> list[str]:
    """Codes disabled for one file by ``per-file-ignores``."""
    table = settings["per-file-ignores"]
    if not table:
        return []
    try:
        relative = Path(path).resolve().relative_to(settings.root).as_posix()
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop (Python 3.11)
        relative = Path(path).as_posix()
    name = os.path.basename(path)
    codes: list[str] = []
    for pattern, pattern_codes in table.items():
        if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(name, pattern):
            codes.extend(pattern_codes)
    return codes
