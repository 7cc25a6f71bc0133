"""The page kit: self-contained HTML pages that every tool's ``report.html`` is built from.

- :mod:`.document`: the escaped-by-construction building blocks and the page shell;
- :mod:`.charts`: inline SVG charts (the timeline).

``minifier.pages``, ``explain.page`` and ``validation.page`` draw their pages with them.
"""
