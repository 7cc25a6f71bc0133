"""The canonical form of a reduced graph: a :class:`Candidate`, described relative to the original.

A candidate never holds a graph. It names which op nodes of the original graph stay,
which of them are returned, and what stands in for the rest (inputs, random values,
same-shaped operands); :meth:`minifier.reduce.engine.Reducer.build` makes the graph.
Its :meth:`~Candidate.key` is what the reducer's cache and checkpoint are keyed by.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any

from ..unit.case import GraphInput


@dataclass(frozen=True)
class Candidate:
    """A reduced version of the original graph, described relative to it."""

    kept: tuple[str, ...]  # op nodes of the original graph, in graph order
    outputs: tuple[str, ...]  # kept nodes the graph returns
    random: frozenset[str] = frozenset()  # inputs replaced by seeded random tensors
    config: frozenset[tuple[str, str]] = frozenset()  # (config module, key) entries kept
    backward: bool = True
    merged: frozenset[tuple[str, str]] = frozenset()  # (input, equal-valued input it reads instead)
    static: bool = False  # every size concrete (the original's symbolic sizes dropped)
    shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()  # inputs given smaller (random, contiguous) values
    # (op node, the same-shaped node its readers read instead): structure no cut can reach, where the
    # failure needs the node's operand computed by the op before it, not fed in
    substituted: frozenset[tuple[str, str]] = frozenset()
    # (body path, op node, stand-in) in the bodies of higher-order ops: see minifier.reduce.bodies
    body_edits: frozenset[tuple[str, str, str]] = frozenset()
    # (higher-order op node, output index) no top-level node reads, gone from its bodies: minifier.reduce.bodies
    dropped_outputs: frozenset[tuple[str, int]] = frozenset()
    # (higher-order op node, its argument, index there) of an operand no body reads, gone: minifier.reduce.bodies
    dropped_operands: frozenset[tuple[str, int, int]] = frozenset()

    def key(self) -> str:
        return json.dumps(
            [
                self.kept,
                self.outputs,
                sorted(self.random),
                sorted(self.config),
                self.backward,
                sorted(self.merged),
                self.static,
                sorted(self.shapes),
                sorted(self.substituted),
                *([sorted(self.body_edits)] if self.body_edits or self.dropped_outputs or self.dropped_operands else []),
                *([sorted(self.dropped_outputs)] if self.dropped_outputs or self.dropped_operands else []),
                *([sorted(self.dropped_operands)] if self.dropped_operands else []),
            ]
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kept": list(self.kept),
            "outputs": list(self.outputs),
            "random": sorted(self.random),
            "config": sorted(list(c) for c in self.config),
            "backward": self.backward,
            "merged": sorted(list(m) for m in self.merged),
            "static": self.static,
            "shapes": [[name, list(shape)] for name, shape in self.shapes],
            "substituted": sorted(list(s) for s in self.substituted),
            "body_edits": sorted(list(e) for e in self.body_edits),
            "dropped_outputs": sorted(list(d) for d in self.dropped_outputs),
            "dropped_operands": sorted(list(d) for d in self.dropped_operands),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Candidate:
        return cls(
            kept=tuple(data["kept"]),
            outputs=tuple(data["outputs"]),
            random=frozenset(data["random"]),
            config=frozenset(tuple(c) for c in data["config"]),
            backward=data["backward"],
            merged=frozenset(tuple(m) for m in data["merged"]),
            static=data.get("static", False),
            shapes=tuple((name, tuple(shape)) for name, shape in data.get("shapes", ())),
            substituted=frozenset(tuple(s) for s in data.get("substituted", ())),
            body_edits=frozenset(tuple(e) for e in data.get("body_edits", ())),
            dropped_outputs=frozenset((name, int(i)) for name, i in data.get("dropped_outputs", ())),
            dropped_operands=frozenset((name, int(a), int(i)) for name, a, i in data.get("dropped_operands", ())),
        )


def reshaped(i: GraphInput, shape: tuple[int, ...]) -> GraphInput:
    """A random input given a new (contiguous) shape."""
    assert i.meta is not None
    stride = tuple(math.prod(shape[d + 1 :]) for d in range(len(shape)))
    return replace(i, meta=replace(i.meta, shape=shape, stride=stride), value=None)


def derive_sizes(inputs: list[GraphInput]) -> list[GraphInput]:
    """Keep a symbolic-int input derived from a tensor input's size only while that tensor is an input."""
    names = {i.name for i in inputs}
    return [
        replace(i, derived_from=None, symbolic_int=True) if i.derived_from and i.derived_from[0] not in names else i
        for i in inputs
    ]
