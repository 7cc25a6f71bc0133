"""Seam: the repro files torch's own minifier writes (``repro.py``, ``minifier_launcher.py``).

``minify repro`` converts them: a file that imports ``torch._dynamo.repro.after_aot``
(or ``after_dynamo``) holds ``class Repro``, a ``load_args(reader)`` that rebuilds the
inputs through torch's ``InputReader`` (from a content store, with
``weights_only=True``, or random data when the store is missing), and a
``run_repro(...)`` call.
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

    import torch._dynamo.repro.after_aot as after_aot
    from torch._dynamo.debug_utils import InputReader

    reader = input_reader(None)
    reader.tensor(reader.storage(None, 16), (2, 2), is_leaf=True)
    if len(reader.args) != 1 or tuple(reader.args[0].shape) != (2, 2):
        raise AttributeError("InputReader no longer rebuilds tensors from storage descriptions")
    if "torch._dynamo.repro.after_aot" not in inspect.getsource(after_aot.save_graph_repro):
        raise AttributeError("torch's aot repro files no longer import torch._dynamo.repro.after_aot")
    del InputReader


def input_reader(save_dir: str | None) -> Any:
    """torch's ``InputReader`` over ``save_dir`` (None: random data)."""
    from torch._dynamo.debug_utils import InputReader

    return InputReader(save_dir=save_dir)


def torch_repro_kind(source: str) -> str | None:
    """``torch-aot`` / ``torch-dynamo`` for a file torch's minifier wrote, else None."""
    return next((kind for marker, kind in MARKERS.items() if marker in source), None)
