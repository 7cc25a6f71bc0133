"""The unit every step shares: one failing graph, and what "the same failure" means.

- ``case``: :class:`GraphCase`, a graph with its inputs, context and stages;
- ``graphio``: a graph as plain literals, read back exactly (no re-tracing);
- ``signature``: when two failures are the same failure;
- ``accuracy``: wrong answers, judged against eager and an fp64 eager reference;
- ``devices``: a case moved to another device (does a GPU bug show on the CPU too?);
- ``runtime``: the torch-only helpers every repro carries a copy of (the case
  makes its random inputs with them, so a repro makes the same ones).

Nothing here runs a compile: this folder imports only :mod:`minifier.seams`.
"""
