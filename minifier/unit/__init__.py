"""The unit every step shares: one failing graph, its inputs and context, and wrong answers judged.

(What "the same failure" means is the floor's: :mod:`pt2kit.signature`.)

- ``case``: :class:`GraphCase`, a graph with its inputs, context and stages;
- ``copies``: inputs copied as the program had them (strides, shared memory, the storage around a slice);
- ``graphio``: a graph as plain literals, read back exactly (no re-tracing);
- ``check``: :class:`Check`, the question every query asks (stage, failure, accuracy, tries);
- ``accuracy``: wrong answers, judged against eager and an fp64 eager reference;
- ``float64``: that reference's graph, computing in float64, and where none can stand for the program;
- ``aliasing``: outputs that alias one another otherwise than eager's (values all right);
- ``devices``: a case moved to another device (does a GPU bug show on the CPU too?);
- ``runtime``: the torch-only helpers every repro carries a copy of (the case
  makes its random inputs with them, so a repro makes the same ones).

Nothing here runs a compile: this folder imports only :mod:`pt2kit.seams`.
"""
