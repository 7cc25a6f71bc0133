"""The hook's last door: failures no compiled graph sees, found in the exception the program dies of.

AOTAutograd's backward first unpacks the tensors its forward saved, and autograd checks
their version counters there: a saved tensor the program (or the compiled forward) wrote
into in place raises "modified by an inplace operation" before the backward graph is
compiled or run (pytorch#185497). None of the compilers and compiled graphs the hook wraps
sees it, and torch's own hook misses it too.

So each call of a watched dynamo graph leaves the backward nodes of its outputs in a weak
map to its graph (:func:`remembered`), and :func:`excepthook`, chained before the
program's own at the first such call, looks for those nodes in the frames of the exception the program dies
of. Found, that graph is handled as failing in its backward (saved and, at levels 2 and 4,
minified), and the program's own hook then prints the exception as it would have.

Two more failures no wrapper sees, with nothing for the hook to save, where torch's hook
is silent: dynamo's own tracing failing before a graph exists, and an error of the
program's own after every graph the hook watched ran right (a wrong answer the program
checks itself). :func:`excepthook` says so in one line after the traceback
(:func:`closing_note`), naming the command that looks further.

First, do no harm: nothing is kept alive (a node that dies leaves the map), a call's
result is returned untouched, and an exception no remembered node raised passes on as it is.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from types import TracebackType
from collections.abc import Callable
from typing import Any

_owners: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_installed: list[Any] = []
_intent_reader: list[Callable[[], Any]] = []  # (the hook's: the user's repro settings now, or None)
#: Set on an exception pt2kit has saved a repro for, so that the wrappers it passes through on its way out save it once.
HANDLED = "_pt2kit_handled"
_watched = [0]  # how many compiled graphs the hook has watched in this process (:func:`note_watched`)
_rounded: list[str] = []  # level 4: each first result within rounding of eager's but not equal to it (:func:`note_rounding`)

#: How far below an output's node the compiled backward may sit (a view's node over it).
_DEPTH = 3


def remembered(guard: Any, case: Any, result: Any) -> Any:
    """``result`` as it is, after noting its outputs' backward nodes as ``case``'s (under ``guard``)."""
    try:
        import torch

        if not torch.is_grad_enabled():
            return result
        outputs = result if isinstance(result, (list, tuple)) else [result]
        nodes = [o.grad_fn for o in outputs if isinstance(o, torch.Tensor) and o.grad_fn is not None]
        if nodes and not _installed:
            install()
        with _lock:
            for node in _below(nodes):
                _owners[node] = (guard, case)
    except Exception:  # noqa: BLE001 - a note for later, never a reason to fail the call
        pass
    return result


def _below(nodes: list[Any]) -> list[Any]:
    """``nodes`` and the nodes under them, :data:`_DEPTH` deep: those a weak reference can hold."""
    seen: list[Any] = []
    level = nodes
    for _ in range(_DEPTH):
        following = []
        for node in level:
            try:
                weakref.ref(node)
            except TypeError:  # (a node of autograd's own C++ functions)
                pass
            else:
                seen.append(node)
            following += [n for n, _ in getattr(node, "next_functions", ()) if n is not None]
        level = following
    return seen


def owner_of(traceback: TracebackType | None) -> tuple[Any, Any] | None:
    """The (guard, case) of a remembered backward node some frame of ``traceback`` was running."""
    while traceback is not None:
        for value in traceback.tb_frame.f_locals.values():
            try:
                found = _owners.get(value)
            except TypeError:  # (an unhashable local)
                continue
            if found is not None:
                return found
        traceback = traceback.tb_next
    return None


def excepthook(kind: type[BaseException], error: BaseException, traceback: TracebackType | None) -> None:
    """Handle a backward failure of a watched graph (see the module), then the program's own hook;
    a note on a failure no graph saw (:func:`closing_note`) comes after the traceback, where the user reads last."""
    note = None
    try:
        found = owner_of(traceback) if _owners else None
        if found is not None:
            guard, case = found
            guard.handle(case, error=error, where="backward")
        else:
            note = closing_note(error)
    except Exception:  # noqa: BLE001 - pt2kit's own failure: the program's exception comes first
        pass
    (_installed[0] if _installed else sys.__excepthook__)(kind, error, traceback)
    if note is not None:
        with contextlib.suppress(Exception):  # (a closed stderr is not the program's problem)
            print(f"pt2kit: {note}", file=sys.stderr)


def note_watched() -> None:
    """One more compiled graph is watched by the hook (its closing note counts them)."""
    _watched[0] += 1


def note_rounding(graph: str, difference: str | None) -> None:
    """Level 4: ``graph``'s first result (or gradients) passed the fp64 rule; ``difference``: how it
    still differs from eager's bit for bit (None: it does not). The closing note tells the two readings apart."""
    if difference:
        with _lock:
            _rounded.append(f"{graph}: {difference}")


def closing_note(error: BaseException) -> str | None:
    """The line for a program that dies of what no watched graph raised, while the user asked for a repro.

    Dynamo failing on a recompile the program refuses; dynamo failing while it traced, before any graph existed; or an error of the
    program's own after the hook watched its graphs, none failing (at level 4, none
    diverging from eager): a wrong answer the hook's rule cannot see, or no compiler's.
    None where the hook saved the failure, or was not asked.
    """
    intent = _intent_reader[0]() if _intent_reader else None
    if intent is None or not isinstance(error, Exception) or any(getattr(e, HANDLED, False) for e in _chain(error)):
        return None  # (a Ctrl-C is the user's doing, not a failure)
    from .capture.frames import where_it_failed
    from pt2kit.seams import dynamo_exc
    from pt2kit.signature import signature_of_exception

    script = " ".join(sys.argv) or "SCRIPT"
    failure = signature_of_exception(error)
    signature = failure.signature
    if dynamo_exc.refuses_a_recompile(signature.exception, signature.message):
        return (
            f"dynamo failed on a recompile, as the program asked it to: no graph fails, so "
            f"TORCHDYNAMO_REPRO_AFTER={intent.after} has nothing to save; `python -m explain {script}` says why it recompiled"
        )
    if dynamo_exc.refuses_a_shape_mark(signature.exception):
        return (
            "dynamo refused a size the program marked dynamic and its own code makes static (mark_dynamic asks it to "
            f"raise): no graph fails, so TORCHDYNAMO_REPRO_AFTER={intent.after} has nothing to save"
        )
    where = where_it_failed(error)
    if where == "tracing":
        return (
            f"dynamo failed while tracing, before any graph existed: TORCHDYNAMO_REPRO_AFTER={intent.after} has "
            f"no graph to save; `minify run {script}` records the frame and minifies the op it fails on, where there is one"
        )
    graphs = _watched[0]
    if where != "runtime" or not graphs:
        return None
    if dynamo_exc.raised_compiling_a_frame(error):  # (its guards, after the graph was made: no graph fails)
        return (
            f"dynamo raised it while compiling a frame, outside any graph (building its guards or its own "
            f"bookkeeping): no graph fails; `minify run {script}` bisects the program and says where"
        )
    from .bisect.plainly import looks_like_wrong_answer

    if not looks_like_wrong_answer(failure):  # (a crash no watched graph raised)
        return (
            f"none of the {graphs} compiled graph(s) failed where the hook watches them (their compiles, their runs, "
            f"their first backward): the program's {signature.exception} arises around them (a second backward, autograd "
            f"between graphs, or the program's own code); `minify run {script}` bisects the whole program"
        )
    if intent.level == 4:
        # (what the hook cannot see: dynamo's guards and side effects, later calls, autograd around the graphs)
        outside = (
            f"the wrong answer arises outside what the hook watches (dynamo's guards and side effects, later calls, "
            f"autograd around the graphs, aliasing the hook does not judge): `minify run --accuracy {script}` bisects the whole program "
            f"(dynamo alone first)"
        )
        if not _rounded:
            return (
                f"none of the {graphs} compiled graph(s) failed, and every first result the hook compared equals eager's "
                f"bit for bit (their aliasing too, where no input needs a gradient): {outside}"
            )
        return (
            f"none of the {graphs} compiled graph(s) failed, and their first results agree with eager within rounding "
            f"(the fp64 rule); but {len(_rounded)} differ from eager's in the last bits "
            f"({_rounded[0]}): if the program's check allows no rounding, that is its wrong answer "
            f"(`minify run --strict-accuracy {script}` compares each graph with eager bit for bit); else {outside}"
        )
    return (
        f"none of the {graphs} compiled graph(s) failed; if the failure is a wrong answer, "
        f"TORCHDYNAMO_REPRO_LEVEL=4 or `minify run --accuracy {script}` compares them with eager"
    )


def _chain(error: BaseException) -> list[BaseException]:
    from pt2kit.seams import dynamo_exc

    found: list[BaseException] = []
    node: BaseException | None = error
    while node is not None and node not in found:
        found.append(node)
        node = dynamo_exc.underneath(node)
    return found


def install(read_intent: Callable[[], Any] | None = None) -> None:
    """Chain :func:`excepthook` before the one the program has (once per process).

    ``read_intent`` (the env-var hook's, :func:`minifier.autoload.read_intent`) turns on the
    tracing failure's note.
    """
    with _lock:
        if read_intent is not None and not _intent_reader:
            _intent_reader.append(read_intent)
        if not _installed:
            _installed.append(sys.excepthook)
            sys.excepthook = excepthook
