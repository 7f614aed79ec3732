"""A linted file's libcst tree must be freed by reference counting as soon as the file is done.

``lint_source`` pauses the cyclic garbage collector while it parses, expecting no cycles: if an
analysis keeps a cycle that reaches the tree, every tree lives on until a collection, which then
walks all its nodes. On an engine's tree that was an eighth of the run's CPU.
"""

from __future__ import annotations

import gc
from pathlib import Path

import libcst as cst
import pytest

from sync_lint.api import make_settings
from sync_lint.pipeline.runner import Linter
from sync_lint.pipeline.source import read

ROOT = Path(__file__).resolve().parent.parent
# Files on which every analysis runs and some rule reports (positions and fixes included).
FILES = [
    path for folder in ("gpu1xx", "gpu2xx")
    for path in sorted((ROOT / "fixtures" / folder).glob("*.py")) if path.name != "__init__.py"
]


def left_in_cycles(make, kind: type):
    """What ``make()`` returns, and how many objects of ``kind`` it left in reference cycles,
    with the collector paused as the run pauses it (``pipeline.collector``)."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        made = make()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        cyclic = sum(isinstance(o, kind) for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    return made, cyclic


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_libcst_node_is_left_in_a_reference_cycle(path: Path) -> None:
    linter = Linter(make_settings(preview=True))
    source = read(str(path))
    facts, cyclic_nodes = left_in_cycles(lambda: linter.lint_source(source), cst.CSTNode)
    assert facts.parsed
    assert cyclic_nodes == 0


# Files whose outline runs every scout question of a run of many files: the sync outline,
# what each function hands a sink, the masks of its indexes.
OUTLINED = [*FILES, *sorted((ROOT / "fixtures" / "upstream").glob("*.py"))]


@pytest.mark.parametrize("path", OUTLINED, ids=lambda p: p.name)
def test_no_ast_node_of_an_outline_is_left_in_a_reference_cycle(path: Path) -> None:
    """The outline of a run of many files (``project_plan.outline``) pauses the collector too:
    a cycle through what the scout keeps of a file (``FileNames.memo``) would keep each file's
    ``ast`` tree alive until a collection."""
    import ast

    linter = Linter(make_settings(preview=True))
    outline, cyclic_nodes = left_in_cycles(lambda: linter.outline_one(str(path)), ast.AST)
    assert outline.units
    assert cyclic_nodes == 0
