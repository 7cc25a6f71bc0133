"""Seam: ``torch._dynamo.pgo`` code state, what automatic dynamic shapes learned about a frame.

When a frame is called again with a different size (or int), dynamo recompiles it with
that dimension symbolic. What it has seen so far lives in ``pgo.get_code_state()``: per
code object (``pgo.CodeId``, made from the code and its closure), per local name, a
``FrameStateSizeEntry`` whose ``scalar``/``size``/``stride`` hold the values seen or
``auto_dynamic`` where they differed. A failure that only happens on the dynamic
recompile needs this state back, or the replayed first call compiles static and passes.

:func:`snapshot` turns the entry of one code object into plain JSON and :func:`restore`
puts it back for another (the rebuilt) code object. Both import only torch, so
``replay script`` copies :func:`restore` into the scripts it writes.

:func:`fresh_code_state` swaps the whole state (``pgo._CODE_STATE`` and the copy
``pgo._INIT_CODE_STATE`` it is compared with before being written to disk) for an empty one
within a block, and puts the user's back afterwards: ``explain.explain`` analyses a function
without the user's size history turning it dynamic, or learning the analysis's sizes.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch._dynamo.pgo.get_code_state / CodeId / FrameStateSizeEntry / _CODE_STATE / _INIT_CODE_STATE",
    features=(
        "replay record (dynamic-shape state)",
        "replay run (recompile-only failures)",
        "explain (isolated analysis)",
    ),
)


def probe() -> None:
    import dataclasses

    from torch._dynamo import pgo

    for name in (
        "get_code_state",
        "CodeId",
        "CodeState",
        "FrameStateSizeEntry",
        "auto_dynamic",
        "auto_unset",
        "InferStride",
    ):
        if not hasattr(pgo, name):
            raise AttributeError(f"torch._dynamo.pgo.{name} is gone")
    fields = {f.name for f in dataclasses.fields(pgo.FrameStateSizeEntry)}
    if not {"scalar", "size", "stride"} <= fields:
        raise AttributeError(f"FrameStateSizeEntry has fields {sorted(fields)}")
    if not callable(getattr(pgo.CodeId, "make", None)):
        raise AttributeError("pgo.CodeId.make is gone")
    code_id((lambda: None).__code__, ())
    for name in ("_CODE_STATE", "_INIT_CODE_STATE"):
        if not hasattr(pgo, name):
            raise AttributeError(f"torch._dynamo.pgo.{name} is gone")


def code_id(code: Any, closure: Any) -> Any:
    """dynamo's key of a function's code state (torch 2.13 keys closures apart; 2.11 and 2.12 key the code alone)."""
    import inspect

    from torch._dynamo import pgo

    if len(inspect.signature(pgo.CodeId.make).parameters) >= 2:
        return pgo.CodeId.make(code, closure)
    return pgo.CodeId.make(code)


def snapshot(code: types.CodeType, closure: tuple[types.CellType, ...] | None) -> dict[str, Any]:
    """What automatic dynamic knows about ``code`` right now, as JSON (empty when nothing)."""
    from torch._dynamo import pgo

    def atom(value: Any) -> Any:
        if value is pgo.auto_dynamic:
            return "dynamic"
        if value is pgo.auto_unset:
            return "unset"
        if isinstance(value, pgo.InferStride):
            return {"infer_stride": value.dim}
        if isinstance(value, tuple):
            return [atom(v) for v in value]
        return int(value) if isinstance(value, int) else None

    state = pgo.get_code_state().get(code_id(code, closure))
    if state is None:
        return {}
    return {
        name: {"scalar": atom(entry.scalar), "size": atom(entry.size), "stride": atom(entry.stride)}
        for name, entry in state.automatic_dynamic.items()
    }


def restore(code, closure, entries):
    """Make automatic dynamic believe it has seen ``entries`` (from :func:`snapshot`) for ``code``."""
    from torch._dynamo import pgo

    def atom(value):
        if value == "dynamic":
            return pgo.auto_dynamic
        if value == "unset":
            return pgo.auto_unset
        if isinstance(value, dict):
            return pgo.InferStride(value["infer_stride"])
        if isinstance(value, list):
            return tuple(atom(v) for v in value)
        return value

    if not entries:
        return
    state = pgo.get_code_state()[code_id(code, closure)]
    for name, entry in entries.items():
        state.automatic_dynamic[name] = pgo.FrameStateSizeEntry(
            scalar=atom(entry["scalar"]), size=atom(entry["size"]), stride=atom(entry["stride"])
        )


@contextlib.contextmanager
def fresh_code_state() -> Iterator[None]:
    """Within the block automatic dynamic starts from nothing; the process's own state is back afterwards.

    One fresh object stands for both the state and its initial copy, so ``put_code_state``
    sees no change and writes nothing to disk.
    """
    import collections

    from torch._dynamo import pgo

    saved = (pgo._CODE_STATE, pgo._INIT_CODE_STATE)
    fresh: collections.defaultdict[Any, Any] = collections.defaultdict(pgo.CodeState)
    pgo._CODE_STATE = pgo._INIT_CODE_STATE = fresh
    try:
        yield
    finally:
        pgo._CODE_STATE, pgo._INIT_CODE_STATE = saved
