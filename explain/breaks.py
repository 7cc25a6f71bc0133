"""Graph breaks in plain words, with what to do about them.

Since torch 2.6 every graph break is raised as ``Unsupported`` with a stable ``gb_type``
(the key of ``torch/_dynamo/graph_break_registry.json``) and a message laid out in
fields: an explanation, hints, a developer debug context
(:mod:`pt2kit.seams.graph_break_messages` reads it into a :class:`TorchBreakMessage`).

What torch *records* is less friendly: ``GraphCompileReason`` (what
``torch._dynamo.explain`` reports) says ``generic_jump TensorVariable()`` for an ``if`` on
a tensor, and ``counters["graph_break"]`` drops that break entirely. So we take the
exception itself where torch logs it (see :mod:`explain.hooks`), read its message, and
translate known ``gb_type`` values through :data:`TRANSLATIONS`: a plain reason and, where one is known, a remedy. Anything
unknown falls back to torch's own explanation and its first specific hint; torch's full
text is always kept as ``raw_reason``.

Locations are the user's: torch's real stack joined to the stack above dynamo and with
resume functions collapsed, exactly as ``TORCH_LOGS=graph_breaks`` prints them, minus
torch's and pt2kit's own frames.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pt2kit.script import is_internal_file, is_launcher_file
from pt2kit.seams import graph_break_messages
from pt2kit.seams.graph_break_messages import LOOP_BREAK, TorchBreakMessage


@dataclasses.dataclass(frozen=True)
class UserFrame:
    """One frame of the user's code: where, in which function, and the source line."""

    filename: str
    lineno: int
    function: str
    line: str

    @classmethod
    def from_summary(cls, frame: traceback.FrameSummary) -> UserFrame:
        return cls(frame.filename, frame.lineno or 0, frame.name, (frame.line or "").strip())

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.function}"

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UserFrame:
        """The frame :meth:`to_dict` wrote (every field: it reads back as an equal frame)."""
        return cls(filename=data["filename"], lineno=data["lineno"], function=data["function"], line=data["line"])


def is_internal_frame(filename: str) -> bool:
    """Frames of torch and of pt2kit itself, which no user wants to see in a report."""
    return is_internal_file(filename)


def user_frames(stack: Iterable[traceback.FrameSummary]) -> tuple[UserFrame, ...]:
    """The user's part of a stack: what runs below pt2kit's launcher, without torch's frames.

    Frames above the launcher (``click``, ``pytest``, whoever called ``explain.explain``)
    are not part of the code being explained.
    """
    frames = [frame for frame in stack if frame.filename]
    start = max((i + 1 for i, frame in enumerate(frames) if is_launcher_file(frame.filename)), default=0)
    return tuple(UserFrame.from_summary(frame) for frame in frames[start:] if not is_internal_frame(frame.filename))


@dataclasses.dataclass(frozen=True)
class Translation:
    """Plain words, and a remedy where a known one exists, for one kind of graph break."""

    gb_type: str
    reason: str
    remedy: str | None
    applies: Callable[[TorchBreakMessage], bool] = lambda message: True


def _calls_builtin(name: str) -> Callable[[TorchBreakMessage], bool]:
    return lambda message: message.template_fields().get("builtin") == name


TRANSLATIONS: tuple[Translation, ...] = (
    Translation(
        "Failed to trace builtin operator",
        "`print()` does Python I/O, which a graph cannot hold, so the graph ends here",
        "Remove the print or move it out of the compiled function; to keep it, add `print` to "
        "`torch._dynamo.config.reorderable_logging_functions` and dynamo replays it after the graph.",
        _calls_builtin("print"),
    ),
    Translation(
        "Failed to trace builtin operator",
        "The Python builtin `{builtin}` is not supported by dynamo for arguments of types {arg_types}",
        "Use a torch operation instead of `{builtin}`, or call it outside the compiled function "
        "(or inside a function decorated with `torch.compiler.disable`).",
    ),
    Translation(
        "Data-dependent branching",
        "An `if`/`while` tests the value of a tensor; the graph cannot know which branch runs "
        "until the tensor is computed",
        "Make the code branchless with `torch.where` (e.g. `x = torch.where(cond, a, b)`), or put both "
        "branches in `torch.cond`. Branching on shapes or Python values does not break the graph.",
    ),
    Translation(
        "Unsupported Tensor.item() call with capture_scalar_outputs=False",
        "`.item()` turns a tensor into a Python number, which takes it out of the graph",
        "Keep the value as a 0-d tensor (use it in tensor ops directly), or set "
        "`torch._dynamo.config.capture_scalar_outputs = True` to trace `.item()` into the graph.",
    ),
    Translation(
        "Call to `torch._dynamo.graph_break()`",
        "An explicit `torch._dynamo.graph_break()` call",
        "Remove the call if the break is not intended.",
    ),
    Translation(
        "Skip calling `torch.compiler.disable()`d function",
        "Calls a function wrapped in `torch.compiler.disable`; it always runs eagerly, between graphs",
        "Drop the `disable` if the function can be traced, or call it at the edge of the compiled code.",
    ),
    Translation(
        "Attempted to call function marked as skipped",
        "Calls a function dynamo does not trace (it is skipped, or lives in a module dynamo skips)",
        "Call it outside the compiled function, or replace it with torch operations.",
    ),
    Translation(
        "Dynamic shape operator",
        "Calls an operator whose output shape depends on tensor values (e.g. `nonzero`, boolean masking)",
        "Set `torch._dynamo.config.capture_dynamic_output_shape_ops = True`, or use a fixed-shape "
        "alternative such as `torch.where`.",
    ),
    Translation(
        "Attempt to trace generator",
        "The compiled function is a generator, which dynamo cannot compile directly",
        "Compile a normal function that consumes the generator instead.",
    ),
)


def translate(message: TorchBreakMessage) -> tuple[str, str | None]:
    """The plain reason and the remedy (``None`` if no clear one) for one torch message."""
    fields = message.template_fields()
    for translation in TRANSLATIONS:
        if translation.gb_type == message.gb_type and translation.applies(message):
            remedy = translation.remedy.format(**fields) if translation.remedy else None
            return translation.reason.format(**fields), remedy
    explanation = message.explanation.rstrip(".")
    reason = f"{message.gb_type}: {explanation}" if explanation else message.gb_type
    hints = message.specific_hints
    return reason, hints[0] if hints else None


@dataclasses.dataclass(frozen=True)
class GraphBreak:
    """One place where graphs break: where in the user's code, why in plain words, what to do, torch's text.

    The same line can break more than one graph: a ``print`` in a helper first breaks the
    caller's graph (dynamo cannot resume inside an inlined call), then the helper's own
    when dynamo compiles the helper as a frame of its own. ``compile_ids`` lists each
    compile that broke here; :func:`merge_breaks` folds such repeats into one entry.
    """

    compile_ids: tuple[str, ...]
    gb_type: str
    cause: str
    reason: str
    remedy: str | None
    raw_reason: str
    doc_url: str | None
    frame_skipped: bool
    user_stack: tuple[UserFrame, ...]

    @property
    def key(self) -> tuple[object, ...]:
        """What makes two breaks the same place: the line and torch's break type."""
        return (self.filename, self.lineno, self.gb_type, self.cause)

    @property
    def location(self) -> UserFrame | None:
        """The innermost user frame: the line that broke the graph."""
        return self.user_stack[-1] if self.user_stack else None

    @property
    def filename(self) -> str | None:
        return self.location.filename if self.location else None

    @property
    def lineno(self) -> int | None:
        return self.location.lineno if self.location else None

    def to_dict(self) -> dict[str, object]:
        location = self.location
        return {
            "compile_ids": list(self.compile_ids),
            "reason": self.reason,
            "remedy": self.remedy,
            "filename": location.filename if location else None,
            "lineno": location.lineno if location else None,
            "function": location.function if location else None,
            "source": location.line if location else None,
            "gb_type": self.gb_type,
            "cause": self.cause,
            "frame_skipped": self.frame_skipped,
            "raw_reason": self.raw_reason,
            "doc_url": self.doc_url,
            "user_stack": [frame.to_dict() for frame in self.user_stack],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GraphBreak:
        """The break :meth:`to_dict` wrote. Its location (``filename``, ``lineno``, ``function``, ``source``)
        is the last frame of ``user_stack`` and is read from there; every field is in the JSON, so a break
        read back equals the one written."""
        return cls(
            compile_ids=tuple(data["compile_ids"]),
            gb_type=data["gb_type"],
            cause=data["cause"],
            reason=data["reason"],
            remedy=data["remedy"],
            raw_reason=data["raw_reason"],
            doc_url=data["doc_url"],
            frame_skipped=data["frame_skipped"],
            user_stack=tuple(UserFrame.from_dict(frame) for frame in data["user_stack"]),
        )


def graph_break_from_torch(exc: BaseException, compile_id: str, raw_reason: str | None = None) -> GraphBreak:
    """Build a :class:`GraphBreak` from the exception dynamo broke the graph (or gave up) with.

    Call it while dynamo is still tracing: the user stack above dynamo is read from the
    live Python stack, as torch's own graph-break log does.
    """
    text = graph_break_messages.text(exc)
    gb_type = graph_break_messages.break_type(exc)
    # torch chains a break found while handling another ("graph break in loop"): the first
    # message is the cause, the last is what torch finally did about it.
    parts = graph_break_messages.messages(exc)
    cause, outcome = parts[0], parts[-1]
    reason, remedy = translate(cause)
    frame_skipped = graph_break_messages.skips_frame(exc) or outcome.gb_type == LOOP_BREAK
    if outcome.gb_type == LOOP_BREAK:
        reason += "; it happens inside a loop, so dynamo gave up on the whole function and runs it eagerly"
        remedy = (remedy + " " if remedy else "") + "Or move the loop body that breaks into its own function."
    stack = graph_break_messages.user_stack(exc)
    return GraphBreak(
        compile_ids=(compile_id,),
        gb_type=gb_type,
        cause=cause.gb_type or gb_type,
        reason=reason,
        remedy=remedy,
        raw_reason=raw_reason if raw_reason is not None else text,
        doc_url=graph_break_messages.documentation_link(cause.gb_type) if cause.gb_type else None,
        frame_skipped=frame_skipped,
        user_stack=user_frames(stack),
    )


def merge_breaks(breaks: Iterable[GraphBreak]) -> list[GraphBreak]:
    """One entry per place (:attr:`GraphBreak.key`), in order of first occurrence."""
    merged: dict[tuple[object, ...], GraphBreak] = {}
    for brk in breaks:
        seen = merged.get(brk.key)
        merged[brk.key] = (
            brk
            if seen is None
            else dataclasses.replace(
                seen,
                compile_ids=seen.compile_ids + tuple(c for c in brk.compile_ids if c not in seen.compile_ids),
                frame_skipped=seen.frame_skipped or brk.frame_skipped,
            )
        )
    return list(merged.values())


__all__ = [
    "merge_breaks",
    "GraphBreak",
    "UserFrame",
    "TorchBreakMessage",
    "Translation",
    "TRANSLATIONS",
    "LOOP_BREAK",
    "translate",
    "graph_break_from_torch",
    "user_frames",
    "is_internal_frame",
]
