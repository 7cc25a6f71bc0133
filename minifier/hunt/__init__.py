"""The hunt: torch's bugs found by generated programs, each one minified (``minify hunt``).

Csmith and C-Reduce for ``torch.compile``: programs nobody wrote, with bugs nobody
planted, compared eager against the real default compile, and every disagreement that
is torch's turned into a ``repro.py`` by the minifier a user runs.

- ``vocabulary``: the typed ops a program is made of, checked by eager as it is built;
- ``programs``: a :class:`~minifier.hunt.programs.Program`, the Hypothesis strategy
  that draws one, and the script it is written as;
- ``judge``: one program judged in an isolated child: eager, float64 and compiled;
- ``triage``: the written rules a disagreement must survive to be torch's bug;
- ``hunt``: the loop: judge, triage, minify, deduplicate, write findings;
- ``command``: ``minify hunt`` and its summary.
"""
