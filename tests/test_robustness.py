"""Hostile inputs through the real command line, in a subprocess.

Every case puts a hostile file next to a normal one with a known finding (an unused
``# noqa: GPU001`` gives GPU010) and requires: a one-line diagnostic naming the hostile file (and
line where it applies), the right exit status (0 clean, 1 findings, 2 tool error), no traceback,
the normal file still reported, and nothing lost (fix leaves unfixable files byte-identical and
keeps the encoding and line endings of the files it fixes).

The engine skips the parse of a file that no rule's trigger occurs in, so that which hostile
files get parsed would depend on the rules that happen to exist. To make these tests independent
of the GPU rules, the CLI runs with one extra *probe* rule (GPU990, written to a temporary
folder): it triggers on ``.item()``, flags module-level ``x = t.item()`` without walking the tree
(so that deep nesting elsewhere reaches the engine's own passes), raises on ``PROBE_CRASH``, and
offers a fix that does not parse on ``t.probe_bad_fix()``. The real rules run too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import sync_lint.cli
import sync_lint.pipeline.fix

NORMAL = "x = 1  # noqa: GPU001\n"  # GPU010 at 1:8, safely fixable
NORMAL_FINDING = "normal.py:1:8: GPU010"
TRIGGER = "y = t.item()\n"  # a GPU990 probe finding at column 5

PROBE_RULES = '''
import libcst as cst
from sync_lint.fixes import make_fix
from sync_lint.rules.base import Finding, Rule


def _top_level_calls(module):
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                value = getattr(small, "value", None)
                if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
                    if value.func.attr.value in ("item", "probe_bad_fix"):
                        yield value


class ProbeItem(Rule):
    code = "GPU990"
    name = "probe-item-call"
    summary = "Probe rule of the robustness tests."
    what = why = example = fix_safety = "Test probe."
    fix_applicability = "unsafe"
    triggers = (".item()", ".probe_bad_fix(", "PROBE_CRASH")

    def check(self, ctx):
        if "PROBE_CRASH" in ctx.source.text:
            raise ValueError("probe crash")
        for node in _top_level_calls(ctx.module):
            if node.func.attr.value == "probe_bad_fix":
                yield Finding(node, "probe: bad fix", fix=lambda e, n=node: make_fix("break", "unsafe", e.replace(n, "(((")))
            else:
                yield Finding(node, "probe: .item() call")
'''

CLI = (
    "import sys\n"
    "sys.path.insert(0, sys.argv.pop(1))\n"
    "import sync_lint.rules as registry\n"
    "registry.RULE_MODULES = registry.RULE_MODULES + ('sync_lint_probe_rules',)\n"
    "from sync_lint.cli import main\n"
    "sys.exit(main())\n"
)


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("probe")
    (folder / "sync_lint_probe_rules.py").write_text(PROBE_RULES)
    return folder


@pytest.fixture
def run(probe_dir):
    def run(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", CLI, str(probe_dir), *args, "--isolated", "--no-cache"], check=False,
            cwd=cwd, capture_output=True, timeout=timeout,
        )

    return run


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "normal.py").write_text(NORMAL)
    return tmp_path


def out(result) -> str:
    return result.stdout.decode("utf-8", "replace")


def err(result) -> str:
    return result.stderr.decode("utf-8", "replace")


def assert_clean_run(result, status: int) -> None:
    assert "Traceback" not in err(result) + out(result), err(result)[-3000:]
    assert result.returncode == status, (result.returncode, out(result), err(result)[-2000:])


def lines_about(result, name: str) -> list[str]:
    return [line for line in out(result).splitlines() if line.startswith(name + ":")]


def assert_one_diagnostic(result, name: str, code: str, line: int | None = None) -> str:
    about = [entry for entry in lines_about(result, name) if f" {code}" in entry]
    assert len(about) == 1, out(result)
    match = re.match(rf"{re.escape(name)}:(\d+):(\d+): {code} \S", about[0])
    assert match, about[0]
    if line is not None:
        assert int(match.group(1)) == line, about[0]
    return about[0]


def assert_normal_still_checked(result) -> None:
    assert any(line.startswith(NORMAL_FINDING) for line in out(result).splitlines()), out(result)


# -- the probe works (otherwise every test below would be vacuous) --------------------------------
def test_probe_rule_is_active(run, project):
    (project / "hot.py").write_text("import torch\n" + TRIGGER)
    result = run("check", ".", cwd=project)
    assert_clean_run(result, 1)
    assert_one_diagnostic(result, "hot.py", "GPU990", line=2)
    assert_normal_still_checked(result)


def test_plain_module_entry_point_agrees_on_a_normal_file(project):
    result = subprocess.run(
        [sys.executable, "-m", "sync_lint", "check", ".", "--isolated", "--no-cache"], check=False,
        cwd=project, capture_output=True, timeout=60,
    )
    assert_clean_run(result, 1)
    assert_normal_still_checked(result)


def test_module_entry_point_in_a_project_that_shadows_the_standard_library(project):
    # `python -m` puts the working directory first on sys.path: torch's own source tree has a
    # top-level `random.py` and `signal/`, which the standard library's `tempfile` and
    # `subprocess` would have imported instead of their own.
    shadow = "raise ImportError('the checked project shadowed the standard library')\n"
    (project / "random.py").write_text(shadow)
    (project / "signal").mkdir()
    (project / "signal" / "__init__.py").write_text(shadow)
    result = subprocess.run(
        [sys.executable, "-m", "sync_lint", "check", ".", "--isolated", "--no-cache"], check=False,
        cwd=project, capture_output=True, timeout=60,
    )
    assert_clean_run(result, 1)
    assert_normal_still_checked(result)


# -- unparsable input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (b"import torch\n" + TRIGGER.encode() + b"x = = 1\n", 3),
        # In a function the pre-filter keeps (it holds a trigger). A broken function with no
        # trigger is masked, so never parsed: sync-lint reports syntax errors only in code it
        # reads (ruff and flake8 report all of them).
        pytest.param(b"import torch\n" + TRIGGER.encode() + b"def f(:\n    y = t.item()\n", 3),
        pytest.param(b"y = t.item()\nx = 1\x00\n", 2),
        pytest.param(b"y = t.item()\nclass A:\n    def f(self):\n  return 1\n", 4),
    ],
    ids=["syntax-error", "syntax-error-in-def", "null-byte", "bad-dedent"],
)
def test_unparsable_file_is_gpu001_with_its_line(run, project, content, line):
    (project / "broken.py").write_bytes(content)
    result = run("check", ".", cwd=project)
    assert_clean_run(result, 1)  # a syntax error is a finding, as in ruff and flake8
    assert_one_diagnostic(result, "broken.py", "GPU001", line=line)
    assert_normal_still_checked(result)


def test_syntax_error_in_code_no_rule_reads_is_left_to_ruff_and_flake8(run, project):
    # GPU001's documented scope: a file holding none of the rules' trigger words is not parsed.
    (project / "broken.py").write_bytes(b"def f(:\n    pass\n")
    result = run("check", ".", cwd=project)
    assert_clean_run(result, 1)  # the normal file's finding
    assert "broken.py" not in out(result)
    assert_normal_still_checked(result)


def test_fix_leaves_an_unparsable_file_byte_identical(run, project):
    content = b"y = t.item()  # noqa: GPU001\ndef f(:\n"
    (project / "broken.py").write_bytes(content)
    result = run("fix", ".", "--unsafe-fixes", cwd=project)
    assert "Traceback" not in err(result)
    assert result.returncode in (1, 2)
    assert (project / "broken.py").read_bytes() == content
    assert (project / "normal.py").read_text() == "x = 1\n"  # the normal file is still fixed


# -- size and depth ---------------------------------------------------------------------------------
def test_fifty_thousand_line_file(run, project):
    body = "".join(f"def f{i}(x):\n    y = x + {i}\n    return y\n\n" for i in range(12_500))
    text = "# probe trigger: .item()\n" + body + "z = 1  # noqa: GPU001\n"
    assert text.count("\n") > 50_000
    (project / "big.py").write_text(text)
    result = run("check", ".", cwd=project, timeout=120)
    assert_clean_run(result, 1)
    assert_one_diagnostic(result, "big.py", "GPU010", line=text.count("\n"))
    assert_normal_still_checked(result)


def _deep_parens(n: int) -> str:
    return TRIGGER + "z = " + "(" * n + "1" + ")" * n + "\n"


def _deep_ifs(n: int) -> str:
    return TRIGGER + "".join("    " * i + "if z:\n" for i in range(n)) + "    " * n + "pass\n"


def _long_chain(n: int) -> str:
    return TRIGGER + "z = a" + ".b" * n + "\n"


def _deep_calls(n: int) -> str:
    return TRIGGER + "z = " + "f(" * n + ")" * n + "\n"


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: _deep_parens(1000), id="1000-parentheses"),
        pytest.param(lambda: _deep_ifs(99), id="99-nested-ifs"),
        pytest.param(
            lambda: _long_chain(500),
            id="attribute-chain-500",
        ),
        pytest.param(
            lambda: _deep_calls(150),
            id="nested-calls-150",
        ),
    ],
)
def test_deep_nesting_ends_in_a_diagnostic_not_a_crash(run, project, make):
    (project / "deep.py").write_text(make())
    result = run("check", ".", cwd=project)
    assert "Traceback" not in err(result), err(result)[-1500:]
    assert result.returncode in (1, 2), (result.returncode, err(result)[-800:])
    about = lines_about(result, "deep.py")
    assert about, out(result)
    # either the finding on line 1, or one line saying why the file was not (fully) checked
    assert any(re.match(r"deep\.py:1:5: GPU990 ", line) for line in about) or any(
        re.match(r"deep\.py:\d+:\d+: GPU00[14] ", line) for line in about
    ), about
    assert_normal_still_checked(result)


def test_ten_thousand_term_binary_expression(run, project):
    (project / "long.py").write_text(TRIGGER + "z = " + " + ".join(["a"] * 10_000) + "\n")
    try:
        result = run("check", ".", cwd=project, timeout=8)
    except subprocess.TimeoutExpired:
        pytest.fail("no answer within 8 s (libcst parse of one line)")
    assert_clean_run(result, 2 if "GPU004" in out(result) else 1)
    assert lines_about(result, "long.py")
    assert_normal_still_checked(result)


# -- encodings and line endings -----------------------------------------------------------------
def test_non_utf8_bytes_are_gpu002_with_line_and_exit_2(run, project):
    content = b"import torch\n\nname = 'caf\xe9'\n"
    (project / "latin.py").write_bytes(content)
    result = run("check", ".", cwd=project)
    assert_clean_run(result, 2)
    line = assert_one_diagnostic(result, "latin.py", "GPU002", line=3)
    assert "0xe9" in line
    assert_normal_still_checked(result)
    fixed = run("fix", ".", cwd=project)
    assert_clean_run(fixed, 2)
    assert (project / "latin.py").read_bytes() == content


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("bom.py", b"\xef\xbb\xbfa = 1\nx = 1  # noqa: GPU001\ny = t.item()\n", b"\xef\xbb\xbfa = 1\nx = 1\ny = t.item()\n"),
        (
            "latin1.py",
            "# -*- coding: latin-1 -*-\ns = 'café'  # noqa: GPU001\ny = t.item()\n".encode("latin-1"),
            "# -*- coding: latin-1 -*-\ns = 'café'\ny = t.item()\n".encode("latin-1"),
        ),
        ("crlf.py", b"a = 1\r\nx = 1  # noqa: GPU001\r\ny = t.item()\r\n", b"a = 1\r\nx = 1\r\ny = t.item()\r\n"),
        ("mixed.py", b"a = 1\nx = 1  # noqa: GPU001\r\ny = t.item()\rb = 2\n", b"a = 1\nx = 1\r\ny = t.item()\rb = 2\n"),
    ],
    ids=["bom", "latin-1", "crlf", "mixed-endings"],
)
def test_encodings_and_line_endings_are_checked_and_kept_by_fix(run, project, name, raw, expected):
    (project / name).write_bytes(raw)
    result = run("check", ".", cwd=project)
    assert_clean_run(result, 1)
    assert_one_diagnostic(result, name, "GPU010", line=2)
    assert_one_diagnostic(result, name, "GPU990", line=3)  # columns and lines right after the odd bytes
    assert_normal_still_checked(result)
    fixed = run("fix", ".", cwd=project)  # safe fixes only: GPU010
    assert_clean_run(fixed, 1)  # GPU990 remains
    assert (project / name).read_bytes() == expected


def test_fix_diff_of_a_file_without_final_newline_is_a_valid_patch(run, project):
    (project / "normal.py").write_text("a = 1\n")
    (project / "tail.py").write_bytes(b"a = 1\nx = 1  # noqa: GPU001")
    (project / "zz.py").write_bytes(b"x = 1  # noqa: GPU001\n")
    result = run("fix", ".", "--diff", cwd=project)
    assert_clean_run(result, 1)
    diff = out(result)
    # every file header starts its own line
    assert re.findall(r"^\+\+\+ b/(\S+)$", diff, re.MULTILINE) == ["tail.py", "zz.py"], diff
    assert "\\ No newline at end of file" in diff, diff


# -- files that cannot be read ------------------------------------------------------------------------
def test_unreadable_file_is_gpu003_and_exit_2(run, project):
    target = project / "secret.py"
    target.write_text(TRIGGER)
    target.chmod(0)
    try:
        try:
            with open(target, "rb"):
                pytest.skip("running as root: chmod 000 does not stop reading (see the in-process test below)")
        except PermissionError:
            pass
        result = run("check", ".", cwd=project)
        assert_clean_run(result, 2)
        assert "Permission denied" in assert_one_diagnostic(result, "secret.py", "GPU003", line=1)
        assert_normal_still_checked(result)
    finally:
        target.chmod(0o644)


def test_unreadable_file_in_process(project, monkeypatch, capsys):
    """The same as above without relying on permissions (tests may run as root)."""
    (project / "secret.py").write_text(TRIGGER)
    import sync_lint.pipeline.source as source_stage

    real_read = source_stage.read_bytes

    def guarded_read(path):
        if os.path.basename(str(path)) == "secret.py":
            raise PermissionError(13, "Permission denied", str(path))
        return real_read(path)

    monkeypatch.setattr(source_stage, "read_bytes", guarded_read)
    monkeypatch.chdir(project)
    status = sync_lint.cli.main(["check", ".", "--isolated", "--no-cache", "--jobs", "1"])
    printed = capsys.readouterr()
    assert status == 2, printed
    assert re.search(r"^secret\.py:1:1: GPU003 cannot read file: Permission denied$", printed.out, re.MULTILINE), printed.out
    assert NORMAL_FINDING in printed.out


def test_broken_symlink_is_gpu003(run, project):
    os.symlink(project / "missing.py", project / "dangling.py")
    result = run("check", ".", cwd=project)
    assert_clean_run(result, 2)
    assert_one_diagnostic(result, "dangling.py", "GPU003", line=1)
    assert_normal_still_checked(result)


def test_symlink_loop_is_gpu003_not_a_traceback(run, project):
    os.symlink(project / "loop_b.py", project / "loop_a.py")
    os.symlink(project / "loop_a.py", project / "loop_b.py")
    result = run("check", ".", cwd=project)
    assert_clean_run(result, 2)
    assert_one_diagnostic(result, "loop_a.py", "GPU003", line=1)
    assert_normal_still_checked(result)


def test_a_symlink_loop_named_first_is_gpu003_where_the_settings_are_looked_for(probe_dir, project):
    """Without ``--isolated`` the settings are looked for from the first path named: a symlink
    loop there is reported like any unreadable file, and the file named after it is checked."""
    os.symlink(project / "loop_b.py", project / "loop_a.py")
    os.symlink(project / "loop_a.py", project / "loop_b.py")
    (project / "pyproject.toml").write_text('[tool.sync-lint]\nignore = ["GPU203"]\n')
    result = subprocess.run(
        [sys.executable, "-c", CLI, str(probe_dir), "check", "loop_a.py", "normal.py", "--no-cache"],
        check=False, cwd=project, capture_output=True, timeout=60,
    )
    assert_clean_run(result, 2)
    assert_one_diagnostic(result, "loop_a.py", "GPU003", line=1)
    assert_normal_still_checked(result)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_like_a_module_is_gpu003_not_a_run_that_never_ends(probe_dir, project):
    """A read of a FIFO waits for a writer for ever: found in a folder or named, with the cache
    or without, it is reported as no regular file, and the rest is checked."""
    os.mkfifo(project / "pipe.py")
    for named in (".", "pipe.py"):
        for caching in (["--no-cache"], ["--cache-dir", str(project / "cache")]):
            result = subprocess.run(
                [sys.executable, "-c", CLI, str(probe_dir), "check", named, "normal.py", "--isolated", *caching],
                check=False, cwd=project, capture_output=True, timeout=30,
            )
            assert_clean_run(result, 2)
            assert "not a regular file" in assert_one_diagnostic(result, "pipe.py", "GPU003", line=1)
            assert_normal_still_checked(result)


def test_symlink_loop_of_folders_terminates(run, project):
    (project / "pkg").mkdir()
    (project / "pkg" / "mod.py").write_text(NORMAL)
    os.symlink(project, project / "pkg" / "back")
    result = run("check", ".", cwd=project, timeout=60)
    assert_clean_run(result, 1)
    assert len(lines_about(result, "pkg/mod.py")) == 1
    assert_normal_still_checked(result)


# -- rules and fixes that fail ------------------------------------------------------------------
def test_internal_error_is_gpu004_exit_2_and_others_checked(run, project):
    (project / "crash.py").write_text("PROBE_CRASH = 1\n")
    result = run("check", ".", cwd=project)
    assert_clean_run(result, 2)
    line = assert_one_diagnostic(result, "crash.py", "GPU004", line=1)
    assert "GPU990" in line and "probe crash" in line
    assert_normal_still_checked(result)


def test_fix_that_would_not_parse_is_gpu005_and_not_written(run, project):
    content = b"y = t.probe_bad_fix()\nx = 1  # noqa: GPU001\n"
    (project / "badfix.py").write_bytes(content)
    result = run("fix", ".", "--unsafe-fixes", cwd=project)
    assert_clean_run(result, 2)
    assert_one_diagnostic(result, "badfix.py", "GPU005")
    assert (project / "badfix.py").read_bytes() == content
    assert (project / "normal.py").read_text() == "x = 1\n"


def test_file_changed_while_being_fixed_is_not_overwritten(project, monkeypatch, capsys):
    target = project / "moving.py"
    target.write_text(NORMAL)
    original_fix_source = sync_lint.pipeline.fix.fix_source
    edited = "x = 2  # edited by someone else meanwhile\n"

    def racing_fix_source(linter, source, index, unsafe):
        outcome = original_fix_source(linter, source, index, unsafe)
        if source.path.endswith("moving.py"):
            target.write_text(edited)
        return outcome

    monkeypatch.setattr(sync_lint.pipeline.fix, "fix_source", racing_fix_source)
    monkeypatch.chdir(project)
    status = sync_lint.cli.main(["fix", ".", "--isolated", "--no-cache", "--jobs", "1"])
    printed = capsys.readouterr()
    assert status == 2, printed
    assert re.search(r"^moving\.py:\d+:\d+: GPU005 fix not written: the file changed", printed.out, re.MULTILINE), printed.out
    assert target.read_text() == edited
    assert (project / "normal.py").read_text() == "x = 1\n"
    assert "Traceback" not in printed.err


def test_read_only_file_for_fix(run, project):
    target = project / "frozen.py"
    target.write_text(NORMAL)
    target.chmod(0o444)
    try:
        result = run("fix", ".", cwd=project)
        assert "Traceback" not in err(result)
        if os.geteuid() == 0:
            # root may write it (os.access says so): the fix is written and the mode kept
            assert result.returncode == 0, out(result)
            assert target.read_text() == "x = 1\n"
        else:
            assert result.returncode == 2, out(result)
            assert "read-only" in assert_one_diagnostic(result, "frozen.py", "GPU005")
            assert target.read_text() == NORMAL
        assert (target.stat().st_mode & 0o777) == 0o444
        assert (project / "normal.py").read_text() == "x = 1\n"
    finally:
        target.chmod(0o644)


# -- nothing to check ---------------------------------------------------------------------------
@pytest.mark.parametrize("content", ["", "# only a comment\n# and another\n", "\n\n\n", '"""A docstring."""\n'])
def test_empty_and_comment_only_files(run, project, content):
    (project / "quiet.py").write_text(content)
    result = run("check", "quiet.py", cwd=project)
    assert_clean_run(result, 0)
    assert out(result) == ""
    result = run("check", ".", cwd=project)
    assert_clean_run(result, 1)
    assert not lines_about(result, "quiet.py")
    assert_normal_still_checked(result)


def test_folder_without_python_files_is_exit_0(run, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("# nothing here\n")
    (tmp_path / "docs" / "script.sh").write_text(textwrap.dedent("echo hi\n"))
    result = run("check", "docs", cwd=tmp_path)
    assert_clean_run(result, 0)
    assert out(result) == ""
