"""Seam: the eager path of higher-order ops, where torch compiles a graph for itself.

Called outside a compile, ``torch.cond`` (and ``while_loop``, ``scan``, ``map``,
``invoke_subgraph``, ``strict_mode``) runs by compiling a wrapper of torch's own with
``torch.compile(..., fullgraph=True)`` (``torch._higher_order_ops.utils._hop_compile_and_call``),
and ``base_hop`` compiles its ops with ``aot_eager``. Those graphs pass through every
dynamo backend hook, pt2kit's included, yet they are torch's, not the program's: the
culprit is never one of them, and a repro of one rebuilds torch's wrapper, not the
user's code. ``flex_attention`` called eagerly does the same with a wrapper it defines
inside itself (``flex_attention.<locals>._flex_attention_hop_wrapper``).
:func:`is_torch_own_compile` tells them apart by the code being compiled: it lives in
``torch/_higher_order_ops/``, or it is such a wrapper of a higher-order op (``*_hop_wrapper``
in torch's package). Other functions torch defines inside its own are the program's when
compiled: ``torch.compile(module)`` compiles dynamo's ``wrap_inline.<locals>.inner``, and
``torch.compile(jacfwd(f))`` functorch's ``jacfwd.<locals>.wrapper_fn``.
"""

from __future__ import annotations

import inspect
import os
import types

from . import Seam

SEAM = Seam(
    wraps=(
        "torch._higher_order_ops.utils._hop_compile_and_call (higher-order ops run eagerly by compiling themselves),"
        " flex_attention's _flex_attention_hop_wrapper; torch._dynamo.external_utils.wrap_inline (the program's)"
    ),
    features=("minify run and the hook: the program's graphs, without those torch compiles for itself",),
)


def probe() -> None:
    from torch._higher_order_ops import utils

    # (torch 2.11 and 2.12 name it _maybe_compile_and_run_fn; what matters is where the compiled code lives)
    compile_and_call = getattr(utils, "_hop_compile_and_call", None) or getattr(utils, "_maybe_compile_and_run_fn", None)
    if compile_and_call is None:
        raise AttributeError("torch._higher_order_ops.utils._hop_compile_and_call is gone")
    if "torch.compile(" not in inspect.getsource(compile_and_call):
        raise AttributeError("_hop_compile_and_call no longer calls torch.compile")
    if not is_torch_own_file(inspect.getsourcefile(compile_and_call) or ""):
        raise AttributeError("higher-order ops no longer live in torch/_higher_order_ops/")
    import torch

    from torch._dynamo import external_utils

    if is_torch_own_compile(torch.nn.Linear.forward.__code__) or is_torch_own_compile(
        external_utils.wrap_inline(lambda: None).__code__
    ):
        raise AttributeError("the program's compiled code is taken for a wrapper torch compiles for itself")
    import torch.nn.attention.flex_attention as flex

    if "_flex_attention_hop_wrapper" not in inspect.getsource(flex):
        raise AttributeError("flex_attention no longer compiles a _flex_attention_hop_wrapper of its own")


def _hop_dir() -> str:
    import torch._higher_order_ops

    return os.path.dirname(os.path.abspath(torch._higher_order_ops.__file__)) + os.sep


def is_torch_own_file(filename: str) -> bool:
    """Is this file one of the higher-order ops' own (whose functions torch compiles for itself)?"""
    return os.path.abspath(filename).startswith(_hop_dir())


def _torch_dir() -> str:
    import torch

    return os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def is_torch_own_compile(code: types.CodeType | None) -> bool:
    """Is dynamo compiling one of torch's own wrappers (a higher-order op run eagerly), not the program's code?"""
    if code is None:
        return False
    if is_torch_own_file(code.co_filename):
        return True
    return code.co_name.endswith("_hop_wrapper") and os.path.abspath(code.co_filename).startswith(_torch_dir())
