"""First, do no harm: with TORCHDYNAMO_REPRO_AFTER set, a healthy program runs exactly as without pt2kit.

One program exercises what a debugging hook is most likely to disturb: backends that
are a lambda and a ``functools.partial``, BatchNorm in training (buffers mutated in
place), an in-place update of an input, dropout (the RNG stream), a graph break, an
automatic-dynamic recompile, activation checkpointing, two losses through one compiled call (the
first retaining the graph), and a ``torch.func`` transform
compiled whole (its graph enters functorch's levels). It prints a digest of
every output, gradient, buffer and input, and of the RNG state at the end. The digest
must be the same with the hook armed at every level as without it, with nothing
from pt2kit on stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e

HEALTHY = r'''
import functools
import hashlib

import torch
from torch.utils.checkpoint import checkpoint


def digest(*values):
    h = hashlib.sha256()
    for v in values:
        if isinstance(v, torch.Tensor):
            h.update(v.detach().contiguous().cpu().numpy().tobytes() if v.dtype != torch.bfloat16 else v.float().detach().numpy().tobytes())
        else:
            h.update(repr(v).encode())
    return h.hexdigest()[:16]


def eager_backend(gm, example_inputs):
    return gm.forward


torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 4))
net.train()
lines = []

# BatchNorm in training and dropout, through AOTAutograd: buffers and the RNG stream
step = torch.compile(net, backend="aot_eager")
x = torch.randn(6, 8)
loss = step(x).square().mean()
loss.backward()
lines.append(("bn+dropout", digest(loss, net[1].running_mean, net[1].running_var, net[0].weight.grad)))

# a lambda backend, an in-place update of an input, and a graph break
def update(buf, t):
    buf.add_(t * 2)
    print("graph break", end="")
    return buf.sin() + t

buf = torch.zeros(5)
fn = torch.compile(update, backend=lambda gm, ex: eager_backend(gm, ex))
out = fn(buf, torch.ones(5))
lines.append(("inplace+break", digest(out, buf)))

# a functools.partial backend, and automatic dynamic shapes (a recompile)
def scale(t):
    return (t * t.shape[0]).cumsum(0)

fn = torch.compile(scale, backend=functools.partial(eager_backend))
lines.append(("dynamic", digest(fn(torch.randn(3)), fn(torch.randn(5)), fn(torch.randn(7)))))

# activation checkpointing with dropout inside, through AOTAutograd
layer = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.GELU())
def block(t):
    return checkpoint(layer, t, use_reentrant=False).sum()

x = torch.randn(4, 8, requires_grad=True)
total = torch.compile(block, backend="aot_eager")(x)
total.backward()
lines.append(("checkpoint", digest(total, x.grad, layer[0].weight.grad)))

# two losses through one compiled call, the first retaining the graph (a GAN's step), and a weighted loss
head = torch.nn.Linear(8, 3)
out = torch.compile(lambda t: head(t).tanh() * 2, backend="aot_eager")(torch.randn(5, 8))  # (tanh: saved, not returned)
(out * torch.arange(3.0)).sum().backward(retain_graph=True)
out.square().mean().backward()
lines.append(("two losses", digest(out, head.weight.grad)))

# a torch.func transform compiled whole: its graph enters functorch's levels and takes gradients itself
from torch.func import hessian

def energy(t):
    return (t.sin() * t).sum()

lines.append(("hessian", digest(torch.compile(hessian(energy), backend="aot_eager")(torch.randn(3, 3)))))

lines.append(("rng", digest(torch.get_rng_state())))
print()
for name, value in lines:
    print(name, value)
'''


def run(tmp_path, env_extra):
    script = tmp_path / "healthy.py"
    script.write_text(HEALTHY)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDYNAMO_REPRO")}
    env.update(env_extra)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.long
def test_a_healthy_program_is_unchanged_by_the_hook_at_every_level(tmp_path):
    baseline = run(tmp_path, {"PT2KIT_AUTOLOAD": "0"})
    assert baseline.stdout.count("\n") >= 5
    for after in ("dynamo", "aot"):
        for level in ("2", "3", "4"):
            repros = tmp_path / f"repros-{after}-{level}"
            armed = run(tmp_path, {"PT2KIT_AUTOLOAD": "1", "TORCHDYNAMO_REPRO_AFTER": after, "TORCHDYNAMO_REPRO_LEVEL": level, "TORCHDYNAMO_REPRO_DIR": str(repros)})
            assert armed.stdout == baseline.stdout, (after, level, armed.stderr[-2000:])
            assert "pt2kit" not in armed.stderr or level == "3", (after, level, armed.stderr[-2000:])
            if level != "3":  # level 3 saves every graph on purpose; the others save nothing for a healthy program
                assert not repros.exists() or not any(repros.iterdir()), (after, level)


def test_torchs_own_minifier_stays_out_when_asked_for_in_code(tmp_path):
    """`torch._dynamo.config.repro_after` set in code (as torch's docs do): pt2kit is in charge, torch writes nothing."""
    script = tmp_path / "in_code.py"
    script.write_text(
        "import torch\n"
        "import torch._dynamo.config\n"
        "torch._dynamo.config.repro_after = 'dynamo'\n"
        "torch._dynamo.config.repro_level = 1\n"
        "def bad(gm, example_inputs):\n"
        "    raise RuntimeError('bad backend: refuses everything')\n"
        "torch.compile(lambda x: x.cos(), backend=bad)(torch.randn(3))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDYNAMO_REPRO")}
    env.update({"PT2KIT_AUTOLOAD": "1", "TORCHDYNAMO_REPRO_DIR": str(tmp_path / "repros")})
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode != 0 and "bad backend: refuses everything" in done.stderr  # the user's own error
    assert not (tmp_path / "torch_compile_debug").exists()  # torch's minifier wrote nothing
    (run_dir,) = (tmp_path / "repros").glob("run-*")
    assert "not minified" in (run_dir / "repro.py").read_text()  # pt2kit's level 1 did
