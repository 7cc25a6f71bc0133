"""Recording: snapshot every frame dynamo compiles, keep the ones that fail.

A :class:`Recorder` sits at dynamo's frame seat (:mod:`pt2kit.seams.convert_frame`),
which every compiled frame passes *before it runs*: a function's first call, a
recompile, a resume function after a graph break. There it takes a :class:`Snapshot`:
references to the arguments, closure and globals, plus what would be lost by the time a
failure is known (RNG state, global state, config, automatic-dynamic state, the
versions of the argument tensors). That costs microseconds on a cache miss and nothing on
a cache hit, where dynamo never calls into Python.

A frame fails at one of four levels, and each leaves one record (once per function and
failure signature):

- **tracing** and **backend compile**: the exception comes out of ``_compile``. A
  frame-level graph break that dynamo answers by running the frame eagerly is not a
  failure (:func:`~pt2kit.seams.convert_frame.skipped_softly`); an error
  ``suppress_errors`` swallows is recorded, and marked so;
- **compiled run**: the recorder stands in for the backend and wraps the compiled
  function it returns. If the first call (the one that compiled it) raises, the entry
  snapshot is used; a later call that raises is snapshotted from its live frame at that
  moment (``snapshot: at-failure``: RNG state is then as the failed call left it);
- **backward**: a compiled graph's first call hooks its backward (:mod:`replay.backward`),
  and the program's exception is recorded for the frame whose backward it broke off.

Only then is the snapshot *described* (:mod:`replay.values`) and written
(:mod:`replay.records`). Recording never changes what the program does: the original
exception propagates (with a note naming the record), and a recorder bug is logged, not
raised.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import logging
import os
import platform
import sys
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from pt2kit.seams import convert_frame, resume_functions
from pt2kit.signature import signature_of_exception

from . import backward, rebuild, records, state, values
from .snapshot import CallMarks, Snapshot, call_that_resumed, live_frame

log = logging.getLogger(__name__)

#: How many explicit recorders (``replay record``, ``replay.recording()``) are active;
#: torch's ``replay_record_enabled`` switch stands down while one is.
_explicit = 0
_explicit_lock = threading.Lock()


# --------------------------------------------------------------------------- #
# Describing a snapshot
# --------------------------------------------------------------------------- #


def describe(
    snapshot: Snapshot, exc: BaseException, stage: str, *, suppressed: bool = False
) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """The manifest and tensors of a record of ``snapshot`` failing with ``exc`` at ``stage``."""
    from pt2kit.script import is_internal_file

    code = snapshot.code
    module_name = str(snapshot.f_globals.get("__name__", "?"))
    # (a frame of torch's own, a compiled ``optimizer.step``: its module's functions are imported, not copied)
    encoder = values.Encoder(source_modules={} if is_internal_file(code.co_filename) else {module_name: snapshot.f_globals})
    notes = list(snapshot.notes)
    source_code, resume = _source_code(code, encoder)
    function_object = snapshot.f_globals.get(code.co_name)
    reference = (
        values.reference_of(function_object)
        if getattr(function_object, "__code__", None) is source_code and is_internal_file(code.co_filename)
        else None
    )
    code_spec = {"ref": reference} if reference is not None else _source_spec(snapshot, source_code, encoder)
    namespace = encoder.namespace_key(snapshot.f_globals)
    args = {name: encoder.encode(value, name) for name, value in snapshot.args.items()}
    closure = {name: encoder.encode(value, f"closure {name}") for name, value in snapshot.closure.items()}
    encoder.record_globals(snapshot.f_globals, values.global_names(source_code))
    config = _encode_config(snapshot.config, encoder)
    rng = snapshot.rng.describe(encoder)
    encoder.finish()
    notes.extend(_modified_argument_notes(snapshot))
    backend = state.describe_compile_backend(snapshot.compiler_fn)
    failure = signature_of_exception(exc)
    manifest: dict[str, Any] = {
        "format": records.FORMAT,
        "version": records.VERSION,
        "status": "partial" if encoder.unrecordable else "complete",
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "frame": _frame_entry(snapshot, code_spec, resume, namespace, args, closure),
        "snapshot": snapshot.taken,
        "failure": {
            **failure.signature.to_json(),
            "stage": stage,
            "suppressed": suppressed,
            "details": failure.details[:2000],
        },
        "compile": {"backend": backend, "fullgraph": snapshot.one_graph},
        "config": config,
        "global_state": snapshot.global_state,
        "rng": rng,
        "dynamic": {"automatic": snapshot.automatic_dynamic},
        # (read at the failure: a scan of torch's modules)
        "program_state": state.program_changes(encoder.ops, [entry["text"] for entry in encoder.sources]),
        "imports": sorted([name, root] for name, root in encoder.imports.items()),
        "sources": encoder.sources,
        "namespaces": encoder.namespaces,
        "objects": encoder.objects,
        "unrecordable": encoder.unrecordable,
        "notes": notes,
        "tensors": {},
    }
    return manifest, encoder.tensors


def _source_code(code: types.CodeType, encoder: values.Encoder) -> tuple[types.CodeType, dict[str, Any] | None]:
    """The code whose source the record keeps (a resume function's origin, else ``code``) and how to resume it."""
    source_code, resume = code, None
    if resume_functions.is_resume_function(code):
        try:
            source_code, resume = resume_functions.origin(code)
        except (LookupError, ValueError) as e:
            encoder.unrecordable.append({"name": "<code>", "type": "resume function", "reason": str(e)})
    return source_code, resume


def _source_spec(snapshot: Snapshot, source_code: types.CodeType, encoder: values.Encoder) -> dict[str, Any]:
    """The manifest's ``frame.code`` from source: the kept source block, or why there is none."""
    try:
        return {"source": encoder.source_entry(source_code, snapshot.f_globals)}
    except (OSError, TypeError, SyntaxError, IndexError, rebuild.RebuildError) as e:
        unavailable = {"unavailable": str(e)}
        encoder.unrecordable.append(
            {"name": "<code>", "type": "code", "reason": f"no source for {snapshot.code.co_name}: {e}"}
        )
        return unavailable


def _encode_config(config: dict[str, dict[str, Any]], encoder: values.Encoder) -> dict[str, dict[str, Any]]:
    """The manifest's ``config``: each module's non-default settings, encoded."""
    return {
        module: {key: encoder.encode(value, f"config {module}.{key}") for key, value in settings.items()}
        for module, settings in config.items()
    }


def _modified_argument_notes(snapshot: Snapshot) -> list[str]:
    """A note for each tensor argument whose version moved since the snapshot (modified in place)."""
    return [
        f"argument {name} was modified in place between frame entry and the failure; the record holds its later value"
        for name, version in snapshot.versions.items()
        if snapshot.args[name]._version != version
    ]


def _frame_entry(
    snapshot: Snapshot,
    code_spec: dict[str, Any],
    resume: dict[str, Any] | None,
    namespace: str,
    args: dict[str, Any],
    closure: dict[str, Any],
) -> dict[str, Any]:
    """The manifest's ``frame``: which function failed, where it lives, how to get its code back, and its inputs."""
    code = snapshot.code
    return {
        "function": frame_label(snapshot),
        "qualname": getattr(code, "co_qualname", code.co_name),
        "file": code.co_filename,
        "line": code.co_firstlineno,
        "code_name": code.co_name,
        "compile_id": snapshot.compile_id,
        "led_to": snapshot.led_to,
        "code": code_spec,
        "resume": resume,
        "bytecode_sha256": rebuild.bytecode_digest(code),
        "namespace": namespace,
        "args": args,
        "closure": closure,
    }


def frame_label(snapshot: Snapshot) -> str:
    """The function a person would name: ``f`` for f's resume functions, and for torch's
    own wrapper frames (``torch.compile(module)`` compiles one around ``forward``) the
    module or function they wrap."""
    from pt2kit.script import is_internal_file

    name = resume_functions.user_function_name(snapshot.code)
    wrapped = snapshot.closure.get("fn")
    if is_internal_file(snapshot.code.co_filename) and wrapped is not None:
        if isinstance(wrapped, torch.nn.Module):
            return f"{type(wrapped).__name__}.forward"
        return str(getattr(wrapped, "__qualname__", name))
    return name


def failing_stage(exc: BaseException) -> str:
    """``backend compile`` when the backend raised while compiling (Inductor's errors come unwrapped), else ``tracing``."""
    from pt2kit.signature import exception_chain

    if any(type(e).__name__ in ("BackendCompilerFailed", "InductorError") for e in exception_chain(exc)):
        return "backend compile"
    return "tracing"


# --------------------------------------------------------------------------- #
# The recorder
# --------------------------------------------------------------------------- #


class Recorder:
    """Sees every frame dynamo compiles and writes a record for each one that fails.

    ``switch=True`` is the mode of torch's ``replay_record_enabled`` flag (installed at
    start-up by :mod:`replay.autoload`): it does nothing unless the flag is on, and stands
    down while an explicit recorder runs.
    """

    def __init__(self, out: Path | None, *, switch: bool = False, quiet: bool = False) -> None:
        self._out = Path(out) if out is not None else None
        self.switch = switch
        self.quiet = quiet
        self.active = False
        self.records: list[records.Record] = []
        #: ``frame: error`` for each failing frame whose record could not be written (pt2kit's limit, said to the user)
        self.unsaved: list[str] = []
        self.frames_seen = 0
        self._seen: set[tuple[Any, ...]] = set()
        self._tls = threading.local()
        self._lock = threading.Lock()
        #: the frames whose first backward is under way (:meth:`script_failed` records the one that fails)
        self.backward = backward.BackwardWatch()
        #: what each user function was last entered with, for the call that led to a failing resume function
        self.calls = CallMarks()

    @property
    def out(self) -> Path:
        """Where records go (``None`` at construction: ``$TORCHDYNAMO_REPRO_DIR`` when a record is written)."""
        return self._out if self._out is not None else default_out()

    # -- the frame seat ----------------------------------------------------------

    def _stack(self) -> list[Snapshot]:
        stack = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        return stack

    def entering(self, entry: convert_frame.FrameEntry) -> Callable[..., Any] | None:
        if not self.active or entry.export:
            return None
        if self.switch:
            import torch._dynamo.config as dynamo_config

            if not dynamo_config.replay_record_enabled or _explicit:
                return None
        self.frames_seen += 1
        snapshot = Snapshot.at_entry(entry)
        self.calls.entered(snapshot)
        self._stack().append(snapshot)
        # torch's own recorder (needs dill, and crashes on some frames) stays out of frames we record
        entry.contexts.append(_torch_recorder_off())
        return convert_frame.wrap_backend(entry.compiler_fn, self._watching_backend(entry.compiler_fn, snapshot))

    def failed(self, entry: convert_frame.FrameEntry, exc: BaseException) -> None:
        snapshot = self._pop(entry)
        if snapshot is None or convert_frame.skipped_softly(entry, exc):
            return
        self.save_failure(snapshot, exc, failing_stage(exc), suppressed=convert_frame.suppressed(entry, exc))

    def compiled(self, entry: convert_frame.FrameEntry) -> None:
        self._pop(entry)

    def _pop(self, entry: convert_frame.FrameEntry) -> Snapshot | None:
        stack = self._stack()
        if stack and stack[-1].code is entry.code:
            return stack.pop()
        return None

    # -- compiled runs -----------------------------------------------------------

    def _watching_backend(self, compiler_fn: Callable[..., Any], snapshot: Snapshot) -> Callable[..., Any]:
        recorder = self

        def pt2kit_replay_backend(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
            compiled = compiler_fn(gm, example_inputs, **kwargs)
            return recorder._watch(compiled, snapshot) if callable(compiled) else compiled

        return pt2kit_replay_backend

    def _watch(self, compiled: Callable[..., Any], snapshot: Snapshot) -> Callable[..., Any]:
        recorder = self
        first: list[Snapshot | None] = [snapshot]
        # wrap what dynamo would call, so a cache hit pays for our one frame and no more
        inner = convert_frame.as_installed(compiled)

        def pt2kit_replay_watch(*args: Any, **kwargs: Any) -> Any:
            try:
                outputs = inner(*args, **kwargs)
                if first[0] is not None and recorder.active:
                    recorder.backward.watch(args, outputs, first[0])
                return outputs
            except Exception as exc:
                entry_snapshot, first[0] = first[0], None
                if recorder.active:
                    taken = entry_snapshot
                    if taken is None:
                        frame = live_frame(snapshot.code)
                        taken = snapshot.late(frame) if frame is not None else None
                    if taken is not None:
                        recorder.save_failure(taken, exc, "compiled run")
                raise
            finally:
                first[0] = None

        functools.update_wrapper(pt2kit_replay_watch, compiled, updated=())
        return pt2kit_replay_watch

    def script_failed(self, exc: BaseException) -> None:
        """The program raised ``exc``: record the frame whose first backward it broke off, if one did."""
        snapshot = self.backward.broken()
        if snapshot is not None and self.active:
            self.save(snapshot, exc, backward.BACKWARD)

    # -- writing -----------------------------------------------------------------

    def save_failure(self, snapshot: Snapshot, exc: BaseException, stage: str, *, suppressed: bool = False) -> None:
        """Record a frame that failed now; a resume function's failure also records the call that led to it."""
        try:
            call = call_that_resumed(snapshot, self.calls)
        except Exception:  # a recorder bug never hides the program's failure
            log.debug("pt2kit: could not snapshot the call that led to %s", snapshot.code.co_name, exc_info=True)
            call = None
        path = self.save(call, exc, stage, suppressed=suppressed) if call is not None else None
        if path is not None:
            snapshot = replace(
                snapshot,
                notes=[
                    *snapshot.notes,
                    "its inputs are what the compiled code before the graph break made: a backend that passes here"
                    f" may still have made them wrong; {path} replays the whole call",
                ],
            )
        self.save(snapshot, exc, stage, suppressed=suppressed)

    def save(self, snapshot: Snapshot, exc: BaseException, stage: str, *, suppressed: bool = False) -> Path | None:
        """Describe and write one record, and say where; never raises (the user's exception matters more)."""
        try:
            failure = signature_of_exception(exc).signature
            key = (snapshot.code.co_filename, snapshot.code.co_firstlineno, snapshot.code.co_name, failure)
            with self._lock:
                if key in self._seen:
                    return None
                self._seen.add(key)
            manifest, tensors = describe(snapshot, exc, stage, suppressed=suppressed)
            path = records.write(self.out, manifest, tensors)
            self.records.append(records.Record(path, manifest))
            what = "the call of" if snapshot.led_to else "the failing frame"
            note = f"pt2kit: {what} {manifest['frame']['function']} was recorded in {path} (replay it: python -m replay run {path})"
            with contextlib.suppress(Exception):
                exc.add_note(note)
            if not self.quiet:
                print(note, file=sys.stderr)
            return path
        except Exception as e:
            from pt2kit.signature import said

            self.unsaved.append(f"{snapshot.code.co_name}: {said(e)}")
            log.warning("pt2kit: could not record the failing frame %s: %s", snapshot.code.co_name, said(e))
            log.debug("pt2kit: the recorder's error", exc_info=True)
            return None

    # -- installation ------------------------------------------------------------

    def start(self) -> None:
        global _explicit
        from pt2kit import seams

        seams.require("replay record", "convert_frame", "automatic_dynamic", "config", "resume_functions")
        if not self.switch:
            with _explicit_lock:
                _explicit += 1
        self.active = True
        convert_frame.add_observer(self)

    def stop(self) -> None:
        global _explicit
        self.active = False
        convert_frame.remove_observer(self)
        if not self.switch:
            with _explicit_lock:
                _explicit -= 1


def _torch_recorder_off() -> Any:
    import torch._dynamo.config as dynamo_config

    return (
        dynamo_config.patch(replay_record_enabled=False)
        if dynamo_config.replay_record_enabled
        else contextlib.nullcontext()
    )


def default_out() -> Path:
    """Where records go: ``$TORCHDYNAMO_REPRO_DIR``, else ``./torch_compile_debug``."""
    return Path(os.environ.get("TORCHDYNAMO_REPRO_DIR") or "torch_compile_debug")


@contextlib.contextmanager
def recording(out: str | os.PathLike[str] | None = None, *, quiet: bool = False) -> Iterator[Recorder]:
    """Record every frame that fails to compile or run compiled inside the block.

    ``rec.records`` lists what was written. Exceptions pass through unchanged (with a
    note naming the record). ``out`` defaults to ``$TORCHDYNAMO_REPRO_DIR`` or
    ``./torch_compile_debug``.
    """
    recorder = Recorder(Path(out) if out is not None else default_out(), quiet=quiet)
    recorder.start()
    try:
        yield recorder
    except Exception as exc:
        recorder.script_failed(exc)
        raise
    finally:
        recorder.stop()


def record_call(
    fn: Callable[..., Any], *args: Any, out: str | os.PathLike[str] | None = None, **kwargs: Any
) -> list[records.Record]:
    """Call ``fn(*args, **kwargs)`` while recording; return the records of what failed.

    The exception of a failing call is swallowed here (it is in the records); an empty
    list means nothing failed.
    """
    with recording(out, quiet=True) as recorder:
        try:
            fn(*args, **kwargs)
        except Exception:  # the failure is what we came to record
            if not recorder.records:
                raise
    return recorder.records
