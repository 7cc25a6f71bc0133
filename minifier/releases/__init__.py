"""Fixed in which torch? A finished repro under other torch releases (``--torch-versions``, ``minify versions``).

- ``environments``: a SPEC (a version or a path) made into a usable Python environment:
  an existing one probed, or a version installed once into pt2kit's cache;
- ``checks``: the repro run under each release, the :class:`~minifier.releases.checks.Releases`
  record (``report.json``'s ``versions``, ``fixed_in``, ``regressed_in``), and installs
  begun in the background at the start of a run;
- ``command``: ``minify versions`` and its table.
"""
