"""Reading files as Python does, and flake8's noqa syntax."""

from __future__ import annotations

import pytest

from sync_lint.pipeline.source import LineIndex, SourceError, decode, split_lines
from sync_lint.pipeline.suppress import scan


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
