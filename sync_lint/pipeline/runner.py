"""Drive the pipeline over many files: lint each (in worker processes when it pays), close the
project-wide summaries, then resolve cross-file findings and apply suppressions."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field

from sync_lint import config
from sync_lint.diagnostics import Diagnostic
from sync_lint.pipeline import cache as cache_stage
from sync_lint.pipeline import prefilter, profile, scout, suppress
from sync_lint.pipeline.lint_file import FileFacts, lint_path, lint_source
from sync_lint.pipeline.project import ProjectIndex
from sync_lint.pipeline.source import SourceError, SourceFile, read
from sync_lint.rules import all_rules
from sync_lint.rules.base import Rule

# Below this many files a process pool costs more than it saves (start-up and imports).
PARALLEL_THRESHOLD = 48
MAX_CALLER_ROUNDS = 4


@dataclass
class RunResult:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files_checked: int = 0
    seconds: float = 0.0
    facts: list[FileFacts] = field(default_factory=list)
    index: ProjectIndex | None = None


class Linter:
    """One configured engine. Front ends build one and call ``run`` (or the finer methods)."""

    def __init__(self, settings: config.Settings, cache_dir: str | None = None, fast: bool = False) -> None:
        self.settings = settings
        # ``fast``: parse only the units of a file that rules can use (``pipeline.units``).
        # The plain path parses every file a rule's trigger occurs in, whole; both must agree.
        # Off by default: the caller rounds it needs cost about what the masking saves (full
        # vLLM, `sync-lint check --no-cache`: 136.6 CPU seconds against 134.8 plain).
        self.fast = fast
        rules = all_rules()
        self.enabled = config.enabled_codes(settings, {r.code for r in rules if r.preview}, [r.code for r in rules])
        self.rules: list[Rule] = [rule(settings) for rule in rules if rule.code in self.enabled and not rule.tool_rule]
        self.whole_project = RunScope(self.rules)
        self.cache = cache_stage.Cache(cache_dir, settings, sorted(self.enabled)) if cache_dir else None

    # -- per file -------------------------------------------------------------------------
    def lint_one(
        self, path: str, keep_callers_of: frozenset[str] = frozenset(), mask: bool | None = None,
        scope: RunScope | None = None, source: SourceFile | None = None,
    ) -> FileFacts:
        """``source``: the file as this run already read it (a small run reads its files first to
        choose its rules); None: read it now."""
        mask = self.fast if mask is None else mask
        scope = scope or self.whole_project

        def lint(source: SourceFile) -> FileFacts:
            return lint_source(
                source, self.settings, scope.rules, mask=mask, keep_callers_of=keep_callers_of, reexports=scope.reexports,
                alone=scope.scout,
            )

        if self.cache is not None:
            return self.cache.lint_path(path, lint, variant=(mask, keep_callers_of, scope.key()), source=source)
        return lint_path(path, lint) if source is None else lint(source)

    def lint_source(self, source: SourceFile, alone: bool = False) -> FileFacts:
        """Whole-file lint (the fix loop and the API use it: they need exact fixes). ``alone``:
        the file is all there is (an editor's buffer): only the rules that can report in it run."""
        scope = self.scope_of([source.text]) if alone else self.whole_project
        return lint_source(source, self.settings, scope.rules, mask=False, reexports=scope.reexports)

    def scope_of(self, texts: list[str]) -> RunScope:
        """What a run of just these files needs (``prefilter.rules_that_can_report``); a run of
        one file keeps the file's syntax scout, which also decides what of it to parse."""
        if len(texts) != 1:
            return RunScope(prefilter.rules_that_can_report(self.rules, texts, self.settings))
        file_scout = scout.Scout(texts[0], self.settings)
        rules = prefilter.rules_that_can_report(self.rules, texts, self.settings, file_scout)
        return RunScope(rules, reexports=False, scout=file_scout)

    def finalize(self, facts: FileFacts, index: ProjectIndex) -> list[Diagnostic]:
        """Local + resolved cross-file findings of one file, after selection and suppression."""
        found = list(facts.diagnostics)
        for pending in facts.pending:
            resolved = index.resolve(pending)
            if resolved is not None:
                found.append(resolved)
        file_ignores = config.ignored_for_file(self.settings, facts.path)
        judged = {code for code in self.enabled if not any(code.startswith(i) for i in file_ignores)}
        found = [d for d in found if d.is_tool_error or d.code == "GPU001" or d.code in judged]
        found = suppress.apply(facts.path, found, facts.suppressions, judged)
        return sorted(set(found), key=Diagnostic.sort_key)

    # -- many files -----------------------------------------------------------------------
    def lint_all(
        self, paths: list[str], jobs: int | None = None, progress=None,
        keep_callers_of: frozenset[str] = frozenset(), mask: bool | None = None, pool: _Pool | None = None,
        scope: RunScope | None = None, sources: dict[str, SourceFile] | None = None,
    ) -> list[FileFacts]:
        """Facts of ``paths``, in order. ``pool``: a started worker pool to use (the caller
        rounds reuse the first round's, so they pay no second start-up); without one, a pool is
        started for this call when the input is large enough to pay for it. ``scope``: the rules
        to run, for a small run (always linted here, in this process), and ``sources`` the files
        it read to choose them."""
        sources = sources or {}
        if pool is None:
            jobs = jobs or os.cpu_count() or 1
            if len(paths) < PARALLEL_THRESHOLD or jobs == 1:
                results = []
                for path in paths:
                    results.append(self.lint_one(path, keep_callers_of, mask, scope, sources.get(path)))
                    if progress:
                        progress(1)
                return results
            with _Pool(self, jobs) as pool:
                return pool.lint(paths, keep_callers_of, mask, progress)
        return pool.lint(paths, keep_callers_of, mask, progress)

    def run(self, paths: list[str], jobs: int | None = None, progress=None) -> RunResult:
        started = time.perf_counter()
        jobs = jobs or os.cpu_count() or 1
        with contextlib.ExitStack() as stack:
            pool = scope = None
            sources: dict[str, SourceFile] = {}
            if len(paths) >= PARALLEL_THRESHOLD and jobs > 1:
                pool = stack.enter_context(_Pool(self, jobs))
            elif len(paths) < PARALLEL_THRESHOLD:  # pre-commit's staged files: often nothing to parse
                sources = _read_readable(paths)
                with profile.span("prefilter"):
                    scope = self.scope_of([source.text for source in sources.values()])
            facts = self.lint_all(paths, jobs, progress, pool=pool, scope=scope, sources=sources)
            with profile.span("project summaries"):
                index = ProjectIndex(facts)
            if self.fast:
                facts, index = self._complete_masked(facts, index, jobs, pool, scope, sources)
        diagnostics: list[Diagnostic] = []
        with profile.span("cross-file findings and noqa"):
            for file_facts in facts:
                diagnostics.extend(self.finalize(file_facts, index))
        return RunResult(
            diagnostics=diagnostics,
            files_checked=len(paths),
            seconds=time.perf_counter() - started,
            facts=facts,
            index=index,
        )

    # Masked files hide units; those that call a function with a summary matter once the
    # project is known.
    def _complete_masked(
        self, facts: list[FileFacts], index: ProjectIndex, jobs, pool: _Pool | None, scope: RunScope | None,
        sources: dict[str, SourceFile],
    ):
        # Lint those files again keeping such units (a few rounds: a caller kept now may give its
        # own callers a summary).
        for _ in range(MAX_CALLER_ROUNDS):
            functions, methods = index.summarised_callees()
            redo: list[int] = []
            keep: set[str] = set(functions)
            for i, f in enumerate(facts):
                if not f.masked:
                    continue
                named = {m for path, cls, m in methods if m in f.masked_mentions and (path == f.path or cls in f.masked_mentions)}
                if named or not functions.isdisjoint(f.masked_mentions):
                    redo.append(i)
                    keep |= named
            if not redo:
                break
            # A round is small, but its files are the large ones: spread it over the pool
            # already started, whatever its size.
            round_pool = pool if pool is not None and len(redo) > 1 else None
            again = self.lint_all(
                [facts[i].path for i in redo], jobs, keep_callers_of=frozenset(keep), pool=round_pool, scope=scope,
                sources=sources,
            )
            for i, new in zip(redo, again):
                facts[i] = new
            index = ProjectIndex(facts)
        return facts, index


@dataclass(frozen=True)
class RunScope:
    """The rules a run needs, and whether its files meet others (``Linter.scope_of``)."""

    rules: list[Rule]
    reexports: bool = True
    scout: scout.Scout | None = None  # a run of one file: its syntax scout

    def key(self) -> tuple:
        """What the cache keys facts on: they differ with the rules that made them."""
        return (tuple(rule.code for rule in self.rules), self.reexports)


def _read_readable(paths: list[str]) -> dict[str, SourceFile]:
    """Each readable, decodable file, read once for the whole run (one that is not is read and
    reported when it is linted)."""
    sources = {}
    for path in paths:
        try:
            with profile.span("read and decode"):
                sources[path] = read(path)
        except SourceError:
            continue
    return sources


class _Pool:
    """Worker processes, each holding a copy of the linter, started once per run."""

    def __init__(self, linter: Linter, jobs: int) -> None:
        self.jobs = jobs
        # Imported here: a small run (what pre-commit does) starts no pool and skips the import.
        from concurrent.futures import ProcessPoolExecutor

        self.executor = ProcessPoolExecutor(max_workers=jobs, initializer=_worker_init, initargs=(linter, profile.active() is not None))

    def __enter__(self) -> _Pool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.executor.shutdown()

    def lint(self, paths: list[str], keep_callers_of: frozenset[str], mask: bool | None, progress=None) -> list[FileFacts]:
        # Chunks big enough to amortise pickling, small enough to balance 2+ workers.
        chunk = max(1 if len(paths) < PARALLEL_THRESHOLD else 8, min(256, len(paths) // (self.jobs * 8) or 1))
        batches = [(paths[i : i + chunk], keep_callers_of, mask) for i in range(0, len(paths), chunk)]
        results: list[FileFacts] = []
        parent = profile.active()
        for batch_result, timings in self.executor.map(_worker_lint_batch, batches):
            results.extend(batch_result)
            if parent is not None and timings is not None:
                parent.add(timings)
            if progress:
                progress(len(batch_result))
        return results


_WORKER_LINTER: Linter | None = None


def _worker_init(linter: Linter, profiling: bool) -> None:
    global _WORKER_LINTER
    _WORKER_LINTER = linter
    if profiling:
        profile.enable()


def _worker_lint_batch(batch):
    """A batch's facts, and the worker's profile totals for it (None when not profiling)."""
    assert _WORKER_LINTER is not None
    paths, keep_callers_of, mask = batch
    facts = [_WORKER_LINTER.lint_one(path, keep_callers_of, mask) for path in paths]
    profiler = profile.active()
    return facts, profiler.take() if profiler is not None else None
