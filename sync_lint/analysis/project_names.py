"""What the other files of a run tell the lint of one file, read from every file's outline before
any file is linted (``pipeline.project_plan.ProjectNames``): plain, hashable data, part of the key
the cache stores the file's facts under. A file checked on its own hears nothing."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class FileProjectNames:
    # The dotted names its classes' bases may have that name ``nn.Module`` subclasses of the run
    # (``project_plan.ModuleClasses``): a class of the file derived from one is a module too.
    module_bases: tuple[str, ...] = ()
    # The custom ops it may call that a file of the run implements in Python
    # (``project_plan.PythonOpTable``): ``(namespace, op name, implementing function)``.
    python_ops: tuple[tuple[str, str, str], ...] = ()

    def hearing_ops(self, python_ops: tuple[tuple[str, str, str], ...]) -> FileProjectNames:
        """These names, and ``python_ops`` too (a file checked alone, of the ops beside it)."""
        return replace(self, python_ops=tuple(sorted({*self.python_ops, *python_ops})))

    def implementation(self, namespace: str, name: str) -> str | None:
        """The function of the run that implements ``torch.ops.<namespace>.<name>``."""
        for op_namespace, op_name, function in self.python_ops:
            if (op_namespace, op_name) == (namespace, name):
                return function
        return None


NOTHING_FROM_THE_PROJECT = FileProjectNames()
