"""The language server, driven as an editor drives it: real JSON-RPC over the stdio of
``sync-lint server`` (Content-Length framing), in a subprocess."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls")

TIMEOUT = 30


class LspClient:
    def __init__(self, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sync_lint", "server"],
            cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.messages: queue.Queue = queue.Queue()
        self.next_id = 1
        self.backlog: list[dict] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            headers = {}
            while True:
                line = stream.readline()
                if not line:
                    self.messages.put(None)
                    return
                line = line.decode("ascii").strip()
                if not line:
                    break
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            body = stream.read(int(headers["content-length"]))
            self.messages.put(json.loads(body.decode("utf-8")))

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def notify(self, method: str, params: dict) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: dict | None) -> dict:
        ident = self.next_id
        self.next_id += 1
        self.send({"id": ident, "method": method, "params": params})
        reply = self.wait(lambda m: m.get("id") == ident and "method" not in m)
        assert "error" not in reply, reply
        return reply

    def wait(self, predicate, timeout: float = TIMEOUT) -> dict:
        for i, message in enumerate(self.backlog):
            if predicate(message):
                return self.backlog.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching message within {timeout}s; got {self.backlog}")
            try:
                message = self.messages.get(timeout=remaining)
            except queue.Empty:
                continue
            if message is None:
                raise AssertionError(f"server exited: {self.process.stderr.read().decode()[-2000:]}")
            if predicate(message):
                return message
            self.backlog.append(message)

    def diagnostics(self, uri: str, version: int | None = None) -> dict:
        return self.wait(
            lambda m: m.get("method") == "textDocument/publishDiagnostics"
            and m["params"]["uri"] == uri
            and (version is None or m["params"].get("version") == version)
        )["params"]

    def close(self) -> int:
        self.request("shutdown", None)
        self.notify("exit", None)
        try:
            return self.process.wait(timeout=TIMEOUT)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=TIMEOUT)
            self.reader.join(timeout=TIMEOUT)  # it reads stdout to its end
            for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
                stream.close()


def start(cwd: Path, capabilities: dict | None = None, options: dict | None = None) -> tuple[LspClient, dict]:
    client = LspClient(cwd)
    reply = client.request(
        "initialize",
        {
            "processId": None,
            "rootUri": cwd.as_uri(),
            "capabilities": capabilities or {},
            "initializationOptions": options,
        },
    )
    client.notify("initialized", {})
    return client, reply["result"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.sync-lint]\n")
    return tmp_path


def open_document(client: LspClient, uri: str, text: str, version: int = 1) -> None:
    client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}},
    )


def test_diagnostics_on_open_change_and_save_and_clear_on_close(workspace):
    path = workspace / "mod.py"
    text = "x = 1  # noqa: GPU001\n"
    path.write_text(text)
    uri = path.as_uri()
    client, result = start(workspace)
    try:
        capabilities = result["capabilities"]
        assert capabilities["codeActionProvider"]["codeActionKinds"] == ["quickfix", "source.fixAll.sync-lint"]
        open_document(client, uri, text)
        published = client.diagnostics(uri, 1)
        [diagnostic] = published["diagnostics"]
        assert diagnostic["code"] == "GPU010"
        assert diagnostic["source"] == "sync-lint"
        assert diagnostic["severity"] == 2  # a warning (tool errors and syntax errors are errors: 1)
        assert diagnostic["message"] == "Unused `noqa` code: GPU001"
        # 0-based: the comment starts at column 7 of line 0 and runs to the end of the line.
        assert diagnostic["range"] == {"start": {"line": 0, "character": 7}, "end": {"line": 0, "character": 21}}
        assert diagnostic["codeDescription"]["href"].endswith("/GPU010.md")

        # A change that moves the finding to line 2; then one that removes it.
        client.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": uri, "version": 2},
                "contentChanges": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                                    "text": "import os\n\n"}],
            },
        )
        [moved] = client.diagnostics(uri, 2)["diagnostics"]
        assert moved["range"]["start"] == {"line": 2, "character": 7}
        client.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"text": "x = 1\n"}]},
        )
        assert client.diagnostics(uri, 3)["diagnostics"] == []
        client.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": 4}, "contentChanges": [{"text": text}]},
        )
        assert len(client.diagnostics(uri, 4)["diagnostics"]) == 1
        client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        assert len(client.diagnostics(uri, 4)["diagnostics"]) == 1
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        assert client.diagnostics(uri)["diagnostics"] == []
    finally:
        assert client.close() == 0


def apply_edits(text: str, edits: list[dict], encoding: str = "utf-16") -> str:
    """Apply LSP TextEdits the way an editor does, counting characters in ``encoding``."""
    lines = text.splitlines(keepends=True) or [""]

    def offset(position: dict) -> int:
        line = lines[position["line"]] if position["line"] < len(lines) else ""
        before = sum(len(l) for l in lines[: position["line"]])
        units, index = 0, 0
        while units < position["character"] and index < len(line):
            char = line[index]
            units += len(char.encode("utf-16-le")) // 2 if encoding == "utf-16" else len(char.encode("utf-8"))
            index += 1
        return before + index

    spans = sorted(((offset(e["range"]["start"]), offset(e["range"]["end"]), e["newText"]) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


@pytest.mark.parametrize(
    ("encodings", "unit"),
    [(None, "utf-16"), (["utf-8"], "utf-8"), (["utf-16"], "utf-16")],
)
def test_positions_count_the_negotiated_units_and_code_actions_fix(workspace, encodings, unit):
    # Two astral characters (2 UTF-16 units, 4 UTF-8 bytes each) and an accent before the finding.
    text = 's = "😀😀é"; x = 1  # noqa: E501, GPU001\n'
    uri = (workspace / "unicode.py").as_uri()
    capabilities = {"general": {"positionEncodings": encodings}} if encodings else {}
    client, result = start(workspace, capabilities)
    try:
        assert result["capabilities"].get("positionEncoding", "utf-16") == unit
        open_document(client, uri, text)
        [diagnostic] = client.diagnostics(uri, 1)["diagnostics"]
        hash_at = text.index("# noqa")  # code points
        prefix = text[:hash_at]
        expected = len(prefix.encode("utf-16-le")) // 2 if unit == "utf-16" else len(prefix.encode("utf-8"))
        assert expected != hash_at  # the case is only a test if the units differ from code points
        assert diagnostic["range"]["start"] == {"line": 0, "character": expected}

        reply = client.request(
            "textDocument/codeAction",
            {"textDocument": {"uri": uri}, "range": diagnostic["range"], "context": {"diagnostics": [diagnostic]}},
        )
        actions = {action["title"]: action for action in reply["result"]}
        fix = actions["Remove unused `noqa` codes (GPU010)"]
        assert fix["kind"] == "quickfix" and fix["isPreferred"] is True
        assert fix["diagnostics"][0]["code"] == "GPU010"
        edits = fix["edit"]["changes"][uri]
        assert apply_edits(text, edits, unit) == 's = "😀😀é"; x = 1  # noqa: E501\n'
        # GPU010 itself is not silenced with a noqa; the whole-file action does the same fix.
        assert not any("Disable" in title for title in actions)
        fix_all = client.request(
            "textDocument/codeAction",
            {
                "textDocument": {"uri": uri},
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                "context": {"diagnostics": [], "only": ["source.fixAll"]},
            },
        )["result"]
        assert [a["kind"] for a in fix_all] == ["source.fixAll.sync-lint"]
        assert apply_edits(text, fix_all[0]["edit"]["changes"][uri], unit) == 's = "😀😀é"; x = 1  # noqa: E501\n'
    finally:
        assert client.close() == 0


def test_noqa_action_for_a_rule_finding(workspace):
    from sync_lint.rules import rule_by_code

    rule = rule_by_code("GPU201")
    if rule is None or not rule.invalid:
        pytest.skip("GPU201 is not registered yet")
    text = rule.invalid[0]
    uri = (workspace / "builder.py").as_uri()
    client, _ = start(workspace)
    try:
        open_document(client, uri, text)
        found = [d for d in client.diagnostics(uri, 1)["diagnostics"] if d["code"] == "GPU201"]
        assert found, "the rule's own INVALID example must be flagged"
        reply = client.request(
            "textDocument/codeAction",
            {"textDocument": {"uri": uri}, "range": found[0]["range"], "context": {"diagnostics": found[:1]}},
        )
        [noqa] = [a for a in reply["result"] if a["title"] == "Disable GPU201 for this line (# noqa)"]
        fixed = apply_edits(text, noqa["edit"]["changes"][uri])
        assert "# noqa: GPU201" in fixed
    finally:
        assert client.close() == 0


def test_configuration_error_is_a_diagnostic_not_a_crash(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.sync-lint]\nselect = ['NOPE1']\n")
    uri = (tmp_path / "mod.py").as_uri()
    client, _ = start(tmp_path)
    try:
        open_document(client, uri, "x = 1\n")
        [problem] = client.diagnostics(uri, 1)["diagnostics"]
        assert "configuration error" in problem["message"] and "NOPE1" in problem["message"]
        assert problem["severity"] == 1
    finally:
        assert client.close() == 0


def test_initialization_options_extend_the_configuration(workspace):
    # With GPU010 ignored through the initialisation options, the finding disappears.
    uri = (workspace / "mod.py").as_uri()
    client, _ = start(workspace, options={"ignore": ["GPU010"], "unsafeFixes": False})
    try:
        open_document(client, uri, "x = 1  # noqa: GPU001\n")
        assert client.diagnostics(uri, 1)["diagnostics"] == []
    finally:
        assert client.close() == 0
