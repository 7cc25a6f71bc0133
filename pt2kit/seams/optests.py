"""Seam: the machinery behind ``torch.library.opcheck`` (``torch.testing._internal.optests`` and what it is built from).

``torch.library.opcheck`` runs five checks on one call of a custom op; opcheck/ runs the
same five from a test suite, built from the same pieces, and goes further where they stop
(:mod:`opcheck.checks` says where):

- ``test_schema``: ``SchemaCheckMode`` (``torch._subclasses.schema_check_mode``) finds
  outputs that alias or are inputs without the schema saying so;
- ``test_autograd_registration``: ``optests.autograd_registration.autograd_registration_check``,
  and ``set_autograd_fallback_mode`` to make the autograd fallback warn;
- ``test_faketensor``: the comparisons ``CrossRefFakeMode`` makes
  (``torch._subclasses.fake_utils``: aliasing of outputs and inputs;
  ``torch._prims_common.check_significant_strides``);
- ``test_aot_dispatch_static`` / ``_dynamic``: ``optests.generate_tests.safe_aot_autograd_check``.

The failures file is the one ``generate_opcheck_tests`` reads and writes
(``optests.generate_tests.FailuresDict``): :func:`failures_text` writes it byte for byte as
torch does. :func:`unique_overload` picks the one overload of a packet, as torch's opcheck does.
"""

from __future__ import annotations

import contextlib
from typing import Any, cast

from . import Seam

SEAM = Seam(
    wraps=(
        "torch.testing._internal.optests (autograd_registration_check, set_autograd_fallback_mode, safe_aot_autograd_check, "
        "resolve_unique_overload_or_throw, FailuresDict._save), torch._subclasses.schema_check_mode.SchemaCheckMode, "
        "torch._subclasses.fake_utils (outputs_alias_inputs, outputs_are_inputs, output_alias_each_other), "
        "torch._prims_common.check_significant_strides"
    ),
    features=("opcheck",),
)


#: What is used of ``torch/testing/_internal/optests``: per file, each definition and the
#: parameters it must start with. Importing those modules costs seconds (they pull in
#: torch's test utilities), so the probe reads their source instead.
_OPTESTS = {
    "autograd_registration.py": {
        "autograd_registration_check": ["op", "args", "kwargs"],
        "set_autograd_fallback_mode": ["mode"],
    },
    "generate_tests.py": {
        "safe_aot_autograd_check": ["op", "args", "kwargs", "dynamic"],
        "resolve_unique_overload_or_throw": ["op"],
        "FailuresDict.__init__": ["self", "path", "data"],
        "FailuresDict._save": ["self", "to_str"],
    },
}


def probe() -> None:
    import torch
    from torch._subclasses import fake_utils
    from torch._subclasses.schema_check_mode import SchemaCheckMode  # noqa: F401

    for filename, wanted in _OPTESTS.items():
        found = _definitions(filename)
        for name, parameters in wanted.items():
            if name not in found:
                raise AttributeError(f"torch.testing._internal.optests.{filename.removesuffix('.py')}.{name} is gone")
            if found[name][: len(parameters)] != parameters:
                raise AttributeError(f"optests {name} takes {found[name]}, expected {parameters}")
    for name in ("outputs_alias_inputs", "outputs_are_inputs", "output_alias_each_other"):
        if not callable(getattr(fake_utils, name, None)):
            raise AttributeError(f"torch._subclasses.fake_utils.{name} is gone")
    same, _ = check_significant_strides_of(torch.empty(2, 3), torch.empty(2, 3))
    if not same:
        raise AttributeError("check_significant_strides no longer finds two contiguous tensors alike")


def _definitions(filename: str) -> dict[str, list[str]]:
    """The functions and methods defined in one optests file, with their parameter names."""
    import ast
    import os

    import torch

    path = os.path.join(os.path.dirname(torch.__file__), "testing", "_internal", "optests", filename)
    with open(path, encoding="utf-8") as file:
        tree = ast.parse(file.read())

    def parameters(node: ast.FunctionDef) -> list[str]:
        arguments = node.args
        return [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]

    found: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = parameters(node)
        elif isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef):
                    found[f"{node.name}.{member.name}"] = parameters(member)
    return found


def schema_check_mode() -> contextlib.AbstractContextManager[Any]:
    """``SchemaCheckMode``: raises a RuntimeError when an output aliases an input undeclared."""
    from torch._subclasses.schema_check_mode import SchemaCheckMode

    return SchemaCheckMode()


def autograd_registration_check(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """torch's check that autograd is registered to the Autograd key (raises AssertionError)."""
    from torch.testing._internal.optests.autograd_registration import autograd_registration_check as check

    check(op, args, kwargs)


def autograd_fallback_warns() -> contextlib.AbstractContextManager[Any]:
    """Within the block, backprop through an op without an autograd kernel warns (instead of whatever is set)."""
    from torch.testing._internal.optests.autograd_registration import set_autograd_fallback_mode

    return set_autograd_fallback_mode("warn")


def aot_autograd_check(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, dynamic: bool) -> None:
    """Outputs and gradients under AOTAutograd (static or symbolic shapes) against eager; raises on a mismatch."""
    from torch.testing._internal.optests.generate_tests import safe_aot_autograd_check

    safe_aot_autograd_check(op, args, kwargs, dynamic=dynamic)


def unique_overload(packet: Any) -> Any:
    """The one overload of ``packet`` (raises if it has several), as ``torch.library.opcheck`` resolves it."""
    from torch.testing._internal.optests.generate_tests import resolve_unique_overload_or_throw

    return resolve_unique_overload_or_throw(packet)


def failures_text(path: str, data: dict[str, dict[str, dict[str, str]]]) -> str:
    """The failures file as ``FailuresDict`` writes it (so ``generate_opcheck_tests`` accepts it unchanged)."""
    from torch.testing._internal.optests.generate_tests import FailuresDict

    return cast(str, FailuresDict(str(path), data)._save(to_str=True))  # (a str with to_str)


def outputs_alias_inputs(outputs: Any, inputs: Any) -> bool:
    from torch._subclasses import fake_utils

    return bool(fake_utils.outputs_alias_inputs(outputs, inputs))


def outputs_are_inputs(outputs: Any, inputs: Any) -> bool:
    from torch._subclasses import fake_utils

    return bool(fake_utils.outputs_are_inputs(outputs, inputs))


def outputs_alias_each_other(outputs: Any) -> bool:
    from torch._subclasses import fake_utils

    return bool(fake_utils.output_alias_each_other(outputs))


def check_significant_strides_of(real: Any, fake: Any) -> tuple[bool, int | None]:
    """Do the strides agree where they matter (size-0/1 dims aside), as ``CrossRefFakeMode`` compares them?"""
    from torch._prims_common import check_significant_strides

    return check_significant_strides(real, fake, only_cuda=False, allow_rhs_unbacked=True)
