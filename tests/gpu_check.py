"""``make gpu-check``: pt2kit on a machine with a GPU, beside the torch it already has, in one script.

A GPU machine keeps its own torch (a wheel is too large to bring, and the one there is what
its users run), so pt2kit goes on the path beside it, its requirements not installed. Then,
each a ``minify run`` as a user types it, and each repro run alone as its reader will
(torch alone, another directory, an empty Inductor cache):

1. ``minify doctor``: which of pt2kit's features this torch serves;
2. a Triton kernel that does not compile (Inductor's own ``inject_relu_bug_TESTING_ONLY``);
3. a CUDA training step whose backward breaks (``examples/buggy_backends.py``'s ``bw_tanh_bug``);
4. a wrong answer (the same injection, ``"accuracy"``), with ``--accuracy``.

``--dry-run`` runs the same on the CPU: C++ kernels for Triton ones (``cpp.`` for
``triton.``'s injection), the ``cpu`` device for ``cuda``. It is what a machine without a
GPU can check of this script (``tests/minifier/test_entry_points.py`` runs it in make slow).

Every step prints one line, ``ok`` or ``FAIL`` with why; the script exits 1 when one
failed. ``--json FILE`` also writes the steps as JSON; ``--budget S`` stops starting steps
past S seconds (default 480: the 8 minutes a lent GPU machine's one command has).

    python tests/gpu_check.py [--dry-run] [--json FILE] [--budget 480]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: (name, program, minify flags, what the repro's failure must show)
PROGRAMS = {
    "kernel_compile_error": (
        """\
import torch
import torch._inductor.config as config

config.{kernels}.inject_relu_bug_TESTING_ONLY = "compile_error"


def step(x, w):
    return torch.relu(x @ w).sum(dim=1) + 1


x, w = torch.randn(64, 32, device="{device}"), torch.randn(32, 16, device="{device}")
print(torch.compile(step)(x, w))
""",
        [],
        "compil",  # (C++'s CppCompileError, Triton's CompilationError)
    ),
    "training_step_backward": (
        """\
import torch

import buggy_backends  # noqa: F401  registers bw_tanh_bug: its backward compile fails

model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).to("{device}")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
compiled = torch.compile(model, backend="bw_tanh_bug")
x = torch.randn(8, 16, device="{device}")
loss = compiled(x).square().mean()
loss.backward()
optimizer.step()
print(loss.item())
""",
        [],
        "bw_tanh_bug",
    ),
    "wrong_answer": (
        """\
import torch
import torch._inductor.config as config

config.{kernels}.inject_relu_bug_TESTING_ONLY = "accuracy"


def f(x):
    return torch.relu(x * 2).sum(dim=0)


x = torch.randn(128, 8, device="{device}")
torch.testing.assert_close(torch.compile(f)(x), f(x))
""",
        ["--accuracy"],
        "AccuracyError",
    ),
}


@dataclass
class Step:
    name: str
    ok: bool
    seconds: float
    detail: str


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="on the CPU: C++ kernels and the cpu device")
    parser.add_argument("--json", type=Path, default=None, help="also write the steps here")
    parser.add_argument("--budget", type=float, default=480.0, help="start no step past this many seconds")
    options = parser.parse_args(argv)
    start = time.monotonic()
    missing = [m for m in ("click", "rich", "torch", "z3") if not _importable(m)]
    if missing:
        print(f"FAIL: not importable here: {', '.join(missing)} (bring their wheels: docs/seams.md, 'A machine with a GPU')")
        return 1
    device = "cpu" if options.dry_run else "cuda"
    if device == "cuda" and not _has_cuda():
        print("FAIL: no CUDA device here; --dry-run checks this script on the CPU")
        return 1
    work = Path(tempfile.mkdtemp(prefix="pt2kit-gpu-check-"))
    steps = [_doctor(work)]
    print(_line(steps[-1]), flush=True)
    for name, (program, flags, shows) in PROGRAMS.items():
        if time.monotonic() - start > options.budget:
            steps.append(Step(name, False, 0.0, f"not started: past the {options.budget:.0f} s budget"))
        else:
            steps.append(_minify(work, name, program.format(device=device, kernels="cpp" if options.dry_run else "triton"), flags, shows, device))
        print(_line(steps[-1]), flush=True)
    if options.json:
        options.json.write_text(json.dumps({"device": device, "steps": [asdict(s) for s in steps]}, indent=2))
    failed = [s.name for s in steps if not s.ok]
    print(f"gpu-check on {device}: {len(steps) - len(failed)} of {len(steps)} ok in {time.monotonic() - start:.0f} s")
    return 1 if failed else 0


def _importable(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, env=_env()).returncode == 0


def _has_cuda() -> bool:
    code = "import torch; raise SystemExit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, env=_env()).returncode == 0


def _env(**extra: str) -> dict[str, str]:
    """pt2kit importable from this checkout (not installed: the machine's torch stays as it is)."""
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **extra}


def _doctor(work: Path) -> Step:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "minifier", "doctor", "--json"], capture_output=True, text=True, env=_env(), cwd=work, timeout=300)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return Step("doctor", False, time.monotonic() - started, _last_line(done.stderr))
    broken = sorted(name for name, works in (report.get("features") or {}).items() if not works)
    detail = f"torch {report.get('torch')}; " + (f"not working: {', '.join(broken)}" if broken else "every feature works")
    return Step("doctor", True, time.monotonic() - started, detail)


def _minify(work: Path, name: str, program: str, flags: list[str], shows: str, device: str) -> Step:
    """``minify run`` on the program, then its repro alone, as its reader runs it."""
    started = time.monotonic()
    folder = work / name
    folder.mkdir()
    (folder / f"{name}.py").write_text(program)
    shutil.copy(REPO / "examples" / "buggy_backends.py", folder)
    command = [sys.executable, "-m", "minifier", "run", "--json", "--no-subsystem", *flags, "--out", "runs", f"{name}.py"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=_env(PT2KIT_COLLECT_ENV="0"), cwd=folder, timeout=400)
    except subprocess.TimeoutExpired:
        return Step(name, False, time.monotonic() - started, "minify run did not end in 400 s")
    seconds = time.monotonic() - started
    if done.returncode != 0:
        return Step(name, False, seconds, f"minify run: exit {done.returncode}: {_last_line(done.stderr)}")
    report = json.loads(done.stdout)
    repro = Path(report["repro"])
    if device != "cpu" and f"device={device!r}" not in repro.read_text() and device not in repro.read_text():
        return Step(name, False, seconds, f"the repro does not name the {device} device")
    returncode, stderr = _run_alone(repro)
    if returncode in (0, None) or shows.lower() not in stderr.lower():
        return Step(name, False, seconds, f"the repro run alone: exit {returncode}, without {shows!r}: {_last_line(stderr)}")
    detail = (
        f"{report['nodes_before']} -> {report['nodes_after']} nodes ({', '.join(report['ops_after'])}), "
        f"{report['failure']['kind']} at {report['failure']['stage']}, {report['queries']} queries, repro fails alone"
    )
    return Step(name, True, seconds, detail)


def _run_alone(repro: Path) -> tuple[int | None, str]:
    """The repro as its reader runs it (pt2kit's own check): a copy elsewhere, torch alone, an empty Inductor cache."""
    sys.path.insert(0, str(REPO))
    from minifier.stages.elsewhere import run_elsewhere

    ran = run_elsewhere(repro, 300, python=Path(sys.executable))  # (another interpreter's run: always a fresh cache)
    return ran.returncode, ran.stderr


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:240] if lines else "(no output)"


def _line(step: Step) -> str:
    return f"{'ok  ' if step.ok else 'FAIL'} {step.name:24s} {step.seconds:6.1f} s  {step.detail}"


if __name__ == "__main__":
    sys.exit(main())
