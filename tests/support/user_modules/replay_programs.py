"""Frames that fail under purpose-built backends, for tests/replay/test_replay.py.

They live in a file of their own so that replay can find their source, as it would in a
user's program. Importing this module registers the planted backends and one more:

- ``fails_when_dynamic``: rejects any graph that has a symbolic size or int input, so a
  frame fails only on its automatic-dynamic recompile.
"""

import dataclasses
import enum
import threading
import typing

import planted  # noqa: F401  registers planted_compile_error, planted_runtime_error, planted_value...
import torch
import torch.nn.functional as F
from torch._dynamo import register_backend


@register_backend(name="fails_when_dynamic")
def fails_when_dynamic(gm, example_inputs):
    for value in example_inputs:
        shape = value.shape if isinstance(value, torch.Tensor) else ()
        if isinstance(value, torch.SymInt) or any(isinstance(s, torch.SymInt) for s in shape):
            raise RuntimeError("fails_when_dynamic: symbolic sizes are not supported")
    return gm.forward


# -- a frame with every kind of value -------------------------------------------------

SCALE = 3.0
TABLE = {"k": [1, 2, (3.5, "s")], "w": None}


def helper(t):
    return t * SCALE


def make_frame(bias):
    def frame(x, n, alpha, nested):
        y = F.relu(x) + helper(x) * alpha + bias
        y = y * n + nested["k"][2][0] + TABLE["k"][1]
        return torch.cos(y)

    return frame


# -- a module whose __init__ must not run at replay -----------------------------------

BUILDING = False


class Block(torch.nn.Module):
    def __init__(self):
        if not BUILDING:
            raise RuntimeError("Block.__init__ ran outside make_block()")
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.linspace(0.5, 2.0, 4))
        self.register_buffer("offset", torch.randn(4), persistent=False)

    def forward(self, x):
        return torch.cos(self.lin(x) * self.scale + self.offset).relu()


def make_block():
    global BUILDING
    BUILDING = True
    try:
        return Block()
    finally:
        BUILDING = False


# -- structured values ------------------------------------------------------------------


class Mode(enum.Enum):
    SCALE = "scale"
    SHIFT = "shift"


class Pair(typing.NamedTuple):
    first: torch.Tensor
    second: float


@dataclasses.dataclass(frozen=True)
class Settings:
    mode: Mode
    factor: float
    extra: list


def structured(pair, settings):
    y = pair.first * pair.second
    if settings.mode is Mode.SCALE:
        y = y * settings.factor
    return torch.cos(y + settings.extra[0])


# -- graph breaks, resume functions, dynamic shapes -------------------------------------


def breaks_graph(x):
    y = x.sin()
    print("a graph break")
    return y.cos()


def breaks_then_fails(x, k):
    y = x.sin() * k
    print("a graph break")
    return torch.cos(y) + x


def wrong_value_crosses_a_break(x):
    y = x.cos()
    print("a graph break")
    return torch.arange(3)[(y * 2).long()]


def grows(x):
    return x.sin() + 1


def big_values_fail(x):
    return torch.cos(x) + 1


# -- RNG and aliasing ------------------------------------------------------------------


def random_and_aliased(x, view):
    noise = torch.rand_like(x)
    view.mul_(2)
    return torch.cos(x + noise), x.clone(), torch.randn(3)


# -- values that cannot be recorded -----------------------------------------------------

LOCK = threading.Lock()


def uses_unrecordable(x, gen):
    if gen is None:
        LOCK.acquire()
    return torch.cos(x)


def counter():
    yield 1


# -- a tensor subclass ------------------------------------------------------------------


class ScaledTensor(torch.Tensor):
    """A wrapper subclass holding ``data`` and a Python ``scale``: its value is data * scale."""

    @staticmethod
    def __new__(cls, data, scale):
        return torch.Tensor._make_wrapper_subclass(
            cls, data.shape, dtype=data.dtype, device=data.device, strides=data.stride()
        )

    def __init__(self, data, scale):
        self.data_ = data
        self.scale = scale

    def __tensor_flatten__(self):
        return ["data_"], {"scale": self.scale}

    @staticmethod
    def __tensor_unflatten__(inner, ctx, outer_size, outer_stride):
        return ScaledTensor(inner["data_"], ctx["scale"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(value):
            return value.data_ * value.scale if isinstance(value, ScaledTensor) else value

        return func(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in (kwargs or {}).items()})


# -- a backend carried as source whose names are the replay script's own ----------------


def resolve(gm):
    """A helper of the user's, named as a function of the replay script's machinery is."""
    return [n for n in gm.graph.nodes if n.op == "call_function"]


def make_rejecting_backend(word):
    def main(gm, example_inputs):  # a closure: the record carries its source, which binds main and resolve
        if any(word in str(n.target) for n in resolve(gm)):
            raise RuntimeError(f"rejecting backend: cannot compile {word}")
        return gm.forward

    return main
