"""Backends with planted bugs, for fast tests that still drive real dynamo and AOTAutograd.

Importing this module registers them. Each goes wrong only when the graph it gets
holds a *trigger* op, so the minifier has one culprit to find among many healthy ops:

- ``planted_compile_error``: AOTAutograd backend; its forward/inference compiler
  raises ``RuntimeError("planted: cannot compile aten.cos")`` on graphs holding cos.
- ``planted_backward_error``: its backward compiler raises on ``aten.tanh_backward``.
- ``planted_runtime_error``: the compiled forward raises when it runs a graph with cos.
- ``planted_crash``: the compiled forward calls ``abort()`` (graphs with cos).
- ``planted_segfault``: the compiled forward dereferences NULL (graphs with cos).
- ``planted_backward_segfault``: the compiled backward dereferences NULL (graphs with tanh_backward).
- ``planted_hang``: the compiled forward never returns (graphs with cos).
- ``planted_accuracy``: the compiled forward adds 0.5 to its outputs (graphs with cos).
- ``planted_wrong_cos``: the compiled cos is off by a half and every other op is right,
  so only the outputs that read a cos are wrong (one op's wrong kernel).
- ``planted_pair``: fails only when a graph holds both cos and exp (a two-op bug).
- ``planted_value``: fails only when an input to cos holds a value above 100, so
  random inputs do not reproduce it and the repro needs the real data.
- ``planted_flaky``: fails only its first compile of a graph with cos (a counter file
  decides): the program fails, and every later look passes, whichever order pt2kit's
  parallel queries compile in. (Failing every other compile made the verdict depend on
  that order.)
- ``planted_in_context``: rejects cos only inside a ``torch.compile`` (dynamo's tracing
  context is set), as compilers that read it do; an aot graph compiled alone passes.
- ``planted_inference_error``: rejects cos only in an inference graph (what AOTAutograd
  makes under ``no_grad``); a forward graph with cos compiles.
- ``planted_dynamo_error``: a plain dynamo backend (no AOTAutograd) that rejects
  graphs calling ``torch.cos`` at compile time.
- ``planted_dynamic_aot`` / ``planted_dynamic_dynamo``: reject cos only in graphs with
  symbolic sizes (an automatic-dynamic recompile), after aot / after dynamo.
- ``planted_multiple_of_7``: the compiled cos fails when an input's first dim is a
  multiple of 7 (a size-dependent bug, for shape shrinking).
- ``planted_pre_aot``: a wrong rewrite before AOTAutograd (as an Inductor pre-grad pass
  would be): ``torch.cos`` becomes ``torch.sin`` in the dynamo graph, then a healthy aot
  backend compiles it. Every aot graph agrees with itself run eagerly; only the dynamo
  graph shows the wrong answer.
- ``planted_no_all_reduce``: cannot compile a graph holding a functional all_reduce
  (distributed jobs).

What real bugs do, and the backends above never did:

- ``planted_lost_write``: keeps input mutations in its graphs (as Inductor does) and
  compiles them without the ``copy_`` back into an input that a ``mul`` feeds: a graph
  whose only effect is a write into its input computes nothing wrong that it returns.
- ``planted_cwd_marker``: cannot compile cos while a file ``planted-marker`` is in the
  working directory: state outside the graph, which a repro run elsewhere does not see.
- ``planted_alternating``: cannot compile cos every other time (a counter file decides,
  the first time included): a failure that shows in half of the runs, every time the
  program runs.
- ``planted_zero_tangent``: its compiled backward crashes (NULL dereference) when the
  gradient it is handed is a ZeroTensor (the gradient of ``torch.sgn``), as Inductor's
  code does: a plain copy of that input no longer crashes.
- ``planted_backward_runtime_error`` / ``planted_backward_accuracy``: the compiled backward
  raises as it runs, or adds a half to the gradients, on graphs with ``tanh_backward``.
- ``planted_device_error``: a CUDA kernel's illegal memory access, which surfaces at the next
  call that waits on the device: in the compile on a graph of 4 ops or more (autotuning ran the
  kernel), at run time (an ``AcceleratorError``) on a smaller one.
- ``planted_second_run``: the compiled forward of a graph with cos raises when it runs a
  second time: each graph passes alone (one run), the program calling it twice fails, on
  this backend only.
- ``planted_odd_rows`` / ``planted_odd_rows_accuracy``: the compiled forward of a graph with cos
  raises, or adds a half to its outputs, when its first tensor has an odd number of rows (a
  dynamic graph: right on its first call's sizes, wrong on a later call's).
- ``planted_slow_first``: the first compile of cos (a counter file decides) outlasts a short
  ``--timeout``, as on a loaded machine, then raises; every later compile raises at once.

``PLANTED_DELAY`` (seconds) makes every compile that slow. ``PLANTED_LOG``, when set, names a file where every compile appends the graph's code and
a checksum of its inputs, so tests can count compiles.
"""
import ctypes
import os
import time

import torch
from torch._dynamo import register_backend
from torch._dynamo.backends.common import aot_autograd

aten = torch.ops.aten


def _has(gm, *targets):
    found = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    return all(t in found for t in targets)


def _log(gm, example_inputs):
    """One line per compile: the graph's code and a checksum of the inputs it got."""
    path = os.environ.get("PLANTED_LOG")
    if path:
        from torch._subclasses.fake_tensor import FakeTensor

        tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
        values = "fake" if any(isinstance(t, FakeTensor) for t in tensors) else repr([float(t.double().sum()) for t in tensors])
        with open(path, "a") as f:
            f.write(gm.code.replace("\n", " ") + " | inputs " + values + "\n")


def _compiler(on_compile=None, on_run=None, trigger=(aten.cos.default,)):
    def compile_graph(gm, example_inputs):
        _log(gm, example_inputs)
        time.sleep(float(os.environ.get("PLANTED_DELAY", 0)))  # a slow compiler, for Ctrl-C tests
        hit = _has(gm, *trigger)
        if hit and on_compile:
            on_compile(gm, example_inputs)
        run = gm.forward

        def compiled(args):
            values = list(args)
            args.clear()
            if hit and on_run:
                return on_run(run, values)
            return run(*values)

        compiled._boxed_call = True
        return compiled

    return compile_graph


def _raise_compile(gm, inputs):
    raise RuntimeError("planted: cannot compile aten.cos")


def _raise_run(run, values):
    raise RuntimeError("planted: aten.cos kernel failed at run time")


def _abort(run, values):
    os.abort()


def _segfault(run, values):
    ctypes.string_at(0)


def _hang(run, values):
    # Never returns. It sleeps rather than spins: pt2kit's timeout sees the same hang, and
    # the core stays free for the test running beside it while the timeout runs out.
    while True:
        time.sleep(1)


def _off_by_half(run, values):
    return [o + 0.5 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in run(*values)]


def _wrong_cos(gm, inputs):
    for node in list(gm.graph.find_nodes(op="call_function", target=aten.cos.default)):
        with gm.graph.inserting_after(node):
            off = gm.graph.call_function(aten.add.Tensor, (node, 0.5))
        node.replace_all_uses_with(off, delete_user_cb=lambda user: user is not off)
    gm.recompile()


def _values_above_100(run, values):
    if any(isinstance(v, torch.Tensor) and v.is_floating_point() and bool((v > 100).any()) for v in values):
        raise RuntimeError("planted: aten.cos overflows on inputs above 100")
    return run(*values)


def _odd_rows(values):
    first = next((v for v in values if isinstance(v, torch.Tensor) and v.dim()), None)
    return first is not None and first.shape[0] % 2 == 1


def _odd_rows_raise(run, values):
    if _odd_rows(values):
        raise RuntimeError("planted: the cos kernel fails on an odd number of rows")
    return run(*values)


def _odd_rows_off(run, values):
    return _off_by_half(run, values) if _odd_rows(values) else run(*values)


def _raise_backward(gm, inputs):
    raise RuntimeError("planted: cannot compile aten.tanh_backward")


def _raise_pair(gm, inputs):
    raise RuntimeError("planted: cos feeding exp")


def _flaky_compile(gm, inputs):
    path = os.environ.get("PLANTED_FLAKY_COUNTER", "/tmp/pt2kit-planted-flaky")
    with open(path, "a+") as f:
        f.seek(0)
        count = len(f.read())
        f.write("x")
    if count == 0:  # a second look at it differs
        raise RuntimeError("planted: flaky failure")


def _raise_in_context(gm, inputs):
    from torch._guards import TracingContext

    if TracingContext.try_get() is not None:
        raise RuntimeError("planted: cos needs the tracing context")


def _second_run_fails(gm, example_inputs):
    runs, hit = [], _has(gm, aten.cos.default)  # (per compiled graph: a fresh count for each compile)

    def compiled(args):
        values = list(args)
        args.clear()
        runs.append(1)
        if hit and len(runs) > 1:
            raise RuntimeError("planted: the compiled cos ran twice")
        return gm.forward(*values)

    compiled._boxed_call = True
    return compiled


def _register(name, fw=None, bw=None, inference=None):
    nop = _compiler()
    extra = {"inference_compiler": inference} if inference else {}
    register_backend(aot_autograd(fw_compiler=fw or nop, bw_compiler=bw or nop, **extra), name=name)


_register("planted_compile_error", fw=_compiler(on_compile=_raise_compile))
_register("planted_backward_error", bw=_compiler(on_compile=_raise_backward, trigger=(aten.tanh_backward.default,)))
_register("planted_runtime_error", fw=_compiler(on_run=_raise_run))
_register("planted_crash", fw=_compiler(on_run=_abort))
_register("planted_segfault", fw=_compiler(on_run=_segfault))
_register("planted_hang", fw=_compiler(on_run=_hang))
_register("planted_accuracy", fw=_compiler(on_run=_off_by_half))
_register("planted_wrong_cos", fw=_compiler(on_compile=_wrong_cos))
_register("planted_pair", fw=_compiler(on_compile=_raise_pair, trigger=(aten.cos.default, aten.exp.default)))
_register("planted_value", fw=_compiler(on_run=_values_above_100))
_register("planted_flaky", fw=_compiler(on_compile=_flaky_compile))
_register("planted_in_context", fw=_compiler(on_compile=_raise_in_context))
_register("planted_inference_error", inference=_compiler(on_compile=_raise_compile))
_register("planted_second_run", fw=_second_run_fails)
_register("planted_odd_rows", fw=_compiler(on_run=_odd_rows_raise))
_register("planted_odd_rows_accuracy", fw=_compiler(on_run=_odd_rows_off))


def _all_nodes(gm):
    """A graph's nodes and those of its subgraphs (the bodies of higher-order ops)."""
    nodes = list(gm.graph.nodes)
    for child in gm.children():
        if isinstance(child, torch.fx.GraphModule):
            nodes += _all_nodes(child)
    return nodes


@register_backend(name="planted_dynamo_error")
def planted_dynamo_error(gm, example_inputs):
    _log(gm, example_inputs)
    if any(n.op == "call_function" and n.target is torch.cos for n in _all_nodes(gm)):
        raise RuntimeError("planted: torch.cos is not supported")
    return gm.forward


def _symbolic(gm, key):
    """Does the graph take any symbolic size (dynamic shapes)?"""
    for n in gm.graph.find_nodes(op="placeholder"):
        v = n.meta.get(key)
        if isinstance(v, torch.SymInt) or (isinstance(v, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in v.shape)):
            return True
    return False


def _raise_symbolic(gm, inputs):
    if _symbolic(gm, "val"):
        raise RuntimeError("planted: symbolic cos is not supported")


def _multiple_of_7(run, values):
    if any(isinstance(v, torch.Tensor) and v.dim() and v.shape[0] % 7 == 0 for v in values):
        raise RuntimeError("planted: cos kernel fails on a multiple of 7 rows")
    return run(*values)


_register("planted_dynamic_aot", fw=_compiler(on_compile=_raise_symbolic))
_register("planted_multiple_of_7", fw=_compiler(on_run=_multiple_of_7))


@register_backend(name="planted_dynamic_dynamo")
def planted_dynamic_dynamo(gm, example_inputs):
    """A plain backend that rejects torch.cos only in graphs with symbolic sizes."""
    if _symbolic(gm, "example_value") and any(n.op == "call_function" and n.target is torch.cos for n in gm.graph.nodes):
        raise RuntimeError("planted: symbolic torch.cos is not supported")
    return gm.forward


def _raise_all_reduce(gm, inputs):
    raise RuntimeError("planted: cannot lower _c10d_functional.all_reduce")


_register("planted_no_all_reduce", fw=_compiler(on_compile=_raise_all_reduce, trigger=(torch.ops._c10d_functional.all_reduce.default,)))


_healthy_aot = aot_autograd(fw_compiler=_compiler(), bw_compiler=_compiler())


@register_backend(name="planted_pre_aot")
def planted_pre_aot(gm, example_inputs):
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.cos:
            node.target = torch.sin
    gm.recompile()
    return _healthy_aot(gm, example_inputs)


def _drop_write_after_mul(gm, inputs):
    """Forget a ``copy_`` into a graph input whose new value a ``mul`` computes (in place, as a compiler pass)."""
    for node in list(gm.graph.find_nodes(op="call_function", target=aten.copy_.default)):
        target, value = node.args
        if target.op == "placeholder" and getattr(value, "target", None) == aten.mul.Tensor:
            node.replace_all_uses_with(target)
            gm.graph.erase_node(node)
    gm.recompile()


register_backend(
    aot_autograd(fw_compiler=_compiler(on_compile=_drop_write_after_mul, trigger=(aten.copy_.default,)), keep_inference_input_mutations=True),
    name="planted_lost_write",
)


def _crash_on_zerotensor(run, values):
    if any(isinstance(v, torch.Tensor) and torch._is_zerotensor(v) for v in values):
        ctypes.string_at(0)
    return run(*values)


_register("planted_zero_tangent", bw=_compiler(on_run=_crash_on_zerotensor, trigger=()))


def _raise_with_marker(gm, inputs):
    if os.path.exists("planted-marker"):
        raise RuntimeError("planted: cos fails beside planted-marker")


_register("planted_cwd_marker", fw=_compiler(on_compile=_raise_with_marker))


def _raise_on_odd_compiles(gm, inputs):
    path = os.environ.get("PLANTED_ALTERNATING_COUNTER", "/tmp/pt2kit-planted-alternating")
    with open(path, "a+") as f:
        f.seek(0)
        count = len(f.read())
        f.write("x")
    if count % 2 == 0:  # the 1st, 3rd, 5th... compile of a graph with cos
        raise RuntimeError("planted: cos fails every other compile")


_register("planted_alternating", fw=_compiler(on_compile=_raise_on_odd_compiles))


def _raise_run_backward(run, values):
    raise RuntimeError("planted: aten.tanh_backward kernel failed at run time")


# The backward's own doors: its compiled code raises as it runs, or computes a wrong gradient.
_register("planted_backward_runtime_error", bw=_compiler(on_run=_raise_run_backward, trigger=(aten.tanh_backward.default,)))
_register("planted_backward_accuracy", bw=_compiler(on_run=_off_by_half, trigger=(aten.tanh_backward.default,)))
_register("planted_backward_segfault", bw=_compiler(on_run=_segfault, trigger=(aten.tanh_backward.default,)))


def _slow_first_compile(gm, inputs):
    """The program's first compile of cos takes longer than a short --timeout (a loaded machine), then raises;
    every later compile raises at once."""
    path = os.environ.get("PLANTED_SLOW_FIRST_COUNTER", "/tmp/pt2kit-planted-slow-first")
    with open(path, "a+") as f:
        f.seek(0)
        count = len(f.read())
        f.write("x")
    if count == 0:
        time.sleep(float(os.environ.get("PLANTED_SLOW_FIRST_SECONDS", 30)))
    raise RuntimeError("planted: cannot compile aten.cos")


_register("planted_slow_first", fw=_compiler(on_compile=_slow_first_compile))

#: What torch says of a CUDA illegal memory access (the first line is the error; the rest, torch's advice).
STICKY = (
    "CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect."
)


def _sticky_in_a_large_compile(gm, inputs):
    if sum(node.op == "call_function" for node in gm.graph.nodes) >= 4:
        raise RuntimeError(STICKY)


def _sticky_at_run(run, values):
    raise getattr(torch, "AcceleratorError", RuntimeError)(STICKY)


_register("planted_device_error", fw=_compiler(on_compile=_sticky_in_a_large_compile, on_run=_sticky_at_run))
