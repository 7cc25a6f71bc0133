"""replay/: record the frame torch.compile fails on, and replay it alone, under any backend.

Follow one failure through the modules:

1. :mod:`replay.recorder` sits where dynamo compiles each Python frame
   (:mod:`pt2kit.seams.convert_frame`), snapshots it on entry (:mod:`replay.snapshot`)
   and keeps the snapshot of a frame whose tracing, backend compile or compiled run
   fails, or whose first backward breaks off (:mod:`replay.backward`); a failing resume
   function also keeps the whole call of the function it resumes;
2. :mod:`replay.values` and :mod:`replay.state` describe it: arguments, closure, the
   globals its code reads, config, global state, RNG, dynamic-shape state; the code it
   reaches is kept by reference or as source (:mod:`replay.sources`); the program's
   changes to torch (a patched lowering) ride along, put back by :mod:`replay.program`;
3. :mod:`replay.records` writes ``rec-<function>-<hash>/`` (``manifest.json`` +
   ``tensors.pt``) and reads it back safely: nothing is unpickled or executed on load;
4. :mod:`replay.runner` replays it in a fresh process, where :mod:`replay.rebuild`
   turns the record back into a function and its arguments and calls it through
   ``torch.compile``; :mod:`replay.script` writes the same as a torch-only script.

The command line is :mod:`replay.cli` (``python -m replay``); torch's own
``torch._dynamo.config.replay_record_enabled = True`` records too, through
:mod:`replay.autoload`. This package is imported at interpreter start-up by the
autoload hook, so the API below is loaded on first use.

.. code-block:: python

    with replay.recording(out="records") as rec:
        train_step(batch)                      # raises as usual; rec.records lists what was written
    records = replay.record(fn, *args)         # call fn, return the records of what failed
    r = replay.load("records/rec-f-0123abcd")  # read safely: r.manifest, r.failure, r.status
    result = replay.run(r.path, backend="eager")   # result.status: reproduced | passed | different-failure
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: this package is imported at start-up and stays cheap
if TYPE_CHECKING:
    from typing import Any

    from .records import Record, load
    from .recorder import Recorder, recording
    from .recorder import record_call as record
    from .runner import ReplayResult, run

__all__ = ["Record", "Recorder", "ReplayResult", "load", "record", "recording", "replay", "run"]

_LAZY = {
    "Record": ("records", "Record"),
    "load": ("records", "load"),
    "Recorder": ("recorder", "Recorder"),
    "recording": ("recorder", "recording"),
    "record": ("recorder", "record_call"),
    "ReplayResult": ("runner", "ReplayResult"),
    "run": ("runner", "run"),
    "replay": ("runner", "run"),
}


def __getattr__(name: str) -> Any:  # PEP 562: the API is imported on first use
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    raise AttributeError(f"module 'replay' has no attribute {name!r}")
