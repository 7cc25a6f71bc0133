"""How many queries run side by side: ``--jobs N`` (``PT2KIT_JOBS``), else every core this process may use.

Inductor compiles a graph on one thread (pt2kit pins ``TORCHINDUCTOR_COMPILE_THREADS=1``
in its children), so one query keeps one core busy, and N cores answer N independent
questions in the time of one: a reduction's next chunks (:mod:`minifier.reduce.scans`),
the bisection's stages, a sample's halves.

Cores are not the only bound. A child is a fork of a process that imported torch and
compiles a graph of the user's program with its inputs, so it may need as much memory
as the program did. :func:`fitting` lowers N to what the free memory holds, counting
each child as the larger of :data:`CHILD_FLOOR` and the program's own peak (measured
once it ran: :func:`largest_child`). The answers never depend on N, only the time.

``--jobs`` reaches the session through the environment, so that the processes a run
starts (the ``TORCHDYNAMO_REPRO_AFTER`` hook's ``minify repro`` child) use the same N.
"""

from __future__ import annotations

import os
import resource
from typing import Any

JOBS_ENV = "PT2KIT_JOBS"
#: A query's child at the least: torch's pages it shares with the zygote aside, a compile of a small graph and gcc.
CHILD_FLOOR = 1 << 30


def requested() -> int | None:
    """``PT2KIT_JOBS`` (``--jobs``), when set to a positive number."""
    value = os.environ.get(JOBS_ENV, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def cores() -> int:
    """The cores this process may run on (its affinity: a container's or ``taskset``'s share, not the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # (macOS)
        return max(1, os.cpu_count() or 1)


def available_memory() -> int | None:
    """Bytes the system can give without swapping (Linux's ``MemAvailable``); None where unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def largest_child() -> int:
    """The peak memory of the largest child process this one waited for (the user's program, once it ran)."""
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return peak * 1024 if os.uname().sysname == "Linux" else peak  # (kilobytes on Linux, bytes on macOS)


def fitting(jobs: int, per_child: int, available: int | None) -> int:
    """``jobs`` lowered to the children of ``per_child`` bytes that ``available`` bytes hold (at least one)."""
    if available is None:
        return jobs
    return max(1, min(jobs, available // max(per_child, CHILD_FLOOR)))


def default_jobs() -> int:
    """``--jobs`` when given, else the cores; either way no more than fit in the free memory now."""
    return fitting(requested() or cores(), CHILD_FLOOR, available_memory())


def jobs_option(func: Any) -> Any:
    """``--jobs N`` for a command: it sets ``PT2KIT_JOBS`` for this process and the ones it starts."""
    import click

    def remember(ctx: Any, param: Any, value: int | None) -> None:
        if value is not None:
            os.environ[JOBS_ENV] = str(value)

    return click.option(
        "--jobs", "-j", type=click.IntRange(1), default=None, expose_value=False, callback=remember, is_eager=True,
        help=f"Queries side by side [default: ${JOBS_ENV}, else every core, fewer when memory is short].",
    )(func)  # fmt: skip
