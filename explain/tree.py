"""The compile tree: the three lists of an explain report's JSON joined into one compile per compile.

The JSON keeps three lists apart (:mod:`explain.page` draws the tree this module builds):

- ``graphs`` (``--json`` only): one per compiled graph, in the order the compiles *began*;
- ``recompiles.functions[].records``: one per compile, grouped per code object;
- ``breaks``: one per source line, naming the compile ids that broke there.

They join on the compile id (``frame/compile``) together with the frame the compile belongs
to, ``(function, filename, firstlineno, resumed_at)``, which graphs and records both carry
(a resume function after a graph break is a frame of its own). The id alone is not enough:
``torch._dynamo.reset()`` starts dynamo's frame and compile counters again, so a script that
resets between two models has two ``[0/0]``, and a function compiled again after a reset
repeats its own ids. Each record is one compile; a graph joins the record of its frame and
id that names its graph (by hash) and has none yet, so every compile is one entry of the tree,
however often its id occurs. Each compile and frame gets an anchor unique on the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

Data = dict[str, Any]
FrameKey = tuple[Any, Any, Any, Any]  # function, filename, firstlineno, resumed_at


@dataclass(eq=False)
class Compile:
    """One compile ``[frame/compile]``: what each list of the JSON says about it (any part may be absent)."""

    compile_id: str
    key: FrameKey
    """The frame (code object) it compiled: :func:`frame_key`."""
    record: Data | None = None
    """Its ``recompiles`` record: cause, trigger, failing guards, time."""
    graphs: list[Data] = field(default_factory=list)
    """Its entries of ``graphs``: ops, guards, time (one, or none when it compiled no graph)."""
    breaks: list[int] = field(default_factory=list)
    """Indexes into ``breaks`` of the graph breaks this compile hit."""
    anchor: str = ""
    """Its id on the page (``compile-0-1``), unique even where torch repeated the compile id."""

    @property
    def cause(self) -> str | None:
        return (self.record or {}).get("cause")

    @property
    def graph(self) -> Data | None:
        """Its graph summary (hash, ops, arity), from ``graphs`` or else from the record."""
        return self.graphs[0] if self.graphs else (self.record or {}).get("graph")

    @property
    def seconds(self) -> float | None:
        if self.record is not None and self.record.get("seconds") is not None:
            return float(self.record["seconds"])
        timed = [g["compile_seconds"] for g in self.graphs if g.get("compile_seconds") is not None]
        return float(timed[0]) if timed else None


@dataclass(eq=False)
class Frame:
    """One code object dynamo compiled, with its compiles in the order they happened."""

    function: str
    filename: str
    firstlineno: int
    resumed_at: int | None
    compiles: list[Compile]
    summary: Data | None = None
    """Its ``recompiles.functions`` entry: counts, the limit hit, remedies."""
    anchor: str = ""

    @property
    def frame_id(self) -> str:
        return self.compiles[0].compile_id.rpartition("/")[0] or "?"

    @property
    def name(self) -> str:
        return frame_name(self.function, self.resumed_at)


@dataclass
class CompileTree:
    frames: list[Frame]
    compiles: list[Compile]
    """Every compile, in the order they began where ``graphs`` says so, else in record order."""
    broke: dict[int, list[Compile]] = field(default_factory=dict)
    """For each index into ``breaks``, the compiles that broke there."""

    def against(self, compile_id: str | None, checked: Compile) -> Compile | None:
        """The cached compile ``compile_id`` that ``checked``'s call was checked against: the latest of that id
        in ``checked``'s own frame before it (the one whose cache entry existed then)."""
        earlier = []
        for c in self.compiles:
            if c is checked:
                break
            if c.compile_id == compile_id and c.key == checked.key:
                earlier.append(c)
        return earlier[-1] if earlier else next((c for c in self.compiles if c.compile_id == compile_id), None)


def frame_key(entry: Data) -> FrameKey:
    """What graphs and records both say of the code object they belong to."""
    return (entry.get("function"), entry.get("filename"), entry.get("firstlineno"), entry.get("resumed_at"))


def frame_name(function: str | None, resumed_at: int | None) -> str:
    """A frame as report.py names it: a resume function by the line it resumes after."""
    return f"{function}" + (f" (resumed after line {resumed_at})" if resumed_at is not None else "")


def recompile_data(data: Data) -> Data | None:
    """The ``recompiles`` part: the whole of a profiler's dict, a part of ``--json``'s."""
    return data if "functions" in data and "graphs" not in data else data.get("recompiles")


def compile_tree(data: Data) -> CompileTree:
    """Join ``graphs``, the compile records and ``breaks`` (see the module doc), and group by frame."""
    functions = (recompile_data(data) or {}).get("functions") or []
    same_id: dict[tuple[FrameKey, str], list[Compile]] = {}  # a frame's compiles of one id, in order
    per_function: list[list[Compile]] = []
    for function in functions:
        key = frame_key(function)
        own = [Compile(record["compile_id"], key, record=record) for record in function.get("records") or []]
        per_function.append(own)
        for c in own:
            same_id.setdefault((key, c.compile_id), []).append(c)
    order: list[Compile] = []
    for graph in data.get("graphs") or []:  # in the order compiles began
        candidates = same_id.setdefault((frame_key(graph), graph["compile_id"]), [])
        owner = _owner(candidates, graph)
        if owner is None:  # no record (a report of explain.explain): the graph stands for its compile
            owner = Compile(graph["compile_id"], frame_key(graph))
            candidates.append(owner)
        if not owner.graphs:
            order.append(owner)
        owner.graphs.append(graph)
    for own in per_function:
        previous = None
        for c in own:
            if not any(c is placed for placed in order):  # no graph (refused, skipped): after its frame's previous
                order.insert(_index(order, previous) + 1 if previous is not None else len(order), c)
            previous = c
    summaries = {frame_key(function): function for function in functions}
    frames: dict[FrameKey, Frame] = {}
    for c in order:
        if c.key not in frames:
            frames[c.key] = Frame(*c.key, compiles=[], summary=summaries.get(c.key))
        frames[c.key].compiles.append(c)
    tree = CompileTree(list(frames.values()), order)
    _anchor(tree)
    for index, brk in enumerate(data.get("breaks") or []):
        tree.broke[index] = _broken_by(tree, brk)
        for c in tree.broke[index]:
            c.breaks.append(index)
    return tree


def _owner(candidates: list[Compile], graph: Data) -> Compile | None:
    """The compile ``graph`` belongs to among those of its frame and id: the first without a graph yet, one that
    recorded this very graph first; a compile's further graphs join its last one."""
    free = [c for c in candidates if not c.graphs]
    named = [c for c in free if (c.record or {}).get("graph_hash") == graph.get("hash")]
    if named or free:
        return (named or free)[0]
    return candidates[-1] if candidates else None


def _index(order: list[Compile], wanted: Compile) -> int:
    return next(i for i, c in enumerate(order) if c is wanted)


def _broken_by(tree: CompileTree, brk: Data) -> list[Compile]:
    """The compiles a break names: by id, narrowed to frames of the functions on its user stack where any are."""
    stack = {(frame.get("function"), frame.get("filename")) for frame in brk.get("user_stack") or []}
    found: list[Compile] = []
    for compile_id in brk.get("compile_ids") or []:
        same = [c for c in tree.compiles if c.compile_id == compile_id]
        found += [c for c in same if c.key[:2] in stack] or same
    return found


def _anchor(tree: CompileTree) -> None:
    used: set[str] = set()

    def unique(base: str) -> str:
        anchor, n = base, 1
        while anchor in used:
            n += 1
            anchor = f"{base}_{n}"  # "_": a compile id's slug never holds one
        used.add(anchor)
        return anchor

    for frame in tree.frames:
        frame.anchor = unique(f"frame-{slug(frame.frame_id)}")
    for c in tree.compiles:
        c.anchor = unique(f"compile-{slug(c.compile_id)}")


def slug(text: str | None) -> str:
    """An id attribute's part from a compile id (``0/1`` → ``0-1``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", str(text))


__all__ = ["Compile", "CompileTree", "Frame", "compile_tree", "frame_key", "frame_name", "recompile_data", "slug"]
