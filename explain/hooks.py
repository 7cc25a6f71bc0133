"""Where explain/ listens to dynamo: three seats, one record per frame compile.

Everything explain/ reports is observed at three places every dynamo compile passes
through, whichever backend it uses and whenever its ``torch.compile`` call was made
(before the profiler started or not):

- the **frame seat**, ``torch._dynamo.convert_frame._compile``: called once per attempt to
  compile a Python frame (a cache miss), with the code object, the live frame locals, the
  cache entries that just failed and the ``compile_id``. Here we learn whether it is a
  recompile (torch's ``is_recompilation``), check the frame locals against *every* guard of
  every failing entry (:func:`explain.guards.failing_guards`), ask torch's
  ``exceeds_recompile_limit`` whether the compile will be refused, note the user frame
  that triggered it and time it. Afterwards we read what torch itself recorded in
  ``torch._dynamo.utils.guard_failures`` (the first failing guard per entry, the same text
  ``guard_fail_fn`` and ``TORCH_LOGS=recompiles`` get) and the guards of the new entry;
- the **graph seat**, ``OutputGraph.call_user_compiler``: every captured graph on its
  way to the backend. :func:`explain.graphs.summarize_graph` reads it and we time the
  backend;
- the **break seat**, ``InstructionTranslatorBase.log_graph_break``: where torch logs a
  graph break, holding the ``Unsupported`` exception with its ``gb_type`` and real stack.

Why not only torch's public hooks: ``guard_fail_fn`` is fixed per ``torch.compile`` call
when it is made (so it misses functions compiled before the profiler), and it, the
``torch._dynamo.guards`` recompiles log and ``guard_failures`` all carry only the first
failing guard as text. ``callback_handler`` start/end callbacks carry only a compile id:
no code object, frame or graph; torch skips them for compiles nested in another compile,
and a refused compile (recompile limit) never reaches them. The frame seat sees all of
that, and we still report torch's own strings next to ours.

Seats are installed while at least one listener exists and removed with the last one, so
nothing of this runs when explain/ is idle. They only run on cache misses: a call that hits
dynamo's cache never enters Python code of ours, which is why an armed profiler costs
nothing in steady state (``benchmarks/bench_explain.py``).

Threads and nesting: dynamo compiles under its global ``compile_lock``, so frame compiles
never interleave across threads; nested compiles on one thread are kept on a thread-local
stack so graph and break events attach to the innermost compile. Listeners are held in an
immutable tuple swapped under a lock, and every listener sees every event. A thread can
also listen *privately* (:func:`privately`): its compiles then go to that one listener and
no other -- ``explain.explain`` uses this so its analysis never shows up in a user's
profiler.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import itertools
import logging
import re
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import torch
import torch._dynamo.config as dynamo_config
import torch._dynamo.convert_frame as convert_frame
import torch._dynamo.utils as dynamo_utils
from torch._dynamo.cache_size import exceeds_recompile_limit, is_recompilation
from torch._dynamo.exc import FailOnRecompileLimitHit, Unsupported, UserError, remove_resume_prefix
from torch._dynamo.output_graph import OutputGraph
from torch._dynamo.symbolic_convert import InstructionTranslatorBase

from .breaks import GraphBreak, UserFrame, graph_break_from_torch, is_internal_frame
from .graphs import GraphSummary, summarize_graph
from .guards import GuardFailure, GuardLine, describe_guards, failing_guards

log = logging.getLogger(__name__)

_RESUMED_AT = re.compile(r"^torch_dynamo_resume_in_.+_at_(\d+)$")
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
    breaks: list[GraphBreak] = dataclasses.field(default_factory=list)
    guards: list[GuardLine] = dataclasses.field(default_factory=list)
    torch_reasons: list[str] = dataclasses.field(default_factory=list)
    outcome: str = "running"
    """``compiled`` (a cache entry was installed), ``skipped`` (dynamo gave up on the frame, it
    runs eagerly), ``refused`` (recompile limit: runs eagerly) or ``failed`` (an error)."""
    detail: str | None = None
    _logged: list[tuple[BaseException, int]] = dataclasses.field(default_factory=list, repr=False)
    """The exceptions behind ``breaks`` (and their index) while the compile runs."""

    @property
    def function(self) -> str:
        """The user's function name, also for the resume functions dynamo makes after a break."""
        return remove_resume_prefix(self.code.co_name)

    @property
    def resumed_at(self) -> int | None:
        """For a resume function, the line of the graph break it resumes after."""
        match = _RESUMED_AT.match(self.code.co_name)
        return int(match[1]) if match else None

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
    with _registry_lock:
        _listeners = (*_listeners, listener)
    _SEATS.acquire()


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
    """Whether the seats are currently in torch (they are only while someone listens)."""
    return _SEATS.installed


def _audience() -> tuple[tuple[CompileListener, ...], bool]:
    private = getattr(_tls, "private", None)
    if private is not None:
        return (private,), True
    return _listeners, False


def _frame_stack() -> list[FrameCompile]:
    stack = getattr(_tls, "frames", None)
    if stack is None:
        stack = _tls.frames = []
    return stack


def current_frame() -> FrameCompile | None:
    """The frame compile in progress on this thread, if the seats saw it begin."""
    stack = _frame_stack()
    return stack[-1] if stack else None


# -- the frame seat --------------------------------------------------------------------


def _wrap_compile(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def _compile(*args: Any, **kwargs: Any) -> Any:
        audience, private = _audience()
        if not audience:
            return original(*args, **kwargs)
        try:
            frame = _begin_frame(signature.bind(*args, **kwargs).arguments, private)
        except Exception:  # never let explain/ break the user's compile
            log.exception("explain: could not record a dynamo compile")
            return original(*args, **kwargs)
        known_failures = len(dynamo_utils.guard_failures.get(frame.code, ()))
        stack = _frame_stack()
        stack.append(frame)
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            _record_failure(frame, exc)
            raise
        else:
            _record_result(frame, result)
            return result
        finally:
            stack.pop()
            frame.seconds = time.perf_counter() - frame.started
            frame.torch_reasons = list(dynamo_utils.guard_failures.get(frame.code, [])[known_failures:])
            frame._logged.clear()  # exceptions hold frames alive
            for listener in audience:
                try:
                    listener.frame_compiled(frame)
                except Exception:
                    log.exception("explain: a compile listener failed")

    return _compile


def _begin_frame(arguments: dict[str, Any], private: bool) -> FrameCompile:
    code: types.CodeType = arguments["code"]
    compile_id = arguments["compile_id"]
    cache_size = arguments["cache_size"]
    frame = arguments.get("frame")
    recompile = frame is not None and is_recompilation(cache_size)
    prior: list[PriorEntry] = []
    if recompile:
        f_locals = frame.f_locals
        entries = arguments.get("cache_entries_for_reasons") or arguments.get("cache_entries") or []
        for entry in entries:
            prior.append(PriorEntry(str(entry.compile_id), _failures_or_nothing(entry.guard_manager, f_locals)))
    limit = None
    with contextlib.suppress(Exception):
        # The per-call ``torch.compile(recompile_limit=...)`` is patched into the config
        # around this very call, so the config read here is the limit that applies.
        exceeded, limit_type = exceeds_recompile_limit(cache_size, compile_id)
        if exceeded:
            limit = RecompileLimit(limit_type, int(getattr(dynamo_config, limit_type)))
    return FrameCompile(
        sequence=next(_sequence),
        code=code,
        compile_id=str(compile_id),
        thread=threading.current_thread().name,
        private=private,
        is_recompile=recompile,
        prior_entries=prior,
        limit=limit,
        triggered_by=_calling_user_frame(),
        started=time.perf_counter(),
    )


def _failures_or_nothing(guard_manager: Any, f_locals: dict[str, object]) -> list[GuardFailure]:
    try:
        return failing_guards(guard_manager, f_locals)
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


def _record_result(frame: FrameCompile, result: Any) -> None:
    guarded = getattr(result, "guarded_code", None)
    if guarded is None:
        frame.outcome, frame.detail = "skipped", getattr(result, "skip_reason", None)
        return
    frame.outcome = "compiled"
    try:
        frame.guards = describe_guards(guarded.guard_manager)
    except Exception:
        log.exception("explain: could not read the guards of a compiled frame")


def _record_failure(frame: FrameCompile, exc: BaseException) -> None:
    if frame.limit is not None and isinstance(exc, Unsupported | FailOnRecompileLimitHit):
        frame.outcome = "refused"
        frame.detail = f"{frame.limit.limit_type} ({frame.limit.value}) reached"
        return
    if not isinstance(exc, Unsupported | UserError):
        first_line = next(iter(str(exc).splitlines()), "")
        frame.outcome, frame.detail = "failed", f"{type(exc).__name__}: {first_line}"
        return
    # Dynamo gave up on the whole frame; torch catches this and runs the frame eagerly.
    frame.outcome = "skipped"
    frame.detail = getattr(exc, "gb_type", None) or type(exc).__name__
    for logged, index in frame._logged:
        if logged is exc:
            frame.breaks[index] = dataclasses.replace(frame.breaks[index], frame_skipped=True)
            return
    with contextlib.suppress(Exception):
        frame.breaks.append(dataclasses.replace(graph_break_from_torch(exc, frame.compile_id), frame_skipped=True))


# -- the graph seat --------------------------------------------------------------------


def _wrap_call_user_compiler(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def call_user_compiler(self: OutputGraph, gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        frame = current_frame()
        if frame is None:
            return original(self, gm, example_inputs)
        try:
            frame.graphs.append(summarize_graph(gm))
        except Exception:
            log.exception("explain: could not summarize a captured graph")
        start = time.perf_counter()
        try:
            return original(self, gm, example_inputs)
        finally:
            frame.backend_seconds += time.perf_counter() - start

    return call_user_compiler


# -- the break seat --------------------------------------------------------------------


def _wrap_log_graph_break(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def log_graph_break(self: InstructionTranslatorBase, code_options: Any, reason: str, exc: BaseException) -> Any:
        frame = current_frame()
        if frame is not None and not getattr(exc, "logged", False):
            try:
                brk = graph_break_from_torch(exc, frame.compile_id, raw_reason=reason)
                # a restarted analysis can report the same break again
                if not any(b.key == brk.key for b in frame.breaks):
                    frame._logged.append((exc, len(frame.breaks)))
                    frame.breaks.append(brk)
            except Exception:
                log.exception("explain: could not record a graph break")
        return original(self, code_options, reason, exc)

    return log_graph_break


# -- installing the seats ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Seat:
    owner: Any
    name: str
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]]


class _Seats:
    """Puts the wrappers into torch while anyone listens, and takes them out after."""

    def __init__(self, seats: tuple[_Seat, ...]) -> None:
        self._seats = seats
        self._lock = threading.Lock()
        self._users = 0
        self._installed: list[tuple[_Seat, Any, Any]] = []

    @property
    def installed(self) -> bool:
        return bool(self._installed)

    def acquire(self) -> None:
        with self._lock:
            if self._users == 0:
                for seat in self._seats:
                    original = seat.owner.__dict__[seat.name]
                    wrapper = seat.wrap(original)
                    setattr(seat.owner, seat.name, wrapper)
                    self._installed.append((seat, original, wrapper))
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users > 0:
                return
            for seat, original, wrapper in reversed(self._installed):
                # If someone wrapped our wrapper since, leave the chain alone: with no
                # listeners ours just passes calls through.
                if seat.owner.__dict__.get(seat.name) is wrapper:
                    setattr(seat.owner, seat.name, original)
            self._installed.clear()


_SEATS = _Seats(
    (
        _Seat(convert_frame, "_compile", _wrap_compile),
        _Seat(OutputGraph, "call_user_compiler", _wrap_call_user_compiler),
        _Seat(InstructionTranslatorBase, "log_graph_break", _wrap_log_graph_break),
    )
)

__all__ = [
    "FrameCompile",
    "PriorEntry",
    "RecompileLimit",
    "CompileListener",
    "add_listener",
    "remove_listener",
    "listening",
    "privately",
    "seats_installed",
    "current_frame",
]
