"""Seam: DTensor and DeviceMesh, as a compiled graph's inputs, and torch's fake process group.

A tensor-parallel program hands dynamo DTensors (a local shard, a device mesh and
placements such as ``Shard(0)`` or ``Replicate()``) and DeviceMesh objects. pt2kit saves a
DTensor as its local shard plus a description of its placements and mesh
(:func:`describe`), and a repro rebuilds it over torch's ``fake`` process group, in one
process, with no network (:data:`FAKE_GROUP_SETUP`). After AOTAutograd the graph holds
plain tensors and functional collectives that name their group.
"""

from __future__ import annotations

from typing import Any

from . import Seam

SEAM = Seam(
    wraps="torch.distributed.tensor.DTensor (_local_tensor, placements, device_mesh), torch.testing._internal.distributed.fake_pg.FakeStore",
    features=("distributed programs: DTensor inputs and one-process repros",),
)

#: What a repro runs to stand in for the job's process group (``rank``, ``world_size`` given).
FAKE_GROUP_SETUP = """\
def setup_process_group():
    \"\"\"The job's process group, faked: one process, no network (collectives do not communicate).\"\"\"
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=RANK, world_size=WORLD_SIZE)"""


def probe() -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available in this torch")
    if not callable(getattr(DTensor, "to_local", None)) or not callable(getattr(DTensor, "from_local", None)):
        raise AttributeError("DTensor.to_local/from_local changed")
    for attr in ("shape", "mesh_dim_names", "device_type"):
        if not hasattr(DeviceMesh, attr):
            raise AttributeError(f"DeviceMesh.{attr} is gone")
    if (
        placement_code(Shard(1)) != "Shard(1)"
        or placement_code(Replicate()) != "Replicate()"
        or placement_code(Partial()) != "Partial('sum')"
    ):
        raise AttributeError("placements changed")
    FakeStore()


def fake_store() -> Any:
    """A store for the fake process group (``dist.init_process_group("fake", store=...)``)."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    return FakeStore()


def placement_code(placement: Any) -> str:
    """Python code that makes ``placement`` again (``Shard(0)``, ``Replicate()``, ``Partial('sum')``)."""
    name = type(placement).__name__
    if name == "Shard":
        return f"Shard({placement.dim})"
    if name == "Partial":
        return f"Partial({placement.reduce_op!r})"
    if name == "Replicate":
        return "Replicate()"
    raise ValueError(f"placement {placement!r} is not supported yet")


def is_dtensor(value: Any) -> bool:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:
        return False
    return isinstance(value, DTensor)


def is_mesh(value: Any) -> bool:
    try:
        from torch.distributed.device_mesh import DeviceMesh
    except ImportError:
        return False
    return isinstance(value, DeviceMesh)


def describe(value: Any) -> dict[str, Any]:
    """A DTensor's placements and mesh, as literals (the local shard is saved as a tensor)."""
    mesh = value.device_mesh
    return {
        "placements": [placement_code(p) for p in value.placements],
        "mesh_shape": list(mesh.shape),
        "mesh_dim_names": list(mesh.mesh_dim_names) if mesh.mesh_dim_names else None,
        "device_type": mesh.device_type,
    }


def local(value: Any) -> Any:
    """A DTensor's local shard (no communication)."""
    return value.to_local()


def world() -> tuple[int, int] | None:
    """``(rank, world_size)`` of the running job's default process group, if there is one."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    return dist.get_rank(), dist.get_world_size()


_MESHES: dict[tuple[int, ...], Any] = {}


def mesh(shape: list[int] | tuple[int, ...], device_type: str = "cpu") -> Any:
    """A device mesh of this shape over the current (fake) process group; one per shape."""
    from torch.distributed.device_mesh import init_device_mesh

    key = tuple(shape)
    if key not in _MESHES:
        _MESHES[key] = init_device_mesh(device_type, key)
    return _MESHES[key]


def rebuild(local_shard: Any, info: dict[str, Any]) -> Any:
    """A DTensor again, from its local shard and :func:`describe`'s description."""
    from torch.distributed.tensor import DTensor

    placements = [placement(code) for code in info["placements"]]
    return DTensor.from_local(
        local_shard, mesh(info["mesh_shape"], info.get("device_type", "cpu")), placements, run_check=False
    )


def placement(code: str) -> Any:
    """The placement :func:`placement_code` wrote (``Shard(0)``...)."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    names = {"Shard": Shard, "Replicate": Replicate, "Partial": Partial}
    return eval(code, {"__builtins__": {}}, names)  # noqa: S307 - our own literal forms, no builtins
