"""torch's ``replay_record_enabled`` switch, made to work: the PT2 FAQ's advice, once pt2kit is installed.

``torch._dynamo.config.replay_record_enabled = True`` is what the PT2 FAQ tells users to
set to get a record of the frame that failed; in torch 2.13 it records nothing useful. With pt2kit installed, the autoload hook (:mod:`minifier.autoload`, armed
when ``torch.compile`` first resolves a backend) calls :func:`arm`, which only watches
the switch (a hook on ``torch._dynamo.config`` writes, see
:func:`pt2kit.seams.config.when_set`). Until the switch is turned on nothing else is
installed and the program runs exactly as it would without pt2kit. Once it is on,
:func:`start` puts a switch-mode :class:`~replay.recorder.Recorder` at dynamo's frame
seat: failing frames are recorded into ``$TORCHDYNAMO_REPRO_DIR`` (default
``./torch_compile_debug``) while the switch stays on, and torch's own recorder stays out
of the way.
"""

from __future__ import annotations

import logging
import threading

_state = {"armed": False, "started": False}
_lock = threading.Lock()


def arm() -> None:
    """Make torch's switch record through pt2kit (see the module docstring); once per process.

    Never raises: a broken pt2kit, or a torch it does not know, leaves the switch to torch.
    """
    with _lock:
        if _state["armed"]:
            return
        _state["armed"] = True
    try:
        import torch._dynamo.config as dynamo_config

        from pt2kit.seams import config

        if dynamo_config.replay_record_enabled:  # set already, or TORCH_COMPILE_REPLAY_RECORD=1
            start()
        else:
            config.when_set("torch._dynamo.config", "replay_record_enabled", start)
    except Exception:  # noqa: BLE001
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
    # called from the except clause above: exc_info is that exception
    logging.getLogger(__name__).debug("pt2kit: torch's replay_record_enabled switch stays torch's", exc_info=True)
