"""Reduction: shrink a failing graph while it keeps failing the same way.

- ``candidate``: the canonical form of a reduced graph (:class:`Candidate`);
- ``engine``: builds a candidate's graph, and the one cached ``consider()``;
- ``passes``: short functions that propose smaller candidates to it;
- ``divergence``: a wrong answer seen in only some outputs, narrowed to what those need;
- ``splits``: the best cut in thirds, the third that fails alone kept (the passes that start a reduction);
- ``finish``: a candidate's finished form (random inputs, small sizes, no config), asked early where it pays;
- ``scans``: delta debugging's scans over chunks, their next questions asked ahead (``--jobs``);
- ``bodies``: the pass and the edits that reduce higher-order ops' bodies;
- ``queries``: how a candidate is asked: an isolated query through the failing stage;
- ``checkpoint``: an interrupted minification resumes where it stopped.

:mod:`minifier.minification` drives a reduction: it picks the graph, runs the
engine over the passes, and writes ``repro.py``.
"""
