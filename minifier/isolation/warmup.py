"""Warming the zygote, so that every query's child starts with torch's compile path loaded.

The first compile in a process pays for lazy imports and one-time set-up of dynamo,
AOTAutograd and Inductor: about two seconds that every forked child would pay again.
:func:`warm_up` pays it once, in the zygote, by compiling one small training step
through the stages the queries will use. (The caller names the modules its queries
pickle functions of: :meth:`minifier.isolation.worker.Worker.warm_up`'s ``preload``.)
``level`` says how far: ``"eager"`` warms dynamo and AOTAutograd (a run whose final
backend is not Inductor never needs more), ``"inductor"`` adds Inductor's C++ path.

It runs single-threaded, in a process that then forks: see :mod:`minifier.isolation.zygote`.
On a build with an accelerator runtime (the CUDA build a plain ``pip install torch``
gives, GPU or not), the autograd engine starts a thread per device (``pt_autograd_N``)
at its first use after a compile (AOTAutograd's own trace of the joint graph calls it),
and a forked child can then never use autograd ("Unable to handle autograd's threading
in combination with fork"). There the step is compiled as inference (no input requires
grad): its joint graph and backward compile in the query that needs them, and the
zygote stays fork-safe (:func:`autograd_is_fork_safe`).
"""

from __future__ import annotations

import time

LEVELS = ("eager", "inductor")
_warmed: set[str] = set()


def warm_up(level: str) -> tuple[float, str | None]:
    """Compile a small step through the stages up to ``level``; returns (seconds, error or None)."""
    if level not in LEVELS:
        return 0.0, f"unknown warm-up level {level!r}"
    if level in _warmed:
        return 0.0, None
    start = time.perf_counter()
    try:
        import torch

        backends = ["eager", "aot_eager", "aot_eager_decomp_partition"] + (["inductor"] if level == "inductor" else [])
        training = autograd_is_fork_safe()
        x = torch.randn(4, 4, requires_grad=training)

        def step(t: torch.Tensor) -> torch.Tensor:
            return (torch.relu(t) * t.sin()).sum(dim=-1)

        for backend in backends:
            out = torch.compile(step, backend=backend)(x).sum()
            if training:
                out.backward()
        torch.compiler.reset()
    except Exception as e:  # noqa: BLE001 - a failed warm-up only makes queries slower
        return time.perf_counter() - start, f"{type(e).__name__}: {e}"
    _warmed.update(LEVELS[: LEVELS.index(level) + 1])
    return time.perf_counter() - start, None


def autograd_is_fork_safe() -> bool:
    """Can a process that will fork use autograd? Not where the engine starts device threads.

    The engine sizes its thread pool by the devices of every accelerator runtime
    compiled in (``torch.version.cuda``, ``hip``, ``xpu``), with or without a device.
    """
    import torch

    return not any(getattr(torch.version, runtime, None) for runtime in ("cuda", "hip", "xpu"))
