"""The reduction engine: shrink a failing graph while it keeps failing the same way.

The design follows Minithesis. Every candidate is a point in a canonical form, a
:class:`Candidate` that says which *op nodes of the original graph* are kept, which
of them are returned, which are replaced by a same-shaped value they read (an operand,
or an input), which inputs are replaced by random stand-ins, which config entries are
kept and whether backward runs. A graph is never edited in place: each
candidate is rebuilt from the original (:meth:`Reducer.build`). Where a kept node
reads a value from a node that is not kept, that value becomes a new graph input,
fed with the concrete value the original graph computes there (or inlined, when
it is a plain Python literal).

All candidates go through one function, :meth:`Reducer.consider`. It normalizes the
candidate (dead code out, cuts moved to where they can be made), looks it up in a
cache keyed by that canonical form, and only on a miss asks an isolated worker
whether the candidate fails with the *target signature*. The same candidate is
never compiled twice, however many passes propose it. Whatever succeeds and is
smaller (:meth:`Reducer.size`) becomes the new best, and is checkpointed.

The passes (:mod:`minifier.reduce.passes`) are short functions over the current best,
run in order until none makes progress (:meth:`Reducer.run`).
"""

from __future__ import annotations

import inspect
import math
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import torch.fx as fx

from pt2kit.errors import plural
from ..unit.case import Boundary, GraphCase, GraphInput, TensorMeta, has_effect, leaves_a_mode_on
from .bodies import apply_body_edits, apply_operand_drops, apply_output_drops
from .candidate import Candidate, derive_sizes, reshaped
from pt2kit.signature import Kind, Signature
from ..capture.casemaker import random_seed
from ..unit.graphio import constants_of, node_meta
from ..stages.profile import NodeInfo
from ..stages.run import Outcome
from ..repro.writer import is_symbolic

OP_KINDS = ("call_function", "call_method", "call_module")


class Unconfirmed(Exception):
    """An assumed failure (seen in the program's run) did not happen when the graph ran alone."""


#: Runs built cases (side by side, each in an isolated worker) and classifies each; each
#: comes with a label and the original graph's nodes that are its outputs.
#: One that takes ``until`` (a predicate on outcomes) may stop the batch at the first outcome, in
#: order, that satisfies it: the rest come back None.
Query = Callable[..., list[Outcome | None]] | Callable[..., list[Outcome]]


@dataclass
class Reducer:
    """Holds the original graph, the target failure, the cache and the best candidate so far."""

    origin: GraphCase
    info: dict[str, NodeInfo]  # what each op node of the origin produces (see stages.profile_case)
    target: Signature
    query: Query  # runs built cases in isolated workers and classifies them
    on_improve: Callable[[Reducer], None] = lambda reducer: None
    on_pass: Callable[[str, Reducer], None] = lambda name, reducer: None
    cache: dict[str, bool] = field(default_factory=dict)
    queries: int = 0  # answers the passes read (one asked ahead counts once read: see consider_all)
    spent: dict[str, int] = field(default_factory=dict)  # the queries each pass has asked, over every round
    jobs: int = 1  # candidates a scan asks ahead, side by side (:mod:`~minifier.reduce.scans`)
    ahead: set[str] = field(default_factory=set)  # keys answered ahead and not read yet
    unconfirmed: set[str] = field(default_factory=set)  # cached answers only assumed (see assume)
    # a wrong answer's outputs that diverge, by candidate key (see narrowed)
    diverging: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # op nodes of the kernel the program failed in (minifier.capture.blame), asked about first
    blamed: tuple[str, ...] = ()
    # (kept, outputs, ...) left 1-minimal (see settle)
    settled_structures: set[tuple[Any, ...]] = field(default_factory=set)
    # (kept, outputs, ...) whose nodes were each asked about once with a stand-in (see passes.replace_by_operands)
    replaced_structures: set[tuple[Any, ...]] = field(default_factory=set)
    # what the failure was seen to need of every smaller graph too ("backward": see passes.drop_backward)
    needed: set[str] = field(default_factory=set)
    # profiles a reduced graph again (its op nodes, by name), its values saved for later cuts; None: cannot
    reprofile: Callable[[GraphCase], dict[str, NodeInfo] | None] | None = None
    best: Candidate = field(init=False)
    _nodes: dict[str, fx.Node] = field(init=False, repr=False)
    _order: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        nodes = list(self.origin.gm.graph.nodes)
        self._nodes = {n.name: n for n in nodes}
        self._order = {n.name: i for i, n in enumerate(nodes)}
        self.best = self.initial()
        self._stops = "until" in inspect.signature(self.query).parameters  # (see consider_all's ``first``)

    # -- the canonical form -------------------------------------------------- #

    def initial(self) -> Candidate:
        """The original graph as a candidate: every op node, every graph output."""
        output = next(n for n in self.origin.gm.graph.nodes if n.op == "output")
        outputs = tuple(dict.fromkeys(a.name for a in _flat_nodes(output.args[0])))
        config = frozenset((module, key) for module, values in self.origin.config.items() for key in values)
        # inputs the program's run never gave real values (a graph whose compile failed) stay random
        random_from_the_start = {i.name for i in self.origin.inputs if i.is_random}
        return Candidate(
            kept=tuple(n.name for n in self.origin.op_nodes),
            outputs=outputs,
            random=frozenset(
                n.name
                for n in self.origin.gm.graph.find_nodes(op="placeholder")
                if str(n.target) in random_from_the_start
            ),
            config=config,
            backward=self.origin.backward,
            static=not is_symbolic(self.origin),
        )

    def _is_cut_value(self, name: str, static: bool) -> bool:
        """Can a kept node read this (not kept) node's value as an input or a literal?

        A symbolic int (``x.size(0)`` under dynamic shapes) is inlined as a literal only
        in a fully static candidate: inlined, it would be a constant where the failure
        may need a symbol.
        """
        node = self._nodes[name]
        if node.op in ("placeholder", "get_attr"):
            return True
        info = self.info.get(name, NodeInfo("other"))
        return info.kind == "tensor" or (info.kind == "literal" and (static or not info.symint))

    def normalize(self, c: Candidate) -> Candidate:
        """The canonical version of ``c``: buildable, no dead code, no stale references."""
        subs = dict(c.substituted)
        kept = set(c.kept) - subs.keys()
        # A kept node that reads a cut value which cannot become an input (a tuple)
        # is cut too; its own value then becomes the input.
        changed = True
        while changed:
            changed = False
            for name in sorted(kept, key=self._order.__getitem__):
                if any(a not in kept and not self._is_cut_value(a, c.static) for a in self.reads(name, subs)):
                    kept.discard(name)
                    changed = True
        outputs = tuple(
            o
            for o in dict.fromkeys(self.resolve(o, subs) for o in c.outputs)
            if o in kept and self.info.get(o, NodeInfo("other")).kind in ("tensor", "special", "unreached")
        )
        # Dead code: keep what the outputs need, and side effects.
        live: set[str] = set()
        todo = [o for o in outputs] + [n for n in kept if has_effect(self._nodes[n])]
        while todo:
            name = todo.pop()
            if name in live:
                continue
            live.add(name)
            todo.extend(a for a in self.reads(name, subs) if a in kept)
        kept_order = tuple(sorted(live, key=self._order.__getitem__))
        # the substitutions still read: by a kept node, or by an output
        used = {pair for name in kept_order for a in self._nodes[name].all_input_nodes for pair in self._chain(a.name, subs)}
        used |= {pair for o in c.outputs if self.resolve(o, subs) in outputs for pair in self._chain(o, subs)}
        substituted = frozenset(used)
        inputs = set(self.input_names(kept_order, substituted))
        merged = frozenset((a, b) for a, b in c.merged if a in inputs and b in inputs)
        return replace(
            c,
            kept=kept_order,
            outputs=outputs,
            random=frozenset(r for r in c.random if r in inputs),
            shapes=tuple(sorted((n, shape) for n, shape in c.shapes if n in inputs and n in c.random)),
            merged=merged,
            backward=c.backward and self.origin.boundary == Boundary.DYNAMO and self.origin.backward,
            substituted=substituted,
        )

    def resolve(self, name: str, subs: dict[str, str]) -> str:
        """The node whose value a read of ``name`` gets, once substitutions are followed."""
        for _ in range(len(subs) + 1):
            if name not in subs:
                return name
            name = subs[name]
        raise ValueError(f"substitutions form a cycle at {name}")

    def _chain(self, name: str, subs: dict[str, str]) -> list[tuple[str, str]]:
        """The substitutions a read of ``name`` goes through."""
        pairs: list[tuple[str, str]] = []
        while name in subs and len(pairs) <= len(subs):
            pairs.append((name, subs[name]))
            name = subs[name]
        return pairs

    def reads(self, name: str, subs: dict[str, str]) -> list[str]:
        """The nodes an op node reads, each substitution followed."""
        return [self.resolve(a.name, subs) for a in self._nodes[name].all_input_nodes]

    def input_names(self, kept: Iterable[str], substituted: Iterable[tuple[str, str]] = ()) -> list[str]:
        """Inputs a kept set needs: original placeholders first, then cut values, in graph order."""
        kept, subs = set(kept), dict(substituted)
        needed: set[str] = set()
        for name in kept:
            for a in self.reads(name, subs):
                node = self._nodes[a]
                if a not in kept and node.op != "get_attr" and (node.op == "placeholder" or self.info[a].kind == "tensor"):
                    needed.add(a)
        return sorted(needed, key=lambda n: (self._nodes[n].op != "placeholder", self._order[n]))

    def stand_ins(self, name: str, c: Candidate) -> list[str]:
        """Values a kept op node could be replaced by, of its very shape and dtype at ``c``'s sizes: its operands
        (through a multi-output op it picks from: at a size where ``split`` returns its operand whole, both go), then inputs."""
        node, meta, subs = self._nodes[name], self._meta(name, c), dict(c.substituted)
        if meta is None or has_effect(node) or node.op not in OP_KINDS:
            return []
        operands = self.reads(name, subs)
        picked = [a for o in operands if node.target is operator.getitem and not self._meta(o) for a in self.reads(o, subs)]
        inputs = [n.name for n in self.origin.gm.graph.find_nodes(op="placeholder")]
        metas = {o: self._meta(o, c) for o in dict.fromkeys(operands + picked + inputs) if o != name}
        return [o for o, m in metas.items() if m and (m.shape, m.dtype, m.device) == (meta.shape, meta.dtype, meta.device)]

    def size(self, c: Candidate) -> tuple[int, ...]:
        """Smaller is better: op nodes, then outputs, inputs, real-data inputs, config, backward."""
        inputs = self.input_names(c.kept, c.substituted)
        real = [i for i in inputs if i not in c.random and self._input_is_tensor(i)]
        numel = sum(math.prod(shape) for _, shape in c.shapes) - sum(math.prod(self._shape(n)) for n, _ in c.shapes)
        return (
            len(c.kept),
            -len(c.body_edits) - len(c.dropped_outputs) - len(c.dropped_operands),  # (each makes a body's op dead code)
            len(c.outputs),
            len(inputs) - len(c.merged),
            len(real),
            len(c.config),
            int(c.backward),
            int(not c.static),
            numel,
        )

    def _shape(self, name: str) -> tuple[int, ...]:
        """The size an input has in the original graph (a placeholder's, or a cut node's)."""
        meta = self._meta(name)
        return meta.shape if meta is not None else ()

    def _meta(self, name: str, c: Candidate | None = None) -> TensorMeta | None:
        """What a placeholder or op node of the original graph holds, when it is a tensor (an input at ``c``'s size)."""
        node = self._nodes[name]
        if node.op == "placeholder":
            meta = next(i for i in self.origin.inputs if i.name == node.target).meta
        else:
            meta = self.info[name].meta if name in self.info else None
        resized = dict(c.shapes).get(name) if c is not None else None
        return replace(meta, shape=resized) if meta is not None and resized is not None else meta

    def op_kind(self, name: str) -> tuple[str, tuple[str, ...]]:
        """What makes two op nodes "the same op" to a compiler: the target and the dtypes it reads."""
        node = self._nodes[name]
        dtypes = tuple(meta.dtype if (meta := self._meta(a.name)) is not None else "-" for a in node.all_input_nodes)
        return str(node.target), dtypes

    def can_stand_alone(self, name: str, c: Candidate) -> bool:
        """Can this op node be kept with every node it reads cut into an input or a literal?"""
        return all(self._is_cut_value(a.name, c.static) for a in self._nodes[name].all_input_nodes)

    def tuple_readers(self, name: str) -> list[str]:
        """The op nodes that take a multi-output node's parts (its ``getitem`` users), in graph order."""
        if name not in self.info or self.info[name].kind != "other":
            return []
        return sorted((u.name for u in self._nodes[name].users if u.op in OP_KINDS), key=self._order.__getitem__)

    def _input_is_tensor(self, name: str) -> bool:
        node = self._nodes[name]
        if node.op == "placeholder":
            return next(i for i in self.origin.inputs if i.name == node.target).is_tensor
        return self.info[name].kind == "tensor"

    # -- building ------------------------------------------------------------ #

    def build(self, c: Candidate) -> GraphCase:
        """The graph case a (normalized) candidate describes."""
        graph = fx.Graph()
        env: dict[fx.Node, Any] = {}
        kept = set(c.kept)
        origin_inputs = {i.name: i for i in self.origin.inputs}
        aliases = dict(c.merged)
        subs = dict(c.substituted)
        inputs: list[GraphInput] = []
        input_nodes: list[str] = []  # the node each input feeds (a dynamo placeholder l_x_ reads input L_x_)
        for name in self.input_names(kept, c.substituted):
            if name in aliases:
                continue
            input_nodes.append(name)
            node = self._nodes[name]
            if node.op == "placeholder":
                original = origin_inputs[str(node.target)]
                placeholder = graph.placeholder(str(node.target))
                # (an input the program never gave a real value stays random, whichever candidate reads it again)
                made = (
                    name in c.random
                    or original.is_random
                    or (original.meta is not None and original.meta.special == "zerotensor")
                )
                inputs.append(replace(original, seed=random_seed(original.name) if made else None))
            else:
                placeholder = graph.placeholder(name)
                info = self.info[name]
                made = name in c.random or (info.meta is not None and info.meta.special == "zerotensor")
                inputs.append(
                    GraphInput(
                        name, None, info.meta, random_seed(name) if made else None, info.dynamic_dims, source=name
                    )
                )
            placeholder.meta.update(node_meta(node))
            env[node] = placeholder
        for alias, target in aliases.items():
            env[self._nodes[alias]] = env[self._nodes[target]]

        def arg(node: fx.Node) -> Any:
            node = self._nodes[self.resolve(node.name, subs)]
            if node in env:
                return env[node]
            if node.op == "get_attr":
                env[node] = graph.get_attr(str(node.target))
                return env[node]
            if node.op in OP_KINDS and node.name not in kept:
                return self.info[node.name].literal  # a literal cut value, inlined
            raise KeyError(node.name)

        for name in c.kept:
            env[self._nodes[name]] = graph.node_copy(self._nodes[name], arg)
        graph.output(tuple(env[self._nodes[o]] for o in c.outputs))
        graph.lint()
        gm = apply_output_drops(apply_body_edits(fx.GraphModule(self.origin.gm, graph), c.body_edits), c.dropped_outputs)
        gm = apply_operand_drops(gm, c.dropped_operands)
        if c.dropped_outputs or c.dropped_operands:  # (a carried value or an operand dropped: its input may be read no more)
            read = [bool(p.users) for p in gm.graph.find_nodes(op="placeholder")]
            for p in [p for p in gm.graph.find_nodes(op="placeholder") if not p.users]:
                gm.graph.erase_node(p)
            gm.recompile()
            inputs, input_nodes = [i for i, r in zip(inputs, read) if r], [n for n, r in zip(input_nodes, read) if r]
        shapes = dict(c.shapes)
        inputs = [reshaped(i, shapes[node]) if node in shapes else i for i, node in zip(inputs, input_nodes)]
        # a view into another input's memory stays one only while that input is there, at its size
        whole = {i.name for i, node in zip(inputs, input_nodes) if node not in shapes}
        inputs = [
            replace(i, view_of=None, shares_only=False) if i.view_of and not (i.view_of[0] in whole and i.name in whole) else i
            for i in inputs
        ]
        inputs = derive_sizes(inputs)  # (a size read from an input that was cut away is an int of its own)
        if c.static:
            inputs = [replace(i, symbolic_dims=(), symbolic_int=False) for i in inputs]
        constants = constants_of(gm, self.origin.constants)
        config = {
            m: {k: v for k, v in values.items() if (m, k) in c.config} for m, values in self.origin.config.items()
        }
        return self.origin.replace(
            gm=gm,
            inputs=inputs,
            constants=constants,
            config={m: v for m, v in config.items() if v},
            backward=c.backward,
        )

    # -- asking ---------------------------------------------------------------- #

    def consider(self, c: Candidate) -> bool:
        """Does ``c`` fail with the target signature? Cached; updates ``best`` on success."""
        return self.consider_all([c])[0]

    def consider_all(self, candidates: list[Candidate], *, ahead: bool = False, first: bool = False) -> list[bool]:
        """:meth:`consider` for independent candidates; the uncached ones run side by side.

        ``ahead``: asked before a pass reads them (a scan's next ones, :mod:`~minifier.reduce.scans`): cached,
        the best left alone, so the passes end the same for any ``jobs``; counted in :attr:`queries` once read.

        ``first``: the pass wants the first candidate that fails, in order, and no other. Once it
        is known, the queries still running are stopped (a query that takes ``until``), and what
        comes after it is neither cached nor read (False here), even when it finished first: the
        pass ends as it would asking one at a time, and a slow compile of a half that passes is
        not waited for once the half before it failed."""
        normalized = [self.normalize(c) for c in candidates]
        normalized = self._through_first_failing(normalized) if first else normalized
        todo: dict[str, Candidate] = {}
        for c in normalized:
            key = c.key()
            if key not in self.cache and key not in todo:
                if c.kept and not leaves_a_mode_on(self._nodes, c.kept):
                    todo[key] = c
                else:
                    self.cache[key] = False  # an empty graph, or one left in autocast, fails nowhere worth reporting
        if todo:
            batch = [(self.build(c), f"{plural(len(c.kept), 'node')}", c.outputs) for c in todo.values()]
            outcomes = self.query(batch, until=self._fails) if first and self._stops else self.query(batch)
            found = False
            for (key, c), outcome in zip(list(todo.items()), outcomes):
                if outcome is None or found:
                    del todo[key]  # stopped, or after the first that fails: not asked (see ``first``)
                    continue
                self.cache[key] = interesting = self._fails(outcome)
                found = first and interesting
                if interesting and outcome.diverging:
                    self.diverging[key] = tuple(c.outputs[i] for i in outcome.diverging if i < len(c.outputs))
            normalized = self._through_first_failing(normalized) if first else normalized
        unread = [False] * (len(candidates) - len(normalized))
        if ahead:
            self.ahead.update(todo)
            return [self.cache[c.key()] for c in normalized] + unread
        self.queries += len(todo) + len(self.ahead & {c.key() for c in normalized})
        self.ahead -= {c.key() for c in normalized}
        for c in normalized:  # the smallest that fails (an answer asked now, cached, or assumed) is the best
            if self.cache[c.key()] and self.size(c) < self.size(self.best):
                self.best = c
                self.on_improve(self)
        return [self.cache[c.key()] for c in normalized] + unread

    def _fails(self, outcome: Outcome) -> bool:
        return outcome.failure is not None and outcome.failure.signature == self.target

    def _through_first_failing(self, candidates: list[Candidate]) -> list[Candidate]:
        """``candidates`` up to the first known to fail (all of them, when none is)."""
        return candidates[: next((i + 1 for i, c in enumerate(candidates) if self.cache.get(c.key())), None)]

    def assume(self, c: Candidate, interesting: bool, *, confirmed: bool = True) -> None:
        """Record an answer known without a query (the bisection already asked it).

        ``confirmed=False``: the answer was seen only in the program's own run (its
        failing compile, which pt2kit does not pay for twice). Any smaller candidate
        that fails confirms it in passing; when a pass asks and none does, :meth:`run`
        asks about ``c`` itself, and raises :class:`Unconfirmed` if it does not fail.
        """
        key = self.normalize(c).key()
        self.cache[key] = interesting
        if not confirmed:
            self.unconfirmed.add(key)

    def _confirm_best(self) -> None:
        """Ask about the best candidate for real, if its answer was only assumed."""
        key = self.normalize(self.best).key()
        if key in self.unconfirmed:
            self.unconfirmed.discard(key)
            del self.cache[key]
            if not self.consider(self.best):
                raise Unconfirmed(f"the graph does not fail with {self.target} when run alone")

    # -- candidates near the best ------------------------------------------------ #

    def prefix(self, nodes: tuple[str, ...], base: Candidate | None = None) -> Candidate:
        """Keep only ``nodes`` (a prefix of ``base``, the best by default); return whatever of them the rest used."""
        base = base or self.best
        kept, rest = set(nodes), [n for n in base.kept if n not in nodes]
        escaping = {a.name for n in rest for a in self._nodes[n].all_input_nodes if a.name in kept}
        escaping |= {o for o in base.outputs if o in kept}
        outputs = tuple(n for n in nodes if n in escaping)
        return replace(base, kept=nodes, outputs=outputs)

    def without(self, nodes: Iterable[str], base: Candidate | None = None) -> Candidate:
        """Cut ``nodes`` out of ``base`` (the best by default); their values, where still needed, become inputs.

        A node whose only users are cut becomes an output rather than dead code: a
        failure may need it computed (two ops that must meet in one graph), and
        :func:`remove_outputs` drops it later if not.
        """
        base = base or self.best
        drop = set(nodes)
        kept = tuple(n for n in base.kept if n not in drop)
        base_kept = set(base.kept)
        orphans = tuple(
            n
            for n in kept
            if (users := [u.name for u in self._nodes[n].users if u.name in base_kept])
            and all(u in drop for u in users)
        )
        outputs = tuple(o for o in base.outputs if o not in drop)
        return replace(base, kept=kept, outputs=outputs + tuple(o for o in orphans if o not in outputs))

    def settle(self) -> None:
        """The best's nodes are 1-minimal (delta debugging dropped none of them alone): the node searches are done with them.

        Under the same rules only: a wrong answer on real inputs must reach the program's
        outputs, one on random inputs cannot be (:func:`minifier.stages.run.run_case`).
        """
        self.settled_structures.add(self._structure(self.normalize(self.best)))

    def settled(self, *, loosened: bool = False) -> bool:
        """Were the best's nodes left 1-minimal already, under the same rules (:meth:`settle`)? (``loosened``: or on real inputs, now random.)"""
        c = self.normalize(self.best)
        loosened = loosened and self.target.kind == Kind.ACCURACY and bool(c.random)
        return self._structure(c) in self.settled_structures or (loosened and (c.kept, c.outputs, False) in self.settled_structures)

    def _structure(self, c: Candidate) -> tuple[Any, ...]:
        return (c.kept, c.outputs, bool(c.random) if self.target.kind == Kind.ACCURACY else None)

    def reprofiled(self) -> None:
        """What the best's op nodes produce, asked again once its inputs were resized.

        A node cut from a graph whose inputs :func:`~minifier.reduce.passes.shrink_shapes` made
        smaller would become an input of the size it had in the origin's profile, which its
        readers no longer match (a matmul of ``[4, 64]`` by a resized ``[1, 1]``): a drop that
        could not fail. One eager run of the best graph (:attr:`reprofile`) gives the sizes
        and values every later candidate, all resized alike, reads."""
        if self.reprofile is None or not self.best.shapes:
            return
        info = self.reprofile(self.best_case())
        if info:
            self.info.update({name: value for name, value in info.items() if name in self.info})

    def best_case(self) -> GraphCase:
        return self.build(self.normalize(self.best))

    def run(self, passes: list[Callable[[Reducer], None]]) -> Candidate:
        """Run the passes (:data:`minifier.reduce.passes.PASSES`) until none of them shrinks the best candidate."""
        while True:
            before = self.best
            for reduction in passes:
                self.on_pass(reduction.__name__, self)
                start, asked = self.best, self.queries
                reduction(self)
                if self.best.shapes != start.shapes and len(self.best.kept) > 1:  # (one node: nothing left to cut)
                    self.reprofiled()  # (whichever pass resized the inputs: later cuts and stand-ins read the new sizes)
                self.spent[reduction.__name__] = self.spent.get(reduction.__name__, 0) + self.queries - asked
                if self.best == start and self.queries > asked:
                    self._confirm_best()  # a pass asked and nothing smaller failed: is the start real?
            if self.best == before:
                self._confirm_best()
                return self.best


def _flat_nodes(arg: Any) -> list[fx.Node]:
    out: list[fx.Node] = []
    fx.node.map_arg(arg, out.append)
    return out
