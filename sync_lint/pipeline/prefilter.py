"""The cheap text pre-filter: skip the parse when no enabled rule can match a file, and
parse only the units of a file that can matter (``units``).

Each rule lists substrings or regular expressions (``Rule.triggers``) without which it cannot
find anything in a file, nor record a function summary that another file needs. A rule with no triggers always runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from sync_lint.config import Settings
from sync_lint.pipeline import scout
from sync_lint.pipeline.profile import span
from sync_lint.pipeline.source import split_lines
from sync_lint.pipeline.units import MaskPlan
from sync_lint.rules.base import BLOCK_CALLEES, CALLEES, CALLERS, Rule
from sync_lint.rules.triggers import SINK_SHAPE_TRIGGERS


def may_match(rule: Rule, text: str, alone: bool = False) -> bool:
    """Whether ``rule`` can find anything in ``text``; ``alone``: in a file checked on its own,
    without other files' summaries (``Rule.alone_triggers``)."""
    if not _any_in(rule.triggers, text):
        return False
    return not alone or _any_in(rule.alone_triggers, text)


def rules_that_can_report(
    rules: list[Rule], texts: list[str], settings: Settings, file_scout: scout.Scout | None = None, alone: bool = True,
) -> list[Rule]:
    """The rules that can find anything in a run of just these files: a small run (pre-commit's
    staged files, an editor's file) skips the others, and most often every parse. A run of one
    file checked alone reads no summary of another file, so a rule reports there only where the file may
    match it alone (``Rule.alone_triggers``: a kernel wrapper's contiguity check lives where a
    sink word is). A run of several files reads the summaries of the functions they call
    beyond the run (``project_plan.plan_reading_callees``), so there a rule may report in any
    file that holds its triggers.

    Where the words are too common to decide, the syntax scout (``pipeline.scout``) does, in a
    run of one file checked alone: a rule that reports only in hot scopes needs a file where one may be, and a
    rule that reports only at sinks needs a sink that may be handed a view or a cast (``](`` is
    also ``list[int]()``, and most custom ops of an engine are handed tensors as they came). The scout reads one file, so in a
    larger run it has no say: another file may call the wrapper this one defines, or subclass
    its hot base class. ``file_scout``: the scout of a run's one file, if the caller has one.
    ``alone``: a run of one text is of that file alone (False: it reads beyond, as a run of
    several files does)."""
    if len(texts) != 1 or not alone:
        return [rule for rule in rules if any(may_match(rule, text) for text in texts)]
    text = texts[0]
    file_scout = file_scout or scout.Scout(text, settings)  # parses only when first asked
    answers: dict[tuple, bool] = {}  # the GPU1xx rules share one question

    def scout_says(question: str, *args) -> bool:
        if (question, *args) not in answers:
            with span("scout"):
                answers[(question, *args)] = getattr(file_scout, question)(*args)
        return answers[(question, *args)]

    def may_report(rule: Rule) -> bool:
        if not may_match(rule, text, alone=True):
            return False
        if rule.reports_only_in_hot_scopes and not scout_says(
                "may_sync_in_a_hot_scope" if rule.own_site_words is None else "may_have_hot_scope"):
            return False
        if rule.reports_only_at_sinks:
            return scout_says("may_report_at_a_sink")
        return True

    return [rule for rule in rules if may_report(rule)]


def seed_words(rule: Rule) -> re.Pattern:
    """What a function's text must hold to be a seed of a rule that does not report only in
    hot scopes (``rule_seeds``): its unit triggers. For a sink rule, not the sink shapes
    (``](``, ``.view(``: also ``list[int]()``, ``x.view(-1, n)``) nor ``triton`` (in many a
    body besides kernels'): the scout reads the calls that may be sinks, and the kernels, as
    syntax (``Scout.sink_shapes``)."""
    units = rule.triggers if rule.unit_triggers is None else rule.unit_triggers
    if rule.reports_only_at_sinks:
        skipped = (*SINK_SHAPE_TRIGGERS, "triton")
        units = tuple(t for t in units if t not in skipped) or (_NEVER,)
    return _trigger_pattern(units)


def own_site_words(rule: Rule) -> re.Pattern | None:
    """What a function's text must hold for a rule that reports only at sites of its own
    (``Rule.own_site_words``) to report there; None for any other rule."""
    return _trigger_pattern(rule.own_site_words) if rule.own_site_words else None


_NEVER = re.compile(r"(?!)")
_NO_SHAPES = scout.SinkShapes(set(), set())


def _any_in(triggers: tuple[str | re.Pattern, ...] | None, text: str) -> bool:
    return not triggers or any(
        trigger in text if type(trigger) is str else trigger.search(text) is not None for trigger in triggers
    )


@lru_cache(maxsize=64)
def _trigger_pattern(triggers: tuple[str | re.Pattern, ...]) -> re.Pattern:
    sources = {re.escape(t) if isinstance(t, str) else t.pattern for t in triggers}
    return re.compile("|".join(sorted(sources, key=len, reverse=True)))


@dataclass
class RuleSeeds:
    """Where one rule's findings and the summaries they rest on start, in one file: the
    function units (``MaskPlan`` indices) that may hold them, and which way the summaries they
    need flow (``Rule.summaries_from``; a sink rule: CALLERS). ``called``: for BLOCK_CALLEES,
    the names the declared blocks mention (narrower than all the seeds mention)."""

    rule: Rule
    seeds: list[int]
    directions: frozenset[str]
    called: set[str] | None = None


def rule_seeds(active: list[Rule], plan: MaskPlan, file_scout: scout.Scout) -> list[RuleSeeds] | None:
    """The seeds of each of the ``active`` rules in a file (see ``RuleSeeds``); None when some
    rule may need any function of it (no triggers, a trigger the scout cannot place, the file
    does not parse).

    A sink rule needs the functions that may call a sink (a unit trigger); a hot-scope rule, the
    functions the scout finds may be hot; another rule, the functions with its triggers. Any
    function that uses a trigger name bound at module level counts as holding the trigger."""
    if any(not rule.triggers for rule in active):
        return None
    found: list[RuleSeeds] = []
    for rule in active:
        if rule.reports_only_in_hot_scopes:
            with span("scout"):
                hot = file_scout.hot_units()
            if hot is None:
                return None
            found.append(RuleSeeds(rule, plan.named(hot), frozenset({CALLEES})))
            continue
        pattern = seed_words(rule)
        directions = frozenset({CALLERS}) if rule.reports_only_at_sinks else rule.summaries_from
        with span("scout"):
            bound = file_scout.bindings_matching(pattern)
            shapes = file_scout.sink_shapes() if rule.reports_only_at_sinks else _NO_SHAPES
            called = file_scout.names_in_blocks(pattern) if BLOCK_CALLEES in directions else None
        if bound is None or shapes is None or (BLOCK_CALLEES in directions and called is None):
            return None
        # A function under a module-level block holding a sink is named by its callers, as
        # one holding a seed word is (``Scout.bindings_matching``).
        seeds = sorted(set(plan.matching(pattern, bound | shapes.defined_around)) | set(plan.named(shapes.units)))
        found.append(RuleSeeds(rule, seeds, directions, called))
    return found


def one_file_plan(active: list[Rule], text: str, file_scout: scout.Scout) -> MaskPlan | None:
    """The functions a file checked on its own needs parsed, for the ``active`` rules; None:
    all of them. Module-level code, class headers and the methods that hold a kept method's
    ``self.`` state are always kept (``units``).

    Nothing outside the file can complete a finding here, so a function matters only through
    this file: each rule's seeds (``rule_seeds``), followed by name within the file, to a
    fixpoint, the way its summaries flow: to their callers, or to what they call."""
    plan = MaskPlan(text, split_lines(text))
    seeds = rule_seeds(active, plan, file_scout)
    if seeds is None:
        return None
    for rule_seed in seeds:
        plan.keep_units(rule_seed.seeds)
        if CALLERS in rule_seed.directions:
            plan.keep_callers(rule_seed.seeds)
        if CALLEES in rule_seed.directions or BLOCK_CALLEES in rule_seed.directions:
            plan.keep_callees(rule_seed.seeds, rule_seed.called)
    plan.close_over_state()
    return plan


