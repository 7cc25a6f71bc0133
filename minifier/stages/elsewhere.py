"""Running a written repro as its reader will: in another directory, with torch alone, on no warm cache.

A repro is verified only once it fails the same way there (docs/repro-format.md). A
warm Inductor cache can hold a kernel compiled under state the repro does not carry (a
patched lowering, a codegen override, a custom pass): the same file then "fails" on
this machine only. :func:`verify` asks twice:
here first (the reducer's last query, or one more), then :func:`run_elsewhere`, a
fresh process that cannot see pt2kit, its run directory or its cache.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ..unit.case import GraphCase
from ..unit.check import Check, Stage, stage_below
from ..repro.files import load_repro
from ..isolation.session import Session
from ..isolation.executor import Handle
from pt2kit.signature import Kind, shows_failure
from pt2kit.script import PT2KIT_PACKAGES

from .run import Outcome, ask, run_case
from ..repro.writer import render


#: Torch-free source that runs ``sys.argv[0]`` as ``__main__`` and ends the process as Python would, less the
#: teardown of its modules: an exception printed by ``sys.excepthook`` and exit status 1, ``SystemExit``'s code,
#: its threads ended as Python's exit ends them (``threading._shutdown``: executors stopped, non-daemon threads
#: joined), ``atexit`` functions run and open files flushed, then ``os._exit``. Tearing down an
#: interpreter that imported dynamo and Inductor is a second or two of garbage collection after the verdict is
#: printed (a repro writes nothing then); Ctrl-C ends it as Python's own handler would. Open files are found by
#: type, each distinct type asked once: ``issubclass`` of each of the 400,000 objects of a heap that compiled
#: once took half a second.
RUN_THEN_EXIT = (
    "def _run_then_exit():\n"
    "    import atexit, gc, io, threading\n"
    "    code = 0\n"
    "    try:\n"
    "        runpy.run_path(sys.argv[0], run_name='__main__')\n"
    "    except SystemExit as e:\n"
    "        code = 0 if e.code is None else e.code\n"
    "        if not isinstance(code, int):\n"
    "            print(code, file=sys.stderr)\n"
    "            code = 1\n"
    "    except KeyboardInterrupt:\n"
    "        raise\n"
    "    except BaseException:\n"
    "        sys.excepthook(*sys.exc_info())\n"
    "        code = 1\n"
    "    getattr(threading, '_shutdown', lambda: None)()  # (what Python's exit does first: its threads ended)\n"
    "    atexit._run_exitfuncs()\n"
    "    heap = gc.get_objects()\n"
    "    files = {t for t in set(map(type, heap)) if issubclass(t, io.IOBase)}\n"
    "    for stream in [o for o in heap if type(o) in files] + [sys.stdout, sys.stderr]:\n"
    "        try:\n"
    "            stream.flush()\n"
    "        except Exception:\n"
    "            pass\n"
    "    os._exit(code & 0xFF)\n"
    "_run_then_exit()\n"
)


#: Runs a repro as ``python repro.py`` would, with every pt2kit package unimportable.
def torch_alone_runner(first: str = "", *, at_once: bool = False) -> str:
    """Python for ``python -P -c`` that runs ``argv[1]`` from the cwd as ``python argv[1]`` would, pt2kit
    unimportable, ``first`` run before it; ``at_once``: ended by :data:`RUN_THEN_EXIT` (a repro, not a user's program,
    whose own exit is left as it is)."""
    return (
        "import os, runpy, sys\n"
        f"for name in {PT2KIT_PACKAGES!r}:\n"
        "    sys.modules[name] = None  # importing pt2kit from a repro fails\n"
        + (f"exec(compile({first!r}, '<pt2kit workaround>', 'exec'), {{}})\n" if first else "")
        + "sys.argv = sys.argv[1:]\n"
        "sys.path.insert(0, os.getcwd())\n"
        + (RUN_THEN_EXIT if at_once else "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    )


RUN_WITH_TORCH_ALONE = torch_alone_runner(at_once=True)


@dataclass(frozen=True)
class ElsewhereRun:
    """``python repro.py`` on a clean machine: its exit status and what it printed on stderr."""

    returncode: int | None  # None: it did not finish in time
    stderr: str
    seconds: float
    cache: str  # "fresh" (an empty Inductor cache), "clean" (pt2kit's, written only by runs like this one) or "user's"


def uses_inductor(case: GraphCase, stage: str) -> bool:
    """Does running the repro compile with Inductor (whose cache could hold a stale kernel)?"""
    from ..unit.case import INDUCTOR_INNER_COMPILE

    return stage == Stage.INDUCTOR or case.compiler == INDUCTOR_INNER_COMPILE or "inductor" in str(case.backend)


def clean_inductor_cache(case: GraphCase, stage: str) -> Path | None:
    """The Inductor cache a verification may share: pt2kit's own, or None for a fresh empty one.

    A kernel compiled under state its cache key does not cover (a patched lowering, a
    codegen override) would make a repro "fail" on this machine only. pt2kit's clean
    cache is written by nothing but these runs of repros that carry none of the user's
    code (no definitions, no user modules): under pristine torch, its keys are sound.
    Any other repro that compiles with Inductor gets an empty cache (one that does not
    never reads it).
    """
    if uses_inductor(case, stage) and (case.definitions.strip() or case.modules):
        return None
    return clean_cache_root()


def clean_cache_root() -> Path | None:
    """pt2kit's clean Inductor cache (made if need be), or None where it cannot be made."""
    root = (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "pt2kit"
        / f"inductor-clean-{torch.__version__}"
    )
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return root


#: A fresh interpreter's code that imports torch (and the modules in ``{preload}``), then
#: waits for one line on stdin (the repro's file name and the Inductor cache it runs on, as
#: JSON) and runs that repro as :data:`RUN_WITH_TORCH_ALONE` would, exit included. Neither import reads
#: the cache or the repro's directory (Inductor asks for its cache directory when it
#: compiles), nor do Inductor's CPU probes (``{prepay}``: :func:`prepaid_probes`, built in
#: pt2kit's clean cache): paid beforehand, it is the same run, 3 to 5 s sooner.
READY_RUNNER = (
    "import importlib, json, os, runpy, sys\n"
    f"for name in {PT2KIT_PACKAGES!r}:\n"
    "    sys.modules[name] = None  # importing pt2kit from a repro fails\n"
    "import torch  # (every repro's first import)\n"
    "for name in {preload!r}:  # (what the repro's compile imports)\n"
    "    importlib.import_module(name)\n"
    "{prepay}"
    "order = json.loads(sys.stdin.readline() or 'null')\n"
    "if order is None:\n"
    "    sys.exit(0)  # never asked\n"
    "os.environ['TORCHINDUCTOR_CACHE_DIR'] = order['cache']\n"
    "sys.argv = [order['name']]\n"
    "sys.path.insert(0, os.getcwd())\n"
    + RUN_THEN_EXIT
)


def elsewhere_env() -> dict[str, str]:
    """The environment of a run elsewhere, its Inductor cache aside: the user's, no repro hook, no PYTHONPATH, no pt2kit
    autoload, and none of the variables torch's compile-relevant config is read from (the repro carries those keys)."""
    from pt2kit.seams.config import environment_variables

    carried = environment_variables()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCHDYNAMO_REPRO", "PYTHONPATH", "TORCHINDUCTOR_CACHE_DIR")) and k not in carried
    }
    env["PT2KIT_AUTOLOAD"] = "0"
    return env


class ReadyInterpreter:
    """A fresh ``python -P`` in an empty directory of its own that has imported torch and waits for a repro.

    Started once the program has failed (:func:`get_ready_early`), or else as the reduction starts
    (:func:`get_ready`), so that the written repro's run
    elsewhere (:func:`run_elsewhere`) does not pay torch's import after the repro is
    written. It runs one repro, once; :meth:`close` kills it and removes its directory,
    used or not (the session closes an unused one).
    """

    def __init__(self, preload: tuple[str, ...] = (), *, probes: Path | None = None) -> None:
        import subprocess
        import sys
        import tempfile

        self._where = tempfile.TemporaryDirectory(prefix="pt2kit-elsewhere-")
        self.where = Path(self._where.name)
        self.err = tempfile.TemporaryFile()
        runner = READY_RUNNER.replace("{preload!r}", repr(preload)).replace("{prepay}", prepaid_probes(probes))
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-c", runner],
            cwd=self.where,
            env=elsewhere_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=self.err,
        )

    def order(self, name: str, cache: str) -> bool:
        """Run the repro ``name`` (copied into :attr:`where`) on ``cache``; False when the interpreter is gone."""
        import json

        if self.process.poll() is not None or self.process.stdin is None:
            return False
        try:
            self.process.stdin.write((json.dumps({"name": name, "cache": cache}) + "\n").encode())
            self.process.stdin.close()
        except OSError:  # (it died between the poll and the write)
            return False
        return True

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.err.close()
        self._where.cleanup()


#: What a repro that compiles with Inductor imports before it compiles: about 2 s.
INDUCTOR_MODULES = ("torch._dynamo", "torch._inductor.compile_fx")


def prepaid_probes(cache: Path | None) -> str:
    """Source that asks Inductor's CPU probes ahead (:data:`pt2kit.seams.vec_isa.PREPAY`, about 1.5 s), their
    programs built in ``cache`` (pt2kit's clean one: built once per machine), then leaves the cache unset again
    for the repro; nothing for no ``cache``."""
    if cache is None:
        return ""
    from pt2kit.seams.vec_isa import PREPAY

    return (
        f"os.environ['TORCHINDUCTOR_CACHE_DIR'] = {str(cache)!r}\n"
        f"exec(compile({PREPAY!r}, '<inductor cpu probes>', 'exec'), {{}})\n"
        "os.environ.pop('TORCHINDUCTOR_CACHE_DIR', None)\n"
    )


def get_ready(session: Session, case: GraphCase, stage: str) -> None:
    """Start the interpreter the written repro of ``case`` at ``stage`` will run elsewhere in
    (:class:`ReadyInterpreter`), unless one waits already; Inductor imported too when the repro compiles with it."""
    get_ready_early(session, inductor=uses_inductor(case, stage))


def get_ready_early(session: Session, *, inductor: bool) -> None:
    """:func:`get_ready` as soon as the program has failed, its stage a guess (``inductor``: the program compiles with
    it): preparing takes some 5 s of CPU, which a reduction of a few seconds, two compiles at a time, leaves it too
    little of. A wrong guess costs only time (Inductor imported for nothing, or when the repro runs)."""
    if session.ready is None and os.environ.get("PT2KIT_VERIFY_ELSEWHERE") != "0":
        session.ready = ReadyInterpreter(INDUCTOR_MODULES if inductor else (), probes=clean_cache_root() if inductor else None)


def run_elsewhere(
    path: Path,
    timeout: float | None,
    *,
    python: Path | None = None,
    while_running: Callable[[Callable[[], bool]], None] | None = None,
    ready: ReadyInterpreter | None = None,
) -> ElsewhereRun:
    """Run the repro at ``path`` as its reader will: a copy in a new directory, torch alone, no warm cache.

    The repro and the files beside it it needs (its data file, copied user modules)
    go to a temporary directory; the child runs there with pt2kit unimportable, its
    autoload hook off, and an Inductor cache that cannot hold kernels compiled under
    state the repro does not carry (:func:`clean_inductor_cache`). ``python``: the
    interpreter of another environment (another torch release, any repro, pt2kit's or
    torch's own), which always gets an empty cache. ``while_running(done)``: work done
    meanwhile, which returns soon after ``done()`` says the run ended (its time is the
    run's, within ``timeout``). ``ready``: an interpreter that imported torch already,
    in a directory of its own, to run it in (used up; a fresh one when it is gone).
    """
    import contextlib
    import shutil
    import subprocess
    import sys
    import tempfile
    import time

    ready = ready if python is None else None
    with contextlib.ExitStack() as stack:
        where = str(ready.where) if ready else stack.enter_context(tempfile.TemporaryDirectory(prefix="pt2kit-elsewhere-"))
        for sibling in path.parent.iterdir():
            if sibling.is_file() and sibling.suffix in (".py", ".pt"):
                shutil.copy(sibling, Path(where) / sibling.name)
            elif sibling.is_dir() and (sibling / "__init__.py").is_file():  # a user package copied beside it
                shutil.copytree(sibling, Path(where) / sibling.name, ignore=shutil.ignore_patterns("__pycache__"))
        loaded = load_repro(path) if python is None else None
        clean = clean_inductor_cache(loaded.case, loaded.stage) if loaded is not None else None
        cache = str(clean) if clean is not None else str(Path(where) / "inductor-cache")
        start = time.perf_counter()
        if ready is not None and ready.order(path.name, cache):
            child, err = ready.process, ready.err
        else:
            err = stack.enter_context(tempfile.TemporaryFile())  # (a ready one gone: a fresh one in its directory)
            child = subprocess.Popen(
                # (-P, safe here, is not known to a Python older than 3.11 another environment may have)
                ([sys.executable, "-P"] if python is None else [str(python)]) + ["-c", RUN_WITH_TORCH_ALONE, path.name],
                cwd=where,
                env={**elsewhere_env(), "TORCHINDUCTOR_CACHE_DIR": cache},
                stdout=subprocess.DEVNULL,
                stderr=err,  # (a file, not a pipe: nobody reads a pipe while the work meanwhile runs)
            )
        try:
            if while_running is not None:
                while_running(lambda: child.poll() is not None)
            left = None if timeout is None else max(0.0, timeout - (time.perf_counter() - start))
            returncode: int | None = child.wait(timeout=left)
        except subprocess.TimeoutExpired:
            returncode = None
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    # (all of it: a C++ compile error's line comes before the compiler's whole output)
    return ElsewhereRun(returncode, stderr, time.perf_counter() - start, "clean" if clean is not None else "fresh")


def plain_run(
    script: Path, args: list[str], timeout: float | None, *, first: str = "", users_cache: bool = False
) -> ElsewhereRun:
    """The user's program as ``python SCRIPT ARGS`` runs it, nothing of pt2kit's: torch alone, its own directory, an empty Inductor cache.

    ``first``: code run before it (a workaround). ``users_cache``: the Inductor cache the
    user's own runs use, not an empty one (a workaround's run, whose code turns the
    whole-graph caches off: what is left cached is kernels, keyed by their source, which
    an empty cache would compile again, half the run of a small program).
    ``returncode`` None: it ran out of time.
    """
    import contextlib
    import subprocess
    import sys
    import tempfile
    import time

    with contextlib.nullcontext(None) if users_cache else tempfile.TemporaryDirectory(prefix="pt2kit-plain-") as cache:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDYNAMO_REPRO")}
        env.update({"PT2KIT_AUTOLOAD": "0", **({"TORCHINDUCTOR_CACHE_DIR": cache} if cache else {})})
        start = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, "-P", "-c", torch_alone_runner(first), script.name, *args],
                cwd=script.parent,
                env=env,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
            )
            returncode, stderr = done.returncode, done.stderr
        except subprocess.TimeoutExpired:
            returncode, stderr = None, ""
    return ElsewhereRun(returncode, stderr, time.perf_counter() - start, "user's" if users_cache else "fresh")


#: How a run elsewhere ends when something outside it kills it (SIGTERM, SIGKILL): asked once more.
KILLED = (-15, -9)


def last_words(stderr: str) -> str:
    """A failed run's last exception line (``AssertionError: ...``), else its last line, at most 200 characters."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    raised = [line for line in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", line)]
    return ((raised or lines or [""])[-1])[:200]


#: The label of the written repro's run here, in a query.
HERE = "checking the written repro fails the same way"


def wrong_below_too(session: Session, case: GraphCase, check: Check) -> str | None:
    """A note when a wrong answer's repro is wrong under the stage below too, where the program's graph was right.

    A wrong answer's signature is one for any wrong answer: cutting nodes can turn the graph
    into another bug's (a no_grad view made an output, whose gradient AOTAutograd lets flow),
    and the reducer cannot tell. The stage below tells: the program's own bug was not there.
    (:func:`ask_below` starts the query, to run beside the repro's run elsewhere; this waits for it.)
    """
    return note_below(session, ask_below(session, case, check))


def note_below(session: Session, asked: AskedBelow | None) -> str | None:
    """:func:`wrong_below_too`'s note, once the query :func:`ask_below` started has answered."""
    if asked is None:
        return None
    outcome = Outcome.of_query(asked.stage, session.wait(asked.handle))
    if outcome.failure is None or outcome.failure.signature.kind != Kind.ACCURACY:
        return None
    return (
        f"repro.py is wrong under {asked.stage} too, where the program's graph was right: its wrong answer may be another "
        "bug than the program's (the reduction tells wrong answers apart only by the stage they show at); "
        "work/origin holds the graph before minification"
    )


@dataclass(frozen=True)
class AskedBelow:
    """The query of :func:`wrong_below_too`, started: the stage below and its handle."""

    stage: str
    handle: Handle


def ask_below(session: Session, case: GraphCase, check: Check) -> AskedBelow | None:
    """Start :func:`wrong_below_too`'s query (a wrong answer with a stage below only)."""
    below = stage_below(check.stage)
    if check.failure.kind != Kind.ACCURACY or below is None:
        return None
    query = functools.partial(run_case, case, below, accuracy=check.accuracy)
    return AskedBelow(below, session.start(query, f"repro.py under {below}, the stage below"))


def verify(session: Session, path: Path, check: Check, asked: GraphCase) -> tuple[bool, str | None]:
    """Does the written repro fail as ``check`` asks on another machine? (verified, why not)

    First here: the file, read back, runs in a query, even when its code is exactly that
    of the reducer's last failing query (``asked``). Then as its reader will run it
    (docs/repro-format.md): a copy in another directory, torch
    alone, and no warm Inductor cache (:func:`~minifier.repro.files.run_elsewhere`). Both
    must fail; with more than one job they run side by side, the run here still right
    after the reducer's last query in the worker: of two runs in a row of a failure
    that shows every other run (state the program's compiles share), one passes, so such
    a failure is caught on every run of pt2kit whichever path the reduction took, then
    measured (:mod:`minifier.stages.flaky`). ``check.tries``: a known flaky failure gets that
    many runs here, one failing enough (the repro's own loop runs it that often elsewhere).
    (``PT2KIT_VERIFY_ELSEWHERE=0``, pt2kit's own tests: no run elsewhere, and none here
    either when the last failing query asked the very same code.)
    """
    target, tries = check.failure, check.tries
    loaded = load_repro(path)
    same = render(loaded.case, stage=loaded.stage, accuracy=loaded.accuracy, strict=loaded.strict) == render(
        asked, stage=loaded.stage, accuracy=loaded.accuracy, strict=loaded.strict
    )
    elsewhere_too = os.environ.get("PT2KIT_VERIFY_ELSEWHERE") != "0"
    # the file's own question: its stage and accuracy mode, as it wrote them
    written = Check(loaded.stage, target, "strict" if loaded.strict else loaded.accuracy)
    not_here = (
        "the written repro.py failed once, then passed when run again: the failure does not show in every run"
        if same
        else "the written repro.py did not reproduce the failure when read back; the graph in work/origin does"
    )
    here: Handle | None = None
    if elsewhere_too and tries == 1 and session.jobs > 1:  # (both at once: the one here follows the reducer's all the same)
        here = session.start(functools.partial(run_case, loaded.case, written.stage, accuracy=written.accuracy), HERE)
    else:
        for _ in range(tries if elsewhere_too or not same else 0):
            if ask(session, loaded.case, written, HERE).fails(written):
                break
        else:
            if elsewhere_too or not same:
                return False, not_here
    beside = elsewhere_too and session.jobs > 1  # (the stage below's query beside the run elsewhere: else one at a time)
    below = ask_below(session, loaded.case, written)
    also = None if beside else note_below(session, below)
    if os.environ.get("PT2KIT_VERIFY_ELSEWHERE") == "0":  # (pt2kit's own test suite, for speed: see tests/conftest.py)
        return True, "; ".join(filter(None, ["not run on another machine (PT2KIT_VERIFY_ELSEWHERE=0): verified here only", also]))
    meanwhile = session.while_verifying
    ready, session.ready = session.ready, None
    try:
        elsewhere = session.timed(
            "running repro.py elsewhere: torch alone, another directory, no warm cache",
            lambda: run_elsewhere(
                path,
                session.timeout,
                while_running=None if meanwhile is None else functools.partial(meanwhile, loaded.case, written),
                ready=ready if isinstance(ready, ReadyInterpreter) else None,
            ),
        )
    finally:
        if ready is not None:
            ready.close()
    if beside:
        also = note_below(session, below)
    if here is not None and not Outcome.of_query(written.stage, session.wait(here)).fails(written):
        return False, not_here
    if not shows_failure(elsewhere.returncode, elsewhere.stderr, target) and elsewhere.returncode in KILLED:
        # killed from outside (a cleanup's signal, the OOM killer): not the repro's answer; one more run says it
        elsewhere = session.timed(
            "running repro.py elsewhere again: the first run was killed from outside",
            lambda: run_elsewhere(path, session.timeout),
        )
    if shows_failure(elsewhere.returncode, elsewhere.stderr, target):
        return True, also
    (session.run_dir / "logs").mkdir(parents=True, exist_ok=True)
    (session.run_dir / "logs" / "repro-elsewhere.log").write_text(elsewhere.stderr)
    shown = (
        "did not finish in time"
        if elsewhere.returncode is None
        else "passed"
        if elsewhere.returncode == 0
        else f"exited {elsewhere.returncode} another way"
    )
    return False, (
        f"repro.py fails here but, run with torch alone in another directory on a {elsewhere.cache} Inductor cache, it {shown} "
        "(logs/repro-elsewhere.log): the failure needs state the repro does not carry"
    )
