"""Shared test setup.

Every test process (and every worker pt2kit forks) uses one Inductor cache for the
whole run, so each distinct kernel is compiled once per run. Inductor compiles in
the calling thread: pt2kit forks warm workers, and a compile thread pool in the
parent would deadlock them.
"""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(REPO / ".cache" / "inductor"))
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

pytest_plugins = ["pytester"]
