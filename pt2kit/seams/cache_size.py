"""Seam: ``torch._dynamo.cache_size``, dynamo's rules for "is this a recompile?" and "may it still compile?".

At a cache miss, ``_compile`` receives a ``CacheSizeRelevantForFrame`` (how many cache
entries the code object has, in this region and in all of them) and asks two questions
of it before tracing: ``is_recompilation`` (more than one entry for the same ID-matched
objects: a recompile, not a first compile of another module instance) and
``exceeds_recompile_limit`` (``recompile_limit`` or ``accumulated_recompile_limit``
reached: the compile is refused and the frame runs eagerly). explain/ asks the same two
questions with the same arguments (:mod:`pt2kit.seams.convert_frame` hands them over on
its :class:`~pt2kit.seams.convert_frame.FrameEntry`), so its answers are dynamo's.
"""

from __future__ import annotations

from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch._dynamo.cache_size (is_recompilation, exceeds_recompile_limit, CacheSizeRelevantForFrame)",
    features=("explain", "RecompileProfiler"),
)


def probe() -> None:
    import inspect

    from torch._dynamo import cache_size

    if list(inspect.signature(cache_size.exceeds_recompile_limit).parameters) != ["cache_size", "compile_id"]:
        raise AttributeError("exceeds_recompile_limit no longer takes (cache_size, compile_id)")
    if list(inspect.signature(cache_size.is_recompilation).parameters) != ["cache_size"]:
        raise AttributeError("is_recompilation no longer takes (cache_size)")
    empty = zero()
    if is_recompile(empty):
        raise AttributeError("a code object without cache entries counts as a recompile")


def zero() -> Any:
    """A frame's cache size with no entries (torch 2.13 added a third count: entries of all regions)."""
    import dataclasses

    from torch._dynamo.cache_size import CacheSizeRelevantForFrame

    return CacheSizeRelevantForFrame(*(0 for _ in dataclasses.fields(CacheSizeRelevantForFrame)))


def is_recompile(cache_size: Any) -> bool:
    """dynamo's own answer: is the compile about to start a recompile?"""
    from torch._dynamo.cache_size import is_recompilation

    return bool(is_recompilation(cache_size))


def limit_reached(cache_size: Any, compile_id: Any) -> tuple[str, int] | None:
    """The recompile limit this compile hits, as ``(config key, its value now)``, or None.

    ``torch.compile(..., recompile_limit=N)`` patches the config around this very compile,
    so the value read here is the limit that applies to it.
    """
    import torch._dynamo.config as dynamo_config
    from torch._dynamo.cache_size import exceeds_recompile_limit

    exceeded, limit_type = exceeds_recompile_limit(cache_size, compile_id)
    return (limit_type, int(getattr(dynamo_config, limit_type))) if exceeded else None
