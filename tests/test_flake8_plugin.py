"""The flake8 front end, run as a real flake8 subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sync_lint.rules import all_codes

HOT_ITEM = '''\
class PrefillMetadataBuilder:
    def build(self, common):
        n = int(self.indptr[-1].item())
        return n
'''


def flake8(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flake8", *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_plugin_is_registered(tmp_path):
    result = flake8("--version", cwd=tmp_path)
    assert "sync-lint" in result.stdout


@pytest.mark.skipif("GPU201" not in all_codes(), reason="needs the GPU2xx rules")
def test_plugin_reports_with_cli_positions_and_flake8_noqa(tmp_path):
    (tmp_path / "builder.py").write_text(HOT_ITEM)
    result = flake8("--select", "GPU", "builder.py", cwd=tmp_path)
    assert result.returncode == 1
    cli = subprocess.run(
        [sys.executable, "-m", "sync_lint", "check", "--isolated", "--select", "GPU201", "builder.py"], check=False,
        cwd=tmp_path, capture_output=True, text=True,
    )
    # Same line and column as the CLI (flake8 adds one to the plugin's 0-based column).
    cli_position = cli.stdout.split(" ")[0]
    assert any(line.startswith(cli_position + " GPU201") for line in result.stdout.splitlines()), (result.stdout, cli.stdout)

    (tmp_path / "builder.py").write_text(HOT_ITEM.replace(".item())", ".item())  # noqa: GPU201"))
    assert flake8("--select", "GPU", "builder.py", cwd=tmp_path).returncode == 0
    # select too: GPU201 not selected, nothing reported.
    (tmp_path / "builder.py").write_text(HOT_ITEM)
    assert flake8("--select", "GPU1", "builder.py", cwd=tmp_path).returncode == 0


def test_plugin_is_silent_on_clean_and_broken_code(tmp_path):
    (tmp_path / "clean.py").write_text("def f(x):\n    return x + 1\n")
    assert flake8("--select", "GPU", "clean.py", cwd=tmp_path).returncode == 0
    # flake8 reports the syntax error itself (E999); the plugin must not crash.
    (tmp_path / "broken.py").write_text("class FooMetadataBuilder:\n    def build(self:\n")
    result = flake8("--select", "GPU,E9", "broken.py", cwd=tmp_path)
    assert "E999" in result.stdout and "Traceback" not in result.stderr


@pytest.mark.skipif("GPU201" not in all_codes(), reason="needs the GPU2xx rules")
def test_plugin_reads_a_base_from_beside_the_file(tmp_path):
    """As ``sync-lint check`` of one file: a class whose base another file of the package makes
    an ``nn.Module`` has a hot ``forward``; one whose base is a plain class has not."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("from torch import nn\n\n\nclass Layer(nn.Module):\n    pass\n\n\nclass Plain:\n    pass\n")
    body = "    def forward(self, x):\n        torch.cuda.synchronize()\n        return x\n"
    (pkg / "model.py").write_text(
        f"import torch\n\nfrom pkg.base import Layer, Plain\n\n\nclass Model(Layer):\n{body}\n\nclass Config(Plain):\n{body}"
    )
    result = flake8("--select", "GPU", "pkg/model.py", cwd=tmp_path)
    assert [line.split(" GPU")[0] for line in result.stdout.splitlines()] == ["pkg/model.py:8:9:"], result
