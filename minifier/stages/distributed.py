"""Distributed programs: from a torchrun job to one-process queries and repros.

The people whose compiles fail in a tensor-parallel job have the most expensive repro
loop of all. pt2kit takes such a job apart:

- :func:`launch_ranks` runs the job's ranks under capture, as ``torchrun
  --nproc-per-node N`` would (the same environment contract: ``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``...), each rank in a fresh process that
  writes its own capture directory; when one rank fails, the others (now stuck in a
  collective) are stopped after a grace period;
- :func:`failing_rank` picks the rank to minify: the lowest one that failed;
- every query on that rank's graphs runs in one process, its collectives on torch's
  ``fake`` process group with the job's rank and world size (:func:`join_fake_group`),
  and so does the repro (``setup_process_group`` in it): ``python repro.py``, no
  torchrun, no network.

A graph saved after AOTAutograd holds plain tensors and functional collectives that
name their process group (``'0'`` for the default one); a fake group created the same
way gets the same names. DTensor inputs of a dynamo graph are saved as their local
shard, placements and mesh (:mod:`pt2kit.seams.dtensor`).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pt2kit.processes import free_port, rank_env

from ..unit.case import GraphCase

#: Seconds the other ranks get to finish once one rank has failed (they may be stuck in a collective).
GRACE = float(os.environ.get("PT2KIT_RANK_GRACE") or 20)


def join_fake_group(case: GraphCase) -> None:
    """In a query's process: the fake process group the case's collectives need, if they need one."""
    from ..repro.writer import needs_process_group

    if not needs_process_group(case):
        return
    import torch.distributed as dist
    from pt2kit.seams.dtensor import fake_store

    if dist.is_initialized():
        return
    job = case.distributed or {}
    meshes = [i.dtensor["mesh_shape"] for i in case.inputs if i.dtensor is not None]
    world = job.get("world_size") or max((_prod(m) for m in meshes), default=1)
    dist.init_process_group("fake", store=fake_store(), rank=job.get("rank", 0), world_size=world)


def _prod(shape: list[int]) -> int:
    out = 1
    for n in shape:
        out *= n
    return out


def launch_ranks(
    commands: list[list[str]],
    env: dict[str, str],
    logs: list[Path],
    *,
    failed: Callable[[int], bool],
    on_wait: Callable[[], None] | None = None,
) -> list[int]:
    """Run one process per rank (``commands[r]``) as one job; their exit codes.

    ``failed(rank)`` says whether a rank's capture has logged a failure; once one has
    and its process has ended, the rest get :data:`GRACE` seconds, then are killed
    (-9: the rank was stuck waiting for the failed one).
    """
    world = len(commands)
    port = free_port()
    processes = []
    for rank, (command, log) in enumerate(zip(commands, logs)):
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as output:
            processes.append(
                subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=output,
                    env={**env, **rank_env(rank, world, port)},
                    start_new_session=True,
                )
            )
    deadline: float | None = None
    try:
        while any(p.poll() is None for p in processes):
            if deadline is None and any(
                p.poll() is not None and (p.returncode != 0 or failed(r)) for r, p in enumerate(processes)
            ):
                deadline = time.monotonic() + GRACE
            if deadline is not None and time.monotonic() > deadline:
                for p in processes:
                    _kill(p)
                break
            time.sleep(0.25)
            if on_wait is not None:
                on_wait()
    except BaseException:
        for p in processes:
            _kill(p)
        raise
    return [p.wait() for p in processes]


#: The marker a rank's run directory holds while the ``TORCHDYNAMO_REPRO_AFTER`` hook minifies in it.
MINIFYING = ".minifying"


@contextmanager
def minifying(run_dir: Path) -> Iterator[None]:
    """Mark ``run_dir`` as being minified by this process, a child of its launcher."""
    marker = run_dir / MINIFYING
    marker.write_text(json.dumps({"pid": os.getpid(), "launcher": os.getppid()}))
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)


def wait_for_other_ranks(out: Path, poll: float = 0.5) -> None:
    """Under torchrun, hold this rank's error until the job's other failing ranks have written their repros.

    torchrun stops every rank once one exits with an error, so the first rank to finish
    minifying would cut the others' runs short. A rank waits only for ranks that have
    already failed and are minifying (a live process of the same launcher, with a
    marker under ``out``); a healthy rank has no marker, and is never waited for.
    Each minification ends by its own timeouts, so the wait does too.
    """
    if "LOCAL_RANK" not in os.environ:
        return
    while any(_another_rank_minifying(marker) for marker in out.glob(f"run-*/{MINIFYING}")):
        time.sleep(poll)


def _another_rank_minifying(marker: Path) -> bool:
    try:
        owner = json.loads(marker.read_text())
        pid, launcher = int(owner["pid"]), int(owner["launcher"])
    except (OSError, ValueError, KeyError, TypeError):
        return False  # unreadable: not a marker this job wrote
    if pid == os.getpid() or launcher != os.getppid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False  # it died without removing its marker
    except PermissionError:
        pass
    return True


def _kill(process: subprocess.Popen[Any]) -> None:
    from ..isolation.worker import kill_program

    if process.poll() is None:
        kill_program(process)


class sigterm_deferred:
    """SIGTERM waits until the block ends, then takes effect as it would have.

    Under torchrun, the first rank to exit with an error makes the launcher send SIGTERM
    to every other rank's process group. A rank still minifying would die at once,
    while its ``python -m minifier repro`` child (which gets the same signal) is writing
    its best repro so far. Deferred, the rank waits for that child, then ends as
    SIGTERM ends it. Only the main thread can set a handler; elsewhere nothing changes.
    """

    def __enter__(self) -> None:
        import signal
        import threading

        self.received: list[int] = []
        self.armed = threading.current_thread() is threading.main_thread()
        if self.armed:
            self.previous = signal.signal(signal.SIGTERM, lambda signum, frame: self.received.append(signum))

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.armed:
            signal.signal(signal.SIGTERM, self.previous if self.previous is not None else signal.SIG_DFL)
            if self.received:
                signal.raise_signal(signal.SIGTERM)
