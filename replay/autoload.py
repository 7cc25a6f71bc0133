"""torch's ``replay_record_enabled`` switch, made to work: the PT2 FAQ's advice, once pt2kit is installed.

``torch._dynamo.config.replay_record_enabled = True`` is what the PT2 FAQ tells users to
set to get a record of the frame that failed; in torch 2.13 it records nothing useful
(issue 13). With pt2kit installed, the autoload ``.pth`` line puts a finder on
``sys.meta_path`` at interpreter start-up that waits for ``torch._dynamo.convert_frame``
to be imported (:func:`install` does the same from Python); then :func:`arm` watches the
switch (a hook on ``torch._dynamo.config`` writes, see
:func:`minifier.seams.config_module.when_set`). Until the switch is turned on nothing
else is installed and the program runs exactly as it would without pt2kit. Once it is on,
:func:`start` puts a switch-mode :class:`~replay.recorder.Recorder` at dynamo's frame
seat: failing frames are recorded into ``$TORCHDYNAMO_REPRO_DIR`` (default
``./torch_compile_debug``) while the switch stays on, and torch's own recorder stays out
of the way.

This module is imported only once dynamo is: the start-up cost is the ``.pth`` line's finder.
"""

from __future__ import annotations

import sys
from _thread import allocate_lock

TYPE_CHECKING = False  # typing costs milliseconds at start-up
if TYPE_CHECKING:
    from typing import Any

ARM_AFTER = "torch._dynamo.convert_frame"
_state = {"installed": False, "armed": False, "started": False}
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
        try:
            return spec_then_arm(name)
        except Exception:  # noqa: BLE001 - the import goes on without pt2kit
            return None


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
    """Make torch's switch record through pt2kit (see the module docstring); once per process.

    Nothing is installed in the compile path until the switch is on: a program that never
    turns it on compiles exactly as without pt2kit (its tracebacks show no frame of ours).
    """
    with _lock:
        if _state["armed"]:
            return
        _state["armed"] = True
    try:
        import torch._dynamo.config as dynamo_config

        from minifier.seams import config_module

        if dynamo_config.replay_record_enabled:  # TORCH_COMPILE_REPLAY_RECORD=1
            start()
        else:
            config_module.when_set("torch._dynamo.config", "replay_record_enabled", start)
    except Exception:  # noqa: BLE001 - a broken pt2kit (or a torch it does not know) must never break the program
        _stay_torchs()


def start() -> None:
    """The switch was turned on: put a switch-mode recorder at dynamo's frame seat (once)."""
    with _lock:
        if _state["started"]:
            return
        _state["started"] = True
    try:
        from .recorder import Recorder

        Recorder(None, switch=True).start()
    except Exception:  # noqa: BLE001
        _stay_torchs()


def _stay_torchs() -> None:
    import logging

    logging.getLogger(__name__).debug("pt2kit: torch's replay_record_enabled switch stays torch's", exc_info=True)
