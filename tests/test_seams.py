"""Every seam's probe passes on the torch pt2kit is pinned to (the smoke tests of the seam layer)."""

from __future__ import annotations

import pytest

from minifier import seams


@pytest.mark.parametrize("name", seams.names())
def test_seam_probe_passes_on_the_pinned_torch(name: str) -> None:
    status = seams.check(name)
    assert status.ok, f"seam {name} ({status.seam.wraps if status.seam else '?'}) is broken: {status.error}"
    assert status.seam is not None and status.seam.features, "a seam must say which features need it"


def test_every_seam_module_is_discovered() -> None:
    assert "after_dynamo" in seams.names()
