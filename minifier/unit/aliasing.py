"""Outputs that alias one another otherwise than eager's: a wrong answer no value shows.

A graph's outputs reach the program as they are. Where eager returns two views of one
storage and the compiled graph one tensor twice (Inductor, for a view of the same shape:
pytorch#191449), a later ``resize_`` or ``as_strided_`` of one changes the other; where
eager returns a fresh tensor and the compiled graph a view of an input, a later write into
it changes the input. :func:`~minifier.unit.accuracy.accuracy_divergence` asks
:func:`aliasing_divergence` once every value is right (its ``aliasing``), for the graphs
whose outputs the program sees as they are (:func:`minifier.repro.writer.judges_aliasing`).

Both functions use only torch and carry no annotations: the repro writer copies their
source into the accuracy repros that judge aliasing.
"""


def output_aliasing(values):
    """How each pair of tensor values (i < j) is related: ``one tensor`` (the same object), ``one storage``
    (two tensors viewing one storage) or ``apart``. Copied into repros: torch only."""
    import torch

    def storage(v):
        try:
            s = v.untyped_storage()
            return s.data_ptr() if s.nbytes() else None  # (an empty storage shares nothing)
        except (RuntimeError, NotImplementedError):  # (a tensor subclass or a sparse tensor without one)
            return None

    related = {}
    for i, a in enumerate(values):
        for j in range(i + 1, len(values)):
            b = values[j]
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
                same = storage(a) is not None and storage(a) == storage(b)
                related[(i, j)] = "one tensor" if a is b else "one storage" if same else "apart"
    return related


def aliasing_divergence(eager, compiled, labels=None):
    """Do the compiled values alias one another as eager's do? None when they do, else one line naming the first pair that does not."""
    want, got = output_aliasing(eager), output_aliasing(compiled)
    for (i, j), relation in sorted(want.items()):
        if got.get((i, j), relation) != relation:
            a = labels[i] if labels is not None and i < len(labels) else f"output {i}"
            b = labels[j] if labels is not None and j < len(labels) else f"output {j}"
            return f"{a} and {b} alias differently: {got[(i, j)]} compiled, {relation} eagerly"
    return None
