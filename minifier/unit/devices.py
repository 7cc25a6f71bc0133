"""A graph case moved to another device: does a GPU bug show on the CPU too?

``minify repro --device cpu REPRO.py`` asks it. A failure that shows on the CPU too lives
in what both devices share: dynamo, AOTAutograd, the decompositions, Inductor's graph
passes and lowerings. One that does not is the GPU path's own: Triton's code generation,
cudagraphs, a CUDA kernel. Either way the answer names where to look, and on the CPU the
minification goes on with no GPU at all.

:func:`moved_to` moves what a case holds: its inputs (saved values and metadata), the
tensors its graph holds (constants, parameters, buffers), every device its nodes name
(``device=`` arguments, ``.to("cuda")``), in higher-order ops' bodies too, and the
autocast the call ran under.
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Any

import torch
import torch.fx as fx

from .case import GraphCase, GraphInput

#: A device named as a string in a graph (``x.to("cuda:0")``).
_DEVICE_NAME = re.compile(r"(cuda|xpu|mps|hip|cpu|meta)(:\d+)?")


def moved_to(case: GraphCase, device: str) -> GraphCase:
    """``case`` with every tensor and every device it names on ``device``."""
    target = torch.device(device)
    gm = copy.deepcopy(case.gm)
    for module in gm.modules():
        if isinstance(module, fx.GraphModule):
            for node in module.graph.nodes:
                node.args = fx.node.map_aggregate(node.args, lambda a: _on(a, target))
                node.kwargs = fx.node.map_aggregate(node.kwargs, lambda a: _on(a, target))
            module.recompile()
    gm.to(target)  # (its parameters and buffers)
    autocast = dict(case.context.autocast)  # (the autocast its tensors' device ran under is the target's now)
    for source in devices_of(case) - {target.type}:
        if source in autocast:
            autocast[target.type] = autocast.pop(source)
    return replace(
        case,
        gm=gm,
        inputs=[_input_on(i, target) for i in case.inputs],
        constants={name: value.to(target) for name, value in case.constants.items()},
        context=replace(case.context, autocast=tuple(autocast.items())),
    )


def devices_of(case: GraphCase) -> set[str]:
    """The device types a case's tensor inputs live on."""
    return {torch.device(i.meta.device).type for i in case.inputs if i.meta is not None}


def _on(arg: Any, target: torch.device) -> Any:
    if isinstance(arg, torch.device):
        return target
    if isinstance(arg, str) and _DEVICE_NAME.fullmatch(arg):
        return str(target)
    return arg


def _input_on(i: GraphInput, target: torch.device) -> GraphInput:
    if i.meta is None or i.dtensor is not None:
        return i
    value = i.value
    if isinstance(value, torch.Tensor):
        value = value.detach().to(target).requires_grad_(value.requires_grad)
    return replace(i, value=value, meta=replace(i.meta, device=str(target)))
