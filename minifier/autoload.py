"""``TORCHDYNAMO_REPRO_AFTER`` on any script: pt2kit in charge instead of torch's built-in minifier.

pt2kit's start-up hook (:mod:`pt2kit.startup`) calls :func:`arm` right after
``torch._dynamo.repro.after_dynamo`` loads: the module ``torch.compile`` imports to
wrap backends.

Armed, every backend ``torch.compile`` resolves still gets torch's own debug wrapper,
with one change (:class:`_OneMinifier`): at each compile it reads the user's intent,
torch's way (``TORCHDYNAMO_REPRO_AFTER`` / ``_LEVEL`` in the environment, or
``torch._dynamo.config.repro_after`` / ``repro_level`` set in code, however late).
No intent: torch's wrapper runs exactly as it would without pt2kit. An intent:
torch's minifier stands down for that compile (and for Inductor's lazy backward
compile, :func:`quiet_torch_minifier`), and pt2kit's
:class:`~minifier.on_failure.ReproOnFailure` watches it, at torch's levels.
"""

from __future__ import annotations

import os
import sys

# This module is imported at every interpreter start-up (by the .pth line): it
# imports only what start-up has loaded anyway, and the rest where it is used.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from typing import Any

    from .on_failure import Intent

_state: dict[str, Any] = {"armed": False, "aot_quieted": False}


class _Lock:
    """A lock made on first use (``threading`` is not loaded at start-up)."""

    _lock: threading.Lock | None = None

    def __enter__(self) -> None:
        if _Lock._lock is None:
            import threading

            _Lock._lock = threading.Lock()
        _Lock._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        assert _Lock._lock is not None  # (made by __enter__, which runs first)
        _Lock._lock.release()


_lock = _Lock()


def read_intent() -> Intent | None:
    """The user's repro settings right now, or None when they asked for nothing.

    ``torch._dynamo.config.repro_after`` starts from ``TORCHDYNAMO_REPRO_AFTER`` (read
    when torch is imported) and may be set in code; the variable set later, before
    the compile, counts too. Invalid values leave torch in charge (it reports them).
    """
    from pathlib import Path

    from .on_failure import Intent
    from pt2kit.seams.config import repro_settings

    in_code = repro_settings()
    after = os.environ.get("TORCHDYNAMO_REPRO_AFTER") or in_code["repro_after"]
    if after not in ("dynamo", "aot"):
        return None
    level_text = os.environ.get("TORCHDYNAMO_REPRO_LEVEL")
    try:
        level = int(level_text) if level_text else int(in_code["repro_level"])
    except ValueError:
        return None
    if level not in (1, 2, 3, 4):
        return None
    out = os.environ.get("TORCHDYNAMO_REPRO_DIR") or in_code["debug_dir_root"] or "torch_compile_debug"
    return Intent(after, level, Path(out))


def arm() -> None:
    """Sit in torch's backend seat for the life of the process (see the module docstring)."""
    with _lock:
        if _state["armed"]:
            return
        _state["armed"] = True
    try:
        from pt2kit.seams.after_dynamo import debug_wrapper_class, is_internal

        torch_class = debug_wrapper_class()
    except Exception as e:  # noqa: BLE001 - a torch pt2kit does not know: leave torch alone
        print(f"pt2kit: not armed ({type(e).__name__}: {e}); torch's own minifier stays in charge", file=sys.stderr)
        return

    class _OneMinifier(torch_class):  # type: ignore[misc, valid-type]
        """torch's backend debug wrapper, with pt2kit in charge whenever the user asks for a repro."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if is_internal(self._torchdynamo_orig_backend):
                return  # pt2kit's own compile (learning dynamo's patches): not the user's
            from .on_failure import safe

            if safe(read_intent, None) is not None:
                # here, when torch.compile resolves the backend: learning compiles a no-op
                # on a thread, which would wait forever for dynamo's lock inside a compile
                from .capture.context import learn_dynamo_own_patches
                from .backward_prologue import install

                safe(learn_dynamo_own_patches, None)
                safe(install, None, read_intent)  # (the last door: a failure before any graph reaches this wrapper)

        def __call__(self, gm: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
            if is_internal(self._torchdynamo_orig_backend):  # pt2kit's own compile: no minifier at all
                with quiet_torch_minifier():
                    return super().__call__(gm, example_inputs, **kwargs)
            from .on_failure import ReproOnFailure, safe

            intent = safe(read_intent, None)
            if intent is None:
                return super().__call__(gm, example_inputs, **kwargs)
            if safe(_torch_own_compile, False):  # (a higher-order op run eagerly: torch's graph, not the program's)
                with quiet_torch_minifier():
                    return super().__call__(gm, example_inputs, **kwargs)
            guard = ReproOnFailure(intent)
            with quiet_torch_minifier():
                return guard.compile(self._torchdynamo_orig_backend, self._compiler_name, gm, example_inputs, **kwargs)

    from pt2kit.seams.after_dynamo import replace_debug_wrapper_class

    replace_debug_wrapper_class(_OneMinifier)


def _torch_own_compile() -> bool:
    """Is dynamo compiling a wrapper torch compiles for itself (``torch.cond`` called eagerly)? Never the program's graph."""
    from pt2kit.seams import convert_frame, hop_eager

    return hop_eager.is_torch_own_compile(convert_frame.code_being_compiled())


def quiet_torch_minifier() -> Any:
    """torch's own minifier off for this compile and for Inductor's later (backward) compiles."""
    from .on_failure import safe
    from pt2kit.seams.after_dynamo import torch_minifier_off
    from pt2kit.seams.compile_fx import keep_torch_aot_minifier_off

    with _lock:
        if not _state["aot_quieted"]:
            _state["aot_quieted"] = True
            keep_torch_aot_minifier_off(lambda: safe(read_intent, None) is not None)
    return torch_minifier_off()
