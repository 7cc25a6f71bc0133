"""Running what pt2kit wrote as its reader will: a repro with torch alone (every pt2kit package unimportable),
in another directory, on an empty Inductor cache; a program in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pt2kit.script import PT2KIT_PACKAGES

#: Python for ``python -c RUN_REPRO repro.py``: the repro run as ``python repro.py`` would, pt2kit unimportable.
RUN_REPRO = (
    "import os, runpy, sys\n"
    f"for name in {PT2KIT_PACKAGES!r}:\n"
    "    sys.modules[name] = None  # importing pt2kit from a repro fails\n"
    "sys.argv = sys.argv[1:]\n"
    "sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))  # as `python repro.py` does\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def run_repro_without_pt2kit(path):
    """Run a repro.py the way a compiler engineer would, with pt2kit unimportable (:data:`RUN_REPRO`)."""
    return subprocess.run(
        [sys.executable, "-c", RUN_REPRO, str(path)], capture_output=True, text=True, cwd=path.parent, timeout=300
    )


def user_env(**extra: str) -> dict[str, str]:
    """The environment a user runs in: no repro settings or pt2kit switches of the test run, the hook armed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHDYNAMO_REPRO", "PT2KIT_"))}
    return {**env, "PT2KIT_AUTOLOAD": "1", **extra}


def torch_alone(repro: Path, where: Path) -> subprocess.CompletedProcess[str]:
    """The repro copied to another directory and run there with torch alone, on an empty Inductor cache."""
    where.mkdir(parents=True)
    for file in repro.parent.iterdir():
        if file.is_file():
            (where / file.name).write_bytes(file.read_bytes())
    blocker = (
        "import runpy, sys\n"
        f"for name in {PT2KIT_PACKAGES!r}:\n"
        "    sys.modules[name] = None\n"
        "sys.path.insert(0, '.')  # (as `python repro.py` puts its own directory first)\n"
        "runpy.run_path('repro.py', run_name='__main__')\n"
    )
    env = {**user_env(), "PT2KIT_AUTOLOAD": "0", "TORCHINDUCTOR_CACHE_DIR": str(where / "inductor-cache")}
    return subprocess.run(
        [sys.executable, "-P", "-c", blocker], capture_output=True, text=True, cwd=where, env=env, timeout=600
    )


def run_program(script: Path, code: str = "") -> subprocess.CompletedProcess[str]:
    """The program in a fresh process on an empty Inductor cache, ``code`` run first (as a user pastes it)."""
    runner = f"import runpy, sys\nexec({code!r}, {{}})\nrunpy.run_path({str(script)!r}, run_name='__main__')\n"
    with tempfile.TemporaryDirectory() as cache:
        env = {"PATH": "/usr/bin:/bin", "TORCHINDUCTOR_CACHE_DIR": cache, "PT2KIT_AUTOLOAD": "0", "HOME": cache}
        return subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True, cwd=script.parent, env=env, timeout=600)
