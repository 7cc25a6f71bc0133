"""The processes pt2kit starts: how each is launched, in which environment, and how it is killed.

Every tool starts processes of its own (the minifier's zygote and capture, replay's
frame, the hook's background run): :func:`python_command` keeps the user's working
directory from shadowing pt2kit's modules, :func:`pt2kit_env` keeps pt2kit's own
``TORCHDYNAMO_REPRO_AFTER`` hook and torch's minifier quiet in them, and
:func:`kill_group` takes a process down with the compiler subprocesses it started.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import Any

#: Set in every process pt2kit starts: its TORCHDYNAMO_REPRO_AFTER hook stays quiet there.
AUTOLOAD_ENV = "PT2KIT_AUTOLOAD"


def python_command(module: str, *args: str) -> list[str]:
    """``python -m module args`` that files in the current directory cannot shadow.

    (``-P``, Python 3.11+, keeps the working directory off ``sys.path``; on 3.10
    ``PYTHONSAFEPATH`` is not known either, so callers also run with ``cwd`` set to
    a pt2kit directory there.)
    """
    return [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m", module, *args]


def pt2kit_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process pt2kit starts: the hook quiet, torch's minifier off."""
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL")}
    env[AUTOLOAD_ENV] = "0"
    env.update(extra or {})
    return env


def kill_group(pid: int) -> None:
    """SIGKILL a process pt2kit started as a group leader, and its group with it (its compiler
    subprocesses); one already gone, or no longer ours, is left alone."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_env(rank: int, world: int, port: int) -> dict[str, str]:
    """The environment torchrun gives one rank of a single-node job."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world),
        "GROUP_RANK": "0",
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": "pt2kit",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),  # torchrun's default for several ranks
    }


def nproc_option(func: Any) -> Any:
    """``--nproc-per-node N`` for a command (its ``nproc``): SCRIPT is a torchrun job of N ranks.

    N = 1, asked for, is ``torchrun --nproc-per-node 1``: one process, given the
    rendezvous environment torchrun gives it (:func:`as_one_rank_job`); not asked for, a
    plain ``python SCRIPT``.
    """
    import click

    def job_of_one(ctx: Any, param: Any, nproc: int) -> int:
        if nproc == 1 and ctx.get_parameter_source(param.name) is not click.core.ParameterSource.DEFAULT:
            as_one_rank_job()
        return nproc

    return click.option(
        "--nproc-per-node", "nproc", type=click.IntRange(1), default=1, show_default=True, callback=job_of_one,
        help="SCRIPT is a distributed job: launch it as `torchrun --nproc-per-node N` would.",
    )(func)  # fmt: skip


def as_one_rank_job() -> None:
    """Make this process's children one rank of a torchrun job of one, as ``torchrun --nproc-per-node 1`` would.

    A script that calls ``init_process_group()`` reads its rendezvous from the environment:
    without it, it fails on ``RANK`` before compiling anything. Port 0: a job of one rank
    waits for no other, so its store takes any free port, and two runs of the program at
    once (a rerun beside the background check) never collide. What the user already set
    is kept.
    """
    for key, value in rank_env(0, 1, 0).items():
        if key != "OMP_NUM_THREADS":  # (torchrun sets it for several ranks only)
            os.environ.setdefault(key, value)
