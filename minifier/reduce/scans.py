"""Delta debugging's scans, their next questions asked ahead.

A scan walks the items from the last back. Each item is dropped alone; if the failure
stays, the cut grows back over the items before it (1, 2, 4, ... then a binary search),
and the scan goes on from the first item the cut did not take. Each answer decides the
next question, so the scan looks sequential. It is not, mostly: near the end of a
reduction almost every answer is "no" (each node the failure needs is asked once more
to prove the result 1-minimal), so each step asks the next ``jobs`` single drops side by
side (:meth:`~minifier.reduce.engine.Reducer.consider_all` with ``ahead``): the scan then
reads its answers from the cache, one at a time, in the order it always did.

The invariant: **what a scan ends with does not depend on ``jobs``.** Answers asked ahead
never move the best; only the scan's own reading of them does, in its own order. A drop
asked ahead of a removal was asked in a graph the scan has left, and its answer goes
unread (the price of speculation: a wasted compile, never a different result). An answer
counts in :attr:`~minifier.reduce.engine.Reducer.queries` once read, so the query bound is
the algorithm's, whatever the cores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .engine import Candidate, Reducer

Items = Callable[[Candidate], tuple[str, ...]]
Drop = Callable[[tuple[str, ...]], Candidate]


def ddmin(r: Reducer, items: Items, drop: Drop) -> bool:
    """Delta debugging over ``items(r.best)``, as scans from the last item back (at least one item stays).

    Each scan asks about each item alone (an item the failure needs costs one query,
    the fewest that proves it needed) and, where one can go, grows the cut back over
    the items before it while the failure stays: 1, 2, 4, ... items, then a binary
    search between the last cut that went and the first that did not. A run of L items
    that can go costs about 2·log2(L) queries, and ddmin's chunks of halving size, which
    cost about 2n queries on a graph whose failure needs many of its n items (a kernel
    of several ops), are not asked at all. A scan that removed something is followed by
    one more (an item may go once others have), so the result is 1-minimal.

    True when the last scan removed nothing: the best is then 1-minimal.
    """
    while len(items(r.best)) > 1:
        if not _scan_back(r, items, drop):
            return True
    return False


def _scan_back(r: Reducer, items: Items, drop: Drop) -> bool:
    """One scan from the last item back: each item dropped alone, a drop that went grown back over its predecessors. True if one went."""
    order = items(r.best)
    removed, pos = False, len(order) - 1
    while pos >= 0 and len(items(r.best)) > 1:
        current = items(r.best)
        if order[pos] not in current:
            pos -= 1
            continue
        if r.jobs > 1:  # the next unasked single drops of this best, side by side (read below, one at a time)
            ask_ahead(r, (drop((n,)) for n in reversed(order[: pos + 1]) if n in current))
        if not (r.consider(drop((order[pos],))) and items(r.best) != current):
            pos -= 1  # (a drop that fails but leaves the best as it was, the same graph normalized, is no progress)
            continue
        removed = True
        before = [n for n in order[:pos] if n in items(r.best)]
        grown = _grow(lambda k: r.consider(drop(tuple(before[len(before) - k :]))), len(before))
        pos = order.index(before[len(before) - grown - 1]) if grown < len(before) else -1
    return removed


def _grow(cuts: Callable[[int], bool], limit: int) -> int:
    """The largest k <= limit for which ``cuts(k)`` holds, assuming it holds up to some k and not beyond.

    1, 2, 4, ... until one does not go, then a binary search between the two: about 2·log2(k) questions.
    """
    if limit < 1 or not cuts(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and cuts(hi):
        lo, hi = hi, hi * 2
    if hi > limit:
        if lo == limit or not cuts(limit):
            hi = limit if lo < limit else limit + 1
        else:
            return limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cuts(mid):
            lo = mid
        else:
            hi = mid
    return lo


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
