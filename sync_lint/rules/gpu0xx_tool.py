"""GPU0xx: problems the tool itself reports about a file, rather than about GPU code."""

from sync_lint.rules.base import Rule


class SyntaxErrorRule(Rule):
    code = "GPU001"
    name = "syntax-error"
    summary = "The file does not parse as Python."
    what = (
        "A file that libcst cannot parse (a syntax error, a null byte), in code sync-lint reads: a file, or a "
        "function, that holds none of the rules' trigger words is skipped unparsed, and a syntax error there "
        "is left to ruff or flake8, which report every one."
    )
    why = "Nothing in the file can be checked; the other files still are."
    example = "def broken(:\n    pass"
    fix_safety = "No fix."
    tool_rule = True


class DecodeErrorRule(Rule):
    code = "GPU002"
    name = "decode-error"
    summary = "The file cannot be decoded with its declared encoding."
    what = "Bytes that are not valid in the file's encoding (UTF-8, or a PEP 263 coding line, or a BOM)."
    why = "Python itself would refuse to import the file; nothing in it can be checked. The run exits 2."
    example = "# a byte 0xff in a UTF-8 file"
    fix_safety = "No fix."
    tool_rule = True


class ReadErrorRule(Rule):
    code = "GPU003"
    name = "io-error"
    summary = "The file cannot be read."
    what = (
        "A file that cannot be opened or read (permissions, a broken link, a link loop), or that is no regular "
        "file (a FIFO or a device named `*.py`: a read of it could wait for ever)."
    )
    why = "Nothing in the file can be checked. The run exits 2."
    example = "chmod 000 model.py"
    fix_safety = "No fix."
    tool_rule = True


class InternalErrorRule(Rule):
    code = "GPU004"
    name = "internal-error"
    summary = "sync-lint failed on this file; please report it."
    what = "An unexpected error inside a rule or analysis while checking this file."
    why = "The file was not (fully) checked. The run exits 2 so that CI does not pass silently."
    example = "(none)"
    fix_safety = "No fix."
    tool_rule = True


class FixFailedRule(Rule):
    code = "GPU005"
    name = "fix-failed"
    summary = "A fix was not written because the result would not be valid, or the file changed meanwhile."
    what = "`sync-lint fix` produced code that does not re-parse, or the file changed on disk while it was fixed."
    why = "Writing it would lose or corrupt code, so the file is left untouched. The run exits 2."
    example = "(none)"
    fix_safety = "No fix."
    tool_rule = True


class UnusedNoqaRule(Rule):
    code = "GPU010"
    name = "unused-noqa"
    summary = "A `# noqa` names a sync-lint code that suppresses nothing on its line."
    what = "`# noqa: GPU...` codes of this tool that match no finding on the line (other tools' codes are ignored)."
    why = (
        "A stale suppression hides the next real finding on that line: the GPU-sync or layout bug it once "
        "excused is gone, and a new one would go unseen."
    )
    example = "x = 1  # noqa: GPU201"
    fix_safety = "Safe: removes only the unused sync-lint codes (or the whole comment if nothing is left)."
    fix_applicability = "safe"
    tool_rule = True
