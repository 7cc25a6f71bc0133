"""Splitting searches: the best cut into parts, and the part that fails alone kept.

Where most compiler bugs are one op, a graph's nodes (or a sample of one node per
kind of op) are cut into thirds, the first two asked side by side: a round of two
queries keeps a third (:func:`keep_failing_part`). Used by the passes that start a
reduction (:func:`~minifier.reduce.passes.follow_blame`,
:func:`~minifier.reduce.passes.sample_op_kinds`); like every pass, they only propose
to the one cached ``consider()``, so the best only shrinks, and the parts depend on the
graph alone: the same result for any number of jobs.
"""

from __future__ import annotations

from .divergence import narrow_to_divergence
from .engine import Candidate, Reducer
from .finish import finished_forms
from pt2kit.signature import Kind


def split_sample(r: Reducer, fraction: float = 0.5, base: Candidate | None = None) -> bool | None:
    """``base``'s (the best's) sample of one node per kind, cut to the part that fails; True if a part or the whole
    sample did (None: no sample below ``fraction`` of it).

    Each sampled node stands alone, its inputs cut, so the first round compiles every
    kernel the later rounds need (splitting the nodes themselves would write new fused
    kernels every round).
    """
    base = base or r.best
    kept = base.kept
    first: dict[tuple[str, tuple[str, ...]], str] = {}
    for name in kept:
        if r.can_stand_alone(name, base):
            first.setdefault(r.op_kind(name), name)
    sample = set(first.values())
    sample |= {reader for name in first.values() for reader in r.tuple_readers(name)}
    if len(sample) > len(kept) * fraction or len(sample) == len(kept):
        return None
    whole = r.without([n for n in kept if n not in sample], base)
    return keep_failing_part(r, whole) or r.consider(whole)


def keep_failing_part(r: Reducer, base: Candidate | None = None) -> bool:
    """While one third of ``base`` (the best by default) fails alone, keep that third; True if one did.

    Each round asks the first two thirds side by side. When neither fails, the last
    third is where a single culprit must be: it is not asked, but split in turn, so a
    round of two queries cuts the nodes to a third, not a half (10 nodes: about 2.4
    rounds, not 3.6). Whatever is kept that way is asked once the search ends, the
    innermost first, so the best still only shrinks through queries. Of two nodes,
    each is asked alone. For a sample, whose nodes hardly read one another, every round
    compiles graphs a third the size of the last; when nothing fails (two kinds must
    meet), the searches below take over. The parts depend on the graph only, and the
    first failing part in order is kept: the same result for any number of jobs. A
    single node kept unasked for a compile error is asked finished (:func:`compiled_alone`).
    """
    current = r.normalize(base or r.best)
    shrunk = False
    unasked: list[Candidate] = []  # last thirds kept without a query, outermost first
    while len(current.kept) > 1:
        if narrow_to_divergence(r, current):
            # A wrong answer in only some outputs: a sample's nodes stand alone, so those
            # outputs are the culprits: one query settles it.
            shrunk, current, unasked = True, r.best, []
            continue
        parts = split_parts(r, current.kept, 3 if len(current.kept) > 2 else 2)
        if len(parts) < 2:
            break  # no split keeps every multi-output node with its parts
        alone = [r.without([n for n in current.kept if n not in part], current) for part in parts]
        asked = alone if len(parts) == 2 else alone[:-1]
        if any(r.consider_all(asked, first=True)):
            shrunk, current, unasked = True, r.best, []  # the first part that fails, in order
        elif len(asked) < len(alone):
            current = r.normalize(alone[-1])
            unasked.append(current)
        else:
            break
    for kept_unasked in reversed(unasked):
        if (
            kept_unasked is unasked[-1]
            and compiled_alone(r, kept_unasked)
            and any(r.consider_all(finished_forms(r, kept_unasked)))
        ):
            return True
        if r.consider(kept_unasked):
            return True
    return shrunk


def compiled_alone(r: Reducer, c: Candidate) -> bool:
    """Is ``c`` one node, and the failure a compile error? Then the node it kept unasked is asked in its finished form
    first (:func:`~minifier.reduce.finish.finished_forms`): a compiler does not read the inputs' values, so the pair
    usually fails where the node does, and the round that would ask the node as it is, then the round that would
    finish it, become one. When neither fails, the node is asked as it is: one round more."""
    return len(c.kept) == 1 and r.target.kind == Kind.COMPILE_ERROR


def split_parts(r: Reducer, kept: tuple[str, ...], k: int) -> list[tuple[str, ...]]:
    """``kept`` cut into at most ``k`` runs of about equal length, each multi-output node kept with its parts."""
    parts: list[tuple[str, ...]] = []
    rest = kept
    for left in range(k, 1, -1):
        cut = split_point(r, rest, round(len(rest) / left))
        if cut == len(rest):
            break
        parts.append(rest[:cut])
        rest = rest[cut:]
    return [*parts, rest]


def split_point(r: Reducer, kept: tuple[str, ...], at: int) -> int:
    """The split nearest ``at`` that keeps every multi-output node with its parts (``len(kept)``: none does).

    Cut from its ``getitem`` readers, a node like ``max_pool_with_indices`` is dead
    code, and so is whatever fed it. The split may move either way: of a relu, the
    pool it feeds and the pool's two parts, only "the relu | the pool and its parts"
    keeps both whole.
    """

    def keeps_parts_together(s: int) -> bool:
        later = set(kept[s:])
        return not any(reader in later for name in kept[:s] for reader in r.tuple_readers(name))

    nearest_first = sorted(range(1, len(kept)), key=lambda s: (abs(s - at), -s))
    return next((s for s in nearest_first if keeps_parts_together(s)), len(kept))
