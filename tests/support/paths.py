"""Where things are: the repository, its tests, its examples (every test and helper reads these, never ``__file__``)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
EXAMPLES = REPO / "examples"
#: What a test program imports as a user's program would its own modules: the planted backends
#: (``import planted``), the fuzzer's and replay's programs. A directory on ``sys.path`` (conftest.py
#: puts it there; a program the tests write inserts it first), not a package: pt2kit copies a user's
#: single-file module beside a repro, so a repro of a test program runs anywhere.
USER_MODULES = TESTS / "support" / "user_modules"
#: tests/ mirrors pt2kit's packages: tests/minifier/ tests minifier/, tests/pt2kit/ the floor, and so
#: on (select one with its path: ``pytest tests/validation -m "not e2e"``).
PACKAGE_DIRECTORIES = ("pt2kit", "minifier", "replay", "validation", "explain", "opcheck")
