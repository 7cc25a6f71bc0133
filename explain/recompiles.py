"""RecompileProfiler: every compile and recompile inside a block, and every guard that caused it.

torch 2.13 removed ``torch._dynamo.utils.CompileProfiler`` (the PT2 FAQ's "recompilation
profiler"), and ``TORCH_LOGS=recompiles`` names only the first failing guard
(pytorch#147428). This module gives PT2 users what PyTorch/XLA's compilation analysis
gave theirs, one :class:`~explain.compiles.CompileRecord` per compile: its cause (first
compile, recompile, or a recompile torch refused), *all* the guards a recompile's call
failed, naming the input (``x``, ``n``, global ``N``) and the change (size, dtype,
value...), the graph hash and arity, the triggering line and the compile time. Per code
object, :class:`~explain.compiles.FunctionCompiles` counts them, says when a recompile
limit was hit and what that cost, and suggests remedies (:mod:`explain.remedies`).

The profiler listens at the seats of :mod:`explain.hooks`, so it sees every compile on
every thread while armed -- including functions ``torch.compile``\\ d before the block --
without the user changing their ``torch.compile`` calls. Used as a backend
(``torch.compile(fn, backend=prof)``, as old ``CompileProfiler`` users did) it arms itself
on its first graph, runs the graph eagerly, and reports the code objects it compiled
until :meth:`RecompileProfiler.close`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from pt2kit.seams import output_graph
from pt2kit.seams.convert_frame import original_callable

from . import hooks
from .compiles import CompileRecord, FunctionCompiles
from .forecast import size_forecast
from .graphs import summarize_graph
from .hooks import FrameCompile
from .page import write_explain_page
from .report import recompiles_renderable, to_text


@dataclasses.dataclass(frozen=True)
class RecompileReport:
    """What a :class:`RecompileProfiler` recorded, at one moment: its compiles per code object.

    :meth:`RecompileProfiler.snapshot` takes one; :meth:`from_json` reads one back from the
    profiler's (or this report's) JSON. Its counts follow from ``functions``, which the JSON
    holds whole, so a report read back writes the same JSON and equals the snapshot.
    """

    functions: tuple[FunctionCompiles, ...]

    def to_dict(self) -> dict[str, object]:
        records = [record for function in self.functions for record in function.records]
        return {
            "compile_count": sum(f.compiles for f in self.functions),
            "recompile_count": sum(f.recompiles for f in self.functions),
            "refused_count": sum(1 for r in records if r.cause == "recompile refused"),
            "functions": [function.to_dict() for function in self.functions],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecompileReport:
        """The report :meth:`to_dict` (or :meth:`RecompileProfiler.to_dict`) wrote."""
        return cls(functions=tuple(FunctionCompiles.from_dict(function) for function in data["functions"]))

    @classmethod
    def from_json(cls, text: str) -> RecompileReport:
        """:meth:`from_dict` of the JSON text :meth:`to_json` wrote."""
        return cls.from_dict(json.loads(text))

    def __rich__(self) -> Any:
        return recompiles_renderable(list(self.functions))

    def __str__(self) -> str:
        return to_text(self.__rich__(), width=120)


class RecompileProfiler:
    """Records every dynamo compile while armed; ``report()`` explains each recompile.

    Usage::

        with RecompileProfiler() as prof:
            model(x)            # any torch.compile'd code, compiled before the block or not
        print(prof.report())    # rich text; prof.to_json() for tools, report(html=path) for a page

    or, as with the removed ``CompileProfiler``, ``torch.compile(fn, backend=prof)``.
    Thread-safe: compiles on any thread are recorded, and instances can be nested or
    re-entered; each armed instance sees every compile.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._records: list[CompileRecord] = []
        self._functions: dict[types.CodeType, FunctionCompiles] = {}
        self._depth = 0
        self._listening = False
        self._backend_armed = False
        self._backend_codes: set[types.CodeType] = set()

    # -- arming ------------------------------------------------------------------------

    def __enter__(self) -> RecompileProfiler:
        with self._lock:
            self._depth += 1
            self._arm()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._depth -= 1
            self._disarm_if_idle()

    def close(self) -> None:
        """Stop recording compiles for the code this profiler compiled as a backend."""
        with self._lock:
            self._backend_armed = False
            self._disarm_if_idle()

    def _arm(self) -> None:
        if not self._listening:
            hooks.add_listener(self)
            self._listening = True

    def _disarm_if_idle(self) -> None:
        if self._listening and self._depth == 0 and not self._backend_armed:
            hooks.remove_listener(self)
            self._listening = False

    # -- the old CompileProfiler interface: a backend ------------------------------------

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        """Act as a ``torch.compile`` backend: record the compile and run the graph eagerly."""
        frame = hooks.current_frame()
        code = hooks.code_being_compiled()
        if code is None:
            raise RuntimeError("RecompileProfiler was called as a backend outside a dynamo compile")
        with self._lock:
            self._backend_codes.add(code)
            if not self._listening:
                # This compile began before we listened, so its end will not reach us:
                # record it from what is known now, and arm for the compiles after it.
                self._record_unobserved(code, gm, frame)
            if not self._backend_armed:
                self._backend_armed = True
                self._arm()
        return gm.forward

    def _record_unobserved(self, code: types.CodeType, gm: torch.fx.GraphModule, frame: FrameCompile | None) -> None:
        if frame is None:
            compile_id = output_graph.compile_id(gm)
            frame = FrameCompile(
                sequence=-1,
                code=code,
                compile_id=compile_id,
                thread=threading.current_thread().name,
                private=False,
                is_recompile=not compile_id.endswith("/0"),
                prior_entries=[],
                limit=None,
                triggered_by=None,
                started=0.0,
            )
        record = dataclasses.replace(
            CompileRecord.from_frame(frame),
            graph=summarize_graph(gm),  # the frame holds its graphs only once the backend (this call) returned
            outcome="compiled",
            detail="recorded from the backend call that armed the profiler (no timing)",
            seconds=None,
            backend_seconds=None,
        )
        self._add(code, record)

    # -- listening ---------------------------------------------------------------------

    def frame_compiled(self, frame: FrameCompile) -> None:
        with self._lock:
            if self._depth == 0 and frame.code not in self._backend_codes:
                return
            self._add(frame.code, CompileRecord.from_frame(frame))

    def _add(self, code: types.CodeType, record: CompileRecord) -> None:
        self._records.append(record)
        function = self._functions.get(code)
        if function is None:
            function = self._functions[code] = FunctionCompiles(
                record.function, record.filename, record.firstlineno, record.resumed_at, []
            )
        function.records.append(record)

    # -- results -----------------------------------------------------------------------

    @property
    def records(self) -> list[CompileRecord]:
        """Every compile seen, in the order they ended."""
        with self._lock:
            return list(self._records)

    @property
    def functions(self) -> list[FunctionCompiles]:
        """Compiles grouped per code object, in order of first compile."""
        with self._lock:
            return [dataclasses.replace(f, records=list(f.records)) for f in self._functions.values()]

    def for_function(self, fn: Callable[..., Any] | types.CodeType) -> FunctionCompiles | None:
        """The compiles of one function (its code object; resume functions are separate)."""
        code = fn if isinstance(fn, types.CodeType) else _code_of(fn)
        with self._lock:
            found = self._functions.get(code)
            return dataclasses.replace(found, records=list(found.records)) if found else None

    def size_forecast(
        self, fn: Callable[..., Any], ranks: Sequence[int] | None, box: Any, **options: Any
    ) -> dict[str, Any]:
        """Which input sizes of ``fn`` will still recompile: its size classes no cache entry accepts yet.

        See ``validation.recompile_forecast``: ``box`` bounds every dimension, e.g. ``(1, 64)``. The
        forecast covers every tensor argument of ``fn``: ``ranks`` gives their ranks in order, and those
        it leaves out (all, with ``None``) are read off ``fn``'s cache entries. Where that is not
        possible, or no size in the box runs, the answer is ``incomplete`` with a ``reason``
        (:mod:`explain.forecast`).
        """
        return size_forecast(fn, ranks, box, **options)

    def snapshot(self) -> RecompileReport:
        """What was recorded so far, as a report JSON reads back; a later compile does not change it.

        (:attr:`functions` hands out copies, each with a list of records of its own.)
        """
        return RecompileReport(tuple(self.functions))

    def to_dict(self) -> dict[str, object]:
        return self.snapshot().to_dict()

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON text (the schema of :meth:`to_dict`)."""
        return self.snapshot().to_json(indent)

    def report(self, width: int = 120, html: str | os.PathLike[str] | None = None) -> str:
        """The report as rich-rendered plain text, for ``print``.

        With ``html``, also write the report there as a self-contained page
        (:mod:`explain.page`, drawn from :meth:`to_json`'s data); a file there that is not
        a page pt2kit wrote is never replaced (``FileExistsError``).
        """
        snapshot = self.snapshot()  # one, so the page and the text show the same compiles
        if html is not None:
            write_explain_page(html, json.loads(snapshot.to_json()), "pt2kit: RecompileProfiler")
        return to_text(snapshot.__rich__(), width=width)

    def __rich__(self) -> Any:
        return self.snapshot().__rich__()


def _code_of(fn: Callable[..., Any]) -> types.CodeType:
    """The code object dynamo compiles for ``fn``, seeing through ``torch.compile``'s wrappers."""
    fn = original_callable(fn)
    if isinstance(fn, torch.nn.Module):
        fn = type(fn).forward
    return fn.__code__


__all__ = ["RecompileProfiler", "RecompileReport"]
