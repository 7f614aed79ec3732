"""Sync declarations (``with gpu_sync_allowed():``), debug-only and training-only regions, run-once
regions (lazy initialisation: ``OnceRegions``), and the fixes that add or remove a declaration.

A declaration is a call of a context manager named in ``sync-declarations`` (default
``gpu_sync_allowed``; a bare name matches that name imported from any module, under its own
name or another (``from debug import gpu_sync_allowed as allowed``), a dotted name must match
exactly), in any of these forms:
- ``with gpu_sync_allowed():`` / ``with gpu_sync_allowed(first_only=True):`` / one item of a
  ``with`` of several;
- ``cm = nullcontext() if cond else gpu_sync_allowed()`` (or ``cm = gpu_sync_allowed()``) in the
  same function, then ``with cm:``;
- ``@gpu_sync_allowed()`` on a function (a ``ContextDecorator``): the whole body is declared.

Debug-only regions: the body of an ``if`` whose test is (or starts with ``and``) a name or
attribute containing ``debug`` (``if envs.VLLM_DEBUG:``, ``if self.debug:``, ``if __debug__:``,
``if self._debug_checks and ...:``), a call of such a name (``if is_debug_enabled():``), or
``logger.isEnabledFor(logging.DEBUG)``; ``if not <debug>:`` makes the ``else`` branch the debug one.
The same holds for a flag whose name switches on another opt-in diagnostic mode (trace, verbose,
profile: see ``_DIAGNOSTIC_WORDS``), read as a name or attribute (``if envs.VLLM_X_TRACE:``,
``if self.enable_trace:``), through an environment field's ``.get()``
(``if envs.SGLANG_TRACE_LOGITS_E2E_SYNC.get():``) or an environment reader
(``if os.environ.get("X_TRACE"):``, ``get_bool_env_var("SGLANG_DEBUG_X")``).
Syncs there run only when someone debugs, and are not reported. So does a check someone switches
on from the environment: a module-level name, bound once, to an environment variable's reading that
is false while the variable is unset, whose name says it turns a check on
(``_X_GATHER_CHECK = os.environ.get("SGLANG_X_GATHER_CHECK", "0") == "1"``, then
``if _X_GATHER_CHECK:``; see ``opt_in_checks``). A check that is on unless switched off, or whose
default is not written there (``envs.X_CHECK``), runs every step and counts.

Training-only regions, likewise off the serving path: the body of ``if self.training:`` (or
``if self.training and ...:``), the ``else`` of ``if not self.training:``. vLLM and SGLang serve
models in eval mode (their model loaders return ``model.eval()``), so such code never runs there.
Either kind of region may also be an arm of a conditional expression (``t.item() if self.debug
else 0``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import libcst as cst

from sync_lint.analysis.device import string_value
from sync_lint.analysis.names import dotted
from sync_lint.analysis.nodes import (
    block_statements,
    children,
    inner_blocks,
    named_params,
)
from sync_lint.diagnostics import Edit
from sync_lint.fixes import make_fix


class Declarations:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        configured = list(ctx.settings["sync-declarations"])
        self.bare = {name for name in configured if "." not in name}
        self.full = {name for name in configured if "." in name}
        # Whether the file mentions a declaration at all (most files do not: skip the searches).
        self.mentioned = any(name.rsplit(".", 1)[-1] in ctx.source.text for name in configured)

    def is_declaration_call(self, node: cst.BaseExpression) -> bool:
        if not isinstance(node, cst.Call):
            return False
        name = dotted(node.func)
        if name is None:
            return False
        if name.rsplit(".", 1)[-1] in self.bare or name in self.full:
            return True
        if not self.mentioned:  # an import naming the declaration is a mention
            return False
        resolved = self.ctx.names.resolve(node.func)  # ``from debug import gpu_sync_allowed as allowed``
        return resolved is not None and (resolved.rsplit(".", 1)[-1] in self.bare or resolved in self.full)

    def declares(self, node: cst.BaseExpression) -> bool:
        """A declaring expression: the call, or a conditional expression with one declaring branch."""
        if isinstance(node, cst.IfExp):
            return self.declares(node.body) or self.declares(node.orelse)
        return self.is_declaration_call(node)

    def context_names(self, function: cst.FunctionDef) -> set[str]:
        """Local names bound to a declaring expression in ``function`` (``cm = ... gpu_sync_allowed()``)."""
        names: set[str] = set()
        if not self.mentioned:
            return names
        stack = list(statements_of(function.body))
        while stack:  # statements only (nested blocks included, nested functions not)
            statement = stack.pop()
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assign) and self.declares(small.value):
                        names.update(t.target.value for t in small.targets if isinstance(t.target, cst.Name))
            elif not isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                for block_name in ("body", "orelse", "finalbody"):
                    block = getattr(statement, block_name, None)
                    if isinstance(block, (cst.Else, cst.Finally)):
                        block = block.body
                    if isinstance(block, cst.If):
                        stack.append(block)
                    else:
                        stack.extend(statements_of(block))
                for handler in getattr(statement, "handlers", ()):
                    stack.extend(statements_of(handler.body))
                for case in getattr(statement, "cases", ()):
                    stack.extend(statements_of(case.body))
        return names

    def declaring_item(self, node: cst.With, context_names: set[str]) -> int | None:
        """The index of the item of ``with`` that declares a sync, or None."""
        for index, item in enumerate(node.items):
            value = item.item
            if self.is_declaration_call(value):
                return index
            if isinstance(value, cst.Name) and value.value in context_names:
                return index
        return None

    def decorates(self, function: cst.FunctionDef) -> bool:
        return any(self.is_declaration_call(d.decorator) or (
            isinstance(d.decorator, (cst.Name, cst.Attribute)) and
            (dotted(d.decorator) or "").rsplit(".", 1)[-1] in self.bare) for d in function.decorators)


# -- debug-only regions --------------------------------------------------------------------------

# Opt-in diagnostic modes, besides ``debug`` (matched anywhere in a name, as before): words that
# name a mode someone switches on to look at a run, never one an engine step depends on. Matched
# as whole words of a flag's name (``SGLANG_TRACE_LOGITS_E2E_SYNC``, ``enable_trace``), not as
# substrings. Left out on purpose: ``dump`` (``model_dump`` is pydantic serialisation), ``log``
# (``logprobs``, ``logits``), ``check`` / ``validate`` (input checks that do run every step),
# ``stats`` / ``metrics`` (always-on counters in engines).
_DIAGNOSTIC_WORDS = frozenset({"trace", "tracing", "verbose", "profile", "profiler", "profiling"})
# Words that make the flag mean the opposite, or a fast path that merely avoids the diagnostic
# (``enable_trace_free_path``, ``SGLANG_NO_PROFILE``, ``skip_trace``).
_NEGATING_WORDS = frozenset({"free", "less", "no", "not", "non", "disable", "disabled", "skip", "without", "off"})
# In a lowercase name, the only other words a diagnostic switch has (``enable_trace``,
# ``trace_enabled``, ``tracing_enable``, ``do_profile``): a lowercase name with other words is
# usually data (``trace_ctx``, ``profile_in_progress``, ``trace_len``), and a bare ``verbose`` or
# ``profile`` attribute may be a field of a per-step object, so it needs one of these.
_SWITCH_WORDS = frozenset({"enable", "enabled", "do", "use", "with", "on"})
# Functions that read an environment variable named by their first (string) argument (and
# ``os.environ.get``).
_ENV_READERS = frozenset({"getenv", "get_bool_env_var", "get_int_env_var"})


def _words(name: str) -> list[str]:
    """``SGLANG_TRACE_E2E`` -> sglang, trace, e2e; ``enableTrace`` -> enable, trace."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [word for word in spaced.lower().split("_") if word]


def _diagnostic_flag(name: str) -> bool:
    """Does a flag's name say it switches on an opt-in diagnostic mode (tracing, profiling,
    verbose output)? An UPPER_CASE name is a configuration constant or an environment variable,
    so any diagnostic word in it counts (``VLLM_X_TRACE``, ``SGLANG_TRACE_LOGITS_E2E_SYNC``); a
    lowercase one counts only when it is a switch (``enable_trace``, ``profile_enabled``)."""
    words = _words(name)
    if not words or not _DIAGNOSTIC_WORDS.intersection(words) or _NEGATING_WORDS.intersection(words):
        return False
    if name.strip("_").isupper():
        return True
    return set(words) <= _DIAGNOSTIC_WORDS | _SWITCH_WORDS and bool(_SWITCH_WORDS.intersection(words))


def _flag_name(node: cst.BaseExpression) -> str | None:
    """The name a condition reads as a flag: the last part of a name or attribute chain
    (``envs.VLLM_X_TRACE``), of the receiver of an accessor ``.get()`` without arguments
    (``envs.SGLANG_TRACE_X.get()``: an environment field), or the variable an environment reader
    names (``os.environ.get("X_TRACE")``, ``get_bool_env_var("X_TRACE")``)."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        return (dotted(node) or "").rsplit(".", 1)[-1] or None
    if not isinstance(node, cst.Call):
        return None
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value == "get" and not node.args:
        return _flag_name(func.value) if isinstance(func.value, (cst.Name, cst.Attribute)) else None
    name = dotted(func) or ""
    if name.rsplit(".", 1)[-1] in _ENV_READERS or name.endswith("environ.get"):
        first = node.args[0].value if node.args and node.args[0].keyword is None else None
        if isinstance(first, cst.SimpleString):
            value = first.evaluated_value
            return value if isinstance(value, str) and value.isupper() else None
    return None


def _mentions_debug(node: cst.BaseExpression) -> bool:
    if isinstance(node, (cst.Name, cst.Attribute)):
        name = dotted(node) or ""
        last = name.rsplit(".", 1)[-1]
        return "debug" in last.lower() or _diagnostic_flag(last)
    if isinstance(node, cst.Call):
        func = dotted(node.func) or ""
        last = func.rsplit(".", 1)[-1]
        if "debug" in last.lower():
            return True
        if last == "isEnabledFor":
            return any(_mentions_debug(arg.value) for arg in node.args)
        flag = _flag_name(node)
        if flag is not None and ("debug" in flag.lower() or _diagnostic_flag(flag)):
            return True
    if isinstance(node, cst.Comparison):
        # Only ``debug`` here (``logger.level == logging.DEBUG``): a diagnostic word compared
        # (``trace_len <= 0``, ``profiler is None``) says nothing about which branch is the opt-in one.
        return _mentions_debug_word(node.left) or any(_mentions_debug_word(c.comparator) for c in node.comparisons)
    return False


def _mentions_debug_word(node: cst.BaseExpression) -> bool:
    """The comparison case: ``debug`` in a name, or a debug-named call, as before."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        return "debug" in (dotted(node) or "").rsplit(".", 1)[-1].lower()
    if isinstance(node, cst.Call):
        last = (dotted(node.func) or "").rsplit(".", 1)[-1]
        if "debug" in last.lower():
            return True
        if last == "isEnabledFor":
            return any(_mentions_debug_word(arg.value) for arg in node.args)
    if isinstance(node, cst.Comparison):
        return _mentions_debug_word(node.left) or any(_mentions_debug_word(c.comparator) for c in node.comparisons)
    return False


def _training_mode(node: cst.BaseExpression) -> bool:
    """``self.training``: ``nn.Module``'s training switch, which the engines turn off for good
    before serving (their model loaders return ``model.eval()``). Not ``self.config.training``
    and the like, whatever they mean."""
    return isinstance(node, cst.Attribute) and node.attr.value == "training" and (
        isinstance(node.value, cst.Name) and node.value.value == "self")


def _off_path(node: cst.BaseExpression, opt_in: frozenset[str]) -> bool:
    return _mentions_debug(node) or _training_mode(node) or (isinstance(node, cst.Name) and node.value in opt_in)


def off_path_branch(test: cst.BaseExpression, opt_in: frozenset[str] = frozenset()) -> str | None:
    """"body" when the ``if`` body runs only in debug mode, in training or under a check switched
    on from the environment (``opt_in``: the file's ``opt_in_checks``), "orelse" for ``if not
    <debug>:`` / ``if not self.training:``."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return "body" if "body" in (off_path_branch(test.left, opt_in), off_path_branch(test.right, opt_in)) else None
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return "orelse" if _off_path(test.expression, opt_in) else None
    return "body" if _off_path(test, opt_in) else None


# Words of a flag that turns a check on, to catch a bug (``SGLANG_GFX_ASM_CTX_GATHER_CHECK``).
# Not diagnostic words of their own: a check may run every step (``_DIAGNOSTIC_WORDS``); only one
# that is off until the environment says otherwise is off the serving path.
_CHECK_WORDS = frozenset({
    "check", "checks", "checking", "validate", "validation", "verify", "verification", "sanity", "assert", "asserts",
})  # fmt: skip
_TRUE_WORDS = frozenset({"1", "true", "yes", "on", "y", "t"})


def opt_in_checks(module: cst.Module) -> frozenset[str]:
    """The module-level names that switch a check on from the environment, off by default: bound
    once (in module code, nowhere else, an annotation without a value aside) to an environment
    variable's reading that is false while the variable is unset (``_env_off_by_default``), and
    named for a check."""
    bindings: dict[str, list[cst.BaseExpression | None]] = {}
    todo = list(module.body)  # module code, in its blocks too (``if is_hip(): _X_CHECK = True``)
    while todo:
        statement = todo.pop()
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    for target in small.targets:
                        if isinstance(target.target, cst.Name):
                            value = small.value if len(small.targets) == 1 else None
                            bindings.setdefault(target.target.value, []).append(value)
                elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    if small.value is not None:  # ``X: bool`` binds nothing
                        bindings.setdefault(small.target.value, []).append(small.value)
                elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
                    bindings.setdefault(small.target.value, []).append(None)
        else:
            for block in inner_blocks(statement):
                todo.extend(block_statements(block))
    found = set()
    for name, values in bindings.items():
        words = _words(name)
        if (len(values) == 1 and values[0] is not None and _CHECK_WORDS.intersection(words)
                and not _NEGATING_WORDS.intersection(words) and _env_off_by_default(values[0])):  # fmt: skip
            found.add(name)
    if found:
        found -= _rebound_in_functions(module, found)
    return frozenset(found)


def _rebound_in_functions(module: cst.Module, names: set[str]) -> set[str]:
    """Those of ``names`` a ``global`` statement anywhere may let a function set again."""
    rebound: set[str] = set()

    class _Globals(cst.CSTVisitor):
        def visit_Global(self, node: cst.Global) -> None:
            rebound.update(item.name.value for item in node.names if item.name.value in names)

    module.visit(_Globals())
    return rebound


def _env_off_by_default(value: cst.BaseExpression) -> bool:
    """Is ``value`` false while the environment variable it reads is unset?
    ``os.environ.get("X", "0") == "1"``, ``os.getenv("X") == "1"``, ``os.environ.get("X",
    "false").lower() in ("1", "true")``, ``get_bool_env_var("X")`` (default ``"false"``),
    ``bool(int(os.getenv("X", "0")))``; anything else is not known to be."""
    if isinstance(value, cst.Comparison) and len(value.comparisons) == 1:
        comparison = value.comparisons[0]
        operator = comparison.operator
        sides = (value.left, comparison.comparator)
        if isinstance(operator, cst.Equal):
            for read, other in (sides, sides[::-1]):
                unset = _env_default(read)
                expected = string_value(other)
                if unset is not _UNREAD and expected is not None:
                    return unset != expected
        elif isinstance(operator, cst.In) and isinstance(sides[1], (cst.Tuple, cst.List, cst.Set)):
            unset = _env_default(sides[0])
            expected = [string_value(element.value) for element in sides[1].elements]
            if unset is not _UNREAD and None not in expected:
                return unset not in expected
        return False
    if isinstance(value, cst.Call):
        name = (dotted(value.func) or "").rsplit(".", 1)[-1]
        if name == "get_bool_env_var" and value.args and string_value(value.args[0].value) is not None:
            default = string_value(value.args[1].value) if len(value.args) > 1 else "false"
            return default is not None and default.lower() not in _TRUE_WORDS
        if name in ("bool", "int") and len(value.args) == 1:
            inner = value.args[0].value
            if name == "bool" and isinstance(inner, cst.Call) and (dotted(inner.func) or "") == "int" and len(inner.args) == 1:
                inner = inner.args[0].value
            unset = _env_default(inner)
            return isinstance(unset, str) and unset.strip().lstrip("-").isdigit() and int(unset) == 0
    return False


_UNREAD = object()  # not an environment read (``_env_default``)


def _env_default(node: cst.BaseExpression):
    """What ``node`` is while the environment variable it reads is unset: the default string of
    ``os.environ.get("X", "d")`` / ``os.getenv("X", "d")`` (None without one), through
    ``.lower()`` / ``.strip()``; ``_UNREAD`` for anything else."""
    folds = []
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in (
        "lower", "strip", "upper"
    ) and not node.args:
        folds.append(node.func.attr.value)
        node = node.func.value
    if not isinstance(node, cst.Call):
        return _UNREAD
    name = dotted(node.func) or ""
    if not (name.endswith("environ.get") or name in ("os.getenv", "getenv")):
        return _UNREAD
    positional = [arg for arg in node.args if arg.keyword is None]
    if not positional or string_value(positional[0].value) is None:
        return _UNREAD
    default_arg = positional[1] if len(positional) > 1 else next(
        (arg for arg in node.args if arg.keyword is not None and arg.keyword.value == "default"), None
    )
    if default_arg is None:
        return None
    default = string_value(default_arg.value)
    if default is None:
        return _UNREAD
    for fold in reversed(folds):
        default = getattr(default, fold)()
    return default


# -- fixes ---------------------------------------------------------------------------------------

def guard_import(ctx) -> tuple[str, cst.SimpleStatementLine | None] | None:
    """The local name to call for ``sync-guard`` and the import to add (None if already there);
    None when no guard is configured."""
    guard = ctx.settings["sync-guard"]
    if not guard:
        return None
    module, _, name = guard.partition(":")
    # Only an import at module level binds the name where the fix calls it; ``names.imports``
    # holds the function-level ones too. (A masked parse keeps every module-level statement,
    # so it answers as the whole file's would.)
    module_level = _module_level_imports(ctx.module)
    for local, full in ctx.names.imports.items():
        if local in module_level and (full == f"{module}.{name}" or (full.rsplit(".", 1)[-1] == name and local == name)):
            return local, None
    if _defines(ctx.module, name) or (None, name) in ctx.masked:
        return name, None
    statement = cst.parse_statement(f"from {module} import {name}\n")
    return name, statement  # type: ignore[return-value]


def _module_level_imports(module: cst.Module) -> set[str]:
    """The names that ``from ... import`` statements bind at module level, in its ``if`` and
    ``try`` blocks too (``try: from a import f`` / ``except ImportError:``)."""
    bound: set[str] = set()
    statements = list(module.body)
    while statements:
        statement = statements.pop()
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                    bound.update(a.asname.name.value if a.asname else dotted(a.name) for a in small.names)
        elif isinstance(statement, (cst.If, cst.Try, cst.Else, cst.ExceptHandler, cst.Finally)):
            statements.extend(_block_statements(statement.body))
            for part in (getattr(statement, "orelse", None), getattr(statement, "finalbody", None),
                         *getattr(statement, "handlers", ())):
                if part is not None:
                    statements.append(part)
    return bound


def _block_statements(body: cst.BaseSuite) -> Sequence[cst.BaseStatement]:
    if isinstance(body, cst.IndentedBlock):
        return body.body
    return [cst.SimpleStatementLine(body=body.body)]  # ``if x: from a import f``


def _defines(module: cst.Module, name: str) -> bool:
    """Does the module define ``name`` at its top level (a masked function aside: ``ctx.masked``)?"""
    for statement in module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and statement.name.value == name:
            return True
    return False


def _import_position(module: cst.Module) -> int:
    """Where a new import goes: after the module's leading docstring and imports."""
    position = 0
    for index, statement in enumerate(module.body):
        if isinstance(statement, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
        ):
            position = index + 1
        elif index == 0 and isinstance(statement, cst.SimpleStatementLine) and isinstance(
            statement.body[0], cst.Expr
        ) and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            position = 1
        elif isinstance(statement, (cst.If, cst.Try)) and position == index and _only_imports(statement):
            position = index + 1  # ``try: import x`` / ``if TYPE_CHECKING:`` blocks among the imports
        else:
            break
    return position


def _only_imports(statement: cst.CSTNode) -> bool:
    body = getattr(statement, "body", None)
    inner = getattr(body, "body", ())
    return bool(inner) and all(
        isinstance(s, cst.SimpleStatementLine) and all(isinstance(x, (cst.Import, cst.ImportFrom)) for x in s.body)
        for s in inner
    )


class _Replace(cst.CSTTransformer):
    """Replace one node (by identity) with a node, or several statements."""

    def __init__(self, target: cst.CSTNode, replacement) -> None:
        self.target = target
        self.replacement = replacement

    def on_leave(self, original, updated):
        if original is self.target:
            return self.replacement
        return updated


def _with_import(module: cst.Module, statement: cst.SimpleStatementLine | None) -> cst.Module:
    if statement is None:
        return module
    body = list(module.body)
    position = _import_position(module)
    missing = _blank_lines_missing(module, position, False)
    if missing:
        following = body[position]
        body[position] = following.with_changes(leading_lines=[cst.EmptyLine()] * missing + list(following.leading_lines))
    body.insert(position, statement)
    return module.with_changes(body=body)


def _blank_lines_missing(module: cst.Module, position: int, definition_follows: bool) -> int:
    """Blank lines to add after an import inserted before ``module.body[position]``, to keep the
    ones that separate imports from code (two before a def or class). ``definition_follows``:
    that statement stands for a masked function (``Editor.stands_for_a_function``)."""
    if position >= len(module.body) or _is_import(module.body[position]):
        return 0
    following = module.body[position]
    blanks = 2 if definition_follows or isinstance(following, (cst.FunctionDef, cst.ClassDef)) else 1
    return max(0, blanks - sum(1 for line in following.leading_lines[:blanks] if line.comment is None))


def _import_edit(editor, module: cst.Module, statement: cst.SimpleStatementLine) -> Edit | None:
    """The text edit that ``_with_import`` makes, found by rendering only the statements before
    the new import's place. None when that rendering is not how the text starts."""
    position = _import_position(module)
    before = module.with_changes(body=module.body[:position], footer=(), has_trailing_newline=True).code
    if not editor.text.startswith(before):
        return None
    definition_follows = position < len(module.body) and editor.stands_for_a_function(module.body[position])
    added = module.code_for_node(statement) + module.default_newline * _blank_lines_missing(module, position, definition_follows)
    return Edit(len(before), len(before), added)


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
    )


def _import_binding(module: cst.Module, local: str) -> cst.SimpleStatementLine | None:
    """The module-level ``from ... import`` statement that binds ``local``."""
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
            small = statement.body[0]
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar) and any(
                (a.asname.name.value if a.asname else dotted(a.name)) == local for a in small.names
            ):
                return statement
    return None


def _drop_import(module: cst.Module, local: str) -> cst.Module:
    """Remove ``local`` from the module-level ``from ... import`` that binds it."""
    body = list(module.body)
    for index, statement in enumerate(body):
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            continue
        small = statement.body[0]
        if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
            continue
        kept = [a for a in small.names if (a.asname.name.value if a.asname else dotted(a.name)) != local]
        if len(kept) == len(small.names):
            continue
        if not kept:
            del body[index]
            if index == 0 and body:  # no blank lines left at the top of the file
                leading = list(body[0].leading_lines)
                while leading and leading[0].comment is None:
                    leading.pop(0)
                body[0] = body[0].with_changes(leading_lines=leading)
        else:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            body[index] = statement.with_changes(body=[small.with_changes(names=kept)])
        return module.with_changes(body=body)
    return module


class GuardImport:
    """What every guard fix of a file shares, found once per file: the guard's local name and
    the import to add (``guard_import``), and that import's edit (``_import_edit`` renders the
    module's imports: done per finding, it was most of an engine's fix planning, which runs
    for every finding of a parsed file, reported or not)."""

    def __init__(self, ctx) -> None:
        self.module = ctx.module
        self.found = guard_import(ctx)
        self._edit: tuple[object, Edit | None] | None = None  # (editor, its edit)

    def import_edit(self, editor, statement: cst.SimpleStatementLine) -> Edit | None:
        if self._edit is None or self._edit[0] is not editor:
            self._edit = (editor, _import_edit(editor, self.module, statement))
        return self._edit[1]


def wrap_fix(ctx, statement: cst.BaseStatement, message: str):
    """Fix plan: wrap ``statement`` in ``with <guard>():`` and import the guard (unsafe)."""
    shared = ctx.get(GuardImport)
    if shared.found is None:
        return None
    local, import_statement = shared.found

    def plan(editor):
        wrapped = cst.With(
            items=[cst.WithItem(item=cst.Call(func=cst.Name(local)))],
            body=cst.IndentedBlock(body=[statement.with_changes(leading_lines=())]),
            leading_lines=statement.leading_lines,
        )
        # Edit the statement's lines and the import's place alone: rendering and diffing the
        # whole module per finding made these fixes most of a builder file's check.
        edits = [editor.replace_statement(statement, wrapped)]
        if import_statement is not None:
            edits.append(shared.import_edit(editor, import_statement))
        if None not in edits and (len(edits) == 1 or edits[1].end <= edits[0].start):
            return make_fix(message, "unsafe", *edits)
        module = _with_import(ctx.module.visit(_Replace(statement, wrapped)), import_statement)
        return make_fix(message, "unsafe", *editor.transform(module))

    return plan


def unwrap_fix(ctx, node: cst.With, item_index: int, message: str):
    """Fix plan: drop the declaring item of ``with`` (the whole ``with`` if it is the only item)."""
    if node.items[item_index].asname is not None:
        return None

    def plan(editor):
        if len(node.items) > 1:
            items = [item for index, item in enumerate(node.items) if index != item_index]
            items[-1] = items[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            replacement = node.with_changes(items=items)
        else:
            body = node.body
            if isinstance(body, cst.IndentedBlock):
                statements = list(body.body)
            else:  # ``with x(): a = 1``
                statements = [cst.SimpleStatementLine(body=list(body.body))]
            if not statements:
                statements = [cst.SimpleStatementLine(body=[cst.Pass()])]
            first = statements[0]
            statements[0] = first.with_changes(leading_lines=(*node.leading_lines, *first.leading_lines))
            replacement = cst.FlattenSentinel(statements)
        module = ctx.module.visit(_Replace(node, replacement))
        func = node.items[item_index].item.func if isinstance(node.items[item_index].item, cst.Call) else None
        binding = _import_binding(ctx.module, func.value) if isinstance(func, cst.Name) else None
        if binding is not None and names_used(module, func.value) == 0:
            return make_fix(message, "unsafe", *editor.transform(_drop_import(module, func.value)))
        edits = list(editor.transform(module))
        if binding is not None:
            # The import stays for now. Touching its line (a no-op) makes the stale blocks of a file
            # unwrap one per fix round, so the last one sees the import unused and removes it.
            start, end = editor.span(binding)
            edits.append(Edit(start, end, editor.text[start:end]))
        return make_fix(message, "unsafe", *edits)

    return plan


def names_used(module: cst.Module, name: str) -> int:
    """How many times ``name`` is read in ``module`` (imports excluded)."""
    count = 0

    class Counter(cst.CSTVisitor):
        def visit_Import(self, node) -> bool:
            return False

        def visit_ImportFrom(self, node) -> bool:
            return False

        def visit_Name(self, node: cst.Name) -> None:
            nonlocal count
            if node.value == name:
                count += 1

    module.visit(Counter())
    return count


def statements_of(body) -> Iterable[cst.CSTNode]:
    inner = getattr(body, "body", ())
    return inner if isinstance(inner, (list, tuple)) else ()


# -- run-once regions (lazy initialisation) ------------------------------------------------------

# Calls that record a key in a container (``self._done.add(key)``, ``cache.setdefault(key, v)``).
_RECORDING_METHODS = frozenset({"add", "append", "setdefault"})
_RENDER = cst.Module(body=[])


# Parameters that hold an object living as long as the model: the engines hand an attention
# implementation or backend its layer module each step (vLLM ``forward(self, layer, ...)``,
# SGLang ``forward_decode(..., layer: RadixAttention, ...)``), where a per-layer value is cached
# on the first call (``if layer._o_scale is None: layer._o_scale = scale.item()``).
_PERSISTENT_PARAMETERS = frozenset({"layer"})


def _persistent(node: cst.BaseExpression, persistent_names: frozenset[str]) -> str | None:
    """The key of state that outlives a call: an attribute chain on ``self`` / ``cls``
    (``self._pool``, ``cls.pools``) or on a persistent name, or a persistent name itself: a
    module-level one (``_CACHE``, ``global _pool``), or a parameter of ``_PERSISTENT_PARAMETERS``."""
    if type(node) is cst.Attribute:
        name = dotted(node)
        if name is not None and "." in name:
            root = name.split(".", 1)[0]
            if root in ("self", "cls") or root in persistent_names:
                return name
        return None
    if type(node) is cst.Name and node.value in persistent_names:
        return node.value
    return None


def _text(node: cst.CSTNode) -> str:
    return _RENDER.code_for_node(node).strip()


def _get_call(node: cst.BaseExpression, persistent_names: frozenset[str]) -> tuple[str, str] | None:
    """``C.get(k)`` / ``C.get(k, None)`` on a persistent container: (C, k)."""
    if type(node) is not cst.Call or type(node.func) is not cst.Attribute or node.func.attr.value != "get":
        return None
    args = node.args
    if not 1 <= len(args) <= 2 or any(a.keyword is not None or a.star for a in args):
        return None
    if len(args) == 2 and not (type(args[1].value) is cst.Name and args[1].value.value == "None"):
        return None
    container = _persistent(node.func.value, persistent_names)
    return (container, _text(args[0].value)) if container is not None else None


def _getattr_call(node: cst.BaseExpression, persistent_names: frozenset[str]) -> str | None:
    """``getattr(owner, "name", None)`` on persistent state: the attribute's key."""
    args = _builtin_args(node, "getattr", 3)
    if args is None or not (type(args[2].value) is cst.Name and args[2].value.value == "None"):
        return None
    return _named_attribute(args, persistent_names)


def _hasattr_call(node: cst.BaseExpression, persistent_names: frozenset[str]) -> str | None:
    """``hasattr(owner, "name")`` on persistent state: the attribute's key."""
    args = _builtin_args(node, "hasattr", 2)
    return None if args is None else _named_attribute(args, persistent_names)


def _builtin_args(node: cst.BaseExpression, builtin: str, count: int) -> Sequence[cst.Arg] | None:
    """The arguments of a call of ``builtin`` with ``count`` positional ones; else None."""
    if type(node) is not cst.Call or type(node.func) is not cst.Name or node.func.value != builtin:
        return None
    args = node.args
    if len(args) != count or any(a.keyword is not None or a.star for a in args):
        return None
    return args


def _named_attribute(args: Sequence[cst.Arg], persistent_names: frozenset[str]) -> str | None:
    """``owner, "name"`` (the first two arguments of ``getattr`` / ``hasattr``) on persistent
    state: the attribute's key."""
    attribute = string_value(args[1].value)
    owner = args[0].value
    if attribute is None or not attribute.isidentifier() or type(owner) is not cst.Name or (
            owner.value not in ("self", "cls") and owner.value not in persistent_names):
        return None
    return f"{owner.value}.{attribute}"


def _attribute_read(node: cst.BaseExpression, persistent_names: frozenset[str]) -> str | None:
    """``self._x`` (an attribute of persistent state, read into a local before it is tested:
    ``context = self._context; if context is not None: return context``): its key."""
    if type(node) is not cst.Attribute or type(node.value) is not cst.Name:
        return None
    owner = node.value.value
    if owner not in ("self", "cls") and owner not in persistent_names:
        return None
    return f"{owner}.{node.attr.value}"


def _state_test(test: cst.BaseExpression, persistent_names: frozenset[str], gets: dict[str, tuple[str, str]]):
    """What an ``if`` test says about persistent state: ``("unset", state)`` for
    ``self._x is None`` / ``not self._done`` / ``key not in self._seen`` / ``v is None`` after
    ``v = self._cache.get(key)`` / ``getattr(self, "_x", None) is None`` / ``not hasattr(self,
    "_x")``, ``("set", state)`` for
    the opposite tests; ``state`` is an
    attribute key or ``(container, key text)``. None for any other test."""
    negated = False
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        negated, test = True, test.expression
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        target = test.comparisons[0]
        operator = type(target.operator)
        if operator in (cst.Is, cst.IsNot):
            if not (type(target.comparator) is cst.Name and target.comparator.value == "None"):
                return None
            unset = operator is cst.Is
            subject = test.left
        elif operator in (cst.In, cst.NotIn):
            container = _persistent(target.comparator, persistent_names)
            if container is None:
                return None
            unset = operator is cst.NotIn
            return ("unset" if unset != negated else "set", (container, _text(test.left)))
        else:
            return None
    elif type(test) in (cst.Name, cst.Attribute):
        unset, subject = False, test
    elif (state := _hasattr_call(test, persistent_names)) is not None:
        return ("unset" if negated else "set", state)
    else:
        return None
    unset = unset != negated
    if type(subject) is cst.Name and subject.value in gets:
        return ("unset" if unset else "set", gets[subject.value])
    state = _persistent(subject, persistent_names) or _getattr_call(subject, persistent_names)
    return ("unset" if unset else "set", state) if state is not None else None


_GROWS_RIGHT = (cst.GreaterThan, cst.GreaterThanEqual)  # ``n > self.cap``: ``self.cap`` is the mark
_GROWS_LEFT = (cst.LessThan, cst.LessThanEqual)  # ``self.cap < n``


def _high_water_mark(test: cst.BaseExpression, persistent_names: frozenset[str]) -> str | None:
    """The persistent state a test compares a value against as a high-water mark: ``n >
    self.cap``, ``self.cap < n`` (``>=`` / ``<=`` too), on the state or an element of it
    (``max_h > self.max_size[0]``), or an ``or`` of such tests on one state (``h >
    self.max_size[0] or w > self.max_size[1]``). None for any other test."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.Or:
        left = _high_water_mark(test.left, persistent_names)
        return left if left is not None and left == _high_water_mark(test.right, persistent_names) else None
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    if isinstance(target.operator, _GROWS_RIGHT):
        mark, value = target.comparator, test.left
    elif isinstance(target.operator, _GROWS_LEFT):
        mark, value = test.left, target.comparator
    else:
        return None
    if type(mark) is cst.Subscript:
        mark = mark.value
    state = _persistent(mark, persistent_names)
    if state is None or _mentions(value, state):
        return None
    return state


def _mentions(node: cst.BaseExpression, state: str) -> bool:
    """Does the expression read ``state`` (an attribute chain or name) anywhere?"""
    todo = [node]
    while todo:
        current = todo.pop()
        if type(current) in (cst.Name, cst.Attribute) and dotted(current) == state:
            return True
        todo.extend(children(current))
    return False


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The tests that must all hold for ``test`` to hold (``a and b and c``), or ``test`` alone."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return [*_conjuncts(test.left), *_conjuncts(test.right)]
    return [test]


def _records(statements, state) -> bool:
    """Does one of ``statements`` (at their top level, or inside a ``with`` / ``try`` body there:
    code that runs whenever the block does) store ``state``?"""
    for statement in statements:
        kind = type(statement)
        if kind is cst.SimpleStatementLine:
            if any(_records_small(small, state) for small in statement.body):
                return True
        elif kind in _SMALL_STORES:  # ``if x is None: self.x = make()`` on one line
            if _records_small(statement, state):
                return True
        elif kind is cst.With or kind is cst.Try:
            if _records(statements_of(statement.body), state):
                return True
    return False


def _records_small(small: cst.BaseSmallStatement, state) -> bool:
    kind = type(small)
    if kind is cst.Assign:
        targets = [t.target for t in small.targets]
    elif kind is cst.AnnAssign and small.value is not None:
        targets = [small.target]
    elif kind is cst.Expr and type(small.value) is cst.Call:
        call = small.value
        if type(call.func) is not cst.Attribute:
            return False
        if type(state) is str:
            # A method of the module-level object whose attribute is the state may set it
            # (SGLang ``IPC_A2A_MULTI.init(group)`` after ``if IPC_A2A_MULTI.inited: return``);
            # not one of ``self`` / ``cls``, which another method the step runs may unset.
            owner = state.rpartition(".")[0]
            return bool(owner) and owner.partition(".")[0] not in ("self", "cls") and dotted(call.func.value) == owner
        if call.func.attr.value not in _RECORDING_METHODS or not call.args:
            return False
        container, key = state
        return dotted(call.func.value) == container and _text(call.args[0].value) == key
    else:
        return False
    for target in targets:
        for element in (e.value for e in target.elements) if type(target) in (cst.Tuple, cst.List) else (target,):
            if type(state) is str:
                if type(element) in (cst.Name, cst.Attribute) and dotted(element) == state:
                    return True
            elif type(element) is cst.Subscript and len(element.slice) == 1 \
                    and type(element.slice[0].slice) is cst.Index and dotted(element.value) == state[0] \
                    and _text(element.slice[0].slice.value) == state[1]:
                return True
    return False


class OnceRegions:
    """Code that runs once (per key), not per step: lazy initialisation that records that it
    ran in state outliving the call, as ``functools.lru_cache`` would.

    - the body of ``if self._pool is None:`` / ``if not self._ready:`` / ``if key not in
      self._cache:`` / ``if pool is None:`` after ``pool = self._pools.get(key)``, when the
      body itself sets what the test reads (``self._pool = ...``, ``self._cache[key] = ...``,
      ``self._seen.add(key)``);
    - the statements after ``if key in self._done: return`` / ``if self._pool is not None:
      return self._pool`` (an early return, no ``else``) in the same block, when one of them
      records it.
    A call of a method of the module-level object whose attribute the test reads records it
    too (``TRANSPORT.init(group)`` after ``if TRANSPORT.inited: return True``); one of
    ``self`` does not.
    The state is an attribute of ``self`` / ``cls``, a module-level name or an attribute of one,
    or an attribute of the ``layer`` module an attention class is handed (``if
    layer._o_scale is None:``, ``cached = getattr(layer, "_scale", None)``, ``if not
    hasattr(layer, "_scale"):``). A high-water mark runs once per new maximum, which warm-up
    meets: the body of ``if n > self.cap:`` that sets ``self.cap``, where no other method sets it
    (``once_body``). Not a run-once
    region: a single-entry cache (``if key != self._last_key:``), which runs again whenever the
    key changes, nor a test that may hold with the state set (``if self._buf is None or n > cap:``);
    one that asks more besides does not (``if ready and key not in self._cache:``)."""

    def __init__(self, ctx) -> None:
        names: set[str] = set()
        for statement in ctx.module.body:
            if type(statement) is cst.SimpleStatementLine:
                for small in statement.body:
                    if type(small) is cst.Assign:
                        names.update(t.target.value for t in small.targets if type(t.target) is cst.Name)
                    elif type(small) is cst.AnnAssign and type(small.target) is cst.Name:
                        names.add(small.target.value)
        self.module_names = frozenset(names)

    def persistent_names(self, function: cst.FunctionDef) -> frozenset[str]:
        """Module-level names, and ``global`` names, as ``function`` sees them (a name the
        function assigns without ``global`` is its own local), and its parameters of
        ``_PERSISTENT_PARAMETERS``."""
        declared = {
            name.name.value for statement in statements_of(function.body) if type(statement) is cst.SimpleStatementLine
            for small in statement.body if type(small) is cst.Global for name in small.names
        }
        params = function.params
        declared.update(
            param.name.value for param in named_params(params)
            if param.name.value in _PERSISTENT_PARAMETERS
        )
        return self.module_names | declared if declared else self.module_names

    @staticmethod
    def cache_get(small: cst.BaseSmallStatement, persistent_names: frozenset[str]):
        """``v = self._cache.get(key)``: (v, (container, key text)); ``v = getattr(layer, "_x",
        None)`` or ``v = self._x``: (v, ``layer._x``); else None."""
        if type(small) is not cst.Assign or len(small.targets) != 1 or type(small.targets[0].target) is not cst.Name:
            return None
        found = _get_call(small.value, persistent_names) or _getattr_call(small.value, persistent_names) \
            or _attribute_read(small.value, persistent_names)
        return (small.targets[0].target.value, found) if found is not None else None

    def once_body(self, node: cst.If, function, persistent_names: frozenset[str], gets: dict) -> bool:
        """Does the body of ``node`` run once per key (it sets the state its test finds unset)?
        A test that also asks more (``if call is not None and key not in _CHECKED:``) runs the
        body only while the state is unset too, so once at most.

        Or once per new maximum: a high-water mark (``if n > self.cap:``, ``_high_water_mark``)
        that the body records, and no other method sets to anything, only grows, so the body
        runs only until warm-up has met the largest size (vLLM's ``Resampler2_5._adjust_pos_cache``,
        whose caller notes that "the cache was already expanded by the preceding warmup run")."""
        body = statements_of(node.body)
        for conjunct in _conjuncts(node.test):
            found = _state_test(conjunct, persistent_names, gets)
            if found is not None and found[0] == "unset" and _records(body, found[1]) \
                    and not self._reset_elsewhere(found[1], function):
                return True
            mark = _high_water_mark(conjunct, persistent_names)
            if mark is not None and _records(body, mark) and not self._reset_elsewhere(mark, function, to_any=True):
                return True
        return False

    def once_after(self, node: cst.If, rest, function, persistent_names: frozenset[str], gets: dict) -> bool:
        """Do the statements ``rest`` after ``node`` in its block run once per key (``node``
        returns when the state is set, and ``rest`` sets it)?"""
        if node.orelse is not None:
            return False
        body = statements_of(node.body) if type(node.body) is cst.IndentedBlock else ()
        last = body[-1] if body else None
        if type(last) is not cst.SimpleStatementLine or type(last.body[-1]) is not cst.Return:
            return False
        found = _state_test(node.test, persistent_names, gets)
        return found is not None and found[0] == "set" and _records(rest, found[1]) \
            and not self._reset_elsewhere(found[1], function)

    @staticmethod
    def _reset_elsewhere(state, function, to_any: bool = False) -> bool:
        """Does another method of the class (not ``__init__``) unset the attribute again
        (``self._x = None``, ``self._cache = {}``: a per-step memo), so that "once" comes round
        again? ``to_any``: assign it anything (a high-water mark set lower starts over).
        (Only assignments: the fast path keeps the methods that assign a ``self.``
        attribute a kept method reads, not the ones that call ``.clear()`` on it.)"""
        key = state if type(state) is str else state[0]
        root, _, rest = key.partition(".")
        if root not in ("self", "cls") or function.class_node is None:
            return False  # module state: trusted (other functions' code may be masked away)
        attribute = rest.split(".", 1)[0]
        owners = ("self", "cls", function.class_node.name.value)
        for statement in statements_of(function.class_node.body):
            if type(statement) is cst.FunctionDef and statement is not function.node \
                    and statement.name.value not in _STATE_METHODS and _assigns(statements_of(statement.body),
                                                                                 owners, attribute, to_any):
                return True
        return False


_STATE_METHODS = frozenset({"__init__", "__post_init__", "__new__"})
_SMALL_STORES = frozenset({cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Expr})


def _assigns(statements, owners: tuple[str, ...], attribute: str, to_any: bool = False) -> bool:
    """Is ``<owner>.<attribute>`` unset (``_unsetting``; ``to_any``: set to anything, augmented
    too) by an assignment among ``statements`` (nested blocks included, nested functions not)?"""
    for statement in statements:
        kind = type(statement)
        if kind is cst.SimpleStatementLine or kind in _SMALL_STORES:
            for small in statement.body if kind is cst.SimpleStatementLine else (statement,):
                small_kind = type(small)
                if small_kind is cst.Assign and (to_any or _unsetting(small.value)):
                    targets = [t.target for t in small.targets]
                elif (small_kind is cst.AnnAssign and small.value is not None and (to_any or _unsetting(small.value))) \
                        or (small_kind is cst.AugAssign and to_any):
                    targets = [small.target]
                else:
                    continue
                for target in targets:
                    for element in (e.value for e in target.elements) if type(target) in (cst.Tuple, cst.List) \
                            else (target,):
                        if type(element) is cst.Attribute and element.attr.value == attribute \
                                and type(element.value) is cst.Name and element.value.value in owners:
                            return True
        elif kind is cst.FunctionDef or kind is cst.ClassDef:
            continue
        else:
            for block in _blocks_of(statement):
                if _assigns(block, owners, attribute, to_any):
                    return True
    return False


def _unsetting(value: cst.BaseExpression) -> bool:
    """A value that makes a run-once test true again: ``None``, ``False``, ``0``, an empty
    container (``{}``, ``set()``, ``[]``)."""
    kind = type(value)
    if kind is cst.Name:
        return value.value in ("None", "False")
    if kind is cst.Integer:
        return value.value == "0"
    if kind in (cst.Dict, cst.List, cst.Tuple):
        return not value.elements
    if kind is cst.Call:
        return not value.args and dotted(value.func) in ("set", "dict", "list", "tuple", "collections.OrderedDict",
                                                          "OrderedDict", "weakref.WeakValueDictionary")
    return False


def _blocks_of(statement: cst.CSTNode):
    """The statement lists of a compound statement (``if`` / ``elif`` / ``else``, loops,
    ``with``, ``try`` and its handlers, ``match`` cases)."""
    yield statements_of(getattr(statement, "body", None))
    orelse = getattr(statement, "orelse", None)
    while orelse is not None:
        if type(orelse) is cst.If:
            yield statements_of(orelse.body)
            orelse = orelse.orelse
        else:
            yield statements_of(orelse.body)
            orelse = None
    for handler in getattr(statement, "handlers", ()):
        yield statements_of(handler.body)
    final = getattr(statement, "finalbody", None)
    if final is not None:
        yield statements_of(final.body)
    for case in getattr(statement, "cases", ()):
        yield statements_of(case.body)
