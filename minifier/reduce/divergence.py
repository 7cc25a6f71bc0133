"""A wrong answer seen in only some outputs: what those outputs need, and the pass that keeps only that.

An accuracy query judges each output of a candidate on its own too
(:attr:`~minifier.stages.run.Outcome.diverging`), and the reducer keeps the diverging ones
by candidate key (:attr:`~minifier.reduce.engine.Reducer.diverging`). Outputs computed
right, and the nodes only they need, are not the bug, nor is an output that reads another
diverging one: :func:`narrowed` keeps the first wrong values and what they read.
"""

from __future__ import annotations

from dataclasses import replace

import torch.fx as fx

from .engine import Candidate, Reducer


def follow_divergence(r: Reducer) -> None:
    """Keep only what the best's diverging outputs need (see :func:`narrowed`): one query."""
    if r.settled():
        return
    narrow_to_divergence(r, r.best)


def narrow_to_divergence(r: Reducer, current: Candidate) -> bool:
    """Ask about ``current`` narrowed to its diverging outputs, if its query saw some outputs right; True if that fails."""
    smaller = narrowed(r, current)
    return smaller is not None and r.consider(smaller)


def narrowed(r: Reducer, c: Candidate) -> Candidate | None:
    """``c`` cut down to what its diverging outputs need, when its query saw a wrong answer in only some of them.

    What is left is the first wrong values and what they read (not random ops kept for
    the numbers later ones draw). None: no query said, or every output diverged first-hand.
    """
    c = r.normalize(c)
    names = set(r.diverging.get(c.key(), ()))
    kept = set(c.kept)
    nodes = {n.name: n for n in r.origin.gm.graph.nodes}
    first = tuple(o for o in c.outputs if o in names and not (upstream(nodes, o, kept) & names))
    if not first or set(first) >= set(c.outputs):
        return None
    cone = set(first).union(*(upstream(nodes, o, kept) for o in first))
    return r.normalize(replace(c, kept=tuple(n for n in c.kept if n in cone), outputs=first))


def upstream(nodes: dict[str, fx.Node], name: str, kept: set[str]) -> set[str]:
    """The kept nodes ``name`` reads, directly or through other kept nodes."""
    seen: set[str] = set()
    todo = [a.name for a in nodes[name].all_input_nodes]
    while todo:
        a = todo.pop()
        if a in kept and a not in seen:
            seen.add(a)
            todo.extend(b.name for b in nodes[a].all_input_nodes)
    return seen
