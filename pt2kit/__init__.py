"""pt2kit's floor: what the five tools (``minifier``, ``replay``, ``validation``, ``explain``,
``opcheck``) stand on, and what none of them owns.

- :mod:`pt2kit.seams`: every private torch name pt2kit touches, one module per hook point,
  each with a probe (``minify doctor``);
- :mod:`pt2kit.errors`: the errors a user sees, each one line and one exit code
  (:data:`~pt2kit.errors.EXIT_CODES`, one table for every tool);
- :mod:`pt2kit.signature`: when two failures are the same failure (:class:`~pt2kit.signature.Kind`: of what kind);
- :mod:`pt2kit.words`: closed word sets as Enums whose members are their strings (``Kind``, ``Stage``, ``Boundary``);
- :mod:`pt2kit.script`: running a user's script as ``python SCRIPT ARGS`` would;
- :mod:`pt2kit.processes`: the processes pt2kit starts, their environment, and killing them;
- :mod:`pt2kit.import_hooks`: running code when torch imports a module, without importing it first;
- :mod:`pt2kit.pages`: the page kit every tool's ``report.html`` is built from.

The floor imports no tool: ``tests/test_house.py`` holds every tool to importing only the floor
and the other tools' public faces (their packages' ``__init__``).
"""
