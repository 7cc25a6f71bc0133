"""Later calls of a dynamic graph: sizes its first call did not have, kept when they fail.

A graph compiled with symbolic sizes (``dynamic=True``, ``mark_dynamic``, automatic
dynamic's recompile) runs on every size its guards admit, and a bug in its code may
show on some of them only: the last, smaller batch of an epoch, an odd length. Its
saved inputs are its first call's, on which it passes, so without more the bisection
finds every graph passing alone and can only blame the whole program.

So the recorder watches each call of such a graph whose sizes are new for it (the first
:data:`NEW_SIZES` of them; the first call's own sizes are not new): its inputs are
copied before the call, and when the call raises, or with ``--accuracy`` is judged
wrong, the graph is saved again on those inputs (``keep``), which the
bisection then reads instead. The first failing call is the one kept: a program that
fails stops at the first failure it sees.

Invariant (first, do no harm): a call with sizes already seen, or past the budget,
runs exactly as without pt2kit; a watched call returns what the compiled code
returned, raises what it raised, and leaves the program's random stream as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from .casemaker import graph_inputs
from .events import Judged
from ..unit.copies import clone_values
from pt2kit.seams import dispatch, symbolic_shapes

if TYPE_CHECKING:
    from .recorder import AotGraph, Recorder
    from ..unit.case import GraphCase

#: New sizes watched per graph: a program whose sizes all differ (variable lengths) pays
#: for copying its inputs this many times per graph, no more.
NEW_SIZES = 8

#: ``judge(copies, outputs, rng, after)``: the wrong answer of one compiled call, or None.
Judge = Callable[[list[Any], Any, Any, list[Any]], Any]


def sizes_of(values: list[Any]) -> tuple[Any, ...]:
    """What a call's guards let vary: the sizes of its tensors, and its int inputs (symbolic sizes passed alone)."""
    return tuple(
        tuple(v.shape) if isinstance(v, torch.Tensor) else v if isinstance(v, int) and not isinstance(v, bool) else None
        for v in values
    )


def call_values(args: tuple[Any, ...]) -> list[Any]:
    """The values a compiled graph is called with, boxed (one list, which the callee empties) or not."""
    return list(args[0]) if len(args) == 1 and isinstance(args[0], list) else list(args)


class LaterCalls:
    """One dynamic graph's calls on new sizes: copied before, kept (``keep(copies, wrong)``) when they fail.

    ``judge`` (``--accuracy``): tells a wrong answer of a call that returned, which
    ``keep`` gets (None: the call raised). ``limit``:
    the bytes of inputs worth copying at all (the capture's limit on saved inputs).
    """

    def __init__(self, keep: Callable[[list[Any], Any], None], *, judge: Judge | None, limit: int) -> None:
        self.keep, self.judge, self.limit = keep, judge, limit
        self.seen: set[tuple[Any, ...]] = set()
        self.kept = False

    def first(self, values: list[Any]) -> None:
        """The graph's first call (saved as it is): its sizes are not new."""
        self.seen.add(sizes_of(values))

    def copies(self, values: list[Any]) -> list[Any] | None:
        """Copies of a call's inputs when its sizes are new and worth watching, else None (the call runs as it is)."""
        if self.kept or len(self.seen) > NEW_SIZES:
            return None
        sizes = sizes_of(values)
        if sizes in self.seen:
            return None
        self.seen.add(sizes)
        tensors = [v for v in values if isinstance(v, torch.Tensor)]
        if sum(t.untyped_storage().nbytes() for t in tensors if not symbolic_shapes.is_fake(t)) > self.limit:
            return None
        try:
            with dispatch.outside_modes():
                return clone_values(values)
        except Exception:  # noqa: BLE001 - a value pt2kit cannot copy: the call runs unwatched
            return None

    def call(self, compiled: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], values: list[Any], copies: list[Any]) -> Any:
        """Run one call on new sizes: ``values`` are its inputs (as it will leave them), ``copies`` theirs from before."""
        rng = torch.random.get_rng_state() if self.judge is not None else None
        try:
            out = compiled(*args, **kwargs)
        except Exception:
            self._keep(copies, None)
            raise
        if self.judge is not None:
            try:
                wrong = self.judge(copies, out, rng, values)
            except Exception:  # noqa: BLE001 - no verdict: the call stands as it ran
                wrong = None
            if wrong is not None:
                self._keep(copies, wrong)
        return out

    def _keep(self, copies: list[Any], wrong: Any) -> None:
        if not self.kept:
            self.kept = True
            try:
                self.keep(copies, wrong)
            except Exception:  # noqa: BLE001 - pt2kit's own step: the program's failure is what matters
                pass


def later_calls(recorder: Recorder, case: GraphCase, graph: AotGraph | None = None) -> LaterCalls | None:
    """The later calls of the dynamo graph ``case``, or of its aot graph ``graph``, on new sizes, kept
    when they fail; None for a graph of static sizes."""
    if not case.dynamic:
        return None

    def keep(copies: list[Any], wrong: Any) -> None:
        if graph is None:
            recorder.save(case.replace(inputs=graph_inputs(case.gm.graph.find_nodes(op="placeholder"), copies)))
            return
        graph.values = copies
        recorder.save_aot(graph, real=True)
        if wrong is not None and graph.directory is not None:
            recorder.event(Judged(graph.directory.name, wrong.signature, wrong.details))

    def judge(copies: list[Any], outputs: Any, rng: Any, after: list[Any]) -> Any:
        if graph is None and recorder.aot_graphs_of(case.index):
            return None  # (its aot graphs are judged, each on its own)
        return recorder.judged(graph.gm if graph is not None else case.gm, copies, outputs, rng, after, case.backend)

    return LaterCalls(keep, judge=judge if recorder.accuracy else None, limit=recorder.input_limit)
