"""Recording custom-op calls: what is captured, how calls are deduplicated, and that the test is undisturbed."""

import pytest
import torch
from torch import Tensor

from opcheck.recording import CallRecorder, OpSelector

NS = "opcheck_recording_test"
lib = torch.library.Library(NS, "DEF")


@torch.library.custom_op(f"{NS}::scale", mutates_args=())
def scale(x: Tensor, factor: float) -> Tensor:
    return x * factor


scale.register_fake(lambda x, factor: torch.empty_like(x))


@torch.library.custom_op(f"{NS}::bump_", mutates_args=["x"])
def bump_(x: Tensor) -> None:
    x.add_(1)


bump_.register_fake(lambda x: None)

lib.define("outer(Tensor x, int k) -> Tensor")  # a Library op whose kernel calls another custom op
lib.impl("outer", lambda x, k: scale(x, 2.0) + k, "CPU")
lib.impl("outer", lambda x, k: torch.empty_like(x), "Meta")

lib.define("add2(Tensor a, Tensor b) -> Tensor")
lib.impl("add2", lambda a, b: a + b, "CPU")

lib.define("fails(Tensor x) -> Tensor")


def _fails(x):
    raise ValueError("kernel refuses")


lib.impl("fails", _fails, "CPU")

ALL_CUSTOM = OpSelector(all_custom=True)


@pytest.fixture
def recorder():
    recorder = CallRecorder()
    recorder.install()
    yield recorder
    recorder.uninstall()


def signatures(calls):
    return [call.signature.describe() for call in calls]


def test_identical_calls_are_recorded_once_and_counted(recorder):
    x = torch.randn(4, 8)
    with recorder.recording("test_a", ALL_CUSTOM):
        for _ in range(1000):
            scale(x, 2.0)
    (call,) = recorder.take_fresh()
    assert (call.calls, call.test, recorder.total_calls) == (1000, "test_a", 1000)
    assert call.signature.describe() == f"{NS}::scale(Tensor[4, 8] float32, float)"


def test_a_signature_seen_in_an_earlier_test_is_not_fresh_again(recorder):
    with recorder.recording("test_a", ALL_CUSTOM):
        scale(torch.randn(3), 1.0)
    recorder.take_fresh()
    with recorder.recording("test_b", ALL_CUSTOM):
        scale(torch.randn(3), 5.0)  # same metadata: floats count by type only
    assert recorder.take_fresh() == []
    (call,) = recorder.seen.values()
    assert (call.test, call.calls) == ("test_a", 2)


def test_metadata_that_matters_makes_distinct_signatures(recorder):
    x = torch.randn(4, 6)
    with recorder.recording("t", ALL_CUSTOM):
        scale(x, 1.0)
        scale(x.t(), 1.0)  # strides
        scale(x.double(), 1.0)  # dtype
        scale(torch.randn(5, 6), 1.0)  # shape
        scale(x.clone().requires_grad_(), 1.0)  # requires_grad
        with torch.no_grad():
            scale(x.clone().requires_grad_(), 1.0)  # autograd is off: same as the first call
        torch.ops.opcheck_recording_test.outer(x, 1)
        torch.ops.opcheck_recording_test.outer(x, 2)  # ints count by value
    assert signatures(recorder.take_fresh()) == [
        f"{NS}::scale(Tensor[4, 6] float32, float)",
        f"{NS}::scale(Tensor[6, 4] float32 stride=(1, 6), float)",
        f"{NS}::scale(Tensor[4, 6] float64, float)",
        f"{NS}::scale(Tensor[5, 6] float32, float)",
        f"{NS}::scale(Tensor[4, 6] float32 requires_grad, float)",
        # outer's kernel calls scale(x, 2.0): same signature as the first call
        f"{NS}::outer(Tensor[4, 6] float32, 1)",
        f"{NS}::outer(Tensor[4, 6] float32, 2)",
    ]
    assert recorder.seen[next(iter(recorder.seen))].calls == 4  # first call, no_grad call, two nested calls


def test_arguments_that_share_storage_are_part_of_the_signature(recorder):
    x, y = torch.randn(3), torch.randn(3)
    with recorder.recording("t", ALL_CUSTOM):
        torch.ops.opcheck_recording_test.add2(x, y)
        torch.ops.opcheck_recording_test.add2(x, x)
    assert signatures(recorder.take_fresh())[1].endswith("[tensor args [1] share storage]")


def test_the_recorded_copy_is_taken_before_the_op_mutates(recorder):
    x = torch.zeros(3)
    with recorder.recording("t", ALL_CUSTOM):
        bump_(x)
    (call,) = recorder.take_fresh()
    assert x.tolist() == [1.0, 1.0, 1.0]  # the test saw the mutation
    assert call.args[0].tolist() == [0.0, 0.0, 0.0]  # the recording kept the input as it was
    assert call.args[0].data_ptr() != x.data_ptr()


def test_recording_keeps_strides_and_requires_grad(recorder):
    x = torch.randn(4, 6).t().requires_grad_()
    with recorder.recording("t", ALL_CUSTOM):
        scale(x, 3.0)
    (call,) = recorder.take_fresh()
    copy = call.args[0]
    assert (copy.stride(), copy.requires_grad, copy.grad_fn) == (x.stride(), True, None)


def test_results_and_exceptions_pass_through_unchanged(recorder):
    x = torch.randn(3)
    with recorder.recording("t", ALL_CUSTOM):
        assert torch.equal(scale(x, 2.0), x * 2.0)
        with pytest.raises(ValueError, match="kernel refuses"):
            torch.ops.opcheck_recording_test.fails(x)
    assert signatures(recorder.take_fresh()) == [f"{NS}::scale(Tensor[3] float32, float)"]  # the failed call is dropped


def test_only_selected_ops_are_recorded(recorder):
    x = torch.randn(3)
    with recorder.recording("t", OpSelector(ops=frozenset({f"{NS}::outer"}))):
        scale(x, 1.0)
        torch.ops.aten.sin(x)
        torch.ops.opcheck_recording_test.outer.default(x, 1)
    assert signatures(recorder.take_fresh()) == [f"{NS}::outer(Tensor[3] float32, 1)"]
    with recorder.recording("t", OpSelector(namespaces=frozenset({"aten"}))):
        torch.ops.aten.cos.default(x)
    assert signatures(recorder.take_fresh()) == ["aten::cos(Tensor[3] float32)"]


def test_torch_namespaces_are_not_custom(recorder):
    with recorder.recording("t", ALL_CUSTOM):
        torch.ops.aten.sin.default(torch.randn(3))
        torch.ops.prims.sin.default(torch.randn(3))
    assert recorder.take_fresh() == []


def test_nothing_is_recorded_outside_a_recording_or_while_paused(recorder):
    scale(torch.randn(3), 1.0)
    with recorder.recording("t", ALL_CUSTOM), recorder.paused():
        scale(torch.randn(3), 1.0)
    assert recorder.take_fresh() == [] and recorder.total_calls == 0


def test_compiled_code_is_recorded_with_real_tensors_only(recorder):
    compiled = torch.compile(lambda t: scale(t, 3.0) + 1, backend="aot_eager", dynamic=False)
    x = torch.randn(7, 2)
    with recorder.recording("t", ALL_CUSTOM):
        torch.testing.assert_close(compiled(x), x * 3.0 + 1)
    (call,) = recorder.take_fresh()  # Dynamo's and AOTAutograd's fake/functional calls are not recorded
    assert call.signature.describe() == f"{NS}::scale(Tensor[7, 2] float32, float)"
    assert type(call.args[0]) is torch.Tensor


def test_meta_and_vmap_wrapped_calls_are_not_recorded(recorder):
    with recorder.recording("t", ALL_CUSTOM):
        scale(torch.empty(3, device="meta"), 1.0)
        # outer sees a vmap-wrapped batch; torch's vmap fallback then runs its kernel per
        # example, and the kernel's own call of scale gets real (3,) tensors.
        torch.vmap(lambda t: torch.ops.opcheck_recording_test.outer(t, 1))(torch.randn(2, 3))
    assert signatures(recorder.take_fresh()) == [f"{NS}::scale(Tensor[3] float32, float)"]


def test_uninstall_restores_torchs_call():
    """Uninstalling leaves torch's ``__call__`` as installing found it: torch's own, or, where an earlier
    test's ``opcheck`` fixture started the session's recorder (it observes until the session ends), that one."""
    from pt2kit.seams import op_calls

    original = torch._ops.OpOverload.__call__, torch._ops.OpOverloadPacket.__call__
    already = op_calls.installed()
    recorder = CallRecorder()
    recorder.install()
    assert op_calls.installed() and (torch._ops.OpOverload.__call__ is original[0]) == already
    recorder.uninstall()
    assert (torch._ops.OpOverload.__call__, torch._ops.OpOverloadPacket.__call__) == original
    assert op_calls.installed() == already
