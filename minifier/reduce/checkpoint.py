"""Checkpoints: a minification interrupted (Ctrl-C, a crash) resumes where it stopped.

The reducer's state is small: the best candidate so far and the answers to every
question asked (:class:`minifier.reduce.engine.Candidate` keys → failed or not). It is
written atomically after each improvement (:func:`save_checkpoint`), under a
fingerprint of the command and the script's contents (:func:`fingerprint`). Running
the same command again finds the newest unfinished checkpoint with that fingerprint
(:func:`find_checkpoint`) and starts from it, with every answer cached.

A checkpoint's ``status`` (:class:`Status`) says how far its run got: ``running`` and
``interrupted`` during the reduction; ``reduced`` once the repro is written, while the
run goes below the stage; ``done`` when the whole run finished. Every status but
``done`` resumes: a run stopped below the stage resumes with its reduction's answers
all cached (no query is asked again), then goes below the stage.

A run still going holds a lock on its directory (:func:`holding`), so a second
run of the same command beside it starts afresh instead of resuming, and writing
into, a checkpoint that is still being written. The lock goes with the process that
held it, however that process ended.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dataclasses
from dataclasses import dataclass
from enum import Enum

from pt2kit.errors import CorruptRecord
from pt2kit.signature import Signature

from ..unit.check import Check


class Status(str, Enum):
    """How far the run that wrote a checkpoint got (see the module docstring)."""

    RUNNING = "running"
    INTERRUPTED = "interrupted"
    REDUCED = "reduced"
    DONE = "done"


@dataclass(frozen=True)
class CheckpointState:
    """What a checkpoint holds besides the reducer's best candidate and its cache: the run it belongs to
    (``fingerprint``, see :func:`fingerprint`), the graph it reduces (``origin``, a repro file), the
    question every query asks, and how far the run got."""

    fingerprint: str
    origin: str
    check: Check
    status: Status = Status.RUNNING

    def to_json(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "origin": self.origin,
            "stage": self.check.stage,
            "target": self.check.failure.to_json(),
            "accuracy": self.check.accuracy,
            "status": self.status.value,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckpointState:
        """The state :meth:`to_json` wrote; KeyError or TypeError when a key is missing or malformed."""
        check = Check(data["stage"], Signature.from_json(data["target"]), data["accuracy"])
        return cls(data["fingerprint"], data["origin"], check, Status(data["status"]))

    def marked(self, status: Status) -> CheckpointState:
        return dataclasses.replace(self, status=status)


if TYPE_CHECKING:
    from .engine import Candidate, Reducer

#: The checkpoint's name in a run directory.
CHECKPOINT = "checkpoint.json"
#: The file a live run holds an exclusive ``flock`` on.
RUN_LOCK = ".running"


@contextlib.contextmanager
def holding(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock while the block runs: :func:`find_checkpoint` passes it by meanwhile."""
    fd = None
    try:
        import fcntl

        fd = os.open(run_dir / RUN_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (ImportError, OSError):
        if fd is not None:
            os.close(fd)
            fd = None  # no flock here (or a read-only directory): runs are simply not told apart
    try:
        yield
    finally:
        if fd is not None:
            with contextlib.suppress(OSError):
                # only its holder ever locks it: a prober that still sees it finds it free
                os.unlink(run_dir / RUN_LOCK)
            os.close(fd)


def in_use(run_dir: Path) -> bool:
    """Does a live run hold ``run_dir``?"""
    try:
        import fcntl

        fd = os.open(run_dir / RUN_LOCK, os.O_RDONLY)
    except (ImportError, OSError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def fingerprint(*parts: Any) -> str:
    """Identifies "the same minification" across runs, for resuming."""
    return hashlib.sha256(json.dumps(parts, default=str, sort_keys=True).encode()).hexdigest()[:20]


def find_checkpoint(out: Path, key: str) -> Path | None:
    """The newest interrupted run under ``out`` with this fingerprint, if any (not one still running)."""
    found = []
    for path in out.glob(f"run-*/{CHECKPOINT}"):
        if in_use(path.parent):
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if data.get("fingerprint") == key and data.get("status") != Status.DONE:
            found.append((path.stat().st_mtime, path))
    return max(found)[1] if found else None


def save_checkpoint(r: Reducer, path: Path, state: CheckpointState) -> None:
    """Write ``state``, the best candidate and the cache, atomically (a rerun resumes from it)."""
    data = {**state.to_json(), "best": r.best.to_json(), "cache": r.cache, "queries": r.queries}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def mark_checkpoint(run_dir: Path, status: Status) -> None:
    """Set the status of ``run_dir``'s checkpoint, if it has one (atomically, as :func:`save_checkpoint` writes)."""
    path = run_dir / CHECKPOINT
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return
    data["status"] = status.value
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def load_checkpoint(path: Path) -> tuple[dict[str, bool], Candidate]:
    from .engine import Candidate

    try:
        data = json.loads(path.read_text())
        return dict(data["cache"]), Candidate.from_json(data["best"])
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as e:
        raise CorruptRecord(f"cannot resume from {path}: {e}") from None
