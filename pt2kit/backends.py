"""A backend named on a command line or in a record, looked up as ``torch.compile`` would.

``inductor``, ``aot_eager`` or any name registered with ``register_backend``, or a
``module:function`` that pt2kit imports. Every tool that takes ``--backend`` resolves
it here, so they accept the same names and say the same thing about an unknown one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .errors import UnknownBackend
from .seams import backend_registry


def resolve_backend(name: str) -> Callable[..., Any]:
    """Look up a backend by registered name or ``module:function``; :class:`UnknownBackend` if neither."""
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise UnknownBackend(f"unknown backend {name!r}: {e}") from None
    try:
        return backend_registry.lookup(name)
    except Exception:  # noqa: BLE001 - torch raises InvalidBackend (a dynamo exception)
        raise UnknownBackend(
            f"unknown backend {name!r}; registered backends: {', '.join(backend_registry.names())}"
        ) from None
