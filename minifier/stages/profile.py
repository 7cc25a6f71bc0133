"""What the reducer knows about the original graph: each node's value, from one eager run.

The reducer (:mod:`minifier.reduce.engine`) cuts graphs apart. Where it cuts, the value the
original graph computed there becomes an input of the smaller graph (or a literal).
:func:`profile_case` runs the original once, eagerly, in a worker child, and
describes what every op node produces (:class:`NodeInfo`: a tensor and its layout, a
literal, or something that cannot be cut); :func:`realize` fills a candidate's cut
inputs with the original's values when a query runs it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

from ..unit.case import Boundary, GraphCase, TensorMeta
from ..unit.copies import clone_tensor
from pt2kit.seams import pytree, special_tensors
from pt2kit.signature import innermost_exception, said
from ..unit.graphio import DYNAMIC_DIMS, SYMINT, node_meta

#: Values an FX graph can take as a literal argument when the node producing them is cut.
LITERAL_TYPES = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


@dataclass(frozen=True)
class NodeInfo:
    """What an op node of the original graph produces, as the minifier needs to know it.

    ``kind`` is ``tensor`` (a cut here becomes a new graph input of ``meta``),
    ``literal`` (a cut inlines ``literal``), ``other`` (tuples of tensors and the
    like: a cut must happen at their ``getitem`` users instead), ``special`` (a
    quantized or sparse tensor pt2kit cannot rebuild as an input: never cut, but an
    output) or ``unreached`` (a partial profile's node after the one eager raises at:
    never cut, but an output).
    """

    kind: str
    meta: TensorMeta | None = None
    literal: Any = None
    digest: str | None = None  # tensors: hash of the bytes, to spot inputs with equal values
    dynamic_dims: tuple[int, ...] = ()  # tensors: the dims that were symbolic when the graph was traced
    symint: bool = False  # a symbolic int: inlined as a literal only in a fully static candidate


def _literal(value: Any) -> tuple[bool, Any]:
    if isinstance(value, LITERAL_TYPES):
        return True, value
    if isinstance(value, (tuple, list, torch.Size)) and all(isinstance(v, LITERAL_TYPES) for v in value):
        return True, tuple(value) if isinstance(value, (tuple, torch.Size)) else list(value)
    return False, None


def _digest(t: torch.Tensor) -> str:
    """A fingerprint of a tensor's values. Equal fingerprints only propose merging two
    inputs; the merged candidate must still fail to be kept, so a collision costs a
    query, never correctness."""
    t = t.detach().resolve_conj().resolve_neg()
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    # (sums accumulated in float64, without making a float64 copy of the tensor)
    sums = [float(x.sum(dtype=torch.float64)) for x in (t, t.abs(), t * t)] if t.numel() else [0.0, 0.0, 0.0]
    return repr((tuple(t.shape), str(t.dtype), *sums))


class _Recording(fx.Interpreter):
    """Runs a graph eagerly and keeps (clones of) the values of the nodes asked for."""

    def __init__(self, gm: fx.GraphModule, keep: set[str] | None) -> None:
        super().__init__(gm)
        self.keep = keep
        self.values: dict[str, Any] = {}

    def run_node(self, n: fx.Node) -> Any:
        result = super().run_node(n)
        if n.op in ("call_function", "call_method", "call_module") and (self.keep is None or n.name in self.keep):
            # clone now: a later in-place op may change the tensor (one no repro can rebuild,
            # a quantized or sparse one, is kept as it is: it is never cut into an input)
            self.values[n.name] = pytree.tree_map_only(torch.Tensor, _kept, result)
        return result


class Uncopied:
    """A node's value that cannot be copied out of the run (one inside a ``torch.func`` transform): never cut into an input."""


def _kept(t: torch.Tensor) -> torch.Tensor | Uncopied:
    if special_tensors.unsupported(t):
        return t
    try:
        return clone_tensor(t.detach(), t.requires_grad)
    except RuntimeError:  # (requires_grad_ on a tensor inside a functorch transform level)
        return Uncopied()


def eager_values(
    case: GraphCase, names: set[str] | None = None, *, partial: bool = False, unless: str | None = None
) -> dict[str, Any]:
    """Values of ``case``'s op nodes in one eager run (all of them when ``names`` is None).

    ``partial``: where eager raises, the values of the nodes before the one that raised;
    ``unless`` eager raises that very exception (the failure's own: then eager fails as the
    compiled run does, and the graph shows no compiler bug on these inputs).
    """
    from .distributed import join_fake_group

    join_fake_group(case)  # its collectives run on a fake process group
    torch.manual_seed(0)
    recording = _Recording(case.gm, names)
    grad = torch.enable_grad() if case.boundary == Boundary.DYNAMO and case.grad_enabled else torch.no_grad()
    with grad:
        try:
            recording.run(*case.materialize_inputs())
        except Exception as e:
            if not partial or type(innermost_exception(e)).__name__ == unless:
                raise
    return recording.values


class GraphRaised(Exception):
    """The graph itself raised while it ran eagerly (not pt2kit's profiling around it)."""


@dataclass(frozen=True)
class EagerRunRaised:
    """The graph raised when run eagerly on its own inputs: there is nothing to profile."""

    error: str


def profile_or_why(
    case: GraphCase, values_path: Path | None = None, *, partial: bool = False, unless: str | None = None
) -> dict[str, NodeInfo] | EagerRunRaised:
    """:func:`profile_case`, or why the graph's eager run raised (its inputs may be another graph's wrong outputs).

    ``partial``: a graph whose failure is that eager raises (and the compiled run returns) is
    profiled up to the node that raises; the nodes from there on are never cut into inputs.
    ``unless``: as :func:`eager_values`'s.
    """
    try:
        return profile_case(case, values_path, partial=partial, unless=unless)
    except GraphRaised as e:
        return EagerRunRaised(str(e))


def profile_case(
    case: GraphCase,
    values_path: Path | None = None,
    *,
    update: bool = False,
    partial: bool = False,
    unless: str | None = None,
) -> dict[str, NodeInfo]:
    """Describe what each op node of ``case`` produces (one eager run).

    With ``values_path``, the tensor values are also saved there, once: every later
    query reads the values its cut inputs need from that file (memory-mapped) instead
    of running the whole original graph again (:func:`realize`). ``update``: the
    values join those saved already, replacing the ones of the same nodes (a reduced
    graph on resized inputs, profiled again: see :meth:`~minifier.reduce.engine.Reducer.reprofiled`).
    """
    info = {}
    nodes = {n.name: n for n in case.gm.graph.nodes}
    try:
        values = eager_values(case, partial=partial, unless=unless)
    except Exception as e:  # the graph's own error, for profile_or_why to say
        raise GraphRaised(said(e)) from e
    if values_path is not None:
        saved = torch.load(values_path, weights_only=True) if update and values_path.exists() else {}
        # (a special tensor's plain one: a ZeroTensor cannot be saved, and a cut input of one needs no value)
        tensors = saved | {
            name: special_tensors.plain(v.detach())
            for name, v in values.items()
            if isinstance(v, torch.Tensor) and not special_tensors.unsupported(v)
        }
        tmp = values_path.with_name(values_path.name + ".tmp")
        torch.save(tensors, tmp)
        tmp.replace(values_path)
    for name, value in values.items():
        traced = node_meta(nodes[name])
        if isinstance(value, torch.Tensor) and special_tensors.unsupported(value):
            info[name] = NodeInfo("special")  # (a quantized or sparse value: never an input, but an output)
        elif isinstance(value, torch.Tensor):
            info[name] = NodeInfo(
                "tensor", TensorMeta.of(value), digest=_digest(value), dynamic_dims=tuple(traced.get(DYNAMIC_DIMS, ()))
            )
        else:
            ok, literal = _literal(value)
            info[name] = (
                NodeInfo("literal", literal=literal, symint=bool(traced.get(SYMINT))) if ok else NodeInfo("other")
            )
    for node in case.gm.graph.nodes:  # (partial: the nodes eager never reached)
        if node.op in ("call_function", "call_method", "call_module") and node.name not in info:
            info[node.name] = NodeInfo("unreached")
    return info


def realize(case: GraphCase, origin: GraphCase | None, values_path: Path | None = None) -> GraphCase:
    """Fill in the inputs of a minifier candidate that take values from ``origin``'s nodes.

    From the values :func:`profile_case` saved, when it did (and they are all there);
    otherwise from an eager run of the original graph.
    """
    needed = {i.source for i in case.inputs if i.source is not None and i.seed is None}
    if not needed:
        return case
    values: dict[str, Any] = {}
    if values_path is not None and values_path.exists():
        saved = torch.load(values_path, mmap=True, weights_only=True)
        values = {name: clone_tensor(saved[name], saved[name].requires_grad) for name in needed if name in saved}
    if set(values) != needed:
        if origin is None:
            return case  # (the caller runs the original graph for them)
        values = eager_values(origin, needed)
    inputs = [dataclasses.replace(i, value=values[i.source]) if i.source in needed else i for i in case.inputs]
    return case.replace(inputs=inputs)
