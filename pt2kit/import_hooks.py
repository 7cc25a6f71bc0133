"""Running a function right after a module is imported.

pt2kit patches some torch modules without importing them: Inductor takes seconds to
import, and a program that never uses it must not pay for pt2kit's hooks on it;
``torch._dynamo`` must not be imported at interpreter start-up by the autoload hook.
:func:`after_import` puts a ``sys.meta_path`` finder in front that wraps the named
module's loader, runs the callback once the module has executed, and removes itself.

This module is imported at interpreter start-up (by ``minifier.autoload``): it
imports nothing that start-up has not loaded.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any


class _AfterImport:
    """A ``sys.meta_path`` finder that runs ``callback(module)`` once ``name`` has been executed."""

    def __init__(self, name: str, callback: Callable[[ModuleType], Any]) -> None:
        self.name, self.callback = name, callback

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != self.name:
            return None
        import importlib.util

        if self in sys.meta_path:  # (not there when another finder handed the import over)
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module
        callback = self.callback

        def exec_then_call(module: ModuleType) -> None:
            exec_module(module)
            callback(module)

        setattr(spec.loader, "exec_module", exec_then_call)
        return spec


def after_import(name: str, callback: Callable[[ModuleType], Any]) -> None:
    """Call ``callback(module)`` once ``name`` has been imported (at once if it already is)."""
    if name in sys.modules:
        callback(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, callback))
