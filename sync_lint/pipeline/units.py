"""The function-level pre-filter: parse only the parts of a file a rule could use.

Parsing with libcst costs about 20x what ruff spends on a whole check, so on a large tree the
cheapest parse is the one not done. A file is cut, by text alone, into *units*: top-level
functions, the methods of top-level classes, and everything else (imports, module-level
statements, class headers and class-level statements, which are always kept). A plan decides
which function units to keep: ``prefilter.one_file_plan`` for a file checked on its own,
``project_plan`` for a run of many files (the functions that may hold a finding, and those
whose summaries such a finding rests on, across files); a method that sets a ``self.``
attribute a kept method of its class reads (or ``__init__``) is always kept with it. Every
other unit is *masked*: replaced by one ``pass`` statement continued over its lines with
backslashes, so line numbers and the columns of kept code stay exact. A cut that lands inside a multi-line string makes the masked text
fail to parse; the file is then parsed whole.

Contract for rules (what keeps the fast path equal to the plain one): a rule's finding in a
unit may depend on that unit, on module-level statements, on its class header and ``__init__``,
on the class's other methods only through ``self.`` attributes, and on other functions (in this
file or another) only through their summaries; a function whose definition a rule inspects (a
``@triton.jit`` kernel) must contain one of that rule's triggers. A fix planned on the masked
parse may read and edit only what that parse holds as the text does: its finding's span and
statement, and module-level code (``fixes.Editor`` raises ``NeedsWholeFile`` where a plan would
read a masked unit or render the module).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEF_NAME = re.compile(r"(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_][A-Za-z0-9_]*)")
_SELF_ATTRIBUTE = re.compile(r"\bself\.([A-Za-z_][A-Za-z0-9_]*)")
_SELF_ASSIGNED = re.compile(r"\bself\.([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=\n]*)?(?:[-+*/|&]?=)(?!=)")
# Methods that hold the class's state: kept whenever any method of the class is.
_STATE_METHODS = frozenset({"__init__", "__post_init__", "__new__"})


@dataclass
class Unit:
    first: int  # 0-based line index, inclusive
    last: int  # exclusive
    kind: str  # "function" | "method" | "class" (header + class-level code) | "module" (other statements)
    name: str | None
    class_index: int | None = None  # for methods: the index of their class's unit


def _code_start(line: str) -> bool:
    """Could a statement start here? Not a blank line, a comment, or a closing bracket."""
    stripped = line.lstrip()
    return bool(stripped) and stripped[0] not in "#)]}" and not stripped.startswith(('"""', "'''"))


def segment(lines: list[str]) -> list[Unit]:
    units: list[Unit] = []
    n = len(lines)
    i = 0
    while i < n:
        if not (lines[i][:1].isalpha() or lines[i][:1] in "_@"):
            # Leading comments, blanks, or a continuation at column 0: part of the module unit.
            _extend_module(units, i)
            i += 1
            continue
        end = _header_index(lines, i) + 1
        # An indented line goes on the unit: tested first, as most lines are (and cheaper).
        while end < n and not (lines[end][:1] not in " \t" and _code_start(lines[end])):
            end += 1
        header = _header(lines, i)
        match = _DEF_NAME.match(header)
        if match and header.startswith("class"):
            _split_class(units, lines, i, end, match.group(1))
        elif match:
            units.append(Unit(i, end, "function", match.group(1)))
        else:
            _extend_module(units, i, end)
        i = end
    return units


def _header_index(lines: list[str], i: int) -> int:
    """The index of the def/class line of a unit, past its decorators."""
    indent = _width(lines[i])
    while i < len(lines) and lines[i].lstrip().startswith("@"):
        i += 1
        # A decorator call may span lines: skip until the next line back at the unit's indent.
        while i < len(lines) and not (_code_start(lines[i]) and _width(lines[i]) <= indent):
            i += 1
    return min(i, len(lines) - 1)


def _header(lines: list[str], i: int) -> str:
    return lines[_header_index(lines, i)].lstrip()


def _extend_module(units: list[Unit], first: int, last: int | None = None) -> None:
    last = first + 1 if last is None else last
    if units and units[-1].kind == "module" and units[-1].last == first:
        units[-1].last = last
    else:
        units.append(Unit(first, last, "module", None))


def _split_class(units: list[Unit], lines: list[str], first: int, last: int, name: str) -> None:
    class_index = len(units)
    units.append(Unit(first, last, "class", name))
    indent = None
    members: list[Unit] = []
    i = first + 1
    while i < last:
        line = lines[i]
        if indent is not None and line[indent : indent + 1] in (" ", "\t"):
            i += 1  # deeper than the members: a method's body (most lines of a class)
            continue
        # The members' indent is the first statement's, which may be a docstring whose later
        # lines are indented deeper (``_code_start`` skips the line that opens it).
        if _code_start(line) or (indent is None and line.lstrip().startswith(('"""', "'''"))):
            width = len(line) - len(line.lstrip())
            if indent is None and width > 0:
                indent = width
            if width == indent and (line.lstrip().startswith(("def ", "async def ", "@"))):
                header = _header(lines, i)
                match = _DEF_NAME.match(header)
                if match and not header.startswith("class"):
                    end = _header_index(lines, i) + 1
                    while end < last and not (_code_start(lines[end]) and _width(lines[end]) <= indent):
                        end += 1
                    members.append(Unit(i, end, "method", match.group(1), class_index))
                    i = end
                    continue
        i += 1
    units.extend(members)


def _width(line: str) -> int:
    return len(line) - len(line.lstrip())


class MaskPlan:
    """Which units of one file to keep: module-level code and class headers always; functions
    as a plan decides (``prefilter.one_file_plan`` for a file checked on its own,
    ``project_plan`` for a run of many)."""

    def __init__(self, text: str, lines: list[str], units: list[Unit] | tuple[Unit, ...] = ()) -> None:
        """``units``: the cut of these lines made before (``project_plan``'s outline); empty: cut now."""
        self.text = text
        self.lines = lines
        self.units = list(units) if units else segment(lines)
        self.keep = [unit.kind in ("module", "class") for unit in self.units]
        self._mention_cache: dict[int, set[str]] = {}

    def unit_text(self, unit: Unit) -> str:
        return "".join(self.lines[unit.first : unit.last])

    @cached_property
    def text_outside_functions(self) -> str:
        """The lines in no function unit: imports, module-level statements and blocks, class
        headers and class-level code (made once: the outline reads it twice)."""
        inside: set[int] = set()
        for index in self.functions():
            inside.update(range(self.units[index].first, self.units[index].last))
        return "".join(line for i, line in enumerate(self.lines) if i not in inside)

    def functions(self) -> list[int]:
        return [index for index, unit in enumerate(self.units) if unit.kind in ("function", "method")]

    def qualified(self, index: int) -> tuple[str | None, str | None]:
        """``(class or None, name)`` of a function unit."""
        unit = self.units[index]
        return (None if unit.class_index is None else self.units[unit.class_index].name, unit.name)

    def matching(self, pattern: re.Pattern, names: set[str]) -> list[int]:
        """The function units where ``pattern`` occurs or that mention one of ``names`` (bound
        outside every function to what the pattern stands for)."""
        return [
            index for index in self.functions()
            if pattern.search(self.unit_text(self.units[index])) or (names and not names.isdisjoint(self.mentions(index)))
        ]

    def named(self, names: set[tuple[str | None, str]]) -> list[int]:
        """The function units named ``(class or None, function)``."""
        return [index for index in self.functions() if self.qualified(index) in names]

    def keep_units(self, indices: list[int]) -> list[int]:
        for index in indices:
            self.keep[index] = True
        return indices

    def keep_callers(self, seeds: list[int]) -> None:
        """Keep, to a fixpoint, every function unit that mentions the name of a seed or of a
        unit reached so: a caller of a function whose summary matters (by name, in this file).
        A unit kept for another reason is followed too: its own summary may matter."""
        reached = set(seeds)
        names = {self.units[index].name for index in seeds}
        while names:
            added = [index for index in self.functions() if index not in reached and not names.isdisjoint(self.mentions(index))]
            reached.update(added)
            names = {self.units[index].name for index in self.keep_units(added)}

    def keep_callees(self, seeds: list[int], mentioned: set[str] | None = None) -> None:
        """Keep, to a fixpoint, every function unit whose name a seed (or a unit reached so)
        mentions: what it may call, whose summaries its findings rest on. ``mentioned``: what
        the seeds' findings may call, when narrower than all they mention."""
        reached = set(seeds)
        frontier = list(seeds)
        while frontier:
            if mentioned is None:
                mentioned = set().union(*(self.mentions(index) for index in frontier))
            frontier = [index for index in self.functions() if index not in reached and self.units[index].name in mentioned]
            reached.update(self.keep_units(frontier))
            mentioned = None

    def mentions(self, index: int) -> set[str]:
        """The identifiers a unit's text holds (code, strings and comments alike: more, never fewer)."""
        found = self._mention_cache.get(index)
        if found is None:
            found = self._mention_cache[index] = set(_IDENTIFIER.findall(self.unit_text(self.units[index])))
        return found

    def close_over_state(self) -> None:
        """Keep the methods that set the ``self.`` attributes kept methods read, to a fixpoint,
        and the state methods (``__init__``) of every class with a kept method and of its base
        classes in this file (whose ``__init__`` a subclass inherits attributes from)."""
        units = self.units
        changed = True
        while changed:
            changed = False
            read: dict[int, set[str]] = {}
            for index, unit in enumerate(units):
                if self.keep[index] and unit.kind == "method":
                    read.setdefault(unit.class_index, set()).update(_SELF_ATTRIBUTE.findall(self.unit_text(unit)))
            in_use = self._with_local_bases(set(read))
            for index, unit in enumerate(units):
                if self.keep[index] or unit.kind != "method" or unit.class_index not in in_use:
                    continue
                if unit.name in _STATE_METHODS or not read.get(unit.class_index, set()).isdisjoint(
                    _SELF_ASSIGNED.findall(self.unit_text(unit))
                ):
                    self.keep[index] = True
                    changed = True

    def _with_local_bases(self, classes: set[int]) -> set[int]:
        """``classes`` (unit indices) and, to a fixpoint, the classes of this file their headers
        name (their bases, and maybe a keyword's value: more, never fewer)."""
        by_name = {unit.name: index for index, unit in enumerate(self.units) if unit.kind == "class"}
        found = set(classes)
        todo = list(classes)
        while todo:
            index = todo.pop()
            for name in _IDENTIFIER.findall(self._class_header(self.units[index])):
                base = by_name.get(name)
                if base is not None and base not in found:
                    found.add(base)
                    todo.append(base)
        return found

    def _class_header(self, unit: Unit) -> str:
        """``class Name(Base, ...):`` of a class unit, over its lines up to the colon."""
        first = _header_index(self.lines, unit.first)
        last = first
        while last + 1 < unit.last and not self.lines[last].rstrip().endswith(":"):
            last += 1
        return "".join(self.lines[first : last + 1]).partition("class")[2]

    def is_masking(self) -> bool:
        return not all(self.keep)

    def masked_text(self) -> str:
        """The text with each masked unit replaced by a ``pass`` that backslashes continue over
        the unit's lines, its last one left blank (line numbers kept).

        Not ``pass`` and blank lines: libcst builds three objects for each blank line (its
        ``EmptyLine``, indent and newline) and none for a continuation, which is whitespace of
        the ``pass``; a vLLM run masks about 600,000 lines, and this way its parse takes 8%
        less time. Nor a string over the lines: its quotes could pair with those of a string
        the cut landed in and parse into something else, where a backslash opens nothing."""
        out = list(self.lines)
        for index, unit in enumerate(self.units):
            if self.keep[index]:
                continue
            first_line = self.lines[unit.first]
            indent = first_line[: _width(first_line)]
            if unit.last - unit.first == 1:
                out[unit.first] = indent + "pass" + _ending(first_line)
                continue
            out[unit.first] = indent + "pass \\" + _ending(first_line)
            for i in range(unit.first + 1, unit.last - 1):
                out[i] = "\\" + _ending(self.lines[i])
            out[unit.last - 1] = _ending(self.lines[unit.last - 1])
        return "".join(out)


def _ending(line: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    if line.endswith(("\n", "\r")):
        return line[-1]
    return ""
