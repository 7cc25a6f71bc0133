"""Where a failing graph comes from: the user's program under capture, or a repro file.

In the order a ``minify run`` meets them:

- ``program``: the user's program as ``minify`` runs it under capture, a fresh process
  (running a script in this process is the floor's :mod:`pt2kit.script`);
- ``hooks``: the three seats pt2kit takes in ``torch.compile``;
- ``recorder``: the program run with pt2kit armed, every graph it compiles kept;
- ``calls``: a dynamic graph's later calls on new sizes, kept when they fail;
- ``between``: what the program does between a graph's forward and its backward (outputs its loss reads, tensors it writes);
- ``casemaker``: a graph torch hands a backend, made a :class:`~minifier.unit.case.GraphCase`;
- ``context``: what a graph needs around it (config, backend, user modules);
- ``extract``: the user's own definitions a repro carries, as source;
- ``patches``: the program's changes to torch itself;
- ``frames``: where in the user's program a graph or a failure comes from;
- ``blame``: the Inductor kernel the program failed in, and its nodes;
- ``events``: the event log it writes as it goes, one typed record a line;
- ``result``: what a capture saw, read back from its event log;
- ``torch_repro``: cases read from pt2kit's own and torch's repro files.
"""
