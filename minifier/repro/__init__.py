"""Writing a case as ``repro.py`` (docs/repro-format.md), and reading one back.

- ``writer``: the text of a repro (header, config, ``__main__``);
- ``graph``: its ``class Repro``, in FX's own code;
- ``inputs``: its ``load_data()`` and ``make_inputs(data)``;
- ``run``: its stage call, ``compile_graph`` and ``run``;
- ``files``: repro files and their data on disk, and a case read back from one.

Below everything that runs: a repro is written from a :mod:`minifier.unit` case alone.
"""
