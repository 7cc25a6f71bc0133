"""Snapshots: a compiled frame's inputs and state, taken before anyone knows whether it fails.

A :class:`Snapshot` holds *references* to a frame's arguments, closure and globals, plus
what would be lost by the time a failure is known (RNG state, global state, config,
automatic-dynamic state, the argument tensors' versions). :mod:`replay.recorder` takes
one at every frame dynamo compiles, and describes it only when the frame fails.

A resume function (the rest of ``f`` after a graph break) fails on inputs the compiled
code before the break made: a wrong dtype or value there arrives as an argument, and
the resume function then fails under every backend. So the call of ``f`` that led to it
is snapshotted too (:func:`call_that_resumed`), from ``f``'s live frame up the stack, and
:class:`CallMarks` keeps, per user function, only what that frame cannot give back at
the failure (the RNG and global state at its entry), never a reference to its inputs.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from pt2kit.seams import automatic_dynamic, convert_frame, resume_functions

from . import state

_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08


def argument_names(code: types.CodeType) -> tuple[str, ...]:
    """The names a frame's arguments are bound to on entry (positional, keyword-only, *args, **kwargs)."""
    count = (
        code.co_argcount
        + code.co_kwonlyargcount
        + bool(code.co_flags & _CO_VARARGS)
        + bool(code.co_flags & _CO_VARKEYWORDS)
    )
    return code.co_varnames[:count]


@dataclass
class Snapshot:
    """A frame as it was entered, kept by reference until we know whether it fails."""

    code: types.CodeType
    f_globals: dict[str, Any]
    args: dict[str, Any]
    closure: dict[str, Any]
    compiler_fn: Callable[..., Any]
    one_graph: bool
    compile_id: str
    rng: state.RngState
    global_state: dict[str, Any]
    config: dict[str, dict[str, Any]]
    automatic_dynamic: dict[str, Any]
    versions: dict[str, int]
    taken: str = "frame-entry"
    led_to: str | None = None
    """For the call of a user function whose resume function failed: that resume function's name."""
    notes: list[str] = field(default_factory=list)

    @classmethod
    def at_entry(cls, entry: convert_frame.FrameEntry) -> Snapshot:
        code = entry.code
        args = {name: entry.f_locals[name] for name in argument_names(code) if name in entry.f_locals}
        closure = {}
        for name, cell in zip(code.co_freevars, entry.closure):
            with contextlib.suppress(ValueError):
                closure[name] = cell.cell_contents
        return cls(
            code=code,
            f_globals=entry.f_globals,
            args=args,
            closure=closure,
            compiler_fn=entry.compiler_fn,
            one_graph=entry.one_graph,
            compile_id=entry.compile_id,
            rng=state.RngState.take(),
            global_state=state.global_state(),
            config=state.non_default_config(),
            automatic_dynamic=automatic_dynamic.snapshot(code, entry.closure),
            versions=_versions(args),
        )

    def late(self, frame: types.FrameType) -> Snapshot:
        """The same frame, snapshotted from its live Python frame at a later failing call."""
        f_locals = frame.f_locals
        args = {name: f_locals[name] for name in argument_names(self.code) if name in f_locals}
        closure = {name: f_locals[name] for name in self.code.co_freevars if name in f_locals}
        return Snapshot(
            code=self.code,
            f_globals=frame.f_globals,
            args=args,
            closure=closure,
            compiler_fn=self.compiler_fn,
            one_graph=self.one_graph,
            compile_id=self.compile_id,
            rng=state.RngState.take(),
            global_state=state.global_state(),
            config=self.config,
            automatic_dynamic=self.automatic_dynamic,
            versions=_versions(args),
            taken="at-failure",
            notes=["snapshotted when a later call of the compiled frame failed: RNG state is as that call left it"],
        )


def _versions(args: dict[str, Any]) -> dict[str, int]:
    return {name: value._version for name, value in args.items() if isinstance(value, torch.Tensor)}


@dataclass(frozen=True)
class CallMark:
    """What a user function's frame was entered with, minus its inputs: their identities only."""

    state: Snapshot
    """The entry snapshot with its arguments and closure dropped (no reference to the program's tensors)."""
    identities: dict[str, int]


class CallMarks:
    """Per thread, the last entry of each user function dynamo compiled (resume functions excluded)."""

    def __init__(self) -> None:
        self._tls = threading.local()

    def _marks(self) -> dict[types.CodeType, CallMark]:
        marks = getattr(self._tls, "marks", None)
        if marks is None:
            marks = self._tls.marks = {}
        return marks

    def entered(self, snapshot: Snapshot) -> None:
        if resume_functions.is_resume_function(snapshot.code):
            return
        identities = {name: id(value) for name, value in snapshot.args.items()}
        self._marks()[snapshot.code] = CallMark(replace(snapshot, args={}, closure={}), identities)

    def get(self, code: types.CodeType) -> CallMark | None:
        return self._marks().get(code)


def call_that_resumed(resumed: Snapshot, marks: CallMarks) -> Snapshot | None:
    """The call of the user's function whose resume function ``resumed`` failed, from its live frame.

    None when ``resumed`` is no resume function, the function was compiled before
    recording began, or its frame is not up the stack (its origin forgotten, a failure
    met after the call returned). Taken at the entry when that call is the one dynamo
    last compiled the function on (its inputs are the same objects), else at the
    failure, with a note saying so.
    """
    if not resume_functions.is_resume_function(resumed.code):
        return None
    try:
        origin, _ = resume_functions.origin(resumed.code)
    except (LookupError, ValueError):
        return None
    mark = marks.get(origin)
    frame = live_frame(origin)
    if mark is None or frame is None:
        return None
    at_failure = mark.state.late(frame)  # (mark.state's code is the origin's)
    line = resume_functions.resumed_at(resumed.code)
    note = (
        f"the call of {origin.co_name} whose resume function after the graph break at line {line} failed:"
        " its inputs are the compiled code's before the break, so replaying this call compiles both"
    )
    if mark.identities == {name: id(value) for name, value in at_failure.args.items()}:
        return replace(
            mark.state, f_globals=at_failure.f_globals, args=at_failure.args, closure=at_failure.closure,
            notes=[note], led_to=resumed.code.co_name,
        )  # fmt: skip
    said = "snapshotted from the live frame at the failure: RNG state is as the call left it"
    return replace(at_failure, notes=[note, said], led_to=resumed.code.co_name)


def live_frame(code: types.CodeType) -> types.FrameType | None:
    """The live frame running (dynamo's transformed version of) ``code``, up the stack."""
    frame: types.FrameType | None = sys._getframe(1)
    for _ in range(64):
        if frame is None:
            return None
        if frame.f_code.co_name == code.co_name and frame.f_code.co_filename == code.co_filename:
            return frame
        frame = frame.f_back
    return None
