"""Reading repros for ``minify repro``: pt2kit's own, and torch's ``repro.py`` / ``minifier_launcher.py``.

A torch repro is a script: module-level config assignments, ``class Repro``, a
``load_args(reader)`` that rebuilds the inputs from a content store (or random data
when the store is missing), and a ``run_repro(...)`` call under ``__main__``. pt2kit
converts it once, in a worker child (its config assignments must not leak into
pt2kit's own process): the child executes the module without its ``__main__`` block,
reads the inputs with torch's own ``InputReader`` (which loads with
``weights_only=True``), traces ``Repro`` and writes the result as a pt2kit repro. The
rest of ``minify repro`` then works on that.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import torch

from .context import custom_op_names, non_default_config
from ..unit.case import GraphCase, GraphInput, TensorMeta
from pt2kit.errors import CorruptRecord
from ..isolation.session import Session
from ..repro.files import LoadedRepro, exec_repro, load_repro, trace_module, write_repro


def repro_format(source: str) -> str:
    """``pt2kit``, ``torch-aot``, ``torch-dynamo``, or ``unknown``."""
    from pt2kit.seams.torch_repro import torch_repro_kind

    if "\nPT2KIT = " in source:
        return "pt2kit"
    return torch_repro_kind(source) or "unknown"


def convert_torch_repro(path: Path, out_dir: Path) -> str:
    """(In a worker child) execute torch's repro, rebuild its inputs, write it as a pt2kit repro."""
    from pt2kit.seams.ops import load_inductor_prims
    from pt2kit.seams.torch_repro import input_reader, run_repro_kwargs

    load_inductor_prims()  # torch's repros may call Inductor's own prims without importing them
    source = path.read_text()
    kind = repro_format(source)
    kwargs = run_repro_kwargs(source)
    namespace = exec_repro(source, str(path))  # not __main__: its run_repro call does not run
    save_dir = kwargs.get("save_dir")
    reader = input_reader(save_dir if save_dir and Path(save_dir).is_dir() else None)
    namespace["load_args"](reader)
    gm = trace_module(namespace["Repro"]())
    config = non_default_config(custom_ops=bool(custom_op_names(gm))).values
    placeholders = gm.graph.find_nodes(op="placeholder")
    inputs = [
        GraphInput(str(node.target), value, TensorMeta.of(value))
        if isinstance(value, torch.Tensor)
        else GraphInput(str(node.target), value, None)
        for node, value in zip(placeholders, reader.args)
    ]
    aot = kind == "torch-aot"
    # torch 2.15 writes run_repro(..., is_inference=True) for an inference graph (2.13: no flag, a forward)
    inference = aot and bool(kwargs.get("is_inference"))
    case = GraphCase(
        gm=gm,
        inputs=inputs,
        boundary="aot" if aot else "dynamo",
        kind="inference" if inference else "forward" if aot else "dynamo",
        compile_kwargs={"is_inference": True} if inference else {},
        backend="inductor" if aot else str(kwargs.get("backend") or "inductor"),
        config=config,
        constants={name: t.detach() for name, t in gm.named_buffers()},
        backward=not aot and any(i.meta is not None and i.meta.requires_grad for i in inputs),
    )
    accuracy = bool(kwargs.get("accuracy"))
    note = f"Converted from torch's {path.name}."
    return str(write_repro(case, out_dir, stage=case.backend, accuracy=accuracy, note=note))


def load_any_repro(path: Path, session: Session) -> LoadedRepro:
    """Read ``path`` as a pt2kit repro, converting torch's formats first."""
    try:
        source = path.read_text()
    except OSError as e:
        raise CorruptRecord(f"cannot read {path}: {e.strerror}") from None
    kind = repro_format(source)
    if str(path.parent.resolve()) not in sys.path:  # (torch's repro may import modules beside it)
        sys.path.append(str(path.parent.resolve()))
    if kind == "pt2kit":
        return load_repro(path)
    if kind == "unknown":
        raise CorruptRecord(f"{path}: neither a pt2kit repro nor torch's repro.py / minifier_launcher.py")
    try:
        ast.parse(source)
    except SyntaxError as e:  # torch can write config values that do not parse (pytorch#128830)
        raise CorruptRecord(
            f"{path}: not valid Python ({e.msg}, line {e.lineno}); torch wrote a config value it cannot read back"
        ) from None
    out = session.run_dir / "work" / "converted"
    result = session.query(
        functools.partial(convert_torch_repro, path, out), f"reading torch's {path.name}", count=False
    )
    if result.value is None:
        raise CorruptRecord(f"{path}: could not be loaded ({result.failure.signature if result.failure else '?'})")
    return load_repro(Path(result.value))
