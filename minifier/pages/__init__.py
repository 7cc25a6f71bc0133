"""pt2kit's reports as self-contained HTML pages (``report.html``, ``--html FILE``).

Drawn with the floor's page kit (:mod:`pt2kit.pages`: the escaped-by-construction blocks,
the page shell, inline SVG charts):

- :mod:`.minify_page`: ``minify run`` / ``minify bisect``'s ``report.html``, from the very
  ``report.json`` data beside it and the repro files of the run directory;
- :mod:`.issue`: ``issue.md``, the same run as a bug report for PyTorch's tracker.

``explain`` and ``validation`` build their pages from the same blocks
(:mod:`explain.page`, :mod:`validation.page`).
"""
