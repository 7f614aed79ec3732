"""Reading files as Python does, and flake8's noqa syntax."""

from __future__ import annotations

import pytest

from sync_lint.pipeline.source import LineIndex, SourceError, decode, split_lines
from sync_lint.pipeline.suppress import Suppressions, scan


def test_utf8_bom_is_dropped_from_text_and_restored_on_encode():
    source = decode("a.py", b"\xef\xbb\xbfx = 1\n")
    assert source.text == "x = 1\n"
    assert source.encode(source.text).startswith(b"\xef\xbb\xbf")


def test_pep263_coding_line_is_honoured():
    raw = "# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n".encode("latin-1")
    source = decode("a.py", raw)
    assert "café" in source.text
    assert source.encode(source.text) == raw


@pytest.mark.parametrize(
    ("raw", "line"),
    [(b"x = 1\ny = '\xff'\n", 2), (b"\xff\xfe = 1\n", 1), (b"# coding: no-such-codec\nx = 1\n", 1)],
)
def test_undecodable_bytes_are_reported_with_their_line(raw, line):
    with pytest.raises(SourceError) as error:
        decode("a.py", raw)
    assert error.value.code == "GPU002"
    assert error.value.line == line


def test_line_index_handles_crlf_and_lone_cr_like_the_tokenizer():
    text = "a = 1\r\nb = 2\rc = 3\n\x0cd = 4\n"
    index = LineIndex(text)
    assert index.line_text(2) == "b = 2"
    assert index.line_text(4) == "\x0cd = 4"  # a form feed is not a line break for Python
    assert index.position(index.offset(3, 2)) == (3, 2)
    assert "".join(split_lines(text)) == text and len(split_lines(text)) == 4
    # without such characters ``str.splitlines`` does the split: the same lines
    assert split_lines("a = 1\r\nb = 2\rc = 3\n\nd") == ["a = 1\r\n", "b = 2\r", "c = 3\n", "\n", "d"]
    assert split_lines("x = '\u2028'\ny\n") == ["x = '\u2028'\n", "y\n"]


@pytest.mark.parametrize(
    ("comment", "codes"),
    [
        ("# noqa", None),
        ("# NOQA", None),
        ("#noqa:GPU201", ("GPU201",)),
        ("# noqa: GPU201,GPU202", ("GPU201", "GPU202")),
        ("# noqa: GPU201 GPU202", ("GPU201", "GPU202")),
        ("# noqa:GPU201, E501", ("GPU201", "E501")),
        # flake8: without the colon the codes are not codes, so this is a bare noqa.
        ("# noqa GPU201", None),
    ],
)
def test_noqa_forms_parse_as_flake8_does(comment, codes):
    suppressions = scan(f"x = 1  {comment}\n")
    assert len(suppressions.comments) == 1
    assert suppressions.comments[0].codes == codes


def test_noqa_inside_a_string_is_not_a_comment():
    assert scan("x = '# noqa: GPU201'\n").comments == ()


def test_noqa_on_a_multiline_statement_covers_all_its_lines():
    suppressions = scan("value = f(\n    a,\n    b,\n)  # noqa: GPU201\nnext_line = 1\n")
    (comment,) = suppressions.comments
    assert (comment.first_line, comment.last_line) == (1, 4)


def test_file_level_noqa():
    assert scan("# sync-lint: noqa\nx = 1\n").file_is_off()
    codes = scan("# sync-lint: noqa: GPU201, GPU202\nx = 1\n")
    assert not codes.file_is_off() and codes.file_codes == ("GPU201", "GPU202")
    # Not on a line of its own: an ordinary comment.
    assert not scan("x = 1  # sync-lint: noqa\n").file_is_off()


def test_noqa_comments_for_other_tools_are_read_when_a_file_has_findings():
    # Such files are tokenized for noqa comments only once they have a finding: a bare noqa
    # must still suppress it, and another tool's code must not.
    from sync_lint.api import lint_text

    source = (
        "class FlashMetadataBuilder:\n"
        "    def build(self, common):\n"
        "        n = common.seq_lens.tolist(){first}\n"
        "        m = common.query_start_loc.item(){second}\n"
        "        return n, m\n"
    )
    plain = source.format(first="", second="")
    assert [(d.line, d.code) for d in lint_text(plain)] == [(3, "GPU201"), (4, "GPU201")]
    commented = source.format(first="  # noqa", second="  # noqa: E501")
    assert [(d.line, d.code) for d in lint_text(commented)] == [(4, "GPU201")]
    # A file with no finding still has its unused GPU noqa reported, not its other ones.
    clean = "x = 1  # noqa: E501\ny = 2  # noqa: GPU201\n"
    assert [(d.line, d.code) for d in lint_text(clean)] == [(2, "GPU010")]


_NOQA_SAMPLES = [
    "x = 1  # noqa: E501\ny = 2  # noqa:F401,E402\n",  # other tools only: nothing to read
    "x = 1  # noqa\n",  # bare
    "x = 1  # NOQA: e501\ny = 2  # noqa: gpu201\n",  # ours, in lower case
    "x = f(\n    1,\n)  # noqa: E501\nz = 3  # noqa:GPU2\n",  # a prefix of ours
    "x = 1  # noqa:\nE501 = 2\n",  # bare (the codes on the next line are not its codes)
    "x = 1  # noqa:\n  GPU201 = 2\n",
    "s = '# noqa: E501'  # noqa\n",  # a string before the comment
    "s = '# noqa'  # noqa: E501\n",
    "x = 1  # see # noqa\n",
    "# sync-lint: noqa\nx = 1  # noqa: E501\n",  # the file-level switch
    "# SYNC-LINT: noqa: GPU2\nx = 1  # noqa: E501\n",
    "x = 1  # noqa: E501 GPU201\n",
    "x = (  # noqa: E501\n    1\n)\n",
    "def f(:\n    x = 1  # noqa: E501\n",  # not tokenizable: the physical-line fallback
    "x = 1  # noqa: E501\r\ny = 2  # noqa\r\n",
]


@pytest.mark.parametrize("text", _NOQA_SAMPLES)
def test_scan_for_ours_judges_every_finding_as_the_full_scan_does(text):
    # A finding of each of our codes on every line: suppressed, and GPU010 reported, the same
    # with what ``scan_for_ours`` reads as with every noqa comment of the file.
    from sync_lint.diagnostics import Diagnostic
    from sync_lint.pipeline.suppress import apply, scan_for_ours

    lines = text.count("\n") + 1
    findings = [
        Diagnostic(path="f.py", line=line, col=1, end_line=line, end_col=2, code=code, message="m")
        for line in range(1, lines + 1) for code in ("GPU201", "GPU102")
    ]  # fmt: skip
    judged = {"GPU201", "GPU102", "GPU010"}
    for subset in (findings, findings[::3], []):
        assert apply("f.py", subset, scan_for_ours(text), judged) == apply("f.py", subset, scan(text), judged)


def test_scan_for_ours_skips_files_whose_noqa_comments_name_other_tools_only():
    from sync_lint.pipeline.suppress import scan_for_ours

    assert scan_for_ours(_NOQA_SAMPLES[0]).comments == ()
    assert len(scan(_NOQA_SAMPLES[0]).comments) == 2
    for text in _NOQA_SAMPLES[1:4]:
        assert scan_for_ours(text) == scan(text) != Suppressions()


def test_scan_for_ours_on_every_fixture_and_own_file():
    # The same judgement on real files: each file's noqa comments, for findings on every line.
    from pathlib import Path

    from sync_lint.diagnostics import Diagnostic
    from sync_lint.pipeline.suppress import apply, scan_for_ours

    root = Path(__file__).resolve().parent.parent
    checked = 0
    for path in sorted([*root.glob("fixtures/**/*.py"), *root.glob("sync_lint/**/*.py"), *root.glob("tests/*.py")]):
        text = path.read_text(encoding="utf-8")
        if "noqa" not in text.lower():
            continue
        checked += 1
        findings = [
            Diagnostic(path="f.py", line=line, col=1, end_line=line, end_col=2, code="GPU201", message="m")
            for line in range(1, text.count("\n") + 2)
        ]
        judged = {"GPU201", "GPU010"}
        assert apply("f.py", findings, scan_for_ours(text), judged) == apply("f.py", findings, scan(text), judged), path
    assert checked > 20
