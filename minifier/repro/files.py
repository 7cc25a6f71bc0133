"""Repro files on disk: writing a case as ``repro.py`` (and its data), and reading one back.

Captured graphs, checkpoints and the final ``repro.py`` are all the same thing on disk.
:func:`write_repro` writes a case with :func:`minifier.repro.writer.render`, its real tensors
content-addressed beside it (``inputs-<sha>.pt``) and the small user modules it
imports copied beside it. :func:`load_repro` reads one back: the ``PT2KIT`` literal
with ``ast.literal_eval``, tensors with ``weights_only=True``, the graph from its
written structure (:mod:`minifier.unit.graphio`); the file's code runs only for its
imports and carried definitions. Nothing is ever unpickled. :func:`case_payload` is
how a case crosses to a worker child, as the same text and tensors.
"""

from __future__ import annotations

import ast
import copyreg
import hashlib
import io
import inspect
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx
from torch.overrides import TorchFunctionMode

from ..unit.case import BackwardCall, CompileContext, GraphCase, GraphInput, TensorMeta
from pt2kit.errors import CorruptRecord
from ..unit.graphio import GraphFormatError, load_graph
from pt2kit.seams import compiler_state, config, pytree
from pt2kit.script import CARRIED_MODULE
from pt2kit.signature import Signature
from .inputs import inline_data
from .writer import FORMAT_VERSION, data_of, render, split_future

if TYPE_CHECKING:
    from ..unit.accuracy import Accuracy


def save_data(data: dict[str, torch.Tensor], directory: Path) -> str | None:
    """Save tensors content-addressed beside a repro; returns the file name, or None if empty."""
    if not data:
        return None
    buffer = io.BytesIO()
    torch.save(dict(sorted(data.items())), buffer)
    payload = buffer.getvalue()
    name = f"inputs-{hashlib.sha256(payload).hexdigest()[:16]}.pt"
    path = directory / name
    if not path.exists():
        _atomic_write(path, payload)
    return name


def write_repro(
    case: GraphCase,
    directory: Path,
    *,
    stage: str,
    failure: Signature | None = None,
    accuracy: Accuracy = False,
    name: str = "repro.py",
    note: str = "",
    strict: bool = False,
    tries: int = 1,
) -> Path:
    """Write ``case`` as ``directory/name`` (and its data file when it needs real values).

    ``tries``: a flaky failure's repro runs the failing stage up to this many times.

    pt2kit only writes inside its own run directories, but an existing file there is
    replaced atomically so a checkpoint is never half-written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    copy_modules(case, directory)
    data_file = None if inline_data(case) is not None else save_data(data_of(case), directory)
    source = render(
        case,
        stage=stage,
        failure=failure,
        accuracy=accuracy,
        data_file=data_file,
        note=note,
        strict=strict,
        tries=tries,
    )
    path = directory / name
    _atomic_write(path, source.encode())
    return path


#: User modules up to this size are copied beside a repro, so that it runs anywhere.
COPY_LIMIT = 256 * 1024


def copy_modules(case: GraphCase, directory: Path) -> None:
    """Copy the user modules a repro imports beside it: a single file, or the ``.py`` files of its top package.

    Up to :data:`COPY_LIMIT` bytes each; larger ones, and packages with compiled
    extensions (which a copy of the sources would not import), stay on ``PYTHONPATH``.
    What is there already is kept.
    """
    for name, root in case.modules:
        if not root:
            continue
        top = name.split(".")[0]
        single, package = Path(root, f"{top}.py"), Path(root, top)
        if single.is_file():
            sources = [(single, directory / single.name)]
        elif (package / "__init__.py").is_file():
            files = sorted(package.rglob("*"))
            if any(f.suffix in (".so", ".pyd") for f in files):
                continue
            sources = [(f, directory / top / f.relative_to(package)) for f in files if f.suffix == ".py" and f.is_file()]
        else:
            continue
        if sum(source.stat().st_size for source, _ in sources) > COPY_LIMIT:
            continue
        for source, target in sources:
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                _atomic_write(target, source.read_bytes())


def module_root(name: str) -> str:
    """The ``sys.path`` entry a user module is imported from ("" when it cannot be found)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return ""
    if spec is None or not spec.origin:
        return ""
    root = Path(spec.origin).parent
    for _ in range(name.count(".") + (1 if spec.origin.endswith("__init__.py") else 0)):
        root = root.parent
    return str(root)


def _atomic_write(path: Path, payload: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(payload)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- #
# Reading back
# --------------------------------------------------------------------------- #


@dataclass
class LoadedRepro:
    """A repro read back from disk."""

    case: GraphCase
    stage: str
    failure: Signature | None
    accuracy: Accuracy
    path: Path
    strict: bool = False


#: Carried definitions already run in this process, and the names they bound.
_DEFINED: dict[str, dict[str, Any]] = {}


def exec_repro(source: str, filename: str = "<pt2kit repro>", *, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Execute a repro's text as a module (not as ``__main__``) and return its namespace.

    Its carried definitions (a backend or op copied from the user's script) run once
    per process: they may register a backend name or a custom op, which cannot be
    registered twice. A second repro with the same definitions gets the names the
    first run bound. They run as a module of their own, in ``sys.modules`` (dynamo imports
    the module of a function it inlines: a carried subclass's ``__torch_function__``), from a
    real file holding them (:func:`_definitions_file`): user code reads its ``__file__`` (a custom pass's
    ``uuid()`` hashing its own source). ``meta``: its header, when the caller has read
    it already (parsing a large graph's text is most of the cost of reading it).
    """
    namespace: dict[str, Any] = {"__name__": "pt2kit_repro", "__file__": filename}
    block = _definitions_block(source, meta)
    if block:
        if block not in _DEFINED:
            text = _preamble(source, block) + block
            path = _definitions_file(text)
            module = types.ModuleType(f"{CARRIED_MODULE}_{path.stem.rsplit('_', 1)[-1]}")
            module.__file__ = str(path)
            sys.modules[module.__name__] = module  # (dynamo imports the module of each function it inlines)
            definitions: dict[str, Any] = module.__dict__
            # In a copy of this process's context: torch keeps each config value a program sets in a ContextVar, so a
            # config the definitions set (a pass the script assigns beside the class it defines) stays out of the
            # process that reads the repro (pt2kit's own, a query's child, a test's); a case's config is what its
            # apply_config() sets, so the reducer can tell whether the failure needs it.
            config.run_isolated(exec, compile(text, str(path), "exec"), definitions)
            compiler_state.refresh()  # (they may have changed a table Inductor copied before they ran)
            _DEFINED[block] = {k: v for k, v in definitions.items() if not k.startswith("__")}
        namespace.update(_DEFINED[block])
        source = source.replace(block, "# (the carried definitions above ran once in this process)", 1)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - running the repro is the point
    lines = source.splitlines(True)
    for value in list(namespace.values()):  # (a function the repro defines, called by its graph, is written again from this)
        if inspect.isfunction(value) and value.__code__.co_filename == filename:
            setattr(value, "__pt2kit_source__", "".join(inspect.getblock(lines[value.__code__.co_firstlineno - 1 :])))
    return namespace


def _definitions_file(text: str) -> Path:
    """A file holding carried definitions, named by their content, for their ``__file__``."""
    import tempfile

    directory = Path(tempfile.gettempdir()) / f"pt2kit-definitions-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / f"definitions_{hashlib.sha256(text.encode()).hexdigest()[:16]}.py"
    if not path.exists():
        _atomic_write(path, text.encode())
    return path


def _definitions_block(source: str, meta: dict[str, Any] | None = None) -> str:
    """The carried definitions in a repro's text, as the writer wrote them (empty if none)."""
    try:
        meta = meta or read_metadata(source)
    except CorruptRecord:
        return ""
    block = split_future(meta.get("definitions") or "")[1].strip("\n")  # (its future imports head the file)
    return block if block and block in source else ""


def _preamble(source: str, block: str) -> str:
    """The import lines above the definitions (the definitions may use the user's modules)."""
    head = source[: source.index(block)]
    return "".join(line + "\n" for line in head.splitlines() if line.startswith(("import ", "from ")))


def read_metadata(source: str, path: Path | str = "<repro>") -> dict[str, Any]:
    """The ``PT2KIT = {...}`` literal of a pt2kit repro, parsed without executing anything."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise CorruptRecord(f"{path}: not valid Python ({e.msg}, line {e.lineno})") from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PT2KIT" for t in node.targets):
            try:
                meta = ast.literal_eval(node.value)
            except ValueError:
                raise CorruptRecord(f"{path}: its PT2KIT header is not a plain literal") from None
            if not isinstance(meta, dict) or meta.get("version") != FORMAT_VERSION:
                raise CorruptRecord(
                    f"{path}: unsupported pt2kit repro version {meta.get('version') if isinstance(meta, dict) else '?'}"
                )
            return meta
    raise CorruptRecord(f"{path}: not a pt2kit repro (no PT2KIT header)")


class _RecordConstantCalls(TorchFunctionMode):
    """Record torch calls whose arguments hold no proxy, instead of running them.

    FX's symbolic tracer runs such calls (``torch.ops.aten.full.default([], 0.0)``,
    ``torch._C._set_grad_enabled(False)``) at trace time and bakes in the result,
    which would change the graph we read back. Classes (``torch.device(...)``) are
    still called: they are literal arguments, not ops.
    """

    def __init__(self, tracer: fx.Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        leaves = pytree.tree_leaves((args, kwargs))
        if isinstance(func, type) or any(isinstance(a, fx.Proxy) for a in leaves):
            return func(*args, **kwargs)
        return self.tracer.create_proxy("call_function", func, args, kwargs)


class _FaithfulTracer(fx.Tracer):
    def trace(self, root: Any, concrete_args: Any = None) -> fx.Graph:
        with _RecordConstantCalls(self):
            return super().trace(root, concrete_args)


def trace_module(module: torch.nn.Module) -> fx.GraphModule:
    """An FX graph of ``module.forward`` with every call in it, constants included."""
    tracer = _FaithfulTracer()
    graph = tracer.trace(module)
    return fx.GraphModule(tracer.root, graph)


def load_repro(path: Path) -> LoadedRepro:
    """Read a pt2kit ``repro.py`` (and its data file) back into a :class:`GraphCase`."""
    path = Path(path)
    try:
        source = path.read_text()
    except OSError as e:
        raise CorruptRecord(f"cannot read {path}: {e.strerror}") from None
    meta = read_metadata(source, path)
    # the user modules it imports sit beside it (copied there) or are on PYTHONPATH, as
    # for `python repro.py`; queries inherit this process's sys.path
    import sys

    if str(path.parent.resolve()) not in sys.path:
        sys.path.append(str(path.parent.resolve()))
    data: dict[str, torch.Tensor] = {}
    if meta["data_file"]:
        data_path = path.with_name(meta["data_file"])
        try:
            data = torch.load(data_path, weights_only=True, map_location="cpu")
        except Exception as e:  # noqa: BLE001 - any failure to read it means a bad record
            raise CorruptRecord(f"cannot load {data_path}: {type(e).__name__}: {e}") from None
        if not isinstance(data, dict) or not all(isinstance(v, torch.Tensor) for v in data.values()):
            raise CorruptRecord(f"{data_path}: expected a dict of tensors")
    case = read_case(source, data, path, meta)
    failure = Signature.from_json(meta["failure"]) if meta["failure"] else None
    return LoadedRepro(case, meta["stage"], failure, meta["accuracy"], path, bool(meta.get("strict")))


def read_case(
    source: str, data: dict[str, torch.Tensor], path: Path | str = "<case>", meta: dict[str, Any] | None = None
) -> GraphCase:
    """The :class:`GraphCase` a repro's text and its tensors describe."""
    meta = meta or read_metadata(source, path)
    try:
        namespace = exec_repro(source, str(path), meta=meta)  # imports the user's modules, runs carried definitions
    except Exception as e:  # noqa: BLE001 - a module that will not import, definitions that will not run
        raise CorruptRecord(f"{path}: its imports or carried definitions fail ({type(e).__name__}: {e})") from None
    if meta.get("data_inline"):  # (few enough values to be literals in its load_data: see minifier.repro.inputs)
        try:
            data = namespace["load_data"]()
        except Exception as e:  # noqa: BLE001 - a repro edited out of shape
            raise CorruptRecord(f"{path}: its load_data() fails ({type(e).__name__}: {e})") from None
    constants = {name: data[f"constant:{name}"] for name in meta["constants"]}
    if meta.get("graph"):
        try:
            gm = load_graph(meta["graph"], constants, namespace)
        except GraphFormatError as e:
            raise CorruptRecord(f"{path}: {e}") from None
    else:  # a repro whose graph only its code can say (written from torch's, or by an older pt2kit)
        try:
            gm = trace_module(namespace["Repro"](data))
        except Exception as e:  # noqa: BLE001 - code that will not run or trace: the record cannot be read
            raise CorruptRecord(f"{path}: its graph's code cannot be rebuilt ({type(e).__name__}: {e})") from None
    inputs = []
    for spec in meta["inputs"]:
        tensor_meta = (
            TensorMeta(
                **{
                    **spec["meta"],
                    "shape": tuple(spec["meta"]["shape"]),
                    "stride": tuple(spec["meta"]["stride"]),
                    "storage": tuple(spec["meta"]["storage"]) if spec["meta"].get("storage") else None,
                }
            )
            if spec["meta"]
            else None
        )
        value = spec["value"]
        if tensor_meta is not None and spec["seed"] is None:
            key = f"input:{spec['name']}"  # (a DTensor's: its local shard)
            if key not in data and spec.get("source") is None:
                raise CorruptRecord(f"{path}: data file has no tensor for input {spec['name']!r}")
            value = data.get(key)
        derived = tuple(spec["derived_from"]) if spec.get("derived_from") else None
        inputs.append(
            GraphInput(
                spec["name"],
                value,
                tensor_meta,
                spec["seed"],
                tuple(spec["symbolic_dims"]),
                spec.get("source"),
                derived,
                bool(spec.get("symbolic_int")),
                spec.get("dtensor"),
                spec.get("opaque"),
                tuple(spec["view_of"]) if spec.get("view_of") else None,
                spec.get("static"),
                bool(spec.get("shares_only")),
            )
        )
    return GraphCase(
        gm=gm,
        inputs=inputs,
        boundary=meta["boundary"],
        kind=meta["kind"],
        backend=meta["backend"],
        config=meta["config"],
        modules=[(name, module_root(name)) for name in meta["modules"]],
        compile_kwargs=meta["compile_kwargs"],
        donated=tuple(meta.get("donated", ())),
        compiler=meta["compiler"],
        constants=constants,
        backward=meta["backward"],
        grad_enabled=meta.get("grad_enabled", True),
        handed=bool(meta.get("handed")),
        unreached=tuple(meta.get("unreached", ())),
        written_between=tuple(meta.get("written_between", ())),
        backward_context=CompileContext.from_json(meta["backward_context"]) if "backward_context" in meta else None,
        backward_calls=tuple(BackwardCall(tuple(names), bool(retain)) for names, retain in meta.get("backward_calls", ())),
        output_grads={key.removeprefix("grad:"): data[key] for key in meta.get("output_grads", ()) if key in data},
        fullgraph=bool(meta.get("fullgraph")),
        dynamic=meta["dynamic"],
        index=meta["index"],
        parent=meta["parent"],
        frame=meta["frame"],
        definitions=meta.get("definitions", ""),
        distributed=meta.get("distributed"),
        context=CompileContext.from_json(meta.get("context") or {}),
    )


def case_payload(case: GraphCase) -> tuple[str, dict[str, torch.Tensor], str, list[str]]:
    """A case as (repro text, tensors, ...): how it crosses to a worker child (see ``GraphCase.__reduce__``)."""
    return render(case, stage=case.backend), data_of(case), "<case>", [root for _, root in case.modules if root]


def read_case_payload(source: str, data: dict[str, torch.Tensor], path: str, roots: list[str]) -> GraphCase:
    """The other end of :func:`case_payload`: the user modules' roots go on ``sys.path`` first."""
    import sys

    sys.path.extend(root for root in roots if root not in sys.path)
    return read_case(source, data, path)


def _reduce_case(case: GraphCase) -> tuple[Any, ...]:
    """A case pickles as its repro text and tensors, the one format pt2kit reads cases from.

    (An ``fx.GraphModule`` pickles as code that is re-traced on load, which runs
    constant calls at trace time and so changes the graph.)
    """
    return (read_case_payload, case_payload(case))


copyreg.pickle(GraphCase, _reduce_case)
