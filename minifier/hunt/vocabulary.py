"""The ops a hunted program is made of: a typed vocabulary, checked as a program is built.

Each :class:`Op` is a Python expression over one or two earlier values (``{a}``,
``{b}``) and, for ops along a dimension, ``{d}``. Whether an op applies to the values
at hand (their shapes broadcast, the dtype is one it takes, the dimension exists) is
not written down per op: :func:`apply` runs the expression once on small real tensors
of the values' shapes and dtypes (ones, so an integer division is defined) and keeps
the result's shape and dtype. A program is therefore valid by construction, by
eager's own rules, and the table stays one line per op.

What the vocabulary leaves out, on purpose (each is a triage rule made structural,
docs/hunt.md):

- random ops (``rand``, ``dropout``, ``multinomial``): nondeterministic by design;
- ``empty`` and its kin: uninitialized memory;
- ops that return indices of ties or NaNs (``argmax``, ``sort``, ``topk``, ``max(dim)``):
  their choice among equals is unspecified, in eager too; and, in a program with a backward,
  ops whose gradient makes that choice (:data:`PICKS_AMONG_TIES`: max pooling, ``median``);
- a float converted to an integer dtype outside its range (``-inf.to(int8)``): undefined
  in C, so casts to integers, and reductions with an integer ``dtype=`` (which convert each
  element first), saturate floats first (:data:`INTEGER_RANGES`);
- ``signbit`` and ``copysign``, which read only a value's sign: for a zero, ``max``,
  ``min`` and ``clamp`` may give ``0.0`` or ``-0.0`` (IEEE leaves it open; a vector
  ``max`` returns one operand, a scalar one the other), and the judge compares floats
  with ``-0.0 == 0.0`` everywhere else.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

#: dtypes a value may have, by the name the program spells (``torch.<name>``).
DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "bool")
FLOATS = ("float32", "float64", "float16", "bfloat16")


@dataclass(frozen=True)
class Meta:
    """What the builder knows of a value: its shape and dtype."""

    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Op:
    """One way to compute a value: ``template`` over ``arity`` operands (and a dimension where ``{d}`` appears)."""

    name: str
    template: str
    arity: int = 1
    #: in-place on its operand; only ever applied to a program's inputs or values it made itself
    inplace: bool = False

    @property
    def takes_dim(self) -> bool:
        return "{d}" in self.template

    def spell(self, operands: tuple[str, ...], dim: int = -1) -> str:
        names = dict(zip("ab", operands))
        return self.template.format(d=dim, **names)


def _ops(arity: int, table: str, inplace: bool = False) -> list[Op]:
    rows = [line.split(" = ", 1) for line in table.strip().splitlines()]
    return [Op(name.strip(), template.strip(), arity, inplace) for name, template in rows]


UNARY = _ops(1, """
sin = torch.sin({a})
exp = torch.exp({a})
expm1 = torch.expm1({a})
log = torch.log({a})
log1p = torch.log1p({a})
sqrt = torch.sqrt({a})
rsqrt = torch.rsqrt({a})
abs = torch.abs({a})
neg = -{a}
sign = torch.sign({a})
floor = torch.floor({a})
ceil = torch.ceil({a})
round = torch.round({a})
round_decimals = torch.round({a}, decimals=2)
trunc = torch.trunc({a})
frac = torch.frac({a})
sigmoid = torch.sigmoid({a})
tanh = torch.tanh({a})
relu = torch.relu({a})
gelu = torch.nn.functional.gelu({a})
silu = torch.nn.functional.silu({a})
softplus = torch.nn.functional.softplus({a})
erf = torch.erf({a})
reciprocal = torch.reciprocal({a})
square = torch.square({a})
clamp = torch.clamp({a}, -1, 1)
hardtanh = torch.nn.functional.hardtanh({a}, 0.0, 6.0)
nan_to_num = torch.nan_to_num({a})
isnan = torch.isnan({a})
isinf = torch.isinf({a})
logical_not = torch.logical_not({a})
bitwise_not = torch.bitwise_not({a})
mul_zero = {a} * 0
add_one = {a} + 1
div_three = {a} / 3
floordiv_two = {a} // 2
mod_three = {a} % 3
pow_two = {a} ** 2
pow_half = {a} ** 0.5
shift_left = {a} << 2
scale = {a} * 2.5
full_like = torch.full_like({a}, 3)
ones_cumsum = torch.ones_like({a}).cumsum(-1)
softshrink = torch.nn.functional.softshrink({a}, 0.5)
hardshrink = torch.nn.functional.hardshrink({a}, 0.5)
threshold = torch.nn.functional.threshold({a}, 0.5, -1.0)
logit = torch.logit({a}, eps=1e-6)
sinc = torch.sinc({a})
log2 = torch.log2({a})
exp2 = torch.exp2({a})
elu = torch.nn.functional.elu({a})
selu = torch.nn.functional.selu({a})
mish = torch.nn.functional.mish({a})
hardswish = torch.nn.functional.hardswish({a})
leaky_relu = torch.nn.functional.leaky_relu({a}, 0.1)
relu6 = torch.nn.functional.relu6({a})
isposinf = torch.isposinf({a})
masked_fill = {a}.masked_fill({a} > 0, float("-inf"))
tril = torch.tril({a})
triu = torch.triu({a}, 1)
pad_constant = torch.nn.functional.pad({a}, (2, 1), value=-1.0)
max_pool1d = torch.nn.functional.max_pool1d({a}, 2, ceil_mode=True)
max_pool1d_padded = torch.nn.functional.max_pool1d({a}, 3, stride=1, padding=1)
avg_pool1d = torch.nn.functional.avg_pool1d({a}, 2, ceil_mode=True, count_include_pad=False)
adaptive_avg_pool1d = torch.nn.functional.adaptive_avg_pool1d({a}, 3)
adaptive_max_pool1d = torch.nn.functional.adaptive_max_pool1d({a}, 3)
cond = torch.cond({a}.sum() > 0, lambda t: torch.sin(t) + t, lambda t: t * 2, ({a},))
checkpoint = torch.utils.checkpoint.checkpoint(lambda t: torch.cos(t) * t, {a}, use_reentrant=False)
""")

#: Where a cast to an integer dtype may take a floating value: outside it (inf, NaN, 3e38) the
#: conversion is undefined in C, eager's included, so such a cast clamps the value first. It clamps
#: in the value's own dtype (the float-to-integer conversion a kernel does is what is under test:
#: the int8 sum of a float32 rounded through float64 hides a genuine bug the float32 one shows), so
#: every bound is exact in bfloat16 as well: a power of two, or 8 significant bits at most.
#: An integer or bool value keeps its plain cast: the condition is the value's dtype, fixed at trace time.
INTEGER_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int32": (-(2**31), 2**30), "int64": (-(2**62), 2**62)}


def _saturated(dtype: str) -> str:
    """``{a}``, a floating value clamped first into the integer ``dtype``'s range (an integer one as it is).

    ``nan_to_num`` makes NaN 0 and the infinities the dtype's finite extremes first:
    ``clamp`` passes a NaN on, and a bound float16 cannot hold is ``inf`` there.
    """
    low, high = INTEGER_RANGES[dtype]
    return f"(torch.nan_to_num({{a}}, 0.0).clamp({low}, {high}) if {{a}}.is_floating_point() else {{a}})"


def _cast(dtype: str) -> Op:
    if dtype not in INTEGER_RANGES:
        return Op(f"to_{dtype}", f"{{a}}.to(torch.{dtype})")
    return Op(f"to_{dtype}", f"{_saturated(dtype)}.to(torch.{dtype})")


CASTS = [_cast(d) for d in DTYPES]

VIEWS = _ops(1, """
transpose = {a}.transpose(0, -1)
t_contiguous = {a}.transpose(0, -1).contiguous()
step_slice = {a}[..., ::2]
tail_slice = {a}[..., 1:]
flip = {a}.flip(0)
expand = {a}.expand(2, *{a}.shape)
flatten = {a}.reshape(-1)
narrow = {a}.narrow(-1, 0, 1)
diagonal = {a}.diagonal()
unsqueeze = {a}.unsqueeze({d})
""")

REDUCTIONS = _ops(1, """
sum = {a}.sum({d})
sum_keepdim = {a}.sum({d}, keepdim=True)
sum_all = {a}.sum()
mean = {a}.mean({d})
amax = {a}.amax({d})
amin = {a}.amin({d})
prod = {a}.prod({d})
cumsum = {a}.cumsum({d})
cumprod = {a}.cumprod({d})
logcumsumexp = torch.logcumsumexp({a}, {d})
logsumexp = torch.logsumexp({a}, {d})
var = {a}.var({d})
std = {a}.std({d})
norm = torch.linalg.vector_norm({a}, dim={d})
any = {a}.any({d})
all = {a}.all({d})
softmax = torch.softmax({a}, {d})
log_softmax = torch.log_softmax({a}, {d})
nansum = torch.nansum({a}, {d})
nanmean = torch.nanmean({a}, {d})
count_nonzero = torch.count_nonzero({a}, {d})
median = {a}.median({d}).values
cummax = {a}.cummax({d}).values
cummin = {a}.cummin({d}).values
diff = torch.diff({a}, dim={d})
sum_float16 = {a}.sum({d}, dtype=torch.float16)
cumsum_bfloat16 = {a}.cumsum({d}, dtype=torch.bfloat16)
""") + [
    # an integer dtype= converts each element first: a float is saturated as a cast's is
    Op("sum_int8", f"{_saturated('int8')}.sum({{d}}, dtype=torch.int8)"),
    Op("cumsum_int32", f"{_saturated('int32')}.cumsum({{d}}, dtype=torch.int32)"),
]

INDEXING = _ops(1, """
index_select_flip = torch.index_select({a}, 0, torch.arange({a}.shape[0] - 1, -1, -1))
gather_first = {a}.gather(-1, torch.zeros_like({a}, dtype=torch.long))
scatter_add_first = {a}.scatter_add(-1, torch.zeros_like({a}, dtype=torch.long), {a})
index_add = {a}.index_add(0, torch.zeros({a}.shape[0], dtype=torch.long), {a})
roll = torch.roll({a}, 1, {d})
""")

#: Layers and their building blocks: normalizations, pooling, resampling, products, and the
#: indexing a model's code does (embedding, index_put with accumulate, scatter_reduce). No op
#: whose gradient picks one of several tied elements (``sort``, ``topk``, ``max(dim)``): which
#: one is unspecified, in eager too.
LAYERS = _ops(1, """
layer_norm = torch.nn.functional.layer_norm({a}, {a}.shape[-1:])
rms_norm = torch.nn.functional.rms_norm({a}, {a}.shape[-1:])
group_norm = torch.nn.functional.group_norm({a}, 1)
batch_norm_eval = torch.nn.functional.batch_norm({a}, torch.zeros({a}.shape[1]), torch.ones({a}.shape[1]), training=False)
normalize = torch.nn.functional.normalize({a}, dim={d})
glu = torch.nn.functional.glu({a}, {d})
matmul_self = {a} @ {a}.transpose(-1, -2)
max_pool2d = torch.nn.functional.max_pool2d({a}, 2, stride=1, padding=1)
avg_pool2d = torch.nn.functional.avg_pool2d({a}, 2, ceil_mode=True)
interpolate_nearest = torch.nn.functional.interpolate({a}, scale_factor=2, mode="nearest")
interpolate_linear = torch.nn.functional.interpolate({a}, scale_factor=1.5, mode="linear")
repeat_interleave = {a}.repeat_interleave(2, {d})
unfold = {a}.unfold(-1, 2, 1)
embedding = torch.nn.functional.embedding(torch.tensor([1, 0, 1]) % {a}.shape[0], {a})
index_put_accumulate = {a}.index_put((torch.tensor([0, 0, -1]),), {a}[0] * 2, accumulate=True)
index_fill = {a}.index_fill({d}, torch.tensor([0]), -2)
scatter_reduce_sum = {a}.scatter_reduce(-1, torch.zeros_like({a}, dtype=torch.long), {a}, reduce="sum", include_self=False)
scatter_reduce_mean = {a}.scatter_reduce(-1, torch.zeros_like({a}, dtype=torch.long), {a}, reduce="mean")
where_scalar = torch.where({a} > 0, {a}, 0.5)
bucketize = torch.bucketize({a}, torch.tensor([-1.0, 0.0, 1.0]))
""") + _ops(2, """
matmul = {a} @ {b}
mse_loss = torch.nn.functional.mse_loss({a}, {b})
cosine_similarity = torch.nn.functional.cosine_similarity({a}, {b}, dim={d})
einsum_dot = torch.einsum("...i,...i->...", {a}, {b})
""")

BINARY = _ops(2, """
add = {a} + {b}
sub = {a} - {b}
mul = {a} * {b}
div = {a} / {b}
remainder = torch.remainder({a}, {b})
fmod = torch.fmod({a}, {b})
floor_divide = torch.floor_divide({a}, {b})
maximum = torch.maximum({a}, {b})
minimum = torch.minimum({a}, {b})
pow = torch.pow({a}, {b})
atan2 = torch.atan2({a}, {b})
where_positive = torch.where({a} > 0, {a}, {b})
bitwise_and = {a} & {b}
bitwise_xor = {a} ^ {b}
shift_by = {a} << {b}
eq = {a} == {b}
lt = {a} < {b}
lerp = torch.lerp({a}, {b}, 0.3)
fmax = torch.fmax({a}, {b})
fmin = torch.fmin({a}, {b})
logaddexp = torch.logaddexp({a}, {b})
hypot = torch.hypot({a}, {b})
nextafter = torch.nextafter({a}, {b})
xlogy = torch.xlogy({a}, {b})
heaviside = torch.heaviside({a}, {b})
div_floor = torch.div({a}, {b}, rounding_mode="floor")
div_trunc = torch.div({a}, {b}, rounding_mode="trunc")
bitwise_or = {a} | {b}
shift_right = {a} >> {b}
logical_xor = torch.logical_xor({a}, {b})
ne = {a} != {b}
cat = torch.cat([{a}, {b}], {d})
addcmul = torch.addcmul({a}, {a}, {b}, value=0.5)
clamp_min = torch.clamp({a}, min={b})
""")

INPLACE = _ops(1, """
add_ = {a}.add_(1)
mul_ = {a}.mul_(2)
clamp_ = {a}.clamp_(0, 1)
slice_add_ = {a}[..., :1].add_(3)
""", inplace=True) + _ops(2, """
copy_ = {a}.copy_({b})
add_other_ = {a}.add_({b})
""", inplace=True)

#: Ops whose gradient goes to one element of a window's or a dimension's maximum (or median):
#: which one, among tied elements (``0.0`` and ``-0.0``, small integers), is unspecified, in eager
#: too. A program with a backward draws none of them; without one, their values are well defined.
PICKS_AMONG_TIES = frozenset(
    {"max_pool1d", "max_pool1d_padded", "adaptive_max_pool1d", "max_pool2d", "median", "cummax", "cummin"}
)

#: Views whose elements share memory (``expand``, ``unfold``), and every view of one: a write in
#: place into such a view is not well defined (eager writes some elements twice; functionalization
#: refuses it), so no in-place op is drawn onto one.
OVERLAPPING_VIEWS = frozenset({"expand", "unfold"})
VIEW_NAMES = frozenset(op.name for op in VIEWS)

OPS: tuple[Op, ...] = tuple(UNARY + CASTS + VIEWS + REDUCTIONS + INDEXING + LAYERS + BINARY + INPLACE)
BY_NAME = {op.name: op for op in OPS}


@functools.lru_cache(maxsize=65536)
def apply(op_name: str, operands: tuple[Meta, ...], dim: int = -1) -> Meta | None:
    """The shape and dtype ``op`` gives on values like ``operands``, or None where eager refuses it.

    Runs the op on real tensors of ones, of these shapes and, where a size is 0, of the
    same shapes made non-empty too: an op must be valid on both. Warnings and errors
    both mean "no".
    """
    import warnings

    import torch

    op = BY_NAME[op_name]
    if op.inplace and operands[0].dtype == "bool" and op.name != "copy_":
        return None
    filled = tuple(Meta(tuple(size or 2 for size in m.shape), m.dtype) for m in operands)
    if filled != operands and apply(op_name, filled, dim) is None:
        return None  # eager skips its checks on empty tensors (``empty(0).cummin(1)``): not a program to judge
    values = {name: torch.ones(m.shape, dtype=getattr(torch, m.dtype)) for name, m in zip("ab", operands)}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result: Any = eval(op.spell(tuple(values), dim), {"torch": torch}, values)  # noqa: S307 - our own table
    except Exception:  # noqa: BLE001 - any refusal is "not this op here"
        return None
    if not isinstance(result, torch.Tensor) or result.is_complex() or result.numel() > 1 << 16:
        return None
    return Meta(tuple(result.shape), str(result.dtype).removeprefix("torch."))
