"""The project plan: which functions of a run of many files need a libcst parse.

A libcst parse is most of a run's cost, and most functions of an engine cannot hold a finding
nor a summary a finding rests on. A run of many files therefore goes in two passes:

1. Each file is *outlined* (``outline``, in the worker processes): CPython's ``ast`` and the
   text find each rule's seeds, the functions that may hold its findings or a summary
   (``prefilter.rule_seeds``, the same seeds a file checked on its own starts from), and, per
   function unit (``units``), the dotted names it may call: in its own module, or in others
   through the file's imports or its class's bases, resolved as the analyses resolve a call.
   A file no rule may match is outlined for its imports alone: calls may go through it.
2. ``ProjectPlan`` follows each rule's seeds over those calls across the whole project, the way
   the rule's summaries flow, and each file is linted with only the units reached
   (``units.MaskPlan``); a file with none reached is not parsed at all where its rules report
   only in functions (``KeptUnits.names_only``). Two families follow what the scout tells of
   each function:
   - the hot-scope rules (``_hot_closure``): what hot code calls, only as far as it may reach
     code that may sync on a value from a named device (``Scout.sync_outline``: a function of
     the same file handed one too; one of another file that may sync explicitly on a
     parameter, where code that may hold such a value calls it), and the memoised functions
     it calls;
   - the sink rules, GPU1xx (``_sink_closure``): of the callers of their seeds, only the
     functions that hand a value that may be a view or a cast to a parameter that may reach a
     sink, or to a sink (``Scout.sink_handing``), and what those hand such a parameter on to.
     A function parsed only for the other family, or for the state it sets, is no part of
     it: the contiguity analysis records nothing of it (``KeptUnits.at_sinks``).

One question of the run's classes reaches every family: which are ``nn.Module`` subclasses by
way of another file (vLLM's ``class SiluAndMul(CustomOp)``, whose base is one in
``custom_op.py``). The outline reads each class's bases (``ClassOutline``), ``module_bases``
closes them over the run, and the lint of each file hears which of its bases are modules
(``HotScopes``); the methods of such classes named like ``hot-method-patterns`` are hot seeds.

What a call may reach is over-approximated: every dotted name in a unit's text (comments and
strings too) is read as a possible call, through every import of its head, a ``self.`` method
as that of its class and of each of its bases, and a re-export is followed wherever a module
imports the name. A unit kept needlessly costs time; a unit missed
would change findings, which ``tests/test_fast_path_equivalence.py`` and
``bench/bench_project_plan.py`` compare against the plain path.
"""

from __future__ import annotations

import ast
import copy
import functools
import os
import re
import sys
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sync_lint.analysis import op_words
from sync_lint.analysis.hot_words import is_module_base, matches
from sync_lint.analysis.modules import LIBRARY_ROOTS, is_package_init, resolve_relative
from sync_lint.analysis.project_names import NOTHING_FROM_THE_PROJECT, FileProjectNames
from sync_lint.config import Settings
from sync_lint.pipeline import collector, prefilter
from sync_lint.pipeline.lint_file import FileFacts, module_name_for
from sync_lint.pipeline.profile import span
from sync_lint.pipeline.scout import ScopeHanding, Scout, ast_dotted
from sync_lint.pipeline.scout.syntax import (
    BLOCK_FIELDS,
    FUNCTIONS,
    decorator_callee,
    first_line,
    walk,
)
from sync_lint.pipeline.source import SourceError, SourceFile, read, read_bytes
from sync_lint.pipeline.units import MaskPlan
from sync_lint.rules.base import BLOCK_CALLEES, CALLEES, CALLERS, Rule

# A dotted chain as written (``ops.fused_kda``, ``self.kernel``); whitespace around a dot is
# legal Python, and a chain broken over lines inside brackets still names one thing. (A line
# break joins two words into a chain only before a dot, which no statement starts with.)
# Its first letter comes before the test of what precedes it (``(?<![\w.])``, made a look back
# over two characters): a pattern that starts with a character set lets the regex engine skip
# ahead to the next letter, where one that starts with a look back is tried at every character
# (a third of the cost of ``findall`` over vLLM's and SGLang's files, the same matches).
_CHAIN = re.compile(r"[A-Za-z_](?<![\w.].)\w*(?:\s*\.\s*[A-Za-z_]\w*)*")
_SUPER_METHOD = re.compile(r"\bsuper\s*\([^()]*\)\s*\.\s*([A-Za-z_]\w*)")
_MAX_REEXPORT_HOPS = 8


# The index of a file's module-level code (everything outside its function units) as a unit of
# the plan: it is always parsed, but what it calls, and what calls a function it defines (under a
# module-level ``if`` or ``try``: not a unit of its own), must be followed too.
MODULE_CODE = -1


# A call that hands a value on, for the GPU1xx plan (``scout.HandedCall``): the dotted names its
# callee may be, and its arguments that may matter: (key, the caller's parameters the value may
# hold (None: any), whether it may be a view or a cast).
Argument = tuple[int | str, tuple[str, ...] | None, bool]
Handed = tuple[tuple[str, ...], tuple[Argument, ...]]


@dataclass
class UnitOutline:
    index: int  # the unit's index in ``MaskPlan.units``, or MODULE_CODE
    qualname: str  # ``<module>.<function>`` or ``<module>.<Class>.<method>``
    refs: tuple[str, ...]  # dotted names it may call, in this module or another
    # For the GPU1xx plan (``ProjectPlan._sink_closure``), from ``scout.ScopeHanding``: whether
    # it may hand a suspect value to a sink of its own, its calls that hand a value on (None:
    # not known; any call counts), the parameters its own sinks may need (None: any), and how
    # a call binds its parameters (None: not known).
    reports_at_sink: bool = True
    handed: tuple[Handed, ...] | None = None
    needs: frozenset[str] | None = None
    signature: tuple[tuple[str, ...], str | None, str | None, bool] | None = None
    # For the hot-scope rules (``ProjectPlan._hot_closure``): whether its code may sync on a
    # value from a named device (``Scout.sync_outline``; True: not known), and whether it
    # may be memoised (``Scout.memoised_functions``), which hot code reads its definition for.
    may_sync: bool = True
    memoised: bool = False
    # Whether it may make an explicit sync on a value from a parameter, which a call from another
    # file that hands it a GPU value there makes a sync (``FunctionSummary.syncs_on``), and
    # whether its code may hold a value from a named device, to hand on (``SyncOutline``).
    on_parameters: bool = False
    tainted: bool = True
    # Whether its text holds the words of a hot-scope rule that reports only at sites of its own
    # (``Rule.own_site_words``): kept wherever hot code may reach it, syncing or not.
    own_sites: bool = False
    # For the GPU1xx plan: the ``(namespace, op name)`` of the custom ops its text may call
    # (``_op_calls``; an op the run implements in Python is a call of that function).
    op_calls: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ClassOutline:
    """A class defined at a file's top level or in a class body (where ``HotScopes`` looks), for
    ``module_bases``."""

    qualname: str  # ``<module>.<Class>``, ``<module>.<Outer>.<Inner>``
    bases: tuple[str, ...]  # every absolute dotted name one of its bases may be (its file's imports)
    # A base may be one of torch's modules (``is_module_base``), or ``@support_torch_compile``.
    torch_module: bool
    # The units of its methods named like ``hot-method-patterns`` (``MODULE_CODE`` for a class
    # nested in another's body): hot where it is a module.
    hot_units: tuple[int, ...] = ()


@dataclass
class FileOutline:
    path: str
    module_name: str = ""
    fingerprint: int = 0  # of the text outlined: the plan of a file changed since is not used
    # Local name -> every absolute dotted name it is imported as (re-exports are followed here).
    imports: dict[str, tuple[str, ...]] = field(default_factory=dict)
    units: list[UnitOutline] = field(default_factory=list)
    # Rule code -> (seed unit indices, directions the rule's summaries flow in).
    seeds: dict[str, tuple[tuple[int, ...], frozenset[str]]] = field(default_factory=dict)
    at_sinks: tuple[str, ...] = ()  # the codes of its rules that report only at sinks (GPU1xx)
    in_hot_scopes: tuple[str, ...] = ()  # the codes of its rules that report only in hot scopes
    # Parse it whole: a plan cannot be made (``prefilter.rule_seeds`` says None). Its units are
    # then all kept, and all seeds of its rules.
    whole: bool = False
    # What the lint of this text would compute again: the codes of the rules whose triggers it
    # has (None: not known), and its cut into units (``MaskPlan.units``; empty: not cut). The
    # plan drops a family's where its closure keeps none of it (``_active_rules``).
    active: tuple[str, ...] | None = None
    cuts: tuple = ()
    classes: tuple[ClassOutline, ...] = ()
    # The custom ops it registers in Python, ``(namespace, op name, function)``, and the
    # ``(namespace, op name)`` of the custom ops its text may call (``_op_calls``).
    op_impls: tuple[tuple[str, str, str], ...] = ()
    op_calls: tuple[tuple[str, str], ...] = ()
    # Whether its text holds a word of a custom op's registration in Python, for a scan's
    # ``RegistrationWords`` (None: not known: the file could not be read, or the run keeps no
    # cache, which alone notes it: ``note_registration_word``).
    registration_word: bool | None = None


@dataclass(frozen=True)
class KeptUnits:
    """What the plan keeps of one file: the function units (``MaskPlan`` indices) to parse, for
    the text it outlined (``fingerprint``): a file changed since is parsed whole. ``active``
    and ``cuts`` hand the outline's rule triggers and unit cut to the lint, which would find
    the same for that text (not part of a cache key: the text decides them).

    ``names_only``: no unit is kept and the code outside the units defines no function, so
    nothing in the file can hold a finding or a summary of a rule that reports only in
    functions (``Rule.reports_only_in_functions``): for such rules the lint reads only what
    other files need of it, its imports and the names of its functions, without a libcst
    parse (``lint_file._names_only``).

    ``at_sinks``: the units of ``indices`` the GPU1xx closure keeps (``ProjectPlan._sink_kept``),
    the only functions whose sink uses and summaries the contiguity analysis records here: the
    others are parsed for the other family, or for the state they set, and that closure would
    have masked them. None: every function is recorded (another rule keeps a unit of the file:
    it may read either family's summaries, see ``ProjectPlan._active_rules``)."""

    fingerprint: int
    indices: tuple[int, ...]
    names_only: bool = False
    active: tuple[str, ...] | None = field(default=None, repr=False, compare=False)
    cuts: tuple = field(default=(), repr=False, compare=False)
    at_sinks: tuple[int, ...] | None = None

    def within(self, wider: KeptUnits | None) -> bool:
        """Whether a lint keeping ``wider`` (None: the whole file) parses and records every
        function this keeps: its facts then hold all that this lint's would, and more, which a
        run may read in their place (a unit kept needlessly costs time, never a finding: the
        plan over-approximates what each run reads)."""
        if wider is None:
            return True
        if wider.fingerprint != self.fingerprint:
            return False
        if wider.names_only:
            return self.names_only
        if not set(self.indices) <= set(wider.indices):
            return False
        return wider.at_sinks is None or (self.at_sinks is not None and set(self.at_sinks) <= set(wider.at_sinks))

    def as_recorded(self) -> KeptUnits:
        """The fields a cache records beside facts, to tell later runs what they were made with."""
        return KeptUnits(self.fingerprint, self.indices, self.names_only, at_sinks=self.at_sinks)


def fingerprint(source: SourceFile) -> int:
    return zlib.crc32(source.raw)


def outline(source: SourceFile, settings: Settings, rules: list[Rule], module_name: str, is_package: bool) -> FileOutline:
    """A file's seeds and calls (see the module docstring), with the cyclic garbage collector
    paused, as for a parse (``collector``)."""
    with collector.paused():
        return _outline(source, settings, rules, module_name, is_package)


def note_registration_word(found: FileOutline, source: SourceFile) -> FileOutline:
    """``found`` with whether its text holds a registration word, for a run with the cache
    (``RegistrationWords.note_outlined``); a run without it has no use for the answer."""
    found.registration_word = _holds_a_registration_word(source.raw)
    return found


def _outline(source: SourceFile, settings: Settings, rules: list[Rule], module_name: str, is_package: bool) -> FileOutline:
    found = FileOutline(source.path, module_name, fingerprint(source))
    text = source.text
    active = [rule for rule in rules if prefilter.may_match(rule, text)]
    found.active = tuple(rule.code for rule in active)
    if not active:
        # Nothing of it is linted, yet a call may go through its imports: a facade that only
        # re-exports (``from .impl import op``), a package's ``__init__``.
        return _outline_names(found, text, settings, is_package)
    file_scout = Scout(text, settings, module_name=module_name)
    with span("outline: ast parse"):
        tree = file_scout.tree()
    if tree is None:
        found.whole = bool(active)  # the libcst parse reports it
        return found
    found.imports = _imports(
        file_scout.of(ast.Import), file_scout.of(ast.ImportFrom), module_name, is_package, settings["alias-modules"]
    )
    with span("outline: seeds"):
        plan = MaskPlan(text, file_scout.lines())  # the same lines, split once
        found.cuts = tuple(plan.units)
        seeds = prefilter.rule_seeds(active, plan, file_scout)
    if may_define_module_classes(text):
        found.classes = _class_outlines(tree, module_name, found.imports, settings, plan)
    _read_ops(found, tree, text)
    found.at_sinks = tuple(rule.code for rule in active if rule.reports_only_at_sinks)
    found.in_hot_scopes = tuple(rule.code for rule in active if rule.reports_only_in_hot_scopes)
    sync_outline = None
    if found.in_hot_scopes:
        with span("outline: syncs"):
            sync_outline = file_scout.sync_outline()
    with span("outline: calls"):
        found.units = _unit_outlines(
            plan, tree, module_name, found.imports, settings["alias-modules"], whole=seeds is None,
            sink_scout=file_scout if found.at_sinks else None,
        )
    if found.at_sinks and found.op_calls:
        for unit in found.units:
            text = plan.text_outside_functions if unit.index == MODULE_CODE else plan.unit_text(plan.units[unit.index])
            unit.op_calls = _op_calls(text, found.imports)
    own_words = [pattern for rule in active if (pattern := prefilter.own_site_words(rule)) is not None]
    if own_words:
        with_words = {index for pattern in own_words for index in plan.matching(pattern, set())}
        for unit in found.units:
            unit.own_sites = unit.index in with_words
    if sync_outline is not None:
        memoised = file_scout.memoised_functions()
        for unit in found.units:
            if unit.index != MODULE_CODE:
                name = plan.qualified(unit.index)
                unit.may_sync = name in sync_outline.may_sync
                unit.memoised = name in memoised
                unit.on_parameters = name in sync_outline.on_parameters
                unit.tainted = name in sync_outline.tainted
    if seeds is None:
        found.whole = True
        every = tuple(unit.index for unit in found.units)
        found.seeds = {rule.code: (every, frozenset({CALLERS, CALLEES})) for rule in active}
    else:
        found.seeds = {s.rule.code: (tuple(s.seeds), s.directions) for s in seeds}
        # A sink's words or shape in module code (``rule_seeds`` let them through where they
        # bind names: ``if hasattr(torch.ops._C, "op"): def op_wrapper(x): ...``, ``if
        # HAS_TRITON: def launch(x): kernel[grid](x)``): the functions defined there are the
        # module code's unit, which is then a seed of its own.
        shaped_outside = bool(found.at_sinks) and bool(file_scout.sink_shapes().defined_around)
        for rule in active:
            if rule.reports_only_at_sinks and rule.code in found.seeds:
                if shaped_outside or prefilter.seed_words(rule).search(plan.text_outside_functions):
                    indices, directions = found.seeds[rule.code]
                    found.seeds[rule.code] = ((*indices, MODULE_CODE), directions)
    return found


def names_outline(
    source: SourceFile, settings: Settings, module_name: str, is_package: bool, tree: ast.Module | None = None,
) -> FileOutline:
    """What the plain path (``--parse-whole-files``) reads of a file before linting it, and a
    run of one file checked alone, and a run of the files beyond it (``outlines_beyond``): its imports and
    classes, read as ``outline`` reads them, for ``module_bases``. ``tree``: the text's, where
    the caller has it."""
    with collector.paused():
        found = FileOutline(source.path, module_name, fingerprint(source))
        return _outline_names(found, source.text, settings, is_package, tree)


def _outline_names(
    found: FileOutline, text: str, settings: Settings, is_package: bool, tree: ast.Module | None = None,
) -> FileOutline:
    """A file's imports and classes, without seeds: a file no rule may match (a call may go
    through its imports: a facade that only re-exports, a package's ``__init__``; another
    file's class may derive from one of its classes)."""
    if "import" not in text:
        return found
    if tree is None:
        with span("outline: ast parse"):
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return found
    found.imports = _imports(*_import_statements(tree), found.module_name, is_package, settings["alias-modules"])
    if may_define_module_classes(text):
        found.classes = _class_outlines(tree, found.module_name, found.imports, settings)
    _read_ops(found, tree, text)
    return found


def may_define_module_classes(text: str) -> bool:
    """Without an import, no base of a class can be torch's, nor any other file's."""
    return "class" in text and "import" in text


def _class_outlines(
    tree: ast.Module, module_name: str, imports: dict[str, tuple[str, ...]], settings: Settings,
    plan: MaskPlan | None = None,
) -> tuple[ClassOutline, ...]:
    """The classes ``HotScopes`` judges (top-level, and nested in class bodies), each base read
    with every meaning it may have: through each import of its head, or a name of this module
    (``NameTable.resolve_dotted``), with ``alias-modules`` applied. ``plan``: the file's cut,
    to name the units of hot-named methods (None: not needed)."""
    prefix = f"{module_name}." if module_name else ""
    aliases = settings["alias-modules"]
    method_patterns = settings["hot-method-patterns"]
    found: list[ClassOutline] = []

    def visit(body: list[ast.stmt], outer: str | None) -> None:
        for statement in body:
            if type(statement) is not ast.ClassDef:
                continue
            local = f"{outer}.{statement.name}" if outer else statement.name
            meanings: set[str] = set()
            for base in statement.bases:
                written = ast_dotted(base.value if type(base) is ast.Subscript else base)
                if written is None:
                    continue
                head, _, rest = written.partition(".")
                if head in imports:
                    meanings.update(full + ("." + rest if rest else "") for full in imports[head])
                else:
                    meanings |= _with_aliases({prefix + written}, aliases)
            torch_module = any(map(is_module_base, meanings)) or any(
                (ast_dotted(decorator_callee(d)) or "").endswith("support_torch_compile") for d in statement.decorator_list
            )
            hot_units: tuple[int, ...] = ()
            if plan is not None:
                methods = {m.name for m in statement.body if type(m) in FUNCTIONS and matches(m.name, method_patterns)}
                if methods and outer is not None:
                    hot_units = (MODULE_CODE,)  # a nested class's methods are in its outer class's code
                elif methods:
                    hot_units = tuple(plan.named({(statement.name, name) for name in methods}))
            found.append(ClassOutline(sys.intern(prefix + local), tuple(sorted(meanings)), torch_module, hot_units))
            visit(statement.body, local)

    visit(tree.body, None)
    return tuple(found)


# An ``ops.<namespace>.<name>`` chain, with the name before it if any (``torch``, or the package
# of a module path: ``from sglang.kernels.ops.moe.topk import ...``, ``"aiter.ops.flydsl.x"``).
_OP_CHAIN = re.compile(r"(?:\b(\w+)\s*\.\s*|(?<![.\w]))ops\s*\.\s*(\w+)\s*\.\s*(\w+)")


def _op_chains(text: str) -> list[tuple[str, str, str]]:
    """``_OP_CHAIN.findall(text)``, the pattern tried only where a match may start: at an
    ``ops``, or at the word before the dot before one (``torch . ops``). The pattern has no
    literal for the regex engine to skip ahead to, so ``findall`` tries it at every character:
    over vLLM's and SGLang's files this costs a thirtieth of that."""
    found = []
    end = 0  # matches do not overlap: none starts before the last one's end
    at = text.find("ops")
    while at != -1:
        starts = []
        before = at
        while before > 0 and text[before - 1].isspace():  # ``\s`` is ``str.isspace``
            before -= 1
        if before > 0 and text[before - 1] == ".":
            word_end = before - 1
            while word_end > 0 and text[word_end - 1].isspace():
                word_end -= 1
            word_start = word_end
            while word_start > 0 and (text[word_start - 1].isalnum() or text[word_start - 1] == "_"):  # ``\w``
                word_start -= 1
            if word_start < word_end:
                starts.append(word_start)
        starts.append(at)
        for start in starts:
            if start >= end and (match := _OP_CHAIN.match(text, start)) is not None:
                found.append(match.groups(""))
                end = match.end()
                break
        at = text.find("ops", max(at + 1, end))
    return found


def _op_calls(text: str, imports: dict[str, tuple[str, ...]]) -> tuple[tuple[str, str], ...]:
    """The ``(namespace, op name)`` of the custom ops ``text`` may call: ``torch.ops.<ns>.<name>``
    chains, through a name the file imports ``torch`` as too, or ``ops.<ns>.<name>`` alone (``from
    torch import ops``); not a module path through a package's ``ops`` folder, which is no op
    (two in three of the chains in vLLM and SGLang, whose registrations a run would look for)."""
    if "ops" not in text:
        return ()
    found = set()
    for head, namespace, name in _op_chains(text):
        if not head or head == "torch" or "torch" in imports.get(head, ()):
            found.add((namespace, name))
    return tuple(sorted(found))


def _read_ops(found: FileOutline, tree: ast.Module, text: str) -> None:
    """The ops the file registers in Python and those it may call (``FileOutline.op_impls``,
    ``op_calls``)."""
    found.op_calls = _op_calls(text, found.imports)
    if op_words.may_register(text):
        found.op_impls = _op_registrations(tree, text, found.module_name, found.imports)


def _op_registrations(
    tree: ast.Module, text: str, module_name: str, imports: dict[str, tuple[str, ...]],
) -> tuple[tuple[str, str, str], ...]:
    """What ``analysis.python_ops`` reads of a file's registrations, each name with every meaning
    it may have: ``@torch.library.custom_op("ns::name")`` / ``triton_op`` (also through a name
    bound to either at module level) and ``@*register_custom_op(op_name=...)`` on a ``def``,
    from the text; and calls of ``*register_custom_op(op_name, op_func)`` anywhere in the code
    (vLLM registers its XPU ops inside a function)."""
    prefix = f"{module_name}." if module_name else ""

    def meanings(written: str) -> set[str]:
        head, _, rest = written.partition(".")
        if head in imports:
            return {full + ("." + rest if rest else "") for full in imports[head]}
        return {prefix + written}

    decorators = set(op_words.OP_DECORATORS)
    todo = list(tree.body)
    while todo:  # module code and its blocks: the names bound to a registering decorator
        statement = todo.pop()
        value = ast_dotted(statement.value) if type(statement) is ast.Assign else None
        if value is not None and not op_words.OP_DECORATORS.isdisjoint(meanings(value)):
            decorators.update(prefix + t.id for t in statement.targets if type(t) is ast.Name)
        elif type(statement) not in _DEFINITIONS:
            for block in BLOCK_FIELDS:
                inner = getattr(statement, block, None)
                if type(inner) is list:
                    todo.extend(inner)
    found: set[tuple[str, str, str]] = set()
    for match in op_words.DECORATED.finditer(text):
        written, arguments, function = match["callee"], match["arguments"] or "", match["function"]
        callee = meanings(written)
        impl = prefix + function  # the ``def`` it decorates
        if not decorators.isdisjoint(callee):
            qualified = op_words.QUALIFIED_OP.match(arguments)
            if qualified is not None:
                found.add((qualified["namespace"], qualified["name"], impl))
        elif _names_helper(written) and not op_words.OTHER_LIBRARY.search(arguments):
            named = op_words.OP_NAME_KEYWORD.search(arguments)
            name = named["name"] if named is not None else function
            found.update((op_words.helper_namespace(helper), name, impl) for helper in callee)
    if op_words.HELPER_SUFFIX in text:
        for node in walk(tree):
            written = ast_dotted(node.func) if type(node) is ast.Call else None
            if written is not None and _names_helper(written):
                registered = _helper_registration(node)
                if registered is not None:
                    name, function = registered
                    namespaces = {op_words.helper_namespace(helper) for helper in meanings(written)}
                    found.update((namespace, name, impl) for namespace in namespaces for impl in meanings(function))
    return tuple(sorted(found))


def _names_helper(written: str) -> bool:
    """Does a callee as written name a registering helper (``*register_custom_op``)?"""
    return written.rsplit(".", 1)[-1].endswith(op_words.HELPER_SUFFIX)


def _helper_registration(call: ast.Call) -> tuple[str, str] | None:
    """``direct_register_custom_op(op_name="x", op_func=impl)`` (or the two positionally): the
    op's name and the function as written."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    if "target_lib" in keywords:
        return None  # another library: of a namespace not read here
    name, function = keywords.get("op_name"), keywords.get("op_func")
    positional = [a for a in call.args if type(a) is not ast.Starred]
    if name is None and positional:
        name = positional[0]
    if function is None and len(positional) > 1:
        function = positional[1]
    if type(name) is not ast.Constant or type(name.value) is not str or function is None:
        return None
    written = ast_dotted(function)
    return (name.value, written) if written is not None else None


class PythonOpTable:
    """The custom ops the run implements in Python, over every file's outline: ``(namespace, op
    name)`` -> the function, where exactly one function registers it (an op two files register,
    one per platform, is left of unknown code: a call cannot tell which runs).

    ``calls``: per file, the ops it may call (``_op_calls``) that the run implements, as
    ``FileProjectNames.python_ops``."""

    def __init__(self, outlines: list[FileOutline]) -> None:
        registered: dict[tuple[str, str], set[str]] = {}
        for o in outlines:
            for namespace, name, function in o.op_impls:
                registered.setdefault((namespace, name), set()).add(function)
        table = {op: next(iter(functions)) for op, functions in registered.items() if len(functions) == 1}
        self.calls: dict[str, tuple[tuple[str, str, str], ...]] = {}
        if not table:
            return
        for o in outlines:
            found = set()
            for key in o.op_calls:
                if key in table:
                    found.add((*key, table[key]))
            if found:
                self.calls[o.path] = tuple(sorted(found))


class ProjectNames:
    """What each file of a run hears from the others (``FileProjectNames``), from every file's
    outline: its bases that are ``nn.Module`` subclasses (``ModuleClasses``, with ``beyond``:
    ``outlines_beyond``), and the custom ops it may call that the run implements in Python
    (``PythonOpTable``)."""

    def __init__(
        self, outlines: list[FileOutline], module_classes: ModuleClasses | None = None,
        beyond: list[FileOutline] | tuple = (),
    ) -> None:
        bases = (module_classes or ModuleClasses(outlines, beyond)).bases
        ops = PythonOpTable(outlines).calls
        self.by_path: dict[str, FileProjectNames] = {
            path: FileProjectNames(bases.get(path, ()), ops.get(path, ())) for path in bases.keys() | ops.keys()
        }

    def of(self, path: str) -> FileProjectNames:
        return self.by_path.get(path, NOTHING_FROM_THE_PROJECT)

    def hearing_ops(self, path: str, python_ops: tuple[tuple[str, str, str], ...]) -> ProjectNames:
        """These names, with ``python_ops`` heard by ``path`` too (``ops_heard_alone``)."""
        heard = copy.copy(self)
        heard.by_path = {**self.by_path, path: self.of(path).hearing_ops(python_ops)}
        return heard


class ModuleClasses:
    """Which classes of a run are ``nn.Module`` subclasses, over every file's outline: those with
    a base of torch's (``ClassOutline.torch_module``), and to a fixpoint those with a base that
    may name one (through re-exports, as ``_Resolver`` follows a call). Over-approximated where
    an import has several meanings; the plan and the plain path read the same outlines, so both
    hand each file's lint the same answer.

    ``bases``: per file, the names its classes' bases may have that name such a class (what
    ``HotScopes`` matches its own reading of a base against). ``hot_units``: ``(path, unit)``
    of the hot-named methods of such classes. ``beyond``: the outlines of files outside the run
    its bases may be defined in (``outlines_beyond``): their classes count as bases, and
    nothing is said of those files themselves."""

    def __init__(
        self, outlines: list[FileOutline], beyond: list[FileOutline] | tuple = (),
    ) -> None:
        self._run_classes = run_classes = sum(len(o.classes) for o in outlines)
        self._classes = classes = [(o.path, c) for o in (*outlines, *beyond) for c in o.classes]
        by_qualname: dict[str, list[int]] = {}
        for index, (_, c) in enumerate(classes):
            by_qualname.setdefault(c.qualname, []).append(index)
        self.resolver = resolver = _Resolver(by_qualname, _module_imports([*outlines, *beyond]))
        subclasses: list[list[int]] = [[] for _ in classes]
        for index, (_, c) in enumerate(classes):
            for meaning in c.bases:
                for base in resolver.targets(meaning):
                    subclasses[base].append(index)
        self._modules = modules = _reach([index for index, (_, c) in enumerate(classes) if c.torch_module], subclasses)
        self.bases: dict[str, tuple[str, ...]] = {}
        for o in outlines:
            names = {m for c in o.classes for m in c.bases if not modules.isdisjoint(resolver.targets(m))}
            if names:
                self.bases[o.path] = tuple(sorted(names))
        self.hot_units = [
            (classes[index][0], unit) for index in sorted(modules) if index < run_classes
            for unit in classes[index][1].hot_units
        ]  # fmt: skip

    def unresolved_bases(self) -> set[str]:
        """The base names that name no class known here (nor one of torch's modules), of the
        run's classes not known to be modules and, at any depth, of their bases that are not
        either: where a class beyond the run may yet make one a module (``outlines_beyond``)."""
        found: set[str] = set()
        seen: set[int] = set()
        todo = [index for index in range(self._run_classes) if index not in self._modules]
        while todo:
            index = todo.pop()
            if index in seen:
                continue
            seen.add(index)
            for meaning in self._classes[index][1].bases:
                targets = self.resolver.targets(meaning)
                if targets:
                    todo.extend(base for base in targets if base not in self._modules)
                elif not is_module_base(meaning):
                    found.add(meaning)
        return found


# At most this many files outside a run are read for its classes' bases (``outlines_beyond``).
_MAX_FILES_BEYOND = 256


def may_hear_of_bases(rules: list[Rule], text: str) -> bool:
    """Checked alone, may a file hear of the files beyond it (``names_of_a_lone_file``)? Only
    where a rule that reports in hot scopes runs, a class of it may derive from an import, and a
    rule that reads hot scopes may report in it alone (the GPU2xx rules: every rule but those
    that report only at sinks, whose analysis asks nothing of a class's bases); else a run of
    it runs none of them (``prefilter.rules_that_can_report``), and its bases are no question:
    44% of vLLM's files with a class and an import, a parser's or a config's."""
    return (
        any(rule.reports_only_in_hot_scopes for rule in rules)
        and may_define_module_classes(text)
        and any(prefilter.may_match(rule, text, alone=True) for rule in rules if not rule.reports_only_at_sinks)
    )


def names_of_a_lone_file(
    source: SourceFile, settings: Settings, module_name: str, is_package: bool, tree: ast.Module | None,
) -> ProjectNames:
    """What a file checked alone (pre-commit's staged file, the flake8 plugin) hears of the
    files beyond it (``outlines_beyond``), as a run of every file would tell it. ``tree``: the
    text's, where the caller has it."""
    outline = names_outline(source, settings, module_name, is_package, tree)
    return ProjectNames([outline], beyond=outlines_beyond([outline], settings))


def python_ops_beside(
    outline: FileOutline, settings: Settings, wanted: set[tuple[str, str]],
) -> tuple[tuple[str, str, str], ...]:
    """Of the ``wanted`` custom ops a file checked alone calls, those a file of its package
    implements in Python (``PythonOpTable``, as a run of every file reads them), found by a scan
    of the package's files for the op's name and a registration word: about 0.2 s on vLLM's
    3,231 files, so asked only where a finding rests on such an op (``ops_heard_alone``)."""
    root = _package_root(outline.path, outline.module_name)
    if root is None:
        return ()
    folder = os.path.join(root, outline.module_name.partition(".")[0])
    found = [
        read_names_outline(path, settings)
        for path in files_registering(registration_texts([folder]), wanted, {os.path.abspath(outline.path)})
    ]
    calls = PythonOpTable([outline, *found]).calls.get(outline.path, ())
    return tuple(op for op in calls if op[:2] in wanted)


def registration_texts(
    folders: list[str], skip: set[str] = frozenset(), stats: dict[str, tuple[int, int] | None] | None = None,
    words: RegistrationWords | None = None,
) -> dict[str, bytes]:
    """The Python files under ``folders`` (by absolute path, not in ``skip``) whose text holds a
    word of a custom op's registration in Python, with their text: what ``files_registering``
    searches. Reads every file once: about 0.2 s on vLLM's 3,231. ``stats``: filled with the
    size and time of change of every file looked at (``RegistrationScan``). ``words``: what
    earlier scans found (``RegistrationWords``): a file unchanged since that held no such word
    is not read again; brought up to date."""
    found = {}
    looked_at = set()
    for entry in _python_files(folders):
        path = os.path.abspath(entry.path)
        looked_at.add(path)
        if path in skip:
            continue
        stat = _stat_of(entry) if stats is not None or words is not None else None
        if stats is not None:
            stats[path] = stat
        if words is not None and stat is not None and words.holds_none(path, stat):
            continue
        raw = _raw(path)
        holds = raw is not None and _holds_a_registration_word(raw)
        if words is not None and stat is not None and raw is not None:
            words.note(path, stat, holds)
        if holds:
            found[path] = raw
    if words is not None:
        words.forget_all_but(looked_at, [os.path.join(os.path.abspath(folder), "") for folder in folders])
    return found


@dataclass
class RegistrationWords:
    """Which files of a package hold a word of a custom op's registration in Python, by their
    size and time of change when read (as ruff's cache tells a changed file), across runs: each
    plan made again scans its packages for the ops its code calls (``ModuleFiles.registering``),
    which reads every file (0.13 s a scan on SGLang's 4,719 files, in 15 of 40 runs of a staged
    file measured); with this kept in the cache it reads only the files that hold such a word
    (their text is searched for the ops) and those new or changed since; a run that outlines
    files notes them too (``note_outlined``). ``changed``: whether this run learnt anything to
    store (not stored: a loaded one has learnt nothing yet)."""

    files: dict[str, tuple[tuple[int, int], bool]] = field(default_factory=dict)
    changed: bool = False

    def __getstate__(self) -> dict:
        return {"files": self.files}

    def __setstate__(self, state: dict) -> None:
        self.files, self.changed = state["files"], False

    def holds_none(self, path: str, stat: tuple[int, int]) -> bool:
        return self.files.get(path) == (stat, False)

    def note(self, path: str, stat: tuple[int, int], holds: bool) -> None:
        if self.files.get(path) != (stat, holds):
            self.files[path] = (stat, holds)
            self.changed = True

    def note_outlined(self, outlines: list[FileOutline], settled_before: int) -> None:
        """Notes the files of a run's outlines, which read every file of it: a run of a whole
        tree makes no scan, and the first plan of staged files after it would read every file
        again. Only files changed last before ``settled_before`` (``time.time_ns()``) are noted,
        as a racy-clean index does: one changed since it was outlined, within the time of
        change's granularity, would be noted under its new size and time with its old text's
        answer. Only files of a package are noted: no scan reads another (``ModuleFiles.registering``
        scans its packages' folders), nor would forget it once it is gone (``forget_all_but``)."""
        for outline in outlines:
            if outline.registration_word is None or _package_root(outline.path, outline.module_name) is None:
                continue
            path = os.path.abspath(outline.path)
            stat = _stat_of(path)
            if stat is not None and stat[0] < settled_before:
                self.note(path, stat, outline.registration_word)

    def forget_all_but(self, present: set[str], folders: list[str]) -> None:
        """Drops the files under ``folders`` (each ending in a separator) not ``present`` now:
        deleted or moved since, they would only grow the cache."""
        gone = [path for path in self.files if path not in present and path.startswith(tuple(folders))]
        for path in gone:
            del self.files[path]
        self.changed = self.changed or bool(gone)


def _raw(path: str) -> bytes | None:
    """A file's bytes; None where it cannot be read (linting it, or its outline, says why)."""
    try:
        return read_bytes(path)
    except OSError:
        return None


def _python_files(folders: list[str]):
    """The ``.py`` entries under ``folders``, at any depth (not through a linked folder)."""
    folders = list(folders)
    while folders:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            elif entry.name.endswith(".py"):
                yield entry


def _stat_of(entry: os.DirEntry | str) -> tuple[int, int] | None:
    """A file's (time of change, size) from a folder's entry or its path; None: gone."""
    try:
        found = entry.stat() if isinstance(entry, os.DirEntry) else os.stat(entry)
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_size)


def _holds_a_registration_word(raw: bytes) -> bool:
    return b"custom_op" in raw or b"triton_op" in raw


@dataclass
class RegistrationScan:
    """What a plan's scan of its packages for the custom ops registered in Python read
    (``ModuleFiles.registering``), for a cached plan to tell whether a file there has come to
    register one of the ops it looked for (``unchanged``). The files the plan read are checked
    by their content (``KeptPlan.beyond``); the others scanned, by their size and time of change,
    as ruff's cache tells a changed file: only a file new or changed since is read again."""

    folders: tuple[str, ...] = ()
    skip: frozenset[str] = frozenset()  # the files known when it scanned (the run's): not looked at
    ops: set[tuple[str, str]] = field(default_factory=set)  # every op looked for
    stats: dict[str, tuple[int, int] | None] = field(default_factory=dict)  # every file scanned
    found: set[str] = field(default_factory=set)  # the files that may register one (read by the plan)

    def unchanged(self) -> bool:
        """Does no file under the folders that the scan did not find, new or changed since it
        scanned, now register one of the ops it looked for?"""
        for entry in _python_files(list(self.folders)):
            path = os.path.abspath(entry.path)
            if path in self.skip or path in self.found or self.stats.get(path, False) == _stat_of(entry):
                continue
            raw = _raw(path)
            if raw is not None and _holds_a_registration_word(raw) and files_registering({path: raw}, self.ops, set()):
                return False
        return True


def files_registering(texts: dict[str, bytes], ops: set[tuple[str, str]], skip: set[str]) -> list[str]:
    """Of ``texts`` (``registration_texts``), the files not in ``skip`` that may register one of
    the custom ops ``(namespace, name)`` in Python: their text holds the op's name as a word, as
    each way of registering one writes it (``op_name="name"``, ``"ns::name"``, ``def name``;
    ``PythonOpTable`` reads what they register)."""
    names = sorted({name.encode() for _, name in ops})
    named = re.compile(rb"\b(?:" + b"|".join(map(re.escape, names)) + rb")\b")
    # A pattern of alternatives has no literal for the regex engine to skip ahead to: for a few
    # names (a level of a staged run's plan asks one to five), a substring test of each first
    # finds the few texts that hold one at all, in a twentieth to a third of the time; for many,
    # it costs more than it saves (SGLang's texts: ``bench/HISTORY.md``, stop 48).
    screened = len(names) <= _NAMES_SCREENED_BY_SUBSTRING
    return sorted(
        path for path, raw in texts.items()
        if path not in skip and (not screened or any(name in raw for name in names)) and named.search(raw)
    )  # fmt: skip


_NAMES_SCREENED_BY_SUBSTRING = 16


# A custom op a finding names (``analysis.sinks``: "the custom op `torch.ops.<ns>.<name>`").
_NAMED_OP = re.compile(r"`torch\.ops\.(\w+)\.(\w+)")


def ops_heard_alone(
    source: SourceFile, settings: Settings, facts: FileFacts, tree: ast.Module | None = None,
) -> tuple[tuple[str, str, str], ...]:
    """For a file checked alone, after its lint (``facts``): the custom ops its GPU1xx findings
    rest on, those reported and those its summaries may yet confirm (the ops their reasons
    name), that a file beside it implements in Python (``python_ops_beside``), which a run of
    every file judges by their function. An op of an extension's own namespace (``_C``,
    ``_moe_C``: C++ ops by the engines' convention, which no scan would find registered in
    Python) is not looked for. ``tree``: the text's, where the caller has it."""
    said = [d.message for d in facts.diagnostics if d.code.startswith("GPU1")]
    for pending in facts.pending:
        summary = facts.summaries.get(pending.callee)
        if pending.diagnostic.code.startswith("GPU1") and summary is not None:
            said += [*summary.needs_contiguous.values(), *summary.needs_unit_stride.values()]
    wanted = {
        (namespace, name) for text in said for namespace, name in _NAMED_OP.findall(text)
        if not namespace.startswith("_")
    }  # fmt: skip
    if not wanted:
        return ()
    outline = names_outline(source, settings, module_name_for(source.path), is_package_init(source.path), tree)
    with span("custom ops beside the run"):
        return python_ops_beside(outline, settings, wanted)


def hearing_ops_alone(
    source: SourceFile, settings: Settings, facts: FileFacts, names: ProjectNames | None,
    relint: Callable[[FileProjectNames], FileFacts], tree: ast.Module | None = None,
) -> tuple[FileFacts, ProjectNames | None]:
    """A file checked alone, after its lint (``facts``), linted again (``relint``, handed what
    it hears then) where a finding may rest on a custom op a file beside it implements in
    Python (``ops_heard_alone``), hearing those ops as a run of every file does; with what it
    hears of the files beside it (``names``: ``names_of_a_lone_file``'s, or None). The CLI's
    one-file run, the editor's lint and fix, and the flake8 plugin each lint their own way."""
    ops = ops_heard_alone(source, settings, facts, tree)
    heard = names.of(source.path) if names is not None else NOTHING_FROM_THE_PROJECT
    if not set(ops) - set(heard.python_ops):
        return facts, names
    names = (names or ProjectNames([])).hearing_ops(source.path, ops)
    return relint(names.of(source.path)), names


def read_names_outline(
    path: str, settings: Settings, source: SourceFile | None = None, skeleton: bool = False,
) -> FileOutline:
    """``names_outline`` of a file, read from disk unless ``source`` is given; an empty outline
    where it cannot be read (linting it reports why). ``skeleton``: of its top-level imports,
    decorators and class headers only (``_skeleton``), where that text parses."""
    if source is None:
        try:
            source = read(path)
        except SourceError:
            return FileOutline(path)
    tree = None
    if skeleton:
        try:
            tree = ast.parse(_skeleton(source.text))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None  # a line the scan misread (in a string): the whole text, then
    return names_outline(source, settings, module_name_for(path), is_package_init(path), tree)


_SKELETON_STARTS = ("import ", "from ", "class ", "@")
# An import statement's start, for an indented line (``_skeleton``): prose in a docstring ("from
# their weights ...", "import the cache") is not one, and would fail the skeleton's parse.
_INDENTED_IMPORT = re.compile(r"(?:from\s+\.*[\w.]*\s+import\s*[(*\w]|import\s+[\w.]+(?:\s+as\s+\w+)?\s*(?:[,#;\\]|$))")


def _skeleton(text: str) -> str:
    """The imports, top-level class headers (each with ``...`` for a body) and the decorators
    of those classes, of a file read only for its classes' bases (``outlines_beyond``): a
    tenth of a parse of the whole. A statement of several lines is followed by its brackets;
    an import under a block (``try:``, ``if TYPE_CHECKING:``, a function) is kept, moved to the
    top level, as the names outline of the whole file reads every import (``_import_statements``);
    a class under a block, or nested in a class, is left out, as ``_class_outlines`` leaves it."""
    kept: list[str] = []
    decorators: list[str] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.startswith(_SKELETON_STARTS):
            if line[:1] not in ("", " ", "\t", "#"):
                decorators = []  # a decorator of something else
                continue
            line = line.lstrip()
            if not _INDENTED_IMPORT.match(line):
                continue
        statement = [line]
        depth = _bracket_depth(line)
        while (depth > 0 or statement[-1].rstrip().endswith("\\")) and index < len(lines):
            statement.append(lines[index])
            depth += _bracket_depth(lines[index])
            index += 1
        if line.startswith("@"):
            decorators.extend(statement)
        elif line.startswith("class "):
            kept.extend(decorators)
            kept.extend(statement)
            kept.append("    ...")
            decorators = []
        else:
            kept.extend(statement)
    return "\n".join(kept) + "\n"


def _bracket_depth(line: str) -> int:
    """Brackets opened less closed on a line, its comment left out (strings are not read: a
    bracket in one may mislead the scan, and the parse of the skeleton then fails)."""
    code = line.partition("#")[0]
    return code.count("(") + code.count("[") + code.count("{") - code.count(")") - code.count("]") - code.count("}")


def outlines_beyond(
    outlines: list[FileOutline], settings: Settings, looked_at: dict[str, int | None] | None = None,
) -> list[FileOutline]:
    """The names outlines (``names_outline``) of the files outside a run that its classes'
    bases may be defined in, and theirs, to a fixpoint: whether a class is an ``nn.Module``
    must not hang on which other files the run holds (pre-commit checks the staged files, CI
    every file, an editor one buffer). A base's module is looked for beside the run's packages
    only (``_package_root``): torch's, a library's installed elsewhere, are not read; nor a
    base the run defines, or one of torch's modules. Read level by level, and only the bases of
    classes not yet known to be modules: once one base makes a class a module, its others
    (mixins, caches) are not followed. ``looked_at``: see ``ModuleFiles``."""
    files = ModuleFiles(outlines, looked_at)
    if not files.roots:
        return []
    found: list[FileOutline] = []
    while len(found) < _MAX_FILES_BEYOND:
        known_classes = ModuleClasses(outlines, found)
        wanted: list[str] = []
        for meaning in known_classes.unresolved_bases():
            for name in known_classes.resolver.unresolved_through(meaning):
                path = files.new_file_of(name)
                if path is not None:
                    wanted.append(path)
        if not wanted:
            break
        found.extend(
            read_names_outline(path, settings, skeleton=True) for path in sorted(wanted)[: _MAX_FILES_BEYOND - len(found)]
        )
    return found


def plan_reading_callees(
    outlines: list[FileOutline], bases_of: Callable[[list[FileOutline], dict[str, int | None]], list[FileOutline]],
    outline_files: Callable[[list[str]], list[FileOutline]], follow_calls: bool = True,
    registration_words: Callable[[], RegistrationWords | None] | None = None,
) -> ProjectPlan:
    """The plan of a run (``outlines``), with the files outside it that its findings may rest on
    planned too (``ProjectPlan.silent``): those that may define the functions its hot code
    calls, and those its functions that may hand a view or a cast on call, to any depth, and
    those that may register the custom ops these call (``ProjectPlan.unread_callees``), in the
    run's own top-level packages beside it (``ModuleFiles``). A run of part of a package (pre-commit's staged files, a folder) then
    reads the summaries a run of every file reads, as mypy follows imports silently: the run
    lints those files and reports none of their findings. Read level by level, each new file's
    reached functions followed in turn; a run of every file reads none. ``bases_of``:
    ``outlines_beyond``; ``outline_files``: ``outline`` of each path. ``follow_calls`` False
    (``follow-imports = "skip"``): only the files that may register the custom ops it calls are
    read, as a run of one file checked alone reads them (``hearing_ops_alone``).

    What a run cannot see this way: a function of the run that only a hot function outside it
    calls (the callers of a run's code are not looked for).

    The files it looked at beyond the run and did not read (``ModuleFiles.looked_at``) are the
    plan's too (``ProjectPlan.beyond``), and so is its scan for registrations
    (``ModuleFiles.registrations``): a cached plan is made again where one appears or changes, or
    where a file comes to register a custom op it looked for. ``registration_words``: for that
    scan (``ModuleFiles``)."""
    files = ModuleFiles(outlines, registration_words=registration_words)
    bases = bases_of(outlines, files.looked_at)  # what it looks at is the plan's too
    plan = ProjectPlan(outlines, bases, files=files)
    callees: list[FileOutline] = []
    # A run of every file of its packages has nothing beyond it: a directory walk answers that
    # for less than the question (0.05 s against 0.14 s on vLLM).
    beyond = bool(files.roots) and not holds_its_packages([o.path for o in outlines])
    while beyond:
        with span("project plan: callees beyond the run"):
            wanted = plan.unread_callees(follow_calls)
        if not wanted:
            break
        callees.extend(outline_files(sorted(wanted)))
        plan = ProjectPlan(outlines, bases, callees, files)
    if callees:  # a class of theirs may derive from a file beyond them
        plan = ProjectPlan(outlines, bases_of([*outlines, *callees], files.looked_at), callees, files)
    return plan


def holds_its_packages(paths: list[str]) -> bool:
    """Does a run hold every Python file of its top-level packages, under each folder they are
    looked for in (``ModuleFiles``)? Then no function it calls is beyond it, and
    ``plan_reading_callees`` reads no file: it does not ask, and the plain path, which makes no
    plan, need not outline the run to learn so."""
    held = {os.path.abspath(path) for path in paths}
    roots, own = set(), set()
    for path in paths:
        module = module_name_for(path)
        root = _package_root(path, module)
        if root is not None:
            roots.add(root)
            own.add(module.partition(".")[0])
    for root in roots:
        for top in own:
            for folder, _, names in os.walk(os.path.join(root, top)):
                if any(name.endswith(".py") and os.path.join(folder, name) not in held for name in names):
                    return False
            if os.path.join(root, top + ".py") not in held and os.path.isfile(os.path.join(root, top + ".py")):
                return False
    return True


class ModuleFiles:
    """The files beside a run's packages (``_package_root``) that modules of it are in, and which
    of them the run has not read yet."""

    def __init__(
        self, outlines: list[FileOutline], looked_at: dict[str, int | None] | None = None,
        registration_words: Callable[[], RegistrationWords | None] | None = None,
    ) -> None:
        """``registration_words``: what earlier runs' scans for registrations found
        (``RegistrationWords``, from the cache), asked for at the first scan; None: none kept."""
        self._registration_words = registration_words
        self.roots = sorted({root for o in outlines if (root := _package_root(o.path, o.module_name)) is not None})
        self.own = frozenset(o.module_name.partition(".")[0] for o in outlines if o.module_name)  # top-level packages
        self.known = {os.path.abspath(o.path) for o in outlines}
        self._files: dict[str, str | None] = {}
        self._registration_texts: dict[str, bytes] | None = None  # read at the first op asked for
        self.registrations = RegistrationScan()  # what reading them read, for a cached plan
        # ``_may_define_or_import``'s answers: each level of ``plan_reading_callees`` asks again
        # of the names a file was not worth reading for (three in five questions on SGLang).
        self._worth_reading: dict[tuple[str, tuple[str, ...]], bool] = {}
        # The paths a question looked for and found no file at (None), and the files it judged
        # not worth reading (their fingerprint): where one appears or changes, the answers may.
        self.looked_at: dict[str, int | None] = {} if looked_at is None else looked_at

    def file_of(self, module: str) -> str | None:
        """``root/a/b.py`` or ``root/a/b/__init__.py`` of module ``a.b`` (absolute), under the
        first root that has one; None: no such file."""
        if module not in self._files:
            self._files[module] = None
            parts = module.split(".")
            for root in self.roots:
                base = os.path.join(root, *parts)
                for candidate in (base + ".py", os.path.join(base, "__init__.py")):
                    candidate = os.path.abspath(candidate)
                    if os.path.isfile(candidate):
                        self._files[module] = candidate
                        return candidate
                    self.looked_at.setdefault(candidate, None)
        return self._files[module]

    def registering(self, ops: set[tuple[str, str]]) -> list[str]:
        """The files of the run's own packages not read yet that may register one of ``ops`` in
        Python (``files_registering``; an extension's own namespace, ``_C``, is C++ by the
        engines' convention and not asked for). Each op is looked for once, in the texts of the
        files that hold a registration word, read at the first question."""
        scan = self.registrations
        ops = ops - scan.ops
        if not ops:
            return []
        scan.ops |= ops
        if self._registration_texts is None:
            scan.folders = tuple(os.path.join(root, top) for root in self.roots for top in sorted(self.own))
            scan.skip = frozenset(self.known)  # a file read already is no news
            words = self._registration_words() if self._registration_words is not None else None
            self._registration_texts = registration_texts(list(scan.folders), scan.skip, scan.stats, words)
        found = files_registering(self._registration_texts, ops, self.known)
        scan.found.update(found)
        self.known.update(found)
        return found

    def new_file_of(self, name: str, calls: bool = False) -> str | None:
        """The file of the longest module prefix of the dotted ``name`` (a function, a class)
        beside the run, where the run has not read it yet; it then counts as read. ``calls``:
        ``name`` is a call's, so only a file that may define a function it names, or import
        what it names (a re-export), is worth reading (``_may_define_or_import``): not one
        that a type annotation or a constant names."""
        module, dot, _ = name.rpartition(".")
        while dot:
            path = self.file_of(module)
            if path is not None:
                if path in self.known:
                    return None
                if calls and not self._may_define_or_import(path, name[len(module) + 1 :].split(".")):
                    return None
                self.known.add(path)
                return path
            module, dot, _ = module.rpartition(".")
        return None

    def _may_define_or_import(self, path: str, parts: list[str]) -> bool:
        """May the module at ``path`` define a function ``parts`` names (``f``, or a method
        ``C.m``: a ``def`` of either of the first two parts, or a class ``C`` whose bases may
        define ``m``), or import its first part? A name that resolves to a function of the plan
        names a ``def`` there, or goes through an import (``_Resolver``); a class or a constant
        named alone (an annotation, a constructor call) is no function, and no analysis follows
        a call of one (the plan may resolve it to the module's own code, ``MODULE_CODE``, where
        that defines a function under a block: an over-approximation that no finding rests
        on). ``test_a_file_skipped_as_not_worth_reading_answers_no_name_it_was_asked_for``
        checks this against the plan's resolution over this repository's modules."""
        key = (path, tuple(parts[:2]))
        if key not in self._worth_reading:
            text = _raw(path)  # None: its outline will say why it cannot be read
            self._worth_reading[key] = text is None or _defines_or_imports(text, key[1])
            if not self._worth_reading[key]:
                self.looked_at[path] = zlib.crc32(text)
        return self._worth_reading[key]


def _defines_or_imports(text: bytes, parts: tuple[str, ...]) -> bool:
    """``ModuleFiles._may_define_or_import``'s answer from a file's text, for the first two parts
    of a name: does a part follow ``def`` (the first, ``class``), or the first one ``import``
    on its line or inside a bracket opened on that line (``from m import (a,\n b)``)? Found
    from each whole-word occurrence of a part, looking back from it: a tenth of the time of
    patterns that scan the whole text for the keywords (``tests/test_project_plan.py`` holds
    those patterns, and checks that both answer alike)."""
    words = [part.encode() for part in parts]
    if not any(word in text for word in words):
        return False  # a file that holds neither word: nothing to look at
    if any(_after_keyword(text, at, b"def") for word in words for at in _whole_words(text, word)):
        return True
    for at in _whole_words(text, words[0]):
        if len(words) > 1 and _after_keyword(text, at, b"class"):
            return True
        if _holds_import(text, text.rfind(b"\n", 0, at) + 1, at):
            return True
        bracket = text.rfind(b")", 0, at)  # a bracket opened after the last one closed before it
        while (bracket := text.find(b"(", bracket + 1, at)) != -1:
            if _holds_import(text, text.rfind(b"\n", 0, bracket) + 1, bracket):
                return True
    return False


_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_SPACE_BYTES = frozenset(b" \t\n\r\f\v")


def _whole_words(text: bytes, word: bytes, start: int = 0, end: int | None = None):
    """Where ``word`` starts in ``text[start:end]`` with no word character beside it."""
    end = len(text) if end is None else end
    while (at := text.find(word, start, end)) != -1:
        start = at + 1
        after = at + len(word)
        if (at == 0 or text[at - 1] not in _WORD_BYTES) and (after == len(text) or text[after] not in _WORD_BYTES):
            yield at


def _after_keyword(text: bytes, at: int, keyword: bytes) -> bool:
    """Does ``keyword`` (a whole word) come right before ``at``, with whitespace between?"""
    before = at
    while before > 0 and text[before - 1] in _SPACE_BYTES:
        before -= 1
    start = before - len(keyword)
    return before < at and start >= 0 and text[start:before] == keyword and (start == 0 or text[start - 1] not in _WORD_BYTES)


def _holds_import(text: bytes, start: int, end: int) -> bool:
    return next(_whole_words(text, b"import", start, end), None) is not None


def _package_root(path: str, module_name: str) -> str | None:
    """The folder a file's top-level package is in (its module name's first part a folder or a
    file there); None for a file of no package."""
    if not module_name or "." not in module_name and not path.endswith("__init__.py"):
        return None
    folder = os.path.dirname(os.path.abspath(path))
    depth = module_name.count(".") + (1 if path.endswith("__init__.py") else 0)
    for _ in range(depth):
        folder = os.path.dirname(folder)
    return folder


def _module_imports(outlines: list[FileOutline]) -> dict[str, dict[str, tuple[str, ...]]]:
    """Module -> what its imports bind, over the outlines (a module of two files: both's)."""
    found: dict[str, dict[str, tuple[str, ...]]] = {}
    for o in outlines:
        if o.module_name and o.imports:
            found.setdefault(o.module_name, {}).update(o.imports)
    return found


def _imports(
    imports: list[ast.Import], import_froms: list[ast.ImportFrom], module_name: str, is_package: bool,
    aliases: dict[str, str],
) -> dict[str, tuple[str, ...]]:
    """What the import statements anywhere in a file bind (``analysis.names.NameTable`` keeps the
    first meaning of a name imported twice; here every meaning counts), with ``alias-modules``
    applied too."""
    meanings: dict[str, set[str]] = {}
    for node in imports:
        for alias in node.names:
            if alias.asname:
                meanings.setdefault(alias.asname, set()).add(alias.name)
            else:
                root = alias.name.partition(".")[0]
                meanings.setdefault(root, set()).add(root)
    for node in import_froms:
        base = resolve_relative(module_name, is_package, node.level, node.module or "")
        for alias in node.names:
            if alias.name != "*":
                meanings.setdefault(alias.asname or alias.name, set()).add(f"{base}.{alias.name}" if base else alias.name)
    return {local: tuple(sorted(_with_aliases(full, aliases))) for local, full in meanings.items()}


def _import_statements(tree: ast.Module) -> tuple[list[ast.Import], list[ast.ImportFrom]]:
    """Every import statement of a file, found without looking into expressions (which hold
    none): cheaper than a walk of every node (``Scout.of``), for a file read for nothing else."""
    found: dict[type, list] = {ast.Import: [], ast.ImportFrom: []}
    todo = list(tree.body)
    while todo:
        statement = todo.pop()
        if type(statement) in found:
            found[type(statement)].append(statement)
            continue
        for block in BLOCK_FIELDS:
            inner = getattr(statement, block, None)
            if type(inner) is list:
                todo.extend(inner)
    return found[ast.Import], found[ast.ImportFrom]


def _with_aliases(names: set[str], aliases: dict[str, str]) -> set[str]:
    found = set(names)
    for name in names:
        for alias, target in aliases.items():
            if name == alias or name.startswith(alias + "."):
                found.add(target + name[len(alias) :])
    return found


def _unit_outlines(
    plan: MaskPlan, tree: ast.Module, module_name: str, imports: dict[str, tuple[str, ...]], aliases: dict[str, str],
    whole: bool, sink_scout: Scout | None = None,
) -> list[UnitOutline]:
    """Each function unit's qualified name and the dotted names it may call, as the analyses
    resolve a call (``SyncAnalysis._callee``, ``SinkAnalysis.callee_of``): a name of this module
    (a top-level function or class: ``<module>.<chain>``), through an import of its head, or
    ``self.``/``cls.``/``super().`` methods of its class and of every base of it. Module-level
    code is a unit too (``MODULE_CODE``, named as the module) where it defines a function, or
    where the file is parsed whole (``whole``); elsewhere it is neither called nor a seed.

    ``sink_scout``: the file's scout, where a GPU1xx rule may run on it. A unit then also gets
    what the GPU1xx plan reads (``UnitOutline.handed``: ``Scout.sink_handing``, its calls'
    names resolved the same way); a file parsed whole keeps every unit, but what its units hand
    on still decides what other files keep. The analyses look into the
    code outside every unit only for the functions it defines, which make it a unit here."""
    prefix = f"{module_name}." if module_name else ""
    bases = _class_bases(tree, module_name, imports)
    local = {plan.units[index].name for index in plan.functions() if plan.units[index].class_index is None}
    local.update(bases)  # the top-level classes
    local.update(_defined_in_blocks(tree))  # module code's own, called as ``<module>.<name>``
    resolve = _CallNames(module_name, imports, local, aliases)
    by_first_line = {}
    outlines = []
    for index in plan.functions():
        unit = plan.units[index]
        class_name, name = plan.qualified(index)
        qualname = prefix + ".".join(part for part in (class_name, name) if part)
        own = (f"{prefix}{class_name}", *bases.get(class_name, ())) if class_name else ()
        outlines.append(UnitOutline(index, qualname, resolve(plan.unit_text(unit), own)))
        by_first_line[unit.first] = (outlines[-1], own)
    module_text = plan.text_outside_functions
    module_own = tuple({f"{prefix}{c}" for c in bases} | {base for outside in bases.values() for base in outside})
    module_outline = None
    if module_name and (whole or _DEFINITION.search(module_text)):
        # ``self.`` in module-level code: a method of a class defined there, or nested in a
        # class's body; any class of the file may be its own.
        module_outline = UnitOutline(MODULE_CODE, module_name, resolve(module_text, module_own))
        outlines.append(module_outline)
    if sink_scout is None or not (module_name or module_outline):
        return outlines  # without a module name, a function outside every unit is in no unit here
    with span("outline: sink handing"):
        handing = sink_scout.sink_handing(resolve.may_resolve)
    if handing is not None and _attach_handing(handing, by_first_line, resolve) and module_outline is not None:
        rest = next((scope for scope in handing if scope.function is None), None)
        _give(module_outline, rest, module_own, resolve)
    return outlines


def _defined_in_blocks(tree: ast.Module) -> set[str]:
    """The functions and classes defined under module-level blocks (``if hasattr(torch.ops._C,
    "op"): def op_wrapper(x): ...``, ``try``, ``with``, loops), at any depth of them: no units of
    their own, but part of the module code's (``MODULE_CODE``), which a call of one reaches."""
    found: set[str] = set()
    todo = [statement for statement in tree.body if type(statement) not in _DEFINITIONS]
    while todo:
        statement = todo.pop()
        for block in BLOCK_FIELDS:
            for inner in getattr(statement, block, None) or ():
                if type(inner) in _DEFINITIONS:
                    found.add(inner.name)
                else:
                    todo.append(inner)
    return found


_DEFINITIONS = (*FUNCTIONS, ast.ClassDef)


def _attach_handing(handing: list[ScopeHanding], by_first_line: dict, resolve: _CallNames) -> bool:
    """Give each function unit what its scope hands on (``_give``); False (and nothing given)
    when a scope is in no unit of the cut."""
    matched = []
    for scope in handing:
        if scope.function is None:
            continue
        found = by_first_line.get(first_line(scope.function) - 1)
        if found is None:
            return False
        matched.append((found, scope))
    for (unit, own), scope in matched:
        _give(unit, scope, own, resolve)
    return True


def _give(unit: UnitOutline, scope: ScopeHanding | None, own: tuple[str, ...], resolve: _CallNames) -> None:
    """The unit's part in GPU1xx findings, with its calls' names resolved (``own``: its class
    and bases); no scope: it hands nothing on."""
    if scope is None:
        unit.reports_at_sink, unit.handed, unit.needs, unit.signature = False, (), frozenset(), None
        return
    unit.reports_at_sink = scope.reports
    unit.handed = tuple((resolve(call.callee, own), call.arguments) for call in scope.calls)
    unit.needs = scope.needs
    unit.signature = scope.signature


_DEFINITION = re.compile(r"\bdef\s")


class _CallNames:
    """The dotted names the code of one unit may call (see ``_unit_outlines``)."""

    def __init__(self, module_name: str, imports: dict[str, tuple[str, ...]], local: set[str], aliases: dict[str, str]) -> None:
        self.prefix = f"{module_name}." if module_name else ""
        self.aliases = aliases  # a name of this module is renamed by them too (``NameTable``)
        self.local = local
        # Per imported name, the meanings that may be a function of the run: not a library's
        # (unless the library is the module's own package). A chain with any other head names
        # nothing the plan follows, which spares most chains of a unit any further look.
        own_root = module_name.partition(".")[0]
        self.followed = {}
        for head, meanings in imports.items():
            kept = tuple(
                full for full in meanings if (root := full.partition(".")[0]) not in LIBRARY_ROOTS or root == own_root
            )
            if kept:
                self.followed[head] = kept

    def may_resolve(self, head: str) -> bool:
        """Whether a dotted name with this head may name a function of the run."""
        return head in ("self", "cls") or head in self.local or head in self.followed

    def __call__(self, text: str, own: tuple[str, ...]) -> tuple[str, ...]:
        """``own``: the qualified names of the unit's class and its bases (none outside a class)."""
        refs: set[str] = set()
        local, followed = self.local, self.followed
        for written in set(_CHAIN.findall(text)):
            head = written.partition(".")[0].rstrip()  # a chain may be spaced around its dots
            is_instance = head in ("self", "cls")
            if not (is_instance or head in local or head in followed):
                continue
            rest = "".join(written.split()).split(".")[1:]
            if is_instance and rest:
                refs.update(f"{owner}.{rest[0]}" for owner in own)
            if head in local:
                refs.update(_with_aliases({self.prefix + ".".join([head, *rest])}, self.aliases))
            for full in followed.get(head, ()):
                refs.add(".".join([full, *rest]))
        if "super" in text:  # a substring test costs a fraction of the pattern's scan of every word
            for method in _SUPER_METHOD.findall(text):
                refs.update(f"{owner}.{method}" for owner in own)
        # Interned: the same names recur across a file's units (and a worker's batch), which
        # are pickled to the main process and all held there at once.
        return tuple(sorted(map(sys.intern, refs)))


def _class_bases(tree: ast.Module, module_name: str, imports: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Top-level class -> the dotted names of its bases in other modules, through the bases of
    this file's own classes (a method ``self.`` calls may be inherited from any of them)."""
    written: dict[str, list[str]] = {}
    for statement in tree.body:
        if type(statement) is ast.ClassDef:
            names = []
            for base in statement.bases:
                node = base.value if type(base) is ast.Subscript else base
                dotted = ast_dotted(node)
                if dotted:
                    names.append(dotted)
            written[statement.name] = names
    found: dict[str, tuple[str, ...]] = {}
    for class_name, own_bases in written.items():
        outside: set[str] = set()
        seen = {class_name}
        todo = list(own_bases)
        while todo:
            base = todo.pop()
            head, _, rest = base.partition(".")
            if head in written and not rest:
                if head not in seen:
                    seen.add(head)
                    todo.extend(written[head])
                outside.add(f"{module_name}.{head}" if module_name else head)
                continue
            outside.update(full + ("." + rest if rest else "") for full in imports.get(head, ()))
        found[class_name] = tuple(sorted(outside))
    return found


class ProjectPlan:
    """The units each file of a run needs parsed, from the outlines of all of them."""

    def __init__(
        self, outlines: list[FileOutline], beyond: list[FileOutline] | tuple = (),
        callees: list[FileOutline] | tuple = (), files: ModuleFiles | None = None,
    ) -> None:
        """``beyond``: the outlines of files outside the run its classes' bases may be in
        (``outlines_beyond``). ``callees``: those of the files outside the run its findings may
        rest on (``plan_reading_callees``), planned as the run's own files are; the run lints them
        and reports none of their findings (``silent``). ``files``: the questions that found
        those (``ModuleFiles``), still asking: what they looked at and did not read is the plan's
        too (``beyond``, ``KeptPlan.registrations``)."""
        self._run = outlines
        outlines = [*outlines, *callees]
        self.outlines = {o.path: o for o in outlines}
        self.silent = tuple(o.path for o in callees)
        self._read_beyond = tuple((os.path.abspath(o.path), o.fingerprint) for o in (*beyond, *callees))
        self._files = files
        self._ids: dict[tuple[str, int], int] = {}
        self._units: list[tuple[str, int]] = []
        self._unit_outlines: list[UnitOutline] = []
        by_qualname: dict[str, list[int]] = {}
        module_imports = _module_imports(outlines)
        for o in outlines:
            for unit in o.units:
                self._ids[(o.path, unit.index)] = len(self._units)
                by_qualname.setdefault(unit.qualname, []).append(len(self._units))
                self._units.append((o.path, unit.index))
                self._unit_outlines.append(unit)
        self._resolver = _Resolver(by_qualname, module_imports)
        self._calls = _CallEdges(self._unit_outlines, self._resolver)
        # The codes of each family of rules, and the units each closure keeps: the sink rules',
        # the hot-scope rules', and those of every other rule (``_active_rules``).
        self._sink_codes: frozenset[str] = frozenset(code for o in outlines for code in o.at_sinks)
        self._hot_codes: frozenset[str] = frozenset(code for o in outlines for code in o.in_hot_scopes)
        self._sink_kept: set[int] = set()
        self._hot_kept: set[int] = set()
        self._other_kept: set[int] = set()
        with span("project plan: module classes and python ops"):
            self._module_classes = ModuleClasses(outlines, beyond)
            self.names = ProjectNames(outlines, self._module_classes)

    @functools.cached_property
    def kept(self) -> set[int]:
        """The units to keep (``_close``), made at the first question: a plan asked only what
        lies beyond its run (each level of ``plan_reading_callees`` but the last) needs none."""
        with span("project plan: closure"):
            return self._close(list(self.outlines.values()))

    @property
    def beyond(self) -> tuple[tuple[str, int | None], ...]:
        """The files outside the run the plan rests on (``KeptPlan.beyond``): those it read, and
        those it looked at and did not read."""
        if self._files is None:
            return self._read_beyond
        read = {path for path, _ in self._read_beyond}
        return self._read_beyond + tuple(sorted(item for item in self._files.looked_at.items() if item[0] not in read))

    def unread_callees(self, follow_calls: bool = True) -> set[str]:
        """The files of the run's own packages not read yet (the plan's ``ModuleFiles``) that the run's
        starting functions may reach (see ``plan_reading_callees``): those of the names they
        reach through calls naming no function of the plan, and those that may register in
        Python a custom op that a function they reach calls and no file read implements (the
        function of one that a file read implements is reached in turn). The starting
        functions: the run's hot units (its hot-scope seeds, and the hot-named methods of its
        module classes), and its units that may hand a suspect value on, or that the scout
        could not read; and for the ops they call, its units that may hand one to a sink of
        their own. ``follow_calls`` False: the files of the ops alone."""
        files = self._files
        assert files is not None, "a plan made without asking beyond its run"
        starts: list[int] = []
        at_own_sinks: list[int] = []  # the run's units that may hand a suspect value to a sink of their own
        run_paths = set()
        for o in self._run:
            run_paths.add(o.path)
            hot = {index for code, (seeds, _) in o.seeds.items() if code in o.in_hot_scopes for index in seeds}
            for unit in o.units:
                hands_on = bool(o.at_sinks) and (
                    unit.handed is None or any(suspect for _, arguments in unit.handed for _, _, suspect in arguments)
                )
                if unit.index in hot or hands_on:
                    starts.append(self._ids[(o.path, unit.index)])
                elif o.at_sinks and unit.reports_at_sink:
                    at_own_sinks.append(self._ids[(o.path, unit.index)])
        starts.extend(self._ids[key] for key in self._module_classes.hot_units if key[0] in run_paths)
        reached: set[int] = set()
        ops: set[tuple[str, str]] = set()  # custom ops a reached function calls that no file read implements
        calling_ops = at_own_sinks  # an op called is a sink: the function of one implemented is reached
        while starts or calling_ops:
            new = _reach(starts, self._calls) - reached
            reached |= new
            starts = []
            for unit_id in (*calling_ops, *new):
                functions, unimplemented = self._ops_called(unit_id)
                starts.extend(functions - reached)
                ops |= {op for op in unimplemented if not op[0].startswith("_")}  # an extension's own (``_C``): C++
            calling_ops = []
        wanted = set(files.registering(ops))
        if not follow_calls:
            return wanted
        targets = self._resolver.targets  # asked already of each reached unit's names (``_CallEdges``)
        unresolved = {ref for unit_id in reached for ref in self._unit_outlines[unit_id].refs if not targets(ref)}
        for ref in sorted(unresolved):
            for name in self._resolver.unresolved_through(ref):
                if name.partition(".")[0] in files.own and (path := files.new_file_of(name, calls=True)) is not None:
                    wanted.add(path)
        return wanted

    def _ops_called(self, unit_id: int) -> tuple[set[int], set[tuple[str, str]]]:
        """The custom ops a unit calls: the functions of those a file read implements in Python
        (``PythonOps``), and the ops no file read implements."""
        unit = self._unit_outlines[unit_id]
        if not unit.op_calls:
            return set(), set()
        path = self._units[unit_id][0]
        implemented = {(namespace, name): function for namespace, name, function in self.names.of(path).python_ops}
        functions: set[int] = set()
        unimplemented: set[tuple[str, str]] = set()
        for op in unit.op_calls:
            if op in implemented:
                functions |= self._resolver.targets(implemented[op])
            else:
                unimplemented.add(op)
        return functions, unimplemented

    def _needed_by_the_run(self, kept: set[int]) -> set[int]:
        """The kept units of a run and what they may reach, over calls and the custom ops they
        call that a file read implements: of a file read beyond the run (``silent``), only
        these hold a summary that a finding of the run may rest on. Its own hot methods and
        kernel wrappers, seeds of the closures like the run's, are judged for no report."""
        silent = set(self.silent)
        run = [unit_id for unit_id in kept if self._units[unit_id][0] not in silent]
        needed = set(run)
        todo = deque(run)
        while todo:
            unit_id = todo.popleft()
            for other in (*self._calls[unit_id], *self._ops_called(unit_id)[0]):
                if other not in needed:
                    needed.add(other)
                    todo.append(other)
        return needed

    def _close(self, outlines: list[FileOutline]) -> set[int]:
        """The units to keep: each rule's seeds (over all files), followed along the calls the
        way its summaries flow (to the callees, to the callers, or both); the union over rules.
        The rules that report only at sinks (GPU1xx) share one closure (``_sink_closure``), and
        so do those that report only in hot scopes (``_hot_closure``)."""
        callers = [[] for _ in self._units]
        for caller, callees in enumerate(self._calls):
            for callee in callees:
                callers[callee].append(caller)
        by_rule: dict[str, tuple[list[int], frozenset[str]]] = {}
        sink_seeds: list[int] = []
        hot_seeds: list[int] = []
        for o in outlines:
            for code, (seeds, directions) in o.seeds.items():
                ids = [self._ids[(o.path, index)] for index in seeds if (o.path, index) in self._ids]
                if code in o.at_sinks:
                    sink_seeds.extend(ids)
                    continue
                if code in o.in_hot_scopes:
                    hot_seeds.extend(ids)
                    continue
                entry = by_rule.setdefault(code, ([], directions))
                entry[0].extend(ids)
        # The hot-named methods of classes that are modules by way of another file: the scout
        # of their file could not tell.
        for path, index in self._module_classes.hot_units:
            if self.outlines[path].in_hot_scopes and (path, index) in self._ids:
                hot_seeds.append(self._ids[(path, index)])
        kept: set[int] = set()
        if hot_seeds:
            with span("project plan: hot scopes"):
                self._hot_kept = self._hot_closure(outlines, hot_seeds, callers)
                kept |= self._hot_kept
        other = self._other_kept
        for seeds, directions in by_rule.values():
            other.update(seeds)
            if CALLEES in directions:
                other |= _reach(seeds, self._calls)
            elif BLOCK_CALLEES in directions:
                other |= self._reach_within_files(seeds)
            if CALLERS in directions:
                other |= _reach(seeds, callers)
        kept |= other
        if sink_seeds:
            with span("project plan: sinks"):
                self._sink_kept = self._sink_closure(outlines, sink_seeds, callers)
        kept |= self._sink_kept
        if self.silent:  # the two families' summaries flow only from callees to callers
            needed = self._needed_by_the_run(kept)
            self._hot_kept &= needed
            self._sink_kept &= needed
            kept = self._hot_kept | self._other_kept | self._sink_kept
        return kept

    def _reach_within_files(self, seeds: list[int]) -> set[int]:
        """What the seeds call, to any depth, in their own files: a sync declaration's block is
        judged with the functions of its file alone, and a call of another file's keeps it
        alive whatever that function does (``SyncAnalysis.function_may_sync``)."""
        units = self._units
        reached = set(seeds)
        todo = deque(seeds)
        while todo:
            unit_id = todo.popleft()
            path = units[unit_id][0]
            for other in self._calls[unit_id]:
                if other not in reached and units[other][0] == path:
                    reached.add(other)
                    todo.append(other)
        return reached

    def _hot_closure(self, outlines: list[FileOutline], seeds: list[int], callers: list[list[int]]) -> set[int]:
        """The units a hot-scope finding may be in or rest on: a hot unit, or what it calls, to any
        depth, that may reach a unit whose code may sync on a value from a named device
        (``UnitOutline.may_sync``; a summary records a sync only from such code). A unit in a
        file no hot-scope rule runs on has no summary to record one in.

        A unit that may sync explicitly on a parameter counts where some unit's call that may hand
        a value from a named device may call it (``UnitOutline.on_parameters``, ``tainted``).

        Hot code reads one definition besides summaries: a memoised function's, where it hands
        the tensor one returns to another (``SyncAnalysis.cached_call``: no sync per step), so
        each memoised function it may call is kept too (``UnitOutline.memoised``). A rule that
        reports at sites of its own (GPU205, ``UnitOutline.own_sites``) reports a hot call of a
        function that has one too (``FunctionSummary.upload``): each unit with its words is
        kept as a syncing one is, with what hot code calls on the way to it."""
        syncing, memoised, on_parameters, tainted, own_sites = [], set(), set(), [], []
        for o in outlines:
            if o.in_hot_scopes:
                for unit in o.units:
                    if unit.own_sites:
                        own_sites.append(self._ids[(o.path, unit.index)])
                    if unit.may_sync:
                        syncing.append(self._ids[(o.path, unit.index)])
                    if unit.memoised:
                        memoised.add(self._ids[(o.path, unit.index)])
                    if unit.on_parameters:
                        on_parameters.add(self._ids[(o.path, unit.index)])
                    if unit.tainted:
                        tainted.append(self._ids[(o.path, unit.index)])
        # A function that may sync explicitly on a parameter syncs where a call hands it a GPU
        # value (``FunctionSummary.syncs_on``): one a call may hand a value from a named device
        # counts as syncing.
        if on_parameters:
            for unit_id in tainted:
                syncing.extend(sorted(self._calls[unit_id] & on_parameters))
        reached = _reach(seeds, self._calls)
        return reached & (_reach(syncing, callers) | memoised | _reach(own_sites, callers))

    def _sink_closure(self, outlines: list[FileOutline], seeds: list[int], callers: list[list[int]]) -> set[int]:
        """The units a GPU1xx finding may be in or rest on.

        A finding is where a sink of the unit's own, or a call of a function that may need the
        parameter it binds (``_SinkFacts.needs``), is handed a value that may be a view or a cast:
        the unit *reports*. It rests on the callee's summary for that parameter, and a summary
        for a parameter rests on those of the functions the parameter is handed on to (its
        needs, and whether it is only read through, which decides a fix's safety). So the plan
        keeps the reporting units, and follows each (function, parameter) that matters to the
        functions it is handed to, within ``relevant`` (the callers of a seed: the functions that
        may reach a sink at all). A unit the scout could not read hands anything to everything
        it may call; one in a file no GPU1xx rule runs on (none of their words is there)
        neither reports nor has a summary."""
        relevant = _reach(seeds, callers)
        facts = _SinkFacts(self, outlines, relevant)
        kept: set[int] = set()
        matter: dict[int, set[str] | None] = {}  # unit -> the parameters that matter (None: all)
        todo: deque[int] = deque()

        def add(unit_id: int, params: set[str] | None) -> None:
            """``params`` of the unit matter (None: all): follow them if that is news."""
            known = matter.get(unit_id, set())
            if unit_id in matter and (known is None or (params is not None and params <= known)):
                return
            matter[unit_id] = None if params is None or known is None else known | params
            todo.append(unit_id)

        for unit_id, calls in facts.calls.items():
            if facts.reports[unit_id]:
                kept.add(unit_id)
            for targets, arguments in calls:
                for target in targets:
                    bound = facts.bound(target, [key for key, _, suspect in arguments if suspect], needed_only=True)
                    if bound is None or bound:
                        kept.add(unit_id)
                        add(target, bound)
        # A custom op implemented in Python is a call of its function (``PythonOps``), which the
        # scout reads as a sink: where a unit may hand a suspect value to a sink, the function
        # of each such op it names is kept, every parameter of it mattering.
        for o in outlines:
            implemented = {(namespace, name): function for namespace, name, function in self.names.of(o.path).python_ops}
            if not implemented:
                continue
            for unit in o.units:
                if unit.op_calls and facts.reports.get(self._ids[(o.path, unit.index)]):
                    for function in filter(None, map(implemented.get, unit.op_calls)):
                        for target in self._resolver.targets(function):
                            add(target, None)
        while todo:
            unit_id = todo.popleft()
            kept.add(unit_id)
            params = matter[unit_id]
            for targets, arguments in facts.calls.get(unit_id, ()):
                keys = [key for key, held, _ in arguments if held is None or params is None or not params.isdisjoint(held)]
                if keys:
                    for target in targets:
                        bound = facts.bound(target, keys)
                        if bound is None or bound:
                            add(target, bound)
        return kept

    def kept_by_file(self) -> KeptPlan:
        """What the plan keeps of each file, without the outlines: what a cache stores."""
        scanned = self._files.registrations if self._files is not None and self._files.registrations.ops else None
        return KeptPlan(
            {path: self.units_to_keep(path) for path in self.outlines}, self.names, self.beyond, self.silent, scanned
        )

    def units_to_keep(self, path: str) -> KeptUnits | None:
        """The function units of ``path`` to parse; None: parse it whole."""
        kept = self.kept  # made first: each family's closure too (``_close``)
        o = self.outlines.get(path)
        if o is None or o.whole:
            return None
        indices = tuple(
            unit.index for unit in o.units if unit.index != MODULE_CODE and self._ids[(path, unit.index)] in kept
        )
        # Without a module name, a function outside every unit has no unit (``_unit_outlines``).
        names_only = not indices and bool(o.module_name) and all(unit.index != MODULE_CODE for unit in o.units)
        at_sinks = None
        if not self._kept_by_other_rules(o):
            at_sinks = tuple(index for index in indices if self._ids[(path, index)] in self._sink_kept)
        return KeptUnits(o.fingerprint, indices, names_only, self._active_rules(o), o.cuts, at_sinks)

    def _kept_by_other_rules(self, o: FileOutline) -> bool:
        """Does the closure of a rule of neither family keep a unit of the file? Such a rule may
        read either family's summaries, so neither family's analyses may leave anything out there."""
        return not self._other_kept.isdisjoint(self._ids[(o.path, unit.index)] for unit in o.units)

    def _active_rules(self, o: FileOutline) -> tuple[str, ...] | None:
        """The codes of the file's rules (``FileOutline.active``), less those of a family (the
        sink rules, GPU1xx; the hot-scope rules) whose closure keeps no unit of it.

        Each family's closure is built around where its findings can be (GPU1xx: a unit
        handing a view or a cast to a sink, or to a parameter that may reach one; hot-scope:
        hot code and what it calls that may sync), with every summary they rest on, which only
        its own analyses record (contiguity and unit-stride needs; syncs, by ``SyncAnalysis``);
        and its rules report only in functions, each of which is a unit here. So the family
        has nothing to find or record in such a file, and its analyses are not run there: a
        file kept only for a kernel wrapper runs no ``SyncAnalysis``. Neither family reads the
        other's summaries (``CalleeCondition`` kinds), but any other rule may read either, so
        no family is dropped in a file another rule's closure keeps a unit of.

        A file kept nothing of keeps its rules: its lint then reads only what other files
        need of it (``KeptUnits.names_only``), which a file with no rules would not give (its
        methods are no functions to ``pipeline.unread``)."""
        if o.active is None:
            return None
        if self._kept_by_other_rules(o):
            return o.active
        ids = [self._ids[(o.path, unit.index)] for unit in o.units]
        dropped: set[str] = set()
        if self._sink_kept.isdisjoint(ids):
            dropped |= self._sink_codes
        if self._hot_kept.isdisjoint(ids):
            dropped |= self._hot_codes
        return tuple(code for code in o.active if code not in dropped) or o.active


@dataclass(frozen=True)
class KeptPlan:
    """A ``ProjectPlan``'s answer for each file (``ProjectPlan.kept_by_file``), as a warm run
    reads it back from the cache instead of outlining and planning again."""

    kept: dict[str, KeptUnits | None]
    names: ProjectNames | None = None
    # The files outside the run it read (``outlines_beyond``, ``plan_reading_callees``), and
    # those it looked at and did not read (``ModuleFiles.looked_at``): (absolute path, fingerprint;
    # None: no such file); and those it read that the run lints without reporting.
    beyond: tuple[tuple[str, int | None], ...] = ()
    silent: tuple[str, ...] = ()
    # Where it looked for the custom ops its run calls registered in Python: what it scanned.
    registrations: RegistrationScan | None = None

    def units_to_keep(self, path: str) -> KeptUnits | None:
        return self.kept.get(path)

    def beyond_unchanged(self) -> bool:
        """Do the files outside the run it read or looked at still hold what they did, and does
        none it looked for and did not find exist now, nor any file that registers a custom op it
        looked for and did not find? (The cache key holds the run's files only.)"""
        for path, was in self.beyond:
            if was is None:
                if os.path.exists(path):
                    return False
                continue
            raw = _raw(path)
            if raw is None or zlib.crc32(raw) != was:
                return False
        return self.registrations is None or self.registrations.unchanged()


class _SinkFacts:
    """What the GPU1xx plan reads of each unit (``UnitOutline``): its calls with their targets
    resolved (within ``relevant``), whether it reports at a sink of its own, and, to a fixpoint
    over the calls, which of its parameters may reach a sink (``needs``), as the analyses'
    summaries close them (``ProjectIndex._close``), over-approximated."""

    _EVERY = None  # ``needs`` of a unit that may need any parameter

    def __init__(self, plan: ProjectPlan, outlines: list[FileOutline], relevant: set[int]) -> None:
        targets = plan._resolver.targets
        self.calls: dict[int, list[tuple[frozenset[int], tuple[Argument, ...]]]] = {}
        self.reports: dict[int, bool] = {}
        self.needs: dict[int, set[str] | None] = {}
        self.signatures: dict[int, tuple | None] = {}
        resolved: dict[tuple[str, ...], frozenset[int]] = {}
        for o in outlines:
            if not o.at_sinks:
                continue  # no GPU1xx rule runs there: no findings, no summaries
            for unit in o.units:
                unit_id = plan._ids[(o.path, unit.index)]
                self.signatures[unit_id] = unit.signature
                if unit.handed is None:  # not read by the scout: anything to all it may call
                    self.reports[unit_id] = unit_id in relevant
                    self.needs[unit_id] = self._EVERY
                    onward = plan._calls[unit_id] & relevant
                    self.calls[unit_id] = [(frozenset(onward), (("*", None, True),))] if onward else []
                    continue
                self.reports[unit_id] = unit.reports_at_sink
                self.needs[unit_id] = None if unit.needs is None else set(unit.needs)
                calls = []
                for refs, arguments in unit.handed:
                    reached = resolved.get(refs)
                    if reached is None:  # one set per name: most calls name a few functions
                        reached = resolved[refs] = frozenset().union(*(targets(ref) for ref in refs)) & relevant
                    if reached:
                        calls.append((reached, arguments))
                self.calls[unit_id] = calls
        self._close()

    def _close(self) -> None:
        """A parameter handed to one a callee needs is needed, to a fixpoint."""
        grown = True
        while grown:
            grown = False
            for unit_id, calls in self.calls.items():
                if self.needs[unit_id] is not self._EVERY:
                    grown |= self._grow(unit_id, calls)

    def _grow(self, unit_id: int, calls: list[tuple[frozenset[int], tuple[Argument, ...]]]) -> bool:
        """Add to a unit's needs what its calls hand to needed parameters; grown?"""
        needs = self.needs[unit_id]
        before = len(needs)
        for targets, arguments in calls:
            for key, held, _ in arguments:
                if any(self.bound(target, [key], needed_only=True) != set() for target in targets):
                    if held is None:  # any of its parameters may be handed there
                        self.needs[unit_id] = self._EVERY
                        return True
                    needs.update(held)
        return len(needs) != before

    def bound(self, unit_id: int, keys: list, needed_only: bool = False) -> set[str] | None:
        """The parameters of a unit that arguments with these keys may bind (None: any), as a
        summary binds a call's arguments (``FunctionSummary.param_for``): a position binds the
        parameter there, past ``self`` / ``cls`` in a method (``self.f(x)`` and ``Cls.f(x)``
        alike), or ``*args``; a keyword its parameter or ``**kwargs``; ``*`` / ``**`` anything.
        ``needed_only``: only those it may need (``needs``)."""
        if not keys:
            return set()
        needs = self.needs.get(unit_id, set())
        if needed_only and needs is not self._EVERY and not needs:
            return set()
        signature = self.signatures.get(unit_id)
        if signature is None:
            return None if not needed_only or needs is self._EVERY else set(needs)
        positional, rest, keywords, method = signature
        found: set[str] = set()
        for key in keys:
            if key in ("*", "**"):
                return None if not needed_only or needs is self._EVERY else set(needs)
            if type(key) is int:
                index = key + 1 if method else key  # a summary's parameters leave ``self`` out
                if index < len(positional):
                    found.add(positional[index])
                elif rest is not None:
                    found.add(rest)
            elif key in positional or keywords is None:
                found.add(key)
            else:
                found.update((key, keywords))
        if needed_only and needs is not self._EVERY:
            found &= needs
        return found


class _CallEdges:
    """Unit id -> the ids of the units its calls may name (``_Resolver``), each unit's asked at
    the first question of it. A plan made at each level of ``plan_reading_callees`` but the last
    is asked only what its run's starting functions reach (``unread_callees``): the units of
    the files read beyond a run are most of its units (whole files: a layer's, a model's), and
    resolving every name they call, level after level, was most of a staged run's plan."""

    def __init__(self, units: list[UnitOutline], resolver: _Resolver) -> None:
        self._units = units
        self._resolver = resolver
        self._edges: list[set[int] | None] = [None] * len(units)

    def __len__(self) -> int:
        return len(self._edges)

    def __getitem__(self, unit_id: int) -> set[int]:
        edges = self._edges[unit_id]
        if edges is None:
            edges = self._edges[unit_id] = self._resolve(unit_id)
        return edges

    def __iter__(self) -> Iterator[set[int]]:
        """Every unit's, in order (a closure over callers asks them all)."""
        with span("project plan: calls"):
            for unit_id, edges in enumerate(self._edges):
                if edges is None:
                    self._edges[unit_id] = self._resolve(unit_id)
        return iter(self._edges)  # type: ignore[arg-type]  # each made above

    def _resolve(self, unit_id: int) -> set[int]:
        known, targets = self._resolver.memo, self._resolver.targets  # most names are met before
        calls: set[int] = set()
        for ref in self._units[unit_id].refs:
            reached = known.get(ref)
            if reached is None:
                reached = targets(ref)
            if reached:  # most names are of no function of the run
                calls.update(reached)
        return calls


def _reach(seeds: list[int], edges) -> set[int]:
    reached = set(seeds)
    todo = deque(seeds)
    while todo:
        for other in edges[todo.popleft()]:
            if other not in reached:
                reached.add(other)
                todo.append(other)
    return reached


class _Resolver:
    """Dotted name -> the units it may name: itself (or the unit it is nested in), and through
    re-exports (``from .ops import f`` in a package), each hop over-approximated as every
    module prefix that imports the next part (``project.ProjectIndex.lookup`` takes one)."""

    def __init__(
        self, by_qualname: dict[str, list[int]], module_imports: dict[str, dict[str, tuple[str, ...]]],
    ) -> None:
        self.by_qualname = by_qualname
        self.module_imports = module_imports
        self.memo: dict[str, frozenset[int]] = {}  # name -> ``targets(name)``
        # name -> the names its question went through, for the names that name no unit: what
        # a run may look for beyond itself (``unresolved_through``). Few, so kept.
        self._unresolved: dict[str, frozenset[str]] = {}

    def unresolved_through(self, name: str) -> frozenset[str]:
        """The names a ``targets(name)`` question that found no unit went through: itself, and
        what re-exports made of it; empty where it found one."""
        self.targets(name)
        return self._unresolved.get(name, frozenset())

    def targets(self, name: str) -> frozenset[int]:
        found = self.memo.get(name)
        if found is None:
            found = self.memo[name] = frozenset(self._targets(name))
        return found

    def _targets(self, name: str) -> set[int]:
        asked = name  # ``name`` is rebound below
        found: set[int] = set()
        seen = {name}
        frontier = [name]
        by_qualname, module_imports = self.by_qualname, self.module_imports
        for _ in range(_MAX_REEXPORT_HOPS):
            following = []
            for current in frontier:
                # Its prefixes, longest first, peeled off at the dots (one string operation
                # each: this runs for every name every unit of a run may call).
                prefix, dot = current, "."
                while dot:  # the longest that is a unit: a nested function is in its outer unit
                    units = by_qualname.get(prefix)
                    if units is not None:
                        found.update(units)
                        break
                    prefix, dot, _ = prefix.rpartition(".")
                module, dot, tail = current.rpartition(".")
                while dot:  # ``module.name.rest``: a module that imports ``name``
                    imports = module_imports.get(module)
                    if imports is not None:
                        name, dot_, rest = tail.partition(".")
                        for full in imports.get(name, ()):
                            rewritten = full + dot_ + rest
                            if rewritten not in seen:
                                seen.add(rewritten)
                                following.append(rewritten)
                    module, dot, last = module.rpartition(".")
                    tail = f"{last}.{tail}"
            if not following:
                break
            frontier = following
        if not found:
            self._unresolved[asked] = frozenset(seen)
        return found
