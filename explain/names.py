"""The user's words for the values a compiled frame's guards speak of.

Guards name values by dynamo's sources: ``L['x']`` is the frame's argument ``x``, and
:func:`pt2kit.seams.guard_text.readable` spells it ``x``. That is the user's name for the
frame of a user's function. A *resume function* (the rest of a function after a graph
break, compiled as a frame of its own) receives other values as arguments:

- ``___stack0``, ``___stack1``...: the values on the interpreter stack at the break, e.g.
  the Python float ``h.abs().max().item()`` returned, before ``scale = ...`` stores it;
- the live locals of the user's function: its own arguments, or values it computed
  before the break (``h = self.fc(x)``);
- bookkeeping of dynamo's own (``__nested_resume_fns``...).

:class:`FrameNames` names each of them the way the user can read it: a stack value by the
expression that computed it, quoted from the source (``h.abs().max().item()``, line 10)
when the instruction that broke the graph is a call on one line of the user's code, else as
the value computed on that line; and it tells values the caller passes (``scope`` ``local``)
from values computed inside the compiled code before the break (``computed``), which a
remedy cannot ask the caller to change. A name of dynamo's own is never shown.
"""

from __future__ import annotations

import dataclasses
import dis
import inspect
import io
import linecache
import re
import tokenize
import types
from collections.abc import Mapping

from pt2kit.seams import guard_text, resume_functions

#: Scopes of a guarded value (:attr:`explain.guards.GuardFailure.scope`).
LOCAL, GLOBAL, OTHER, COMPUTED = "local", "global", "other", "computed"

_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_STORES = ("STORE_FAST", "STORE_DEREF", "DELETE_FAST", "DELETE_DEREF")
_LONGEST = 80


@dataclasses.dataclass(frozen=True)
class Computed:
    """A value the compiled code computed before a graph break and carried over it."""

    name: str
    """How to call it: the user's variable, or the expression that computed it, or the line's value."""
    lineno: int
    """The line of the break (where the value was computed, for a stack value)."""
    expression: bool = False
    """Whether ``name`` is an expression quoted from the source (not a variable's name)."""

    @property
    def label(self) -> str:
        """The name with the line it comes from: ``h.abs().max().item() (line 10)``."""
        return f"{self.name} (line {self.lineno})" if self.expression else self.name


@dataclasses.dataclass(frozen=True)
class FrameNames:
    """How the user spells the values one frame's guards speak of (see the module doc)."""

    computed: Mapping[str, Computed] = dataclasses.field(default_factory=dict)
    """By the frame's own local name (``___stack0``, ``h``): values computed before a graph break."""

    def value(self, source: str) -> tuple[str, str]:
        """The user's name for the value at guard source ``source``, and its scope (see the module constants)."""
        top = guard_text.first_local(source)
        local = guard_text.readable(top) if top else ""
        if top and local in self.computed:
            rest = self.spell(source[len(top) :])
            return (self.computed[local].name + rest, COMPUTED) if rest else (self.computed[local].name, COMPUTED)
        return self.spell(source), guard_text.source_scope(source)

    def label(self, source: str) -> str:
        """:meth:`value`'s name as a failure's text starts: with its line for a stack value."""
        top = guard_text.first_local(source)
        carried = self.computed.get(guard_text.readable(top)) if top and top == source else None
        return carried.label if carried is not None else self.value(source)[0]

    def spell(self, text: str) -> str:
        """Guard code or a source as the user reads it: readable sources, stack values by their expressions."""
        text = guard_text.readable(text)
        if not self.computed:
            return text
        return _IDENTIFIER.sub(lambda m: self._word(m.group(0)), text)

    def _word(self, word: str) -> str:
        found = self.computed.get(word)
        return found.name if found is not None and found.name != word else word


PLAIN = FrameNames()
"""The names of a frame of the user's own function: its arguments are what the guards call them."""


def frame_names(code: types.CodeType) -> FrameNames:
    """The names of the frame of ``code``: :data:`PLAIN`, or a resume function's (see the module doc)."""
    resumed_at = resume_functions.resumed_at(code)
    if resumed_at is None:
        return PLAIN
    point = resume_functions.resume_point(code)
    arguments = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    stack = [name for name in arguments if name.startswith("___stack")]
    computed: dict[str, Computed] = {}
    user = point.code if point is not None and not resume_functions.is_resume_function(point.code) else None
    for index, name in enumerate(stack):
        top = point if point is not None and index == len(stack) - 1 == point.stack - 1 else None
        computed[name] = (_pushed_by_call(top, code.co_filename) if top is not None else None) or Computed(
            f"the value computed on line {resumed_at}", resumed_at
        )
    for name in arguments:
        if name in computed:
            continue
        ours = name.startswith("__") if user is None else name not in _user_names(user)
        if ours:
            computed[name] = Computed(f"a value dynamo carries over the graph break at line {resumed_at}", resumed_at)
        elif user is None or name not in _parameters(user) or _assigned(user, name):
            computed[name] = Computed(name, resumed_at)  # the user's own variable, computed before the break
    return FrameNames(computed)


def _pushed_by_call(point: resume_functions.ResumePoint, filename: str) -> Computed | None:
    """The top stack value at ``point`` as the call expression that pushed it, when the graph broke at a call."""
    previous = None
    for instruction in dis.get_instructions(point.code):
        if instruction.offset >= point.offset:
            break
        previous = instruction
    positions = getattr(previous, "positions", None)
    if previous is None or not previous.opname.startswith("CALL") or positions is None or positions.lineno is None:
        return None
    text = _source_span(filename, positions)
    if not text:
        return None
    return Computed(text, positions.lineno, expression=True)


def _source_span(filename: str, positions: dis.Positions) -> str | None:
    """The source text ``positions`` covers, on one line (column offsets count UTF-8 bytes)."""
    first, start, end = positions.lineno, positions.col_offset, positions.end_col_offset
    if first is None or start is None or end is None:
        return None
    last = positions.end_lineno or first
    lines = [linecache.getline(filename, n).encode() for n in range(first, last + 1)]
    if not all(lines):
        return None
    lines[-1] = lines[-1][:end]
    lines[0] = lines[0][start:]
    text = " ".join(b" ".join(lines).decode(errors="replace").split())
    return text if text and len(text) <= _LONGEST else None


def without_comment(line: str) -> str:
    """A line of source without its trailing comment (as tokenize reads it: a ``#`` in a string stays)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError):
        return line.strip()
    comment = next((token for token in tokens if token.type == tokenize.COMMENT), None)
    return (line[: comment.start[1]] if comment is not None else line).strip()


def _user_names(code: types.CodeType) -> set[str]:
    return {*code.co_varnames, *code.co_cellvars, *code.co_freevars}


def _parameters(code: types.CodeType) -> tuple[str, ...]:
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return code.co_varnames[:count]


def _assigned(code: types.CodeType, name: str) -> bool:
    """Whether ``code`` stores to its own variable ``name`` anywhere (then it may not be what the caller passed)."""
    return any(i.opname in _STORES and i.argval == name for i in dis.get_instructions(code))


__all__ = ["COMPUTED", "GLOBAL", "LOCAL", "OTHER", "PLAIN", "Computed", "FrameNames", "frame_names", "without_comment"]
