"""The reduction passes: short functions that propose smaller candidates to one cached ``consider()``.

Each pass looks at the reducer's best candidate so far and asks
:meth:`minifier.reduce.engine.Reducer.consider` about smaller ones; it never edits a graph
(see :mod:`minifier.reduce.engine`).

A pass's contract (as in Hypothesis's shrinker): it only proposes, through ``consider``, so
the best only shrinks and always fails the target way; it may stop anywhere, and run again
on the same best it asks nothing new. Any order, interrupted anywhere, leaves a correct best;
a round that changes nothing ends the loop, 1-minimal (tests/minifier/test_reducer_properties.py).
They run in this order:

- :func:`eliminate_dead_code`: normalization removes dead code and unused inputs, so
  checking the result costs one query at most;
- :func:`follow_blame`: when the program failed inside one Inductor kernel, the nodes
  that kernel was made of (:mod:`minifier.capture.blame`), cut to the third that fails;
- :func:`sample_op_kinds`: on a large graph, one node per kind of op, its first two
  thirds asked side by side, the failing third (or the last, unasked) split again:
  about 2·log3(kinds) small compiles, and the searches below start from a few nodes,
  not hundreds;
- :func:`~minifier.reduce.divergence.follow_divergence`: a wrong answer seen in only some outputs (each judged on
  its own): one query on what those outputs need (after a sample, the culprit itself);
- :func:`truncate_suffix`: binary search for the shortest prefix that still fails
  (an intermediate node becomes the output);
- :func:`remove_prefix`: one query for "the last node alone" (a single culprit op is
  done then), else a binary search for the longest prefix that can be cut away, its
  values fed in as inputs. A single culprit op costs about log2(n) + 1 queries, at
  worst about 2·log2(n). (The two searches run one after the other: side by side,
  two compiles share the cores and each runs at about half speed.);
- :func:`cut_between`: one query for "the first and the last node alone" (a pair of
  culprit ops is done then);
- :func:`delta_debugging`: scans from the last node back, each node cut alone and a cut
  that goes grown back over the nodes before it (one query a node the failure needs,
  about 2·log2(L) a run of L that can go); a graph it leaves 1-minimal is settled:
  later rounds skip it when only its inputs or config change (random inputs that
  loosen the accuracy rule: its single drops are asked again);
- :func:`remove_mode_brackets`: on a 1-minimal graph, each mode's entering and leaving
  switch cut together (a cut of one alone fails otherwise);
- :func:`replace_by_operands`: on a 1-minimal graph, each node replaced by a
  same-shaped operand (or input), one query a node (what a cut cannot reach);
- :func:`~minifier.reduce.bodies.drop_unused_outputs`: the outputs of higher-order ops nothing reads,
  dropped from their bodies; :func:`~minifier.reduce.bodies.drop_unread_operands`: their operands
  no body reads, dropped with the bodies' inputs;
- :func:`~minifier.reduce.bodies.reduce_bodies`: the same in higher-order ops' bodies;
- :func:`remove_outputs`, :func:`consolidate_inputs`;
- :func:`drop_backward`, :func:`make_static` (every symbolic size made concrete);
- :func:`finish_at_once`: the first tries of the three passes below, side by side;
- :func:`randomize_inputs` (so the repro needs no data file when random values
  reproduce the failure), :func:`shrink_shapes` (inputs as small as the failure
  allows, unless they are small already), :func:`minimize_config`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .bodies import drop_unread_operands, drop_unused_outputs, reduce_bodies
from .divergence import upstream, follow_divergence
from .splits import keep_failing_part, split_sample
from .engine import Candidate, Reducer
from .finish import already_small, current_shapes, finished_forms, resized_to
from .scans import ask_ahead, ddmin
from pt2kit.seams import ops
from pt2kit.seams.config import AUTOTUNE_CHOICES, AUTOTUNE_SWITCHES, NEVER_DROPPED


def eliminate_dead_code(r: Reducer) -> None:
    """Normalization removes dead nodes and unused inputs; check the result still fails."""
    r.consider(r.best)


def follow_blame(r: Reducer) -> None:
    """Keep only the nodes of the kernel the program failed in, cut to a third while a third fails alone.

    A failure that names an Inductor kernel (a C++ compile error, an abort in its
    loop) names its nodes too (:attr:`~minifier.reduce.engine.Reducer.blamed`). The
    kernel is not asked first: it is split at once (:func:`keep_failing_part`), by a
    sample of one node per kind when that is smaller (a kernel can fuse dozens of
    nodes), else node by node, since a part that fails says the kernel does too. Only
    when no part fails is the kernel asked whole; when it does not fail either (the
    bug needs more than its kernel), the searches below start from the whole graph,
    a few small compiles later.
    """
    if r.settled():
        return
    kept = r.best.kept
    blamed = {n for n in r.blamed if n in kept}
    if blamed and len(blamed) < len(kept):
        blamed |= {reader for name in blamed for reader in r.tuple_readers(name)}
        kernel = r.normalize(r.without([n for n in kept if n not in blamed]))
        found = split_sample(r, fraction=1.0, base=kernel)
        if not (keep_failing_part(r, kernel) if found is None else found):
            r.consider(kernel)


#: Below this many op nodes the binary searches are cheap already, and a sample of one
#: node per kind is most of the graph.
SAMPLE_FROM = 48


def sample_op_kinds(r: Reducer) -> None:
    """Keep one node of each kind, the rest cut into inputs: its thirds are the first queries.

    Most compiler bugs live in how one op is handled (its lowering, its kernel), and a
    large graph repeats a few dozen kinds of op (a transformer block's 230 nodes are
    some 30 kinds: :meth:`~minifier.reduce.engine.Reducer.op_kind`, the target and the dtypes
    it reads). If the first node of each kind, fed the values the original computed,
    fails alone, the binary searches that follow run over those few dozen nodes, each
    query compiling a small graph instead of half the original.

    The sample itself is not asked first: its thirds are (:func:`keep_failing_part`),
    and one of them failing says the sample does too. Only when no third fails is the
    whole sample asked (the failure needs two kinds to meet, or one particular
    instance); if it does not fail either, this cost a round or two of small compiles.
    """
    if r.settled():
        return
    if len(r.best.kept) >= SAMPLE_FROM:
        split_sample(r)


def truncate_suffix(r: Reducer) -> None:
    """Binary search for the shortest prefix of the graph that still fails."""
    if r.settled(loosened=True):
        return
    kept = r.best.kept
    lo, hi = 0, len(kept)  # prefix(lo) is known not to fail (or untested); prefix(hi) fails
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if r.consider(r.prefix(kept[:mid])):
            hi = mid
        else:
            lo = mid


def remove_prefix(r: Reducer) -> None:
    """Binary search for the longest run of leading nodes that can be cut into inputs.

    After :func:`truncate_suffix` the last node is the one the failure needs most, and
    usually the only one: cutting everything before it is tried first, one query that
    ends the search at once for a single-op culprit.
    """
    if r.settled(loosened=True):
        return
    kept = r.best.kept
    if len(kept) > 2 and r.consider(r.without(kept[:-1])):
        return
    lo, hi = 0, len(kept)  # cutting lo nodes fails; cutting hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if r.consider(r.without(kept[:mid])):
            lo = mid
        else:
            hi = mid


def cut_between(r: Reducer) -> None:
    """Keep only the first and the last node: one query that ends a pair of culprits at once.

    After the two binary searches, the last node is the later culprit and the first node
    the earlier one; what lies between is usually unrelated. Delta debugging would take
    O(k log k) queries to learn that about k nodes.
    """
    if r.settled(loosened=True):
        return
    kept = r.best.kept
    if len(kept) > 2:
        r.consider(r.without(kept[1:-1]))


def delta_debugging(r: Reducer) -> None:
    """Delta debugging over the nodes (:func:`~minifier.reduce.scans.ddmin`): each cut alone, a cut that goes grown back.

    A graph it leaves 1-minimal is settled (:meth:`~minifier.reduce.engine.Reducer.settle`): the searches
    over nodes are not asked again about it when only its inputs' values, sizes or
    config change later (random inputs, say): every one of their candidates drops a
    node that this pass just saw the failure need.
    """
    if r.settled():
        return
    if ddmin(r, lambda c: c.kept, r.without):
        r.settle()


def remove_mode_brackets(r: Reducer) -> None:
    """Each mode the best enters, cut with the switch that leaves it and what reads its value: one query a pair.

    A mode's switches are effects, kept by dead-code removal, and a cut of one alone leaves
    a mode on or leaves one never entered, which fails otherwise: delta debugging keeps both
    (the vmap levels ``create_block_mask`` traces, ``with torch.autocast``). Asked on a graph
    delta debugging left 1-minimal, innermost pair first.
    """
    if not r.settled():
        return
    nodes = {n.name: n for n in r.origin.gm.graph.nodes}
    for enter, leave in ops.mode_brackets([nodes[name] for name in r.best.kept]):
        kept = set(r.best.kept)
        if enter.name in kept and leave.name in kept:
            readers = {n for n in kept if enter.name in upstream(nodes, n, kept | {enter.name})}
            r.consider(r.without({enter.name, leave.name} | readers))


def replace_by_operands(r: Reducer) -> None:
    """Each node replaced by a same-shaped value it reads (an operand, else a graph input): its readers read that.

    Delta debugging's cut feeds a dropped node's value in as an input. A failure that
    needs its readers to read something *computed* (two ops fused across it: ``where(m,
    a, 0)`` between ``a``'s op and the next) survives only this replacement, a structure
    no cut reaches. Asked on a graph delta debugging left 1-minimal, last node first:
    each same-shaped operand the graph computes, in turn until one keeps the failure,
    else the first same-shaped operand or input
    (:meth:`~minifier.reduce.engine.Reducer.stand_ins`). An input in a node's place is
    what the cut already asked, values aside, so a computed operand goes first:
    ``add(x, index_put(...))`` keeps its failure read as the ``index_put``, not as the
    input ``x`` that comes first. About one query a node, once per graph.
    """
    c = r.normalize(r.best)
    # (asked again at new sizes: at 1, ``split(x, 128)[0]`` is ``x``)
    if len(c.kept) < 2 or not r.settled() or (*r._structure(c), c.shapes) in r.replaced_structures:
        return

    def replacements(name: str, current: Candidate) -> list[Candidate]:
        if name not in current.kept:
            return []
        stand_ins = r.stand_ins(name, current)
        computed = set(r.reads(name, dict(current.substituted))) & set(current.kept)
        tried = [s for s in stand_ins if s in computed] or stand_ins[:1]
        return [replace(current, substituted=current.substituted | {(name, s)}) for s in tried]

    names = list(reversed(c.kept))
    for i, name in enumerate(names):
        current = r.normalize(r.best)
        if r.jobs > 1:  # the next unasked ones in this best, side by side (minifier.reduce.scans)
            ask_ahead(r, (x for n in names[i:] for x in replacements(n, current)))
        for candidate in replacements(name, current):
            if r.consider(candidate):
                break
    r.replaced_structures.add((*r._structure(c), c.shapes))
    r.replaced_structures.add((*r._structure(best := r.normalize(r.best)), best.shapes))


def remove_outputs(r: Reducer) -> None:
    """ddmin over the outputs (the graph keeps at least one)."""
    ddmin(
        r,
        lambda c: c.outputs,
        lambda chunk: replace(r.best, outputs=tuple(o for o in r.best.outputs if o not in chunk)),
    )


def consolidate_inputs(r: Reducer) -> None:
    """Inputs with equal values (e.g. two cuts of the same tensor) are read from one input."""
    groups: dict[str, list[str]] = {}
    for name in r.input_names(r.best.kept, r.best.substituted):
        digest = r.info[name].digest if name in r.info else None
        if digest is not None:
            groups.setdefault(digest, []).append(name)
    merges = [frozenset((alias, names[0]) for alias in names[1:]) for names in groups.values() if len(names) > 1]
    if merges and not r.consider(replace(r.best, merged=r.best.merged.union(*merges))):
        for merge in merges:
            r.consider(replace(r.best, merged=r.best.merged | merge))


def drop_backward(r: Reducer) -> None:
    """A dynamo graph that fails without running backward needs no backward in its repro.

    Asked once: a failure that needed the backward of a graph needs it in every graph
    smaller than that (a wrong gradient, a backward that does not compile), so a refusal
    is remembered (:attr:`~minifier.reduce.engine.Reducer.needed`).
    """
    if r.best.backward and "backward" not in r.needed and not r.consider(replace(r.best, backward=False)):
        r.needed.add("backward")


def _shrink_set(r: Reducer, items: list[Any], attempt: Callable[[list[Any]], Candidate]) -> None:
    """Try ``attempt(items)``; if that does not fail, halve ``items`` and recurse."""
    if not items or r.consider(attempt(items)) or len(items) == 1:
        return
    half = len(items) // 2
    _shrink_set(r, items[:half], attempt)
    _shrink_set(r, items[half:], attempt)


def finish_at_once(r: Reducer) -> None:
    """The first tries of the three finishing passes, asked side by side: one round, not three.

    :func:`randomize_inputs`, :func:`shrink_shapes` and :func:`minimize_config` each
    start with "all of it at once" (every input random, every size 1, no config),
    usually on a graph of one node by now, and each of those compiles is a small
    single-threaded gcc run. Here "random and size 1" and the same without config go
    out as a pair, so the common ending (values and sizes do not matter, the config
    does) costs one round where it cost three. Inputs already small keep their sizes
    (:func:`shrink_shapes`), so the pair is "random" and "random without config".
    When they do not fail, the passes ask as before and find these answers cached; a
    failure that needs real values pays one round more.
    """
    r.consider_all(finished_forms(r, r.best))


def randomize_inputs(r: Reducer) -> None:
    """Replace real input values by seeded random ones wherever the failure survives it."""
    names = [
        n for n in r.input_names(r.best.kept, r.best.substituted) if r._input_is_tensor(n) and n not in r.best.random
    ]
    _shrink_set(r, names, lambda group: replace(r.best, random=r.best.random | set(group)))


def make_static(r: Reducer) -> None:
    """Try every size concrete: a static repro is the simpler one, when the failure allows it."""
    if not r.best.static:
        r.consider(replace(r.best, static=True))


#: The queries after which :func:`shrink_shapes` starts no new group of same-sized dims.
SHAPE_QUERIES = 6


def shrink_shapes(r: Reducer) -> None:
    """Make each random input's sizes as small as the failure allows.

    First every dim at once to 1; failing that, dims with the same size across the
    inputs are shrunk together (a matmul's inner dims must stay equal); each group
    first tries 1, then the divisors of its size in increasing order (a bug that needs
    a multiple of k lands on k), then searches below the smallest size found (in the
    spirit of minithesis's ``bin_search_down``). Past the first query of a group,
    candidates go two at a time (:func:`_first_failing`).

    Inputs of :data:`~minifier.reduce.finish.SMALL_INPUTS` elements or fewer in all keep their sizes: a repro
    of a few thousand random numbers is small already, the sizes are the ones the bug
    was seen at, and a failure may need them about this large (an abort in a kernel
    big enough to run threaded).

    The pass starts no new group once it has asked :data:`SHAPE_QUERIES`, counted over
    every round of the reduction (:attr:`Reducer.spent`): its cost follows the inputs'
    distinct sizes, not the graph's nodes, and the query bound (``2·log2 n + c``) has
    room for a constant here, not for one search per size of a large 3-d input, nor for
    the same searches again in each round a smaller config or graph starts. The largest
    sizes go first, so what is left is the smaller ones.
    """
    if already_small(r, r.best):
        return
    asked = r.queries - r.spent.get("shrink_shapes", 0)
    everything = [(name, d) for name, shape in current_shapes(r) for d, n in enumerate(shape) if n > 1]
    # one query, for a bug that does not care about sizes
    if not (everything and r.consider(resized_to(r, everything, 1))):
        for size in sorted({n for name, shape in current_shapes(r) for n in shape if n > 1}, reverse=True):
            if r.queries - asked >= SHAPE_QUERIES:
                break
            members = [(name, d) for name, shape in current_shapes(r) for d, n in enumerate(shape) if n == size]
            if members:
                _shrink_group(r, members, size)


def _shrink_group(r: Reducer, members: list[tuple[str, int]], size: int) -> None:
    def resized(n: int) -> Candidate:
        return resized_to(r, members, n)

    if r.consider(resized(1)):
        return  # alone: the common case costs one query
    tried = [d for d in range(2, size) if size % d == 0]
    found = _first_failing(r, tried, resized)
    if found is None or found <= 2:
        return
    lower = [n for n in [1, *tried] if n < found]
    _narrow(r, max(lower), found, resized)


def _first_failing(r: Reducer, sizes: list[int], make: Callable[[int], Candidate]) -> int | None:
    """The first of ``sizes`` whose candidate fails, asked two at a time.

    The graphs here are a few ops: one compile is mostly a single-threaded gcc, so two
    side by side take the wall time of one (0.67 s against 0.65 s on the 2-core machine
    pt2kit is measured on). The cost is at most one query past the answer.
    """
    for i in range(0, len(sizes), 2):
        pair = sizes[i : i + 2]
        for n, fails in zip(pair, r.consider_all([make(n) for n in pair], first=True)):
            if fails:
                return n
    return None


def _narrow(r: Reducer, lo: int, hi: int, make: Callable[[int], Candidate]) -> None:
    """Search down from ``hi`` (fails) to just above ``lo`` (does not), two probes a round (a ternary search)."""
    while hi - lo > 1:
        probes = sorted({lo + (hi - lo) * k // 3 for k in (1, 2)} - {lo})
        failing = [n for n, fails in zip(probes, r.consider_all([make(n) for n in probes], first=True)) if fails]
        if failing:
            lo, hi = max([lo, *(n for n in probes if n < failing[0])]), failing[0]
        else:
            lo = probes[-1]


def minimize_config(r: Reducer) -> None:
    """Drop the non-default config entries the failure does not need.

    A key whose default differs from machine to machine stays: it cannot be dropped here
    and still mean the same thing wherever the repro runs. What the autotuner picks from
    stays while it autotunes (:data:`~pt2kit.seams.config.AUTOTUNE_CHOICES`).
    """
    kept = {**NEVER_DROPPED, **{m: NEVER_DROPPED.get(m, ()) + keys for m, keys in AUTOTUNE_CHOICES.items()}}
    entries = sorted(e for e in r.best.config if e[1] not in kept.get(e[0], ()))
    _shrink_set(r, entries, lambda group: replace(r.best, config=r.best.config - set(group)))
    # the autotuner's pick list goes only with the switches that make it autotune (see AUTOTUNE_CHOICES)
    choices = {e for e in r.best.config if e[1] in AUTOTUNE_CHOICES.get(e[0], ())}
    if choices and not any(e[1] in AUTOTUNE_SWITCHES.get(e[0], ()) for e in r.best.config):
        r.consider(replace(r.best, config=r.best.config - choices))


PASSES: list[Callable[[Reducer], None]] = [
    eliminate_dead_code,
    follow_blame,
    sample_op_kinds,
    follow_divergence,
    truncate_suffix,
    remove_prefix,
    cut_between,
    delta_debugging,
    remove_mode_brackets,
    replace_by_operands,
    drop_unused_outputs,
    reduce_bodies,
    drop_unread_operands,
    remove_outputs,
    consolidate_inputs,
    drop_backward,
    make_static,
    finish_at_once,
    randomize_inputs,
    shrink_shapes,
    minimize_config,
]
