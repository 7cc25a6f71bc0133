"""Replaying a record: one compiled call in a fresh process, and what came of it.

:func:`run` is what ``python -m replay run`` and ``replay.run`` do. It hands the work to
:func:`isolated`, the one place that decides *how* a replay is isolated: today a fresh
``python -P -m replay run --here`` child (a crash or a hang in compiled code cannot take
the caller down, and nothing of the caller's torch state leaks in). The child calls
:func:`replay_here`, which loads the record, rebuilds the frame and calls it compiled
(:func:`replay.rebuild.replay_call`), then compares what happened with the recorded
failure signature (:mod:`pt2kit.signature`):

- ``reproduced``: it failed the same way (exit 1);
- ``passed``: the call returned; the outputs are listed with the sha256 of their
  contiguous CPU bytes, so two runs (or a run and the program's own eager run) can be
  compared bit for bit (exit 0);
- ``different-failure``: it failed, but not the same way (exit 5).

The program's changes to torch the record carries (a patched lowering...) are put back
first (:mod:`replay.program`); those it could not carry are named on a replay that does
not reproduce (:attr:`ReplayResult.caveat`): the failure may need them.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pt2kit.errors import UnknownBackend, UserFacingError
from pt2kit.processes import kill_group

from . import records as record_format
from pt2kit.signature import Kind

STATUS_EXIT = {"reproduced": 1, "passed": 0, "different-failure": 5}


@dataclass
class ReplayResult:
    """What one replay did (``python -m replay run --json`` prints :meth:`to_json`)."""

    status: str
    failure: dict[str, Any] | None
    recorded: dict[str, Any]
    outputs: list[dict[str, Any]] = field(default_factory=list)
    backend: str | None = None
    fullgraph: bool | None = None
    static: bool = False
    seconds: float = 0.0
    record: str = ""
    state_missing: list[str] = field(default_factory=list)  # the program's changes to torch the record lacks

    @property
    def exit_code(self) -> int:
        return STATUS_EXIT[self.status]

    @property
    def caveat(self) -> str | None:
        """Why a replay that did not reproduce may not mean the failure is gone (None when nothing says so)."""
        from pt2kit.seams import dynamo_exc

        if self.status == "reproduced":
            return None
        if dynamo_exc.refuses_a_recompile(self.recorded.get("exception") or "", self.recorded.get("message") or ""):
            return (
                "the recorded failure is dynamo refusing a recompile, as the program asked: a replay compiles the "
                "frame once and never recompiles; `python -m explain SCRIPT` says why the program recompiled"
            )
        if not self.state_missing:
            return None
        return (
            "the record lacks the program's changes to torch that no record can carry"
            f" ({'; '.join(self.state_missing)}): the failure may need them"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "failure": self.failure,
            "recorded_failure": self.recorded,
            "outputs": self.outputs,
            "backend": self.backend,
            "fullgraph": self.fullgraph,
            "static": self.static,
            "seconds": round(self.seconds, 3),
            "record": self.record,
            "state_missing": self.state_missing,
            "caveat": self.caveat,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReplayResult:
        return cls(
            status=data["status"],
            failure=data.get("failure"),
            recorded=data.get("recorded_failure") or {},
            outputs=data.get("outputs") or [],
            backend=data.get("backend"),
            fullgraph=data.get("fullgraph"),
            static=bool(data.get("static")),
            seconds=float(data.get("seconds") or 0.0),
            record=data.get("record") or "",
            state_missing=list(data.get("state_missing") or []),
        )


class ReplayError(UserFacingError):
    """An error the isolated replay reported, with its own exit code."""

    def __init__(self, message: str, exit_code: int, status: str = "error") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.status = status


def run(
    path: str | os.PathLike[str],
    *,
    backend: str | None = None,
    fullgraph: bool | None = None,
    static: bool = False,
    allow_partial: bool = False,
    timeout: float | None = None,
) -> ReplayResult:
    """Replay a record in a fresh process; see the module docstring.

    Raises a :class:`~pt2kit.errors.UserFacingError` for a record that cannot be read
    (exit 6), cannot be rebuilt here (7), is partial without ``allow_partial`` (8), or
    names an unknown backend (4).
    """
    directory, manifest = record_format.read_manifest(path)  # fails fast, without torch
    if manifest["status"] != "complete" and not allow_partial:
        raise partial_record_error(manifest)
    return isolated(
        directory, backend=backend, fullgraph=fullgraph, static=static, allow_partial=allow_partial, timeout=timeout
    )


def partial_record_error(manifest: dict[str, Any]) -> record_format.PartialRecord:
    names = ", ".join(f"{u['name']} ({u['type']})" for u in manifest.get("unrecordable", [])[:5])
    return record_format.PartialRecord(
        f"the record is partial (not recorded: {names}); replay it anyway with --allow-partial"
    )


def isolated(
    directory: Path,
    *,
    backend: str | None,
    fullgraph: bool | None,
    static: bool,
    allow_partial: bool,
    timeout: float | None,
) -> ReplayResult:
    """Run :func:`replay_here` on ``directory`` in a fresh interpreter and return its result."""
    with tempfile.TemporaryDirectory(prefix="pt2kit-replay-") as scratch:
        result_file = Path(scratch) / "result.json"
        command = [sys.executable, "-P", "-m", "replay", "run", "--here", "--result", str(result_file), str(directory)]
        if backend is not None:
            command += ["--backend", backend]
        if fullgraph is not None:
            command.append("--fullgraph" if fullgraph else "--no-fullgraph")
        if static:
            command.append("--static")
        if allow_partial:
            command.append("--allow-partial")
        env = {**os.environ, "PT2KIT_AUTOLOAD": "0"}
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        started = time.perf_counter()
        process = subprocess.Popen(
            command,
            env=env,
            stdout=sys.stderr.fileno() if _has_fileno(sys.stderr) else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(process.pid)
            process.communicate()
            return _outcome_without_result(
                directory, "timeout", f"no result within {timeout:g} s", time.perf_counter() - started
            )
        except KeyboardInterrupt:
            kill_group(process.pid)
            raise
        sys.stderr.write(stderr)
        if result_file.is_file():
            data = json.loads(result_file.read_text())
            if data.get("status") == "error":
                raise ReplayError(data["message"], int(data.get("exit_code", 1)))
            return ReplayResult.from_json(data)
        if process.returncode < 0:
            return _outcome_without_result(
                directory, "crash", signal.Signals(-process.returncode).name, time.perf_counter() - started, stderr
            )
        raise ReplayError(
            f"the replay process exited with status {process.returncode} and no result:\n{stderr.strip()[-2000:]}", 1
        )


def _outcome_without_result(directory: Path, kind: str, what: str, seconds: float, stderr: str = "") -> ReplayResult:
    from pt2kit.signature import Signature, signature_of_crash, signature_of_timeout

    _, manifest = record_format.read_manifest(directory)
    if kind == Kind.TIMEOUT:
        failure = signature_of_timeout(seconds).signature
    else:
        failure = signature_of_crash(signal.Signals[what].value, stderr).signature
    recorded = Signature.from_json(manifest["failure"])
    from .program import missing_changes

    status = "reproduced" if recorded == failure else "different-failure"
    return ReplayResult(
        status,
        failure.to_json(),
        recorded.to_json(),
        seconds=seconds,
        record=str(directory),
        state_missing=missing_changes(manifest),
    )


def _has_fileno(stream: Any) -> bool:
    try:
        stream.fileno()
        return True
    except (AttributeError, OSError, ValueError):
        return False


# --------------------------------------------------------------------------- #
# In the isolated process
# --------------------------------------------------------------------------- #


def internals() -> dict[str, Any]:
    """The private torch hooks a replay needs, from pt2kit's seams."""
    from pt2kit import seams
    from pt2kit.seams import automatic_dynamic, compiler_state, mark_dynamic, resume_functions

    seams.require("replay run", "automatic_dynamic", "mark_dynamic", "resume_functions")
    return {
        "refresh_compiler_tables": compiler_state.refresh,
        "regenerate_resume": resume_functions.regenerate,
        "restore_automatic_dynamic": automatic_dynamic.restore,
        "strip_dynamic_marks": mark_dynamic.strip_dynamic_marks,
    }


def replay_here(
    path: str | os.PathLike[str],
    *,
    backend: str | None = None,
    fullgraph: bool | None = None,
    static: bool = False,
    allow_partial: bool = False,
) -> ReplayResult:
    """Load, rebuild and replay a record *in this process* (it changes global torch state)."""
    from pt2kit.backends import resolve_backend
    from pt2kit.signature import Signature, signature_of_exception

    from . import program, rebuild

    record = record_format.load(path)
    if record.partial and not allow_partial:
        raise partial_record_error(record.manifest)
    chosen: Any = None
    if backend is not None:
        # a backend registered by the recorded backend's module is known by name once it is imported
        modules = record.manifest.get("compile", {}).get("backend", {}).get("modules", [])
        rebuild.add_import_roots(modules)
        for name, _ in modules:
            with contextlib.suppress(Exception):
                importlib.import_module(name)
        chosen = resolve_backend(backend)  # UnknownBackend (exit 4)
        backend_name = backend
    else:
        backend_name = record.manifest.get("compile", {}).get("backend", {}).get("name")
    recorded = Signature.from_json(record.failure)
    started = time.perf_counter()
    try:
        replay_internals = internals()
        program.apply_program_state(record.manifest, replay_internals)  # before anything compiles
        call = rebuild.prepare_call(
            record.manifest,
            record.tensors,
            replay_internals,
            backend=chosen,
            fullgraph=fullgraph,
            static=static,
            allow_unrecordable=allow_partial,
        )
    except rebuild.BackendNotFound as e:
        raise UnknownBackend(str(e)) from None
    except rebuild.RebuildError as e:
        raise record_format.CannotRebuild(f"cannot rebuild the frame {record.function}: {e}") from None
    except Exception as e:  # noqa: BLE001 - an import, a class statement... of the user's program failed
        first = str(e).splitlines()[0] if str(e) else ""
        raise record_format.CannotRebuild(
            f"cannot rebuild the frame {record.function}: {type(e).__name__}: {first}"
        ) from None
    try:
        outputs = call()
    except Exception as exc:  # noqa: BLE001 - the replayed frame's failure is the result
        failure = signature_of_exception(exc).signature
        status = "reproduced" if failure == recorded else "different-failure"
        result = ReplayResult(status, {**failure.to_json(), "details": str(exc)[:2000]}, recorded.to_json())
    else:
        result = ReplayResult(
            "passed", None, recorded.to_json(), outputs=[rebuild.digest(o) for o in rebuild.flat_outputs(outputs)]
        )
    result.seconds = time.perf_counter() - started
    result.backend = backend_name
    result.fullgraph = bool(record.manifest["compile"].get("fullgraph")) if fullgraph is None else fullgraph
    result.static = static
    result.record = str(record.path)
    result.state_missing = program.missing_changes(record.manifest)
    return result
