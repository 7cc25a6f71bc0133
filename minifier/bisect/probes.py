"""The bisector's probes of one graph: each question to torch's CompilerBisector an isolated query.

:func:`passes_with_bisector` runs the graph under the bisector's current state (in a
worker child); :func:`disabled_whole` makes the first question about a subsystem, "does
it pass with all of it disabled?". :mod:`minifier.bisect.subsystem` asks them as its
search goes; :class:`AskAhead` asks the first ones while the repro runs elsewhere
(``Session.while_verifying``), on the core that run leaves free, and :func:`ahead_answer`
reads each answer as the search would.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pt2kit.seams import compiler_bisector
from pt2kit.signature import Kind, Signature
from ..isolation.executor import Handle
from ..isolation.session import Session
from ..isolation.worker import QueryResult, yielding
from ..stages.run import run_case
from ..unit.case import GraphCase
from ..unit.check import Stage

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy


def passes_with_bisector(case: GraphCase, stage: str, target: Signature, accuracy: Accuracy, directory: str) -> bool:
    """(In a worker child) does ``case`` pass ``stage`` under the bisector's current state? (its config change applied)"""
    with under_bisector(stage, directory):
        outcome = run_case(case, stage, accuracy=accuracy)
    return not (outcome.failure is not None and outcome.failure.signature == target)


@contextlib.contextmanager
def under_bisector(stage: str, directory: str) -> Iterator[None]:
    """The bisector's state in ``directory`` on, and the config change it asks for applied.

    The change is read inside: outside, torch's bisector reads its default directory. (Inductor's
    own compile applies it too, but an aot graph's query calls Inductor's inner compile.)
    """
    with compiler_bisector.enabled(directory), _config_patch(stage, compiler_bisector.config_change(stage)):
        yield


def _config_patch(stage: str, change: dict[str, Any]) -> Any:
    if not change:
        return contextlib.nullcontext()
    if stage == Stage.INDUCTOR:
        import torch._inductor.config as inductor_config

        return inductor_config.patch(change)
    import torch._functorch.config as functorch_config

    return functorch_config.patch(change)


def disabled_whole(
    session: Session, case: GraphCase, stage: str, target: Signature, accuracy: Accuracy, name: str
) -> tuple[Callable[[], bool], str]:
    """The query "does ``case`` pass with ``name`` disabled whole?", and the directory that holds the bisector's
    state for it (in the run directory, where the query's child reads it; the caller removes it once answered)."""
    directory = tempfile.mkdtemp(prefix=f"pt2kit-subsystem-{name}-", dir=session.run_dir)
    compiler_bisector.disable_whole(stage, name, directory)
    return functools.partial(passes_with_bisector, case, stage, target, accuracy, directory), directory


def ahead_answer(result: QueryResult[Any]) -> bool | None:
    """Does the graph pass with the subsystem disabled (a question that ended by itself), as
    :func:`~minifier.bisect.subsystem.passes_disabled` reads it: its value; a crash is a failure (False).
    None for a timeout: asked at the lowest CPU priority, a query starved of the CPU is no hang."""
    if result.ok:
        return bool(result.value)
    if result.failure is not None and result.failure.signature.kind == Kind.TIMEOUT:
        return None
    return False


class AskAhead:
    """The bisector's first questions about the repro's graph, asked while the repro runs elsewhere.

    Verifying the repro is one process, on one core, for seconds (an interpreter, an
    Inductor compile); :func:`~minifier.bisect.subsystem.drill_down` asks its questions only after. Meanwhile the
    other cores ask, at the lowest CPU priority (the run elsewhere is what the user waits
    for: :func:`~minifier.isolation.worker.yielding`), in the bisector's order, what its search asks first: does the
    graph pass with each subsystem disabled whole (:func:`disabled_whole`)? Until one
    does, or the run ends. The drill-down then reads these answers instead of asking
    again, so its questions, its answers and what it finds are the same; only fewer of
    them wait. A repro that is not drilled after all (it did not verify and is minified
    again) leaves its answers unread. With one job, nothing is asked ahead: the run
    elsewhere has the core.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.answers: dict[tuple[str, str, str], dict[str, bool]] = {}

    def key(self, case: GraphCase, stage: str, target: Signature, accuracy: Accuracy) -> tuple[str, str, str]:
        from ..repro.writer import render

        return render(case, stage=stage, accuracy=accuracy), stage, str(target)

    def __call__(self, case: GraphCase, check: Any, done: Callable[[], bool]) -> None:
        """(``Session.while_verifying``) Ask ahead about ``case`` under ``check`` until ``done()``.

        Questions still running then are stopped unanswered, and one that timed out is not an answer
        (:func:`ahead_answer`): the drill-down asks those again.
        """
        from pt2kit import seams

        session, stage, target, accuracy = self.session, check.stage, check.failure, check.accuracy
        slots = session.jobs - 1
        if slots < 1 or stage not in compiler_bisector.DRILLABLE or not seams.check("compiler_bisector").ok:
            return
        answers = self.answers.setdefault(self.key(case, stage, target, accuracy), {})
        names = iter(compiler_bisector.subsystems(stage))
        running: list[tuple[str, Handle, str]] = []

        def collect() -> None:
            for name, handle, directory in [r for r in running if r[1].done]:
                running.remove((name, handle, directory))
                shutil.rmtree(directory, ignore_errors=True)
                result = handle.result()
                session.mark(handle.label, result.seconds, ago=result.ended_ago)
                if (answer := ahead_answer(result)) is not None:
                    answers[name] = answer

        try:
            while not done() and not any(answers.values()):  # (the search stops at the first that passes)
                collect()
                following = next(names, None) if len(running) < slots else None
                if following is not None:
                    asked, directory = disabled_whole(session, case, stage, target, accuracy, following)
                    label = f"{case.label()}: which part of {stage} breaks it: without {following}"
                    running.append((following, session.start(functools.partial(yielding, asked), label), directory))
                elif not running:
                    return
                else:
                    session.worker.poll(0.1)
        finally:
            collect()
            session.stop([h for _, h, _ in running])
            for _, _, directory in running:
                shutil.rmtree(directory, ignore_errors=True)

    def answered(self, case: GraphCase, stage: str, target: Signature, accuracy: Accuracy) -> dict[str, bool]:
        """What was asked ahead about ``case`` (nothing, unless the very same questions were)."""
        return dict(self.answers.get(self.key(case, stage, target, accuracy), {}))
