"""Modules of a run that no rule reads, looked into when a call goes through one.

A file none of whose rules' words occur is not parsed, so its ``FileFacts`` hold no imports; yet
a facade that only re-exports (``from .impl import op``) is such a file, and a call through it
(``facade.op(x)``) must reach ``op``. The project index (``ProjectIndex.lookup``) reads such a
module the first time a name goes through it, as a parse would have recorded it: its imports,
each name's first meaning (``scout.syntax.first_imports``, equal to ``NameTable``'s), and the
functions defined at its top level (under ``if``, ``try``, ``with`` and loops too:
``analysis.functions``), whose names are its own, however it also imports them (a platform
branch). The project plan reads every meaning of such a module's imports in its outline."""

from __future__ import annotations

import ast

from sync_lint.analysis.modules import is_package_init
from sync_lint.pipeline.scout.syntax import first_imports
from sync_lint.pipeline.source import SourceError, read, split_lines

# The statements whose blocks ``analysis.functions`` looks into for functions of the module.
_BLOCKS = (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class UnreadModules:
    """``paths``: module name -> path, for the modules of the run without facts of their imports."""

    def __init__(self, paths: dict[str, str]) -> None:
        self.paths = paths
        # module -> (its top-level functions, its imports); None: it cannot be read or parsed
        self._read: dict[str, tuple[set[str], dict[str, str]] | None] = {}

    def imports_for(self, module: str, name: str) -> dict[str, str] | None:
        """The imports of ``module``, where ``name`` may be one of them; None where the module is
        not one of these, defines ``name`` itself, or cannot be read or parsed."""
        path = self.paths.get(module)
        if path is None:
            return None
        if module not in self._read:
            self._read[module] = _read_module(path, module)
        found = self._read[module]
        if found is None or name in found[0]:
            return None
        return found[1]


def _read_module(path: str, module: str) -> tuple[set[str], dict[str, str]] | None:
    try:
        text = read(path).text
        tree = ast.parse(text)
    except (SourceError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    functions: set[str] = set()
    todo = list(tree.body)
    while todo:
        statement = todo.pop()
        if type(statement) in _FUNCTIONS:
            functions.add(statement.name)
        elif type(statement) in _BLOCKS:
            todo.extend(statement.body)
            todo.extend(getattr(statement, "orelse", ()))
            for handler in getattr(statement, "handlers", ()):
                todo.extend(handler.body)
            todo.extend(getattr(statement, "finalbody", ()))
    return functions, first_imports(tree, split_lines(text), module, is_package_init(path))
