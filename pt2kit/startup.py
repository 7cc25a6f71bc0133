"""pt2kit's one start-up hook: it arms every tool that sits in a torch seat, when torch gets there.

``pt2kit-autoload.pth`` (installed at the root of site-packages) runs one line at
interpreter start-up: unless ``PT2KIT_AUTOLOAD=0``, it puts a tiny finder on
``sys.meta_path`` and imports nothing. The finder waits for
``torch._dynamo.repro.after_dynamo``, the module ``torch.compile`` imports to wrap
backends, and hands over to :func:`find_spec_armed`; right after that module loads,
:func:`arm` arms each tool in :data:`TOOLS`. A process that never compiles pays for
one name comparison per import. (:func:`install` does the same from Python.)

This module is the one part of :mod:`pt2kit` above the tools (it names them); the rest
of the package is their floor and imports none of them. It is imported at start-up:
it imports only what start-up has loaded anyway.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ARM_AFTER = "torch._dynamo.repro.after_dynamo"
#: Each tool's ``arm()``, in order: ``TORCHDYNAMO_REPRO_AFTER`` in the minifier's hands
#: (:mod:`minifier.autoload`), torch's ``replay_record_enabled`` switch in replay's
#: (:mod:`replay.autoload`). Each arms once per process and leaves torch alone when it cannot.
TOOLS = ("minifier.autoload", "replay.autoload")
_installed = [False]


def arm() -> None:
    """Arm every tool in :data:`TOOLS`; one that fails to import says so in one line, and the others still arm."""
    import importlib

    for tool in TOOLS:
        try:
            importlib.import_module(tool).arm()
        except Exception as e:  # noqa: BLE001 - leave torch alone
            print(f"pt2kit: {tool} not armed ({type(e).__name__}: {e})", file=sys.stderr)


def find_spec_armed(name: str, path: Any = None, target: Any = None) -> Any:
    """The ``.pth`` line's finder hands over here when torch's repro hook module is first imported.

    (The ``.pth`` line imports nothing of pt2kit's at start-up: pytest, for one, warns
    about a plugin distribution's modules imported before it starts.)
    """
    from .import_hooks import _AfterImport

    _installed[0] = True
    return _AfterImport(name, lambda module: arm()).find_spec(name, path, target)


def install() -> None:
    """What the ``.pth`` line does, from Python (a process started with ``PT2KIT_AUTOLOAD=0``). Idempotent."""
    if _installed[0]:
        return
    _installed[0] = True
    from .import_hooks import after_import

    after_import(ARM_AFTER, lambda module: arm())
