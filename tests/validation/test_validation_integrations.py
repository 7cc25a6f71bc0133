"""validation used elsewhere: opcheck's sample sizes, explain's recompile forecast.

The forecast is checked against real dynamo: after it says which sizes still recompile,
calling the compiled function at each predicted size under
``set_stance("fail_on_recompile")`` must raise, and at every size it says is covered must
not.
"""

from __future__ import annotations

import pytest
import torch

from explain import RecompileProfiler

_lib = torch.library.Library("pt2kit_validation_test", "DEF")


@torch.library.custom_op("pt2kit_validation_test::pairs", mutates_args=())
def pairs(x: torch.Tensor) -> torch.Tensor:
    return x.view(-1, 2) * 2


@pairs.register_fake
def _(x):
    torch._check(x.shape[0] % 2 == 0, lambda: "pairs needs an even length")
    return x.new_empty(x.shape[0] // 2, 2)


def test_opcheck_sizes_gives_one_sample_per_code_path(opcheck, opcheck_sizes):
    samples = opcheck_sizes(lambda x: pairs(x), [1], (0, 7))
    assert samples == [((0,),), ((2,),)]  # 0 (0/1 specialization) and the smallest even size >= 2
    for ((size,),) in samples:
        statuses = opcheck(pairs, (torch.randn(size),), checks=("test_schema", "test_faketensor"))
        assert statuses and all(status in ("pass", "n/a") for status in statuses.values()), statuses


def halves(x):
    if x.shape[0] % 2:
        return x[1:].view(-1, 2)
    return x.view(2, -1)


def test_recompile_forecast_agrees_with_dynamo():
    torch._dynamo.reset()
    compiled = torch.compile(halves, dynamic=True, backend="eager")
    with RecompileProfiler() as profiler:
        compiled(torch.randn(4))
    forecast = profiler.size_forecast(halves, [1], (0, 9))
    predicted = {example[0][0] for example in (item["example"] for item in forecast["will_recompile"])}
    assert forecast["entries"] == 1 and predicted == {0, 1, 3}
    with torch.compiler.set_stance("fail_on_recompile"):
        for size in range(0, 10):
            expected_recompile = size in (0, 1) or size % 2 == 1
            if expected_recompile:
                with pytest.raises(Exception):  # dynamo refuses the recompile
                    compiled(torch.randn(size))
            else:
                compiled(torch.randn(size))
    torch._dynamo.reset()
