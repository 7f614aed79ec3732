"""Drive the pipeline over many files: lint each (in worker processes when it pays), close the
project-wide summaries, then resolve cross-file findings and apply suppressions."""

from __future__ import annotations

import ast
import contextlib
import functools
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sync_lint import config
from sync_lint.analysis.modules import is_package_init
from sync_lint.analysis.project_names import NOTHING_FROM_THE_PROJECT, FileProjectNames
from sync_lint.diagnostics import Diagnostic
from sync_lint.pipeline import cache as cache_stage
from sync_lint.pipeline import collector, lint_file, prefilter, profile, scout, suppress
from sync_lint.pipeline.lint_file import (
    FileFacts,
    WouldParse,
    lint_path,
    lint_source,
    module_name_for,
)
from sync_lint.pipeline.project import ProjectIndex
from sync_lint.pipeline.source import SourceError, SourceFile, read
from sync_lint.rules import all_rules
from sync_lint.rules.base import Rule

# The project plan is imported where a run of many files makes one: a one-file run (what
# pre-commit and the flake8 plugin do) never needs it.
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self, TypeVar  # Python 3.11's; annotations only, so 3.10 runs

    from sync_lint.pipeline.project_plan import (
        FileOutline,
        KeptPlan,
        KeptUnits,
        ProjectNames,
        ProjectPlan,
    )

    T = TypeVar("T")

# The cache's name for what scans for custom op registrations found (``project_plan.RegistrationWords``).
_REGISTRATION_WORDS = "registration words"
# A file changed this shortly before a run may change again within its time of change's
# granularity (a second on some file systems) while the run reads it (``note_outlined``).
_SETTLED_NS = 2_000_000_000
# Below this many files a process pool costs more than it saves (start-up and imports).
PARALLEL_THRESHOLD = 48
# A small run's spare pool, for the files it reads beyond it (``_pool_for``), starts at fewer:
# those are outlined level by level and linted last, so a pool started once serves them all.
SPARE_POOL_THRESHOLD = 16
# and, where it has no lint workers (``_WarmWorker``: not on Linux), for the files it lints
# beyond it, at this much to parse (``_lint_cost``, bytes): what a
# commit's run after a run of the whole tree misses in the cache parses nothing (the files the
# plan keeps only the names of), yet were often 16 or more. On vLLM (no cache), a run of
# ``mamba/short_conv.py``, 78 KB to parse beyond it, took 1.17 s wall with the pool and 1.31 s
# without (medians of 5, a noisy machine); the threshold between is a judgement, not measured.
SPARE_POOL_LINT_COST = 64_000


class WorkerDied(Exception):
    """A worker process of the run ended abruptly (killed: out of memory, or a crash in native
    code such as the parser's): its files have no facts, so the run cannot report."""

    def __init__(self) -> None:
        super().__init__(
            "a worker process died (killed, out of memory, or a crash in native code); "
            "`--jobs 1` runs in one process and shows where"
        )


@dataclass
class RunResult:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files_checked: int = 0
    seconds: float = 0.0
    facts: list[FileFacts] = field(default_factory=list)
    index: ProjectIndex | None = None
    # The worker processes the run started (1: it ran in this process alone); a small run may
    # start its spare pool for the files beyond it (``_pool_for``), and hand its parses to its
    # two lint workers (``_WarmWorker``): one more for each that was handed any.
    workers: int = 1


class Linter:
    """One configured engine. Front ends build one and call ``run`` (or the finer methods)."""

    def __init__(self, settings: config.Settings, cache_dir: str | None = None, fast: bool = True) -> None:
        self.settings = settings
        # ``fast``: a run of many files parses only the functions the project plan keeps
        # (``pipeline.project_plan``). The plain path parses every file a rule's trigger
        # occurs in, whole; both must find the same.
        self.fast = fast
        rules = all_rules()
        self.enabled = config.enabled_codes(settings, {r.code for r in rules if r.preview}, [r.code for r in rules])
        self.rules: list[Rule] = [rule(settings) for rule in rules if rule.code in self.enabled and not rule.tool_rule]
        self.whole_project = RunScope(self.rules)
        self.cache = cache_stage.Cache(cache_dir, settings, sorted(self.enabled)) if cache_dir else None

    # -- per file -------------------------------------------------------------------------
    def lint_one(
        self, path: str, kept: KeptUnits | None = None, scope: RunScope | None = None, source: SourceFile | None = None,
        project: FileProjectNames = NOTHING_FROM_THE_PROJECT, beyond: bool = False, parse: bool = True,
    ) -> FileFacts:
        """``kept``: the functions to parse (``project_plan``); None: all. ``source``: the file as
        this run already read it (a small run reads its files first to choose its rules); None:
        read it now. ``project``: what the run's other files tell of it (``ProjectNames``).
        ``beyond``: a file outside the run, read for its summaries alone (its findings are not
        reported), which cached facts of it made with more rules and more units may serve.
        ``parse``: False raises ``lint_file.WouldParse`` where the lint needs libcst (nothing is
        cached then)."""
        scope = scope or self.whole_project

        def lint(source: SourceFile) -> FileFacts:
            return lint_source(
                source, self.settings, scope.rules, alone=scope.scout, kept=kept, project=project, parse=parse
            )

        if self.cache is not None:
            variant, wider = self._facts_key(path, kept, scope, project, beyond)
            return self.cache.lint_path(path, lint, variant=variant, source=source, wider=wider)
        return lint_path(path, lint) if source is None else lint(source)

    def _facts_key(
        self, path: str, kept: KeptUnits | None, scope: RunScope, project: FileProjectNames, beyond: bool,
    ) -> tuple[tuple, cache_stage.Wider | None]:
        """What the cache keeps ``lint_one``'s facts of ``path`` under, and which facts made with
        more may serve (``_wider``). The module name is part of what the facts hold (their
        summaries' names), and the file's text does not decide it: adding an ``__init__.py``
        above it changes it. Nor does it decide what other files tell of it."""
        module_name = module_name_for(path)
        return (kept, scope.key(), module_name, project), _wider(scope, kept, module_name, project, beyond)

    def cached_first(
        self, paths: list[str], lookup: Callable[[str], T | None], start: Callable[[list[str]], Callable[[], list[T]]],
    ) -> Callable[[], list[T]]:
        """The result for each of ``paths``, when the returned call asks for them: the cache's
        (``lookup``), looked up in this process now, and for the others what ``start`` began
        (called once, now, with those left; none: not called; it returns the call that waits for
        them). A small run hands only the misses to a pool, and starts one only if they are many
        enough (``_pool_for``): after a run of the whole tree, the files a commit's run reads
        beyond it are mostly in the cache, where a pool's start costs more than loading them here."""
        # ``list``, called, is the empty result of nothing to begin.
        if self.cache is None:
            return start(paths) if paths else list
        found = [lookup(path) for path in paths]
        missing = [path for path, result in zip(paths, found) if result is None]
        made = start(missing) if missing else list

        def results() -> list[T]:
            rest = iter(made())
            return [result if result is not None else next(rest) for result in found]

        return results

    def outline_one(self, path: str, source: SourceFile | None = None) -> FileOutline:
        """The file's outline for the project plan (cached like facts), under every rule enabled,
        whatever rules the run needs: a rule whose triggers a file does not hold outlines nothing
        there (``project_plan.outline``), so the outlines of the files of a small run are those
        its rules would make, and those of the files beyond it are the ones a run of the whole
        tree made and cached (else each set of staged files would make its own)."""
        module_name = module_name_for(path)
        is_package = is_package_init(path)

        from sync_lint.pipeline import project_plan

        def make(source: SourceFile) -> FileOutline:
            return project_plan.outline(source, self.settings, self.rules, module_name, is_package)

        def unreadable(path: str, error: SourceError) -> FileOutline:
            return project_plan.FileOutline(path)  # linting it reports why

        if self.cache is not None:
            return self.cache.lint_path(
                path, lambda source: project_plan.note_registration_word(make(source), source),
                variant=self._outline_key(module_name), source=source,
                on_error=unreadable, kind=project_plan.FileOutline,
            )
        if source is None:
            try:
                source = read(path)
            except SourceError as error:
                return unreadable(path, error)
        return make(source)

    def lint_source(
        self, source: SourceFile, alone: bool = False, project: FileProjectNames = NOTHING_FROM_THE_PROJECT,
    ) -> FileFacts:
        """Whole-file lint (the fix loop and the API use it: they need exact fixes). ``alone``:
        the file is all there is (an editor's buffer): only the rules that can report in it run,
        and it hears of the files beside it as a run of it alone does (``lone_scope``).
        ``project``: as for ``lint_one`` (the fix loop's run found it)."""
        if not alone:
            return lint_source(source, self.settings, self.whole_project.rules, project=project)
        scope, names = self.lone_scope(source.path, source)
        from sync_lint.pipeline import project_plan

        def lint(heard: FileProjectNames) -> FileFacts:
            return lint_source(source, self.settings, scope.rules, project=heard)

        facts = lint(names.of(source.path) if names is not None else project)
        return project_plan.hearing_ops_alone(source, self.settings, facts, names, lint)[0]

    def scope_of(
        self, texts: list[str], module_name: str | None = None, module_bases: tuple[str, ...] = (),
        tree: ast.Module | None = None, alone: bool = True,
    ) -> RunScope:
        """What a run of just these files needs (``prefilter.rules_that_can_report``); a run of
        one file checked alone keeps the file's syntax scout, which also decides what of it to
        parse (``module_name``, ``module_bases`` and ``tree``: that file's, where known, for
        ``Scout``). ``alone``: one text is a file checked alone (False: a run that reads beyond it)."""
        if len(texts) != 1 or not alone:
            return RunScope(prefilter.rules_that_can_report(self.rules, texts, self.settings, alone=False))
        file_scout = scout.Scout(texts[0], self.settings, tree, module_name, module_bases)
        rules = prefilter.rules_that_can_report(self.rules, texts, self.settings, file_scout)
        return RunScope(rules, scout=file_scout)

    def scope_named(self, codes: tuple[str, ...] | None) -> RunScope:
        """The scope of a run of several files in a worker, from its rules' codes (``_rule_codes``)."""
        if codes is None:
            return self.whole_project
        return RunScope([rule for rule in self.rules if rule.code in codes])

    def lone_scope(self, path: str, source: SourceFile) -> tuple[RunScope, ProjectNames | None]:
        """The scope of a run of one file checked alone (``scope_of``), and what it hears of the files beyond
        it: which of its classes' bases other files make ``nn.Module`` subclasses
        (``project_plan.names_of_a_lone_file``), as a run of every file would tell it."""
        from sync_lint.pipeline import project_plan

        module_name = module_name_for(path)
        text = source.text
        if not project_plan.may_hear_of_bases(self.rules, text):
            return self.scope_of([text], module_name), None
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return self.scope_of([text], module_name), None  # the lint reports why
        with profile.span("outline: bases beyond the run"):
            names = project_plan.names_of_a_lone_file(source, self.settings, module_name, is_package_init(path), tree)
        return self.scope_of([text], module_name, names.of(path).module_bases, tree), names

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
        self, paths: list[str], jobs: int | None = None, progress=None, plan: ProjectPlan | KeptPlan | None = None,
        pool: _Pool | None = None, scope: RunScope | None = None, sources: dict[str, SourceFile] | None = None,
        names: ProjectNames | None = None, beyond: bool = False, warm: _WarmWorker | None = None,
    ) -> list[FileFacts]:
        """Facts of ``paths``, in order. ``plan``: the project plan (None: parse whole).
        ``pool``: a started worker pool to use; without one, a pool is started for this call
        when the input is large enough to pay for it. ``scope``: the rules to run, for a small
        run (linted in this process, or its parses in ``warm``, the run's lint workers:
        ``_WarmWorker``), and ``sources`` the files it read to choose them. ``names``: what each
        file hears from the others (``ProjectNames``; the plan's own where there is one).
        ``beyond``: files outside the run (``lint_one``)."""
        return self.start_lint_all(paths, jobs, progress, plan, pool, scope, sources, names, beyond, warm)()

    def start_lint_all(
        self, paths: list[str], jobs: int | None = None, progress=None, plan: ProjectPlan | KeptPlan | None = None,
        pool: _Pool | None = None, scope: RunScope | None = None, sources: dict[str, SourceFile] | None = None,
        names: ProjectNames | None = None, beyond: bool = False, warm: _WarmWorker | None = None,
    ) -> Callable[[], list[FileFacts]]:
        """``lint_all`` begun, and the call that returns its facts: with ``pool``, the files are
        in its workers' hands when this returns, and this process may do other work meanwhile (a
        small run lints its own files while its spare pool lints those beyond it); without one,
        the call lints them."""
        sources = sources or {}
        names = plan.names if plan is not None else names
        kept = [plan.units_to_keep(path) if plan is not None else None for path in paths]
        items = [(path, keep, names.of(path) if names else NOTHING_FROM_THE_PROJECT) for path, keep in zip(paths, kept)]
        jobs = jobs or os.cpu_count() or 1
        if pool is None and warm is not None:
            return self._start_lint_warm(items, warm, scope, sources, progress, beyond)
        if pool is None and (len(paths) < PARALLEL_THRESHOLD or jobs == 1):

            def serially() -> list[FileFacts]:
                results = []
                for path, keep, project in items:
                    results.append(self.lint_one(path, keep, scope, sources.get(path), project, beyond))
                    if progress:
                        progress(1)
                return results

            return serially
        work = functools.partial(_worker_lint_batch, codes=_rule_codes(scope), beyond=beyond)
        if pool is not None:
            return pool.start_map(work, items, progress, _lint_costs(paths, kept))
        with _Pool(self, jobs) as started:
            facts = started.map(work, items, progress, _lint_costs(paths, kept))
        return lambda: facts

    def _start_lint_warm(
        self, items: list[tuple[str, KeptUnits | None, FileProjectNames]], warm: _WarmWorker, scope: RunScope | None,
        sources: dict[str, SourceFile], progress, beyond: bool,
    ) -> Callable[[], list[FileFacts]]:
        """``start_lint_all`` with a small run's lint workers (``_WarmWorker``): the files to parse
        are handed to them, and those the plan keeps only the names of are linted here, now, while
        they work; one of them that needs a parse after all (its masked text does not parse:
        ``lint_file._names_only``) goes to the workers too. This process never imports libcst."""
        codes = _rule_codes(scope)
        to_parse = [i for i, (_, keep, _) in enumerate(items) if not _parses_nothing(keep)]
        asked = [(to_parse, warm.start_lint([items[i] for i in to_parse], codes, beyond))] if to_parse else []
        found: list[FileFacts | None] = [None] * len(items)
        would_parse = []
        handed = set(to_parse)
        for i, (path, keep, project) in enumerate(items):
            if i not in handed:
                try:
                    found[i] = self.lint_one(path, keep, scope, sources.get(path), project, beyond, parse=False)
                except WouldParse:
                    would_parse.append(i)
        if would_parse:
            asked.append((would_parse, warm.start_lint([items[i] for i in would_parse], codes, beyond)))
        if progress:
            progress(len(items) - len(to_parse) - len(would_parse))

        def results() -> list[FileFacts]:
            for indices, answer in asked:
                for i, facts in zip(indices, answer()):
                    found[i] = facts
                if progress:
                    progress(len(indices))
            return found

        return results

    def _start_lint_beyond(
        self, paths: list[str], jobs: int, plan: ProjectPlan | KeptPlan | None, pool: _Pool | None,
        spare: _Pool | None, scope: RunScope | None, names: ProjectNames | None, warm: _WarmWorker | None = None,
    ) -> Callable[[], list[FileFacts]]:
        """The facts of the files beyond the run it reads summaries of (``ProjectPlan.silent``),
        begun (``start_lint_all``): the cache's first, the others linted (``cached_first``) in a
        small run's lint workers, which have the parser imported, else in the run's pool or, if
        they are many enough, its spare one, each of whose workers would import it first."""
        names = plan.names if plan is not None else names

        def cached(path: str) -> FileFacts | None:
            kept = plan.units_to_keep(path) if plan is not None else None
            project = names.of(path) if names else NOTHING_FROM_THE_PROJECT
            variant, wider = self._facts_key(path, kept, scope or self.whole_project, project, beyond=True)
            return self.cache.lookup(path, variant, wider=wider)

        def start(missing: list[str]) -> Callable[[], list[FileFacts]]:
            if warm is not None:
                return self.start_lint_all(missing, jobs, plan=plan, scope=scope, names=names, beyond=True, warm=warm)
            costs = _lint_costs(missing, [plan.units_to_keep(path) if plan is not None else None for path in missing])
            return self.start_lint_all(
                missing, jobs, plan=plan, pool=_pool_for(missing, pool, spare, costs), scope=scope, names=names, beyond=True,
            )

        return self.cached_first(paths, cached, start)

    def names_all(self, paths: list[str], pool: _Pool | None, sources: dict[str, SourceFile]) -> ProjectNames:
        """What each file hears from the others, for the plain path (which makes no plan): every
        file's imports, classes and op registrations read as the outline reads them."""
        from sync_lint.pipeline import project_plan

        with profile.span("outline: names"):
            if pool is None:
                outlines = [_names_outline(self.settings, path, sources.get(path)) for path in paths]
            else:
                outlines = pool.map(_worker_names_batch, paths, costs=[_file_size(path) for path in paths])
        return project_plan.ProjectNames(outlines, beyond=self._outlines_beyond(outlines))

    def _outlines_beyond(self, outlines: list[FileOutline], looked_at: dict[str, int | None] | None = None) -> list[FileOutline]:
        """The files outside the run its classes' bases may be in (``project_plan.outlines_beyond``)."""
        from sync_lint.pipeline import project_plan

        with profile.span("outline: bases beyond the run"):
            return project_plan.outlines_beyond(outlines, self.settings, looked_at)

    def outline_all(
        self, paths: list[str], pool: _Pool | None, sources: dict[str, SourceFile], spare: _Pool | None = None,
    ) -> ProjectPlan | KeptPlan:
        """The project plan of a run of these files; with a cache, what it keeps of each file,
        made again only when a file, its module name or the configuration changed. ``spare``:
        a pool for the files beyond a small run (``_plan``)."""
        # Only a run of many files plans.
        from sync_lint.pipeline.project_plan import KeptPlan

        if self.cache is None:
            return self._plan(paths, pool, sources, spare)
        # Made of outlines under every rule enabled (``outline_one``): the same for any rules a run needs.
        variant = ("plan", self.whole_project.key())
        return self.cache.whole_run(
            paths, variant, lambda: self._plan(paths, pool, sources, spare).kept_by_file(), KeptPlan,
            sources=sources, still_valid=KeptPlan.beyond_unchanged,
        )

    def _plan(
        self, paths: list[str], pool: _Pool | None, sources: dict[str, SourceFile], spare: _Pool | None = None,
    ) -> ProjectPlan:
        """``spare``: a pool not yet started, for a small run that reads files beyond it (``_pool_for``)."""
        started = time.time_ns()  # before any file is read for its outline
        with profile.span("outline"):
            outlines = self._outline_many(paths, pool, sources)
        from sync_lint.pipeline import project_plan

        def outline_callees(paths: list[str]) -> list[FileOutline]:
            with profile.span("outline: callees beyond the run"):
                return self.cached_first(
                    paths, self._cached_outline,
                    lambda missing: functools.partial(self._outline_many, missing, _pool_for(missing, pool, spare), {}),
                )()

        loaded: list[project_plan.RegistrationWords] = []

        def registration_words() -> project_plan.RegistrationWords | None:
            """What earlier runs' scans for registrations found, from the cache (``RegistrationWords``)."""
            if self.cache is None:
                return None
            words = self.cache.load_shared(_REGISTRATION_WORDS, project_plan.RegistrationWords)
            words = words or project_plan.RegistrationWords()
            loaded.append(words)
            return words

        with profile.span("project plan"):
            plan = project_plan.plan_reading_callees(
                outlines, self._outlines_beyond, outline_callees, follow_calls=self.settings["follow-imports"] == "silent",
                registration_words=registration_words,
            )
        # What the outlines read of each file serves the next scan (``RegistrationWords``).
        words = loaded[0] if loaded else registration_words()
        if words is not None:
            words.note_outlined(list(plan.outlines.values()), started - _SETTLED_NS)
            if words.changed:
                self.cache.store_shared(_REGISTRATION_WORDS, words)
        return plan

    def _silent_for_plain(
        self, paths: list[str], pool: _Pool | None, sources: dict[str, SourceFile], spare: _Pool | None = None,
    ) -> list[str]:
        """The files a plan of the run would lint silently (``ProjectPlan.silent``), for the plain
        path, which makes no plan: it outlines the run for this alone, unless the run holds
        every file of its packages."""
        from sync_lint.pipeline import project_plan

        if project_plan.holds_its_packages(paths):
            return []
        return list(self._plan(paths, pool, sources, spare).silent)

    def _outline_key(self, module_name: str) -> tuple:
        return ("outline", self.whole_project.key(), module_name)

    def _cached_outline(self, path: str) -> FileOutline | None:
        from sync_lint.pipeline.project_plan import FileOutline

        assert self.cache is not None
        return self.cache.lookup(path, self._outline_key(module_name_for(path)), kind=FileOutline)

    def _outline_many(self, paths: list[str], pool: _Pool | None, sources: dict[str, SourceFile]) -> list[FileOutline]:
        if pool is None:
            return [self.outline_one(path, sources.get(path)) for path in paths]
        return pool.map(_worker_outline_batch, paths, costs=[_file_size(path) for path in paths])

    def run(self, paths: list[str], jobs: int | None = None, progress=None) -> RunResult:
        started = time.perf_counter()
        jobs = jobs or os.cpu_count() or 1
        # The run holds every file's outline, then its facts, and makes no garbage cycle worth
        # a pass over all that (``collector``); a worker collects between its files.
        # A run of one file is checked alone (``lone_scope``) only where the run follows no
        # imports: else it reads what its findings rest on beyond it, as a run of two files does,
        # and pre-commit with one staged file reports what it reports with two.
        alone = len(paths) == 1 and self.settings["follow-imports"] == "skip"
        with contextlib.ExitStack() as stack, collector.paused():
            pool = scope = plan = None
            sources: dict[str, SourceFile] = {}
            spare = None  # a small run's pool, started only if it reads enough files beyond it
            if len(paths) >= PARALLEL_THRESHOLD and jobs > 1:
                pool = stack.enter_context(_Pool(self, jobs))
            elif len(paths) < PARALLEL_THRESHOLD:  # pre-commit's staged files: often nothing to parse
                sources = _read_readable(paths)
                if jobs > 1 and paths and not alone:
                    spare = stack.enter_context(_Pool(self, jobs))
            names = None
            warm = None  # a small run's lint workers, importing the parser while this process plans
            if sources:
                with profile.span("prefilter"):
                    if alone and len(sources) == 1:
                        scope, names = self.lone_scope(*next(iter(sources.items())))
                    else:
                        scope = self.scope_of([source.text for source in sources.values()], alone=False)
                if spare is not None and scope.rules and _WarmWorker.available():
                    warm = stack.enter_context(_WarmWorker(self, sources))
            silent: list[str] = []  # files beyond the run it reads summaries of (``plan_reading_callees``)
            if self.fast and paths and not alone:
                plan = self.outline_all(paths, pool, sources, spare)
                names = plan.names
                silent = list(plan.silent)
            elif paths and not alone:
                silent = self._silent_for_plain(paths, pool, sources, spare)
                names = self.names_all([*paths, *silent], _pool_for([*paths, *silent], pool, spare), sources)
            # The files beyond the run are handed to a pool first, where one lints them, and
            # linted there while this process lints the run's own (a small run's spare pool).
            facts_beyond = self._start_lint_beyond(silent, jobs, plan, pool, spare, scope, names, warm) if silent else list
            facts = self.lint_all(
                paths, jobs, progress, plan=plan, pool=pool, scope=scope, sources=sources, names=names, warm=warm
            )
            if alone and len(sources) == 1:  # a run that is not alone reads registrations in its plan
                from sync_lint.pipeline import project_plan

                source = sources[paths[0]]
                facts[0], names = project_plan.hearing_ops_alone(
                    source, self.settings, facts[0], names, lambda heard: self.lint_one(source.path, None, scope, source, heard)
                )
            beside = facts_beyond()
            with profile.span("project summaries"):
                index = ProjectIndex([*facts, *beside], follow_unread=not alone, names=names)
            with profile.span("cross-file findings and noqa"):
                diagnostics = [self.finalize(file_facts, index) for file_facts in facts]
            # A masked file that reports a finding whose fix needs the whole module
            # (``FileFacts.fixes_need_whole_file``): its fixes are planned on the whole file.
            redo = [
                i for i, file_facts in enumerate(facts) if file_facts.fixes_need_whole_file and any(
                    (d.line, d.col, d.code) in file_facts.fixes_need_whole_file for d in diagnostics[i]
                )
            ]
            if redo:
                with profile.span("whole files for fixes"):
                    again = self.lint_all([facts[i].path for i in redo], jobs, pool=pool if len(redo) > 1 else None,
                                          scope=scope, sources=sources, names=names, warm=warm)
                    for i, whole in zip(redo, again):
                        facts[i] = whole
                        diagnostics[i] = self.finalize(whole, index)
        if self.cache is not None:
            with profile.span("cache prune"):
                self.cache.prune()
        return RunResult(
            diagnostics=[d for found in diagnostics for d in found],
            files_checked=len(paths),
            seconds=time.perf_counter() - started,
            facts=facts,
            index=index,
            workers=max((each.jobs for each in (pool, spare) if each is not None and each.started), default=1)
            + (warm.used if warm is not None else 0),
        )


def _wider(
    scope: RunScope, kept: KeptUnits | None, module_name: str, project: FileProjectNames, beyond: bool,
) -> cache_stage.Wider | None:
    """How a lint's facts are recorded in the cache for later runs of few files, and, for a file
    ``beyond`` the run, which recorded facts of it may serve (``cache.Wider``): those made under
    every rule this lint runs and keeping every function it keeps (``KeptUnits.within``). A
    commit's pre-commit run after a run of the whole tree (or one of other staged files) then
    reads what that run made of the files beyond it instead of linting each again. A file checked
    alone keeps only what matters to it alone, and serves no other run. A lint that parses
    nothing with libcst (``KeptUnits.names_only``; no rule's trigger in the file) costs less than
    its record in the ledger, which a run of the whole tree would write for every file."""
    if scope.scout is not None or _parses_nothing(kept):
        return None
    codes = tuple(rule.code for rule in scope.rules)
    made_with = (codes, kept.as_recorded() if kept is not None else None)

    def serves(made: tuple) -> bool:
        rules, wider = made
        return set(codes) <= set(rules) and (wider is None if kept is None else kept.within(wider))

    return cache_stage.Wider((module_name, project), made_with, serves if beyond else None)


@dataclass(frozen=True)
class RunScope:
    """The rules a run needs, and for a run of one file checked alone its syntax scout (``Linter.scope_of``)."""

    rules: list[Rule]
    scout: scout.Scout | None = None  # a run of one file checked alone: its syntax scout

    def key(self) -> tuple:
        """What the cache keys facts on: they differ with the rules that made them, and a file
        checked on its own keeps only what can matter to it alone."""
        return (tuple(rule.code for rule in self.rules), self.scout is not None)


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
    """Worker processes, each holding a copy of the linter: started at the first ``map`` (a small
    run's spare pool may never be), then kept for the run."""

    def __init__(self, linter: Linter, jobs: int) -> None:
        self.jobs = jobs
        self._linter = linter
        self._executor = None  # started at the first ``map``: a small run may never need it

    @property
    def started(self) -> bool:
        return self._executor is not None

    @property
    def executor(self):
        if self._executor is None:
            # Imported here: a small run (what pre-commit does) starts no pool and skips the import.
            from concurrent.futures import ProcessPoolExecutor

            self._executor = ProcessPoolExecutor(
                max_workers=self.jobs, initializer=_worker_init, initargs=(self._linter, profile.active() is not None)
            )
        return self._executor

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        if self._executor is not None:
            self._executor.shutdown()

    def map(self, work, items: list, progress=None, costs: list[float] | None = None) -> list:
        """``work`` over ``items`` in batches, results in order. ``costs``: an estimate of each
        item's work (``_lint_cost``, a file's size); the costliest go out first, in batches that
        shrink as the work left does (guided self-scheduling), so that no worker is still busy
        with a long batch when the others are done. Without costs, batches of equal count."""
        return self.start_map(work, items, progress, costs)()

    def start_map(self, work, items: list, progress=None, costs: list[float] | None = None) -> Callable[[], list]:
        """``map`` begun: every batch is in the workers' hands when this returns; the returned
        call waits for the results."""
        if costs is None:
            # Chunks big enough to amortise pickling, small enough to balance 2+ workers.
            chunk = max(1 if len(items) < PARALLEL_THRESHOLD else 8, min(256, len(items) // (self.jobs * 8) or 1))
            batches = [list(range(i, min(i + chunk, len(items)))) for i in range(0, len(items), chunk)]
        else:
            batches = _guided_batches(costs, self.jobs)
        # Imported with the executor (``executor``): a run that starts none skips it.
        from concurrent.futures.process import BrokenProcessPool

        executor = self.executor
        try:
            # ``Executor.map`` submits every batch before it returns.
            done = executor.map(work, [[items[i] for i in b] for b in batches])
        except BrokenProcessPool:
            raise WorkerDied from None

        def results() -> list:
            found: list = [None] * len(items)
            try:
                for batch, (batch_result, timings) in zip(batches, done):
                    for index, result in zip(batch, batch_result):
                        found[index] = result
                    profile.add_worker_totals(timings)
                    if progress:
                        progress(len(batch_result))
            except BrokenProcessPool:
                raise WorkerDied from None
            return found

        return results


class _WarmWorker:
    """Two worker processes for the parses of a small run (pre-commit's staged files): one forked
    at the run's start, which imports the parser and the analyses (``lint_file.import_the_parser``:
    libcst alone takes 0.12-0.25 s, about what flake8 takes for a whole small file) while this
    process outlines the files and plans, which needs only CPython's ``ast``; then it forks its
    twin, which has them imported too. This process hands them the run's files to parse and those
    beyond the run (``Linter._start_lint_warm``), in as many requests as it likes, each split
    between the two by cost (``start_lint``): a run that parses several files (its own, and the
    callees its findings rest on) waits for the larger half of the work instead of all of it.
    Each answers its requests in order. Unused (the plan keeps nothing of any file to parse),
    they are killed, not waited for. A run has none where processes cannot be forked safely (not
    Linux), nor with ``--jobs 1``: it parses in its own process."""

    def __init__(self, linter: Linter, sources: dict[str, SourceFile]) -> None:
        ends = [_Connection.pair() for _ in range(2)]  # the first worker's, then its twin's
        self._process = _Forked(_warm_worker_main, ends, linter, sources, profile.active() is not None)
        self._channels = []
        for ours, theirs in ends:
            theirs.close()
            self._channels.append(_Channel(ours))

    @property
    def used(self) -> int:
        """How many of the two were handed anything to lint."""
        return sum(channel.asked > 0 for channel in self._channels)

    @staticmethod
    def available() -> bool:
        # A fork copies this process as it is (the run's files read, its rules made); macOS
        # offers fork, but not safely with its system libraries.
        return sys.platform.startswith("linux")

    def start_lint(
        self, items: list[tuple[str, KeptUnits | None, FileProjectNames]], codes: tuple[str, ...] | None, beyond: bool,
    ) -> Callable[[], list[FileFacts]]:
        """The workers' facts of ``items`` (``Linter.lint_one``), asked for now: costliest first
        (``_lint_cost``), each item to the worker handed the least work so far in the run (the
        fewest items, where the costs tie)."""
        costs = _lint_costs([path for path, _, _ in items], [keep for _, keep, _ in items])
        shares: list[list[int]] = [[] for _ in self._channels]
        for index in sorted(range(len(items)), key=costs.__getitem__, reverse=True):
            least = min(range(len(self._channels)), key=lambda i: (self._channels[i].load, self._channels[i].items))
            self._channels[least].load += costs[index]
            self._channels[least].items += 1
            shares[least].append(index)
        asked = [
            (share, channel.ask(([items[i] for i in share], codes, beyond)))
            for share, channel in zip(shares, self._channels) if share
        ]  # fmt: skip

        def results() -> list[FileFacts]:
            found: list = [None] * len(items)
            for share, answer in asked:
                for index, facts in zip(share, answer()):
                    found[index] = facts
            return found

        return results

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        # Killed, not told to stop: they have nothing left to do that matters (their answers, and
        # the cache entries written before them, are in), the first may still be importing for
        # nothing, and a pool started after it holds a copy of this end of the pipes, so they
        # would never see them closed. The twin dies with the first (``_die_with``).
        for channel in self._channels:
            channel.connection.close()
        self._process.kill()
        self._process.join()


class _Forked:
    """A process forked from this one to run ``target(*args)``, which never returns into this
    process's code (``os._exit``, silently: its death is ``WorkerDied`` in the run). Not
    ``multiprocessing``'s: importing its process and connection machinery (``socket``,
    ``subprocess``, ...) took about 10 ms of each small run before it could fork its worker."""

    def __init__(self, target: Callable[..., None], *args) -> None:
        for stream in (sys.stdout, sys.stderr):  # else the child would write out its copy of what they hold
            if stream is not None:
                stream.flush()
        self.pid = os.fork()
        if self.pid == 0:
            try:
                target(*args)
            finally:
                os._exit(0)
        self._ended = False

    def is_alive(self) -> bool:
        if not self._ended:
            try:
                self._ended = os.waitpid(self.pid, os.WNOHANG)[0] != 0
            except ChildProcessError:
                self._ended = True
        return not self._ended

    def kill(self) -> None:
        import signal

        if not self._ended:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def join(self) -> None:
        if not self._ended:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self._ended = True


class _Connection:
    """One side's ends of the two pipes between the run and a lint worker: whole messages, each
    its length (8 bytes) and then its bytes; ``send`` and ``recv`` pickle them. A closed other
    side is ``EOFError`` (reading) or ``BrokenPipeError`` (writing)."""

    def __init__(self, reading: int, writing: int) -> None:
        self._reading, self._writing = reading, writing

    @classmethod
    def pair(cls) -> tuple[_Connection, _Connection]:
        """The run's side, then the worker's."""
        requests_read, requests_written = os.pipe()
        answers_read, answers_written = os.pipe()
        return cls(answers_read, requests_written), cls(requests_read, answers_written)

    def fds(self) -> tuple[int, int]:
        return self._reading, self._writing

    def send(self, message) -> None:
        import pickle

        self.send_bytes(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))

    def send_bytes(self, data: bytes) -> None:
        for part in (len(data).to_bytes(8, "little"), data):
            view = memoryview(part)
            while view:
                view = view[os.write(self._writing, view):]

    def recv(self):
        import pickle

        return pickle.loads(self.recv_bytes())

    def recv_bytes(self) -> bytes:
        return self._read(int.from_bytes(self._read(8), "little"))

    def _read(self, size: int) -> bytes:
        chunks = []
        while size:
            chunk = os.read(self._reading, min(size, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        for fd in (self._reading, self._writing):
            if fd >= 0:
                os.close(fd)
        self._reading = self._writing = -1


class _Channel:
    """This process's end of one lint worker's pipe: its requests, and its answers as they come
    (a later request's may be read first)."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.asked = 0  # requests sent
        self.load = 0.0  # what they cost (``_lint_cost``)
        self.items = 0  # files they hold
        self._answers: list = []

    def ask(self, request: tuple) -> Callable[[], list[FileFacts]]:
        try:
            self.connection.send(request)
        except OSError:  # the worker is gone (its end of the pipe closed): a broken pipe
            raise WorkerDied from None
        index = self.asked
        self.asked += 1

        def answer() -> list[FileFacts]:
            while len(self._answers) <= index:
                try:
                    self._answers.append(self.connection.recv())
                except (EOFError, OSError):
                    raise WorkerDied from None
            found = self._answers[index]
            if isinstance(found, BaseException):
                raise found
            facts, timings = found
            profile.add_worker_totals(timings)
            return facts

        return answer


def _warm_worker_main(ends: list, linter: Linter, sources: dict[str, SourceFile], profiling: bool) -> None:
    """``ends``: both pipes' (the run's end, the worker's), as the fork copied them: the run's ends
    are closed here, else the twin could never see its pipe closed by the run."""
    import signal

    # Ctrl-C reaches the whole process group: the run's process reports it in one line and kills
    # this one, which would print a traceback of its own. The twin inherits it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for runs, _ in ends:
        runs.close()
    (_, mine), (_, twins) = ends
    requests = _read_requests(mine)  # while the parser is imported: the run may send one meanwhile
    lint_file.import_the_parser()  # with the collector still paused, as the run's process has it
    _worker_init(linter, profiling)
    parent = os.getpid()
    try:
        twin = _fork()
    except OSError:  # no process to spare (a limit on processes, or memory): this one answers for both
        _serve(_read_requests(twins, into=requests), sources)
        return
    if twin == 0:
        try:  # the twin: never back into the first worker's code (``_Forked``'s ending of it)
            mine.close()
            _die_with(parent)
            _serve(_read_requests(twins), sources)
        finally:
            os._exit(0)
    twins.close()
    _serve(requests, sources)


def _read_requests(connection, into=None):
    """A queue (``into``, or a new one) of the requests on ``connection``, each with the
    connection to answer on, read as they come by a thread of their own (None once the run's
    process is gone): the run's process may be sending one (a batch of files with what each
    hears of the project, easily more than a pipe holds) while this one sends an answer, and
    two blocked writers would wait forever. The thread only reads bytes (``_serve`` unpickles
    them): holding no lock but the GIL, it is no hazard to ``_fork``."""
    import queue
    import threading

    requests: queue.SimpleQueue = into if into is not None else queue.SimpleQueue()

    def read() -> None:
        while True:
            try:
                requests.put((connection, connection.recv_bytes()))
            except (EOFError, OSError):
                requests.put(None)
                return

    threading.Thread(target=read, daemon=True).start()
    return requests


def _serve(requests, sources: dict[str, SourceFile]) -> None:
    import pickle

    while (request := requests.get()) is not None:
        connection, data = request
        items, codes, beyond = pickle.loads(data)
        try:
            answer = _worker_lint_batch(items, codes, beyond, sources)
        except Exception as error:  # noqa: BLE001 -- raised in the run's process, as a pool worker's error is
            answer = error
        connection.send(answer)


def _fork() -> int:
    """``os.fork`` of the first lint worker, whose request reader runs on a thread of its own
    (``_read_requests``): Python 3.12 and later warn of forking a process with threads, which is
    safe here (the twin never touches what that thread holds)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def _die_with(parent: int) -> None:
    """Have the kernel kill this process (the twin) when its parent, the first lint worker, dies:
    the run kills that one only (``_WarmWorker.__exit__``). Where that cannot be asked, the twin
    still ends when the run's end of its pipe closes."""
    import ctypes
    import signal

    set_parent_death_signal = 1  # ``PR_SET_PDEATHSIG``
    try:
        ctypes.CDLL(None, use_errno=True).prctl(set_parent_death_signal, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the line above
        os._exit(0)


def _pool_for(paths: list[str], pool: _Pool | None, spare: _Pool | None, lint_costs: list[float] | None = None) -> _Pool | None:
    """The run's pool; in a small run, its spare one where these files are many enough to pay
    for starting it, or it is started already (files read beyond the run: ``plan_reading_callees``).
    ``lint_costs``: to lint them (``_lint_cost``), which the parses make: their sum decides."""
    if pool is not None or spare is None:
        return pool
    if lint_costs is not None:
        worth_it = sum(lint_costs) >= SPARE_POOL_LINT_COST
    else:
        worth_it = len(paths) >= SPARE_POOL_THRESHOLD
    return spare if spare.started or worth_it else None


def _guided_batches(costs: list[float], jobs: int) -> list[list[int]]:
    """Item indices, costliest first, cut into batches each worth a quarter of the work left per
    worker (never less than a 512th of the whole, nor more than 256 items): a batch handed out
    late is short."""
    order = sorted(range(len(costs)), key=costs.__getitem__, reverse=True)
    left = float(sum(costs)) or 1.0
    floor = left / 512
    batches: list[list[int]] = []
    batch: list[int] = []
    cost = 0.0
    for index in order:
        batch.append(index)
        cost += costs[index]
        if cost >= max(left / (4 * jobs), floor) or len(batch) >= 256:
            batches.append(batch)
            left -= cost
            batch, cost = [], 0.0
    if batch:
        batches.append(batch)
    return batches


def _file_size(path: str) -> float:
    try:
        return float(os.path.getsize(path))
    except OSError:
        return 0.0  # linting it reports why


def _lint_costs(paths: list[str], kept: list[KeptUnits | None]) -> list[float]:
    return [_lint_cost(path, keep) for path, keep in zip(paths, kept)]


def _parses_nothing(kept: KeptUnits | None) -> bool:
    """Whether a lint keeping ``kept`` (None: the whole file) is to parse nothing with libcst: the
    plan keeps only the file's names (``KeptUnits.names_only``), or no rule's trigger is in it. A
    names-only lint whose masked text does not parse parses after all (``lint_file.WouldParse``)."""
    return kept is not None and (kept.names_only or kept.active == ())


def _lint_cost(path: str, kept: KeptUnits | None) -> float:
    """About the share of a file a lint parses: all of it, or its kept units and the code
    outside every unit (``units.MaskPlan``); nothing but reading where the plan keeps nothing."""
    size = _file_size(path)
    if _parses_nothing(kept):
        return size / 20
    if kept is None or not kept.cuts:
        return size
    lines = max(unit.last for unit in kept.cuts)
    in_functions = sum(unit.last - unit.first for unit in kept.cuts if unit.kind in ("function", "method"))
    parsed = lines - in_functions + sum(kept.cuts[i].last - kept.cuts[i].first for i in kept.indices)
    return size * parsed / max(lines, 1)


_WORKER_LINTER: Linter | None = None


def _worker_init(linter: Linter, profiling: bool) -> None:
    global _WORKER_LINTER
    _WORKER_LINTER = linter
    collector.resume_in_worker()
    if profiling:
        profile.enable()


def _rule_codes(scope: RunScope | None) -> tuple[str, ...] | None:
    """What a worker needs to run a small run's rules (``Linter.scope_named``): their codes. None:
    the whole project's. A run of one file checked alone, whose scope holds its scout, starts no pool."""
    if scope is None:
        return None
    assert scope.scout is None
    return tuple(rule.code for rule in scope.rules)


def _worker_lint_batch(
    batch: list[tuple[str, KeptUnits | None, FileProjectNames]], codes: tuple[str, ...] | None = None, beyond: bool = False,
    sources: dict[str, SourceFile] | None = None,
):
    """A batch's facts, and the worker's profile totals for it (None when not profiling).
    ``codes``: the run's rules (``_rule_codes``); ``beyond``: files outside the run (``Linter.lint_one``);
    ``sources``: the files as the run read them (a forked worker has them), else read now."""
    assert _WORKER_LINTER is not None
    scope = _WORKER_LINTER.scope_named(codes)
    sources = sources or {}
    facts = [
        _WORKER_LINTER.lint_one(path, kept, scope, sources.get(path), project, beyond) for path, kept, project in batch
    ]
    profiler = profile.active()
    return facts, profiler.take() if profiler is not None else None


def _worker_outline_batch(paths: list[str]):
    assert _WORKER_LINTER is not None
    outlines = [_WORKER_LINTER.outline_one(path) for path in paths]
    profiler = profile.active()
    return outlines, profiler.take() if profiler is not None else None


def _worker_names_batch(paths: list[str]):
    assert _WORKER_LINTER is not None
    outlines = [_names_outline(_WORKER_LINTER.settings, path) for path in paths]
    profiler = profile.active()
    return outlines, profiler.take() if profiler is not None else None


def _names_outline(settings: config.Settings, path: str, source: SourceFile | None = None) -> FileOutline:
    from sync_lint.pipeline import project_plan

    return project_plan.read_names_outline(path, settings, source)
