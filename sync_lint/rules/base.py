"""What a rule is: metadata, documentation, examples, and a ``check`` over one file's context.

Rules never know which front end called them; they see a ``FileContext`` (the parsed module and
the shared analyses) and yield ``Finding``s. A finding that depends on a function that may live in
another file names it in ``if_callee``: it is emitted only if that
function's project-wide summary says so (see ``sync_lint.analysis.summaries``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from sync_lint.diagnostics import Applicability, Fix
from sync_lint.rules.triggers import (
    ALONE_SINK_TRIGGERS,
    HOT_SCOPE_MARKERS,
    SINK_UNIT_TRIGGERS,
    method_definitions,
)

if TYPE_CHECKING:
    import libcst as cst

    from sync_lint.analysis.context import FileContext
    from sync_lint.fixes import Editor

# A fix is planned lazily: positions are only computed for files that have findings.
FixPlan = Callable[["Editor"], Fix | None]


@dataclass(frozen=True)
class CalleeCondition:
    """Emit the finding only if ``callee`` (a dotted name) needs argument ``arg`` contiguous
    (kind "contiguity"), needs it to have a unit last stride or more (kind "unit-stride": the
    argument's last dim is not unit-strided), syncs (kind "sync"), or makes a blocking copy onto
    the GPU (kind "upload"); or (kind ``HOST_COPY``) only if no file of the run defines a
    property named as one of ``callee``'s ``|``-separated names (``FileFacts.host_properties``)."""

    kind: str
    callee: str
    arg: int | str | None = None
    fix_safe_if_read_only: bool = False  # see ``PendingCall``
    arg_views: tuple[tuple[int | str, str], ...] = ()  # see ``PendingCall``
    flags: tuple[tuple[int | str, bool | str], ...] = ()  # see ``PendingCall``
    advice: str = ""  # see ``PendingCall``
    row_stride: int | None = None  # see ``PendingCall``
    through: tuple[tuple[str, int], ...] = ()  # see ``PendingCall``
    device_args: tuple[int | str, ...] = ()  # see ``PendingCall``
    devices: tuple[tuple[int | str, str | None], ...] = ()  # see ``PendingCall``


HOST_COPY = "host-copy"


@dataclass
class Finding:
    node: cst.CSTNode  # the span to report
    message: str  # may use {reason}, {callee} and {advice} when ``if_callee`` is set
    fix: FixPlan | None = None
    if_callee: CalleeCondition | None = None


# What a finding may rest on besides its own function (``Rule.summaries_from``).
CALLERS, CALLEES, BLOCK_CALLEES = "callers", "callees", "block callees"


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case
    summary: ClassVar[str]  # one line
    # The docs page, in four parts.
    what: ClassVar[str]
    why: ClassVar[str]
    example: ClassVar[str]
    fix_safety: ClassVar[str]
    preview: ClassVar[bool] = False
    fix_applicability: ClassVar[Applicability | None] = None
    # Each VALID example must produce no finding of this rule; each INVALID one must produce
    # findings exactly on the lines marked ``# expect: CODE``. Both become tests and docs.
    valid: ClassVar[tuple[str, ...]] = ()
    invalid: ClassVar[tuple[str, ...]] = ()
    # Substrings (or patterns) without which the rule cannot match a file (the pre-filter); empty:
    # always run.
    triggers: tuple[str | re.Pattern, ...] = ()
    # Substrings without which no single function can hold a finding of the rule or a summary
    # it records (the function-level pre-filter, ``pipeline.units``); None: ``triggers``.
    unit_triggers: tuple[str | re.Pattern, ...] | None = None
    # For a file checked on its own (the flake8 plugin, an editor, a one-file run under
    # ``follow-imports = "skip"``), where no other file's summary can complete a finding:
    # substrings the file must also contain (one of them, besides one of ``triggers``). None:
    # ``triggers`` alone decide.
    alone_triggers: tuple[str | re.Pattern, ...] | None = None
    # Reports only in hot scopes (``analysis.hot_scopes``): a file checked on its own where the
    # syntax scout finds none may be is skipped (``prefilter.rules_that_can_report``).
    reports_only_in_hot_scopes: ClassVar[bool] = False
    # A hot-scope rule that reports only at sites of a hot function's own code holding one of
    # these words, and rests on no summary (GPU205): the plans keep such a unit whether or not
    # it may sync (``UnitOutline.own_sites``), and a file checked on its own needs only a hot
    # scope, not a sync in one. None: the rule reports syncs, here or through summaries.
    own_site_words: ClassVar[tuple[str, ...] | None] = None
    # Reports only at a sink the file calls (GPU1xx): in a file checked on its own, the syntax
    # scout confirms that a sink may be handed a view or a cast (``Scout.may_report_at_a_sink``).
    reports_only_at_sinks: ClassVar[bool] = False
    # Reports, and records summaries, only in functions (not in module-level code): in a run of
    # many files, a file none of whose functions the plan keeps is not parsed for it
    # (``KeptUnits.names_only``).
    reports_only_in_functions: ClassVar[bool] = False
    # For a rule that reports neither only at sinks nor only in hot scopes: which summaries its
    # finding in one function may rest on, followed within a file checked on its own to parse
    # only the functions that can matter (``prefilter.one_file_plan``): those of the functions
    # that a function with a trigger calls (CALLEES; BLOCK_CALLEES: only what its ``with``
    # blocks whose items hold a trigger call), or of those calling it (CALLERS). A sink rule's
    # findings sit in its sinks' callers; a hot-scope rule's rest on what hot functions call.
    summaries_from: ClassVar[frozenset[str]] = frozenset({CALLERS, CALLEES})
    # Options that name things the rule looks for (hot classes, declarations): their literal
    # parts are triggers too, so a project's own names reach the pre-filter.
    trigger_options: ClassVar[tuple[str, ...]] = ()
    # Options that name methods (fnmatch globs): ``def NAME(`` is a trigger for each.
    method_trigger_options: ClassVar[tuple[str, ...]] = ()
    # ``alias-modules`` entries standing for a name under one of these: the alias is a trigger
    # too, as code calls through it without the words (``ops.gather(x)`` for ``torch.ops._C``).
    alias_trigger_targets: ClassVar[tuple[str, ...]] = ()
    # Tool rules (GPU0xx) are reported by the engine itself and have no ``check``.
    tool_rule: ClassVar[bool] = False

    def __init__(self, settings=None) -> None:
        if settings is None or not self.triggers:
            return
        extra: list[str | re.Pattern] = [_literal(value) for option in self.trigger_options for value in settings[option]]
        extra += [
            _literal(alias) for alias, target in settings["alias-modules"].items()
            if any(target == t or target.startswith(t + ".") for t in self.alias_trigger_targets)
        ]
        if not all(extra):  # a name with no literal part (``*``) may match in any file
            self.triggers = ()
            self.unit_triggers = None
            self.alone_triggers = None
            return
        method_names = (name for option in self.method_trigger_options for name in _method_names(settings[option]))
        methods = method_definitions(dict.fromkeys(method_names))
        if methods is not None:
            extra.append(methods)
        if not extra:
            return

        def extended(triggers):
            return None if triggers is None else tuple(dict.fromkeys((*triggers, *extra)))

        self.triggers = extended(self.triggers)
        self.unit_triggers = extended(self.unit_triggers)
        self.alone_triggers = extended(self.alone_triggers)

    def check(self, ctx: FileContext) -> Iterable[Finding]:
        return ()

    @classmethod
    def url(cls) -> str:
        from sync_lint import DOCS_URL

        return f"{DOCS_URL}/{cls.code}.md"


class SinkRule(Rule):
    """A rule of the GPU1xx family: it reports where a view or a cast reaches a sink that assumes
    a layout (a kernel launch, a custom op, ``.view(dtype)``, ``.data_ptr()``), in this file or
    through a callee's summary. The plans treat the family as one: one closure over the callers
    of sinks (``ProjectPlan._sink_closure``), one scout question for a file checked on its own
    (``Scout.may_report_at_a_sink``)."""

    unit_triggers = SINK_UNIT_TRIGGERS
    alone_triggers = ALONE_SINK_TRIGGERS
    reports_only_at_sinks = True
    reports_only_in_functions = True
    trigger_options = ("contiguous-sinks",)
    alias_trigger_targets = ("torch.ops",)


class HotScopeRule(Rule):
    """A rule that reports a GPU->CPU sync only in hot code (``analysis.hot_scopes``) or in what
    hot code calls; the plans treat these rules as one family (``ProjectPlan._hot_closure``,
    ``Scout.may_sync_in_a_hot_scope``)."""

    trigger_options = ("hot-class-patterns", "hot-class-methods", "extend-hot-class-methods", "hot-functions")
    method_trigger_options = ("hot-method-patterns", "hot-class-methods", "extend-hot-class-methods")
    alone_triggers = HOT_SCOPE_MARKERS
    reports_only_in_hot_scopes = True
    reports_only_in_functions = True


def _method_names(value: list[str] | dict[str, list[str]]) -> list[str]:
    """The method globs of an option: a list of them, or a table of lists (``hot-class-methods``)."""
    return [name for names in value.values() for name in names] if isinstance(value, dict) else list(value)


def _literal(pattern: str) -> str:
    """The longest literal piece of a glob or dotted name (``*MetadataBuilder`` -> ``MetadataBuilder``,
    ``pkg.mod.step`` -> ``step``): text a file must contain for the pattern to match in it."""
    import re

    pieces = re.split(r"[*?\[\]]+", pattern.rsplit(".", 1)[-1])
    best = max(pieces, key=len, default="")
    return best if len(best) >= 3 else ""
