"""Seam: ``torch._dynamo.utils``, dynamo's process-wide statistics and its tensor copy.

- ``counters`` (``counters["stats"]["unique_graphs"]``...) and ``guard_failures`` (per code
  object, the text of the first failing guard of each cache entry a call missed -- what
  ``TORCH_LOGS=recompiles`` prints) are module globals that every compile appends to.
  explain/ reads what torch itself recorded for one compile (:func:`guard_failures_since`)
  and puts both back after an isolated analysis (:func:`statistics_restored`), so a user
  who reads them sees only their own compiles.
- ``clone_input`` copies a tensor with its exact strides and storage offset (what dynamo
  does to example inputs); opcheck's private copies of recorded arguments are made with it.
"""

from __future__ import annotations

import collections
import contextlib
import types
from collections.abc import Iterator
from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch._dynamo.utils (counters, guard_failures, clone_input)",
    features=("explain", "RecompileProfiler", "opcheck"),
)


def probe() -> None:
    import torch
    from torch._dynamo import utils

    if not isinstance(utils.counters, collections.defaultdict) or not isinstance(
        utils.counters["stats"], collections.Counter
    ):
        raise TypeError("torch._dynamo.utils.counters is no longer a defaultdict of Counters")
    if not isinstance(utils.guard_failures, collections.defaultdict):
        raise TypeError("torch._dynamo.utils.guard_failures is no longer a defaultdict")
    source = torch.empty_strided((2, 3), (1, 2))
    copy = clone_input(source)
    if copy.stride() != source.stride() or copy.data_ptr() == source.data_ptr():
        raise AttributeError("clone_input no longer copies with the same strides")


def guard_failure_count(code: types.CodeType) -> int:
    """How many first-failure texts torch has recorded for ``code`` so far."""
    from torch._dynamo.utils import guard_failures

    return len(guard_failures.get(code, ()))


def guard_failures_since(code: types.CodeType, count: int) -> list[str]:
    """The first-failure texts torch recorded for ``code`` after the first ``count``."""
    from torch._dynamo.utils import guard_failures

    return list(guard_failures.get(code, [])[count:])


@contextlib.contextmanager
def statistics_restored() -> Iterator[None]:
    """Whatever compiles in the block, ``counters`` and ``guard_failures`` read as before it afterwards."""
    from torch._dynamo import utils

    counters = {category: collections.Counter(values) for category, values in utils.counters.items()}
    failures = {code: len(reasons) for code, reasons in utils.guard_failures.items()}
    try:
        yield
    finally:
        utils.counters.clear()
        utils.counters.update({category: collections.Counter(values) for category, values in counters.items()})
        for code in list(utils.guard_failures):
            if code in failures:
                del utils.guard_failures[code][failures[code] :]
            else:
                del utils.guard_failures[code]


def clone_input(tensor: Any) -> Any:
    """A copy of ``tensor`` with the same sizes, strides and storage offset (dynamo's ``clone_input``)."""
    from torch._dynamo.utils import clone_input as torch_clone_input

    return torch_clone_input(tensor)
