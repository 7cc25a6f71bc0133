"""Hunted programs: a typed :class:`Program`, the Hypothesis strategy that draws one, and its source.

A program is what a user writes: a function ``f`` of a few tensors, a ``make_inputs``
that builds them from a seed, and a ``__main__`` that runs ``f`` eagerly and under the
default ``torch.compile`` and fails when they disagree. :func:`programs` draws one
step at a time from :mod:`~minifier.hunt.vocabulary`, keeping only the steps eager
accepts on the values at hand, so every program it draws is valid by construction.
:func:`render` writes it as a script that imports torch only; the hunt's judge
(:mod:`~minifier.hunt.judge`) imports the same script, so what was judged is what a
person reads and what ``minify run`` minifies.

What a program varies, besides its ops: shapes (0-d, empty, sizes around the
vectorization width), dtypes (floats, half precision, int, uint8, bool), input values
(random, special floats, large, small integers, an integer type's full range),
``dynamic=True`` or ``mark_dynamic``, an autocast or ``no_grad`` region, in-place
writes into its inputs, and a backward through it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hypothesis import strategies as st

from .vocabulary import BY_NAME, DTYPES, FLOATS, OPS, OVERLAPPING_VIEWS, PICKS_AMONG_TIES, VIEW_NAMES, Meta, apply

#: sizes of a dimension: empty and one, small odd ones, and around the CPU vector width
SIZES = (0, 1, 2, 3, 5, 7, 8, 9, 16, 17, 33)
MAX_STEPS = 8


class Fill(str, enum.Enum):
    """How an input's values are drawn (a seeded generator; the same program, the same values)."""

    RANDN = "randn"
    SPECIALS = "specials"  # inf, -inf, nan, 0, -0 and huge values first, randn after
    LARGE = "large"
    SMALL_INTS = "small_ints"
    FULL_RANGE = "full_range"  # an integer type's whole range


class Dynamic(str, enum.Enum):
    STATIC = "static"
    DYNAMIC = "dynamic"  # torch.compile(dynamic=True)
    MARKED = "marked"  # mark_dynamic on the first input's first dimension


class Region(str, enum.Enum):
    NONE = "none"
    NO_GRAD = "no_grad"
    AUTOCAST = "autocast"  # bf16 autocast on the CPU


@dataclass(frozen=True)
class Input:
    name: str
    meta: Meta
    fill: Fill


@dataclass(frozen=True)
class Step:
    name: str
    op: str
    operands: tuple[str, ...]
    dim: int
    meta: Meta


@dataclass(frozen=True)
class Program:
    """One hunted program: inputs, steps, outputs and the way it is compiled."""

    inputs: tuple[Input, ...]
    steps: tuple[Step, ...]
    outputs: tuple[str, ...]
    dynamic: Dynamic = Dynamic.STATIC
    region: Region = Region.NONE
    region_span: tuple[int, int] = (0, 0)  # steps[start:end] run inside the region
    backward: bool = False
    seed: int = 0

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(sorted({s.op for s in self.steps}))


def _fills(dtype: str) -> list[Fill]:
    if dtype == "bool":
        return [Fill.SMALL_INTS]
    if dtype in FLOATS:
        return [Fill.RANDN, Fill.SPECIALS, Fill.SPECIALS, Fill.LARGE, Fill.SMALL_INTS]
    return [Fill.SMALL_INTS, Fill.SMALL_INTS, Fill.FULL_RANGE]


@st.composite
def programs(draw: st.DrawFn) -> Program:
    """A valid program: each step is kept only where eager accepts it on the values before it."""
    base = tuple(draw(st.sampled_from(SIZES)) for _ in range(draw(st.sampled_from((2, 1, 3, 0, 2, 3)))))
    shapes = [base, base[1:], tuple(1 if i == 0 else s for i, s in enumerate(base))]
    dtype_choice = st.sampled_from(("float32",) * 6 + DTYPES)
    inputs = []
    for k in range(draw(st.integers(1, 3))):
        dtype = draw(dtype_choice)
        inputs.append(Input(f"x{k}", Meta(draw(st.sampled_from(shapes)), dtype), draw(st.sampled_from(_fills(dtype)))))
    backward = draw(st.booleans()) and any(i.meta.dtype in FLOATS for i in inputs)
    values = {i.name: i.meta for i in inputs}
    overlapping: set[str] = set()  # values whose elements share memory (OVERLAPPING_VIEWS, and views of them)
    steps: list[Step] = []
    wanted = draw(st.integers(2, MAX_STEPS))
    for _ in range(4 * wanted):  # draws eager refuses are skipped, so a program still gets its steps
        if len(steps) == wanted:
            break
        op = draw(st.sampled_from(OPS))
        if backward and (op.inplace or op.name in PICKS_AMONG_TIES):
            continue  # a leaf that needs grad cannot be written in place; a tie's gradient goes anywhere
        operands = tuple(draw(st.sampled_from(sorted(values))) for _ in range(op.arity))
        if op.inplace and operands[0] in overlapping:
            continue  # a write into elements that share memory is not well defined
        dim = draw(st.sampled_from((-1, 0, 1))) if op.takes_dim else -1
        meta = apply(op.name, tuple(values[o] for o in operands), dim)
        if meta is not None:
            steps.append(Step(f"v{len(steps)}", op.name, operands, dim, meta))
            values[steps[-1].name] = meta
            if op.name in OVERLAPPING_VIEWS or (op.name in VIEW_NAMES and operands[0] in overlapping):
                overlapping.add(steps[-1].name)
    if not steps:
        steps.append(Step("v0", "add_one", (inputs[0].name,), -1, apply("add_one", (inputs[0].meta,)) or inputs[0].meta))
    others = [s.name for s in steps[:-1]]
    outputs = (steps[-1].name, *(draw(st.lists(st.sampled_from(others), max_size=2, unique=True)) if others else ()))
    region = draw(st.sampled_from((Region.NONE,) * 4 + tuple(Region)))
    start = draw(st.integers(0, len(steps) - 1))
    span = (start, draw(st.integers(start + 1, len(steps)))) if region is not Region.NONE else (0, 0)
    return Program(
        tuple(inputs), tuple(steps), outputs, draw(st.sampled_from(tuple(Dynamic))), region, span, backward,
        draw(st.integers(0, 2**16)),
    )


def shortened(program: Program, last: int) -> Program:
    """``program`` up to step ``last``, which becomes its one output: the steps it reads, and every write in place before it.

    A write in place stays with what it reads, since the inputs after the run are judged
    too: a program whose bug is in a write keeps it.
    """
    needed = {program.steps[last].name}
    kept: list[Step] = []
    for step in reversed(program.steps[: last + 1]):
        if step.name in needed or BY_NAME[step.op].inplace:
            kept.append(step)
            needed.update(step.operands)
    kept.reverse()
    start, end = program.region_span
    inside = [k for k, step in enumerate(kept) if step in program.steps[start:end]]
    span = (inside[0], inside[-1] + 1) if inside else (0, 0)
    return Program(  # every input stays: the seeded generator draws each input's values in turn
        program.inputs, tuple(kept), (program.steps[last].name,), program.dynamic,
        program.region if inside else Region.NONE, span, program.backward, program.seed,
    )


def generate(seed: int, count: int) -> list[Program]:
    """``count`` programs drawn by Hypothesis from ``seed``: the same seed, the same programs."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as seeded

    drawn: list[Program] = []

    @seeded(seed)
    @settings(
        max_examples=count, database=None, deadline=None, phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(programs())
    def collect(program: Program) -> None:
        drawn.append(program)

    collect()
    return drawn


# --------------------------------------------------------------------------- #
# Source
# --------------------------------------------------------------------------- #

_SPECIALS = "[float('inf'), float('-inf'), float('nan'), 0.0, -0.0, 3e38, -1e-40]"
_INT_RANGE = {"int8": (-128, 128), "uint8": (0, 256), "int32": (-2**31, 2**31), "int64": (-2**62, 2**62)}


def _make_input(i: Input) -> list[str]:
    shape, dtype = i.meta.shape, f"torch.{i.meta.dtype}"
    if i.fill is Fill.SMALL_INTS:
        low = 0 if i.meta.dtype in ("uint8", "bool") else -4
        high = 2 if i.meta.dtype == "bool" else 5
        return [f"{i.name} = torch.randint({low}, {high}, {shape}, generator=g).to({dtype})"]
    if i.fill is Fill.FULL_RANGE and i.meta.dtype in _INT_RANGE:
        low, high = _INT_RANGE[i.meta.dtype]
        return [f"{i.name} = torch.randint({low}, {high}, {shape}, generator=g, dtype=torch.int64).to({dtype})"]
    scale = " * 1e4" if i.fill is Fill.LARGE else ""
    lines = [f"{i.name} = torch.randn({shape}, generator=g, dtype=torch.float64){scale}"]
    if i.fill is Fill.SPECIALS:
        lines.append(f"{i.name}.view(-1)[:7] = torch.tensor({_SPECIALS}, dtype=torch.float64)[:{i.name}.numel()]")
    return [*lines, f"{i.name} = {i.name}.to({dtype})"]


def _body(program: Program) -> list[str]:
    lines, (start, end) = [], program.region_span
    opener = {Region.NO_GRAD: "with torch.no_grad():", Region.AUTOCAST: 'with torch.autocast("cpu", dtype=torch.bfloat16):'}
    for k, step in enumerate(program.steps):
        if k == start and program.region in opener:
            lines.append(opener[program.region])
        indent = "    " if start <= k < end and program.region in opener else ""
        lines.append(f"{indent}{step.name} = {BY_NAME[step.op].spell(step.operands, step.dim)}")
    return lines


def render(program: Program, header: str = "") -> str:
    """The program as a script of its own: ``python program.py`` fails when compiled and eager disagree."""
    names = ", ".join(i.name for i in program.inputs)
    grad = [i.name for i in program.inputs if program.backward and i.meta.dtype in FLOATS]
    make = [line for i in program.inputs for line in _make_input(i)]
    make += [f"{n}.requires_grad_()" for n in grad]
    marked = program.dynamic is Dynamic.MARKED and program.inputs[0].meta.shape[:1] not in ((), (0,), (1,))
    lines = [
        f'"""{header or "A program drawn by minify hunt."}"""',
        "import torch",
        "",
        f"DYNAMIC = {program.dynamic is Dynamic.DYNAMIC}",
        f"BACKWARD = {program.backward}",
        "",
        "",
        f"def f({names}):",
        *("    " + line for line in _body(program)),
        f"    return ({', '.join(program.outputs)},)",
        "",
        "",
        "def make_inputs():",
        f"    g = torch.Generator().manual_seed({program.seed})",
        *("    " + line for line in make),
        *(["    torch._dynamo.mark_dynamic(x0, 0)"] if marked else []),
        f"    return [{names}]",
        "",
        "",
        MAIN,
    ]
    return "\n".join(lines)


#: The program's own check, as a user would write it: outputs, inputs after the run
#: (a write into an input is part of what a program does) and gradients.
MAIN = '''def results(fn):
    inputs = make_inputs()
    outputs = list(fn(*inputs))
    grads = []
    if BACKWARD:
        loss = sum(o.float().sum() for o in outputs if o.requires_grad)
        leaves = [x for x in inputs if x.requires_grad]
        if leaves and torch.is_tensor(loss):
            grads = [g if g is not None else torch.zeros(()) for g in torch.autograd.grad(loss, leaves, allow_unused=True)]
    return [t.detach() for t in outputs + inputs + grads]


if __name__ == "__main__":
    expected = results(f)
    actual = results(torch.compile(f, dynamic=DYNAMIC or None))
    for got, want in zip(actual, expected):
        if want.is_floating_point():
            tol = 1e-2 if want.dtype in (torch.float16, torch.bfloat16) else 1e-4
            torch.testing.assert_close(got, want, atol=tol, rtol=tol, equal_nan=True)
        else:
            torch.testing.assert_close(got, want, atol=0, rtol=0)
'''
