"""Scans that drop chunks of items one after another, their next questions asked ahead.

A scan over chunks is the heart of delta debugging: drop chunk ``i``; if the failure
stays, the best is smaller and the scan goes on from ``i`` in it; if not, from ``i + 1``.
Each answer decides the next question, so the scan looks sequential. It is not, mostly:
the next ``jobs`` chunks of the current best are independent questions, and near the
end of a reduction almost every answer is "no" (each node the failure needs is asked
once more to prove the result 1-minimal). So each step asks the next ``jobs`` chunks
side by side (:meth:`~minifier.reduce.engine.Reducer.consider_all` with ``ahead``): the
scan then reads its answers from the cache, one at a time, in the order it always did.

The invariant: **what a scan ends with does not depend on ``jobs``.** Answers asked ahead
never move the best; only the scan's own reading of them does, in its own order. A chunk
asked ahead of a removal was asked in a graph the scan has left, and its answer goes
unread (the price of speculation: a wasted compile, never a different result). An answer
counts in :attr:`~minifier.reduce.engine.Reducer.queries` once read, so the query bound is
the algorithm's, whatever the cores.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from .engine import Candidate, Reducer

#: At most this many items, ddmin starts with single items: coarser chunks of a few
#: items that must mostly stay (a bug of several ops) cost queries and rarely go.
SINGLES_UP_TO = 8

Items = Callable[[Candidate], tuple[str, ...]]
Drop = Callable[[tuple[str, ...]], Candidate]


def ddmin(r: Reducer, items: Items, drop: Drop, singles: bool = False) -> bool:
    """ddmin over ``items(r.best)``: drop chunks of halving size while one can go (at least one item stays).

    Each size is one scan over the items; a removal resumes the scan where it was
    (ddmin's restart from the first chunk asks again about every chunk before it, in a
    graph it has not been asked in). Single items first when there are few of them, or
    when ``singles`` says larger chunks were asked already.

    True when it ended on single items, none of which could go: the best is then 1-minimal.
    """
    size = math.ceil(len(items(r.best)) / 2) if len(items(r.best)) > SINGLES_UP_TO and not singles else 1
    while len(items(r.best)) > 1:
        if size == 1:
            return drop_singles(r, items, drop)
        _scan(r, items, drop, size)
        size = math.ceil(size / 2)
    return False


def drop_singles(r: Reducer, items: Items, drop: Drop) -> bool:
    """Scans over single items, each dropped if it can go; a removal resumes the scan where it was.

    Restarting from the first item after each removal (ddmin's rule) asks again about
    every item before it, each in a graph it has not been asked in: quadratic in the
    items a multi-op failure lets go one by one. A scan that removed something is
    followed by one more (an earlier item may go now), so the result is still 1-minimal.
    True when the last scan removed nothing (at least one item always stays).
    """
    while True:
        removed = _scan(r, items, drop, 1)
        if not removed or len(items(r.best)) <= 1:
            return not removed


def _scan(r: Reducer, items: Items, drop: Drop, size: int) -> bool:
    """One scan over chunks of ``size``: each dropped if the failure stays without it. True if one was."""
    removed, i = False, 0
    while i < len(items(r.best)) and len(items(r.best)) > 1:
        current = items(r.best)
        if r.jobs > 1:  # the next unasked chunks of this best, side by side (read below, one at a time)
            ask_ahead(r, (drop(current[k : k + size]) for k in range(i, len(current), size)))
        if r.consider(drop(current[i : i + size])) and items(r.best) != current:
            removed = True  # (the next chunk is now at i)
        else:
            i += size  # (a drop that fails but leaves the best as it was, the same graph normalized, is no progress)
    return removed


def ask_ahead(r: Reducer, candidates: Iterable[Candidate]) -> None:
    """The first ``r.jobs`` of ``candidates`` not answered yet, asked side by side, when the first of all is one.

    Nothing is asked while the next question's answer is known: the batch then goes out
    when the scan reaches a question it must wait for, ``jobs`` new ones in it.
    """
    unasked: list[Candidate] = []
    for i, c in enumerate(candidates):
        if r.normalize(c).key() not in r.cache:
            unasked.append(c)
        elif i == 0:
            return
        if len(unasked) == r.jobs:
            break
    r.consider_all(unasked, ahead=True)
