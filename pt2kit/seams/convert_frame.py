"""Seam: ``torch._dynamo.convert_frame._compile``, where dynamo compiles one Python frame.

Every frame dynamo decides to compile (a cache miss: the first call, a recompile, a
resume function after a graph break) reaches ``_compile`` from dynamo's eval-frame
callback *before the frame runs*, with its code object, the live ``f_locals`` (the
arguments as the frame was entered), ``f_globals``, the closure cells, the backend
(``compiler_fn``), ``one_graph`` (``fullgraph=True``) and the compile id. Errors of
tracing and of the backend's compile step come out of it; dynamo then decides whether
the user sees them (:func:`skipped_softly`).

pt2kit's replay recorder, guard validator and explain/'s listeners take this seat
(:func:`frame_compiles`). It is looked up at call time, so it sees functions that were
wrapped by ``torch.compile`` before it was installed; and it runs only on cache misses, so
a call that hits dynamo's cache never reaches it. It is in torch only while someone
observes: the last observer to leave takes it out again (unless something wrapped it
since, in which case it stays in that chain and passes calls through). We wrap ``_compile`` and not the callback classes around it on purpose:
``ConvertFrameAssert.__call__`` walks the Python stack back through
``torch/_dynamo/convert_frame.py`` frames to detect ``torch._dynamo.disable(recursive=False)``,
and a wrapper frame of ours above it would hide that caller.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import threading
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import Seam

SEAM = Seam(
    wraps="torch._dynamo.convert_frame._compile, torch._dynamo.convert_frame.register_bytecode_hook",
    features=(
        "replay record",
        "replay.recording",
        "replay_record_enabled switch",
        "validation guards",
        "GuardValidator",
        "explain",
        "RecompileProfiler",
    ),
)

log = logging.getLogger(__name__)

#: Parameters of ``_compile`` the seam reads by name.
PARAMETERS = (
    "code",
    "globals",
    "locals",
    "builtins",
    "closure",
    "compiler_fn",
    "one_graph",
    "export",
    "frame_state",
    "compile_id",
    "convert_frame_box",
    "frame",
    "cache_size",
)

#: How ``_compile`` receives the code's cache entries: torch 2.13 on passes lists (the entries of
#: this compile's region, and those recompile reasons are read from) beside ``cache_entry``;
#: torch 2.11 and 2.12 pass only the head of one linked list (``cache_entry``, each entry's ``next``).
CACHE_ENTRY_PARAMETERS = (("cache_entries", "cache_entries_for_reasons"), ("cache_entry",))


def probe() -> None:
    import torch._dynamo.convert_frame as convert_frame
    import torch._dynamo.eval_frame as eval_frame

    parameters = inspect.signature(convert_frame._compile).parameters
    missing = [p for p in PARAMETERS if p not in parameters]
    if not any(all(p in parameters for p in names) for names in CACHE_ENTRY_PARAMETERS):
        missing.append(" or ".join("+".join(names) for names in CACHE_ENTRY_PARAMETERS))
    if missing:
        raise AttributeError(f"convert_frame._compile no longer takes {missing}")
    if not callable(getattr(convert_frame, "register_bytecode_hook", None)):
        raise AttributeError("convert_frame.register_bytecode_hook is gone")
    from torch._dynamo.exc import remove_resume_prefix  # noqa: F401

    soft_failures()
    for name in ("innermost_backend", "innermost_fn"):
        if not callable(getattr(eval_frame, name, None)):
            raise AttributeError(f"eval_frame.{name} is gone")
    from torch._dynamo.symbolic_convert import InstructionTranslatorBase

    if not all(f"self.{name} =" in inspect.getsource(InstructionTranslatorBase.__init__) for name in ("one_graph", "error_on_graph_break")):
        raise AttributeError("InstructionTranslatorBase no longer sets one_graph and error_on_graph_break")
    from torch.fx._lazy_graph_module import _LazyGraphModule

    if not callable(getattr(_LazyGraphModule, "force_recompile", None)):
        raise AttributeError("_LazyGraphModule.force_recompile is gone")


@dataclass
class FrameEntry:
    """One frame as dynamo is about to compile it (arguments of ``_compile``)."""

    code: types.CodeType
    f_globals: dict[str, Any]
    f_locals: dict[str, Any]
    builtins: dict[str, Any]
    closure: tuple[types.CellType, ...]
    compiler_fn: Callable[..., Any]
    one_graph: bool
    export: bool
    compile_id: str
    box: Any = field(repr=False, default=None)
    contexts: list[Any] = field(default_factory=list, repr=False)
    """Context managers an observer wants entered around this one compile."""
    started: float = 0.0
    seconds: float = 0.0
    """How long ``_compile`` took (set before observers hear ``failed``/``compiled``)."""
    result: Any = field(repr=False, default=None)
    """What ``_compile`` returned (its ``guarded_code`` is the entry dynamo installs)."""
    out_code: types.CodeType | None = field(repr=False, default=None)
    """The transformed code (from the bytecode hook), also when the compile then failed."""
    frame: Any = field(repr=False, default=None)
    """The live frame at a cache miss (None when dynamo compiles without one)."""
    cache_size: Any = field(repr=False, default=None)
    """dynamo's count of the code's cache entries (read it through :mod:`pt2kit.seams.cache_size`)."""
    cache_entries: tuple[Any, ...] = field(repr=False, default=())
    """The cache entries the frame's locals just failed (those dynamo gives its recompile reasons for)."""
    torch_compile_id: Any = field(repr=False, default=None)
    """dynamo's ``CompileId`` object (``compile_id`` is its text)."""
    notes: dict[str, Any] = field(default_factory=dict, repr=False)
    """Per-compile state an observer keeps between ``entering`` and ``compiled``/``failed``, under a key of its own."""

    @property
    def guard_manager(self) -> Any:
        """The guard manager of the cache entry dynamo installs, or None (nothing installed)."""
        guarded = getattr(self.result, "guarded_code", None)
        return guarded.guard_manager if guarded is not None else None

    @property
    def installed(self) -> bool:
        return self.guard_manager is not None

    @property
    def skip_reason(self) -> str | None:
        """Why dynamo returned without compiling the frame (it then runs eagerly), if it said."""
        return getattr(self.result, "skip_reason", None)

    @property
    def function(self) -> str:
        """The user's function name, also for the resume functions dynamo makes after a graph break."""
        from torch._dynamo.exc import remove_resume_prefix

        return remove_resume_prefix(self.code.co_name) or self.code.co_name  # (2.11, 2.12: None for other code)

    @property
    def error_on_graph_break(self) -> bool:
        """Whether a graph break is an error for this frame (``fullgraph=True`` or
        ``torch._dynamo.error_on_graph_break(True)``); known once ``_compile`` has ended."""
        return bool(self.one_graph or getattr(self.box, "error_on_graph_break", False))


class FrameObserver(Protocol):
    """Told about every frame compile while installed (see :func:`frame_compiles`)."""

    def entering(self, entry: FrameEntry) -> Callable[..., Any] | None:
        """Called before dynamo compiles the frame; may return a replacement backend."""

    def failed(self, entry: FrameEntry, exc: BaseException) -> None:
        """Tracing or the backend's compile step raised ``exc`` (it is re-raised)."""

    def compiled(self, entry: FrameEntry) -> None:
        """The compile ended without an error."""


_lock = threading.Lock()
_observers: tuple[FrameObserver, ...] = ()
_installed: dict[str, Any] = {}
_tls = threading.local()


def _stack() -> list[FrameEntry]:
    stack = getattr(_tls, "stack", None)
    if stack is None:
        stack = _tls.stack = []
    return stack


def current() -> FrameEntry | None:
    """The frame compile in progress on this thread (while observers are installed), if any."""
    stack = _stack()
    return stack[-1] if stack else None


def _cache_entries(arguments: dict[str, Any]) -> tuple[Any, ...]:
    """The code's cache entries, most recently used first, as ``_compile`` received them."""
    if "cache_entries" in arguments or "cache_entries_for_reasons" in arguments:
        return tuple(arguments.get("cache_entries_for_reasons") or arguments.get("cache_entries") or ())
    entries, entry = [], arguments.get("cache_entry")  # torch 2.11 and 2.12: one linked list
    while entry is not None:
        entries.append(entry)
        entry = entry.next
    return tuple(entries)


def _bytecode_hook(code: types.CodeType, new_code: types.CodeType) -> None:
    entry = current()
    if entry is not None and entry.code is code:
        entry.out_code = new_code


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def _compile(*args: Any, **kwargs: Any) -> Any:
        observers = _observers
        if not observers:
            return original(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
            arguments = bound.arguments
            entry = FrameEntry(
                code=arguments["code"],
                f_globals=arguments["globals"],
                f_locals=arguments["locals"],
                builtins=arguments["builtins"],
                closure=tuple(arguments["closure"] or ()),
                compiler_fn=arguments["compiler_fn"],
                one_graph=bool(arguments["one_graph"]),
                export=bool(arguments.get("export", False)),
                compile_id=str(arguments.get("compile_id")),
                box=arguments.get("convert_frame_box"),
                frame=arguments.get("frame"),
                cache_size=arguments.get("cache_size"),
                cache_entries=_cache_entries(arguments),
                torch_compile_id=arguments.get("compile_id"),
            )
            for observer in observers:
                replacement = observer.entering(entry)
                if replacement is not None:
                    entry.compiler_fn = replacement
            arguments["compiler_fn"] = entry.compiler_fn
            args, kwargs = bound.args, bound.kwargs
        except Exception:  # never let an observer break the user's compile
            log.exception("pt2kit: a frame observer failed on entry")
            return original(*args, **kwargs)
        frames = _stack()
        frames.append(entry)
        entry.started = time.perf_counter()
        try:
            with contextlib.ExitStack() as stack:
                for context in entry.contexts:
                    stack.enter_context(context)
                result = original(*args, **kwargs)
        except BaseException as exc:
            entry.seconds = time.perf_counter() - entry.started
            frames.pop()
            for observer in observers:
                try:
                    observer.failed(entry, exc)
                except Exception:
                    log.exception("pt2kit: a frame observer failed")
            raise
        entry.seconds = time.perf_counter() - entry.started
        entry.result = result
        frames.pop()
        for observer in observers:
            try:
                observer.compiled(entry)
            except Exception:
                log.exception("pt2kit: a frame observer failed")
        return result

    return _compile


def add_observer(observer: FrameObserver) -> None:
    """Install the seat (once) and tell ``observer`` about every frame compile."""
    global _observers
    import torch._dynamo.convert_frame as convert_frame

    with _lock:
        if not _installed:
            original = convert_frame._compile
            wrapper = _wrap(original)
            convert_frame._compile = wrapper
            hook = convert_frame.register_bytecode_hook(_bytecode_hook)
            _installed.update(original=original, wrapper=wrapper, hook=hook)
        _observers = (*_observers, observer)


def remove_observer(observer: FrameObserver) -> None:
    """Stop telling ``observer``; with the last observer gone the seat leaves torch.

    If something wrapped ``_compile`` over ours since, the seat stays in that chain and
    idles (one tuple check per compile) until an observer comes back.
    """
    global _observers
    import torch._dynamo.convert_frame as convert_frame

    with _lock:
        _observers = tuple(o for o in _observers if o is not observer)
        if not _observers and _installed and convert_frame._compile is _installed["wrapper"]:
            convert_frame._compile = _installed["original"]
            _installed["hook"].remove()
            _installed.clear()


def installed() -> bool:
    """Whether the seat is in torch right now."""
    return bool(_installed)


@contextmanager
def frame_compiles(observer: FrameObserver) -> Iterator[None]:
    """Within the block, ``observer`` sees every frame dynamo compiles, on any thread."""
    add_observer(observer)
    try:
        yield
    finally:
        remove_observer(observer)


def skipped_softly(entry: FrameEntry, exc: BaseException) -> bool:
    """Will dynamo swallow ``exc`` and run the frame eagerly (a frame-level graph break)?

    That is ``ConvertFrame.__call__``'s rule: ``Unsupported`` and ``UserError`` (``Unsupported``
    alone before torch 2.13) are "soft" failures unless graph breaks are errors for this frame (``fullgraph=True``,
    ``error_on_graph_break``) or the error is one dynamo never suppresses. Such a frame
    did not fail: the program runs it without compiling it.
    """
    from torch._dynamo.exc import ResumePrologueTracingError, UncapturedHigherOrderOpError

    if entry.error_on_graph_break or isinstance(exc, (ResumePrologueTracingError, UncapturedHigherOrderOpError)):
        return False
    return isinstance(exc, soft_failures())


#: ``ConvertFrame.__call__``'s line deciding which errors fall back to eager, and the
#: exception names it lists: torch 2.13 on, then torch 2.11 and 2.12.
SOFT_FAILURE_RULES = (
    ("soft_fail = isinstance(e, (Unsupported, UserError))", ("Unsupported", "UserError")),
    ("soft_fail = isinstance(e, Unsupported)", ("Unsupported",)),
)


@functools.cache
def soft_failures() -> tuple[type[BaseException], ...]:
    """The exception types dynamo's frame callback treats as soft failures in this torch."""
    import torch._dynamo.convert_frame as convert_frame
    import torch._dynamo.exc as dynamo_exc

    source = inspect.getsource(convert_frame.ConvertFrame.__call__)
    for line, names in SOFT_FAILURE_RULES:
        if line in source:
            return tuple(getattr(dynamo_exc, name) for name in names)
    raise AttributeError("ConvertFrame.__call__ changed how it decides to fall back to eager")


def suppressed(entry: FrameEntry, exc: BaseException) -> bool:
    """Will dynamo swallow this hard error because ``config.suppress_errors`` is on?"""
    import torch._dynamo.config as dynamo_config

    return not entry.one_graph and bool(dynamo_config.suppress_errors) and not skipped_softly(entry, exc)


def innermost_backend(compiler_fn: Callable[..., Any]) -> tuple[Callable[..., Any], str | None]:
    """The backend the user gave ``torch.compile`` behind dynamo's wrappers, and its name if a string named it."""
    from torch._dynamo.eval_frame import innermost_backend as unwrap

    name = None
    node: Any = compiler_fn
    while hasattr(node, "_torchdynamo_orig_backend"):
        name = getattr(node, "_compiler_name", None) or name
        node = node._torchdynamo_orig_backend
    return unwrap(compiler_fn), name if isinstance(name, str) else None


def as_installed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What dynamo actually calls for a compiled graph ``fn`` a backend returned.

    dynamo installs ``disable(innermost_fn(compiled))``, and first turns a lazy graph
    module's ``_lazy_forward`` into its real ``forward``. A wrapper of ours around a
    compiled graph wraps that, or every call pays for a second ``disable`` layer and the
    lazy-recompile check.
    """
    from torch._dynamo.eval_frame import innermost_fn
    from torch.fx._lazy_graph_module import _LazyGraphModule

    fn = innermost_fn(fn)
    module = fn if isinstance(fn, _LazyGraphModule) else getattr(fn, "__self__", None)
    if isinstance(module, _LazyGraphModule) and (fn is module or getattr(fn, "__name__", "") == "_lazy_forward"):
        _LazyGraphModule.force_recompile(module)
        return module if fn is module else module.forward
    return fn


def wrap_backend(compiler_fn: Callable[..., Any], wrapper: Callable[..., Any]) -> Callable[..., Any]:
    """Make ``wrapper`` stand in for ``compiler_fn`` without dynamo noticing.

    dynamo names backends in its error messages by ``__name__`` and finds the user's
    backend behind wrappers through ``_torchdynamo_orig_backend``; both are carried over.
    """
    functools.update_wrapper(
        wrapper, compiler_fn, assigned=("__module__", "__name__", "__qualname__", "__doc__"), updated=()
    )
    for attribute in ("__name__", "compiler_name", "get_compiler_config", "_compiler_name"):
        if hasattr(compiler_fn, attribute):
            try:
                setattr(wrapper, attribute, getattr(compiler_fn, attribute))
            except (AttributeError, TypeError):
                pass
    setattr(wrapper, "_torchdynamo_orig_backend", compiler_fn)
    return wrapper


def failing_compile_locals(exc: BaseException) -> dict[str, Any] | None:
    """``_compile``'s arguments for the frame whose tracing raised ``exc`` (from its traceback).

    ``code``, ``globals``, ``locals`` (the frame's arguments), ``closure`` and ``one_graph``
    (``fullgraph=True``): what the minifier needs to trace a frame dynamo could not
    (``minifier.capture.frames.lift_frame``).
    """
    import traceback

    import torch._dynamo.convert_frame as convert_frame

    # inspect.unwrap: replay/ and explain/ may have wrapped _compile
    compile_code = inspect.unwrap(convert_frame._compile).__code__
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        if frame.f_code is compile_code:
            local = {name: frame.f_locals[name] for name in ("code", "globals", "locals", "closure")}
            return {**local, "one_graph": bool(frame.f_locals.get("one_graph"))}
    return None


def code_being_compiled() -> types.CodeType | None:
    """The code object dynamo is tracing right now (inside a backend call), if any."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        return InstructionTranslator.current_tx().f_code
    except (AttributeError, ImportError):
        return None


def compiling_whole() -> bool:
    """Is dynamo tracing the current frame with every break an error (``fullgraph=True``, ``error_on_graph_break``)?

    Then a backend's failure reaches the program where a plain compile breaks the graph there and runs it
    eagerly (``exceptions_allowed_to_be_fallback``: a fake kernel that reads a value, an output of
    data-dependent shape): a graph compiled again alone must be compiled so too, or it passes.
    """
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        return bool(tx.one_graph or tx.error_on_graph_break)
    except (AttributeError, ImportError):
        return False


def original_callable(fn: Any) -> Any:
    """Undo ``torch.compile``: the user's function or module behind a compiled wrapper."""
    import torch

    if isinstance(fn, torch._dynamo.eval_frame.OptimizedModule):
        return fn._orig_mod
    return getattr(fn, "_torchdynamo_orig_callable", fn)
