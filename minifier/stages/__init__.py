"""Running one graph through one stage, in an isolated query, and what that takes.

- ``run``: one case through one stage (:func:`run_case`; :func:`ask` asks it from the
  controller), and lowering a dynamo graph to its aot graphs;
- ``distributed``: a torchrun job's ranks, and the fake process group a query joins;
- ``profile``: each node's value in one eager run of the original graph;
- ``flaky``: how often a failure shows, and questions asked often enough to see it;
- ``inline``: higher-order ops inlined, the flatter graph the reducer can start from;
- ``elsewhere``: a written repro run as its reader will (another directory, torch
  alone, an empty Inductor cache).
"""
