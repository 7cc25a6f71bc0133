"""The record on disk: a directory ``rec-<function>-<hash>/`` that anyone can open safely.

- ``manifest.json``: the frame, declaratively (the value tree of :mod:`replay.rebuild`):
  code identity and source, arguments, closure cells, the globals its code reads, the
  non-default config, global state, RNG state, compile options, dynamic-shape state and
  the failure signature, plus what could not be recorded.
- ``tensors.pt``: every tensor, one ``torch.save`` list, read back only with
  ``torch.load(weights_only=True)``; its sha256 is in the manifest, so a truncated or
  swapped file is caught before torch reads a byte of it.

Loading (:func:`load`) parses JSON and runs torch's restricted unpickler on the tensors.
It imports nothing from the record and executes nothing: user classes and sources are
touched only when a frame is rebuilt for a replay. A record that cannot be read is one
:class:`~pt2kit.errors.CorruptRecord` line (exit 6).

A directory's name holds a hash of its content, so recording the same failure twice
finds the record already there; a record is written under a temporary name and renamed
into place, so a crash never leaves half of one, and no existing file is ever replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pt2kit.errors import CorruptRecord, UserFacingError

MANIFEST = "manifest.json"
TENSORS = "tensors.pt"
FORMAT = "pt2kit-replay"
VERSION = 1

#: Keys every manifest must have, with their JSON types.
REQUIRED = {
    "format": str,
    "version": int,
    "status": str,
    "frame": dict,
    "objects": dict,
    "sources": list,
    "namespaces": dict,
    "tensors": dict,
    "failure": dict,
}


class PartialRecord(UserFacingError):
    """The record is partial (some values could not be recorded) and --allow-partial was not given (exit 8)."""

    exit_code = 8


class CannotRebuild(UserFacingError):
    """The frame cannot be rebuilt here: a module, class or source it needs is missing or changed (exit 10)."""

    exit_code = 10


@dataclass
class Record:
    """A record read back from disk (see the module docstring)."""

    path: Path
    manifest: dict[str, Any]
    tensors: list[Any] = field(default_factory=list, repr=False)

    @property
    def function(self) -> str:
        return str(self.manifest["frame"].get("function", "?"))

    @property
    def file(self) -> str:
        return str(self.manifest["frame"].get("file", "?"))

    @property
    def line(self) -> int:
        return int(self.manifest["frame"].get("line", 0))

    @property
    def status(self) -> str:
        return str(self.manifest["status"])

    @property
    def partial(self) -> bool:
        return self.status != "complete"

    @property
    def unrecordable(self) -> list[dict[str, str]]:
        return list(self.manifest.get("unrecordable", []))

    @property
    def failure(self) -> dict[str, Any]:
        return dict(self.manifest["failure"])

    @property
    def backend(self) -> str | None:
        return self.manifest.get("compile", {}).get("backend", {}).get("name")

    def summary(self) -> dict[str, Any]:
        """This record's entry in ``replay record --json``."""
        failure = self.failure
        return {
            "path": str(self.path),
            "function": self.function,
            "file": self.file,
            "line": self.line,
            "status": self.status,
            "unrecordable": self.unrecordable,
            "state_missing": list((self.manifest.get("program_state") or {}).get("missing") or []),
            "failure": {k: failure.get(k) for k in ("kind", "exception", "message")},
            "role": self.role,
        }

    @property
    def role(self) -> str:
        """``call``: a user function's whole call, whose resume function failed; ``resume``: a frame
        after a graph break (its inputs made by compiled code); ``frame``: any other frame."""
        frame = self.manifest.get("frame") or {}
        return "call" if frame.get("led_to") else "resume" if frame.get("resume") else "frame"


def record_name(function: str, digest: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_]+", "_", function)[:40] or "frame"
    return f"rec-{safe}-{digest[:12]}"


def write(out: Path, manifest: dict[str, Any], tensors: list[Any]) -> Path:
    """Write a record under ``out`` and return its directory (an identical one is reused)."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".rec-", dir=out))
    try:
        torch.save(tensors, staging / TENSORS)
        manifest["tensors"] = {"file": TENSORS, "count": len(tensors), "sha256": _file_sha256(staging / TENSORS)}
        stable = {k: v for k, v in manifest.items() if k not in ("created",)}
        digest = hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest()
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")
        final = out / record_name(manifest["frame"].get("function", "frame"), digest)
        if final.exists():
            return final.resolve()  # the same content, recorded before
        os.rename(staging, final)
        return final.resolve()
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def read_manifest(path: str | os.PathLike[str]) -> tuple[Path, dict[str, Any]]:
    """The record directory and its validated manifest, without touching the tensors (no torch needed)."""
    directory = Path(path)
    if directory.is_file() and directory.name == MANIFEST:
        directory = directory.parent
    if not directory.is_dir():
        raise CorruptRecord(f"not a record: {path} is not a directory")
    manifest_path = directory / MANIFEST
    try:
        text = manifest_path.read_text()
    except FileNotFoundError:
        raise CorruptRecord(f"not a record: {directory} has no {MANIFEST}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CorruptRecord(f"cannot read {manifest_path}: {e}") from None
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as e:
        raise CorruptRecord(f"{manifest_path} is not valid JSON (truncated or corrupt): {e}") from None
    _validate(manifest, manifest_path)
    return directory.resolve(), manifest


def load(path: str | os.PathLike[str]) -> Record:
    """Read a record safely: JSON, a checksum, and ``torch.load(weights_only=True)``.

    Raises :class:`~pt2kit.errors.CorruptRecord` (exit 6) for anything wrong with it.
    """
    import pickle
    import zipfile

    import torch

    directory, manifest = read_manifest(path)
    tensors_path = directory / TENSORS
    spec = manifest["tensors"]
    if not tensors_path.is_file():
        raise CorruptRecord(f"the record {directory.name} has no {TENSORS}")
    if _file_sha256(tensors_path) != spec.get("sha256"):
        raise CorruptRecord(f"{tensors_path} does not match the checksum in {MANIFEST} (truncated or modified)")
    try:
        tensors = torch.load(tensors_path, weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CorruptRecord(
            f"{tensors_path} is unsafe to load: torch.load(weights_only=True) refused it ({first[:200]})"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError, KeyError) as e:
        raise CorruptRecord(
            f"{tensors_path} cannot be read (truncated or corrupt): {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}"
        ) from None
    if (
        not isinstance(tensors, list)
        or not all(isinstance(t, torch.Tensor) for t in tensors)
        or len(tensors) != spec.get("count")
    ):
        raise CorruptRecord(f"{tensors_path} does not hold the {spec.get('count')} tensors the manifest lists")
    return Record(directory, manifest, tensors)


def _validate(manifest: Any, where: Path) -> None:
    if not isinstance(manifest, dict):
        raise CorruptRecord(f"{where} does not hold a record manifest")
    if manifest.get("format") != FORMAT:
        raise CorruptRecord(f"{where} is not a pt2kit replay record (format {manifest.get('format')!r})")
    if manifest.get("version") != VERSION:
        raise CorruptRecord(
            f"{where} is a version {manifest.get('version')!r} record; this pt2kit reads version {VERSION}"
        )
    for key, kind in REQUIRED.items():
        if not isinstance(manifest.get(key), kind):
            raise CorruptRecord(f"{where} is corrupt: '{key}' is missing or not a {kind.__name__}")
    frame = manifest["frame"]
    if not isinstance(frame.get("args"), dict) or not isinstance(frame.get("code"), dict):
        raise CorruptRecord(f"{where} is corrupt: the frame has no code or arguments")


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
