"""Seam: the repro files torch's own minifier writes (``repro.py``, ``minifier_launcher.py``).

``minify repro`` converts them: a file that imports ``torch._dynamo.repro.after_aot``
(or ``after_dynamo``) holds ``class Repro``, a ``load_args(reader)`` that rebuilds the
inputs through torch's ``InputReader`` (from a content store, with
``weights_only=True``, or random data when the store is missing), and a
``run_repro(...)`` call whose literal keywords say how it runs (:func:`run_repro_kwargs`):
``accuracy``, ``save_dir``, and from 2.15 ``is_inference`` (an inference graph, which
2.13's files wrote as a forward).
"""

from __future__ import annotations

from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch._dynamo.debug_utils.InputReader, torch._dynamo.repro.after_aot/after_dynamo's file format",
    features=("minify repro on torch's repro.py / minifier_launcher.py",),
)

MARKERS = {"torch._dynamo.repro.after_aot": "torch-aot", "torch._dynamo.repro.after_dynamo": "torch-dynamo"}


def probe() -> None:
    import inspect
    import io

    import torch
    import torch._dynamo.repro.after_aot as after_aot
    from torch.fx.experimental.proxy_tensor import make_fx

    reader = input_reader(None)
    reader.tensor(reader.storage(None, 16), (2, 2), is_leaf=True)
    if len(reader.args) != 1 or tuple(reader.args[0].shape) != (2, 2):
        raise AttributeError("InputReader no longer rebuilds tensors from storage descriptions")
    # what torch writes for an inference graph: the file must say what it is, in words pt2kit reads
    inference = "is_inference" in inspect.signature(after_aot.save_graph_repro).parameters
    written = io.StringIO()
    x = torch.ones(2)
    extra: dict[str, Any] = {"is_inference": True} if inference else {}
    after_aot.save_graph_repro(written, make_fx(lambda x: (x.sin(),))(x), [x], "inductor", **extra)
    source = written.getvalue()
    if torch_repro_kind(source) != "torch-aot":
        raise AttributeError("torch's aot repro files no longer import torch._dynamo.repro.after_aot")
    kwargs = run_repro_kwargs(source)
    if "accuracy" not in kwargs or kwargs.get("is_inference", False) is not inference:
        raise AttributeError(f"torch's run_repro(...) call no longer reads as expected: {kwargs}")


def input_reader(save_dir: str | None) -> Any:
    """torch's ``InputReader`` over ``save_dir`` (None: random data)."""
    from torch._dynamo.debug_utils import InputReader

    return InputReader(save_dir=save_dir)


def torch_repro_kind(source: str) -> str | None:
    """``torch-aot`` / ``torch-dynamo`` for a file torch's minifier wrote, else None."""
    return next((kind for marker, kind in MARKERS.items() if marker in source), None)


def run_repro_kwargs(source: str) -> dict[str | None, Any]:
    """The literal keyword arguments of a torch repro's ``run_repro(...)`` call (None: a literal ``**{...}``)."""
    import ast

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "run_repro":
            values: dict[str | None, Any] = {}
            for keyword in node.keywords:
                try:
                    values[keyword.arg] = ast.literal_eval(keyword.value)
                except ValueError:
                    continue
            return values
    return {}
