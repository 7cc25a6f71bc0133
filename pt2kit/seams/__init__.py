"""One seam to torch: every private torch name pt2kit touches, one module per hook point.

pt2kit reaches into torch's internals (the debug hooks torch's own minifier uses,
dynamo's config store, ShapeEnv, the guard tree...). torch changes them between
releases without notice, so every such touch lives here, in one module per torch
hook point, named after what it wraps (depyf's layout). Nothing outside this
package names a private torch attribute; public torch APIs stay where they are used.

Each seam module defines

- ``SEAM``: a :class:`Seam` naming what it wraps, the torch versions it was
  written against, and the pt2kit features that need it;
- ``probe()``: a cheap check (no compile) that raises when torch moved or changed
  what the seam relies on. ``minify doctor`` runs every probe; the tests run them
  as smoke tests.

A feature asks for its seams with :func:`require` before it does anything. When
the installed torch is inside the tested range that costs nothing; outside it, the
probes run once and a broken seam becomes one line (:class:`SeamBroken`, exit 9)
naming the feature, the torch name that changed, and ``minify doctor``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
import time
from dataclasses import dataclass, field
from types import TracebackType

from ..errors import UserFacingError

#: torch minor versions every seam was written and tested against (CI: make test on 2.13,
#: make matrix on the others). A seam whose torch feature is younger says so (``Seam.since``).
TESTED_TORCH = ((2, 11), (2, 12), (2, 13), (2, 14), (2, 15))


#: The seams without which ``minify run``, ``bisect`` and ``repro`` cannot run at all. The others
#: serve a part of a run that says so in a note and goes on without it: below the stage
#: (``compiler_bisector``), the blamed kernel (``kernel_origins``), DTensor inputs, special tensors.
MINIFIER_SEAMS = (
    "after_dynamo", "aot_autograd", "backend_registry", "compile_fx", "config", "dynamo_exc", "hop_eager", "ops",
    "pytree", "symbolic_shapes",
)  # fmt: skip


class SeamBroken(UserFacingError):
    """The installed torch changed an internal a pt2kit feature needs (exit 9)."""

    exit_code = 9


@dataclass(frozen=True)
class Seam:
    """What one seam module wraps, and who depends on it."""

    wraps: str  # the torch names, e.g. "torch._dynamo.repro.after_dynamo.wrap_backend_debug"
    features: tuple[str, ...]  # pt2kit features that stop working without it
    tested: str = "2.11 to 2.15"  # torch versions it was written against
    internal: bool = False  # serves only pt2kit's own tests and benchmarks: doctor lists the seam, not its features
    since: tuple[int, int] = (2, 11)  # the first torch with what it wraps: on an older one its features are absent, not broken


@dataclass
class SeamStatus:
    """The result of one seam's probe."""

    name: str
    seam: Seam | None
    ok: bool
    error: str = ""
    seconds: float = 0.0
    features: tuple[str, ...] = field(default_factory=tuple)
    absent: bool = False  # not ok because this torch predates what the seam wraps (``Seam.since``)

    def to_json(self) -> dict[str, object]:
        return {
            "seam": self.name,
            "wraps": self.seam.wraps if self.seam else None,
            "tested": self.seam.tested if self.seam else None,
            "features": list(self.features),
            "ok": self.ok,
            "absent": self.absent,
            "error": self.error,
            "seconds": round(self.seconds, 4),
        }


def names() -> list[str]:
    """Every seam module of this package, by name."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def torch_version() -> tuple[int, int]:
    import torch

    match = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def in_tested_range() -> bool:
    return torch_version() in TESTED_TORCH


@functools.cache
def check(name: str) -> SeamStatus:
    """Import seam ``name`` and run its probe; never raises."""
    start = time.perf_counter()
    seam = None
    try:
        module = importlib.import_module(f"{__name__}.{name}")
        seam = module.SEAM
        with _quietly():
            module.probe()
    except Exception as e:  # noqa: BLE001 - a broken seam is data here
        absent = seam is not None and torch_version() < seam.since
        error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        return SeamStatus(
            name,
            seam,
            False,
            f"needs torch {'.'.join(map(str, seam.since))} or newer ({error})" if absent and seam else error,
            time.perf_counter() - start,
            seam.features if seam else (),
            absent,
        )
    return SeamStatus(name, seam, True, "", time.perf_counter() - start, seam.features)


def check_all() -> list[SeamStatus]:
    return [check(name) for name in names()]


def overall(statuses: list[SeamStatus]) -> str:
    """``ok`` (every seam works), ``absent`` (the others wrap torch features younger than this torch) or ``broken``."""
    if all(s.ok for s in statuses):
        return "ok"
    return "absent" if all(s.ok or s.absent for s in statuses) else "broken"


def features(statuses: list[SeamStatus]) -> dict[str, bool]:
    """Each pt2kit feature a seam serves, and whether all of its seams work."""
    out: dict[str, bool] = {}
    for status in statuses:
        if status.seam is not None and status.seam.internal:
            continue
        for feature in status.features:
            out[feature] = out.get(feature, True) and status.ok
    return out


class _quietly:
    """Probes exercise torch a little: its warnings and log lines are not the user's business."""

    def __enter__(self) -> None:
        import logging
        import warnings

        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("ignore")
        self._disabled = logging.root.manager.disable
        logging.disable(logging.CRITICAL)  # (torch's loggers have levels and handlers of their own)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        import logging

        logging.disable(self._disabled)
        self._warnings.__exit__(exc_type, exc, tb)


def untested_warning() -> str | None:
    """One line for a torch pt2kit was not tested with (None inside the tested range)."""
    if in_tested_range():
        return None
    import torch

    tested = ", ".join(f"{major}.{minor}" for major, minor in TESTED_TORCH)
    return f"pt2kit: torch {torch.__version__} is not among the releases pt2kit is tested with ({tested}); `minify doctor` says what works with it"


@functools.cache
def _say_untested_once() -> None:
    import sys

    warning = untested_warning()
    if warning:
        print(warning, file=sys.stderr)


def require(feature: str, *seams: str) -> None:
    """Fail with one line when the installed torch breaks a seam ``feature`` needs.

    Inside the tested torch range only a seam younger than this torch is probed (the test
    suite runs every probe); outside it, the probes of ``seams`` (all of them when none are
    named) run once per process, and when they pass the process says once, in one line on
    stderr, that this torch was not tested (a broken seam's error is the only line otherwise).
    """
    tested = in_tested_range()
    for name in seams or names():
        if tested and torch_version() >= _since(name):
            continue
        status = check(name)
        if not status.ok:
            import torch

            wraps = status.seam.wraps if status.seam else name
            if status.absent and status.seam is not None:
                raise SeamBroken(
                    f"pt2kit's {feature} needs torch {'.'.join(map(str, status.seam.since))} or newer "
                    f"(this is {torch.__version__}); run `minify doctor` for what works with it"
                )
            raise SeamBroken(
                f"torch {torch.__version__} is not supported by pt2kit's {feature}: {wraps} changed "
                f"({status.error}); run `minify doctor` for what still works"
            )
    if not tested:
        _say_untested_once()


def _since(name: str) -> tuple[int, int]:
    """The first torch with what seam ``name`` wraps (``(0, 0)`` when the module cannot say)."""
    try:
        return importlib.import_module(f"{__name__}.{name}").SEAM.since
    except Exception:  # noqa: BLE001 - then its probe says what is wrong
        return (0, 0)
