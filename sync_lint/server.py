"""``sync-lint server``: a language server (LSP over stdin/stdout) for editors.

It lints each open document in memory, with the configuration of the project the file lives in,
on open, on every change and on save, and publishes the findings as diagnostics (code, message,
range, severity, a link to the rule's page). Each fix is offered as a quick fix, together with
"add a ``# noqa``" for the line; a ``source.fixAll.sync-lint`` action applies every safe fix.
Like the flake8 plugin it checks a file alone: a finding that rests on a function of another
file needs ``sync-lint check``, which reads beyond the files it is given; only whether a class is
an ``nn.Module`` by way of a base beside it, and the custom ops a finding rests on that a file
beside implements in Python, are read from disk, as a check of the one file alone does
(``Linter.lone_scope``, ``Linter.lint_source``).

Positions: the engine counts columns and offsets in code points; LSP counts UTF-16 code units
unless the client offers another encoding at initialisation, so every position is converted
with the negotiated encoding (a line with ``"é"`` or an emoji before a finding stays exact).

Initialisation options (all optional): ``{"select": [...], "ignore": [...], "unsafeFixes": true}``;
with ``unsafeFixes`` false, unsafe fixes are not offered (they are by default, marked unsafe).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from sync_lint import __version__, config
from sync_lint.codemods import DocumentLinter
from sync_lint.diagnostics import Diagnostic, Edit
from sync_lint.pipeline.source import LineIndex

FIX_ALL_KIND = "source.fixAll.sync-lint"
SOURCE = "sync-lint"

logger = logging.getLogger(__name__)


class Positions:
    """Engine positions (1-based lines, code-point columns, offsets) -> LSP positions."""

    def __init__(self, text: str, encoding: str) -> None:
        self.lines = LineIndex(text)
        self.encoding = str(getattr(encoding, "value", encoding) or "utf-16").lower()

    def _units(self, prefix: str) -> int:
        if self.encoding == "utf-8":
            return len(prefix.encode("utf-8", "surrogatepass"))
        if self.encoding == "utf-32":
            return len(prefix)
        return len(prefix.encode("utf-16-le", "surrogatepass")) // 2

    def at(self, line: int, col: int) -> types.Position:
        """``line`` 1-based, ``col`` 0-based in code points."""
        line = max(1, min(line, len(self.lines.starts)))
        text = self.lines.line_text(line)
        return types.Position(line=line - 1, character=self._units(text[: max(col, 0)]))

    def of_offset(self, offset: int) -> types.Position:
        line, col = self.lines.position(offset)
        return self.at(line, col)

    def end(self) -> types.Position:
        return self.of_offset(len(self.lines.text))


@dataclass
class DocumentState:
    version: int | None
    text: str
    found: list[tuple[Diagnostic, types.Diagnostic]]


def _severity(d: Diagnostic) -> types.DiagnosticSeverity:
    if d.is_tool_error or d.code.startswith("GPU00"):
        return types.DiagnosticSeverity.Error
    return types.DiagnosticSeverity.Warning


def to_lsp(d: Diagnostic, positions: Positions) -> types.Diagnostic:
    from sync_lint.rules import rule_by_code

    rule = rule_by_code(d.code)
    start = positions.at(d.line, d.col - 1)
    end = positions.at(d.end_line, d.end_col - 1)
    if (end.line, end.character) < (start.line, start.character):
        end = start
    return types.Diagnostic(
        range=types.Range(start=start, end=end),
        message=d.message,
        severity=_severity(d),
        code=d.code,
        code_description=types.CodeDescription(href=rule.url()) if rule else None,
        source=SOURCE,
        tags=[types.DiagnosticTag.Unnecessary] if d.code == "GPU010" else None,
    )


def _text_edits(edits: tuple[Edit, ...] | list[Edit], positions: Positions) -> list[types.TextEdit]:
    return [
        types.TextEdit(
            range=types.Range(start=positions.of_offset(e.start), end=positions.of_offset(e.end)), new_text=e.content
        )
        for e in sorted(edits)
    ]


def _overlaps(a: types.Range, b: types.Range) -> bool:
    a_start, a_end = (a.start.line, a.start.character), (a.end.line, a.end.character)
    b_start, b_end = (b.start.line, b.start.character), (b.end.line, b.end.character)
    return a_start <= b_end and b_start <= a_end


class SyncLintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("sync-lint", __version__)
        self.engine = DocumentLinter()
        self.unsafe_fixes = True
        self.documents: dict[str, DocumentState] = {}

    def configure(self, options: object) -> None:
        if not isinstance(options, dict):
            return
        select = options.get("select")
        ignore = options.get("ignore")
        self.engine = DocumentLinter(
            select=list(select) if isinstance(select, list) else None,
            ignore=list(ignore) if isinstance(ignore, list) else None,
        )
        if isinstance(options.get("unsafeFixes"), bool):
            self.unsafe_fixes = options["unsafeFixes"]

    def positions(self, text: str) -> Positions:
        return Positions(text, self.workspace.position_encoding or "utf-16")

    def lint(self, uri: str) -> DocumentState:
        document = self.workspace.get_text_document(uri)
        text = document.source
        path = to_fs_path(uri) or uri
        positions = self.positions(text)
        try:
            found = [(d, to_lsp(d, positions)) for d in self.engine.lint(text, path)]
        except config.ConfigError as exc:
            found = [(None, self._problem(f"sync-lint: configuration error: {exc}"))]
        except Exception as exc:  # the editor must keep its server whatever one file does
            logger.exception("sync-lint failed on %s", uri)
            found = [(None, self._problem(f"sync-lint: internal error: {type(exc).__name__}: {exc}"))]
        state = DocumentState(version=document.version, text=text, found=[f for f in found if f[0] is not None])
        self.documents[uri] = state
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=[lsp for _, lsp in found], version=document.version)
        )
        return state

    @staticmethod
    def _problem(message: str) -> types.Diagnostic:
        start = types.Position(line=0, character=0)
        return types.Diagnostic(
            range=types.Range(start=start, end=start), message=message,
            severity=types.DiagnosticSeverity.Error, source=SOURCE,
        )

    def current(self, uri: str) -> DocumentState:
        document = self.workspace.get_text_document(uri)
        state = self.documents.get(uri)
        if state is None or state.version != document.version or state.text != document.source:
            state = self.lint(uri)
        return state

    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        from sync_lint.add_noqa import noqa_edits, wanted

        uri = params.text_document.uri
        state = self.current(uri)
        positions = self.positions(state.text)
        only = params.context.only
        def allowed(kind: str) -> bool:
            return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)

        actions: list[types.CodeAction] = []
        for d, lsp in state.found:
            if not _overlaps(lsp.range, params.range):
                continue
            fix = d.fix
            if fix is not None and (fix.applicability == "safe" or self.unsafe_fixes) and allowed(types.CodeActionKind.QuickFix):
                title = f"{fix.message} ({d.code})" + (" [unsafe]" if fix.applicability == "unsafe" else "")
                actions.append(
                    types.CodeAction(
                        title=title,
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[lsp],
                        is_preferred=fix.applicability == "safe",
                        edit=types.WorkspaceEdit(changes={uri: _text_edits(fix.edits, positions)}),
                    )
                )
            if wanted(d) and allowed(types.CodeActionKind.QuickFix):
                edits, _ = noqa_edits(state.text, [d])
                if edits:
                    actions.append(
                        types.CodeAction(
                            title=f"Disable {d.code} for this line (# noqa)",
                            kind=types.CodeActionKind.QuickFix,
                            diagnostics=[lsp],
                            edit=types.WorkspaceEdit(changes={uri: _text_edits(edits, positions)}),
                        )
                    )
        if allowed(FIX_ALL_KIND) and any(d.fix is not None and d.fix.applicability == "safe" for d, _ in state.found):
            outcome = self.engine.fix(state.text, to_fs_path(uri) or uri, unsafe=False)
            if outcome.changed and outcome.error is None:
                whole = types.Range(start=types.Position(line=0, character=0), end=positions.end())
                actions.append(
                    types.CodeAction(
                        title="sync-lint: fix all safe fixes",
                        kind=FIX_ALL_KIND,
                        edit=types.WorkspaceEdit(changes={uri: [types.TextEdit(range=whole, new_text=outcome.fixed)]}),
                    )
                )
        return actions


def build_server() -> SyncLintServer:
    server = SyncLintServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: SyncLintServer, params: types.InitializeParams) -> None:
        ls.configure(params.initialization_options)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: SyncLintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.lint(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: SyncLintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.lint(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: SyncLintServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.lint(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: SyncLintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.documents.pop(params.text_document.uri, None)
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=False),
    )
    def code_action(ls: SyncLintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return ls.code_actions(params)

    return server


def serve() -> None:
    build_server().start_io()
