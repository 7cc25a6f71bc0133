"""pt2kit's floor: what the five tools (``minifier``, ``replay``, ``validation``, ``explain``,
``opcheck``) stand on, and what none of them owns.

- :mod:`pt2kit.seams`: every private torch name pt2kit touches, one module per hook point,
  each with a probe (``minify doctor``);
- :mod:`pt2kit.errors`: the errors a user sees, each one line and one exit code
  (:data:`~pt2kit.errors.EXIT_CODES`, one table for every tool);
- :mod:`pt2kit.signature`: when two failures are the same failure, and of what ``Kind``;
- :mod:`pt2kit.words`: closed word sets as Enums whose members are their strings;
- :mod:`pt2kit.script`: running a user's script as ``python SCRIPT ARGS`` would;
- :mod:`pt2kit.processes`: the processes pt2kit starts, their environment, and killing them;
- :mod:`pt2kit.backends`: a ``--backend`` looked up as ``torch.compile`` would;
- :mod:`pt2kit.names`: how an op node is named to a user, in every tool's report;
- :mod:`pt2kit.import_hooks`: running code when torch imports a module, without importing it first;
- :mod:`pt2kit.pages`: the page kit every tool's ``report.html`` is built from;
- :mod:`pt2kit.startup`: the one start-up hook, which arms the tools that sit in a torch seat.
- :mod:`pt2kit.opaque`: pt2kit's code run inside the user's program, never traced by dynamo.

The floor imports no tool (:mod:`pt2kit.startup`, the start-up hook, names the tools it arms as
strings), and a tool imports another only through its package's ``__init__``: the import-linter
contracts in ``pyproject.toml``, which ``make lint`` checks.
"""
