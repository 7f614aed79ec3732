"""The generated rule pages match the rules, and the documented commands are real commands."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import tomllib
import yaml

from sync_lint.cli import build_parser
from sync_lint.config import OPTIONS, validate
from sync_lint.docs import generated_pages, toml_value, write_pages

ROOT = Path(__file__).resolve().parent.parent
RULE_DOCS = ROOT / "docs" / "rules"


def stale_pages(folder: Path) -> list[str]:
    """Pages that differ from what the rules generate, are missing, or belong to no rule."""
    expected = generated_pages()
    problems = []
    for name, text in sorted(expected.items()):
        page = folder / name
        if not page.is_file():
            problems.append(f"{name} (missing)")
        elif page.read_text(encoding="utf-8") != text:
            problems.append(f"{name} (stale)")
    if folder.is_dir():
        problems += [f"{p.name} (no such rule)" for p in sorted(folder.glob("*.md")) if p.name not in expected]
    return problems


def test_rule_pages_are_up_to_date():
    problems = stale_pages(RULE_DOCS)
    assert not problems, f"docs/rules/ is out of date: {', '.join(problems)}; run: make docs"


def test_the_check_detects_stale_missing_and_orphan_pages(tmp_path):
    write_pages(str(tmp_path))
    assert stale_pages(tmp_path) == []
    first = min(p for p in generated_pages() if p != "README.md")
    (tmp_path / first).write_text("old text\n")
    (tmp_path / "README.md").unlink()
    (tmp_path / "GPU999.md").write_text("a removed rule\n")
    assert stale_pages(tmp_path) == [f"{first} (stale)", "README.md (missing)", "GPU999.md (no such rule)"]


def test_every_rule_page_has_the_four_parts():
    for name, text in generated_pages().items():
        if name in ("README.md", "settings.md"):
            continue
        for heading in ("## What it finds", "## Why it is a bug", "## Example", "## Fix safety"):
            assert heading in text, f"{name}: no {heading}"


def test_the_settings_page_gives_every_key_with_a_default_the_loader_reads_back():
    """Each key's block is TOML that ``[tool.sync-lint]`` accepts and that means its default."""
    page = generated_pages()["settings.md"]
    blocks = re.findall(r"^## `([a-z-]+)`\n.*?```toml\n(.*?)```", page, re.DOTALL | re.MULTILINE)
    assert [key for key, _ in blocks] == list(OPTIONS)
    for key, block in blocks:
        table = tomllib.loads(block)
        assert validate(table, "settings.md") == {key: OPTIONS[key].default}, key
        assert OPTIONS[key].doc in page


def test_toml_values_cover_every_option_type():
    assert toml_value(True) == "true" and toml_value("a\"b") == '"a\\"b"'
    assert toml_value({"*Impl": ["forward"], "x": []}) == '{ "*Impl" = ["forward"], "x" = [] }'
    assert tomllib.loads("k = " + toml_value({"a.b": "c", "d": ["e", "f"]})) == {"k": {"a.b": "c", "d": ["e", "f"]}}
    with pytest.raises(TypeError):
        toml_value(1.5)


def _sync_lint_commands(text: str) -> list[str]:
    """The `sync-lint ...` lines of the fenced code blocks (shell lines and workflow `run:` steps)."""
    commands = []
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL)
    for line in "\n".join(blocks).splitlines():
        line = line.strip().removeprefix("- ").removeprefix("run: ").strip()
        if line.startswith("sync-lint ") and "<" not in line:
            commands.append(line.split("  #")[0].split(" || ")[0].strip())
    return commands


@pytest.mark.parametrize("document", ["README.md", "docs/ci.md"])
def test_documented_commands_parse(document):
    text = (ROOT / document).read_text(encoding="utf-8")
    commands = _sync_lint_commands(text)
    assert commands, f"{document} shows no sync-lint command"
    parser = build_parser()
    for command in commands:
        words = shlex.split(command)[1:]
        try:
            parser.parse_args(words)
        except SystemExit as exc:  # argparse exits on an unknown flag
            if exc.code != 0:
                pytest.fail(f"{document}: `{command}` is not a valid command line")


def test_editor_setups_start_the_server_subcommand():
    text = (ROOT / "docs" / "editors.md").read_text(encoding="utf-8")
    assert text.count('"sync-lint", "server"') >= 2 and "args = [\"server\"]" in text
    assert build_parser().parse_args(["server"]).command == "server"


def test_ci_workflow_example_is_valid_yaml_with_sarif_upload():
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
    workflows = [yaml.safe_load(block) for block in blocks]
    workflow = next(w for w in workflows if isinstance(w, dict) and "jobs" in w)
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    uses = [step.get("uses", "") for step in steps]
    assert any(u.startswith("github/codeql-action/upload-sarif@") for u in uses)
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    assert upload.get("if") == "always()" and upload["with"]["sarif_file"] == "sync-lint.sarif"
    runs = " ".join(step.get("run", "") for step in steps)
    assert "--output-format sarif" in runs and "--output-format github" in runs
    permissions = [job.get("permissions", {}) for job in workflow["jobs"].values()]
    assert any(p.get("security-events") == "write" for p in permissions)


def test_readme_keeps_its_two_commands_first_and_covers_each_front_end():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = re.search(r"```sh\n(.*?)```", text, re.DOTALL).group(1)
    assert [line.split("#")[0].strip() for line in first_block.strip().splitlines()] == ["make demo", "make test"]
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    for front_end in ("Command line", "flake8", "pre-commit", "CI", "Baseline", "Editors", "libcst codemod", "ruff"):
        assert any(front_end.lower() in heading.lower() for heading in headings), front_end
