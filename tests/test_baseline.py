"""Adopting sync-lint on a big codebase: a baseline of today's findings, ``--add-noqa``, and what
long runs print (a progress bar only on a terminal, a one-line summary always)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run

from sync_lint.add_noqa import add_noqa_text, check_result, comment_spans
from sync_lint.baseline import normalise
from sync_lint.diagnostics import Diagnostic

UNUSED_NOQA = "x = 1  # noqa: GPU001\n"



def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("sync-lint: error: ")
    for fragment in fragments:
        assert fragment in line, line


def rule_example() -> tuple[str, str, list[int]]:
    """(code, source, flagged lines) of a real rule's INVALID example: GPU201 once it exists."""
    from sync_lint.rules import rule_by_code

    for code in ("GPU201", "GPU101"):
        rule = rule_by_code(code)
        if rule is not None and rule.invalid:
            source = rule.invalid[0]
            lines = [n for n, text in enumerate(source.splitlines(), 1) if re.search(rf"#\s*expect:.*{code}", text)]
            source = re.sub(r"\s*#\s*expect:[^\n]*", "", source)
            return code, source, lines
    pytest.skip("no GPU1xx/GPU2xx rule registered yet")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("import os\n\n" + UNUSED_NOQA + "def f():\n    y = 2  # noqa: GPU001\n")
    (tmp_path / "pkg" / "b.py").write_text(UNUSED_NOQA)
    (tmp_path / "pkg" / "clean.py").write_text("z = 3\n")
    return tmp_path


def findings(result: subprocess.CompletedProcess) -> list[str]:
    return result.stdout.splitlines()


# -- baseline ------------------------------------------------------------------------------------
def test_normalise_collapses_whitespace():
    assert normalise("    y  =\t2   # noqa: GPU001  ") == "y = 2 # noqa: GPU001"


def test_write_baseline_then_only_new_findings_fail(project):
    assert run("check", "pkg", cwd=project).returncode == 1
    written = run("check", "--write-baseline", "sync-lint-baseline.json", "pkg", cwd=project)
    assert written.returncode == 0, written.stderr
    assert written.stdout == ""
    assert "3 recorded in sync-lint-baseline.json" in written.stderr
    data = json.loads((project / "sync-lint-baseline.json").read_text())
    assert data["sync-lint-baseline"] == 1
    assert data["findings"] == [
        {"path": "pkg/a.py", "code": "GPU010", "source": "x = 1 # noqa: GPU001", "count": 1},
        {"path": "pkg/a.py", "code": "GPU010", "source": "y = 2 # noqa: GPU001", "count": 1},
        {"path": "pkg/b.py", "code": "GPU010", "source": "x = 1 # noqa: GPU001", "count": 1},
    ]

    result = run("check", "--baseline", "sync-lint-baseline.json", "pkg", cwd=project)
    assert result.returncode == 0 and result.stdout == ""
    assert "0 findings" in result.stderr and "3 baselined" in result.stderr

    # Edits elsewhere in the file move the findings and re-indent one: still known.
    a = project / "pkg" / "a.py"
    a.write_text("import sys\nimport os\n\n\n" + UNUSED_NOQA + "class C:\n    def f(self):\n        y  =  2  # noqa: GPU001\n")
    result = run("check", "--baseline", "sync-lint-baseline.json", "pkg", cwd=project)
    assert result.returncode == 0, result.stdout

    # A second copy of a known finding is new (entries count), and so is an edited flagged line.
    a.write_text(a.read_text() + UNUSED_NOQA)
    (project / "pkg" / "b.py").write_text("x = 10  # noqa: GPU001\n")
    result = run("check", "--baseline", "sync-lint-baseline.json", "pkg", cwd=project)
    assert result.returncode == 1
    assert len(findings(result)) == 2
    assert sorted(line.split(":")[0] for line in findings(result)) == ["pkg/a.py", "pkg/b.py"]
    assert "2 findings" in result.stderr


def test_baseline_reports_fixed_entries_and_refreshes(project):
    run("check", "--write-baseline", "base.json", "pkg", cwd=project)
    # Checking some files only (as pre-commit does): the others' entries are not "gone".
    result = run("check", "--baseline", "base.json", "pkg/a.py", cwd=project)
    assert result.returncode == 0 and "2 baselined in" in result.stderr and "gone" not in result.stderr
    (project / "pkg" / "b.py").write_text("x = 1\n")
    result = run("check", "--baseline", "base.json", "pkg", cwd=project)
    assert result.returncode == 0
    assert "2 baselined (1 baselined gone: refresh with --write-baseline)" in result.stderr
    run("check", "--write-baseline", "base.json", "pkg", cwd=project)
    assert len(json.loads((project / "base.json").read_text())["findings"]) == 2


def test_baseline_paths_are_relative_to_the_baseline_file(project):
    (project / "ci").mkdir()
    run("check", "--write-baseline", "ci/base.json", "pkg", cwd=project)
    paths = {entry["path"] for entry in json.loads((project / "ci" / "base.json").read_text())["findings"]}
    assert paths == {"../pkg/a.py", "../pkg/b.py"}
    # Run from another folder, naming the files differently: the same findings match.
    result = run("check", "--baseline", "../ci/base.json", ".", cwd=project / "pkg")
    assert result.returncode == 0, result.stdout
    result = run("check", "--baseline", str(project / "ci" / "base.json"), str(project / "pkg"), cwd=project.parent)
    assert result.returncode == 0, result.stdout


def test_baseline_with_json_output_reports_only_new(project):
    run("check", "--write-baseline", "base.json", "pkg/a.py", cwd=project)
    result = run("check", "--baseline", "base.json", "--output-format", "json", "pkg", cwd=project)
    assert result.returncode == 1
    assert [d["filename"] for d in json.loads(result.stdout)] == ["pkg/b.py"]


def test_files_that_cannot_be_checked_are_never_baselined(project):
    (project / "pkg" / "latin.py").write_bytes(b"s = '\xff'\n")
    result = run("check", "--write-baseline", "base.json", "pkg", cwd=project)
    assert result.returncode == 2
    assert findings(result) and all(": GPU002 " in line for line in findings(result))
    assert all(entry["code"] == "GPU010" for entry in json.loads((project / "base.json").read_text())["findings"])
    assert run("check", "--baseline", "base.json", "pkg", cwd=project).returncode == 2


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "no such file"),
        ("{", "invalid JSON at line"),
        ("[]", "no `sync-lint-baseline` key"),
        ('{"sync-lint-baseline": 7, "findings": []}', "unsupported baseline version 7"),
        ('{"sync-lint-baseline": 1, "findings": {}}', "`findings` must be a list"),
        ('{"sync-lint-baseline": 1, "findings": [{"path": "a.py", "code": 3}]}', "invalid entry 1"),
        ('{"sync-lint-baseline": 1, "findings": [{"path": "a", "code": "G", "source": "", "count": 0}]}',
         "invalid entry 1"),
        (b"\xff\xfe", "not UTF-8"),
        ("folder", "cannot read"),
    ],
)
def test_bad_baseline_files_are_one_line_errors(project, content, fragment):
    target = project / "base.json"
    if content == "folder":
        target.mkdir()
    elif isinstance(content, bytes):
        target.write_bytes(content)
    elif content is not None:
        target.write_text(content)
    result = run("check", "--baseline", "base.json", "pkg", cwd=project)
    assert_one_line_error(result, "--baseline base.json: ", fragment)


def test_unwritable_baseline_and_conflicting_flags(project):
    result = run("check", "--write-baseline", "missing/dir/base.json", "pkg", cwd=project)
    assert_one_line_error(result, "--write-baseline missing/dir/base.json: cannot write")
    result = run("check", "--baseline", "a.json", "--write-baseline", "b.json", "pkg", cwd=project)
    assert result.returncode == 2 and "not allowed with argument" in result.stderr
    result = run("check", "--write-baseline", "b.json", "--add-noqa", "pkg", cwd=project)
    assert_one_line_error(result, "--write-baseline and --add-noqa")


def test_baseline_matches_a_rule_finding_after_unrelated_edits(tmp_path):
    code, source, lines = rule_example()
    module = tmp_path / "engine.py"
    module.write_text(source)
    first = run("check", "--select", code, "engine.py", cwd=tmp_path)
    assert first.returncode == 1 and len(findings(first)) == len(lines)
    assert run("check", "--select", code, "--write-baseline", "b.json", "engine.py", cwd=tmp_path).returncode == 0
    module.write_text('"""Module docstring."""\n\n' + source + "\n\ndef unrelated():\n    return 1\n")
    assert run("check", "--select", code, "--baseline", "b.json", "engine.py", cwd=tmp_path).returncode == 0


def test_baseline_of_a_hot_path_sync(tmp_path):
    from sync_lint.rules import rule_by_code

    if rule_by_code("GPU201") is None:
        pytest.skip("GPU201 is not registered yet")
    builder = tmp_path / "attn.py"
    builder.write_text(
        "import torch\n\n\nclass FooMetadataBuilder:\n"
        "    def build(self, seq_lens: torch.Tensor):\n"
        "        max_len = seq_lens.max().item()\n"
        "        return max_len\n"
    )
    assert run("check", "attn.py", cwd=tmp_path).returncode == 1
    assert run("check", "--write-baseline", "b.json", "attn.py", cwd=tmp_path).returncode == 0
    [entry] = json.loads((tmp_path / "b.json").read_text())["findings"]
    assert entry == {"path": "attn.py", "code": "GPU201", "source": "max_len = seq_lens.max().item()", "count": 1}
    # A new method above it, and the finding moved down and re-indented: still known.
    builder.write_text(
        "import torch\n\n\nclass FooMetadataBuilder:\n"
        "    def __init__(self):\n        self.n = 0\n\n"
        "    def build(self, seq_lens: torch.Tensor):\n"
        "        if True:\n"
        "            max_len = seq_lens.max().item()\n"
        "        return max_len\n"
    )
    assert run("check", "--baseline", "b.json", "attn.py", cwd=tmp_path).returncode == 0
    # A new sync in the same builder is reported, alone.
    builder.write_text(builder.read_text() + "\n    def _build_decode(self, t: torch.Tensor):\n        return t.sum().item()\n")
    result = run("check", "--baseline", "b.json", "attn.py", cwd=tmp_path)
    assert result.returncode == 1
    [line] = findings(result)
    assert line.startswith("attn.py:14:") and ": GPU201 " in line


# -- add-noqa --------------------------------------------------------------------------------------
def diag(line: int, code: str) -> Diagnostic:
    return Diagnostic("m.py", line, 1, line, 2, code, "message")


def test_add_noqa_placement():
    text = (
        "def f(a):\n"                       # 1
        "    x = g(a,  # noqa: E501\n"      # 2
        "          b)\n"                    # 3
        '    s = h(a, """\n'                # 4: a string runs on to line 6
        "  text\n"                          # 5
        '""")\n'                            # 6
        "    y = a + \\\n"                  # 7: backslash continuation
        "        b  # trailing comment\n"   # 8
        "    z = 1  # noqa\n"               # 9: bare noqa: nothing to add
    )
    found = [diag(1, "GPU201"), diag(2, "GPU202"), diag(2, "GPU201"), diag(3, "GPU101"),
             diag(5, "GPU201"), diag(7, "GPU102"), diag(9, "GPU201"), diag(2, "GPU010")]
    new, added = add_noqa_text(text, found)
    assert new.splitlines() == [
        "def f(a):  # noqa: GPU201",
        "    x = g(a,  # noqa: E501, GPU201, GPU202",
        "          b)  # noqa: GPU101",
        '    s = h(a, """',
        "  text",
        '""")  # noqa: GPU201',
        "    y = a + \\",
        "        b  # trailing comment  # noqa: GPU102",
        "    z = 1  # noqa",
    ]
    assert added == 6
    check_result(new, found)
    # Adding again changes nothing.
    assert add_noqa_text(new, found) == (new, 0)


def test_add_noqa_spans_are_flake8s():
    # flake8 joins lines only across multi-line tokens and backslashes, not brackets.
    spans = comment_spans('a = (1,\n     2)\nb = """x\ny"""\nc = 1 + \\\n    2\n')
    assert spans == {1: (1, 1), 2: (2, 2), 3: (3, 4), 4: (3, 4), 5: (5, 6), 6: (5, 6)}


def test_add_noqa_suppresses_for_flake8_too(tmp_path):
    # The flake8 plugin leaves noqa to flake8, so the comments must work there as well. E501
    # (line too long) stands in for our codes: one long line inside a triple-quoted string, one
    # on the first line of a bracketed statement.
    long = "word " * 18
    text = f's = print("""\n{long}\n""")\nt = ("{long}",\n     1)\n'

    def flake8(source: str) -> str:
        (tmp_path / "m.py").write_text(source)
        return subprocess.run(
            [sys.executable, "-m", "flake8", "--select", "E501", "m.py"], check=False, cwd=tmp_path, capture_output=True, text=True
        ).stdout

    assert [line.split(": ")[0] for line in flake8(text).splitlines()] == ["m.py:2:80", "m.py:4:80"]
    new, _ = add_noqa_text(text, [diag(2, "E501"), diag(4, "E501")])
    assert new == f's = print("""\n{long}\n""")  # noqa: E501\nt = ("{long}",  # noqa: E501\n     1)\n'
    assert flake8(new) == ""
    # At the end of the bracketed statement instead, flake8 would not see it (why it goes on the line).
    assert flake8(f's = 1\nt = ("{long}",\n     1)  # noqa: E501\n') != ""


def test_add_noqa_on_a_real_finding_then_check_is_clean(tmp_path):
    code, source, lines = rule_example()
    (tmp_path / "engine.py").write_text(source)
    result = run("check", "--select", code, "--add-noqa", "engine.py", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"added {len(lines)} noqa code" in result.stderr
    fixed = (tmp_path / "engine.py").read_text()
    for line in lines:
        assert f"# noqa: {code}" in fixed.splitlines()[line - 1]
    assert run("check", "--select", code, "engine.py", cwd=tmp_path).returncode == 0
    # Running it again adds nothing.
    again = run("check", "--select", code, "--add-noqa", "engine.py", cwd=tmp_path)
    assert "added 0 noqa codes in 0 files" in again.stderr
    assert (tmp_path / "engine.py").read_text() == fixed


def test_add_noqa_leaves_unused_noqa_and_unreadable_files_alone(project):
    before = (project / "pkg" / "b.py").read_text()
    (project / "pkg" / "latin.py").write_bytes(b"s = '\xff'\n")
    result = run("check", "--add-noqa", "pkg", cwd=project)
    assert result.returncode == 2  # the undecodable file is reported
    assert [line.split(": ")[1].split()[0] for line in findings(result)] == ["GPU002"]
    assert (project / "pkg" / "b.py").read_text() == before


# -- long runs ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def many_files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("many")
    for i in range(220):
        (root / f"m{i:03d}.py").write_text(UNUSED_NOQA if i % 50 == 0 else f"v = {i}\n")
    return root


SUMMARY = re.compile(r"^sync-lint: 220 files checked, 5 findings \(5 fixable\) in \d+\.\d\ds$")


def test_no_progress_bar_when_stderr_is_not_a_terminal(many_files):
    result = run("check", "--no-cache", ".", cwd=many_files)
    assert result.returncode == 1
    assert len(findings(result)) == 5
    # stderr holds the summary line and nothing else: no bar, no carriage returns.
    assert "\r" not in result.stderr and "#" not in result.stderr
    [summary] = result.stderr.splitlines()
    assert SUMMARY.match(summary), summary
    assert run("check", "--no-cache", "-q", ".", cwd=many_files).stderr == ""


def test_progress_bar_on_a_terminal(many_files):
    controller, terminal = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "sync_lint", "check", "--no-cache", "."], check=False,
            cwd=many_files, stdout=subprocess.PIPE, stderr=terminal, timeout=300,
        )
        os.close(terminal)
        terminal = -1
        chunks = []
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if terminal >= 0:
            os.close(terminal)
        os.close(controller)
    shown = b"".join(chunks).decode()
    assert result.returncode == 1
    assert "220/220 files" in shown and "\r" in shown
    assert SUMMARY.match(shown.rstrip().split("\r")[-1].strip().splitlines()[-1])
