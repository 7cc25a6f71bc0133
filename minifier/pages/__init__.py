"""pt2kit's reports as self-contained HTML pages (``report.html``, ``--html FILE``).

- :mod:`.document`: the escaped-by-construction building blocks and the page shell;
- :mod:`.charts`: inline SVG charts (the timeline);
- :mod:`.minify_page`: ``minify run`` / ``minify bisect``'s ``report.html``, from the very
  ``report.json`` data beside it and the repro files of the run directory;
- :mod:`.issue`: ``issue.md``, the same run as a bug report for PyTorch's tracker.

``explain`` and ``validation`` build their pages from the same blocks
(:mod:`explain.page`, :mod:`validation.page`).
"""
