"""Distributed jobs: real 2-rank gloo jobs on CPU, minified into one-process repros over a fake process group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

from pt2kit.script import PT2KIT_PACKAGES
from support.paths import USER_MODULES

TP_JOB = '''
import sys
sys.path.insert(0, {tests!r})
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import planted  # noqa: F401


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.down(torch.cos(self.up(x))).tanh()


if __name__ == "__main__":
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    torch.manual_seed(0)
    model = parallelize_module(MLP(), mesh, {{"up": ColwiseParallel(), "down": RowwiseParallel()}})
    with torch.no_grad():
        out = torch.compile(model, backend={backend!r})(torch.randn(4, 8))
    print(dist.get_rank(), out.sum())
    dist.destroy_process_group()
'''

ALL_REDUCE_JOB = '''
import sys
sys.path.insert(0, {tests!r})
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import planted  # noqa: F401


def step(x):
    y = torch.sin(x) * 2
    y = funcol.all_reduce(y, "sum", dist.group.WORLD)
    return torch.cos(y).exp().sum()


if __name__ == "__main__":
    dist.init_process_group("gloo")
    print(torch.compile(step, backend={backend!r})(torch.ones(4, 4) * (dist.get_rank() + 1)))
    dist.destroy_process_group()
'''


def job(tmp_path: Path, template: str, backend: str) -> Path:
    script = tmp_path / "job.py"
    script.write_text(template.format(tests=str(USER_MODULES), backend=backend))
    return script


def minify_job(script: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "minifier", "run", "--nproc-per-node", "2", "--json", "--timeout", "120", "--out", str(script.parent / "runs"), str(script)],
        capture_output=True, text=True, timeout=900, cwd=script.parent,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert done.returncode == 0, (report, done.stderr[-3000:])
    return report


def alone(repro: Path) -> subprocess.CompletedProcess[str]:
    """The repro, in one plain process: no torchrun, no rank environment, pt2kit unimportable."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK")}
    env.update({"PT2KIT_AUTOLOAD": "0", "PYTHONPATH": str(USER_MODULES)})
    blocker = textwrap.dedent(f"""
        import runpy, sys
        for name in {PT2KIT_PACKAGES!r}:
            sys.modules[name] = None
        sys.argv = [{str(repro)!r}]
        runpy.run_path({str(repro)!r}, run_name="__main__")
    """)
    return subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, cwd=repro.parent, env=env, timeout=600)


def test_a_tensor_parallel_job_failing_on_its_all_reduce_becomes_a_one_process_repro_that_keeps_it(tmp_path):
    report = minify_job(job(tmp_path, TP_JOB, "planted_no_all_reduce"))
    assert report["ops_after"] == ["_c10d_functional.all_reduce.default"]
    assert report["distributed"]["world_size"] == 2 and report["distributed"]["process_group"] == "fake"
    assert set(report["distributed"]["ranks"]) == {"0", "1"}
    repro = Path(report["repro"])
    assert "setup_process_group()" in repro.read_text() and "torchrun" not in repro.read_text()
    ran = alone(repro)
    assert ran.returncode != 0 and "cannot lower _c10d_functional.all_reduce" in ran.stderr, ran.stderr[-2000:]


def test_a_failure_that_does_not_need_the_collective_shrinks_to_a_repro_with_no_process_group(tmp_path):
    report = minify_job(job(tmp_path, ALL_REDUCE_JOB, "planted_compile_error"))
    assert report["ops_after"] == ["aten.cos.default"]
    repro = Path(report["repro"])
    assert "process_group" not in repro.read_text() and report["distributed"]["process_group"] is None
    ran = alone(repro)
    assert ran.returncode != 0 and "planted: cannot compile aten.cos" in ran.stderr


def test_the_env_var_hook_under_torchrun_keeps_the_users_error_and_leaves_a_repro_per_rank(tmp_path):
    script = job(tmp_path, TP_JOB, "planted_no_all_reduce")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDYNAMO_REPRO")}
    env.update({"TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_DIR": str(tmp_path / "repros"), "PT2KIT_AUTOLOAD": "1"})
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(script)]
    done = subprocess.run(torchrun, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert done.returncode != 0
    assert "RuntimeError: planted: cannot lower _c10d_functional.all_reduce" in done.stderr  # the user's own error
    # a run directory is named run-<time>-...-rank<N>: the ranks can start in either second
    runs = sorted((tmp_path / "repros").glob("run-*"), key=lambda r: r.name.rsplit("-", 1)[-1])
    assert [r.name.rsplit("-", 1)[-1] for r in runs] == ["rank0", "rank1"]
    for run in runs:
        report = json.loads((run / "report.json").read_text())
        assert report["ops_after"] == ["_c10d_functional.all_reduce.default"], report
        ran = alone(run / "repro.py")
        assert ran.returncode != 0 and "cannot lower _c10d_functional.all_reduce" in ran.stderr


def test_a_collective_called_by_its_packet_makes_the_repro_join_the_process_group():
    """Hunt m: a dynamo graph calls ``torch.ops._c10d_functional.all_gather_into_tensor(x, 2, '0')`` (the packet,
    no ``.default``); the repro did not set the process group up, and rebuilt alone the graph failed to resolve it."""
    import torch.fx as fx

    import torch.distributed._functional_collectives  # (registers _c10d_functional)
    from minifier.capture.casemaker import make_case
    from minifier.capture.context import BackendInfo
    from minifier.repro.writer import needs_process_group

    graph = fx.Graph()
    x = graph.placeholder("x")
    graph.output((graph.call_function(torch.ops._c10d_functional.all_gather_into_tensor, (x, 2, "0")),))
    case = make_case(fx.GraphModule({}, graph), [torch.randn(4)], backend=BackendInfo("inductor", []), index=0, in_backend=False)
    assert needs_process_group(case)
    plain = fx.Graph()
    y = plain.placeholder("x")
    plain.output((plain.call_function(torch.ops.aten.sin, (y,)),))
    assert not needs_process_group(make_case(fx.GraphModule({}, plain), [torch.randn(4)], backend=BackendInfo("inductor", []), index=0, in_backend=False))


def test_a_dtensor_is_copied_as_a_dtensor():
    """Hunt m: with ``freezing`` on, a module's DTensor parameter reaches the graph's inputs, and pt2kit's copy of it
    (``as_strided`` over its memory) raised "as_strided not supported with DTensor": the graph was not saved."""
    script = textwrap.dedent("""
        import torch, torch.distributed as dist
        from torch.testing._internal.distributed.fake_pg import FakeStore
        from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh
        from minifier.unit.copies import clone_tensor

        dist.init_process_group("fake", rank=0, world_size=2, store=FakeStore())
        d = distribute_tensor(torch.randn(4, 4), init_device_mesh("cpu", (2,)), [Shard(0)]).requires_grad_()
        c = clone_tensor(d)
        assert type(c) is type(d) and c.placements == d.placements and c.requires_grad and c.is_leaf
        assert torch.equal(c.to_local(), d.to_local()) and c.to_local().data_ptr() != d.to_local().data_ptr()
        print("copied")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "copied" in done.stdout, done.stderr[-2000:]


DDP_SMALL_BUCKETS_JOB = '''
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

if __name__ == "__main__":
    dist.init_process_group("gloo")
    model = torch.compile(DDP(torch.nn.Linear(4, 4), bucket_cap_mb=0.0001), backend="eager")
    model(torch.randn(2, 4)).sum().backward()
    dist.destroy_process_group()
'''


def test_a_job_of_one_rank_gets_torchruns_environment_and_a_failure_in_dynamos_ddp_handling_is_said_to_be_dynamos(tmp_path):
    """``--nproc-per-node 1`` is ``torchrun --nproc-per-node 1``: without the rendezvous environment the script
    failed on RANK, "before torch.compile compiled anything" (exit 3). Then dynamo's DDP optimizer refuses DDP's
    own small buckets (an AssertionError in torch/_dynamo/backends/distributed.py) before any graph exists."""
    script = tmp_path / "job.py"
    script.write_text(DDP_SMALL_BUCKETS_JOB)
    done = subprocess.run(
        [sys.executable, "-m", "minifier", "run", "--nproc-per-node", "1", "--json", "--no-subsystem", "--out", str(tmp_path / "runs"), str(script)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    report = json.loads(done.stdout)
    assert done.returncode == 5, (report, done.stderr[-3000:])
    assert report["failure"]["exception"] == "AssertionError" and "First bucket" in report["failure"]["message"]
    assert "torch/_dynamo/backends/distributed.py" in report["message"] and "the bug is dynamo's" in report["message"]
    assert report["program_fails_at"] == "eager"
