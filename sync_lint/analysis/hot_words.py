"""Which methods the settings name hot (``analysis.hot_scopes``), by the names of their class.

Free of libcst: the syntax scout (``pipeline.scout.hot``) asks the same questions of CPython's
``ast`` before any libcst import, and must answer them as the analysis does.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable
from functools import lru_cache

from sync_lint.config import hot_class_methods

# The classes ``torch.nn`` exports that are no ``nn.Module`` (every other capitalised name there is
# one: ``nn.Linear``, ``nn.Embedding``, ``nn.LayerNorm``, ``nn.ModuleList``; checked in the tests).
_TORCH_NN_NON_MODULES = frozenset(
    {"Buffer", "LinearCrossEntropyOptions", "Parameter", "UninitializedBuffer", "UninitializedParameter"}
)


def is_module_base(name: str) -> bool:
    """Does a resolved base name make a class an ``nn.Module`` by itself: ``torch.nn.Module``
    (under any prefix that ends so: ``nn.Module`` re-exported) or another of torch's modules?"""
    return name.endswith("nn.Module") or name == "torch.nn.modules.module.Module" or is_torch_module_class(name)


def is_torch_module_class(name: str) -> bool:
    """Does a resolved base name (``torch.nn.Embedding``, ``torch.nn.modules.linear.Linear``) name
    one of torch's ``nn.Module`` classes? A class derived from one is a module too."""
    parts = name.split(".")
    if parts[:2] != ["torch", "nn"] or not parts[-1][:1].isupper() or parts[-1] in _TORCH_NN_NON_MODULES:
        return False
    return len(parts) == 3 or (len(parts) == 5 and parts[2] == "modules")


def matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


@lru_cache(maxsize=8)
def glob_matcher(patterns: tuple[str, ...]) -> Callable[[str], bool] | None:
    """``matches`` against every one of these globs as one regular expression (None: no globs).
    A project may list a hundred ``hot-functions``, each asked of every function of a tree:
    one compiled alternation answers in one pass what a loop over ``fnmatch`` answers in as
    many. Made once per run: building it costs about 2 ms for a hundred globs, and every
    file's scout and hot-scope analysis asks for it."""
    if not patterns:
        return None
    alternation = re.compile("|".join(f"(?:{fnmatch.translate(pattern)})" for pattern in patterns))
    return lambda name: alternation.match(name) is not None


class HotNames:
    """Two ways a class's methods are hot. ``hot-class-patterns`` lists classes (the metadata
    builders) whose every method named like ``hot-method-patterns`` is hot; ``hot-class-methods``
    gives, per class glob, the methods of that kind of class's own per-step contract (an attention
    implementation's ``forward``), crossed with nothing else. A class of either kind is a *hot
    class*: its methods' receivers of unknown device are judged as the ``unknown-device``
    policy says for hot classes, whether or not the method itself is hot (a helper it calls);
    of the second kind, only a class that defines a method of its contract (a ``*Backend`` class
    with no ``forward_decode`` or the like is no attention backend: ``CUDAPiecewiseBackend``).
    A class is known by its own name and the last parts of its bases' names, as written.
    Besides, ``hot-functions`` makes any function hot by its qualified name (``is_named_hot``)."""

    def __init__(self, settings) -> None:
        self.class_patterns = list(settings["hot-class-patterns"])
        self.method_patterns = list(settings["hot-method-patterns"])
        self.class_methods = [(glob, tuple(methods)) for glob, methods in hot_class_methods(settings).items()]
        # Every method name either way makes hot, whatever the class (the scout's first sieve).
        self.any_method_patterns = (*self.method_patterns, *(m for _, methods in self.class_methods for m in methods))
        # ``hot-functions``: a function's qualified name as ``FunctionInfo.qualname`` writes it
        # (``<module>.<Class>.<name>``, a nested one ``<outer>.<name>``); None when unset.
        self.is_named_hot = glob_matcher(tuple(settings["hot-functions"]))

    def is_listed_class(self, class_names: Iterable[str]) -> bool:
        """Does ``hot-class-patterns`` name the class?"""
        return any(matches(name, self.class_patterns) for name in class_names)

    def contract_methods(self, class_names: Iterable[str]) -> tuple[str, ...]:
        """The method globs ``hot-class-methods`` names for a class of these names (none: empty)."""
        names = tuple(class_names)
        return tuple(
            method for glob, methods in self.class_methods if any(fnmatch.fnmatchcase(n, glob) for n in names)
            for method in methods
        )

    def is_hot_class(self, class_names: Iterable[str], method_names: Iterable[str]) -> bool:
        """``method_names``: the names of the methods the class defines."""
        names = tuple(class_names)
        if self.is_listed_class(names):
            return True
        contract = self.contract_methods(names)
        return bool(contract) and any(matches(method, contract) for method in method_names)

    def hot_method_patterns(self, class_names: Iterable[str], nn_module: bool) -> tuple[str, ...]:
        """The names of the methods that are hot in such a class (``nn_module``: an ``nn.Module``
        subclass, whose methods named like ``hot-method-patterns`` are hot too)."""
        names = tuple(class_names)
        listed = nn_module or self.is_listed_class(names)
        return (*(self.method_patterns if listed else ()), *self.contract_methods(names))
