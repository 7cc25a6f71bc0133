"""torch's ``replay_record_enabled`` switch, made to work: the PT2 FAQ's advice, once pt2kit is installed.

``torch._dynamo.config.replay_record_enabled = True`` is what the PT2 FAQ tells users to
set to get a record of the frame that failed; in torch 2.13 it records nothing useful
(issue 13). With pt2kit installed, the autoload ``.pth`` line puts a finder on
``sys.meta_path`` at interpreter start-up that waits for ``torch._dynamo.convert_frame``
to be imported (:func:`install` does the same from Python); then :func:`arm` puts a switch-mode :class:`~replay.recorder.Recorder` at dynamo's frame
seat. From then on, every frame compile checks the switch (one attribute read; a cache
hit never gets there): off, nothing else happens and the program runs exactly as it
would; on, failing frames are recorded into ``$TORCHDYNAMO_REPRO_DIR`` (default
``./torch_compile_debug``) and torch's own recorder stays out of the way.

This module is imported only once dynamo is: the start-up cost is the ``.pth`` line's finder.
"""

from __future__ import annotations

import sys
from _thread import allocate_lock

TYPE_CHECKING = False  # typing costs milliseconds at start-up
if TYPE_CHECKING:
    from typing import Any

ARM_AFTER = "torch._dynamo.convert_frame"
_state = {"installed": False, "armed": False}
_lock = allocate_lock()


def spec_then_arm(name: str) -> Any:
    """The import spec of ``name`` (dynamo's frame compiler), made to call :func:`arm` once it is loaded."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return spec
    exec_module = spec.loader.exec_module

    def exec_then_arm(module: Any) -> None:
        exec_module(module)
        arm()

    spec.loader.exec_module = exec_then_arm  # type: ignore[method-assign]
    return spec


class _ArmAfterImport:
    """A meta-path finder that arms the switch right after dynamo's frame compiler is imported.

    The autoload ``.pth`` line installs an equivalent finder of its own, so that no pt2kit
    module is imported at start-up (pytest warns about plugin-distribution modules
    imported before it can rewrite them); it calls :func:`spec_then_arm`.
    """

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != ARM_AFTER:
            return None
        sys.meta_path.remove(self)
        return spec_then_arm(name)


def install() -> None:
    """Arm the switch as soon as torch's dynamo is imported (now, if it already is). Idempotent."""
    with _lock:
        if _state["installed"]:
            return
        _state["installed"] = True
    if ARM_AFTER in sys.modules:
        arm()
    else:
        sys.meta_path.insert(0, _ArmAfterImport())


def arm() -> None:
    """Install the switch-mode recorder at dynamo's frame seat (see the module docstring)."""
    with _lock:
        if _state["armed"]:
            return
        _state["armed"] = True
    try:
        from .recorder import Recorder

        Recorder(None, switch=True).start()
    except Exception:  # noqa: BLE001 - a broken pt2kit (or a torch it does not know) must never break the program
        import logging

        logging.getLogger(__name__).debug("pt2kit: torch's replay_record_enabled switch stays torch's", exc_info=True)
