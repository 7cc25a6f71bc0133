"""Seam: tensors torch marks as special, which a plain copy turns into ordinary ones.

A graph input can be more than its values. Real bugs live in those marks:

- a **ZeroTensor** (``torch._efficientzerotensor``): the gradient autograd passes for a
  function with a zero derivative (``torch.sgn`` of a real tensor). It owns no memory,
  cannot be saved (``torch.save`` refuses it), and compiled code that reads it as an
  ordinary tensor may crash;
- a tensor with the **conjugate bit** (``x.conj()`` of a complex tensor) or the
  **negative bit** (``torch._neg_view``): a lazy view whose memory holds the values
  before the operation. ``clone()`` materializes it, so the bit a kernel mishandled is gone.

pt2kit keeps such an input as its *plain* tensor (an ordinary tensor over the same
memory, what is saved and cloned) plus its :data:`KINDS` name, in
:attr:`minifier.unit.case.TensorMeta.special`; :func:`rebuild` puts the mark back, in pt2kit's
queries and, as :func:`expression`, in the repro. A ZeroTensor needs no data at all.

A **view autograd guards** is more than its values too: an input returned as-is by a custom
``autograd.Function``, a view made under ``no_grad``, or one of several outputs of one op
(``unbind``). Autograd refuses an in-place write to such a view, and AOTAutograd's replay of
an input's mutation has hit that guard where eager did not (pytorch#194534). A copy is an
ordinary tensor, so the guard is gone: :func:`view_kind` names it (:data:`VIEW_KINDS`, in
:attr:`minifier.unit.case.TensorMeta.view`), and :func:`minifier.unit.runtime.guarded_view`
makes such a view again, in pt2kit's queries and in the repro.

A tensor **subclass** that only overrides ``__torch_function__`` (a tag a library puts on
its tensors, ``x.as_subclass(Tagged)``) holds an ordinary tensor's data:
:func:`plain_subclass` finds it, and a repro rebuilds it with ``.as_subclass(cls)``, the
class imported or carried from the user's script. A subclass with its own
``__torch_dispatch__`` (a wrapper, like DTensor) is not one.

Inputs no repro can rebuild yet (sparse and other layouts, nested, quantized and
MKL-DNN tensors, wrapper subclasses) are named by :func:`unsupported`, so that the user
reads what pt2kit cannot carry instead of a verdict of "flaky".
"""

from __future__ import annotations

from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch._is_zerotensor, torch._efficientzerotensor, torch._neg_view, Tensor.is_neg, Tensor.is_conj, "
    "torch._C._autograd._get_creation_meta, Tensor._is_view",
    features=(
        "repros of special graph inputs (ZeroTensor, conjugate and negative views)",
        "repros of views autograd guards (returned as-is by a custom Function, made under no_grad, one of several outputs)",
    ),
)

#: The marks pt2kit carries: a ZeroTensor, the conjugate bit, the negative bit.
KINDS = ("zerotensor", "conj", "neg")

#: The views autograd guards against in-place writes, by how they were made (torch's ``CreationMeta``).
VIEW_KINDS = {"IN_CUSTOM_FUNCTION": "custom_function", "NO_GRAD_MODE": "no_grad", "MULTI_OUTPUT_NODE": "multi_output"}


def probe() -> None:
    import torch

    zero = torch._efficientzerotensor((2,), dtype=torch.float32)
    if not torch._is_zerotensor(zero) or torch._is_zerotensor(torch.zeros(2)):
        raise AttributeError("torch._is_zerotensor no longer tells a ZeroTensor apart")
    negative = torch._neg_view(torch.ones(2))
    if not negative.is_neg() or torch._neg_view(negative).is_neg() or float(negative[0]) != -1.0:
        raise AttributeError("torch._neg_view no longer toggles the negative bit")
    conjugate = torch.ones(2, dtype=torch.complex64).conj()
    if not conjugate.is_conj() or conjugate.conj().is_conj():
        raise AttributeError("Tensor.conj no longer toggles the conjugate bit")
    x = torch.ones(2, requires_grad=True) * 1
    with torch.no_grad():
        made = {"no_grad": x.view_as(x)}
    made["multi_output"] = x.unsqueeze(0).unbind(0)[0]
    if {kind: view_kind(v) for kind, v in made.items()} != {k: k for k in made} or view_kind(x) is not None:
        raise AttributeError("torch._C._autograd._get_creation_meta no longer tells a view autograd guards apart")


def kind_of(t: Any) -> str | None:
    """Which of :data:`KINDS` marks ``t`` (None: an ordinary tensor, or not a tensor)."""
    import torch

    if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        return None
    if torch._is_zerotensor(t):
        return "zerotensor"
    if t.is_conj():
        return "conj"
    if t.is_neg():
        return "neg"
    return None


def view_kind(t: Any) -> str | None:
    """Which of :data:`VIEW_KINDS` ``t`` is (None: not a view autograd guards, or not a tensor)."""
    import torch

    if not isinstance(t, torch.Tensor) or not t.requires_grad or not t._is_view():
        return None
    return VIEW_KINDS.get(torch._C._autograd._get_creation_meta(t).name)


def custom_function_name(t: Any) -> str | None:
    """The name of the custom ``autograd.Function`` a ``custom_function`` view came out of (its errors name it)."""
    name = type(getattr(t, "grad_fn", None)).__name__
    return name.removesuffix("Backward") if view_kind(t) == "custom_function" and name.endswith("Backward") else None


def plain_subclass(t: Any) -> type | None:
    """The class of a tensor subclass that holds an ordinary tensor's data (no ``__torch_dispatch__`` of its own)."""
    import torch

    cls = type(t)
    if not isinstance(t, torch.Tensor) or cls in (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer):
        return None
    return cls if getattr(cls, "__torch_dispatch__", None) is torch.Tensor.__torch_dispatch__ else None


def unsupported(t: Any) -> str | None:
    """Why a repro cannot rebuild tensor ``t`` yet (None: it can)."""
    import torch

    if not isinstance(t, torch.Tensor):
        return None
    if t.is_nested:
        return "a nested tensor"
    if t.layout != torch.strided:
        return f"a {str(t.layout).removeprefix('torch.')} tensor"
    if t.is_quantized:
        return "a quantized tensor"
    if t.is_mkldnn:
        return "an MKL-DNN tensor"
    if type(t) not in (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer) and plain_subclass(t) is None:
        return f"a tensor subclass with its own __torch_dispatch__ ({type(t).__name__})"
    return None


def plain(t: Any) -> Any:
    """The ordinary tensor behind a special one: what is saved and copied (a ZeroTensor: zeros)."""
    import torch

    kind = kind_of(t)
    if kind == "zerotensor":
        return torch.zeros(t.shape, dtype=t.dtype, device=t.device)
    if kind == "conj":
        return t.conj()  # the bit toggled off: the same memory, read as it is stored
    if kind == "neg":
        return torch._neg_view(t)
    return t


def rebuild(t: Any, kind: str | None) -> Any:
    """Tensor ``t`` (a plain one) marked as ``kind`` again (a ZeroTensor of its shape and dtype)."""
    import torch

    if kind == "zerotensor":
        return torch._efficientzerotensor(t.shape, dtype=t.dtype, device=t.device)
    if kind == "conj":
        return t.conj()
    if kind == "neg":
        return torch._neg_view(t)
    return t


def expression(kind: str | None, plain_expression: str, shape: tuple[int, ...], dtype: str, device: str) -> str:
    """How a repro writes an input of ``kind``, given how it writes the plain tensor (one expression, no comment)."""
    if kind == "zerotensor":
        where = "" if device == "cpu" else f", device={device!r}"
        return f"torch._efficientzerotensor({shape!r}, dtype=torch.{dtype}{where})"
    if kind == "conj":
        return f"{plain_expression}.conj()"
    if kind == "neg":
        return f"torch._neg_view({plain_expression})"
    return plain_expression
