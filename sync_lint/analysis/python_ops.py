"""Custom ops a file implements in Python: ``torch.ops.<ns>.<name>`` is then a call of that
function, whose summary says what it needs of each argument, and no longer an op of unknown
code that may read every tensor as dense memory. In a run of many files, an op another file (or
a function of this one) registers is known too (``FileContext.project``, read from the outlines:
``project_plan.PythonOpTable``).

Registrations read (in module code and its blocks):
- ``@torch.library.custom_op("ns::name", ...)`` or ``@torch.library.triton_op(...)`` on a
  ``def``, also through a module-level name bound to either (unsloth's ``_register =
  torch.library.triton_op``, or ``custom_op`` on another platform);
- a call or decorator of a helper named ``*register_custom_op`` (vLLM's and SGLang's
  ``direct_register_custom_op(op_name="name", op_func=impl, ...)``, SGLang's
  ``@register_custom_op(op_name="name")``, which defaults to the function's name). Such a helper
  registers into the library of the project that defines it, named as that project's top-level
  package (``torch.ops.vllm``, ``torch.ops.sglang``): not ``torch.ops._C.name``, the C++ kernel
  its function may call under the same name. One handed ``target_lib=`` is not read.
Decorators are read from the file's text (a ``def`` the project plan masks keeps its
registration), calls and aliases from the parse of module code (never masked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from sync_lint.analysis.device import keyword, string_value
from sync_lint.analysis.nodes import block_statements, inner_blocks
from sync_lint.analysis.op_words import (
    DECORATED,
    HELPER_SUFFIX,
    OP_DECORATORS,
    OP_NAME_KEYWORD,
    OTHER_LIBRARY,
    QUALIFIED_OP,
    helper_namespace,
    may_register,
)

if TYPE_CHECKING:
    from sync_lint.analysis.context import FileContext

class PythonOps:
    """Op name -> the dotted name of the function that implements it, for the ops this file
    registers."""

    def __init__(self, ctx: FileContext) -> None:
        self._names = ctx.names
        # (namespace, op name) -> the implementing function's dotted name
        self._impls: dict[tuple[str, str], str] = {}
        text = ctx.source.text
        self._project = ctx.project
        if not may_register(text):
            return
        # Module code (its blocks too): the names bound to a registering decorator
        # (``_register = torch.library.custom_op``), and the helper calls that register an op.
        self._decorators = set(OP_DECORATORS)
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
                if isinstance(small, cst.Assign) and self._names.resolve(small.value) in OP_DECORATORS:
                    self._decorators.update(
                        self._names.resolve(target.target) for target in small.targets if isinstance(target.target, cst.Name)
                    )
                elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    self._read_helper_call(small.value)
        # Decorated functions are read from the source text: a top-level ``def`` the plan does
        # not need is masked out of the parse, its decorator with it, and the ops it registers
        # must be known alike on every path (``pipeline.units``' contract).
        for found in DECORATED.finditer(text):
            self._read_decorator(found["callee"], found["arguments"] or "", found["function"])

    def implementation(self, op: str) -> str | None:
        """The function implementing ``op`` (``torch.ops.ns.name`` or ``...name.default``), if this
        file registers one."""
        parts = op.split(".")
        if len(parts) not in (4, 5) or parts[:2] != ["torch", "ops"]:
            return None
        namespace, name = parts[2], parts[3]
        return self._impls.get((namespace, name)) or self._project.implementation(namespace, name)

    def _read_decorator(self, written: str, arguments: str, function: str) -> None:
        """``@written(arguments)`` on ``def function``."""
        callee = self._names.resolve_dotted(written)
        impl = self._names.resolve_dotted(function)
        if callee in self._decorators:
            qualified = QUALIFIED_OP.match(arguments)
            if qualified is not None:
                self._impls[(qualified["namespace"], qualified["name"])] = impl
        elif callee.rsplit(".", 1)[-1].endswith(HELPER_SUFFIX) and not OTHER_LIBRARY.search(arguments):
            named = OP_NAME_KEYWORD.search(arguments)
            self._impls[(helper_namespace(callee), named["name"] if named is not None else function)] = impl

    def _read_helper_call(self, call: cst.Call) -> None:
        callee = self._names.resolve(call.func) or ""
        if not callee.rsplit(".", 1)[-1].endswith(HELPER_SUFFIX) or keyword(call, "target_lib") is not None:
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
                self._impls[(helper_namespace(callee), name)] = target


def _keyword_string(call: cst.Call | None, name: str) -> str | None:
    value = keyword(call, name) if call is not None else None
    return string_value(value) if value is not None else None
