"""Seam: the text of dynamo's guard code, read back.

Each guard dynamo installs keeps the Python code it checks (``verbose_code_parts()``, what
``TORCH_LOGS=guards`` prints), written in torch's own spelling:

- values are named by their ``Source`` (``torch._dynamo.source``): ``L['x']`` a frame
  local, ``G['N']`` a module global, ``G['__builtins_dict___0']['print']`` a builtin (the
  builtins dict ``OutputGraph.install_builtins_dict_in_fglobals`` installs), and
  ``L['self']._modules['fc']._parameters['weight']`` a module member; sizes and strides
  read ``L['x'].size()[0]``;
- a ``TENSOR_MATCH`` guard is one ``check_tensor(<source>, <class>, DispatchKeySet(...),
  <dtype>, device=<index>, requires_grad=<bool>, size=[...], stride=[...])`` call
  (``torch._dynamo.guards.get_tensor_guard_code_part``), ``None`` marking a dynamic dim;
- torch appends ``# <user code>  # file:line`` comments to the code;
- when a tensor fails its ``TENSOR_MATCH``, ``check_verbose`` describes it in words
  (``tensor 'L['x']' dtype mismatch...``) rather than with the guard's code.

:func:`readable` rewrites sources the way a user spells them (``self.fc.weight``);
:func:`tensor_check` reads a ``check_tensor`` call; the smaller readers pick sizes and
sources out of symbolic-shape guards.
"""

from __future__ import annotations

import re

from . import Seam

SEAM = Seam(
    wraps=(
        "dynamo's guard code text: torch._dynamo.source names (L[...], G[...], __builtins_dict__, _modules/_parameters/_buffers), "
        "torch._dynamo.guards.get_tensor_guard_code_part (check_tensor(...)) and strip_local_scope"
    ),
    features=("explain", "RecompileProfiler"),
)

_LOCAL = re.compile(r"L\[\s*['\"]([^'\"]+)['\"]\s*\]")
_GLOBAL = re.compile(r"G\[\s*['\"]([^'\"]+)['\"]\s*\]")
_BUILTIN = re.compile(r"G\[\s*['\"]__builtins_dict___\d+['\"]\s*\]\[\s*['\"]([^'\"]+)['\"]\s*\]")
_MODULE_MEMBER = re.compile(r"\._(?:modules|parameters|buffers)\[\s*['\"]([^'\"]+)['\"]\s*\]")
_SIZE_DIM = re.compile(r"\.size\(\)\[(\d+)\]")
_SIZE_OF = re.compile(r"L\[\s*['\"][^'\"]+['\"]\s*\]\.(?:size|stride)\(\)\[\d+\]")
_CHECK_TENSOR = re.compile(
    r"check_tensor\((?P<source>.+?), (?P<cls>[\w.]+), DispatchKeySet\((?P<keys>[^)]*)\), "
    r"(?P<dtype>torch\.\w+), device=(?P<device>[^,]+), requires_grad=(?P<requires_grad>True|False), "
    r"size=\[(?P<size>[^\]]*)\], stride=\[(?P<stride>[^\]]*)\]\)"
)


def probe() -> None:
    import inspect

    import torch
    from torch._dynamo.guards import get_tensor_guard_code_part
    from torch._dynamo.output_graph import OutputGraph
    from torch._dynamo.source import AttrSource, DictGetItemSource, GlobalSource, LocalSource

    member = DictGetItemSource(
        AttrSource(DictGetItemSource(AttrSource(LocalSource("self"), "_modules"), "fc"), "_parameters"), "weight"
    )
    spelled = {
        LocalSource("x").name: "x",
        GlobalSource("N").name: "N",
        member.name: "self.fc.weight",
        "G['__builtins_dict___0']['print']": "print",
    }
    for source, user in spelled.items():
        if readable(source) != user:
            raise AttributeError(f"guard sources changed: {source} no longer reads as {user}")
    if 'install_global("__builtins_dict__"' not in inspect.getsource(OutputGraph.install_builtins_dict_in_fglobals):
        raise AttributeError("dynamo no longer installs the builtins dict as G['__builtins_dict___N']")
    tensor = torch.zeros(2, 3)
    code = get_tensor_guard_code_part(
        tensor, "L['x']", [2, None], [3, 1], type(tensor), torch._C._dispatch_keys(tensor)
    )
    fields = tensor_check(code)
    if fields is None or (
        fields["dtype"],
        fields["device"],
        fields["requires_grad"],
        fields["size"],
        fields["stride"],
    ) != ("float32", None, False, (2, None), (3, 1)):
        raise AttributeError(f"TENSOR_MATCH's check_tensor(...) code changed: {code}")


def readable(text: str) -> str:
    """Rewrite torch's guard sources the way the user spells them.

    ``L['x']`` becomes ``x``, ``G['N']`` becomes ``N``, a builtin looked up through
    ``G['__builtins_dict___0']['print']`` becomes ``print`` and
    ``L['self']._modules['fc']._parameters['weight']`` becomes ``self.fc.weight``.
    """
    from torch._dynamo.guards import strip_local_scope

    text = _MODULE_MEMBER.sub(r".\1", text)
    text = _BUILTIN.sub(r"\1", text)
    text = _GLOBAL.sub(r"\1", text)
    return strip_local_scope(text)


def source_scope(source: str) -> str:
    """``local`` for frame locals (arguments), ``global`` for module globals, else ``other``."""
    if source.startswith("L["):
        return "local"
    if source.startswith("G["):
        return "global"
    return "other"


def code_of(verbose_code_part: str) -> str:
    """Drop the ``# user code  # file:line`` comment torch appends to a guard's code."""
    return verbose_code_part.split("#")[0].rstrip()


def tensor_check(code: str) -> dict[str, object] | None:
    """The fields of a ``check_tensor(...)`` guard, or None if ``code`` holds none.

    ``dtype`` without ``torch.``, ``device`` an index as text or None, ``requires_grad``,
    and ``size`` / ``stride`` as tuples with None for dynamic entries.
    """
    match = _CHECK_TENSOR.search(code)
    if match is None:
        return None
    device = match["device"].strip()
    return {
        "dtype": match["dtype"].removeprefix("torch."),
        "device": None if device == "None" else device,
        "requires_grad": match["requires_grad"] == "True",
        "size": _parse_dims(match["size"]),
        "stride": _parse_dims(match["stride"]),
    }


def is_tensor_mismatch(part: str) -> bool:
    """Is this a failed ``TENSOR_MATCH`` as ``check_verbose`` words it (``tensor 'L['x']' ... mismatch``)?"""
    return part.startswith("tensor ")


def first_local(code: str) -> str:
    """The first frame-local source in ``code`` (``L['x']``), or ``""``."""
    match = _LOCAL.search(code)
    return match.group(0) if match else ""


def size_dim(code: str) -> int | None:
    """The dimension of the first ``.size()[d]`` in ``code``."""
    match = _SIZE_DIM.search(code)
    return int(match[1]) if match else None


def size_expressions(code: str) -> list[str]:
    """Every ``L['x'].size()[d]`` / ``.stride()[d]`` in a symbolic-shape guard's code."""
    return _SIZE_OF.findall(code)


def _parse_dims(text: str) -> tuple[int | None, ...]:
    return tuple(None if d.strip() == "None" else int(d) for d in text.split(",") if d.strip())
