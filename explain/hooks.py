"""Where explain/ listens to dynamo: three seats, one record per frame compile.

Everything explain/ reports is observed at three places every dynamo compile passes
through, whichever backend it uses and whenever its ``torch.compile`` call was made
(before the profiler started or not). Each is a seam of :mod:`pt2kit.seams`, shared
with pt2kit's other tools:

- the **frame seat** (:mod:`pt2kit.seams.convert_frame`, dynamo's ``_compile``): called
  once per attempt to compile a Python frame (a cache miss), with the code object, the live
  frame, the cache entries that just failed and the compile id. Here we learn whether it is
  a recompile (dynamo's own rule, :mod:`pt2kit.seams.cache_size`), check the frame locals
  against *every* guard of every failing entry (:func:`explain.guards.failing_guards`), ask
  dynamo whether the recompile limit refuses the compile, note the user frame that
  triggered it and time it. A resume function's values are named in the user's words
  (:mod:`explain.names`). Afterwards we read what torch itself recorded as the first
  failing guard per entry (:mod:`pt2kit.seams.dynamo_utils`: the same text
  ``guard_fail_fn`` and ``TORCH_LOGS=recompiles`` get) and the guards of the new entry;
- the **graph seat** (:mod:`pt2kit.seams.output_graph`): every captured graph on its
  way to the backend. :func:`explain.graphs.summarize_graph` reads it and we time the
  backend. A compile keeps only the graphs its backend returned: one it raised on (dynamo
  then restarts the analysis, breaks the graph there or fails the frame) was never
  compiled, so a compile counts the graph it installed, once;
- the **break seat** (:mod:`pt2kit.seams.graph_break_log`): where torch logs a graph
  break, holding the ``Unsupported`` exception with its ``gb_type`` and real stack.

Why not only torch's public hooks: ``guard_fail_fn`` is fixed per ``torch.compile`` call
when it is made (so it misses functions compiled before the profiler), and it, the
recompiles log and dynamo's ``guard_failures`` all carry only the first failing guard as
text. ``callback_handler`` start/end callbacks carry only a compile id: no code object,
frame or graph; torch skips them for compiles nested in another compile, and a refused
compile (recompile limit) never reaches them. The frame seat sees all of that, and we
still report torch's own strings next to ours.

explain/ sits on the seats while at least one listener exists and leaves them with the
last one (each seat leaves torch when nobody else observes it either), so nothing of this
runs when explain/ is idle. They only run on cache misses: a call that hits dynamo's cache
never enters Python code of ours, which is why an armed profiler costs nothing in steady
state (``benchmarks/bench_explain.py``).

Threads and nesting: dynamo compiles under its global ``compile_lock``, so frame compiles
never interleave across threads; the frame seat keeps nested compiles of one thread on a
thread-local stack, and graph and break events attach to the innermost compile. Listeners
are held in an immutable tuple swapped under a lock, and every listener sees every event.
A thread can also listen *privately* (:func:`privately`): its compiles then go to that one
listener and no other -- ``explain.explain`` uses this so its analysis never shows up in a
user's profiler.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import itertools
import logging
import sys
import threading
import types
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from pt2kit import seams
from pt2kit.seams import (
    cache_size,
    convert_frame,
    dynamo_exc,
    dynamo_utils,
    graph_break_log,
    graph_break_messages,
    guard_code,
    output_graph,
    resume_functions,
)

from .breaks import GraphBreak, UserFrame, graph_break_from_torch, is_internal_frame
from .graphs import GraphSummary, summarize_graph
from .guards import GuardFailure, GuardLine, describe_guards, failing_guards
from .names import PLAIN, FrameNames, frame_names

#: The seams explain/'s listening needs (``seams.require`` checks them outside the tested torch range).
SEAMS = (
    "convert_frame",
    "output_graph",
    "graph_break_log",
    "graph_break_messages",
    "cache_size",
    "dynamo_utils",
    "dynamo_exc",
    "guard_code",
    "guard_text",
    "resume_functions",
)

log = logging.getLogger(__name__)

_sequence = itertools.count()


@dataclasses.dataclass
class PriorEntry:
    """A cached graph of the same code that the triggering call did not fit, and why."""

    compile_id: str
    failures: list[GuardFailure]


@dataclasses.dataclass(frozen=True)
class RecompileLimit:
    """The limit torch refused a compile for, and its value at that moment."""

    limit_type: str
    value: int

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecompileLimit:
        """The limit as a compile record writes it (``dataclasses.asdict``)."""
        return cls(limit_type=data["limit_type"], value=data["value"])


@dataclasses.dataclass(eq=False)
class FrameCompile:
    """One attempt by dynamo to compile a Python frame, as seen from the three seats."""

    sequence: int
    code: types.CodeType
    compile_id: str
    thread: str
    private: bool
    is_recompile: bool
    prior_entries: list[PriorEntry]
    limit: RecompileLimit | None
    triggered_by: UserFrame | None
    started: float
    seconds: float = 0.0
    backend_seconds: float = 0.0
    graphs: list[GraphSummary] = dataclasses.field(default_factory=list)
    """The graphs the backend compiled for this compile (normally one). A graph whose backend raised is not
    among them: dynamo then traces the frame again (a restarted analysis, e.g. to specialize a float the
    backend could not keep symbolic), breaks the graph there, or fails the compile; only what it finally
    compiled is part of the compile, so each compile counts its graph once."""
    breaks: list[GraphBreak] = dataclasses.field(default_factory=list)
    guards: list[GuardLine] = dataclasses.field(default_factory=list)
    torch_reasons: list[str] = dataclasses.field(default_factory=list)
    outcome: str = "running"
    """``compiled`` (a cache entry was installed), ``skipped`` (dynamo gave up on the frame, it
    runs eagerly), ``refused`` (recompile limit: runs eagerly) or ``failed`` (an error)."""
    detail: str | None = None
    _logged: list[tuple[BaseException, int]] = dataclasses.field(default_factory=list, repr=False)
    """The exceptions behind ``breaks`` (and their index) while the compile runs."""
    names: FrameNames = dataclasses.field(default=PLAIN, repr=False)
    """How the user spells the values its guards speak of (a resume function's differ: :mod:`explain.names`)."""
    _in_backend: dict[int, GraphSummary] = dataclasses.field(default_factory=dict, repr=False)
    """Graphs handed to the backend and not yet back (by ``id`` of the graph module)."""

    @property
    def function(self) -> str:
        """The user's function name, also for the resume functions dynamo makes after a break."""
        return resume_functions.user_function(self.code)

    @property
    def resumed_at(self) -> int | None:
        """For a resume function, the line of the graph break it resumes after."""
        return resume_functions.resumed_at(self.code)

    @property
    def filename(self) -> str:
        return self.code.co_filename

    @property
    def firstlineno(self) -> int:
        return self.code.co_firstlineno


class CompileListener(Protocol):
    """Receives each frame compile once it has ended (compiled, skipped, refused or failed)."""

    def frame_compiled(self, frame: FrameCompile) -> None: ...


_registry_lock = threading.Lock()
_listeners: tuple[CompileListener, ...] = ()
_tls = threading.local()


def add_listener(listener: CompileListener) -> None:
    """Deliver every frame compile, on any thread, to ``listener`` until it is removed."""
    global _listeners
    _SEATS.acquire()
    with _registry_lock:
        _listeners = (*_listeners, listener)


def remove_listener(listener: CompileListener) -> None:
    global _listeners
    with _registry_lock:
        index = next(i for i, current in enumerate(_listeners) if current is listener)
        _listeners = _listeners[:index] + _listeners[index + 1 :]
    _SEATS.release()


@contextlib.contextmanager
def listening(listener: CompileListener) -> Iterator[None]:
    """Within the block, ``listener`` receives every frame compile on every thread."""
    add_listener(listener)
    try:
        yield
    finally:
        remove_listener(listener)


@contextlib.contextmanager
def privately(listener: CompileListener) -> Iterator[None]:
    """Within the block, this thread's compiles go to ``listener`` alone, unseen by other listeners."""
    _SEATS.acquire()
    previous = getattr(_tls, "private", None)
    _tls.private = listener
    try:
        yield
    finally:
        _tls.private = previous
        _SEATS.release()


def seats_installed() -> bool:
    """Whether explain/ currently sits on dynamo's seats (it does only while someone listens)."""
    return _SEATS.installed


def _audience() -> tuple[tuple[CompileListener, ...], bool]:
    private = getattr(_tls, "private", None)
    if private is not None:
        return (private,), True
    return _listeners, False


@dataclasses.dataclass
class _Pending:
    """explain/'s part of one compile in progress, kept on the frame seat's entry."""

    frame: FrameCompile
    audience: tuple[CompileListener, ...]
    known_failures: int


_NOTE = "explain"


def current_frame() -> FrameCompile | None:
    """The frame compile in progress on this thread, if explain/ saw it begin."""
    entry = convert_frame.current()
    pending = entry.notes.get(_NOTE) if entry is not None else None
    return pending.frame if pending is not None else None


def code_being_compiled() -> types.CodeType | None:
    """The code object dynamo is tracing on this thread right now, seen by explain/ or not."""
    frame = current_frame()
    return frame.code if frame is not None else convert_frame.code_being_compiled()


# -- the frame seat --------------------------------------------------------------------


def _begin_frame(entry: convert_frame.FrameEntry, private: bool) -> FrameCompile:
    recompile = entry.frame is not None and cache_size.is_recompile(entry.cache_size)
    names = _names_or_plain(entry.code)
    prior: list[PriorEntry] = []
    if recompile:
        f_locals = entry.frame.f_locals
        for cached in map(guard_code.cache_entry, entry.cache_entries):
            prior.append(PriorEntry(cached.compile_id, _failures_or_nothing(cached.guard_manager, f_locals, names)))
    limit = None
    with contextlib.suppress(Exception):
        reached = cache_size.limit_reached(entry.cache_size, entry.torch_compile_id)
        if reached is not None:
            limit = RecompileLimit(*reached)
    return FrameCompile(
        sequence=next(_sequence),
        code=entry.code,
        compile_id=entry.compile_id,
        thread=threading.current_thread().name,
        private=private,
        is_recompile=recompile,
        prior_entries=prior,
        limit=limit,
        triggered_by=_calling_user_frame(),
        started=0.0,
        names=names,
    )


def _names_or_plain(code: types.CodeType) -> FrameNames:
    try:
        return frame_names(code)
    except Exception:
        log.exception("explain: could not name the values of a resume function")
        return PLAIN


def _failures_or_nothing(guard_manager: Any, f_locals: dict[str, object], names: FrameNames) -> list[GuardFailure]:
    try:
        return failing_guards(guard_manager, f_locals, names)
    except Exception:
        log.exception("explain: could not evaluate the guards of a cache entry")
        return []


def _calling_user_frame() -> UserFrame | None:
    """The innermost frame outside torch and pt2kit: the user's call that missed the cache."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and is_internal_frame(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    summary = inspect.getframeinfo(frame, context=1)
    line = summary.code_context[0] if summary.code_context else ""
    return UserFrame(summary.filename, summary.lineno, frame.f_code.co_name, line.strip())


def _record_result(frame: FrameCompile, entry: convert_frame.FrameEntry) -> None:
    if not entry.installed:
        frame.outcome, frame.detail = "skipped", entry.skip_reason
        return
    frame.outcome = "compiled"
    try:
        frame.guards = describe_guards(entry.guard_manager, frame.names)
    except Exception:
        log.exception("explain: could not read the guards of a compiled frame")


def _record_failure(frame: FrameCompile, exc: BaseException) -> None:
    if frame.limit is not None and dynamo_exc.is_recompile_limit_error(exc):
        frame.outcome = "refused"
        frame.detail = f"{frame.limit.limit_type} ({frame.limit.value}) reached"
        return
    if not dynamo_exc.is_graph_break_error(exc):
        first_line = next(iter(str(exc).splitlines()), "")
        frame.outcome, frame.detail = "failed", f"{type(exc).__name__}: {first_line}"
        return
    # Dynamo gave up on the whole frame; torch catches this and runs the frame eagerly.
    frame.outcome = "skipped"
    frame.detail = graph_break_messages.break_type(exc)
    for logged, index in frame._logged:
        if logged is exc:
            frame.breaks[index] = dataclasses.replace(frame.breaks[index], frame_skipped=True)
            return
    with contextlib.suppress(Exception):
        frame.breaks.append(dataclasses.replace(graph_break_from_torch(exc, frame.compile_id), frame_skipped=True))


# -- the three seats -------------------------------------------------------------------


class _Seats:
    """explain/'s observer at the three seats; on them while anyone listens, off them after."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0

    @property
    def installed(self) -> bool:
        return self._users > 0

    def acquire(self) -> None:
        seams.require("explain", *SEAMS)
        with self._lock:
            if self._users == 0:
                convert_frame.add_observer(self)
                output_graph.add_observer(self)
                graph_break_log.add_observer(self)
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                graph_break_log.remove_observer(self)
                output_graph.remove_observer(self)
                convert_frame.remove_observer(self)

    # the frame seat (pt2kit.seams.convert_frame.FrameObserver)

    def entering(self, entry: convert_frame.FrameEntry) -> None:
        audience, private = _audience()
        if not audience:
            return None
        try:
            frame = _begin_frame(entry, private)
            entry.notes[_NOTE] = _Pending(frame, audience, dynamo_utils.guard_failure_count(entry.code))
        except Exception:  # never let explain/ break the user's compile
            log.exception("explain: could not record a dynamo compile")
        return None

    def failed(self, entry: convert_frame.FrameEntry, exc: BaseException) -> None:
        pending = entry.notes.pop(_NOTE, None)
        if pending is not None:
            _record_failure(pending.frame, exc)
            self._ended(entry, pending)

    def compiled(self, entry: convert_frame.FrameEntry) -> None:
        pending = entry.notes.pop(_NOTE, None)
        if pending is not None:
            _record_result(pending.frame, entry)
            self._ended(entry, pending)

    def _ended(self, entry: convert_frame.FrameEntry, pending: _Pending) -> None:
        frame = pending.frame
        frame.started, frame.seconds = entry.started, entry.seconds
        frame.torch_reasons = dynamo_utils.guard_failures_since(frame.code, pending.known_failures)
        frame._logged.clear()  # exceptions hold frames alive
        frame._in_backend.clear()
        for listener in pending.audience:
            try:
                listener.frame_compiled(frame)
            except Exception:
                log.exception("explain: a compile listener failed")

    # the graph seat (pt2kit.seams.output_graph.GraphObserver)

    def graph_captured(self, gm: Any) -> None:
        frame = current_frame()
        if frame is None:
            return
        try:
            frame._in_backend[id(gm)] = summarize_graph(gm)
        except Exception:
            log.exception("explain: could not summarize a captured graph")

    def backend_done(self, gm: Any, seconds: float, error: BaseException | None) -> None:
        frame = current_frame()
        if frame is None:
            return
        frame.backend_seconds += seconds  # time spent is spent, also on a graph dynamo then discards
        summary = frame._in_backend.pop(id(gm), None)
        if summary is not None and error is None:
            frame.graphs.append(summary)

    # the break seat (pt2kit.seams.graph_break_log.BreakObserver)

    def graph_break(self, reason: str, exc: BaseException) -> None:
        frame = current_frame()
        if frame is None:
            return
        try:
            brk = graph_break_from_torch(exc, frame.compile_id, raw_reason=reason)
            # a restarted analysis can report the same break again
            if not any(b.key == brk.key for b in frame.breaks):
                frame._logged.append((exc, len(frame.breaks)))
                frame.breaks.append(brk)
        except Exception:
            log.exception("explain: could not record a graph break")


_SEATS = _Seats()

__all__ = [
    "FrameCompile",
    "PriorEntry",
    "RecompileLimit",
    "CompileListener",
    "SEAMS",
    "add_listener",
    "remove_listener",
    "listening",
    "privately",
    "seats_installed",
    "current_frame",
    "code_being_compiled",
]
