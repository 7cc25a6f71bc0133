"""Blame: the kernel a program failed in, and the nodes of its graph that kernel was made of.

Inductor writes an aot graph as C++ kernels, each generated from a few FX nodes, and
names each after the aten ops it holds (:mod:`pt2kit.seams.kernel_origins`). A
program that fails inside one kernel says which, on a line of the generated module:

- a C++ compile error is raised on the line that builds the kernel
  (``cpp_fused_relu_6 = async_compile.cpp_pybinding(...)``; with one compile thread,
  which is how pt2kit runs programs), :func:`kernel_in_traceback`;
- an abort, a segfault or a hang while it runs takes the process down before it can
  say anything (faulthandler's dump is cut short when two OpenMP threads abort at
  once), so during each aot graph's first run the capture leaves a trail
  (:data:`TRAIL`): each kernel's name as it is entered, a ``-`` as it returns
  (:func:`follow_kernels`). A kernel entered and never left is where the process
  died (:func:`kernel_in_trail`).

While the program compiles, the capture keeps, per aot graph, the nodes behind each
kernel it writes and each node's ``original_aten`` op (``kernels.json`` beside the
graph's repro, :func:`write_origins`). :func:`blamed_nodes` turns the kernel into
nodes: exactly, when the program generated the kernel in this run; by the ops its
name lists (the first node of each), when Inductor served the graph from its cache
and wrote no kernel at all.

The reducer asks about those nodes first (:func:`minifier.reduce.passes.follow_blame`): one
query on a few nodes instead of a dozen halvings. A wrong blame (the bug needs more
than its kernel, a cached graph whose first relu is not the one that breaks) costs
that one query.
"""

from __future__ import annotations

import json
import linecache
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pt2kit.opaque import innermost
from pt2kit.seams import dynamo_exc
from pt2kit.seams.kernel_origins import kernel_namespace, ops_in_kernel_name, original_aten_names, report_kernels

#: A kernel name on a line of an Inductor-generated module (its definition or its call).
KERNEL = re.compile(r"\b(cpp_\w+_\d+)\b")
ORIGINS = "kernels.json"
TRAIL = "kernel_trail.txt"


def kernel_on_line(filename: str, lineno: int) -> str | None:
    """The kernel named on this line of a source file, if any."""
    found = KERNEL.search(linecache.getline(filename, lineno))
    return found.group(1) if found else None


def kernel_in_traceback(error: BaseException | None) -> str | None:
    """The kernel whose line an exception (or one it was raised from) went through, innermost first."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        frames = []
        tb = error.__traceback__
        while tb is not None:
            frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
            tb = tb.tb_next
        for filename, lineno in reversed(frames):
            if kernel := kernel_on_line(filename, lineno):
                return kernel
        error = dynamo_exc.underneath(error)
    return None


def kernel_in_trail(path: Path) -> str | None:
    """The kernel the trail shows entered and never left (the process died in it), if any."""
    try:
        lines = path.read_text(errors="replace").split()
    except OSError:
        return None
    return lines[-1] if lines and lines[-1] != "-" and KERNEL.fullmatch(lines[-1]) else None


def follow_kernels(trail: int | None, compiled: Any) -> Callable[[], None]:
    """Until the returned undo is called, each kernel of ``compiled``'s module writes its name to the
    ``trail`` file descriptor as it is entered, and ``-`` as it returns (a syscall each)."""
    try:
        namespace = kernel_namespace(innermost(compiled)) if trail is not None else None
    except Exception:  # noqa: BLE001 - a debugging hook never changes what the program does
        namespace = None
    if namespace is None or trail is None:  # (no trail: no namespace either)
        return lambda: None
    kernels = {name: fn for name, fn in namespace.items() if KERNEL.fullmatch(name) and callable(fn)}

    def note(text: bytes) -> None:
        try:
            os.write(trail, text)
        except OSError:
            pass

    def followed(name: str, kernel: Callable[..., Any]) -> Callable[..., Any]:
        entered = f"{name}\n".encode()

        def kernel_followed(*args: Any, **kwargs: Any) -> Any:
            note(entered)
            out = kernel(*args, **kwargs)
            note(b"-\n")
            return out

        return kernel_followed

    namespace.update({name: followed(name, fn) for name, fn in kernels.items()})
    return lambda: namespace.update(kernels)


def arm(recorder: Any) -> None:
    """In a capture process: open the :data:`TRAIL` (``recorder.trail``, a file descriptor), and note each
    kernel Inductor writes on the aot graph being compiled (``recorder.compiling()``)."""
    recorder.trail = os.open(recorder.out_dir / TRAIL, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def on_kernel(name: str, nodes: list[str]) -> None:
        if (graph := recorder.compiling()) is not None:
            graph.kernels[name] = nodes

    report_kernels(on_kernel)


def original_aten_of(gm: Any) -> dict[str, str]:
    """:func:`~pt2kit.seams.kernel_origins.original_aten_names`, or nothing when that fails."""
    try:
        return original_aten_names(gm.graph)
    except Exception:  # noqa: BLE001 - blame is a hint; the capture goes on without it
        return {}


def write_origins(directory: Path, kernels: dict[str, list[str]], original_aten: dict[str, str]) -> None:
    """Beside an aot graph's repro: its kernels' nodes, and its nodes' original aten ops."""
    if kernels or original_aten:
        (directory / ORIGINS).write_text(json.dumps({"kernels": kernels, "original_aten": original_aten}))


@dataclass(frozen=True)
class Blame:
    """The Inductor kernel the program failed in, and the saved graph file whose origins name its nodes."""

    kernel: str | None = None
    graph_file: Path | None = None

    def nodes(self, nodes: list[str]) -> list[str]:
        """:func:`blamed_nodes` of this kernel among ``nodes``."""
        return blamed_nodes(self.kernel, self.graph_file, nodes)


def blamed_nodes(kernel: str | None, graph_file: Path | None, nodes: list[str]) -> list[str]:
    """The nodes (of ``nodes``, a graph's op nodes in order) that ``kernel`` was made of, as far as is known."""
    if not kernel or graph_file is None:
        return []
    try:
        origins: dict[str, Any] = json.loads((graph_file.parent / ORIGINS).read_text())
    except (OSError, ValueError):
        return []
    present = set(nodes)
    exact = [n for n in origins.get("kernels", {}).get(kernel, []) if n in present]
    if exact:
        return sorted(exact, key=nodes.index)
    aten: dict[str, str] = origins.get("original_aten", {})
    ops = ops_in_kernel_name(kernel, set(aten.values()))
    first: dict[str, str] = {}
    for node in nodes:
        if aten.get(node) in ops:
            first.setdefault(aten[node], node)
    return sorted(first.values(), key=nodes.index)
