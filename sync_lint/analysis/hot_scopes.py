"""Hot scopes: the code that runs on every engine step, where a GPU->CPU sync stalls the GPU
(or breaks CUDA-graph capture, or fails the post-warm-up sync check).

A function is hot when it is
- a method matching ``hot-method-patterns`` (``build``, ``_build_*``, ``build_for_cudagraph_capture``,
  ``forward``) of a class matching ``hot-class-patterns`` (``*MetadataBuilder``, by its own name or
  a base's), or of an ``nn.Module`` subclass (bases resolving to ``torch.nn.Module`` or another of
  torch's modules, ``nn.Linear``, ``nn.Embedding``: ``hot_words.is_module_base``; a class of the
  same file that is one; in a run of many files, a class another file defines that is one, as
  vLLM's ``CustomOp`` or SGLang's ``BaseLayerWithLoRA``; classes decorated with
  ``support_torch_compile`` count too);
- a method of its class's own per-step contract (``hot-class-methods``: vLLM's attention
  implementations' ``forward`` / ``forward_mqa`` / ``forward_mha``, SGLang's attention backends'
  ``forward_decode`` / ``forward_extend`` / ``init_forward_metadata_in_graph``), which the model's
  ``forward`` reaches only through a custom op or a backend object (``analysis.hot_words``);
- decorated with ``torch.compile`` (with or without arguments), or passed to ``torch.compile(f)``;
- named by ``hot-functions`` (dotted name or glob).
CPU backends (a module named ``*cpu*`` / ``*amx*``, a class named ``CPU...`` / ``...Cpu...``) are
not hot: their tensors live on the host. Functions matching ``cold-function-patterns``
(``__init__``, weight loading, warm-up, capture set-up...) are never hot. The statements inside a
``with torch.cuda.graph(...):`` block are captured, hence hot, whatever function they are in (see
``is_graph_block``). Functions that a hot
scope calls are judged at the call site through their summaries (``sync_lint.analysis.syncs``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from sync_lint.analysis.device import base_class_name
from sync_lint.analysis.device_words import MEMOIZERS
from sync_lint.analysis.functions import FunctionInfo
from sync_lint.analysis.hot_words import HotNames, is_module_base, matches
from sync_lint.analysis.names import dotted
from sync_lint.analysis.nodes import named_params

_COMPILE = ("torch.compile", "torch.compiler.compile")
_GRAPH_BLOCKS = ("torch.cuda.graph", "torch.cuda.graphs.graph")
_CPU_PARTS = frozenset({"cpu", "amx"})
_CPU_CLASS = re.compile(r"(?:^|[a-z_])(?:CPU|Cpu|AMX)(?=[A-Z_]|$)")


@dataclass(frozen=True)
class Hotness:
    reason: str | None  # "hot path `Builder.build`", None when not hot
    cold: bool  # never hot (cold-function-patterns)
    hot_class: bool  # a method of a hot class (``HotNames``: a listed one, or one with a contract)
    # Compiled with ``torch.compile``: what it does with host data (a constant of the graph, or
    # an input) is the compiler's choice, so GPU205 does not judge its copies.
    compiled: bool = False


class HotScopes:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        settings = ctx.settings
        self.names = HotNames(settings)
        self.cold_patterns = list(settings["cold-function-patterns"])
        # A module of a CPU backend (``cpu_attn.py``, ``amx_mla.py``): its builders run on the host.
        self.cpu_backend = bool(_CPU_PARTS.intersection(ctx.names.module_name.rsplit(".", 1)[-1].lower().split("_")))
        self.functions: list[FunctionInfo] = ctx.functions()
        self._classes: dict[str, cst.ClassDef] = {}
        self._names_of_class: dict[int, list[str]] = {}  # ``_class_names``, asked per method
        self._collect_classes(ctx.module.body, ctx.names.module_name)
        self._module_classes = self._nn_module_classes()
        self._compiled_names = self._compiled_by_call()
        self._by_node: dict[int, Hotness] = {id(info.node): self._judge(info) for info in self.functions}

    def of(self, info: FunctionInfo) -> Hotness:
        return self._by_node[id(info.node)]

    # -- classes --------------------------------------------------------------------------------
    def _collect_classes(self, body, prefix: str) -> None:
        for statement in body:
            if isinstance(statement, cst.ClassDef):
                qualname = f"{prefix}.{statement.name.value}" if prefix else statement.name.value
                self._classes[qualname] = statement
                inner = statement.body.body if isinstance(statement.body, cst.IndentedBlock) else ()
                self._collect_classes(inner, qualname)

    def _resolved_bases(self, node: cst.ClassDef) -> list[str]:
        bases = []
        for arg in node.bases:
            if arg.keyword is not None:
                continue
            written = base_class_name(arg.value)
            if written:
                bases.append(self.ctx.names.resolve_dotted(written))
        return bases

    def _nn_module_classes(self) -> set[str]:
        """The classes of this file that are ``nn.Module`` subclasses: by a base of torch's, a
        class of this file that is one, or a base another file of the run defines as one
        (``FileContext.project``, from the run's outlines: ``project_plan.ModuleClasses``)."""
        project_modules = frozenset(self.ctx.project.module_bases)
        found: set[str] = set()
        changed = True
        while changed:
            changed = False
            for qualname, node in self._classes.items():
                if qualname in found:
                    continue
                bases = self._resolved_bases(node)
                compiled = any(
                    (dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) or "")
                    .endswith("support_torch_compile")
                    for d in node.decorators
                )
                if compiled or any(is_module_base(b) or b in found or b in project_modules for b in bases):
                    found.add(qualname)
                    changed = True
        return found

    def is_hot_class(self, node: cst.ClassDef) -> bool:
        if self.cpu_backend or _CPU_CLASS.search(node.name.value):
            return False  # a CPU backend's tensors are host tensors: nothing there syncs
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        methods = (m.name.value for m in body if isinstance(m, cst.FunctionDef))
        return self.names.is_hot_class(self._class_names(node), methods)

    def _class_names(self, node: cst.ClassDef) -> list[str]:
        """The class's own name and the last parts of its bases' (what ``HotNames`` matches)."""
        found = self._names_of_class.get(id(node))
        if found is None:
            found = self._names_of_class[id(node)] = [
                node.name.value, *(base.rsplit(".", 1)[-1] for base in self._resolved_bases(node))
            ]
        return found

    def _compiled_by_call(self) -> set[str]:
        """Functions passed to ``torch.compile(...)`` at module level (``step = torch.compile(f)``)."""
        names: set[str] = set()
        if "compile" not in self.ctx.source.text:
            return names
        for statement in self.ctx.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                value = getattr(small, "value", None)
                if isinstance(value, cst.Call) and self.ctx.names.resolve(value.func) in _COMPILE and value.args \
                        and value.args[0].keyword is None:
                    target = dotted(value.args[0].value)
                    if target:
                        names.add(target.rsplit(".", 1)[-1])
        return names

    # -- functions ------------------------------------------------------------------------------
    def _judge(self, info: FunctionInfo) -> Hotness:
        class_node = info.class_node
        hot_class = class_node is not None and self.is_hot_class(class_node)
        if matches(info.name, self.cold_patterns) or self._memoized(info):
            return Hotness(None, True, hot_class)
        if self.cpu_backend or (class_node is not None and _CPU_CLASS.search(class_node.name.value)):
            return Hotness(None, False, False)
        short = f"{class_node.name.value}.{info.name}" if class_node is not None else info.name
        if any(d in _COMPILE for d in info.decorators) or (class_node is None and info.name in self._compiled_names):
            return Hotness(f"`torch.compile`d `{short}`", False, hot_class, compiled=True)
        if class_node is not None:
            if hot_class and matches(info.name, self.names.hot_method_patterns(self._class_names(class_node), nn_module=False)):
                return Hotness(f"hot path `{short}`", False, True)
            class_qualname = info.qualname.rsplit(".", 1)[0]
            if class_qualname in self._module_classes and matches(info.name, self.names.method_patterns):
                return Hotness(f"model forward `{short}`", False, False)
        if self.names.is_named_hot is not None and self.names.is_named_hot(info.qualname):
            return Hotness(f"hot function `{short}`", False, hot_class)
        return Hotness(None, False, hot_class)

    def _memoized(self, info: FunctionInfo) -> bool:
        """``@functools.lru_cache`` / ``@cache`` on a function whose parameters are not annotated as
        tensors (a tensor argument would miss the cache every step): its syncs run once per key
        (``_probe(device)``), not per step, so it is cold. A method too: its instance is one more
        key, the same object step after step for the modules and backends hot code runs in
        (SGLang ``NDRotaryEmbedding._forward_cached(pos_tuple, device_str)``)."""
        if not any(d in MEMOIZERS for d in info.decorators):
            return False
        return not _tensor_annotated(info, self.ctx.module)

    def memoized_tensor_params(self, info: FunctionInfo) -> tuple[str, ...] | None:
        """For a module-level function under ``functools.lru_cache`` / ``cache``: its parameters
        annotated as tensors (the ones that can miss the cache every step: a tensor is hashed by
        identity). None for any other function."""
        if info.class_node is not None or not any(d in MEMOIZERS for d in info.decorators):
            return None
        return _tensor_annotated(info, self.ctx.module)

    def is_graph_block(self, node: cst.With) -> bool:
        """``with torch.cuda.graph(g):``: what runs inside is captured into a CUDA graph."""
        for item in node.items:
            call = item.item
            if isinstance(call, cst.Call) and self.ctx.names.resolve(call.func) in _GRAPH_BLOCKS:
                return True
        return False


def _tensor_annotated(info: FunctionInfo, module: cst.Module) -> tuple[str, ...]:
    """The parameters of a function annotated as tensors."""
    params = info.node.params
    return tuple(
        param.name.value for param in named_params(params)
        if param.annotation is not None and "Tensor" in module.code_for_node(param.annotation.annotation)
    )
