"""Planted backends for pt2kit's fuzzer (``tests/fuzzing.py``): one bug per name.

Importing this module registers a backend for every combination of

- **level**: ``dynamo`` (a plain ``(gm, example_inputs)`` backend that sees dynamo's
  graph), ``fw`` (an ``aot_autograd`` backend whose forward/inference compiler is
  buggy) or ``bw`` (its backward compiler is buggy);
- **kind**: ``compile_error`` (the compiler raises :class:`PlantedCompileError`),
  ``runtime_error`` (the compiled function raises :class:`PlantedRuntimeError`),
  ``abort`` (it calls ``abort()``), ``segfault`` (it reads address 0), ``hang`` (it
  spins forever) or ``accuracy`` (it adds 0.5 to every floating output);
- **triggers**: one op, or a pair of ops that must *both* be in the graph. A graph
  without them compiles and runs correctly.

The name says it all: ``fz_<level>_<kind>__<op>[__<op>]``, e.g.
``fz_bw_abort__sigmoid__tanh`` aborts when a backward graph holds both
``sigmoid_backward`` and ``tanh_backward``. A repro that names such a backend only
needs this file importable (it uses nothing but torch), so "the repro fails the same
way with torch alone" can be checked with a ``PYTHONPATH`` holding this directory.

:data:`TRIGGERS` says how each trigger op looks in a dynamo graph (the
``__name__`` of the function or the method name: ``torch.cos``, ``x.cos()``), in an
aot forward graph and, for the ops that have a distinctive one, in an aot backward
graph. The fuzzer reads it to build programs where the trigger ops are the only
ops of their kind, and to check that the minified graph holds exactly them.
"""

from __future__ import annotations

import ctypes
import itertools
import os
from dataclasses import dataclass

import torch
from torch._dynamo import register_backend
from torch._dynamo.backends.common import aot_autograd


@dataclass(frozen=True)
class Trigger:
    """How one trigger op appears at each level."""

    dynamo: frozenset[str]  # call_function ``__name__`` or call_method name in a dynamo graph
    forward: str  # aten overload in the aot forward/inference graph
    backward: str | None = None  # aten overload its derivative puts in the aot backward graph


TRIGGERS: dict[str, Trigger] = {
    "cos": Trigger(frozenset({"cos"}), "aten.cos.default"),
    "sin": Trigger(frozenset({"sin"}), "aten.sin.default"),
    "exp": Trigger(frozenset({"exp"}), "aten.exp.default"),
    "tanh": Trigger(frozenset({"tanh"}), "aten.tanh.default", "aten.tanh_backward.default"),
    "sigmoid": Trigger(frozenset({"sigmoid"}), "aten.sigmoid.default", "aten.sigmoid_backward.default"),
    "relu": Trigger(frozenset({"relu"}), "aten.relu.default", "aten.threshold_backward.default"),
    "softmax": Trigger(frozenset({"softmax"}), "aten._softmax.default", "aten._softmax_backward_data.default"),
    "matmul": Trigger(frozenset({"matmul", "mm", "__matmul__"}), "aten.mm.default"),
}

LEVELS = ("dynamo", "fw", "bw")
KINDS = ("compile_error", "runtime_error", "abort", "segfault", "hang", "accuracy")


def triggers_for(level: str) -> list[str]:
    """The trigger ops a level can look for (backward needs a distinctive derivative op)."""
    return [name for name, t in TRIGGERS.items() if level != "bw" or t.backward is not None]


def backend_name(level: str, kind: str, triggers: tuple[str, ...]) -> str:
    return f"fz_{level}_{kind}__" + "__".join(sorted(triggers))


class PlantedCompileError(Exception):
    """What a planted compiler raises."""


class PlantedRuntimeError(RuntimeError):
    """What a planted compiled function raises when it runs."""


def compile_message(triggers: tuple[str, ...]) -> str:
    return "planted: cannot compile " + "+".join(sorted(triggers))


def runtime_message(triggers: tuple[str, ...]) -> str:
    return "planted: " + "+".join(sorted(triggers)) + " kernel failed at run time"


# --------------------------------------------------------------------------- #
# Which trigger ops a graph holds
# --------------------------------------------------------------------------- #


def dynamo_ops(gm: torch.fx.GraphModule) -> set[str]:
    """Trigger ops in a dynamo graph (function calls and method calls alike)."""
    found = set()
    for node in gm.graph.nodes:
        if node.op == "call_method":
            name = str(node.target)
        elif node.op == "call_function":
            name = getattr(node.target, "__name__", "")
        else:
            continue
        found.update(op for op, t in TRIGGERS.items() if name in t.dynamo)
    return found


def aot_ops(gm: torch.fx.GraphModule, side: str) -> set[str]:
    """Trigger ops in an aot graph: ``side`` is ``forward`` or ``backward``."""
    targets = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    return {op for op, t in TRIGGERS.items() if getattr(t, side) is not None and getattr(t, side) in targets}


# --------------------------------------------------------------------------- #
# The bugs
# --------------------------------------------------------------------------- #


def _abort(run, values):
    os.abort()


def _segfault(run, values):
    ctypes.string_at(0)


def _hang(run, values):
    while True:
        pass


def _off_by_half(run, values):
    outputs = run(*values)
    shifted = [o + 0.5 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in outputs]
    return type(outputs)(shifted) if isinstance(outputs, tuple) else shifted


def _raiser(triggers):
    def raise_at_run_time(run, values):
        raise PlantedRuntimeError(runtime_message(triggers))

    return raise_at_run_time


def _on_run(kind: str, triggers: tuple[str, ...]):
    return {"runtime_error": _raiser(triggers), "abort": _abort, "segfault": _segfault, "hang": _hang, "accuracy": _off_by_half}.get(kind)


def _planted_compiler(kind: str, triggers: tuple[str, ...], find):
    """A compiler that misbehaves (as ``kind`` says) on graphs where ``find(gm)`` holds every trigger."""
    on_run = _on_run(kind, triggers)

    def compile_graph(gm, example_inputs):
        hit = set(triggers) <= find(gm)
        if hit and kind == "compile_error":
            raise PlantedCompileError(compile_message(triggers))
        run = gm.forward

        def compiled(args):
            values = list(args)
            args.clear()
            if hit and on_run is not None:
                return on_run(run, values)
            return run(*values)

        compiled._boxed_call = True
        return compiled

    return compile_graph


def _healthy(gm, example_inputs):
    run = gm.forward

    def compiled(args):
        values = list(args)
        args.clear()
        return run(*values)

    compiled._boxed_call = True
    return compiled


def _dynamo_backend(kind: str, triggers: tuple[str, ...]):
    """A plain dynamo backend: sees the whole dynamo graph, no AOTAutograd."""
    on_run = _on_run(kind, triggers)

    def planted_dynamo_backend(gm, example_inputs):
        hit = set(triggers) <= dynamo_ops(gm)
        if hit and kind == "compile_error":
            raise PlantedCompileError(compile_message(triggers))
        run = gm.forward
        if not hit or on_run is None:
            return run

        def compiled(*args):
            return on_run(run, list(args))

        return compiled

    return planted_dynamo_backend


def _register_all() -> None:
    for level in LEVELS:
        ops = triggers_for(level)
        for size in (1, 2):
            for triggers in itertools.combinations(sorted(ops), size):
                for kind in KINDS:
                    name = backend_name(level, kind, triggers)
                    if level == "dynamo":
                        backend = _dynamo_backend(kind, triggers)
                    elif level == "fw":
                        backend = aot_autograd(fw_compiler=_planted_compiler(kind, triggers, lambda gm: aot_ops(gm, "forward")), bw_compiler=_healthy)
                    else:
                        backend = aot_autograd(fw_compiler=_healthy, bw_compiler=_planted_compiler(kind, triggers, lambda gm: aot_ops(gm, "backward")))
                    register_backend(backend, name=name)


_register_all()
