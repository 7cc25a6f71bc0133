"""Seam: ``torch._inductor.codegen.cpp.CppScheduling.define_kernel``, where Inductor names each C++ kernel.

Inductor's C++ backend writes a graph as kernels named after the aten ops they were
made from (``cpp_fused_relu_threshold_backward_view_6``: ``get_fused_kernel_name``
joins the sorted ``original_aten`` names of the kernel's origin nodes, and a suffix
counts the kernels of the graph). The generated module defines each kernel on the line
``cpp_fused_..._6 = async_compile.cpp_pybinding(...)`` and calls it by that name, so a
failure inside one kernel (a C++ compile error, an abort while it runs) happens on a
line that names it (:mod:`minifier.capture.blame`). This seam says what a name stands for:

- :func:`report_kernels` wraps ``define_kernel`` for the life of the process: each
  kernel's name and the FX nodes it was generated from
  (``torch._inductor.utils.aggregate_origins`` of its scheduler nodes), exactly, when
  the graph is compiled in this process;
- :func:`original_aten_names` reads ``node.meta["original_aten"]`` of a graph (what a
  kernel's name is made of), for when Inductor serves a graph from its FX graph cache
  and writes no kernel at all: :func:`ops_in_kernel_name` then says which of those ops
  a kernel's name lists;
- :func:`kernel_namespace` finds the generated module of a compiled graph, whose
  globals hold its kernels by name (``CompiledFxGraph.current_callable``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._inductor.codegen.cpp.CppScheduling.define_kernel, torch._inductor.utils.aggregate_origins / get_fused_kernel_name, "
        "node.meta['original_aten'], torch._inductor.output_code.CompiledFxGraph.current_callable"
    ),
    features=("asking first about the kernel a failure happened in",),
)

MODULE = "torch._inductor.codegen.cpp"
#: How Inductor's C++ backend names a kernel (``"cpp_" + get_fused_kernel_name(...) + "_" + suffix``).
PREFIX = "cpp_fused_"


def probe() -> None:
    import inspect

    import torch._inductor.utils as utils
    from torch._inductor.codegen.cpp import CppScheduling

    parameters = list(inspect.signature(CppScheduling.define_kernel).parameters)
    if parameters[:3] != ["self", "src_code", "nodes"]:
        raise AttributeError(f"CppScheduling.define_kernel takes {parameters}, not (self, src_code, nodes, ...)")
    source = inspect.getsource(CppScheduling.define_kernel)
    if "return kernel_name" not in source or '"cpp"' not in source:
        raise AttributeError("CppScheduling.define_kernel no longer returns a kernel name made with the 'cpp' prefix")
    if not callable(getattr(utils, "aggregate_origins", None)) or "original_aten" not in inspect.getsource(
        utils.get_fused_kernel_name
    ):
        raise AttributeError("torch._inductor.utils no longer names kernels after their nodes' original_aten ops")
    from torch._inductor.output_code import CompiledFxGraph

    if "self.current_callable(inputs)" not in inspect.getsource(CompiledFxGraph.__call__):
        raise AttributeError("CompiledFxGraph no longer runs its generated module through current_callable")


def report_kernels(sink: Callable[[str, list[str]], None]) -> None:
    """For the life of the process, ``sink(kernel name, origin node names)`` for each C++ kernel Inductor writes.

    Inductor is not imported for this: if it is not loaded yet, the wrapper goes in
    when it is. A sink that raises is ignored: the compile goes on as it would.
    """
    if MODULE in sys.modules:
        _install(sink, sys.modules[MODULE])
        return
    from ..import_hooks import after_import

    after_import(MODULE, lambda module: _install(sink, module))


def _install(sink: Callable[[str, list[str]], None], module: Any) -> None:
    original = module.CppScheduling.define_kernel

    def define_kernel(self: Any, src_code: Any, nodes: Any, kernel_args: Any = None) -> Any:
        name = original(self, src_code, nodes, kernel_args)
        try:
            from torch._inductor.utils import aggregate_origins

            sink(str(name), [origin.name for origin in aggregate_origins(nodes)])
        except Exception:  # noqa: BLE001 - a debugging hook never changes what the compile does
            pass
        return name

    module.CppScheduling.define_kernel = define_kernel


def kernel_namespace(compiled: Any) -> dict[str, Any] | None:
    """The globals of the module Inductor generated for a compiled graph (its kernels are globals there).

    ``compiled`` is what Inductor's compile of an aot graph returned (a
    ``CompiledFxGraph``): its ``current_callable`` is the module's ``call``.
    """
    for obj in (compiled, getattr(compiled, "__wrapped__", None)):
        namespace = getattr(getattr(obj, "current_callable", None), "__globals__", None)
        if isinstance(namespace, dict) and callable(namespace.get("call")):
            return namespace
    return None


def original_aten_names(graph: Any) -> dict[str, str]:
    """Each node's ``original_aten`` op, as a kernel name spells it (``relu``, ``native_layer_norm``)."""
    import torch

    names = {}
    for node in graph.nodes:
        op = node.meta.get("original_aten")
        if isinstance(op, torch._ops.OpOverload):
            names[node.name] = op._overloadpacket.__name__
        elif isinstance(op, torch._ops.HigherOrderOperator):
            names[node.name] = str(op.name())
    return names


def ops_in_kernel_name(kernel: str, ops: Iterable[str]) -> set[str]:
    """Which of ``ops`` a kernel's name lists (``cpp_fused_relu_view_6`` and {relu, view, add}: {relu, view}).

    The name joins the sorted op names with ``_``, and op names hold ``_`` too, so it is
    split into whole names, the longest of ``ops`` first (``native_layer_norm`` is not
    also ``layer_norm``); a word no op of ``ops`` starts with is passed over.
    """
    if not kernel.startswith(PREFIX):
        return set()
    listed = kernel[len(PREFIX) :].rsplit("_", 1)[0]
    known = sorted(set(ops), key=len, reverse=True)
    found: set[str] = set()
    at = 0
    while at < len(listed):
        op = next(
            (
                op
                for op in known
                if listed.startswith(op, at) and at + len(op) in (len(listed), listed.find("_", at + len(op)))
            ),
            None,
        )
        if op is not None:
            found.add(op)
            at += len(op) + 1
        else:
            word_end = listed.find("_", at + 1)  # (a word may start with "_": _safe_softmax)
            at = len(listed) if word_end < 0 else word_end + 1
    return found
