"""Where ``analysis.syncs`` may report in a hot scope of a file on its own (``SyncScout``)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import lru_cache

from sync_lint.analysis.device_words import (
    DATA_DEPENDENT_FUNCTIONS,
    DATA_DEPENDENT_METHODS,
    ELEMENT_BUILTINS,
    EXPLICIT_METHODS,
    FORMATTING_BUILTINS,
    HOST_ATTRIBUTES,
    HOST_RESULT_METHODS,
    MASK_METHODS,
    PROTOCOL_BUILTINS,
    SIZE_FUNCTIONS,
    TORCH_MASK_FUNCTIONS,
    VALUE_READS,
)
from sync_lint.analysis.hot_words import matches
from sync_lint.config import Settings
from sync_lint.pipeline.scout.flows import ScopeFacts, parameter_names, suspects
from sync_lint.pipeline.scout.hot import HotScout
from sync_lint.pipeline.scout.syntax import (
    FUNCTIONS,
    FileNames,
    UnitSpans,
    ast_dotted,
    positional_names,
    walk,
)


@dataclass
class SyncOutline:
    """What a run of many files needs of a file for the hot-scope rules (``SyncScout.outline``):
    the units that may sync on a value from a named device (``may_sync``), those
    that may make an explicit sync (``.item()``, ``.tolist()``, ``.cpu()``...) on a value from
    a parameter (``FunctionSummary.syncs_on``: a call from another file that hands a GPU value
    there syncs), and those whose code may hold a value from a named device at all (only their
    calls may hand one such a value)."""

    may_sync: set[tuple[str | None, str]]
    on_parameters: set[tuple[str | None, str]] = field(default_factory=set)
    tainted: set[tuple[str | None, str] | None] = field(default_factory=set)


class SyncScout:
    """Over-approximates where ``analysis.syncs`` can report in a hot scope without other files.

    A sync the hot-scope rules report needs a tensor known to be on the GPU at a sync site (a
    condition, an index, ``.item()``, ``int()``, ``nonzero``, a size...: ``analysis.syncs``),
    except in a method of a hot class (``unknown-device``: any tensor, ``_AnyValue``) and for
    ``.synchronize()``. Only a device named in the code makes one (``device=``, ``.cuda()``,
    ``.to("cuda")``, ``.to(x.device)``, a name ending ``_gpu``: ``analysis.device``), through
    locals and ``self.`` attributes, never through a host result (``x.shape``, ``x.size(0)``,
    ``len(x)``).
    So a hot scope can report only if it, or a function of this file it may call (whose
    summary it reads, or which it hands such a value: ``_handed_a_sync``), hands a value that
    may come from such a word to a sync site."""

    def __init__(
        self, names: FileNames, tree: ast.Module, settings: Settings, module_name: str | None,
        module_bases: tuple[str, ...] = (),
    ) -> None:
        self.names = names
        self.tree = tree
        self.settings = settings
        self.module_name = module_name  # ``HotScout``'s
        self.module_bases = module_bases  # likewise
        # ``unknown-device = "always"``: any value but a host result may sync, in every function
        # (by default, in the methods of hot classes only).
        self.any_value_anywhere = settings["unknown-device"] == "always"
        self._host = None  # ``_host_result``'s test, made once: every walk of the file prunes with it
        self._not_device = None  # ``_never_from_a_device``'s, likewise

    def found(self) -> bool:
        hot_scout = HotScout(self.names, self.tree, self.settings, self.module_name, self.module_bases)
        hot = hot_scout.units()
        if hot is None:
            return True
        if not hot:
            return False
        # Any tensor of a hot class's method may be reported (``unknown-device``).
        hot_classes = {
            id(node) for node in self.names.of(ast.ClassDef) if hot_scout.may_be_hot_class(node)
        } if self.settings["unknown-device"] == "hot-classes" else set()  # fmt: skip
        spans = hot_scout.spans
        by_name: dict[str, list[ast.AST]] = {}
        for (_, name), node in spans.nodes:
            by_name.setdefault(name, []).append(node)
        scopes, attributes = suspects(
            self.tree, _names_a_device, self._never_from_a_device(), names=self.names, source_kinds=_DEVICE_KINDS,
        )
        scope_of = {id(scope.roots[0]): scope for scope in scopes}
        class_of = {id(member): statement for statement in self.tree.body if type(statement) is ast.ClassDef
                    for member in statement.body}  # fmt: skip
        any_value = _AnyValue(self._host_result())
        masks = _Masks(self)
        # What to walk, with the unit it is in: a unit hot as a whole, or only what a unit hot
        # for its graph blocks alone captures (``analysis.syncs`` reports nothing else of it),
        # with its nested functions, which a block may call.
        whole = hot_scout.whole_units or set()
        graph_blocks = {id(block) for block in hot_scout.graph_blocks}
        reached: list[tuple[ast.AST, ast.AST]] = []
        for unit, node in spans.nodes:
            if unit not in hot:
                continue
            if unit in whole:
                reached.append((node, node))
                continue
            for inner in walk(node):
                if id(inner) in graph_blocks:
                    reached.extend((statement, node) for statement in inner.body)
                elif type(inner) in FUNCTIONS and inner is not node:
                    reached.append((inner, node))
        seen = {id(root) for root, _ in reached}
        callers: list[ScopeFacts] = []  # the scopes reached, for ``_handed_a_sync``
        while reached:
            root, node = reached.pop()
            in_hot_class = self.any_value_anywhere or id(class_of.get(id(node))) in hot_classes
            scope = scope_of[id(node)]
            may_be_a_mask = masks.of(node)
            mentioned: set[str] = set()
            for child in walk(root):
                if self._may_sync_at(child, scope, attributes, may_be_a_mask) or id(child) in hot_classes:
                    return True
                if in_hot_class and self._may_sync_at(child, any_value, attributes, may_be_a_mask):
                    return True
                kind = type(child)
                if kind is ast.Name:
                    mentioned.add(child.id)
                elif kind is ast.Attribute:
                    mentioned.add(child.attr)
            for name in mentioned:  # what it may call (or hand on as a callback)
                for callee in by_name.get(name, ()):
                    if id(callee) not in seen:
                        seen.add(id(callee))
                        reached.append((callee, callee))
            callers.append(scope)
        return bool(self._handed_a_sync(callers, attributes))

    def outline(self, lines: list[str]) -> SyncOutline:
        """The units (``UnitSpans``) whose code may sync on a value from a named device: a sync
        site of theirs (``_may_sync_at``, as ``found`` reads one) may be handed a value that
        flows from a device word (``suspects``: through locals, and ``self.`` attributes across
        the file), or, in a method of a class that may be hot (``unknown-device``; anywhere
        under ``unknown-device = "always"``), any value but a host result (``_AnyValue``).
        Elsewhere no value of it can come from a named device, so it neither reports a sync nor
        records one in its summary: a function that only puts tensors on a device, or tests
        only host values, is not followed. But for a function a unit of the file hands such a
        value (``_handed_a_sync``): the analysis judges that call with it bound.

        A first pass spares the flows of most units: only a unit whose text holds a device word
        (``_DEVICE_TEXT``) or names an attribute that such code assigns (to a fixpoint over the
        file) can be handed such a value."""
        spans = UnitSpans(self.tree)
        texts: dict[tuple | None, str] = {}  # unit (None: the code outside every unit) -> its text
        outside = []
        done = 0  # units are in line order
        for index, (unit, node) in enumerate(spans.nodes):
            first, last = spans.starts[index] - 1, node.end_lineno
            outside.append("".join(lines[done:first]))
            texts[unit] = texts.get(unit, "") + "".join(lines[first:last])
            done = max(done, last)
        outside.append("".join(lines[done:]))
        texts[None] = "".join(outside)
        assigned: dict[tuple | None, set[str]] = {}
        used: dict[tuple | None, set[str]] = {}  # every attribute a unit's code names
        for node in self.names.of(ast.Attribute):
            unit = spans.unit_at(node.lineno)
            used.setdefault(unit, set()).add(node.attr)
            if type(node.ctx) is not ast.Load:
                assigned.setdefault(unit, set()).add(node.attr)
        tainted = {unit for unit, text in texts.items() if _holds_device_text(text)}
        attributes: set[str] = set()
        while True:
            grown = set().union(*(assigned.get(unit, ()) for unit in tainted)) - attributes
            if not grown:
                break
            attributes |= grown
            tainted |= {unit for unit, names in used.items() if unit not in tainted and not names.isdisjoint(attributes)}
        hot_classes: set[str] = set()
        if self.settings["unknown-device"] == "hot-classes":
            hot_scout = HotScout(self.names, self.tree, self.settings, self.module_name, self.module_bases)
            hot_classes = {node.name for node in self.tree.body if type(node) is ast.ClassDef and hot_scout.may_be_hot_class(node)}
        any_value = _AnyValue(self._host_result())
        anywhere = self.any_value_anywhere
        candidates = [
            index for index, (unit, _) in enumerate(spans.nodes) if anywhere or unit in tainted or unit[0] in hot_classes
        ]  # fmt: skip
        on_parameters = self._syncing_on_parameters(spans)
        if not candidates:
            return SyncOutline(set(), on_parameters, tainted)
        # An untainted scope makes no value from a device word and reads no attribute code
        # holding one assigns: the flows of the tainted ones (the code outside every unit too,
        # one scope) are all the others could add to.
        tainted_units = {id(node) for unit, node in spans.nodes if unit in tainted}
        scopes, device_attributes = suspects(
            self.tree, _names_a_device, self._never_from_a_device(), names=self.names,
            source_kinds=_DEVICE_KINDS, only=lambda roots: id(roots[0]) in tainted_units if type(roots[0]) in FUNCTIONS else None in tainted,
        )  # fmt: skip
        scope_of = {id(scope.roots[0]): scope for scope in scopes}
        masks = _Masks(self)
        # Each candidate: (its unit, the facts of its values, whether any value counts, its
        # masks' test), by its place in ``spans.nodes``.
        pending: dict[int, tuple] = {}
        for index in candidates:
            unit, node = spans.nodes[index]
            pending[index] = (unit, scope_of.get(id(node)), anywhere or unit[0] in hot_classes, masks.of(node))
        found = set()
        # The sync sites of the file by kind (most of a tree's nodes are none), each in its unit
        # by lines: cheaper than a walk of every candidate.
        for kind in _SITE_KINDS:
            for site in self.names.of(kind):
                if kind is ast.comprehension:
                    if not site.ifs:
                        continue
                    line = site.ifs[0].lineno
                else:
                    line = site.lineno
                index = spans.index_at(line)
                candidate = pending.get(index)
                if candidate is None:
                    continue
                unit, scope, any_counts, may_be_a_mask = candidate
                if (scope is not None and self._may_sync_at(site, scope, device_attributes, may_be_a_mask)) or (
                    any_counts and self._may_sync_at(site, any_value, device_attributes, may_be_a_mask)
                ):
                    found.add(unit)
                    del pending[index]
        for function in self._handed_a_sync(scopes, device_attributes):
            unit = spans.unit_at(function.lineno)
            if unit is not None:
                found.add(unit)
        return SyncOutline(found, on_parameters, tainted)

    def _syncing_on_parameters(self, spans: UnitSpans) -> set[tuple[str | None, str]]:
        """The units that may make an explicit sync (``.item()``, ``.tolist()``, ``.cpu()``,
        ``.numpy()``, a copy to the host) on a value from one of their parameters: a value
        flowing from a parameter's name reaches the receiver or an argument of such a call."""
        calls: dict[int, list[ast.Call]] = {}
        for call in self.names.of(ast.Call):
            func = call.func
            if type(func) is ast.Attribute and (
                func.attr in EXPLICIT_METHODS or func.attr == "copy_" or (func.attr == "to" and _may_name_the_host(call))
            ):  # a cast or a copy to the GPU is no sync site (``_may_sync_at``)
                index = spans.index_at(call.lineno)
                if index is not None:
                    calls.setdefault(index, []).append(call)
        found = set()
        never = self._never_from_a_device()
        for index, explicit in calls.items():
            unit, node = spans.nodes[index]
            params = parameter_names(node, method=unit[0] is not None and not _is_static(node))
            handed = _from_parameters(node, params, never, set())
            if any(self._may_sync_at(call, handed, set()) for call in explicit):
                found.add(unit)
        return found

    def _handed_a_sync(self, callers: list[ScopeFacts], attributes: set[str]) -> list[ast.AST]:
        """The functions of the file (nested ones too) that may sync on what a call of this file
        hands them (``SyncAnalysis.sync_on_device_arguments``): called from one of ``callers``
        as the analysis resolves a call of this file's functions (``f(x)``: a function outside
        every class; ``self.f(x)``, ``cls.f(x)``, ``super().f(x)``, ``Class.f(x)``: a method)
        with an argument that may come from a named device, and not cold by name, they hold a
        sync site that may be handed a value from the parameter it binds, or hand one on so in
        turn (followed to any depth, whether or not a site was found: the analysis walks each
        function to its first site). Any index counts as a mask there."""
        classes = {node.name for node in self.tree.body if type(node) is ast.ClassDef}
        methods = {id(member) for node in self.names.of(ast.ClassDef) for member in node.body}
        cold = list(self.settings["cold-function-patterns"])
        functions: dict[str, list[ast.AST]] = {}
        for kind in FUNCTIONS:
            for node in self.names.of(kind):
                if not matches(node.name, cold):
                    functions.setdefault(node.name, []).append(node)
        found: list[ast.AST] = []
        handed_before: dict[int, set[str]] = {}  # function -> the parameters followed so far
        never = self._never_from_a_device()
        todo = list(callers)
        while todo:
            scope = todo.pop()
            for call in scope.calls:
                func = call.func
                if type(func) is ast.Name:
                    through_self = False
                elif type(func) is ast.Attribute and _may_name_a_class_of_the_file(func.value, classes):
                    through_self = True
                else:
                    continue
                targets = [
                    target for target in functions.get(func.id if type(func) is ast.Name else func.attr, ())
                    if (id(target) in methods) == through_self
                ]  # fmt: skip
                if not targets:
                    continue
                suspect = [scope.suspect(argument, attributes) for argument in call.args]
                keywords = [keyword for keyword in call.keywords if scope.suspect(keyword.value, attributes)]
                if not any(suspect) and not keywords:
                    continue
                for target in targets:
                    params = _parameters_bound(target, call, suspect, keywords, through_self)
                    known = handed_before.setdefault(id(target), set())
                    if params <= known:
                        continue
                    known |= params
                    handed = _from_parameters(target, frozenset(known), never, attributes)
                    if target not in found and any(
                        type(child) in _SITE_KINDS and self._may_sync_at(child, handed, attributes) for child in walk(target)
                    ):
                        found.append(target)
                    todo.append(handed)
        return found

    def _host_result(self):
        """The expressions the device domain reads as host values whatever they read: a host
        attribute (unless the file assigns one of that name, which the domain then tracks), a
        method with a host result, ``len()``."""
        if self._host is None:
            self._host = self._make_host_result()
        return self._host

    def _never_from_a_device(self):
        """``_host_result``, and what the device domain reads as no value from a named device
        whatever it is handed (``DeviceDomain._eval_Call``): a call of a plain name that may not
        be a torch function is a builtin's host result (``isinstance(x, T)``, ``max(a, b)``) or
        of unknown place (``helper(x)``, ``Config(x)``), but for the builtins that hand on their
        argument's elements (``enumerate``, ``zip``, ``list``...). Not for ``_AnyValue``: where
        ``unknown-device`` lets an unknown value sync, ``helper(x).item()`` may."""
        if self._not_device is None:
            host = self._host_result()
            may_be_torch = self.names.may_be_torch

            def never(node: ast.AST) -> bool:
                if host(node):
                    return True
                if type(node) is not ast.Call or type(node.func) is not ast.Name or node.func.id in ELEMENT_BUILTINS:
                    return False
                return not may_be_torch(node.func)

            self._not_device = never
        return self._not_device

    def _make_host_result(self):
        assigned = {node.attr for node in self.names.of(ast.Attribute) if type(node.ctx) is ast.Store}
        host_attributes = HOST_ATTRIBUTES - assigned - {"device"}  # ``x.device`` names a device
        rebinds_len = "len" in self.names.bound

        def host(node: ast.AST) -> bool:
            kind = type(node)
            if kind is ast.Attribute:
                return node.attr in host_attributes
            if kind is ast.Call:
                func = node.func
                if type(func) is ast.Attribute:
                    return func.attr in HOST_RESULT_METHODS
                return type(func) is ast.Name and func.id == "len" and not rebinds_len
            if kind is ast.Compare:  # ``x is None``, ``i in table``
                return any(type(op) in _MEMBERSHIP_TESTS for op in node.ops)
            if kind is ast.UnaryOp:
                return type(node.op) is ast.Not
            return kind in _HOST_EXPRESSIONS

        return host

    def _may_sync_at(self, node: ast.AST, scope: ScopeFacts, attributes: set[str], may_be_a_mask=None) -> bool:
        """Whether ``node`` is a sync site handed a value that may be on the GPU. ``may_be_a_mask``:
        whether an index may be a boolean tensor (a gather by integers is no sync); None: any may."""
        kind = type(node)
        if kind in (ast.If, ast.While, ast.Assert, ast.IfExp):
            return scope.suspect(node.test, attributes)
        if kind is ast.comprehension:
            return any(scope.suspect(test, attributes) for test in node.ifs)
        if kind is ast.BoolOp:
            return any(scope.suspect(value, attributes) for value in node.values)
        if kind is ast.UnaryOp:
            return type(node.op) is ast.Not and scope.suspect(node.operand, attributes)
        if kind is ast.JoinedStr:  # ``f"{x}"`` formats ``x`` as text
            return any(type(part) is ast.FormattedValue and scope.suspect(part.value, attributes) for part in node.values)
        if kind is ast.Subscript:  # a mask, a slice bound (``analysis.syncs._Scanner._subscript``)
            index = node.slice
            for part in index.elts if type(index) is ast.Tuple else (index,):
                if type(part) is ast.Slice:
                    if any(bound is not None and scope.suspect(bound, attributes) for bound in (part.lower, part.upper, part.step)):
                        return True
                elif scope.suspect(part, attributes) and (may_be_a_mask is None or may_be_a_mask(part)):
                    return True
            return False
        if kind is not ast.Call:
            return False
        func = node.func
        receiver = None
        if type(func) is ast.Attribute and func.attr in _SYNC_METHODS:
            if func.attr == "to" and not _may_name_the_host(node):
                return False  # a cast, or a copy to the GPU
            receiver = func.value
        elif type(func) is ast.Attribute and func.attr == "synchronize":
            return True
        elif type(func) is ast.Name and func.id in _SYNC_BUILTINS:
            pass
        else:  # a torch function (``torch.nonzero(x)``, ``torch.arange(n)``; not ``tl.where``)
            last = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None
            if last not in _SYNC_TORCH_FUNCTIONS or not any(name.startswith("torch.") for name in self.names.meanings(func)):
                return False
            if last == "where" and (len(node.args) != 1 or node.keywords):
                return False  # ``torch.where(c, a, b)`` is elementwise
        # What the site reads: not where a result goes (``device=``, ``dtype=``, ``out=``).
        operands = [*node.args, *(keyword.value for keyword in node.keywords if keyword.arg not in _PLACEMENT_KEYWORDS)]
        if receiver is not None:
            operands.append(receiver)
        return any(scope.suspect(operand, attributes) for operand in operands)


class _AnyValue:
    """The facts of a method of a hot class, where ``unknown-device`` lets any tensor sync, on a
    named device or not: any expression that reads a name or an attribute outside the host
    results (``SyncScout._host_result``: ``x.shape``, ``len(x)``, ``x is None``) may be one.
    Stands in for a ``ScopeFacts`` at ``SyncScout._may_sync_at``."""

    def __init__(self, host) -> None:
        self.host = host

    def suspect(self, node: ast.expr, attributes: set[str]) -> bool:
        return any(type(child) is ast.Name or type(child) is ast.Attribute for child in walk(node, self.host))


class _Masks:
    """Which values of a file may be boolean tensors, as the device domain marks them (``mask``):
    a comparison, a call of a mask method or torch function (by its last name), or what reads a
    name or attribute bound to one (``suspects``: locals by any binding, attributes across the
    file); never a host result. Parameters, globals and other calls' results are not masks
    there. Made on the first question: most files index nothing a device value could be."""

    def __init__(self, scout: SyncScout) -> None:
        self.scout = scout
        self._scopes: dict[int, ScopeFacts] | None = None
        self._attributes: set[str] = set()

    def of(self, function: ast.AST):
        """The test for the values of ``function`` (a unit's node)."""

        def may_be_a_mask(node: ast.expr) -> bool:
            if self._scopes is None:
                scout = self.scout
                scopes, self._attributes = suspects(
                    scout.tree, _may_make_a_mask, scout._host_result(), names=scout.names, source_kinds=_MASK_KINDS,
                )
                self._scopes = {id(scope.roots[0]): scope for scope in scopes}
            return self._scopes[id(function)].suspect(node, self._attributes)

        return may_be_a_mask


def _from_parameters(function: ast.AST, params: set[str] | frozenset[str], never, attributes: set[str]) -> ScopeFacts:
    """The facts of ``function`` where the suspect values are those of ``params`` (what a call
    may hand it), closed over the file's suspect ``attributes``; ``never``: the values never
    suspect (``SyncScout._never_from_a_device``)."""
    facts = ScopeFacts([function], lambda node: type(node) is ast.Name and node.id in params, never)
    facts.close(attributes)
    return facts


def _is_static(method: ast.AST) -> bool:
    """A method under ``@staticmethod``: its first parameter is an argument like the others."""
    return any(type(d) is ast.Name and d.id == "staticmethod" for d in method.decorator_list)


def _may_name_a_class_of_the_file(value: ast.expr, classes: set[str]) -> bool:
    """Whether a call ``value.f(...)`` may run a method of a class of the file, as the analysis
    resolves one: through ``self`` / ``cls``, ``super()``, or the class's own name."""
    if type(value) is ast.Name:
        return value.id in ("self", "cls") or value.id in classes
    return type(value) is ast.Call and type(value.func) is ast.Name and value.func.id == "super"


def _parameters_bound(function: ast.AST, call: ast.Call, suspect: list[bool], keywords: list[ast.keyword],
                      through_self: bool) -> set[str]:
    """The parameters of ``function`` that ``call`` may bind to its suspect arguments (``suspect``:
    a flag per positional argument; ``keywords``: the suspect keyword arguments). A method
    called through an attribute (``self.f(x)``) may or may not bind its first parameter there (a
    static method does not): both count. ``*args`` / ``**kwargs`` in the call may bind any."""
    arguments = function.args
    positional = positional_names(arguments)
    rest = [a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None]
    names = {a.arg for a in arguments.kwonlyargs}
    if any(suspect) and any(type(argument) is ast.Starred for argument in call.args):
        return {*positional, *names, *rest}  # where an argument lands is not known past a ``*``
    bound: set[str] = set()
    for index, is_suspect in enumerate(suspect):
        if is_suspect:
            for offset in (1, 0) if through_self else (0,):
                place = index + offset
                if place < len(positional):
                    bound.add(positional[place])
                elif arguments.vararg is not None:
                    bound.add(arguments.vararg.arg)
    for keyword in keywords:
        if keyword.arg is None:  # ``**kwargs``
            return {*positional, *names, *rest}
        if keyword.arg in names or keyword.arg in positional:
            bound.add(keyword.arg)
        elif arguments.kwarg is not None:
            bound.add(arguments.kwarg.arg)
    return bound


# The only node kinds ``_may_make_a_mask`` marks.
_MASK_KINDS = (ast.Compare, ast.Call)


def _may_make_a_mask(node: ast.AST) -> bool:
    """A node that may make a boolean tensor (``DeviceDomain``: ``as_mask``): a comparison (one by
    ``is`` or ``in`` is a host result, pruned before), ``x.bool()``, ``x.isnan()``,
    ``torch.logical_and(a, b)``."""
    kind = type(node)
    if kind is ast.Compare:
        return True
    if kind is not ast.Call:
        return False
    func = node.func
    last = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None
    return last in MASK_METHODS or last in TORCH_MASK_FUNCTIONS


# What the device domain reads as a host value whatever it holds (``DeviceDomain.evaluate``).
_MEMBERSHIP_TESTS = (ast.Is, ast.IsNot, ast.In, ast.NotIn)
_HOST_EXPRESSIONS = (ast.JoinedStr, ast.Lambda, ast.Dict, ast.DictComp, ast.ListComp, ast.SetComp, ast.GeneratorExp)
# Keywords that say where and how a result is made, read by no sync site.
_PLACEMENT_KEYWORDS = frozenset({"device", "dtype", "layout", "pin_memory", "requires_grad", "memory_format",
                                 "non_blocking", "out", "generator"})
# Calls that are a sync site when handed a GPU tensor (``analysis.syncs._Scanner``): methods
# (their receiver too), builtins, and torch functions (by their last name).
_SYNC_METHODS = EXPLICIT_METHODS | DATA_DEPENDENT_METHODS | VALUE_READS | {"to", "copy_", "repeat_interleave", "histc"}
_SYNC_BUILTINS = frozenset({*PROTOCOL_BUILTINS, *FORMATTING_BUILTINS, "range"})
_SYNC_TORCH_FUNCTIONS = DATA_DEPENDENT_FUNCTIONS | VALUE_READS | SIZE_FUNCTIONS | {
    "where", "repeat_interleave", "one_hot", "histc",
}


def _may_name_the_host(call: ast.Call) -> bool:
    """Whether ``.to(...)`` may copy to the host, as ``DeviceDomain.device_argument`` reads its
    target: ``"cpu"``, ``torch.device("cpu")``, a name with a ``cpu`` part, ``x.device``."""
    targets = [keyword.value for keyword in call.keywords if keyword.arg == "device"] + call.args[:1]
    for target in targets:
        if type(target) is ast.Constant:
            if type(target.value) is str and target.value.startswith("cpu"):
                return True
        elif type(target) is ast.Attribute and target.attr == "device":
            if not (type(target.value) is ast.Name and target.value.id in ("self", "cls")):
                return True  # where ``x`` is: the host, if ``x`` is there (``self`` never is)
        elif type(target) is ast.Call:
            return True  # ``torch.device(...)``, or anything else: left to the analysis
        else:
            written = ast_dotted(target)
            if written is None or "cpu" in written.rsplit(".", 1)[-1].lower().split("_"):
                return True
    return any(keyword.arg is None for keyword in call.keywords)  # ``.to(**kwargs)``


# The nodes ``SyncScout._may_sync_at`` may find a sync site in.
_SITE_KINDS = (
    ast.If, ast.While, ast.Assert, ast.IfExp, ast.comprehension, ast.BoolOp, ast.UnaryOp, ast.Subscript, ast.Call,
    ast.JoinedStr,
)  # fmt: skip

# What a unit's text must hold to hand a sync site a value from a named device, or to sync
# itself (``SyncOutline.may_sync``): a device word anywhere in it, in any case (read loosely:
# ``cudagraph`` too), a string device (``.to("npu")``), or ``synchronize``.
_DEVICE_WORDS = ("device", "cuda", "gpu", "synchroni")
_STRING_DEVICE = re.compile(r"\.\s*to\s*\(\s*[rbuf]*[\"']", re.IGNORECASE)
_DEVICE_TEXT = re.compile("|".join((*_DEVICE_WORDS, _STRING_DEVICE.pattern)), re.IGNORECASE)


def _holds_device_text(text: str) -> bool:
    """``_DEVICE_TEXT.search(text)``, at a sixth of its cost on a tree: its case-blind
    alternation is slow to fail, and most units fail it. On ASCII text ``str.lower`` folds case
    as the pattern does; elsewhere (``ſ`` matches ``s`` there) the pattern itself decides."""
    if not text.isascii():
        return _DEVICE_TEXT.search(text) is not None
    lowered = text.lower()
    return any(word in lowered for word in _DEVICE_WORDS) or _STRING_DEVICE.search(text) is not None


@lru_cache(maxsize=1 << 16)  # asked of every name and attribute of a file; a tree repeats most
def _may_name_a_device(name: str) -> bool:
    """A name or attribute the device domain may read as a device or a tensor on one: one with
    ``device`` in it, ``cuda`` or ``gpu`` itself, or one ending ``_gpu``
    (``DeviceDomain._device_value``, ``name_hint``); not ``cudagraph``, ``num_gpus``,
    ``use_cuda_graph``, which it reads as nothing of the kind."""
    lowered = name.lower()
    return "device" in lowered or lowered in ("cuda", "gpu") or lowered.endswith("_gpu")


# The only node kinds ``_names_a_device`` marks.
_DEVICE_KINDS = (ast.Name, ast.Attribute, ast.keyword, ast.Call)


def _names_a_device(node: ast.AST) -> bool:
    """A node that may put a value on the GPU."""
    kind = type(node)
    if kind is ast.Name:
        return _may_name_a_device(node.id)
    if kind is ast.Attribute:
        return _may_name_a_device(node.attr)
    if kind is ast.keyword:  # ``device=``; not ``use_cudagraph=`` (the domain reads ``device`` only)
        return node.arg is not None and _may_name_a_device(node.arg)
    if kind is ast.Call:  # ``.to("npu")``: any device named by a string (others go through ``device``)
        func = node.func
        return (
            type(func) is ast.Attribute and func.attr == "to" and bool(node.args)
            and type(node.args[0]) is ast.Constant and type(node.args[0].value) is str
        )  # fmt: skip
    return False
