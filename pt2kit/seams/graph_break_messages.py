"""Seam: what a graph-break exception says (``torch._dynamo.exc`` and ``torch._dynamo.graph_break_hints``).

Since torch 2.6 every graph break is raised as ``Unsupported`` with a stable ``gb_type``
(the key of ``torch/_dynamo/graph_break_registry.json``) and a message that
``torch._dynamo.exc.format_graph_break_message`` lays out as::

    <gb_type>
      Explanation: ...
      Hint: ...

      Developer debug context: ...

     For more details about this graph break, please visit: <link>

A break found while handling another one (``graph break in loop``) chains both messages
with a marker line. Hints shared by many breaks (report an issue, ...) come from
``graph_break_hints``. The user's frames are the exception's ``real_stack`` below the Python
stack above dynamo, with resume functions collapsed (``collapse_resume_frames``), exactly as
``TORCH_LOGS=graph_breaks`` prints them.

This module reads all of that into :class:`TorchBreakMessage` and plain frames;
explain/ turns them into plain words (:mod:`explain.breaks`), keyed by ``gb_type``:
:func:`registered_break_types` lists the ones torch registers, so a test can tell when a
translated kind of break was renamed.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
import traceback
from . import Seam

SEAM = Seam(
    wraps=(
        "torch._dynamo.exc (format_graph_break_message layout, Unsupported.gb_type/msg/skip_frame/real_stack, "
        "collapse_resume_frames, get_stack_above_dynamo, get_gbid_documentation_link, the graph_break_registry.json map), "
        "torch._dynamo.graph_break_hints"
    ),
    features=("explain",),
)

#: The line torch puts between the message of a break and the one found while handling it.
NESTED_BREAK_MARKER = "*** While handling this graph break, another graph break occurred: ***"

#: The ``gb_type`` torch wraps around any break inside a loop: the whole function is skipped.
LOOP_BREAK = "graph break in loop"

_FIELD = re.compile(r"^  (Explanation|Hint|Developer debug context): ?(.*)$")
_BUILTIN = re.compile(r"builtin operator `(?P<builtin>[^`]+)` with argument types (?P<arg_types>\[.*?\])")


def probe() -> None:
    import inspect

    from torch._dynamo import exc, symbolic_convert

    text = exc.format_graph_break_message("Some break", "the context", "what happened", ["first hint", "second hint"])
    message = TorchBreakMessage.parse(text)
    if (message.gb_type, message.explanation, message.hints, message.context) != (
        "Some break",
        "what happened",
        ("first hint", "second hint"),
        "the context",
    ):
        raise AttributeError(f"format_graph_break_message changed its layout: {message}")
    if "While handling this graph break, another graph break occurred" not in inspect.getsource(exc):
        raise AttributeError("torch no longer chains nested graph-break messages with the marker explain splits on")
    if f'gb_type="{LOOP_BREAK}"' not in inspect.getsource(symbolic_convert):
        raise AttributeError(f"the {LOOP_BREAK!r} graph break is gone")
    parameters = inspect.signature(exc.Unsupported.__init__).parameters
    missing = [name for name in ("msg", "gb_type", "skip_frame", "real_stack") if name not in parameters]
    if missing:
        raise AttributeError(f"Unsupported no longer takes {missing}")
    if not generic_hints():
        raise AttributeError("torch._dynamo.graph_break_hints has no hint lists")
    if LOOP_BREAK not in registered_break_types():
        raise AttributeError("torch's graph-break registry no longer lists the break types explain reads")
    for name in ("collapse_resume_frames", "get_stack_above_dynamo", "get_gbid_documentation_link"):
        if not callable(getattr(exc, name, None)):
            raise AttributeError(f"torch._dynamo.exc.{name} is gone")


@functools.cache
def generic_hints() -> frozenset[str]:
    """The hints torch attaches to many kinds of break (``graph_break_hints``' upper-case lists)."""
    import torch._dynamo.graph_break_hints as graph_break_hints

    return frozenset(
        hint for name in dir(graph_break_hints) if name.isupper() for hint in getattr(graph_break_hints, name)
    )


@dataclasses.dataclass(frozen=True)
class TorchBreakMessage:
    """The fields of one graph break message, as ``format_graph_break_message`` wrote them."""

    gb_type: str
    explanation: str = ""
    hints: tuple[str, ...] = ()
    context: str = ""

    @classmethod
    def parse(cls, text: str) -> TorchBreakMessage:
        lines = text.strip("\n").splitlines()
        if not lines:
            return cls(gb_type="")
        fields: dict[str, list[str]] = {"Explanation": [], "Hint": [], "Developer debug context": []}
        current: list[str] | None = None
        hints: list[list[str]] = []
        for line in lines[1:]:
            if (match := _FIELD.match(line)) is not None:
                current = [match[2]]
                if match[1] == "Hint":
                    hints.append(current)
                else:
                    fields[match[1]] = current
            elif line.startswith(" For more details about this graph break"):
                current = None
            elif current is not None and line.strip():
                current.append(line.strip())
        return cls(
            gb_type=lines[0].strip(),
            explanation=" ".join(fields["Explanation"]).strip(),
            hints=tuple(" ".join(h).strip() for h in hints),
            context=" ".join(fields["Developer debug context"]).strip(),
        )

    @property
    def specific_hints(self) -> tuple[str, ...]:
        """Hints about this break, without torch's boilerplate ("report an issue", ...)."""
        return tuple(h for h in self.hints if h not in generic_hints() and "report an issue" not in h.lower())

    def template_fields(self) -> dict[str, str]:
        """The values torch filled into the explanation of a builtin break (``builtin``, ``arg_types``)."""
        match = _BUILTIN.search(self.explanation)
        return {"builtin": match["builtin"], "arg_types": match["arg_types"]} if match else {}


def text(exc: BaseException) -> str:
    """torch's full message for a graph-break exception."""
    return getattr(exc, "msg", None) or str(exc)


def messages(exc: BaseException) -> list[TorchBreakMessage]:
    """The chained messages of ``exc``: the first is the cause, the last what torch finally did about it."""
    return [TorchBreakMessage.parse(part) for part in text(exc).split(NESTED_BREAK_MARKER)]


def break_type(exc: BaseException) -> str:
    """The exception's ``gb_type``, or its class name when it has none."""
    return getattr(exc, "gb_type", None) or type(exc).__name__


def skips_frame(exc: BaseException) -> bool:
    """Did torch decide to give up on the whole frame (it runs eagerly)?"""
    return bool(getattr(exc, "skip_frame", False))


def user_stack(exc: BaseException) -> list[traceback.FrameSummary]:
    """The stack at the break as torch prints it: above dynamo, then the traced frames, resumes collapsed.

    Call it while dynamo is still tracing: the part above dynamo is read from the live stack.
    """
    from torch._dynamo.exc import collapse_resume_frames, get_stack_above_dynamo

    real_stack = [copy.copy(frame) for frame in (getattr(exc, "real_stack", None) or [])]
    return list(collapse_resume_frames(list(get_stack_above_dynamo()) + real_stack))


def documentation_link(gb_type: str) -> str | None:
    """torch's page for one kind of graph break, if it has one."""
    from torch._dynamo.exc import get_gbid_documentation_link

    return get_gbid_documentation_link(gb_type)


def registered_break_types() -> frozenset[str]:
    """Every ``gb_type`` in torch's graph-break registry (``graph_break_registry.json``), past ones included."""
    from torch._dynamo.exc import _load_gb_type_to_gb_id_map

    return frozenset(_load_gb_type_to_gb_id_map())
