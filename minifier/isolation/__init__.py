"""Isolated queries: every question about a graph runs in a child process.

- ``zygote``: pt2kit's own warm process, which forks one child per query;
- ``warmup``: what the zygote compiles once, so that children start warm;
- ``worker``: :class:`Worker`, the controller's side: start, wait, kill, results;
- ``executor``: the interface a session drives (``Worker`` is one);
- ``jobs``: how many queries run side by side (``--jobs``, the cores, the free memory);
- ``inprocess``: an executor that answers in this very process, for tests of decisions;
- ``session``: one pt2kit run: its directory, its executor and query count, made of
- ``progress``: the live line on stderr (plain lines when it is not a terminal);
- ``timeline``: where the run's time went, step by step;
- ``programs``: the user's whole program, run as a fresh process, waited for, killed.

A crash, hang or abort in a query ends its child, never the caller.
"""
