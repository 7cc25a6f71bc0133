"""The finished form of a candidate: how a repro's inputs and config end, asked for early where it pays.

A reduction ends by making its graph's inputs seeded random values, as small as the
failure allows, and by dropping the config the failure does not need
(:func:`~minifier.reduce.passes.randomize_inputs`, :func:`~minifier.reduce.passes.shrink_shapes`,
:func:`~minifier.reduce.passes.minimize_config`). Each of those starts with "all of it at
once", and :func:`finished_forms` is that pair of candidates: every tensor input random
and every size 1 (:data:`SMALL_INPUTS` or fewer elements keep their sizes), and the same
without config. :func:`~minifier.reduce.passes.finish_at_once` asks them side by side; a
splitting search asks them of the one node it kept unasked, in place of that node alone
(:func:`~minifier.reduce.splits.keep_failing_part`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from .engine import Candidate, Reducer
from pt2kit.seams.config import NEVER_DROPPED

#: Random inputs with this many elements or fewer (all of them together) are small
#: enough for a repro: :func:`shrink_shapes` leaves their sizes alone.
SMALL_INPUTS = 4096


def already_small(r: Reducer, base: Candidate) -> bool:
    """Do ``base``'s random inputs hold :data:`SMALL_INPUTS` elements or fewer, all together?"""
    return sum(math.prod(shape) for _, shape in current_shapes(r, base)) <= SMALL_INPUTS


def current_shapes(r: Reducer, base: Candidate | None = None) -> list[tuple[str, tuple[int, ...]]]:
    """The random tensor inputs of ``base`` (the best by default) and their current shapes."""
    base = base or r.best
    shapes = dict(base.shapes)
    return [
        (name, shapes.get(name, r._shape(name)))
        for name in r.input_names(base.kept, base.substituted)
        if name in base.random and r._input_is_tensor(name)
    ]


def resized_to(r: Reducer, members: list[tuple[str, int]], size: int, base: Candidate | None = None) -> Candidate:
    base = base or r.best
    shapes = dict(current_shapes(r, base))
    for name, d in members:
        shape = list(shapes[name])
        shape[d] = size
        shapes[name] = tuple(shape)
    merged = {**dict(base.shapes), **{name: shapes[name] for name, _ in members}}
    return replace(base, shapes=tuple(sorted(merged.items())))


def finished_forms(r: Reducer, base: Candidate) -> list[Candidate]:
    """``base`` with every tensor input random and every size 1 (unless already small), then the same without config."""
    tensors = [n for n in r.input_names(base.kept, base.substituted) if r._input_is_tensor(n)]
    random = replace(base, random=base.random | set(tensors))
    ones = [(name, d) for name, shape in current_shapes(r, random) for d, n in enumerate(shape) if n > 1]
    small = resized_to(r, ones, 1, random) if ones and not already_small(r, random) else random
    bare = replace(small, config=frozenset(e for e in small.config if e[1] in NEVER_DROPPED.get(e[0], ())))
    return [small, bare]
