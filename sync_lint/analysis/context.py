"""The per-file context handed to rules, with lazily computed shared analyses."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import libcst as cst

from sync_lint.analysis.functions import FunctionInfo, module_functions
from sync_lint.analysis.modules import is_package_init
from sync_lint.analysis.names import NameTable
from sync_lint.analysis.project_names import NOTHING_FROM_THE_PROJECT, FileProjectNames
from sync_lint.analysis.summaries import FunctionSummary
from sync_lint.pipeline.profile import span

if TYPE_CHECKING:
    from sync_lint.analysis.positions import Positions
    from sync_lint.config import Settings
    from sync_lint.pipeline.source import SourceFile

A = TypeVar("A")


class FileContext:
    def __init__(
        self, source: SourceFile, module: cst.Module, module_name: str, settings: Settings, parsed_text: str | None = None,
        not_at_sinks: frozenset[tuple[str | None, str | None]] = frozenset(),
        codes: frozenset[str] | None = None, project: FileProjectNames = NOTHING_FROM_THE_PROJECT,
        masked: frozenset[tuple[str | None, str | None]] = frozenset(),
    ) -> None:
        self.source = source
        self.path = source.path
        self.module = module
        self.module_name = module_name  # dotted, e.g. "vllm.v1.attention.backends.mla"
        self.settings = settings
        self.names = NameTable(
            module, module_name, settings["alias-modules"], is_package=is_package_init(source.path)
        )
        # Facts about this file's functions that other files may need; analyses fill them in.
        self.summaries: dict[str, FunctionSummary] = {}
        self._analyses: dict[type, object] = {}
        self._positions: Positions | None = None
        self._functions: list[FunctionInfo] | None = None
        # What libcst parsed: the source, or the source with units masked (same lines).
        self.parsed_text = source.text if parsed_text is None else parsed_text
        # The top-level functions and methods, as ``(class or None, name)``, parsed for another
        # reason than the GPU1xx rules: the contiguity analysis records nothing of them
        # (``project_plan.KeptUnits.at_sinks``).
        self.not_at_sinks = not_at_sinks
        # The codes of the rules run on this file (None: any), for an analysis that finds what
        # only one rule reads (``runs``).
        self.codes = codes
        # What the run's other files tell of it: its bases that are modules, the custom ops it
        # calls that they implement in Python (nothing for a file checked on its own).
        self.project = project
        # The top-level functions and methods masked out of the parse, as ``(class or None,
        # name)``: the file defines them all the same (``defines_method``).
        self.masked = masked

    def runs(self, code: str) -> bool:
        """Is the rule ``code`` run on this file?"""
        return self.codes is None or code in self.codes

    def get(self, analysis: type[A]) -> A:
        """The analysis of this file, computed on first use. ``analysis(ctx)`` does the work."""
        found = self._analyses.get(analysis)
        if found is None:
            with span(f"analysis {analysis.__name__}"):
                found = analysis(self)
            self._analyses[analysis] = found
        return found  # type: ignore[return-value]

    def functions(self) -> list[FunctionInfo]:
        """Every function and method of the module, nested ones included (``analysis.functions``),
        collected once for all the analyses."""
        if self._functions is None:
            self._functions = module_functions(self.module, self.names)
        return self._functions

    def masks_method(self, class_node: cst.ClassDef, class_qualname: str, method: str) -> bool:
        """Does the class define ``method`` in a unit masked out of the parse? Only methods of
        top-level classes are units (``pipeline.units``)."""
        name = class_node.name.value
        top_level = class_qualname == (f"{self.module_name}.{name}" if self.module_name else name)
        return top_level and (name, method) in self.masked

    def summary(self, info: FunctionInfo) -> FunctionSummary:
        """The (shared) summary of a function in this file, created on first use."""
        found = self.summaries.get(info.qualname)
        if found is None:
            found = FunctionSummary(info.qualname, info.params, self.path, positional=info.positional)
            self.summaries[info.qualname] = found
        return found

    def release(self) -> None:
        """Drop the analyses once the file is done. They refer back to this context, a reference
        cycle that would keep the whole tree alive until the garbage collector ran (and made it
        walk every node); without it, reference counting frees the tree at once."""
        self._analyses.clear()
        self._positions = None
        self._functions = None

    def positions(self) -> Positions:
        """Node -> ``CodeRange`` in the parsed text; rendered per top-level statement on demand,
        so ask only for nodes of a finding (the pipeline then reuses what was computed)."""
        if self._positions is None:
            # Imported here: positions (and libcst's metadata package, a tenth of a one-file
            # run's start-up) are only needed for a file with findings.
            from sync_lint.analysis.positions import Positions

            self._positions = Positions(self.module, self.parsed_text)
        return self._positions
