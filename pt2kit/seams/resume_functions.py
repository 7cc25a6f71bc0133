"""Seam: ``torch._dynamo.resume_execution.ContinueExecutionCache``, dynamo's resume functions.

After a graph break dynamo runs the rest of a function as a new function it generates,
``torch_dynamo_resume_in_<fn>_at_<line>``, whose arguments are the values on the stack
and the live locals at the break. It is compiled as a frame of its own, so it can fail
like any other, but it has no source: it is bytecode derived from the user's function.

Replay rebuilds it the way dynamo built it. ``ContinueExecutionCache.lookup(code,
lineno, init_offset, *key)`` is deterministic in the original code object and a key of
plain values (offsets, argument names, context-manager states...): :func:`origin` finds
the key under which dynamo made a given resume code (always filed under the user's own
function, also for resumes of resumes) and turns it into JSON; :func:`regenerate` asks
the cache to build it again from a rebuilt original function. The bytecode matches when
the original function was rebuilt from the same source, by the same Python.
"""

from __future__ import annotations

import re
import types
from dataclasses import dataclass
from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch._dynamo.resume_execution.ContinueExecutionCache / ReenterWith / TORCH_DYNAMO_RESUME_IN_PREFIX, torch._dynamo.exc.remove_resume_prefix",
    features=("replay of frames that resume after a graph break", "explain"),
)


def probe() -> None:
    import inspect

    from torch._dynamo import resume_execution

    cache = resume_execution.ContinueExecutionCache
    parameters = list(inspect.signature(cache.generate).parameters)
    expected = [
        "code",
        "lineno",
        "init_offset",
        "resume_offset",
        "setup_fn_target_offsets",
        "nstack",
        "argnames",
        "argnames_null",
        "setup_fns",
        "handle_inactive_ctx",
        "stack_ctx_vars",
        "argnames_ctx_vars",
        "null_idxes",
        "nested_code_objs",
        "pop_nested_resume_result",
    ]
    if parameters != expected:
        raise AttributeError(f"ContinueExecutionCache.generate takes {parameters}")
    for name in ("values", "refs"):
        if not isinstance(getattr(cache.cache, name, None), dict):
            raise AttributeError(f"ContinueExecutionCache.cache has no {name} dict")
    if resume_execution.TORCH_DYNAMO_RESUME_IN_PREFIX != "torch_dynamo_resume_in":
        raise AttributeError("the resume-function prefix changed")
    resume = (lambda: None).__code__.replace(co_name="torch_dynamo_resume_in_step_at_12")
    if (user_function(resume), resumed_at(resume), user_function(probe.__code__)) != ("step", 12, "probe"):
        raise AttributeError("resume functions are no longer named torch_dynamo_resume_in_<fn>_at_<line>")


def is_resume_function(code: types.CodeType) -> bool:
    """Is ``code`` a function dynamo generated to resume after a graph break?"""
    from torch._dynamo.resume_execution import TORCH_DYNAMO_RESUME_IN_PREFIX

    return code.co_name.startswith(TORCH_DYNAMO_RESUME_IN_PREFIX)


def user_function_name(code: types.CodeType) -> str:
    """``f`` for ``torch_dynamo_resume_in_f_at_12`` (and ``f`` for ``f``)."""
    match = re.match(r"torch_dynamo_resume_in_(\w+)_at_(\d+)$", code.co_name)
    return match.group(1) if match else code.co_name


def user_function(code: types.CodeType) -> str:
    """The user's function name, also for a resume function (torch's ``remove_resume_prefix``)."""
    from torch._dynamo.exc import remove_resume_prefix

    return remove_resume_prefix(code.co_name) or code.co_name  # (torch 2.11 and 2.12: None for other code)


def resumed_at(code: types.CodeType) -> int | None:
    """For a resume function, the line of the graph break it resumes after; None for other code."""
    match = re.match(r"^torch_dynamo_resume_in_.+_at_(\d+)$", code.co_name)
    return int(match[1]) if match else None


@dataclass(frozen=True)
class ResumePoint:
    """Where a resume function takes over from the function it was made from."""

    code: types.CodeType
    """The function it resumes: the user's own where dynamo filed it there, else the resume function before it."""
    offset: int
    """The instruction of ``code`` it resumes at (the one after the instruction that broke the graph)."""
    stack: int
    """How many values of ``code``'s stack it receives, as its arguments ``___stack0`` (bottom) and up."""


def resume_point(code: types.CodeType) -> ResumePoint | None:
    """Where the resume function ``code`` resumes, or None when dynamo's cache no longer holds it.

    A cache key is ``ContinueExecutionCache.generate``'s parameters after ``init_offset``
    (``probe`` checks them): ``resume_offset``, ``setup_fn_target_offsets``, ``nstack``, ...
    """
    from torch._dynamo.resume_execution import ContinueExecutionCache

    cache = ContinueExecutionCache.cache
    found: ResumePoint | None = None
    for index, entries in list(cache.values.items()):
        for key, value in list(entries.items()):
            parent = cache.refs[index]() if value is code else None
            if parent is not None and (found is None or not is_resume_function(parent)):
                found = ResumePoint(parent, int(key[0]), int(key[2]))
    return found


def _to_json(value: Any) -> Any:
    import torch
    from torch._dynamo.resume_execution import ReenterWith

    if isinstance(value, ReenterWith):
        return {"reenter_with": [value.stack_index, _to_json(value.target_values)]}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, types.CodeType):
        raise ValueError("a resume function of a nested graph break (its key holds code objects)")
    if isinstance(value, (tuple, list)):
        return {"tuple": [_to_json(v) for v in value]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(f"a resume-function key holds a {type(value).__name__}")


def origin(code: types.CodeType) -> tuple[types.CodeType, dict[str, Any]]:
    """The user's function code that ``code`` resumes, and how to build ``code`` from it (JSON).

    Raises ``LookupError`` when dynamo's cache no longer holds it, ``ValueError`` when
    its key cannot be written down.
    """
    from torch._dynamo.resume_execution import ContinueExecutionCache

    cache = ContinueExecutionCache.cache
    found = None
    for index, entries in list(cache.values.items()):
        for key, value in entries.items():
            if value is code:
                parent = cache.refs[index]()
                if parent is None:
                    continue
                if found is None or not is_resume_function(parent):
                    found = (parent, key)
    if found is None or is_resume_function(found[0]):
        raise LookupError(f"dynamo no longer knows how it made {code.co_name}")
    parent, key = found
    return parent, {"lineno": code.co_firstlineno, "key": _to_json(tuple(key))}


def regenerate(original, origin):
    """Build the resume function described by ``origin`` (from :func:`origin`) from ``original``."""
    import torch
    from torch._dynamo.resume_execution import ContinueExecutionCache, ReenterWith

    def value(node):
        if isinstance(node, dict) and "reenter_with" in node:
            index, targets = node["reenter_with"]
            return ReenterWith(index, value(targets))
        if isinstance(node, dict) and "dtype" in node:
            return getattr(torch, node["dtype"])
        if isinstance(node, dict) and "tuple" in node:
            return tuple(value(v) for v in node["tuple"])
        return node

    return ContinueExecutionCache.lookup(original, origin["lineno"], 0, *value(origin["key"]))
