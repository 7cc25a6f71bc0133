"""``python -m minifier`` is the ``minify`` command."""

from .cli import entry_point

entry_point()
