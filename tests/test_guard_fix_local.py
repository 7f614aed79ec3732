"""GPU201's fix (wrap the statement in ``with gpu_sync_allowed():`` and import the guard) edits
only the statement's lines and the import's place (``Editor.replace_statement``,
``guards._import_edit``), where it used to render and diff the whole module per finding. The
whole-module transform is still the fallback, and the oracle here: both must give the same text."""

from __future__ import annotations

import pytest

from sync_lint.api import fix_text, lint_text
from sync_lint.fixes import Editor

GUARD = "pkg.debug:gpu_sync_allowed"

BUILDER = '''class FlashMetadataBuilder:
    def build(self, common_attn_metadata):
        lens = common_attn_metadata.seq_lens.tolist()
        return lens
'''

CASES = {
    "after imports, before a class": "import torch\n\n\n" + BUILDER,
    "one blank line before the class": "import torch\n\n" + BUILDER,
    "no imports, a header comment": "# Copyright the authors\n\n" + BUILDER,
    "docstring only": '"""Builders."""\n' + BUILDER,
    "type-checking block among the imports": (
        "import torch\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import numpy\nX = 1\n" + BUILDER
    ),
    "trailing comment": BUILDER.replace(".tolist()", ".tolist()  # host copy"),
    "multi-line string in the statement": BUILDER.replace(
        "lens = common_attn_metadata.seq_lens.tolist()",
        'lens = """rows:\n  indented inside the string\n""" + str(common_attn_metadata.seq_lens.tolist())',
    ),
    "semicolons": BUILDER.replace("lens = ", "a = 1; lens = "),
    "nested blocks with a footer comment": '''import torch


class FlashMetadataBuilder:
    def build(self, common_attn_metadata):
        total = 0
        for row in range(4):
            try:
                total += common_attn_metadata.seq_lens[row].item()
            finally:
                pass
            # the loop ends here
        return total
''',
    "CRLF line endings": ("import torch\n\n\n" + BUILDER).replace("\n", "\r\n"),
    "tab indentation": ("import torch\n\n\n" + BUILDER).replace("    ", "\t"),
    "last line without a newline (falls back)": (
        "import torch\n\n\nclass FlashMetadataBuilder:\n    def build(self, common_attn_metadata):\n"
        "        return common_attn_metadata.seq_lens.tolist()"
    ),
    "guard already imported": "from pkg.debug import gpu_sync_allowed\n\n\n" + BUILDER,
}


def _whole_module_fix(text: str, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(Editor, "replace_statement", lambda self, statement, replacement: None)
        return fix_text(text, unsafe=True, select=["GPU201"], sync_guard=GUARD)


@pytest.mark.parametrize("name", sorted(CASES))
def test_local_edits_give_the_whole_module_transforms_text(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = CASES[name]
    placed = _spy_on_replace_statement(monkeypatch)
    fixed = fix_text(text, unsafe=True, select=["GPU201"], sync_guard=GUARD)
    monkeypatch.undo()
    assert placed and all(edit is None for edit in placed) == ("falls back" in name)
    assert fixed != text and "with gpu_sync_allowed():" in fixed
    compile(fixed, name, "exec")
    assert fixed == _whole_module_fix(text, monkeypatch)


def test_the_edits_touch_only_the_statement_and_the_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planned without rendering the whole module (``Editor.transform``), which is what made
    these fixes slow."""
    padding = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(200))
    text = "import torch\n\n\n" + padding + BUILDER + "\n\n" + padding
    transforms = []
    original = Editor.transform
    monkeypatch.setattr(Editor, "transform", lambda self, module: transforms.append(1) or original(self, module))
    (finding,) = [d for d in lint_text(text, select=["GPU201"], sync_guard=GUARD) if d.code == "GPU201"]
    assert transforms == []
    insert_import, wrap = finding.fix.edits
    assert insert_import.start == insert_import.end == len("import torch\n")
    statement = "        lens = common_attn_metadata.seq_lens.tolist()\n"
    assert text[wrap.start : wrap.end] == statement
    assert wrap.content == "        with gpu_sync_allowed():\n    " + statement


def _spy_on_replace_statement(monkeypatch: pytest.MonkeyPatch) -> list:
    """Record what each ``replace_statement`` call returned (None: the fallback was taken)."""
    returned: list = []
    original = Editor.replace_statement

    def spy(self, statement, replacement):
        returned.append(original(self, statement, replacement))
        return returned[-1]

    monkeypatch.setattr(Editor, "replace_statement", spy)
    return returned


def test_a_statement_the_local_edit_cannot_place_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    text = CASES["last line without a newline (falls back)"]
    placed = _spy_on_replace_statement(monkeypatch)
    fixed = fix_text(text, unsafe=True, select=["GPU201"], sync_guard=GUARD)
    assert placed and not any(placed)
    assert fixed.endswith("with gpu_sync_allowed():\n            return common_attn_metadata.seq_lens.tolist()")


def test_a_suppressed_finding_gets_no_fix_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    """A noqa'd sync is never shown nor fixed, so planning its fix is skipped; the noqa still
    counts as used (no GPU010)."""
    text = "import torch\n\n\n" + BUILDER.replace(".tolist()", ".tolist()  # noqa: GPU201")
    placed = _spy_on_replace_statement(monkeypatch)
    assert lint_text(text, sync_guard=GUARD) == []
    assert placed == []
    unsuppressed = "import torch\n\n\n" + BUILDER
    assert [d.code for d in lint_text(unsuppressed, sync_guard=GUARD)] == ["GPU201"]
    assert len(placed) == 1


def _module_level_guard_imports(text: str) -> int:
    """How many module-level statements (in top-level ``try``/``if`` blocks too) import the guard."""
    import ast

    found = 0
    pending = list(ast.parse(text).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.ImportFrom) and any(alias.name == "gpu_sync_allowed" for alias in node.names):
            found += 1
        elif isinstance(node, (ast.Try, ast.If)):
            pending.extend([*node.body, *node.orelse, *getattr(node, "finalbody", ()),
                            *(s for h in getattr(node, "handlers", ()) for s in h.body)])
    return found


IMPORTED_IN_ANOTHER_METHOD = "import torch\n\n\n" + BUILDER + '''
    def debug_context(self):
        from pkg.debug import gpu_sync_allowed

        return gpu_sync_allowed
'''


@pytest.mark.parametrize("text, added", [
    # A function-level import binds the name in its function only: the fix imports it.
    (IMPORTED_IN_ANOTHER_METHOD, 1),
    # A module-level one in a ``try`` block binds it for the whole module.
    ("try:\n    from pkg.debug import gpu_sync_allowed\nexcept ImportError:\n    gpu_sync_allowed = None\n\n\n" + BUILDER, 0),
    ("import sys\nif sys.version_info >= (3, 8):\n    from pkg.debug import gpu_sync_allowed as allowed\n\n\n" + BUILDER, 0),
])
def test_the_guard_is_called_where_a_module_level_import_binds_it(text: str, added: int) -> None:
    fixed = fix_text(text, unsafe=True, select=["GPU201"], sync_guard=GUARD)
    assert _module_level_guard_imports(fixed) == _module_level_guard_imports(text) + added
    local = "allowed" if " as allowed" in text else "gpu_sync_allowed"
    assert f"with {local}():\n            lens = " in fixed  # wrapped once: the alias declares too
    compile(fixed, "fixed.py", "exec")
    assert lint_text(fixed, select=["GPU201", "GPU203"], sync_guard=GUARD) == []


def test_the_import_edit_is_planned_once_per_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each finding's fix adds the same import; its place is found once per file
    (``guards.GuardImport``), not per finding (a render of the module's imports each)."""
    from sync_lint.analysis import guards

    calls = []
    original = guards._import_edit
    monkeypatch.setattr(guards, "_import_edit", lambda *args: calls.append(1) or original(*args))
    text = "import torch\n\n\n" + BUILDER.replace(
        "        return lens\n", "        first = common_attn_metadata.query_start_loc[0].item()\n"
        "        longest = common_attn_metadata.seq_lens.max().item()\n        return lens, first, longest\n"
    )
    found = [d for d in lint_text(text, select=["GPU201"], sync_guard=GUARD) if d.code == "GPU201"]
    assert len(found) == 3 and len(calls) == 1
    imports = {edit for d in found for edit in d.fix.edits if "import" in edit.content}
    assert imports == {guards.Edit(len("import torch\n"), len("import torch\n"), "from pkg.debug import gpu_sync_allowed\n")}
