"""The Python API: ``save_repro``, ``bisect`` and ``minify`` on a callable and its arguments.

These run inside the user's program, which may be multi-threaded (a training loop
that has computed for hours), so pt2kit never forks from it. The callable is
captured here: each dynamo graph it produces is saved, with its real inputs, as a
runnable ``repro.py`` (:func:`save_repro`, torch RFC #196186: "save a repro at step
1000 without env vars"). :func:`bisect` and :func:`minify` then hand those files to
the ``minify`` command in a fresh process (``--saved``: the graphs are bisected in
the order the program compiled them; no program runs again), and return its JSON
report. The user's process never compiles with the backend under suspicion: a crash
in compiled code cannot take it down.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pt2kit.errors import UserFacingError

if TYPE_CHECKING:
    from .unit.accuracy import Accuracy


def save_repro(
    fn: Callable[..., Any],
    *args: Any,
    backend: str | Callable[..., Any] | None = None,
    out: str | os.PathLike[str] | None = None,
    **kwargs: Any,
) -> Path:
    """Save every graph ``fn(*args, **kwargs)`` compiles to as a runnable ``repro.py``.

    ``fn`` runs once, with its graphs executed eagerly (nothing is compiled by
    ``backend``, which is only written into the repros as the stage to run). Returns
    the new run directory; graph *N* is at ``<run dir>/g<N>/repro.py``. Already
    compiled functions and modules (``torch.compile(model, backend=..., dynamic=True)``),
    and plain steps that call them, run as they are, their graphs saved as the program
    compiles them; their backend is the stage unless ``backend`` names another: a
    registered name, ``module:function``, or the backend function itself. One that calls
    ``torch.compile`` itself runs as it is, each graph named by the backend (and
    ``mode=``/``options=`` config) that call resolved. A plain ``fn`` that calls nothing
    compiled is compiled whole.
    """
    import torch

    from .capture import hooks
    from .capture.casemaker import make_case
    from .capture.context import describe_backend, learn_dynamo_own_patches
    from .capture.patches import program_state
    from .isolation.session import default_out_dir, new_run_dir
    from .repro.files import write_repro
    from .unit.case import GraphId
    from pt2kit.seams.backend_registry import compiled_backend, with_fullgraph

    info = _backend_info(fn, backend)  # an unknown name fails here
    learn_dynamo_own_patches()
    run_dir = new_run_dir(
        Path(out) if out is not None else default_out_dir(), getattr(fn, "__name__", type(fn).__name__)
    )
    saved: list[Path] = []
    missing: dict[str, None] = {}
    resolved: list[Any] = []  # the backends ``torch.compile`` resolved during the call, in order

    @hooks.internal
    def save_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        # the program's patches of torch ride with each graph, as minify run's capture carries them
        state = program_state()
        named = describe_backend(resolved[-1], None) if resolved else info
        case = state.applied_to(make_case(gm, example_inputs, backend=named, index=len(saved)))
        missing.update(dict.fromkeys(state.missing))
        note = "Saved by minifier.save_repro." + (f" The {_carried_by_none(state.missing)}." if state.missing else "")
        saved.append(write_repro(case, run_dir / str(GraphId(case.index)), stage=named.name, note=note))
        return gm.forward

    # Every compile in the call goes to save_graph (nothing here compiles with the backend under suspicion).
    # A compiled ``fn``, or one that calls what the program compiled, runs as it is: its graphs are the
    # program's own, with their boundaries and options (``dynamic=True``); only a plain ``fn`` is compiled whole.
    # ``torch.compile(model, mode=...)`` called inside a plain ``fn`` resolves its backend during the call, and
    # the stance hands that backend's graphs to save_graph: each is named by the backend resolved last.
    compiled_already = compiled_backend(fn) is not None or bool(_backends_inside(fn))
    calls_compiled = compiled_already or _compiles_inside(fn)
    learns = backend is None and not compiled_already

    def learned(resolved_backend: Any, name: str | None) -> Any:
        resolved.append(resolved_backend)
        return resolved_backend

    learning = hooks.dynamo_backends(learned) if learns else contextlib.nullcontext()
    try:
        with learning:
            if (whole := with_fullgraph(fn, save_graph)) is not None:  # (a stance would drop its fullgraph)
                whole(*args, **kwargs)
            else:
                with torch.compiler.set_stance("default", force_backend=save_graph):
                    if calls_compiled:
                        fn(*args, **kwargs)
                    else:
                        torch.compile(fn, backend=save_graph)(*args, **kwargs)
    except Exception as e:
        from .capture.frames import where_it_failed

        tracing = where_it_failed(e) == "tracing"
        if tracing:  # dynamo failed on a frame: the frame, lifted, is the graph
            saved += _lifted_frame(e, run_dir, len(saved))
        if not saved:  # (before any graph, and in no frame dynamo lifted, the error is the function's own)
            raise
        # Eager refusing what the compiled program returns is itself the bug (minify with accuracy);
        # the graphs saved so far are kept. Dynamo failing to trace is its own (no eager run raised).
        from pt2kit.signature import said

        (run_dir / (TRACING_FAILED if tracing else EAGER_RAISED)).write_text(said(e))
    (run_dir / "graphs.json").write_text(json.dumps([str(p) for p in saved], indent=2))
    if missing:
        (run_dir / STATE_MISSING).write_text(json.dumps(list(missing), indent=2))
    return run_dir


def _graphs_to_judge(fn: Callable[..., Any], args: tuple[Any, ...], backend: Any, out: Any, kwargs: dict[str, Any]) -> Path:
    """:func:`save_repro`, for an API that gives a verdict: dynamo failing to trace before any graph is exit 5's."""
    try:
        return save_repro(fn, *args, backend=backend, out=out, **kwargs)
    except Exception as e:
        from .capture.frames import where_it_failed
        from pt2kit.errors import NotReproducible
        from pt2kit.signature import said

        if where_it_failed(e) != "tracing":
            raise
        raise NotReproducible(  # (as minify run says: no graph to blame)
            _tracing_failed(said(e), " before any graph existed, and the frame it failed on could not be lifted to a graph")
        ) from e


def _tracing_failed(error: str, why: str) -> str:
    """The API's verdict on a failure in dynamo's own tracing: ``error`` (one line), then ``why`` no graph shows it (a clause)."""
    return f"dynamo failed tracing the function ({error}){why}: the failure is in dynamo's own tracing, not in a graph"


def _lifted_frame(exc: BaseException, run_dir: Path, index: int) -> list[Path]:
    """The frame dynamo failed to trace, lifted to graphs at stage ``eager`` as ``minify run``'s capture lifts it
    (:func:`~minifier.capture.frames.liftings`)."""
    from .capture.frames import failing_frame, frame_of_exception, liftings
    from .repro.files import write_repro
    from .unit.case import GraphId

    failing = failing_frame(exc)
    if failing is None:
        return []
    frame, saved = frame_of_exception(exc), list[Path]()
    for _, how, lift in liftings():
        try:
            case = lift(failing, frame).replace(index=index + len(saved))
            note = f"Frame {failing.code.co_name}, recorded as {how} by minifier.save_repro; dynamo failed on it."
            saved.append(write_repro(case, run_dir / str(GraphId(case.index)), stage="eager", note=note))
        except Exception:  # noqa: BLE001 - lifting is best effort; the function's own error stands without it
            continue
    return saved


#: Beside ``graphs.json``: the error ``fn`` raised with its graphs run eagerly, one line, where a graph was saved before it.
EAGER_RAISED = "eager_raised.txt"

#: Beside ``graphs.json``: the error dynamo raised tracing a frame of ``fn``, one line (the frame, lifted, is saved).
TRACING_FAILED = "tracing_failed.txt"

#: Beside ``graphs.json``: the program's changes to torch no repro carries (:func:`~minifier.capture.patches.state_missing`).
STATE_MISSING = "state_missing.json"


def _carried_by_none(missing: list[str]) -> str:
    """The clause (after "the") that names the program's changes to torch no repro carries."""
    return f"program changed torch in ways no repro carries: {'; '.join(missing)}"


def _backend_info(fn: Callable[..., Any], backend: str | Callable[..., Any] | None) -> Any:
    """How the repros name the stage ``backend=`` asks for (see :func:`save_repro`)."""
    from pt2kit.backends import resolve_backend

    from .capture.context import describe_backend
    from pt2kit.seams.backend_registry import compiled_backend

    if isinstance(backend, str):
        return describe_backend(resolve_backend(backend), backend)
    resolved = (compiled_backend(fn) or _compiled_inside(fn)) if backend is None else backend
    if resolved is None:
        return describe_backend(resolve_backend("inductor"), "inductor")
    return describe_backend(resolved, None)


def _compiled_inside(fn: Callable[..., Any]) -> Any:
    """The one backend that what ``fn`` calls was compiled with (None: none, or several)."""
    backends = _backends_inside(fn)
    return next(iter(backends.values())) if len(backends) == 1 else None


def _backends_inside(fn: Callable[..., Any]) -> dict[int, Any]:
    """The backends of the compiled objects ``fn`` calls, by id (empty: it calls nothing compiled).

    A training step is often a plain function over a compiled model
    (``model = torch.compile(net, backend=...)``, a global or a closure of the step, or an
    attribute of its ``self``). Such a step runs as it is (:func:`save_repro`), and the
    model's backend is the stage the user asked for, so the repros name it.
    """
    import torch

    from pt2kit.seams.backend_registry import cell_contents, compiled_backend

    function = getattr(fn, "__func__", fn)
    code, names = getattr(function, "__code__", None), getattr(function, "__globals__", {})
    seen = [names[name] for name in (code.co_names if code is not None else ()) if name in names]
    seen += [cell_contents(cell) for cell in getattr(function, "__closure__", None) or ()]
    owner = getattr(fn, "__self__", None)
    seen += list(vars(owner).values()) if hasattr(owner, "__dict__") else []
    seen += [child for o in seen if isinstance(o, torch.nn.Module) for child in o._modules.values()]
    return {id(b): b for b in (compiled_backend(o) for o in seen if o is not fn) if b is not None}


def _compiles_inside(fn: Callable[..., Any]) -> bool:
    """Does ``fn``'s own code call ``torch.compile`` (``torch.compile(model, mode=...)(x)`` in a step)?

    Compiled whole, such a step would be one graph, traced through the compile it asks for and
    without that compile's backend and options: it runs as it is instead (:func:`save_repro`).
    """
    import torch

    function = getattr(fn, "__func__", fn)
    codes, names = [getattr(function, "__code__", None)], getattr(function, "__globals__", {})
    while codes and (code := codes.pop()) is not None:
        words = set(code.co_names)
        if "compile" in words and (names.get("torch") is torch or names.get("compile") is torch.compile):
            return True
        codes += [c for c in code.co_consts if hasattr(c, "co_names")]  # (a lambda or function defined inside)
    return False


def _saved_graphs(run_dir: Path) -> list[Path]:
    """The repros :func:`save_repro` wrote, in the order the program compiled their graphs."""
    return [Path(p) for p in json.loads((run_dir / "graphs.json").read_text())]


def _echoing_progress(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (a ``minify`` command); its progress on stderr is echoed to the caller's stderr as it comes,
    as the command line shows it, for a run of minutes; stdout (the JSON report) is kept whole."""
    import sys
    import threading

    from pt2kit.processes import pt2kit_env

    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", env=pt2kit_env(),
        stdin=subprocess.DEVNULL,
    ) as process:  # fmt: skip
        assert process.stdout is not None and process.stderr is not None
        stdout: list[str] = []
        reader = threading.Thread(target=lambda: stdout.append(process.stdout.read()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        said: list[str] = []
        for line in process.stderr:
            said.append(line)
            if sys.stderr is not None:  # (None under pythonw)
                sys.stderr.write(line)
                sys.stderr.flush()
        reader.join()
        returncode = process.wait()
    return subprocess.CompletedProcess(argv, returncode, "".join(stdout), "".join(said))


def _command(command: str, saved: list[Path], options: dict[str, Any]) -> dict[str, Any]:
    """``minify <command> --saved`` on the saved graphs, in a fresh process; its JSON report."""
    from pt2kit.errors import NoFailure, UsageError, plural

    if not (isinstance(options.get("timeout"), (int, float)) and options["timeout"] > 0):
        raise UsageError(f"timeout must be a positive number of seconds, not {options.get('timeout')!r}")
    if not saved:
        raise NoFailure("nothing was compiled: the function ran without torch.compile producing a graph")
    from pt2kit.processes import python_command

    argv = python_command("minifier", command, "--json", "--saved", *_flags(options))
    done = _echoing_progress([*argv, *map(str, saved)])
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        from pt2kit.errors import InternalError

        raise InternalError(
            f"minify {command} gave no report (exit {done.returncode}): {(done.stderr.strip().splitlines() or [''])[-1]}"
        ) from None
    if done.returncode != 0:
        message = report.get("message", "minify failed")
        tracing = saved[0].parent.parent / TRACING_FAILED
        if report.get("status") == NoFailure.status and tracing.exists():  # (as minify run says of it: no graph to blame)
            message = _tracing_failed(tracing.read_text(), ", and the frame it failed on, lifted to a graph, passes every stage alone")
        elif report.get("status") == NoFailure.status:  # (its message names pt2kit's own files of the graphs)
            message = f"{plural(len(saved), 'graph')} of the function {'passes' if len(saved) == 1 else 'pass'} every stage" + _judged(options.get("accuracy"), len(saved))
        lacking = saved[0].parent.parent / STATE_MISSING
        if lacking.exists():  # (the graphs may fail only with those changes)
            message += f"; the {_carried_by_none(json.loads(lacking.read_text()))}"
        raised = saved[0].parent.parent / EAGER_RAISED
        if raised.exists() and not options.get("accuracy"):  # (the compiled program may return where eager raises)
            message += f"; run eagerly, the function raised {raised.read_text()} (accuracy=True judges a compiled run that returns instead)"
        error = UserFacingError(message)
        error.exit_code = done.returncode
        error.status = report.get("status", "error")
        raise error
    return report


def _flags(options: dict[str, Any]) -> list[str]:
    """The command line's options for the API's keywords: ``accuracy="strict"`` is ``--strict-accuracy``."""
    flags: list[str] = []
    for name, value in options.items():
        if name == "accuracy" and value == "strict":
            flags.append("--strict-accuracy")
        elif value is True:
            flags.append(f"--{name}")
        elif value not in (None, False):
            flags += [f"--{name}", str(value)]
    return flags


def _in(run_dir: Path) -> dict[str, Any]:
    """The command's run directory: the one the graphs were saved in (``--out``, its parent: where the command
    line's run looks for an interrupted run of the same graph to resume)."""
    return {"out": run_dir.parent, "run-dir": run_dir}


def _judged(accuracy: Any, count: int) -> str:
    """How ``count`` graphs that pass every stage were judged, and what would judge them more closely."""
    their, them = ("its", "it") if count == 1 else ("their", "them")
    if accuracy == "strict":
        return f", {their} results equal to eager's bit for bit"
    if accuracy:
        return f", {their} results within the fp64 rule's tolerance of eager's; accuracy='strict' judges {them} bit for bit"
    return f"; accuracy=True compares {their} results with eager's"


def bisect(
    fn: Callable[..., Any],
    *args: Any,
    backend: str | Callable[..., Any] | None = None,
    accuracy: Accuracy = False,
    out: str | os.PathLike[str] | None = None,
    timeout: float = 300.0,
    **kwargs: Any,
) -> dict[str, Any]:
    """Which graph of ``fn(*args)`` fails, and at which stage: ``minify bisect``'s JSON report."""
    run_dir = _graphs_to_judge(fn, args, backend, out, kwargs)
    return _command("bisect", _saved_graphs(run_dir), {"accuracy": accuracy, **_in(run_dir), "timeout": timeout})


def minify(
    fn: Callable[..., Any],
    *args: Any,
    backend: str | Callable[..., Any] | None = None,
    accuracy: Accuracy = False,
    after: str = "auto",
    out: str | os.PathLike[str] | None = None,
    timeout: float = 300.0,
    torch_versions: str | list[str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Shrink the first failing graph of ``fn(*args)`` to a minimal repro: ``minify run``'s report.json.

    ``torch_versions``: also run the repro under these torch releases (``--torch-versions``'s SPECs).
    """
    run_dir = _graphs_to_judge(fn, args, backend, out, kwargs)
    releases = ",".join([torch_versions] if isinstance(torch_versions, str) else torch_versions or []) or None
    options = {"accuracy": accuracy, "after": after, **_in(run_dir), "timeout": timeout, "torch-versions": releases}
    return _command("run", _saved_graphs(run_dir), options)
