#!/usr/bin/env python
"""Scale benchmark: sync-lint on a full vLLM / SGLang tree, against ruff, flake8 and a bare libcst parse.

Run by hand (not in CI), from the repository root, with the project's virtual environment:

    .venv/bin/python bench/bench_scale.py                    # both trees, 3 repetitions
    .venv/bin/python bench/bench_scale.py --only vllm --quick --repeat 1 --profile
    .venv/bin/python bench/bench_scale.py --only vllm --config my-pyproject.toml   # a project's options

Downloads ``vllm==0.33.0`` (the newest vllm if that version does not exist) and the newest
``sglang`` wheel with ``pip download --no-deps --only-binary :all:`` into ``bench/corpus/``
(gitignored), unpacks only their Python files, and times every tool as a subprocess with the
tree as working directory. Peak memory is the ``ru_maxrss`` that ``os.wait4`` returns for each
run: the largest single process of the run's process tree (the main process or one worker).
See ``bench/README.md`` for what each measurement means.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import functools
import io
import json
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "bench" / "corpus"
WHEELS = CORPUS / "wheels"
PY = sys.executable
# What sync-lint reads its options from: ``--isolated`` (the defaults), or a project's
# ``pyproject.toml`` (``--config FILE``). The peers always run ``--isolated``.
SETTINGS: list[str] = ["--isolated"]
BIN = Path(sys.executable).parent
RUFF = str(BIN / "ruff") if (BIN / "ruff").exists() else "ruff"

# The trees: (name, pinned spec or None, files preferred as the "typical big file").
TREES = {
    "vllm": ("vllm==0.33.0", ["vllm/v1/worker/gpu_model_runner.py", "vllm/v1/attention/backends/flashinfer.py"]),
    "sglang": (None, ["sglang/srt/model_executor/model_runner.py", "sglang/srt/managers/scheduler.py"]),
}


def install_as_a_user_has_it(source: Path) -> None:
    """Put the sync-lint at ``source`` in the state a user's has after installing it and running
    it once: its modules byte-compiled, as pip compiles them and the peers', and the dataclass
    methods its first run compiles kept (``sync_lint.compiled_methods``). This machine sets
    ``PYTHONDONTWRITEBYTECODE``, under which neither is written: every run of an editable
    install would compile every module again (about 20 ms of a one-file run) and every
    dataclass method (about 12 ms, and 70 ms more where a run parses)."""
    subprocess.run([PY, "-m", "compileall", "-q", str(source / "sync_lint")], check=True)
    writing = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    # A small run of a file that parses: its lint worker imports the parser, and the run waits.
    subprocess.run(
        [PY, "-m", "sync_lint", "check", str(ROOT / "fixtures" / "fixes" / "GPU101_state_indices.py"), "--isolated",
         "--no-cache"],
        env={**writing, "PYTHONPATH": str(source)}, capture_output=True, check=False,
    )


# flake8 as a baseline without our own flake8 plugin (which `pip install -e .` registers, and
# which flake8 would run on every file whatever --select says).
FLAKE8_NO_PLUGIN = (
    "import sys, flake8.plugins.finder as f\n"
    "_orig = f._find_importlib_plugins\n"
    "f._find_importlib_plugins = lambda: (p for p in _orig() if p.package != 'sync-lint')\n"
    "from flake8.main.cli import main\n"
    "sys.exit(main())\n"
)


# -- corpus -----------------------------------------------------------------------------------
def fetch(name: str, spec: str | None) -> tuple[Path, str, str]:
    """(wheel, version, note). Reuses a wheel already in bench/corpus/wheels."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    attempts = [spec, name] if spec else [name]
    note = ""
    # an unpacked corpus is enough (offline machines): bench/corpus/src/<name>-<version>/.unpacked
    for attempt in attempts:
        pinned = attempt.split("==")[1] if "==" in attempt else "*"
        unpacked = sorted((CORPUS / "src").glob(f"{name}-{pinned}/.unpacked"))
        if unpacked and not sorted(WHEELS.glob(f"{name}-{pinned}-*.whl")):
            folder = unpacked[-1].parent
            return folder, folder.name.split("-", 1)[1], "corpus unpacked earlier (no wheel here)"
    for attempt in attempts:
        pinned = attempt.split("==")[1] if "==" in attempt else None
        existing = sorted(WHEELS.glob(f"{name}-{pinned or '*'}-*.whl"))
        if existing:
            wheel = existing[-1]
            return wheel, wheel.name.split("-")[1], note
        print(f"[bench] pip download {attempt}", flush=True)
        result = subprocess.run(
            [PY, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", str(WHEELS), attempt], check=False,
            capture_output=True, text=True,
        )
        if result.returncode == 0:
            found = sorted(WHEELS.glob(f"{name}-{pinned or '*'}-*.whl"), key=lambda p: p.stat().st_mtime)
            if found:
                return found[-1], found[-1].name.split("-")[1], note
        note = f"{attempt} not available ({result.stderr.strip().splitlines()[-1:]}), fell back to newest"
        print(f"[bench] {note}", flush=True)
    raise SystemExit(f"cannot download {name}")


def unpack(wheel: Path, version: str, name: str) -> Path:
    if wheel.is_dir():
        return wheel
    dest = CORPUS / "src" / f"{name}-{version}"
    marker = dest / ".unpacked"
    if marker.exists():
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.namelist() if m.endswith((".py", ".pyi")) and ".dist-info/" not in m]
        archive.extractall(dest, members)
    marker.write_text("ok\n")
    return dest


def python_files(tree: Path) -> list[str]:
    found = []
    for folder, subfolders, names in os.walk(tree):
        subfolders.sort()
        for filename in sorted(names):
            if filename.endswith((".py", ".pyi")):
                found.append(os.path.relpath(os.path.join(folder, filename), tree))
    return found


def work_tree(src: Path, label: str, quick: bool) -> tuple[Path, list[str]]:
    """A fresh copy to run in (edits and fixes never touch the unpacked source)."""
    dest = CORPUS / "work" / label
    if dest.exists():
        shutil.rmtree(dest)
    files = python_files(src)
    if quick:
        step = max(1, len(files) // 300)
        chosen = set(files[::step])
        # keep package __init__ files so that module names resolve as in the full tree
        chosen |= {f for f in files if f.endswith("__init__.py")}
        files = [f for f in files if f in chosen]
    for relative in files:
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / relative, target)
    return dest, files


def count_lines(tree: Path, files: list[str]) -> int:
    total = 0
    for relative in files:
        with open(tree / relative, "rb") as handle:
            total += handle.read().count(b"\n")
    return total


def pick_big_file(tree: Path, files: list[str], preferred: list[str]) -> str:
    for candidate in preferred:
        if candidate in files:
            return candidate
    sizes = sorted(((tree / f).stat().st_size, f) for f in files)
    return sizes[int(len(sizes) * 0.99)][1]


def pick_size_spread(tree: Path, files: list[str], count: int) -> list[str]:
    """``count`` files spread evenly over the size distribution (the middle of each of ``count``
    equal slices): the one-file runs pre-commit makes are of files of every size."""
    sizes = sorted(((tree / f).stat().st_size, f) for f in files)
    return [sizes[int((k + 0.5) * len(sizes) / count)][1] for k in range(min(count, len(sizes)))]


def files_a_one_file_run_parses(tree: Path, files: list[str]) -> list[str]:
    """The files a one-file run of sync-lint parses with libcst (``FileFacts.parsed`` of the
    file itself): those it analyses, so imports libcst for. They are the files of GPU code that
    pre-commit's runs check in earnest (a tenth to a sixth of each tree), and a size-spread
    sample of the whole tree holds few of them. Found in this process, one ``Linter.run([file])``
    each with the run's settings, after a text gate as the run's own (minutes on a whole tree:
    a run of one file reads what its findings rest on beyond it)."""
    sys.path.insert(0, str(ROOT))
    from sync_lint import config
    from sync_lint.api import make_settings
    from sync_lint.pipeline import prefilter, runner
    from sync_lint.rules import all_rules

    settings = config.load(Path(SETTINGS[1])) if SETTINGS[0] == "--config" else make_settings()
    rules = all_rules()
    linter = runner.Linter(settings, cache_dir=None)
    found = []
    here = os.getcwd()
    os.chdir(tree)  # the paths a subprocess run in the tree is given
    try:
        for path in files:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
            if not any(prefilter.may_match(rule, text) for rule in rules):
                continue
            if any(facts.parsed for facts in linter.run([path], jobs=1).facts):
                found.append(path)
    finally:
        os.chdir(here)
    return found


def one_file_sample(tree: Path, files: list[str], count: int, repeat: int, label: str = "a size-spread sample") -> dict:
    """A one-file run of sync-lint and of flake8 ``E9,F`` on each file of a size-spread sample
    of ``files`` (median of ``repeat`` runs each): on how many is ours no slower, and the ratios."""
    rows = []
    for path in pick_size_spread(tree, files, count):
        ours = statistics.median(run_timed(sync_lint("check", path, *SETTINGS, "--no-cache"), tree)["wall"] for _ in range(repeat))
        theirs = statistics.median(run_timed(flake8(path, "--isolated", "--select", "E9,F", "--exit-zero"), tree)["wall"] for _ in range(repeat))
        rows.append({"path": path, "lines": (tree / path).read_bytes().count(b"\n"), "sync_lint": ours, "flake8": theirs, "ratio": ours / theirs})
    ratios = [r["ratio"] for r in rows]
    summary = {
        "label": label, "of": len(files), "files": len(rows), "no_slower": sum(r <= 1.0 for r in ratios),
        "median_ratio": statistics.median(ratios), "max_ratio": max(ratios),
        "median_sync_lint": statistics.median(r["sync_lint"] for r in rows),
        "median_flake8": statistics.median(r["flake8"] for r in rows), "rows": rows,
    }
    print(f"[bench]   one-file runs, {label}: sync-lint no slower than flake8 on {summary['no_slower']}/{len(rows)} files, "
          f"median ratio {summary['median_ratio']:.2f}, max {summary['max_ratio']:.2f}", flush=True)
    return summary


def one_file_samples(tree: Path, files: list[str], count: int, repeat: int) -> list[dict]:
    """The one-file target on two samples: the whole tree, and the files a one-file run
    analyses (``files_a_one_file_run_parses``)."""
    whole = one_file_sample(tree, files, count, repeat)
    started = time.perf_counter()
    analysed = files_a_one_file_run_parses(tree, files)
    print(f"[bench]   {len(analysed)} of {len(files)} files are parsed by a one-file run "
          f"(found in {time.perf_counter() - started:.0f} s)", flush=True)
    parsed = one_file_sample(tree, analysed, count, repeat, "the files a one-file run parses")
    # No run that parses with libcst can take less than the interpreter's start and libcst's
    # import (its node classes are dataclasses, made at import): printed against flake8's runs.
    floor = statistics.median(run_timed([PY, "-c", "import libcst"], tree)["wall"] for _ in range(max(repeat, 3)))
    parsed["import_floor"] = floor
    parsed["flake8_under_floor"] = sum(row["flake8"] <= floor for row in parsed["rows"])
    print(f"[bench]   `python -c 'import libcst'` alone: {floor:.3f} s, no faster than flake8's whole run "
          f"on {parsed['flake8_under_floor']} of those {len(parsed['rows'])} files", flush=True)
    # What a run's lint worker pays instead: libcst with the dataclass methods an earlier run
    # compiled (``compiled_methods``), and the analyses.
    parsed["parser_import"] = statistics.median(
        run_timed([PY, "-c", "from sync_lint.pipeline.lint_file import import_the_parser as i; i()"], tree)["wall"]
        for _ in range(max(repeat, 3))
    )
    print(f"[bench]   the lint worker's import of libcst and the analyses (`import_the_parser`), in a process of its "
          f"own: {parsed['parser_import']:.3f} s", flush=True)
    return [whole, parsed]


def pick_median_file(tree: Path, files: list[str]) -> str:
    """The file of median size: what a pre-commit run usually gets, where start-up dominates."""
    sizes = sorted(((tree / f).stat().st_size, f) for f in files)
    return sizes[len(sizes) // 2][1]


# -- running and timing -----------------------------------------------------------------------
# Linux counts the memory a child had before ``exec`` (a copy of this benchmark's own) in its
# ``ru_maxrss``; GNU time, a small process, is the parent that sees only the command's peak.
GNU_TIME = "/usr/bin/time" if os.path.exists("/usr/bin/time") else None


def run_timed(cmd: list[str], cwd: Path) -> dict:
    """Wall time, exit status, max RSS (largest process of the tree) and output of one run."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as peak:
        wrapped = [GNU_TIME, "-q", "-f", "%M", "-o", peak.name, *cmd] if GNU_TIME else cmd
        started = time.perf_counter()
        proc = subprocess.Popen(wrapped, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        reported = peak.read().strip().splitlines() if GNU_TIME else []
        maxrss_kb = int(reported[-1]) if reported and reported[-1].isdigit() else usage.ru_maxrss
        return {
            "wall": wall,
            "rc": proc.returncode,
            "maxrss_mb": maxrss_kb / 1024,
            "cpu": usage.ru_utime + usage.ru_stime,
            "stdout": out.read().decode("utf-8", "replace"),
            "stderr": err.read().decode("utf-8", "replace"),
        }


def series(label: str, cmd: list[str], cwd: Path, repeat: int, before=None, keep_output: bool = False) -> dict:
    runs = []
    for i in range(repeat):
        if before is not None:
            before(i)
        runs.append(run_timed(cmd, cwd))
        r = runs[-1]
        print(f"[bench]   {label:<28} run {i + 1}/{repeat}: {r['wall']:7.2f}s cpu={r['cpu']:7.2f}s rc={r['rc']} rss={r['maxrss_mb']:.0f}MB", flush=True)
    walls = [r["wall"] for r in runs]
    result = {
        "cmd": " ".join(cmd) if len(" ".join(cmd)) < 400 else " ".join(cmd)[:400] + "...",
        "median": statistics.median(walls),
        "min": min(walls),
        "max": max(walls),
        "runs": walls,
        "cpu_median": statistics.median(r["cpu"] for r in runs),
        "rc": sorted({r["rc"] for r in runs}),
        "maxrss_mb": max(r["maxrss_mb"] for r in runs),
        "tracebacks": sum("Traceback (most recent call last)" in r["stderr"] for r in runs),
        "stderr_tail": runs[-1]["stderr"][-600:],
    }
    if keep_output:
        result["last"] = runs[-1]
    return result


def sync_lint(*args: str) -> list[str]:
    return [PY, "-m", "sync_lint", *args]


def flake8(*args: str, plugin: bool = False) -> list[str]:
    if plugin:
        return [PY, "-m", "flake8", *args]
    return [PY, "-c", FLAKE8_NO_PLUGIN, *args]


# -- bare parses (a subprocess runs this script with --_parse) ------------------------------------
def _libcst_parse(raw: bytes) -> None:
    import libcst as cst

    cst.parse_module(raw)


def _ast_parse(raw: bytes) -> None:
    """CPython's own parser, for comparison: what an analysis on ``ast`` would start from."""
    import ast

    ast.parse(raw)


_PARSERS = {"libcst": _libcst_parse, "ast": _ast_parse}


def _parse_one(path: str, parser: str) -> int:
    """0 when the file parses, 1 when it does not."""
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        _PARSERS[parser](raw)
        return 0
    except Exception:  # noqa: BLE001 -- libcst's ParserSyntaxError, CPython's SyntaxError / ValueError (null bytes)
        return 1


def parse_worker(list_file: str, workers: int, parser: str = "libcst") -> None:
    parse_one = functools.partial(_parse_one, parser=parser)
    with open(list_file) as handle:
        paths = [line.rstrip("\n") for line in handle if line.strip()]
    started = time.perf_counter()
    if workers <= 1:
        failures = sum(parse_one(p) for p in paths)
    else:
        from concurrent.futures import ProcessPoolExecutor

        chunk = max(8, min(256, len(paths) // (workers * 8) or 1))  # as sync-lint's runner chunks
        with ProcessPoolExecutor(max_workers=workers) as pool:
            failures = sum(pool.map(parse_one, paths, chunksize=chunk))
    print(json.dumps({"files": len(paths), "failures": failures, "seconds": time.perf_counter() - started}))


def parse_floor_worker(list_file: str, workers: int) -> None:
    """The parses a cold run of sync-lint does, timed alone: the texts its outline and its lint
    hand to CPython's ``ast`` and to libcst (captured from a serial in-process run, not timed),
    each set parsed again in a pool of ``workers`` as the runner's. Whatever the analyses cost,
    a run cannot take less than these two pools: the floor of this design."""
    import ast
    import gc
    from concurrent.futures import ProcessPoolExecutor

    import libcst as cst

    sys.path.insert(0, str(ROOT))
    from sync_lint.api import make_settings
    from sync_lint.pipeline.runner import Linter

    global _FLOOR_TEXTS
    with open(list_file) as handle:
        paths = [line.rstrip("\n") for line in handle if line.strip()]
    texts: dict[str, list[str]] = {"ast": [], "libcst": []}
    parse_ast, parse_cst = ast.parse, cst.parse_module

    def ast_recorded(source, *args, **kwargs):
        texts["ast"].append(source)
        return parse_ast(source, *args, **kwargs)

    def cst_recorded(source, *args, **kwargs):
        texts["libcst"].append(source)
        return parse_cst(source, *args, **kwargs)

    ast.parse, cst.parse_module = ast_recorded, cst_recorded
    try:
        Linter(make_settings()).run(paths, jobs=1)
    finally:
        ast.parse, cst.parse_module = parse_ast, parse_cst
    # The run parses with the cyclic collector paused (``pipeline.collector``: a parse makes no
    # cycle); so do the pools, whose workers would otherwise also walk this process's heap.
    gc.collect()
    gc.freeze()
    # And the ast texts once more, each tree then visited node by node, once (the outline's own
    # walk): what any analysis written in Python over CPython's ast pays before it asks a node
    # anything.
    texts["ast_walk"] = texts["ast"]
    found = {}
    for parser, captured in texts.items():
        _FLOOR_TEXTS = (parser, captured)  # inherited by the forked workers
        chunk = max(8, min(256, len(captured) // (workers * 8) or 1))
        started = time.perf_counter()
        with ProcessPoolExecutor(max_workers=workers, initializer=gc.disable) as pool:
            failures = sum(pool.map(_floor_parse, range(len(captured)), chunksize=chunk))
        found[parser] = {"texts": len(captured), "lines": sum(t.count("\n") for t in captured),
                         "seconds": time.perf_counter() - started, "failures": failures}
    print(json.dumps(found))


_FLOOR_TEXTS: tuple[str, list[str]] = ("ast", [])


def _floor_parse(index: int) -> int:
    parser, captured = _FLOOR_TEXTS
    try:
        if parser == "ast":
            import ast

            ast.parse(captured[index])
        elif parser == "ast_walk":
            _visit_every_node(captured[index])
        else:
            # As the run parses: without each node's validation.
            from sync_lint.analysis.nodes import parse_module

            parse_module(captured[index])
        return 0
    except Exception:  # noqa: BLE001 -- a text the run could not parse either (it reported it)
        return 1


def _visit_every_node(text: str) -> int:
    """Parse with ``ast`` and visit each node once with the scout's own walk (a stack, no leaf
    field read, nothing asked of a node). The number of nodes visited."""
    import ast

    from sync_lint.pipeline.scout.syntax import walk

    return len(walk(ast.parse(text)))


# -- findings ----------------------------------------------------------------------------------
def findings_summary(report: str) -> dict:
    try:
        diagnostics = json.loads(report)
    except json.JSONDecodeError as exc:
        return {"error": f"json report unreadable: {exc}"}
    per_rule = collections.Counter(d["code"] for d in diagnostics)
    fixable = collections.Counter(d["code"] for d in diagnostics if d.get("fix"))
    internal = [f"{d['filename']}:{d['location']['row']}: {d['code']} {d['message']}" for d in diagnostics if d["code"] in ("GPU002", "GPU003", "GPU004", "GPU005")]
    return {
        "total": len(diagnostics),
        "per_rule": dict(sorted(per_rule.items())),
        "with_fix": dict(sorted(fixable.items())),
        "files_with_findings": len({d["filename"] for d in diagnostics}),
        "tool_errors": internal[:50],
        "tool_error_count": len(internal),
        "syntax_errors": [f"{d['filename']}:{d['location']['row']}: {d['message']}" for d in diagnostics if d["code"] == "GPU001"][:20],
    }


def checked_count(stderr: str) -> int | None:
    match = re.search(r"sync-lint: (\d+) files? checked", stderr)
    return int(match.group(1)) if match else None


# -- fix run -----------------------------------------------------------------------------------
def fix_check(tree: Path, src: Path, files: list[str], cache_dir: str) -> dict:
    """`fix --unsafe-fixes --diff` (crashes, exit status, diff validity), then a real fix of the
    work copy, then: does each fixed file compile and lint clean for the codes that were fixed?"""
    result: dict = {}
    diff = run_timed(sync_lint("fix", ".", "--unsafe-fixes", "--diff", *SETTINGS, "--no-cache"), tree)
    diff_files = re.findall(r"^\+\+\+ b/(.*)$", diff["stdout"], re.MULTILINE)
    result["diff"] = {
        "rc": diff["rc"], "seconds": diff["wall"], "maxrss_mb": diff["maxrss_mb"],
        "traceback": "Traceback (most recent call last)" in diff["stderr"],
        "stderr_tail": diff["stderr"][-1500:], "files": len(diff_files),
        "hunks": len(re.findall(r"^@@ ", diff["stdout"], re.MULTILINE)),
    }
    if diff_files and shutil.which("patch"):
        with tempfile.NamedTemporaryFile("w", suffix=".diff", delete=False, encoding="utf-8") as handle:
            handle.write(diff["stdout"])
        check = subprocess.run(["patch", "-p1", "--dry-run", "-s", "-i", handle.name], check=False, cwd=tree, capture_output=True, text=True)
        os.unlink(handle.name)
        result["diff"]["applies_with_patch"] = check.returncode == 0
        result["diff"]["patch_errors"] = (check.stdout + check.stderr)[-800:]

    # what the check said was fixable, per file, before fixing
    before = run_timed(sync_lint("check", ".", "--unsafe-fixes", *SETTINGS, "--cache-dir", cache_dir, "--output-format", "json", "-q"), tree)
    fixed_codes: dict[str, set[str]] = collections.defaultdict(set)
    for d in json.loads(before["stdout"] or "[]"):
        if d.get("fix"):
            fixed_codes[os.path.normpath(d["filename"])].add(d["code"])

    real = run_timed(sync_lint("fix", ".", "--unsafe-fixes", *SETTINGS, "--no-cache"), tree)
    gpu_errors = re.findall(r"^(.*?):(\d+):\d+: (GPU00[2-5]) (.*)$", real["stdout"], re.MULTILINE)
    result["fix"] = {
        "rc": real["rc"], "seconds": real["wall"], "traceback": "Traceback (most recent call last)" in real["stderr"],
        "stderr_tail": real["stderr"][-1500:], "tool_errors": [":".join(e) for e in gpu_errors][:50],
        "tool_error_count": len(gpu_errors),
    }
    changed = [f for f in files if (tree / f).read_bytes() != (src / f).read_bytes()]
    result["fix"]["files_changed"] = len(changed)
    result["fix"]["diff_and_fix_agree"] = sorted(os.path.normpath(f) for f in diff_files) == sorted(changed)

    after = run_timed(sync_lint("check", ".", "--unsafe-fixes", *SETTINGS, "--cache-dir", cache_dir, "--output-format", "json", "-q"), tree)
    remaining: dict[str, list[dict]] = collections.defaultdict(list)
    for d in json.loads(after["stdout"] or "[]"):
        remaining[os.path.normpath(d["filename"])].append(d)
    problems = []
    for relative in changed:
        new_text = (tree / relative).read_bytes()
        old_text = (src / relative).read_bytes()
        try:
            compile(old_text, relative, "exec", dont_inherit=True)
            compiled_before = True
        except (SyntaxError, ValueError):
            compiled_before = False
        try:
            compile(new_text, relative, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            if compiled_before:
                problems.append(f"{relative}: fixed file no longer compiles: {exc}")
        codes = fixed_codes.get(os.path.normpath(relative), set())
        for d in remaining.get(os.path.normpath(relative), []):
            if d["code"] == "GPU001":
                problems.append(f"{relative}:{d['location']['row']}: fixed file does not parse: {d['message']}")
            elif d["code"] in codes and d.get("fix"):
                problems.append(f"{relative}:{d['location']['row']}: {d['code']} still fixable after fix: {d['message']}")
    result["fix"]["problems"] = problems[:50]
    result["fix"]["problem_count"] = len(problems)
    # put the work tree back as it was
    for relative in changed:
        shutil.copyfile(src / relative, tree / relative)
    return result


# -- profile -----------------------------------------------------------------------------------
def profile(tree: Path, files: list[str], subset_size: int) -> dict:
    """Import time, prefilter pass counts over the whole tree, phase timing and cProfile of a
    serial in-process run over an evenly spaced subset."""
    out: dict = {}
    empty = Path(tempfile.mkdtemp()) / "empty.py"
    empty.write_text("")
    imp = run_timed([PY, "-X", "importtime", "-m", "sync_lint", "check", str(empty), "--isolated", "--no-cache", "-q"], ROOT)
    rows = []
    for line in imp["stderr"].splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            rows.append((int(m.group(2)), int(m.group(1)), len(m.group(3)), m.group(4)))
    top_level = [r for r in rows if r[2] == 1]
    out["startup"] = {
        "empty_file_run_s": imp["wall"],
        "import_total_ms": sum(r[0] for r in top_level) / 1000,
        "top_imports_ms": [(name, cum / 1000) for cum, _, _, name in sorted(top_level, reverse=True)[:10]],
        "sync_lint_imports_ms": sorted(((name, cum / 1000) for cum, _, _, name in rows if name.startswith("sync_lint")), key=lambda x: -x[1])[:8],
    }

    sys.path.insert(0, str(ROOT))
    import libcst as cst

    from sync_lint.api import make_settings
    from sync_lint.pipeline import lint_file, prefilter
    from sync_lint.pipeline.runner import Linter
    from sync_lint.pipeline.source import SourceError, read

    linter = Linter(make_settings())
    rules = linter.rules
    per_rule = collections.Counter()
    any_rule = 0
    read_s = 0.0
    prefilter_s = 0.0
    for relative in files:
        t0 = time.perf_counter()
        try:
            text = read(str(tree / relative)).text
        except SourceError:
            continue
        t1 = time.perf_counter()
        passing = [rule.code for rule in rules if prefilter.may_match(rule, text)]
        prefilter_s += time.perf_counter() - t1
        read_s += t1 - t0
        per_rule.update(passing)
        any_rule += bool(passing)
    out["prefilter"] = {
        "files": len(files),
        "rules": [r.code for r in rules],
        "parsed_files(any rule passes)": any_rule,
        "per_rule": {r.code: per_rule[r.code] for r in rules},
        "triggers": {r.code: list(r.triggers) for r in rules},
        "read_decode_s_serial_all": read_s,
        "prefilter_s_serial_all": prefilter_s,
    }

    step = max(1, len(files) // subset_size)
    subset = [str(tree / f) for f in files[::step]][:subset_size]
    phases = collections.Counter()
    calls = collections.Counter()

    def timer(name, func):
        def wrapped(*a, **k):
            t = time.perf_counter()
            try:
                return func(*a, **k)
            finally:
                phases[name] += time.perf_counter() - t
                calls[name] += 1
        return wrapped

    saved = []

    def patch(obj, attr, name):
        original = getattr(obj, attr)
        saved.append((obj, attr, original))
        setattr(obj, attr, timer(name, original))

    from sync_lint.pipeline import source as source_stage

    patch(source_stage, "read", "read+decode")
    patch(lint_file, "scan", "noqa scan")
    patch(cst, "parse_module", "libcst parse")
    from sync_lint.analysis import context as context_stage

    patch(context_stage, "FileContext", "FileContext()")  # lint_file imports it where it parses
    patch(lint_file, "_resolve_findings", "positions+fixes")
    patch(prefilter, "may_match", "prefilter")
    from sync_lint.pipeline import project_plan as project_plan_stage
    from sync_lint.pipeline import units as units_stage

    patch(project_plan_stage, "outline", "plan: outline")
    patch(units_stage.MaskPlan, "masked_text", "plan: masked text")
    original_lint_source = lint_file.lint_source

    def counting_lint_source(*a, **k):
        # runner calls its own binding; only lint_file's own fall-backs come through here
        calls["whole-file re-lints (masked text failed, or a fix needs the whole file)"] += 1
        return original_lint_source(*a, **k)

    saved.append((lint_file, "lint_source", original_lint_source))
    lint_file.lint_source = counting_lint_source
    for rule in rules:
        original_check = rule.check

        def check(ctx, _orig=original_check, _code=rule.code):
            t = time.perf_counter()
            try:
                return list(_orig(ctx))
            finally:
                phases[f"rule {_code}"] += time.perf_counter() - t
                calls[f"rule {_code}"] += 1

        rule.check = check
    try:
        t0 = time.perf_counter()
        facts = linter.lint_all(subset, jobs=1)
        t1 = time.perf_counter()
        from sync_lint.pipeline.project import ProjectIndex

        index = ProjectIndex(facts)
        t2 = time.perf_counter()
        for f in facts:
            linter.finalize(f, index)
        t3 = time.perf_counter()
    finally:
        for obj, attr, original in saved:
            setattr(obj, attr, original)
        for rule in rules:
            rule.__dict__.pop("check", None)
    total = t3 - t0
    phases["project index"] = t2 - t1
    phases["finalize (noqa, select)"] = t3 - t2
    # parse is nested inside nothing else we time; rules and positions are inside lint_source
    out["phases"] = {
        "subset_files": len(subset),
        "total_s": total,
        "per_phase_s": {k: round(v, 3) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])},
        "calls": dict(calls),
        "files_parsed": sum(1 for f in facts if f.parsed),
        "files_masked": sum(1 for f in facts if getattr(f, "masked", False)),
    }
    # the same subset, fast path (function-level masking) vs plain path, serial, no instrumentation
    for fast in (True, False):
        try:
            plain = Linter(make_settings(), fast=fast)
        except TypeError:  # an engine without the fast switch
            break
        t0 = time.perf_counter()
        plain.run(subset, jobs=1)
        out["phases"][f"run_serial_fast={fast}_s"] = time.perf_counter() - t0

    # cProfile of the same serial run (with overhead; for the ranking, not the absolute numbers)
    linter = Linter(make_settings())
    prof = cProfile.Profile()
    prof.enable()
    linter.run(subset, jobs=1)
    prof.disable()
    stream = io.StringIO()
    stats = pstats.Stats(prof, stream=stream)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(r"sync_lint|parse_module|MetadataWrapper", 25)
    out["cprofile"] = stream.getvalue()
    return out


# -- one tree ----------------------------------------------------------------------------------
def bench_tree(name: str, args) -> dict:
    spec, preferred = TREES[name]
    wheel, version, note = fetch(name, spec)
    src = unpack(wheel, version, name)
    label = f"{name}-{version}" + ("-quick" if args.quick else "")
    tree, files = work_tree(src, label, args.quick)
    src_view = src
    result: dict = PARTIAL.setdefault(name, {})
    result.update({
        "tree": label, "wheel": wheel.name, "version": version, "note": note,
        "files": len(files), "lines": count_lines(tree, files),
    })
    print(f"[bench] {label}: {len(files)} files, {result['lines']:,} lines", flush=True)
    jobs = os.cpu_count() or 1
    result["jobs"] = jobs
    repeat = args.repeat
    big = pick_big_file(tree, files, preferred)
    result["big_file"] = {"path": big, "lines": (tree / big).read_bytes().count(b"\n")}
    median = pick_median_file(tree, files)
    result["median_file"] = {"path": median, "lines": (tree / median).read_bytes().count(b"\n")}
    cache_dir = tempfile.mkdtemp(prefix="sync-lint-bench-cache-")
    report = str(Path(tempfile.mkdtemp()) / "report.json")
    t = result["timings"] = {}

    t["sync_lint_cold"] = series("sync-lint cold", sync_lint("check", ".", *SETTINGS, "--no-cache", "--output-format", "json", "-o", report), tree, repeat)
    result["files_checked_by_sync_lint"] = checked_count(t["sync_lint_cold"]["stderr_tail"])
    result["findings"] = findings_summary(Path(report).read_text(encoding="utf-8"))

    warm_cmd = sync_lint("check", ".", *SETTINGS, "--cache-dir", cache_dir, "--output-format", "json", "-o", report)
    print("[bench]   (priming the cache)", flush=True)
    prime = run_timed(warm_cmd, tree)
    t["sync_lint_cache_fill"] = {"median": prime["wall"], "min": prime["wall"], "max": prime["wall"], "cpu_median": prime["cpu"], "maxrss_mb": prime["maxrss_mb"], "rc": [prime["rc"]]}
    t["sync_lint_warm"] = series("sync-lint warm", warm_cmd, tree, repeat)
    warm_findings = findings_summary(Path(report).read_text(encoding="utf-8"))
    result["warm_findings_equal_cold"] = warm_findings.get("per_rule") == result["findings"].get("per_rule")

    original = (tree / big).read_bytes()

    def edit(i):
        (tree / big).write_bytes(original + f"\n# sync-lint bench edit {i} {time.time()}\n".encode())

    try:
        t["sync_lint_one_changed"] = series("sync-lint one file changed", warm_cmd, tree, repeat, before=edit)
        # What pre-commit meets after a check of the whole tree: the file edited, a copy of that
        # run's cache (each run from the same copy: a commit's run adds its own entries).
        commit_cache = cache_dir + "-commit"

        def edit_from_the_whole_runs_cache(i):
            shutil.rmtree(commit_cache, ignore_errors=True)
            shutil.copytree(cache_dir, commit_cache)
            edit(1000 + i)

        t["one_file_sync_lint_cached"] = series(
            "one file: sync-lint, cached", sync_lint("check", big, *SETTINGS, "--cache-dir", commit_cache), tree,
            max(repeat, 5), before=edit_from_the_whole_runs_cache,
        )
        shutil.rmtree(commit_cache, ignore_errors=True)
    finally:
        (tree / big).write_bytes(original)

    t["ruff_select_all"] = series("ruff --select ALL", [RUFF, "check", ".", "--select", "ALL", "--no-cache", "--exit-zero", "--isolated"], tree, repeat)
    t["flake8_E9F"] = series("flake8 --select E9,F", flake8(".", "--isolated", "--select", "E9,F", "--exit-zero"), tree, repeat)

    list_file = Path(tempfile.mkdtemp()) / "files.txt"
    list_file.write_text("".join(str(tree / f) + "\n" for f in files))
    script = str(Path(__file__).resolve())
    t["libcst_parse_pool"] = series(f"libcst parse ({jobs} workers)", [PY, script, "--_parse", str(list_file), "--_workers", str(jobs)], tree, repeat, keep_output=True)
    t["ast_parse_pool"] = series(f"ast parse ({jobs} workers)", [PY, script, "--_parse", str(list_file), "--_workers", str(jobs), "--_parser", "ast"], tree, repeat, keep_output=True)
    if not args.no_serial_parse:
        # once: it is the slowest measurement by far, and only a reference point
        t["libcst_parse_serial"] = series("libcst parse (serial)", [PY, script, "--_parse", str(list_file), "--_workers", "1"], tree, 1, keep_output=True)
    # once: its capture is a serial run of sync-lint (the pools alone are timed, inside it)
    t["parse_floor"] = series(f"parse floor ({jobs} workers)", [PY, script, "--_parse_floor", str(list_file), "--_workers", str(jobs)], tree, 1, keep_output=True)
    for key in ("libcst_parse_pool", "libcst_parse_serial", "ast_parse_pool", "parse_floor"):
        if key in t:
            last = t[key].pop("last")
            try:
                t[key]["inner"] = json.loads(last["stdout"].strip().splitlines()[-1])
            except (json.JSONDecodeError, IndexError):
                t[key]["inner"] = {"error": last["stderr"][-500:]}

    t["one_file_sync_lint"] = series("one file: sync-lint", sync_lint("check", big, *SETTINGS, "--no-cache"), tree, max(repeat, 5))
    t["one_file_flake8"] = series("one file: flake8 E9,F", flake8(big, "--isolated", "--select", "E9,F", "--exit-zero"), tree, max(repeat, 5))
    t["median_file_sync_lint"] = series("median file: sync-lint", sync_lint("check", median, *SETTINGS, "--no-cache"), tree, max(repeat, 5))
    t["median_file_flake8"] = series("median file: flake8 E9,F", flake8(median, "--isolated", "--select", "E9,F", "--exit-zero"), tree, max(repeat, 5))
    if args.one_file_sample:
        result["one_file_samples"] = one_file_samples(tree, files, args.one_file_sample, max(repeat, 3))
    t["one_file_flake8_with_plugin"] = series("one file: flake8 +plugin", flake8(big, "--isolated", "--select", "E9,F", "--exit-zero", plugin=True), tree, max(repeat, 5))

    if not args.no_fix:
        print("[bench]   fix --unsafe-fixes (diff, then a real fix of the work copy)", flush=True)
        result["fix_check"] = fix_check(tree, src_view, files, cache_dir)
    if args.profile:
        print("[bench]   profile", flush=True)
        result["profile"] = profile(tree, files, args.profile_files)
    shutil.rmtree(cache_dir, ignore_errors=True)
    result["targets"] = targets(t, result.get("one_file_samples", []))
    return result


def targets(t: dict, samples: list[dict]) -> list[dict]:
    cold = t["sync_lint_cold"]["median"]
    rows = [
        ("cold full scan <= 1.0 x ruff --select ALL", cold / t["ruff_select_all"]["median"], 1.0),
        ("warm <= 0.2 x own cold", t["sync_lint_warm"]["median"] / cold, 0.2),
        ("one file changed <= 0.3 x own cold", t["sync_lint_one_changed"]["median"] / cold, 0.3),
        ("one-file run <= 1.0 x flake8 --select E9,F", t["one_file_sync_lint"]["median"] / t["one_file_flake8"]["median"], 1.0),
        ("median-size file run <= 1.0 x flake8", t["median_file_sync_lint"]["median"] / t["median_file_flake8"]["median"], 1.0),
    ]
    out = [{"target": name, "ratio": ratio, "limit": limit, "pass": ratio <= limit} for name, ratio, limit in rows]
    # the same ratios on CPU time (user+sys), less sensitive to other load on a shared machine
    cpu = lambda k: t[k].get("cpu_median") or float("nan")
    cpu_ratios = [cpu("sync_lint_cold") / cpu("ruff_select_all"), cpu("sync_lint_warm") / cpu("sync_lint_cold"),
                  cpu("sync_lint_one_changed") / cpu("sync_lint_cold"), cpu("one_file_sync_lint") / cpu("one_file_flake8"),
                  cpu("median_file_sync_lint") / cpu("median_file_flake8")]
    for row, ratio in zip(out, cpu_ratios):
        row["cpu_ratio"] = ratio
    peak = max(v.get("maxrss_mb", 0) for k, v in t.items() if k.startswith(("sync_lint", "one_file_sync_lint", "median_file_sync_lint")))
    out.append({"target": "peak memory < 500 MB per process", "ratio": peak, "limit": 500, "pass": peak < 500, "unit": "MB"})
    for sample in samples:
        out.append({"target": f"one-file runs <= 1.0 x flake8 on {sample['label']} (worst of {sample['files']}; "
                              f"no slower on {sample['no_slower']}; median {sample['median_ratio']:.2f}x)",
                    "ratio": sample["max_ratio"], "limit": 1.0, "pass": sample["max_ratio"] <= 1.0})
    return out


# -- printing ----------------------------------------------------------------------------------
def print_tree(result: dict) -> None:
    print()
    print(f"=== {result['tree']} ({result['wheel']}) {result['files']} files, {result['lines']:,} lines; "
          f"sync-lint checked {result.get('files_checked_by_sync_lint')}; jobs={result['jobs']}")
    if result["note"]:
        print(f"    note: {result['note']}")
    print(f"    typical big file: {result['big_file']['path']} ({result['big_file']['lines']} lines); "
          f"median file: {result['median_file']['path']} ({result['median_file']['lines']} lines)")
    print(f"    {'measurement':<34}{'median':>9}{'min':>9}{'max':>9}{'cpu':>9}{'max RSS':>10}  exit   (seconds; cpu = user+sys of the process tree)")
    for key, value in result["timings"].items():
        if key == "parse_floor":
            continue  # its wall time is mostly the serial run that captures the texts: printed below
        extra = ""
        if "inner" in value and "failures" in value["inner"]:
            extra = f"  (in-process {value['inner']['seconds']:.2f}s, {value['inner']['failures']} unparsable)"
        tb = f"  TRACEBACKS: {value['tracebacks']}" if value.get("tracebacks") else ""
        print(f"    {key:<34}{value['median']:9.2f}{value['min']:9.2f}{value['max']:9.2f}{value.get('cpu_median', 0):9.2f}{value.get('maxrss_mb', 0):9.0f}M  {value.get('rc')}{extra}{tb}")
    t = result["timings"]
    cold = t["sync_lint_cold"]["median"]
    print(f"    ratios: cold/ruff={cold / t['ruff_select_all']['median']:.2f}  cold/flake8={cold / t['flake8_E9F']['median']:.2f}  "
          f"cold/libcst-pool={cold / t['libcst_parse_pool']['median']:.2f}  "
          f"ast-pool/ruff={t['ast_parse_pool']['median'] / t['ruff_select_all']['median']:.2f}  "
          + (f"libcst-serial/ruff={t['libcst_parse_serial']['median'] / t['ruff_select_all']['median']:.1f}" if "libcst_parse_serial" in t else ""))
    floor = t.get("parse_floor", {}).get("inner", {})
    if "ast" in floor and "libcst" in floor:
        total = floor["ast"]["seconds"] + floor["libcst"]["seconds"]
        print(f"    parse floor of this design (the texts a cold run parses, parsed again alone in a pool of "
              f"{result['jobs']}): ast {floor['ast']['seconds']:.2f} s ({floor['ast']['texts']} texts, "
              f"{floor['ast']['lines']:,} lines) + libcst {floor['libcst']['seconds']:.2f} s ({floor['libcst']['texts']} "
              f"texts, {floor['libcst']['lines']:,} lines, masked ones included) = {total:.2f} s = "
              f"{total / t['ruff_select_all']['median']:.2f}x ruff, {total / cold:.2f}x of sync-lint cold")
    if "ast_walk" in floor:
        walked = floor["ast_walk"]["seconds"]
        print(f"    floor of any analysis in Python over ast (the same ast texts parsed, then each tree's nodes "
              f"visited once and asked nothing): {walked:.2f} s = {walked / t['ruff_select_all']['median']:.2f}x ruff")
    print("    targets:")
    for row in result["targets"]:
        unit = row.get("unit", "x")
        value = f"{row['ratio']:.0f} MB" if unit == "MB" else f"{row['ratio']:.3f}x"
        cpu_note = f"   (on CPU time: {row['cpu_ratio']:.3f}x)" if "cpu_ratio" in row else ""
        print(f"      [{'PASS' if row['pass'] else 'FAIL'}] {row['target']:<48} {value}{cpu_note}")
    if "one_file_sync_lint_cached" in t:
        cached = t["one_file_sync_lint_cached"]["median"]
        print(f"    the same one-file run as pre-commit meets it after a check of the whole tree (the file edited, "
              f"a copy of that run's cache): {cached:.3f} s = {cached / t['one_file_flake8']['median']:.2f}x flake8")
    for sample in result.get("one_file_samples", []):
        print(f"    one-file runs on {sample['label']} ({sample['files']} of {sample['of']} files, spread over their sizes; "
              f"median of runs, seconds): sync-lint median {sample['median_sync_lint']:.3f}, flake8 median {sample['median_flake8']:.3f}")
        if "import_floor" in sample:
            print(f"      (`python -c 'import libcst'` alone: {sample['import_floor']:.3f} s, at or above flake8's whole run "
                  f"on {sample['flake8_under_floor']} of these files; the lint worker's import of libcst and the "
                  f"analyses: {sample.get('parser_import', float('nan')):.3f} s)")
        for row in sample["rows"]:
            print(f"      {row['lines']:>6} lines  {row['sync_lint']:6.3f} vs {row['flake8']:6.3f}  {row['ratio']:5.2f}x  {row['path']}")
    f = result["findings"]
    print(f"    findings: {f.get('total')} in {f.get('files_with_findings')} files; per rule: {f.get('per_rule')}")
    print(f"    with a fix: {f.get('with_fix')}; warm run found the same: {result['warm_findings_equal_cold']}")
    if f.get("tool_error_count"):
        print(f"    TOOL ERRORS ({f['tool_error_count']}):")
        for line in f["tool_errors"][:20]:
            print(f"      {line}")
    if f.get("syntax_errors"):
        print(f"    GPU001 syntax errors (first): {f['syntax_errors'][:5]}")
    if "fix_check" in result:
        d, x = result["fix_check"]["diff"], result["fix_check"]["fix"]
        print(f"    fix --diff: rc={d['rc']} {d['seconds']:.1f}s files={d['files']} hunks={d['hunks']} traceback={d['traceback']} "
              f"applies-with-patch={d.get('applies_with_patch')}")
        if d.get("applies_with_patch") is False:
            print(f"      patch: {d['patch_errors'][-300:]}")
        print(f"    fix (written): rc={x['rc']} files changed={x['files_changed']} traceback={x['traceback']} "
              f"tool errors={x['tool_error_count']} diff==fix={x['diff_and_fix_agree']} problems={x['problem_count']}")
        for line in x["tool_errors"][:10] + x["problems"][:10]:
            print(f"      {line}")
        if d["traceback"] or x["traceback"]:
            print("      stderr:", (d["stderr_tail"] if d["traceback"] else x["stderr_tail"])[-1200:])
    if "profile" in result:
        p = result["profile"]
        s = p["startup"]
        print(f"    startup: empty-file run {s['empty_file_run_s']:.2f}s, imports {s['import_total_ms']:.0f} ms; top: "
              + ", ".join(f"{n} {ms:.0f}ms" for n, ms in s["top_imports_ms"][:6]))
        print("      sync_lint modules: " + ", ".join(f"{n} {ms:.0f}ms" for n, ms in s["sync_lint_imports_ms"]))
        pf = p["prefilter"]
        print(f"    prefilter: parse needed for {pf['parsed_files(any rule passes)']}/{pf['files']} files; per rule: {pf['per_rule']}")
        print(f"      (serial read+decode of all files {pf['read_decode_s_serial_all']:.2f}s, prefilter {pf['prefilter_s_serial_all']:.2f}s)")
        ph = p["phases"]
        print(f"    phases, serial in-process over {ph['subset_files']} files ({ph['files_parsed']} parsed, {ph.get('files_masked')} masked): "
              f"total {ph['total_s']:.2f}s (instrumented); uninstrumented Linter.run: fast path "
              f"{ph.get('run_serial_fast=True_s', float('nan')):.2f}s, plain path {ph.get('run_serial_fast=False_s', float('nan')):.2f}s")
        print(f"      counts: { {k: v for k, v in ph['calls'].items() if not k.startswith('rule ')} }")
        for name, secs in ph["per_phase_s"].items():
            print(f"      {name:<28}{secs:8.3f}s  {100 * secs / max(ph['total_s'], 1e-9):5.1f}%  calls={ph['calls'].get(name, '')}")
        print("    cProfile (serial subset):")
        print("\n".join("      " + line for line in p["cprofile"].splitlines()[:75]))


_SCAN_LINTER = None


def _scan_init() -> None:
    global _SCAN_LINTER
    sys.path.insert(0, str(ROOT))
    from sync_lint.api import make_settings
    from sync_lint.pipeline.runner import Linter

    _SCAN_LINTER = Linter(make_settings())


class _Slow(Exception):
    pass


def _alarm(signum, frame):
    raise _Slow()


def _scan_one(args: tuple[str, int]) -> tuple[str, float, str]:
    import signal

    path, limit = args
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    started = time.perf_counter()
    status = "ok"
    try:
        facts = _SCAN_LINTER.lint_one(path)
        status = "masked" if getattr(facts, "masked", False) else ("parsed" if facts.parsed else "skipped")
    except _Slow:
        status = f"over {limit}s"
    except BaseException as exc:  # noqa: BLE001 (the scan reports every failure)
        status = f"{type(exc).__name__}: {str(exc)[:80]}"
    finally:
        signal.alarm(0)
    return path, time.perf_counter() - started, status


def per_file_scan(tree: Path, files: list[str], workers: int, limit: int) -> dict:
    """Lint each file on its own (no project rounds), in a pool, with a time limit per file."""
    from concurrent.futures import ProcessPoolExecutor

    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers, initializer=_scan_init) as pool:
        rows = list(pool.map(_scan_one, [(str(tree / f), limit) for f in files], chunksize=4))
    wall = time.perf_counter() - started
    rows.sort(key=lambda r: -r[1])
    statuses = collections.Counter(r[2] if r[2] in ("ok", "masked", "parsed", "skipped") else "problem" for r in rows)
    by_status = collections.defaultdict(float)
    for _, secs, status in rows:
        by_status[status if status in ("masked", "parsed", "skipped") else "problem"] += secs
    return {
        "wall_s": wall, "workers": workers, "limit_s": limit, "sum_s": sum(r[1] for r in rows),
        "counts": dict(statuses), "seconds_by_status": dict(by_status),
        "over_1s": sum(1 for r in rows if r[1] > 1), "over_10s": sum(1 for r in rows if r[1] > 10),
        "slowest": [(os.path.relpath(p, tree), round(secs, 2), status, Path(p).read_bytes().count(b"\n")) for p, secs, status in rows[:30]],
        "problems": [(os.path.relpath(p, tree), status) for p, _, status in rows if status not in ("ok", "masked", "parsed", "skipped")][:30],
    }


def run_rounds(tree: Path, files: list[str], jobs: int, limit: int) -> dict:
    """One whole-project ``Linter.run`` in-process, logging each ``lint_all`` call (the planned
    pass, then the whole-file re-lints of masked files whose fixes need the whole file) and each ProjectIndex."""
    import signal

    sys.path.insert(0, str(ROOT))
    from sync_lint.api import make_settings
    from sync_lint.pipeline import project, runner

    log: list[dict] = []
    original_lint_all = runner.Linter.lint_all
    original_index = project.ProjectIndex.__init__

    def lint_all(self, paths, *args, **kwargs):
        t = time.perf_counter()
        try:
            return original_lint_all(self, paths, *args, **kwargs)
        finally:
            log.append({"lint_all_files": len(paths), "planned": kwargs.get("plan") is not None,
                        "seconds": round(time.perf_counter() - t, 2)})
            print(f"[bench]   rounds: {log[-1]}", flush=True)

    def index_init(self, all_facts):
        t = time.perf_counter()
        original_index(self, all_facts)
        log.append({"project_index_files": len(all_facts), "functions": len(self.functions), "seconds": round(time.perf_counter() - t, 2)})
        print(f"[bench]   rounds: {log[-1]}", flush=True)

    runner.Linter.lint_all = lint_all
    project.ProjectIndex.__init__ = index_init
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    started = time.perf_counter()
    outcome = "finished"
    try:
        result = runner.Linter(make_settings()).run([str(tree / f) for f in files], jobs=jobs)
        findings = collections.Counter(d.code for d in result.diagnostics)
    except _Slow:
        outcome, findings = f"stopped after {limit}s", {}
    finally:
        signal.alarm(0)
        runner.Linter.lint_all = original_lint_all
        project.ProjectIndex.__init__ = original_index
    return {"outcome": outcome, "seconds": time.perf_counter() - started, "log": log, "findings": dict(findings)}


PARTIAL: dict = {}  # what a run has measured so far (written out if it is killed)


def _dump_partial(signum, frame) -> None:
    print(f"\n[bench] killed (signal {signum}); partial results:", flush=True)
    print(json.dumps(PARTIAL, indent=1, default=str)[-20000:], flush=True)
    sys.exit(3)


def main() -> int:
    import signal

    signal.signal(signal.SIGTERM, _dump_partial)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=sorted(TREES))
    parser.add_argument(
        "--config", help="a pyproject.toml for sync-lint to read instead of `--isolated` (a project's own options; "
        "the peers and the flake8 plugin's run keep their defaults)"
    )
    parser.add_argument("--quick", action="store_true", help="a ~10%% subset of each tree (plus package __init__ files)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json-out", help="write all results as JSON here")
    parser.add_argument("--profile", action="store_true", help="also: import time, prefilter counts, phase timing, cProfile")
    parser.add_argument("--profile-files", type=int, default=300, help="subset size for the serial profile")
    parser.add_argument("--no-fix", action="store_true", help="skip the fix --unsafe-fixes checks")
    parser.add_argument("--no-serial-parse", action="store_true", help="skip the serial libcst parse (slow)")
    parser.add_argument("--one-file-sample", type=int, default=24, metavar="N",
                        help="one-file runs on N files spread over the size distribution (0: none)")
    parser.add_argument("--per-file", type=int, metavar="LIMIT_S", help="only: lint each file on its own with a time limit; list the slowest")
    parser.add_argument("--one-file-only", action="store_true",
                        help="only: the one-file runs of the size-spread sample against flake8 (--one-file-sample N files, --repeat runs each)")
    parser.add_argument("--rounds-limit", type=int, default=300, help="with --per-file: time limit of the whole-project run")
    parser.add_argument("--_parse", help=argparse.SUPPRESS)
    parser.add_argument("--_workers", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--_parser", choices=("libcst", "ast"), default="libcst", help=argparse.SUPPRESS)
    parser.add_argument("--_parse_floor", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._parse_floor:
        parse_floor_worker(args._parse_floor, args._workers)
        return 0
    if args._parse:
        parse_worker(args._parse, args._workers, args._parser)
        return 0
    import libcst  # noqa: F401  (fail early outside the venv)

    if args.config:
        SETTINGS[:] = ["--config", os.path.abspath(args.config)]
        print(f"sync-lint reads {SETTINGS[1]} (the flake8 plugin's one-file run: the defaults)")

    install_as_a_user_has_it(ROOT)
    names = [args.only] if args.only else list(TREES)
    if args.per_file:
        for name in names:
            spec, _ = TREES[name]
            wheel, version, _ = fetch(name, spec)
            src = unpack(wheel, version, name)
            files = python_files(src)
            if args.quick:
                files = files[:: max(1, len(files) // 300)]
            scan = per_file_scan(src, files, os.cpu_count() or 1, args.per_file)
            print(json.dumps(scan, indent=1), flush=True)
            scan["rounds"] = run_rounds(src, files, os.cpu_count() or 1, args.rounds_limit)
            print(json.dumps(scan["rounds"], indent=1), flush=True)
            if args.json_out:
                Path(args.json_out).write_text(json.dumps(scan, indent=1), encoding="utf-8")
        return 0
    if args.one_file_only:
        samples = {}
        for name in names:
            spec, _ = TREES[name]
            wheel, version, _ = fetch(name, spec)
            src = unpack(wheel, version, name)
            print(f"[bench] {name}: one-file runs of {args.one_file_sample} files of each sample", flush=True)
            samples[name] = one_file_samples(src, python_files(src), args.one_file_sample, args.repeat)
            for sample in samples[name]:
                print(f"  {name}, {sample['label']}: no slower on {sample['no_slower']} / {sample['files']}, "
                      f"median {sample['median_ratio']:.2f}x, worst {sample['max_ratio']:.2f}x")
                for row in sorted(sample["rows"], key=lambda r: -r["ratio"]):
                    print(f"    {row['ratio']:5.2f}x  sync-lint {row['sync_lint']:.3f} s, flake8 {row['flake8']:.3f} s, "
                          f"{row['lines']:6d} lines  {row['path']}", flush=True)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(samples, indent=2), encoding="utf-8")
        return 1 if any(sample["max_ratio"] > 1.0 for tree in samples.values() for sample in tree) else 0
    results = {
        "python": sys.version.split()[0], "cpu_count": os.cpu_count(), "repeat": args.repeat, "quick": args.quick,
        "memory_method": "ru_maxrss from os.wait4() of each subprocess run: the largest single process of its tree",
        "ruff": subprocess.run([RUFF, "--version"], check=False, capture_output=True, text=True).stdout.strip(),
        "rules": [], "trees": {}, "loadavg_at_start": os.getloadavg(),
    }
    sys.path.insert(0, str(ROOT))
    from sync_lint.rules import all_rules

    results["rules"] = [r.code for r in all_rules()]
    print(f"[bench] rules registered: {results['rules']}", flush=True)
    for name in names:
        results["trees"][name] = bench_tree(name, args)
    print(f"\nsync-lint scale benchmark: python {results['python']}, {results['cpu_count']} cores, "
          f"{results['ruff']}, repeat={args.repeat}; load average at start {results['loadavg_at_start']}; memory: {results['memory_method']}")
    print(f"rules: {', '.join(results['rules'])}")
    for result in results["trees"].values():
        print_tree(result)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
        print(f"\nwrote {args.json_out}")
    failed = [row for r in results["trees"].values() for row in r["targets"] if not row["pass"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
