"""``python -m minifier`` is the ``minify`` command."""
from .cli import main

main(prog_name="minify")
