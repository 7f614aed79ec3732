"""Custom ops a file implements in Python: ``torch.ops.<ns>.<name>`` is then a call of that
function, whose summary says what it needs of each argument, and no longer an op of unknown
code that may read every tensor as dense memory.

Registrations read (in module code and its blocks):
- ``@torch.library.custom_op("ns::name", ...)`` or ``@torch.library.triton_op(...)`` on a
  ``def``, also through a module-level name bound to either (unsloth's ``_register =
  torch.library.triton_op``, or ``custom_op`` on another platform);
- a call or decorator of a helper named ``*register_custom_op`` (vLLM's and SGLang's
  ``direct_register_custom_op(op_name="name", op_func=impl, ...)``, SGLang's
  ``@register_custom_op(op_name="name")``, which defaults to the function's name). Such a helper
  registers into a library of its project's choosing, so the namespace is not checked there.
Decorators are read from the file's text (a ``def`` the project plan masks keeps its
registration), calls and aliases from the parse of module code (never masked).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from sync_lint.analysis.device import keyword, string_value
from sync_lint.analysis.nodes import block_statements, inner_blocks

if TYPE_CHECKING:
    from sync_lint.analysis.context import FileContext

_OP_DECORATORS = frozenset({"torch.library.custom_op", "torch.library.triton_op"})
_HELPER_SUFFIX = "register_custom_op"
# ``@callee`` or ``@callee(arguments)`` (one level of inner parentheses, over lines), then any
# one-line decorators, then ``def function``.
_DECORATED = re.compile(
    r"^[ \t]*@[ \t]*(?P<callee>[A-Za-z_][\w.]*)[ \t]*(?P<arguments>\((?:[^()]|\([^()]*\))*\))?[ \t]*(?:#[^\n]*)?\n"
    r"(?:[ \t]*@[^\n]*\n)*[ \t]*(?:async[ \t]+)?def[ \t]+(?P<function>[A-Za-z_]\w*)",
    re.MULTILINE,
)
_QUALIFIED_OP = re.compile(r"\(\s*[rbuRBU]?[\"'](?P<namespace>\w+)::(?P<name>\w+)[\"']")
_OP_NAME_KEYWORD = re.compile(r"\bop_name\s*=\s*[\"'](?P<name>\w+)[\"']")


class PythonOps:
    """Op name -> the dotted name of the function that implements it, for the ops this file
    registers."""

    def __init__(self, ctx: FileContext) -> None:
        self._names = ctx.names
        # (namespace or None for any, op name) -> the implementing function's dotted name
        self._impls: dict[tuple[str | None, str], str] = {}
        text = ctx.source.text
        if "custom_op" not in text and "triton_op" not in text:
            return  # every spelling holds one of these words
        # Module code (its blocks too): the names bound to a registering decorator
        # (``_register = torch.library.custom_op``), and the helper calls that register an op.
        self._decorators = set(_OP_DECORATORS)
        todo = list(ctx.module.body)
        while todo:
            statement = todo.pop()
            if isinstance(statement, cst.SimpleStatementLine):
                smalls = statement.body
            elif isinstance(statement, cst.BaseSmallStatement):
                smalls = (statement,)  # of a one-line suite (``if hip: _register = ...``)
            else:
                for block in inner_blocks(statement):
                    todo.extend(block_statements(block))
                continue
            for small in smalls:
                if isinstance(small, cst.Assign) and self._names.resolve(small.value) in _OP_DECORATORS:
                    self._decorators.update(
                        self._names.resolve(target.target) for target in small.targets if isinstance(target.target, cst.Name)
                    )
                elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    self._read_helper_call(small.value)
        # Decorated functions are read from the source text: a top-level ``def`` the plan does
        # not need is masked out of the parse, its decorator with it, and the ops it registers
        # must be known alike on every path (``pipeline.units``' contract).
        for found in _DECORATED.finditer(text):
            self._read_decorator(found["callee"], found["arguments"] or "", found["function"])

    def implementation(self, op: str) -> str | None:
        """The function implementing ``op`` (``torch.ops.ns.name`` or ``...name.default``), if this
        file registers one."""
        parts = op.split(".")
        if len(parts) not in (4, 5) or parts[:2] != ["torch", "ops"]:
            return None
        namespace, name = parts[2], parts[3]
        return self._impls.get((namespace, name)) or self._impls.get((None, name))

    def _read_decorator(self, written: str, arguments: str, function: str) -> None:
        """``@written(arguments)`` on ``def function``."""
        callee = self._names.resolve_dotted(written)
        impl = self._names.resolve_dotted(function)
        if callee in self._decorators:
            qualified = _QUALIFIED_OP.match(arguments)
            if qualified is not None:
                self._impls[(qualified["namespace"], qualified["name"])] = impl
        elif callee.rsplit(".", 1)[-1].endswith(_HELPER_SUFFIX):
            named = _OP_NAME_KEYWORD.search(arguments)
            self._impls[(None, named["name"] if named is not None else function)] = impl

    def _read_helper_call(self, call: cst.Call) -> None:
        callee = self._names.resolve(call.func) or ""
        if not callee.rsplit(".", 1)[-1].endswith(_HELPER_SUFFIX):
            return
        name = _keyword_string(call, "op_name")
        impl = keyword(call, "op_func")
        positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        if name is None and positional:
            name = string_value(positional[0])
        if impl is None and len(positional) > 1:
            impl = positional[1]
        if name is not None and isinstance(impl, (cst.Name, cst.Attribute)):
            target = self._names.resolve(impl)
            if target is not None:
                self._impls[(None, name)] = target


def _keyword_string(call: cst.Call | None, name: str) -> str | None:
    value = keyword(call, name) if call is not None else None
    return string_value(value) if value is not None else None
