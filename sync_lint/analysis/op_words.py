"""How a custom op is registered in Python, in words: read by ``analysis.python_ops`` (the ops
a file implements, for its own calls) and by the project plan's outline (``pipeline.project_plan``:
the ops every file implements, for the calls of the others), which must not import libcst."""

from __future__ import annotations

import re

OP_DECORATORS = frozenset({"torch.library.custom_op", "torch.library.triton_op"})
# vLLM's and SGLang's ``direct_register_custom_op(op_name=..., op_func=...)``, SGLang's
# ``@register_custom_op(op_name=...)``: a helper of this name registers into the library of the
# project that defines it, named as that project's top-level package (vLLM's ``vllm_lib =
# Library("vllm", ...)``; vllm-ascend calls vLLM's), unless it is handed another (``target_lib=``:
# not read, the op stays one of unknown code).
HELPER_SUFFIX = "register_custom_op"
OTHER_LIBRARY = re.compile(r"\btarget_lib\s*=")
# ``@callee`` or ``@callee(arguments)`` (one level of inner parentheses, over lines), then any
# one-line decorators, then ``def function``.
DECORATED = re.compile(
    r"^[ \t]*@[ \t]*(?P<callee>[A-Za-z_][\w.]*)[ \t]*(?P<arguments>\((?:[^()]|\([^()]*\))*\))?[ \t]*(?:#[^\n]*)?\n"
    r"(?:[ \t]*@[^\n]*\n)*[ \t]*(?:async[ \t]+)?def[ \t]+(?P<function>[A-Za-z_]\w*)",
    re.MULTILINE,
)
QUALIFIED_OP = re.compile(r"\(\s*[rbuRBU]?[\"'](?P<namespace>\w+)::(?P<name>\w+)[\"']")
OP_NAME_KEYWORD = re.compile(r"\bop_name\s*=\s*[\"'](?P<name>\w+)[\"']")


def may_register(text: str) -> bool:
    """Every spelling of a registration holds one of these words."""
    return "custom_op" in text or "triton_op" in text


def helper_namespace(helper: str) -> str:
    """The namespace a registering helper puts its ops in, by the helper's resolved dotted name:
    its project's top-level package (``vllm.utils.torch_utils.direct_register_custom_op``:
    ``vllm``)."""
    return helper.partition(".")[0]
