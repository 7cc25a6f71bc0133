"""Stage bisection: which graph breaks, at which stage, and below the stage.

- ``bisection``: puts the steps together (``bisect_script``, ``bisect_case``);
- ``steps``: the program once under capture, then its graphs through their stages;
- ``early``: the stages of the graphs saved so far, asked while the program still runs;
- ``implied``: stages a higher stage vouches for, asked once the repro is ready;
- ``culprit``: which failing graph is the program's failure, and pinning it down;
- ``untraceable``: dynamo graphs dynamo cannot trace again, inlined or handed to the backend directly;
- ``plainly``: the program run plainly, when no graph shows its failure (dynamo alone, or no capture);
- ``report``: a :class:`Row` per graph, and the :class:`BisectReport`;
- ``choice``: which graph a run minifies, at the boundary ``--after`` asks for;
- ``subsystem``: below the stage, the subsystem that breaks and a workaround;
- ``probes``: the bisector's questions about one graph, each a query, the first asked while the repro runs elsewhere;
- ``program_check``: the program's run with that workaround, in the background by default.
"""
