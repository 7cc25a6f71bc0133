"""``GuardValidator`` and ``check_guards``: translation validation of every dynamo compile in a block.

While a :class:`GuardValidator` is armed, three seats observe dynamo:

- :mod:`pt2kit.seams.shape_env` records every shape decision of every trace
  (:class:`validation.assumptions.Recorder`);
- :mod:`pt2kit.seams.guard_code` hands over each guard manager dynamo builds, with the
  ShapeEnv of its compile (also when torch refuses it);
- :mod:`pt2kit.seams.convert_frame` brackets each frame compile: its locals, its
  transformed code, whether an entry was installed, and how long it took.

When a frame compile ends, :func:`validation.soundness.check_compile` checks that the guards
built for it imply every assumption of its trace, and a :class:`CompileCheck` joins the
:class:`GuardReport`. With ``confirm=True``, each counterexample is run for real when the
block exits (the cache entries are installed by then): eager against the compiled entry
(:mod:`validation.confirm`). Leaving the block removes every wrapper.

Costs: recording is a few dict operations per shape decision; each compile then costs one
Z3 query per distinct assumption (``benchmarks/bench_validation.py`` measures both against
the compile time, and against torch's own translation validation). Nothing here needs
``TORCHDYNAMO_TRANSLATION_VALIDATION``.

:func:`check_guards` compiles and runs one function under a validator, in a cache region
of its own (``torch.compile(isolate_recompiles=True)`` with a backend object of its own),
so it neither reuses nor disturbs the caller's compiled entries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from pt2kit import seams
from pt2kit.seams import convert_frame as frame_seam
from pt2kit.seams import guard_code
from pt2kit.seams import shape_env as shape_env_seam

from .assumptions import Recorder
from .soundness import CompileCheck, Finding, check_compile

log = logging.getLogger(__name__)

#: Default time Z3 may spend on one obligation.
DEFAULT_TIMEOUT_MS = 2000
_SEAMS = ("shape_env", "guard_code", "convert_frame", "sympy_z3")


@dataclasses.dataclass
class GuardReport:
    """Every compile a :class:`GuardValidator` saw, and the overall verdict.

    ``status`` and the totals are derived from ``compiles``, except that a report read back
    (:meth:`from_dict`) keeps the totals as written (rounded) in ``written_seconds`` and
    ``written_compile_seconds``; a validator's own report has None there.
    """

    compiles: list[CompileCheck] = dataclasses.field(default_factory=list)
    target: str = ""
    error: str | None = None  # the exception the program ended with, if any
    confirm: bool = False
    written_seconds: float | None = dataclasses.field(default=None, repr=False)
    written_compile_seconds: float | None = dataclasses.field(default=None, repr=False)

    @property
    def status(self) -> str:
        statuses = {check.status for check in self.compiles}
        if "unsound" in statuses:
            return "unsound"
        if "incomplete" in statuses:
            return "incomplete"
        return "sound"

    @property
    def exit_code(self) -> int:
        """0 sound, 1 unsound, 7 incomplete (docs/validation.md)."""
        return {"sound": 0, "unsound": 1, "incomplete": 7}[self.status]

    @property
    def findings(self) -> list[Finding]:
        return [finding for check in self.compiles for finding in check.findings]

    @property
    def seconds(self) -> float:
        if self.written_seconds is not None:
            return self.written_seconds
        return sum(check.seconds for check in self.compiles)

    @property
    def compile_seconds(self) -> float:
        if self.written_compile_seconds is not None:
            return self.written_compile_seconds
        return sum(check.compile_seconds for check in self.compiles)

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "status": self.status,
            "target": self.target,
            "confirm": self.confirm,
            "seconds": round(self.seconds, 4),
            "compile_seconds": round(self.compile_seconds, 4),
            "compiles": [check.to_dict() for check in self.compiles],
        }
        if self.error is not None:
            data["error"] = self.error
        return data

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GuardReport:
        """The report :meth:`to_dict` wrote: its ``to_dict()`` is ``data`` (``status`` follows from the compiles)."""
        return cls(
            compiles=[CompileCheck.from_dict(check) for check in data["compiles"]],
            target=data.get("target", ""),
            error=data.get("error"),
            confirm=data.get("confirm", False),
            written_seconds=data["seconds"],
            written_compile_seconds=data["compile_seconds"],
        )

    @classmethod
    def from_json(cls, text: str) -> GuardReport:
        """:meth:`from_dict` of the JSON text :meth:`to_json` wrote."""
        return cls.from_dict(json.loads(text))

    def __rich__(self) -> Any:
        from .report import guards_renderable

        return guards_renderable(self)

    def __str__(self) -> str:
        from .report import guards_renderable, to_text

        return to_text(guards_renderable(self))


class GuardValidator:
    """``with GuardValidator() as validator: ...`` validates every dynamo compile in the block.

    ``validator.report`` is the :class:`GuardReport`. ``confirm`` runs each counterexample
    eagerly and through the cached entry when the block ends; ``timeout_ms`` bounds each Z3
    query. Validators do not nest in a useful way: each sees every compile.
    """

    def __init__(self, *, confirm: bool = False, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self.confirm = confirm
        self.timeout_ms = int(timeout_ms)
        self.report = GuardReport(confirm=confirm)
        self._recorder = Recorder()
        self._built: dict[int, tuple[Any, Any, BaseException | None]] = {}
        self._pending: list[tuple[frame_seam.FrameEntry, CompileCheck, Any]] = []
        self._lock = threading.Lock()
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self) -> GuardValidator:
        seams.require("guard validation", *_SEAMS)
        import z3

        z3.main_ctx()  # Z3's context costs ~0.2 s once per process: pay it here, not inside the first compile
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(shape_env_seam.observing(self._recorder))
            stack.enter_context(guard_code.building(self))
            stack.enter_context(frame_seam.frame_compiles(self))
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None
        self._recorder.forget()
        if self.confirm:
            self._run_confirmations()

    # -- listeners ---------------------------------------------------------------------

    def entering(self, frame: frame_seam.FrameEntry) -> None:
        return None  # keep the program's backend

    def failed(self, frame: frame_seam.FrameEntry, exc: BaseException) -> None:
        self.frame_compiled(frame)  # guards torch built and refused are validated too

    def compiled(self, frame: frame_seam.FrameEntry) -> None:
        self.frame_compiled(frame)

    def guards_built(self, f_code: Any, guard_manager: Any, shape_env: Any, error: BaseException | None) -> None:
        frame = frame_seam.current()
        if frame is not None and frame.code is f_code and shape_env is not None:
            with self._lock:
                self._built[id(frame)] = (guard_manager, shape_env, error)

    def frame_compiled(self, frame: frame_seam.FrameEntry) -> None:
        with self._lock:
            built = self._built.pop(id(frame), None)
        try:
            if built is not None:
                self._check(frame, *built)
        finally:
            if frame_seam.current() is None:
                self._recorder.forget()

    def _check(
        self, frame: frame_seam.FrameEntry, guard_manager: Any, shape_env: Any, refused: BaseException | None
    ) -> None:
        started = time.perf_counter()
        decisions = self._recorder.take(shape_env)
        try:
            check = check_compile(
                shape_env=shape_env,
                decisions=decisions,
                guard_manager=guard_manager,
                where=self._recorder.location,
                f_locals=frame.f_locals,
                timeout_ms=self.timeout_ms,
                function=frame.function,
                compile_id=frame.compile_id,
                filename=frame.code.co_filename,
                firstlineno=frame.code.co_firstlineno,
                compile_seconds=frame.seconds,
                installed=frame.installed,
                refused=refused,
            )
        except Exception as error:  # validation must never break the program
            log.exception("pt2kit: validating compile %s failed", frame.compile_id)
            check = CompileCheck(
                function=frame.function,
                compile_id=frame.compile_id,
                filename=frame.code.co_filename,
                firstlineno=frame.code.co_firstlineno,
                status="incomplete",
                guards=0,
                assumptions=0,
                seconds=time.perf_counter() - started,
                compile_seconds=frame.seconds,
                findings=[
                    Finding(
                        "untranslatable",
                        "<compile>",
                        detail=f"pt2kit could not validate this compile: {type(error).__name__}: {error}",
                    )
                ],
                installed=frame.installed,
            )
        with self._lock:
            self.report.compiles.append(check)
            if self.confirm and any(_to_confirm(f) for f in check.findings):
                self._pending.append((frame, check, guard_manager))

    def _run_confirmations(self) -> None:
        from .confirm import confirm

        for frame, check, built_manager in self._pending:
            manager, code, note = _entry_for(frame, built_manager)
            for finding in check.findings:
                if not _to_confirm(finding):
                    continue
                result = confirm(frame, manager, code, finding.counterexample or {})  # set: _to_confirm
                finding.confirmed, finding.refuted = result.confirmed, result.refuted
                finding.detail = "; ".join(part for part in (finding.detail, result.detail, note) if part)
            check.settle()
        self._pending.clear()


def _to_confirm(finding: Finding) -> bool:
    """A counterexample to run: unsound, not run yet, and not already rejected by the installed guards."""
    return finding.unsound and bool(finding.counterexample) and finding.confirmed is None and not finding.refuted


def _entry_for(frame: frame_seam.FrameEntry, built_manager: Any) -> tuple[Any, Any, str]:
    """The cached entry of this compile, or -- when torch refused to install it -- what it built."""
    for entry in guard_code.cache_entries(frame.code):
        if entry.compile_id == frame.compile_id:
            return entry.guard_manager, entry.code, ""
    if frame.installed:
        return frame.guard_manager, frame.out_code, "ran the entry as dynamo returned it (no longer in the cache)"
    return built_manager, frame.out_code, "torch refused to install this entry; ran the guards and code it built"


def check_guards(
    fn: Callable[..., Any],
    *args: Any,
    dynamic: bool | None = True,
    backend: str | Callable[..., Any] = "eager",
    confirm: bool = False,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    **kwargs: Any,
) -> GuardReport:
    """Compile ``fn`` (``torch.compile(fn, dynamic=..., backend=...)``), call it on ``args``, validate its guards.

    Returns the :class:`GuardReport` of every compile the call made (graph breaks make
    several). ``fn`` may be a function, a module, or something ``torch.compile`` already
    returned (its original is compiled afresh). An exception from the call is recorded in
    ``report.error``; the compiles before it are still reported.
    """
    import torch

    seams.require("validation.check_guards", "cache_regions")
    target = frame_seam.original_callable(fn)
    torch_compile = cast(Callable[..., Any], torch.compile)  # its overloads leave isolate_recompiles out
    compiled = torch_compile(target, backend=_own_backend(backend), dynamic=dynamic, isolate_recompiles=True)
    validator = GuardValidator(confirm=confirm, timeout_ms=timeout_ms)
    error: str | None = None
    with validator:
        try:
            compiled(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - reported
            error = f"{type(exc).__name__}: {exc}".splitlines()[0]
    validator.report.error = error
    validator.report.target = getattr(target, "__qualname__", type(target).__qualname__)
    return validator.report


def _own_backend(backend: str | Callable[..., Any]) -> Callable[..., Any]:
    """A backend object nobody else uses, so no entry compiled for someone else is reused."""
    from pt2kit.seams import backend_registry

    resolved = backend_registry.lookup(backend) if isinstance(backend, str) else backend

    def pt2kit_validation_backend(gm: Any, example_inputs: Any, **options: Any) -> Any:
        return resolved(gm, example_inputs, **options)

    for attribute in ("backend_ctx_ctor", "get_compiler_config", "compiler_name"):
        if hasattr(resolved, attribute):
            setattr(pt2kit_validation_backend, attribute, getattr(resolved, attribute))
    return pt2kit_validation_backend


# The names docs/validation.md also gives the package's entry points.
validate_guards = check_guards

__all__ = ["GuardValidator", "GuardReport", "check_guards", "validate_guards", "DEFAULT_TIMEOUT_MS"]
