"""``compiled_methods``: dataclasses made from methods an earlier run compiled are the classes made
without them, and a file that cannot be trusted or written costs only the compile."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sync_lint import compiled_methods as cm

ROOT = Path(__file__).resolve().parent.parent

# Run in a fresh interpreter (a class's methods are compiled once per process): makes classes
# with most of what dataclasses generates, inside a block or not, and prints how they behave
# and how many texts were compiled. No ``from __future__ import annotations`` here: the block's
# own module has it, and a text compiled under it would give ``__init__`` string annotations.
_SCENARIO = """
import dataclasses, json, sys
from sync_lint import compiled_methods as cm

folder, inside = sys.argv[1], sys.argv[2] == "inside"

def make():
    @dataclasses.dataclass(frozen=True, order=True)
    class Point:
        x: int
        y: int = 0
        tags: list = dataclasses.field(default_factory=list, compare=False, hash=False)

    @dataclasses.dataclass
    class Box:
        corner: Point
        size: float = 1.0

    return Point, Box

if inside:
    with cm.compiled_methods("scenario", folder) as codes:
        Point, Box = make()
    compiled, reused = len(codes.compiled), len(codes.used)
else:
    Point, Box = make()
    compiled = reused = 0
point = Point(1, 2)
try:
    point.x = 3
    frozen = False
except dataclasses.FrozenInstanceError:
    frozen = True
box = Box(point)
box.size = 2.5
print(json.dumps({
    "compiled": compiled,
    "reused": reused,
    "exec left in dataclasses": "exec" in vars(dataclasses),
    "behaviour": [
        repr(point), repr(box), point == Point(1, 2, ["other"]), Point(0, 9) < point, hash(point) == hash(Point(1, 2)),
        frozen, Point(1).tags == [] and Point(1).tags is not Point(1).tags, box == Box(Point(1, 2), 2.5),
        {name: getattr(value, "__name__", repr(value)) for name, value in Point.__init__.__annotations__.items()},
        {name: getattr(value, "__name__", repr(value)) for name, value in Box.__init__.__annotations__.items()},
    ],
}))
"""


def _run(folder: Path, inside: bool = True, python: str = sys.executable, *flags: str) -> dict:
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [python, *flags, "-c", _SCENARIO, str(folder), "inside" if inside else "outside"], capture_output=True,
        text=True, timeout=120, env=environment, check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _files(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []


def _other_pythons() -> list[str]:
    """The other interpreters this package admits that run on this machine (pyenv's too: its
    shims run only the versions it is told to)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found = []
    for minor in (10, 12, 13):
        candidates = [shutil.which(f"python3.{minor}"), *map(str, sorted(pyenv.glob(f"versions/3.{minor}.*/bin/python")))]
        for python in filter(None, candidates):
            if subprocess.run([python, "--version"], capture_output=True, check=False).returncode == 0:
                found.append(python)
                break
    return found


OTHER_PYTHONS = _other_pythons()


@pytest.mark.parametrize("python", [sys.executable, *OTHER_PYTHONS])
def test_a_second_run_compiles_nothing_and_makes_the_same_classes(tmp_path, python):
    plain = _run(tmp_path / "unused", inside=False, python=python)
    first = _run(tmp_path, python=python)
    second = _run(tmp_path, python=python)
    assert first["compiled"] > 0 and first["reused"] == 0
    assert second["compiled"] == 0 and second["reused"] > 0
    assert plain["behaviour"] == first["behaviour"] == second["behaviour"]
    assert plain["behaviour"][8] == {"x": "int", "y": "int", "tags": "list", "return": "None"}
    assert not first["exec left in dataclasses"] and not second["exec left in dataclasses"]
    assert len(_files(tmp_path)) == 1


def _the_file(folder: Path) -> Path:
    (name,) = _files(folder)
    return folder / name


@pytest.mark.parametrize("damage", ["a byte flipped", "cut short", "another interpreter", "empty"])
def test_a_file_that_cannot_be_trusted_is_ignored_and_written_again(tmp_path, damage):
    expected = _run(tmp_path)
    path = _the_file(tmp_path)
    data = bytearray(path.read_bytes())
    if damage == "a byte flipped":
        data[len(data) // 2] ^= 0x40
    elif damage == "cut short":
        del data[len(data) // 2:]
    elif damage == "another interpreter":
        data[len(cm._FORMAT) - 4] ^= 0xFF  # the magic number, at the format's end
    else:
        data.clear()
    path.write_bytes(bytes(data))
    again = _run(tmp_path)
    assert again["compiled"] == expected["compiled"] and again["behaviour"] == expected["behaviour"]
    assert _run(tmp_path)["compiled"] == 0  # written again, whole


def test_nothing_is_written_where_bytecode_is_not(tmp_path):
    assert _run(tmp_path, True, sys.executable, "-B")["compiled"] > 0
    assert _files(tmp_path) == []


def test_a_folder_that_cannot_be_made_costs_only_the_compile(tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    result = _run(blocker / "cache")
    assert result["compiled"] > 0 and result["behaviour"] == _run(tmp_path / "unused", inside=False)["behaviour"]
    assert _files(tmp_path) == ["a file"]


def test_blocks_nest_each_with_its_file_and_leave_dataclasses_as_found(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    with cm.compiled_methods("outer", str(tmp_path)) as outer:
        dataclasses.make_dataclass("Outer", [("a", int)])
        with cm.compiled_methods("inner", str(tmp_path)) as inner:
            dataclasses.make_dataclass("Inner", [("b", int)])
        assert vars(dataclasses)["exec"] == outer.exec
        dataclasses.make_dataclass("OuterAgain", [("c", int)])
    assert "exec" not in vars(dataclasses)
    inner_texts = {source for _, source in inner.compiled}
    outer_texts = {source for _, source in outer.compiled}
    assert any("self.b=b" in text for text in inner_texts) and not any("self.b=b" in text for text in outer_texts)
    assert any("self.c=c" in text for text in outer_texts) and not any("self.c=c" in text for text in inner_texts)
    assert _files(tmp_path) == sorted(
        f"dataclass-methods.{name}.{sys.implementation.cache_tag}.marshal" for name in ("inner", "outer")
    )


def test_an_exec_put_in_dataclasses_by_someone_else_is_left_alone(tmp_path, monkeypatch):
    calls = []

    def theirs(source, globals=None, locals=None):
        calls.append(source)
        exec(source, globals, locals)  # noqa: S102

    monkeypatch.setattr(dataclasses, "exec", theirs, raising=False)
    with cm.compiled_methods("ours", str(tmp_path)) as codes:
        dataclasses.make_dataclass("Theirs", [("a", int)])
    assert codes is None and calls and vars(dataclasses)["exec"] is theirs
    assert _files(tmp_path) == []


def test_a_file_grown_past_its_bound_keeps_only_what_its_last_run_used(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    folder = str(tmp_path)
    with cm.compiled_methods("grown", folder):
        dataclasses.make_dataclass("Old", [("old_field", int)])
    monkeypatch.setattr(cm, "_MOST_ENTRIES", 1)
    with cm.compiled_methods("grown", folder) as codes:
        dataclasses.make_dataclass("New", [("new_field", int)])
    assert codes.known and not codes.used  # nothing the first run compiled was asked for again
    kept = cm._read(str(_the_file(tmp_path)))
    assert kept and all("old_field" not in source for _, source in kept)
    assert any("new_field" in source for _, source in kept)


_PARSER_IMPORT = """
import json
from sync_lint import compiled_methods as cm
compiled = []
def counting_compile(*args, **kwargs):
    compiled.append(1)
    return compile(*args, **kwargs)
cm.compile = counting_compile
from sync_lint.pipeline import lint_file
lint_file.import_the_parser()
print(json.dumps(len(compiled)))
"""


def test_the_lint_workers_parser_import_reuses_libcsts_methods_and_lints_the_same(tmp_path):
    """Where Python keeps its bytecode (here ``-X pycache_prefix``, honoured), a second import of
    the parser compiles no dataclass method, and a check of the fixtures finds the same."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPATH"] = str(ROOT)
    prefix = ["-X", f"pycache_prefix={tmp_path / 'bytecode'}"]

    def run(*arguments: str, **options) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, *arguments], capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
            **options,
        )

    first = run(*prefix, "-c", _PARSER_IMPORT, env=environment)
    second = run(*prefix, "-c", _PARSER_IMPORT, env=environment)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert json.loads(first.stdout) > 300 and json.loads(second.stdout) == 0  # libcst's nodes: about 600 texts

    check = ["-m", "sync_lint", "check", "fixtures", "reference_kernels", "--isolated", "--no-cache",
             "--output-format", "json"]
    written = list((tmp_path / "bytecode").rglob("dataclass-methods.*"))
    assert {path.name.split(".")[1] for path in written} == {"parser"}
    with_files = run(*prefix, *check, env=environment)
    without = run("-B", "-X", f"pycache_prefix={tmp_path / 'none'}", *check, env=environment)
    assert with_files.returncode == without.returncode == 1, with_files.stderr + without.stderr
    assert json.loads(with_files.stdout) == json.loads(without.stdout)
    assert {path.name.split(".")[1] for path in (tmp_path / "bytecode").rglob("dataclass-methods.*")} == {
        "parser", "command"
    }


def test_a_text_runs_as_compiled_under_its_callers_future_imports(tmp_path):
    """``dataclasses`` has no ``__future__`` import, but a text is kept with the flags of the
    code that execs it, as ``exec`` compiles it: this module has ``annotations``, the scenario
    above has not."""
    text = "def f(x: int) -> int:\n    return x\n"
    theirs: dict = {}
    exec(text, {}, theirs)  # noqa: S102  (what the text means here)
    with cm.compiled_methods("future", str(tmp_path)) as codes:
        ours: dict = {}
        codes.exec(text, {}, ours)
    assert ours["f"].__annotations__ == theirs["f"].__annotations__ == {"x": "int", "return": "int"}
    assert [flags for flags, _ in codes.compiled] == [__import__("__future__").annotations.compiler_flag]


def test_the_flake8_plugins_first_parse_reuses_them_too(tmp_path):
    """The flake8 plugin's process has no lint worker: its first parse imports the parser, in
    the same block. A second run finds every text it needs (the file is not written again)."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPATH"] = str(ROOT)
    prefix = tmp_path / "bytecode"
    fixture = ROOT / "fixtures" / "fixes" / "GPU101_state_indices.py"

    def flake8() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-X", f"pycache_prefix={prefix}", "-m", "flake8", "--isolated", "--select", "GPU",
             "--jobs", "1", str(fixture)], capture_output=True, text=True, timeout=300, check=False, env=environment,
        )

    first = flake8()
    (written,) = prefix.rglob("dataclass-methods.parser.*")
    stamp = written.stat().st_mtime_ns
    second = flake8()
    assert first.returncode == second.returncode == 1 and "GPU101" in first.stdout, first.stderr
    assert first.stdout == second.stdout
    assert written.stat().st_mtime_ns == stamp


def test_the_file_is_kept_in_the_users_cache_folder_not_in_the_package(tmp_path, monkeypatch):
    """``pip uninstall`` removes only what it installed, and an installed package's folder may
    not be writable: the file goes to the user's cache folder, or under ``pycache_prefix``."""
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cm._default_folder() == str(tmp_path / "xdg" / "sync-lint")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cm._default_folder() == str(tmp_path / "home" / ".cache" / "sync-lint")
    monkeypatch.setattr(os.path, "expanduser", lambda path: path)  # no HOME, no password entry
    assert cm._default_folder() is None and cm._path("command", None) is None
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "prefix"))
    assert cm._default_folder() == str(tmp_path / "prefix" / "sync-lint")
    monkeypatch.undo()

    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    environment.update(PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "run"))
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "sync_lint", "check", str(ROOT / "fixtures" / "fixes" / "GPU101_state_indices.py"),
         "--isolated", "--no-cache"], capture_output=True, text=True, timeout=300, check=False, env=environment,
    )
    assert done.returncode == 1, done.stderr
    assert sorted(path.name.split(".")[1] for path in (tmp_path / "run" / "sync-lint").iterdir()) == ["command", "parser"]
    assert not [path for path in (ROOT / "sync_lint").rglob("dataclass-methods.*") if path.stat().st_mtime >= started]
