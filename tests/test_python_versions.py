"""sync-lint runs on every Python its package metadata admits (``requires-python``, 3.10 up).

CI runs 3.11, so what 3.10 lacks is checked here without it: the syntax (``ast.parse`` with
``feature_version``) and the standard-library names added in 3.11, which a module may import
only where 3.10 never runs the import (under ``TYPE_CHECKING``) or where it falls back (in a
``try`` that catches the ``ImportError``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted((ROOT / "sync_lint").rglob("*.py"))
OLDEST = (3, 10)

# Standard-library modules and names that Python 3.11 added.
NEW_MODULES = {"tomllib", "wsgiref.types"}
NEW_NAMES = {
    "typing": {"Self", "Never", "LiteralString", "Required", "NotRequired", "TypeVarTuple", "Unpack",
               "assert_never", "assert_type", "reveal_type", "dataclass_transform", "get_overloads", "clear_overloads"},
    "enum": {"StrEnum", "ReprEnum", "EnumCheck", "FlagBoundary", "verify", "member", "nonmember", "global_enum"},
    "datetime": {"UTC"},
    "asyncio": {"TaskGroup", "Runner", "timeout", "timeout_at", "Timeout"},
    "contextlib": {"chdir"},
    "hashlib": {"file_digest"},
    "operator": {"call"},
}  # fmt: skip


def test_the_oldest_python_is_the_one_the_metadata_admits():
    metadata = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert metadata["requires-python"] == ">=" + ".".join(map(str, OLDEST))
    assert any(d.startswith("tomli") and "python_version < '3.11'" in d for d in metadata["dependencies"])


def _guarded(tree: ast.Module) -> set[int]:
    """The line numbers of imports 3.10 never runs or survives: under ``if TYPE_CHECKING:``, or
    in the body of a ``try`` with an ``except ImportError`` / ``ModuleNotFoundError``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if type(node) is ast.If and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            lines.update(n.lineno for statement in node.body for n in ast.walk(statement) if hasattr(n, "lineno"))
        if type(node) is ast.Try and any(
            handler.type is not None and {"ImportError", "ModuleNotFoundError"} & set(ast.unparse(handler.type).strip("()").replace(" ", "").split(","))
            for handler in node.handlers
        ):
            lines.update(n.lineno for statement in node.body for n in ast.walk(statement) if hasattr(n, "lineno"))
    return lines


def newer_imports(text: str) -> list[str]:
    """``line: what`` for each import of something 3.11 added, outside the guards."""
    tree = ast.parse(text)
    guarded = _guarded(tree)
    found = []
    for node in ast.walk(tree):
        if node.lineno in guarded if hasattr(node, "lineno") else True:
            continue
        if type(node) is ast.Import:
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name in NEW_MODULES]
        elif type(node) is ast.ImportFrom and node.level == 0:
            if node.module in NEW_MODULES:
                found.append(f"{node.lineno}: from {node.module} import ...")
            found += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names
                      if a.name in NEW_NAMES.get(node.module, ())]
        elif type(node) is ast.Attribute and type(node.value) is ast.Name and node.attr in NEW_NAMES.get(node.value.id, ()):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return sorted(found, key=lambda item: int(item.partition(":")[0]))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_module_runs_on_the_oldest_python(path):
    text = path.read_text(encoding="utf-8")
    ast.parse(text, feature_version=OLDEST)  # a SyntaxError names what 3.10 cannot parse
    assert newer_imports(text) == []


def test_the_import_check_finds_what_3_10_lacks_and_lets_guarded_imports_be():
    unguarded = "from typing import TYPE_CHECKING, Self\nimport tomllib\nx = typing.Never\nfrom enum import StrEnum\n"
    assert newer_imports(unguarded) == [
        "1: from typing import Self", "2: import tomllib", "3: typing.Never", "4: from enum import StrEnum",
    ]
    guarded = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from typing import Self\n"
        "def load():\n    try:\n        import tomllib\n    except ModuleNotFoundError:\n        import tomli as tomllib\n"
        "try:\n    from enum import StrEnum\nexcept (ImportError, AttributeError):\n    StrEnum = None\n"
    )
    assert newer_imports(guarded) == []
    # A try that catches something else does not guard.
    assert newer_imports("try:\n    import tomllib\nexcept ValueError:\n    pass\n") == ["2: import tomllib"]


def test_the_syntax_check_rejects_what_3_10_cannot_parse():
    with pytest.raises(SyntaxError):
        ast.parse("try:\n    pass\nexcept* ValueError:\n    pass\n", feature_version=OLDEST)
