"""Checkpoints: a minification interrupted (Ctrl-C, a crash) resumes where it stopped.

The reducer's state is small: the best candidate so far and the answers to every
question asked (:class:`minifier.reduce.Candidate` keys → failed or not). It is
written atomically after each improvement (:func:`save_checkpoint`), under a
fingerprint of the command and the script's contents (:func:`fingerprint`). Running
the same command again finds the newest unfinished checkpoint with that fingerprint
(:func:`find_checkpoint`) and starts from it, with every answer cached.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import CorruptRecord

if TYPE_CHECKING:
    from .reduce import Candidate, Reducer

#: The checkpoint's name in a run directory.
CHECKPOINT = "checkpoint.json"


def fingerprint(*parts: Any) -> str:
    """Identifies "the same minification" across runs, for resuming."""
    return hashlib.sha256(json.dumps(parts, default=str, sort_keys=True).encode()).hexdigest()[:20]


def find_checkpoint(out: Path, key: str) -> Path | None:
    """The newest interrupted run under ``out`` with this fingerprint, if any."""
    found = []
    for path in out.glob(f"run-*/{CHECKPOINT}"):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if data.get("fingerprint") == key and data.get("status") != "done":
            found.append((path.stat().st_mtime, path))
    return max(found)[1] if found else None


def save_checkpoint(r: Reducer, path: Path, extra: dict[str, Any]) -> None:
    """Write the best candidate and the cache, atomically (a rerun resumes from it)."""
    data = {**extra, "best": r.best.to_json(), "cache": r.cache, "queries": r.queries}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def load_checkpoint(path: Path) -> tuple[dict[str, bool], Candidate]:
    from .reduce import Candidate

    try:
        data = json.loads(path.read_text())
        return dict(data["cache"]), Candidate.from_json(data["best"])
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as e:
        raise CorruptRecord(f"cannot resume from {path}: {e}") from None
