"""Where another torch release runs: a Python environment, found or built once.

``--torch-versions`` takes SPECs. A SPEC is either a torch version (``2.15.0``), installed
once into pt2kit's cache (``~/.cache/pt2kit/torch/2.15.0``) with ``pip install torch==V
numpy`` through the user's own pip (so their index, proxy and constraints apply), or a
path to an existing environment (its folder or its ``python``). Nothing is downloaded
unless a version is asked for by name.

An environment is usable once :func:`probe` has imported torch in it. A failed install
(offline, no such version on the index, a full disk) leaves nothing half built behind:
the venv is built under a temporary name and renamed when pip succeeded. Every failure
here is a :class:`Unavailable` with one line of why, never an exception: a release that
cannot be checked costs the run a note.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

#: How long one ``pip install torch`` may take (a CUDA build is about 3 GB to fetch).
INSTALL_TIMEOUT = 1800.0
PROBE_TIMEOUT = 300.0
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?([.+-]?\w+)*$")


@dataclass(frozen=True)
class ReleaseSpec:
    """One SPEC: a torch ``version`` to install into pt2kit's cache, or the ``path`` of an environment."""

    text: str
    version: str | None = None
    path: Path | None = None

    @property
    def where(self) -> str:
        """Where it runs, as a report says it (the cache with ``~`` for the home directory)."""
        return tilde(self.path if self.path is not None else cached_environment(self.version or ""))


@dataclass(frozen=True)
class Environment:
    """An environment torch imports in: its interpreter and the torch version it holds."""

    spec: ReleaseSpec
    python: Path
    torch: str


@dataclass(frozen=True)
class Unavailable:
    """A SPEC that could not be made usable, and why (one line)."""

    spec: ReleaseSpec
    why: str


def parse_specs(text: str | list[str] | tuple[str, ...] | None) -> list[ReleaseSpec]:
    """``2.15.0,/opt/venv-2.14`` (or several such strings) as SPECs, in order, without repeats.

    A SPEC that names an existing path, or contains a path separator, is an environment;
    anything else must look like a version. Raises ValueError naming the first bad one.
    """
    items = [text] if isinstance(text, str) else list(text or ())
    specs: list[ReleaseSpec] = []
    for item in (part.strip() for chunk in items for part in chunk.split(",")):
        if not item:
            continue
        if os.sep in item or item.startswith(("~", ".")) or Path(item).exists():
            spec = ReleaseSpec(item, path=Path(item).expanduser())
        elif _VERSION.match(item):
            spec = ReleaseSpec(item, version=item)
        else:
            raise ValueError(f"{item!r} is neither a torch version (like 2.15.0) nor a path to a Python environment")
        if spec not in specs:
            specs.append(spec)
    return specs


def cache_root() -> Path:
    """pt2kit's cached environments: ``$XDG_CACHE_HOME/pt2kit/torch`` (``~/.cache/pt2kit/torch``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pt2kit" / "torch"


def cached_environment(version: str) -> Path:
    return cache_root() / version


def tilde(path: Path) -> str:
    """``path`` with the home directory written ``~`` (a report is pasted into bug trackers)."""
    home = str(Path.home())
    text = str(path)
    return "~" + text[len(home) :] if home not in ("", "/") and text.startswith(home + os.sep) else text


def interpreter(path: Path) -> Path | None:
    """The ``python`` of an environment given as its folder or as the interpreter itself."""
    if path.is_file():
        return path
    for candidate in (path / "bin" / "python", path / "bin" / "python3", path / "Scripts" / "python.exe"):
        if candidate.exists():
            return candidate
    return None


def probe(spec: ReleaseSpec, python: Path) -> Environment | Unavailable:
    """Import torch in ``python``: the environment and its torch version, or why it is unusable."""
    try:
        done = subprocess.run(
            [str(python), "-c", "import torch; print(torch.__version__)"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT,
            env={**os.environ, "PT2KIT_AUTOLOAD": "0"},
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return Unavailable(spec, f"{tilde(python)} could not import torch ({type(e).__name__})")
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return Unavailable(spec, f"{tilde(python)} could not import torch: {last}")
    return Environment(spec, python, lines[-1].strip())


_installing = threading.Lock()  # one pip at a time: two installs of a CUDA build would fill a small disk


def install(spec: ReleaseSpec, log: Path | None = None) -> Environment | Unavailable:
    """The cached environment of ``spec.version``, built now if it is not there yet.

    ``python -m venv`` beside the cache's final folder, then the user's own pip (this
    interpreter's, ``pip --python``) installs ``torch==V numpy`` into it, with the
    user's pip configuration; a venv's bundled pip stands in when this environment has
    none. Only a finished install is renamed into place. ``log``: pip's output.
    """
    assert spec.version is not None
    final = cached_environment(spec.version)
    if (python := interpreter(final)) is not None:
        return probe(spec, python)
    with _installing:
        if (python := interpreter(final)) is not None:  # (another thread built it meanwhile)
            return probe(spec, python)
        _remove_abandoned_builds(final)
        building = final.with_name(f".{spec.version}.building-{os.getpid()}")
        why = _build(spec.version, building, log)
        if why is not None:
            shutil.rmtree(building, ignore_errors=True)
            return Unavailable(spec, why)
        try:
            building.rename(final)
        except OSError as e:
            shutil.rmtree(building, ignore_errors=True)
            if interpreter(final) is None:
                return Unavailable(spec, f"could not move the new environment into {tilde(final)}: {e}")
    python = interpreter(final)
    return probe(spec, python) if python is not None else Unavailable(spec, f"no python in {tilde(final)}")


def _remove_abandoned_builds(final: Path) -> None:
    """Half-built venvs of runs that ended mid-install (their process is gone), and this process's own."""
    for stale in final.parent.glob(f".{final.name}.building-*"):
        pid = stale.name.rpartition("-")[2]
        try:
            alive = pid.isdigit() and int(pid) != os.getpid()
            if alive:
                os.kill(int(pid), 0)  # (raises for a process that is gone)
        except OSError:
            alive = False
        if not alive:
            shutil.rmtree(stale, ignore_errors=True)


def _build(version: str, where: Path, log: Path | None) -> str | None:
    """Build a venv at ``where`` holding torch ``version``; None, or one line of why not."""
    # (asked of a child: importlib's find_spec("pip") here would run setuptools' distutils hook for pip,
    # which turns its distutils shim off in this process, and Inductor's next C++ build then fails)
    own_pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0
    steps = [[sys.executable, "-m", "venv", *(["--without-pip"] if own_pip else []), str(where)]]
    pip = (
        [sys.executable, "-m", "pip", "--python", str(where / "bin" / "python")]
        if own_pip
        else [str(where / "bin" / "python"), "-m", "pip"]
    )
    steps.append(
        [*pip, "install", "--disable-pip-version-check", "--no-input", "--quiet", f"torch=={version}", "numpy"]
    )
    where.parent.mkdir(parents=True, exist_ok=True)
    output = ""
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, errors="replace", timeout=INSTALL_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"installing torch {version} failed ({type(e).__name__})"
        output += done.stdout + done.stderr
        if done.returncode != 0:
            if log is not None:
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text(output)
            return f"installing torch {version} failed: {_pip_reason(output)}"
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(output)
    return None


def _pip_reason(output: str) -> str:
    """pip's own one-line reason (``No matching distribution found for torch==9.9``), or its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return ((errors or lines or ["no output"])[-1]).removeprefix("ERROR: ")[:200]


def environment(spec: ReleaseSpec, *, log: Path | None = None) -> Environment | Unavailable:
    """``spec`` made usable: an existing environment probed, or a version's cached one (built if missing)."""
    if spec.path is not None:
        python = interpreter(spec.path)
        if python is None:
            return Unavailable(spec, f"{tilde(spec.path)} is not a Python environment (no bin/python in it)")
        return probe(spec, python)
    return install(spec, log)
