"""Seam: ``torch.utils._config_module.ConfigModule``, the store behind every compiler config.

``torch._dynamo.config``, ``torch._inductor.config`` and the others are
``ConfigModule`` objects. Setting a value is public (``config.x = v``); knowing which
values differ from the defaults is not: it takes ``_get_dict(skip_default=True)``
(which also counts values set through environment variables as changes) and each
entry's ``default`` in ``_config``. ``config.patch()`` leaves a key "overridden" with its
default value when it exits, so a value equal to its default is not a change.

Values are read per thread: torch 2.13 keeps overrides in context variables, so a new
thread starts from the defaults. Read them on the thread that compiles.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch.utils._config_module.ConfigModule._get_dict / _config / __setattr__",
    features=("replay record (non-default config)", "replay_record_enabled switch"),
)

#: Every config module that steers what torch.compile does, by import name.
CONFIG_MODULES = (
    "torch._dynamo.config",
    "torch._inductor.config",
    "torch._functorch.config",
    "torch.fx.experimental._config",
    "torch.compiler.config",
)


def probe() -> None:
    import inspect

    from torch.utils._config_module import ConfigModule

    if "config.__setattr__(k, v)" not in inspect.getsource(ConfigModule.patch):
        raise AttributeError("ConfigModule.patch no longer sets values through __setattr__")
    for name in CONFIG_MODULES:
        module = importlib.import_module(name)
        if not callable(getattr(module, "_get_dict", None)) or not isinstance(getattr(module, "_config", None), dict):
            raise AttributeError(f"{name} is no longer a ConfigModule with _get_dict/_config")
        module._get_dict(skip_default=True)
        entry = next(iter(module._config.values()))
        if not hasattr(entry, "default"):
            raise AttributeError(f"{name}._config entries have no default")


def non_default(ignored: frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """``{module: {key: value}}`` for every value that differs from its default.

    Only modules already imported are read (one never imported is all defaults).
    """
    changed: dict[str, dict[str, Any]] = {}
    for name in CONFIG_MODULES:
        module = sys.modules.get(name)
        if module is None:
            continue
        values = module._get_dict(skip_default=True)
        kept = {k: v for k, v in values.items() if k not in ignored and v != module._config[k].default}
        if kept:
            changed[name] = kept
    return changed


def default(module_name: str, key: str) -> Any:
    """The default of one config value."""
    return importlib.import_module(module_name)._config[key].default


def when_set(module_name: str, key: str, callback: Any) -> None:
    """Call ``callback()`` whenever ``key`` of a config module is set to a true value.

    Catches ``config.key = value`` and ``config.patch(key=value)`` (both go through the
    module's ``__setattr__``, which lives on a class of that one module's own), at the cost of
    one Python call per config write; reading config is untouched.
    """
    module = importlib.import_module(module_name)
    cls = type(module)
    original = cls.__setattr__

    def __setattr__(self: Any, name: str, value: object) -> None:
        original(self, name, value)
        if name == key and value:
            callback()

    cls.__setattr__ = __setattr__  # type: ignore[method-assign,assignment]
