"""Each opcheck check on real custom ops, one planted defect at a time.

Every op is registered for real through ``torch.library`` (``custom_op``,
``Library.define``/``impl``, ``register_fake``, ``"Meta"`` impls), under a
namespace of its own so the module can be imported once per process. Where a
check goes beyond ``torch.library.opcheck``, the test also shows torch's own
verdict on the same call.
"""

import functools
import random

import pytest
import torch
from torch import Tensor

from opcheck.checks import CHECKS, run_checks

pytestmark = pytest.mark.matrix  # in-process decisions on real torch: make matrix runs them on every supported release


NS = "opcheck_checks_test"
lib = torch.library.Library(NS, "DEF")


def results(op, *args, **kwargs):
    """{check: (status, message)} of every check on one call."""
    return {r.check: (r.status, r.message) for r in run_checks(op, args, kwargs)}


def failing(op, *args, **kwargs):
    return {check: message for check, (status, message) in results(op, *args, **kwargs).items() if status == "fail"}


# -- a correct op ---------------------------------------------------------------------
@torch.library.custom_op(f"{NS}::good", mutates_args=())
def good(x: Tensor, scale: float) -> Tensor:
    return x.sin() * scale


good.register_fake(lambda x, scale: torch.empty_like(x))
good.register_autograd(
    lambda ctx, grad: (grad * ctx.saved_tensors[0].cos() * ctx.scale, None),
    setup_context=lambda ctx, inputs, output: (ctx.save_for_backward(inputs[0]), setattr(ctx, "scale", inputs[1])),
)


def test_a_correct_op_passes_every_check():
    x = torch.randn(3, 4, requires_grad=True)
    assert {check: status for check, (status, _) in results(good._opoverload, x, 2.0).items()} == {
        check: "pass" for check in CHECKS
    }


def test_autograd_check_does_not_apply_without_inputs_that_require_grad():
    status, message = results(good._opoverload, torch.randn(3), 2.0)["test_autograd_registration"]
    assert (status, message) == ("n/a", "no argument requires grad")


def test_the_checks_leave_the_recorded_arguments_untouched():
    x = torch.randn(4, 8)
    before = x.clone()
    run_checks(mutates_a_little._opoverload, (x,), {})
    assert torch.equal(x.view(torch.int32), before.view(torch.int32))


# -- test_faketensor -----------------------------------------------------------------------
@torch.library.custom_op(f"{NS}::bad_shape", mutates_args=())
def bad_shape(lengths: Tensor) -> Tensor:
    return torch.cumsum(lengths, 0)


bad_shape.register_fake(lambda lengths: lengths.new_empty(lengths.shape[0] + 1))


def test_fake_kernel_with_the_wrong_shape():
    assert failing(bad_shape._opoverload, torch.tensor([2, 0, 3, 1])) == {
        "test_faketensor": "fake kernel says shape (5,), real kernel gives (4,)"
    }


@torch.library.custom_op(f"{NS}::bad_strides", mutates_args=())
def bad_strides(x: Tensor) -> Tensor:
    return (x * 2).contiguous(memory_format=torch.channels_last)


bad_strides.register_fake(lambda x: torch.empty_like(x, memory_format=torch.contiguous_format))


def test_fake_kernel_with_the_wrong_strides():
    assert failing(bad_strides._opoverload, torch.randn(2, 3, 4, 5)) == {
        "test_faketensor": "fake kernel says strides (60, 20, 5, 1), real kernel gives (60, 1, 15, 3)"
    }


lib.define("bad_dtype_meta(Tensor x) -> Tensor")
lib.impl("bad_dtype_meta", lambda x: x.double(), "CPU")
lib.impl("bad_dtype_meta", lambda x: torch.empty_like(x), "Meta")  # a Meta-only registration


def test_meta_kernel_with_the_wrong_dtype():
    assert failing(torch.ops.opcheck_checks_test.bad_dtype_meta.default, torch.randn(3)) == {
        "test_faketensor": "fake kernel says dtype torch.float32, real kernel gives torch.float64"
    }


lib.define("good_meta(Tensor x) -> Tensor")
lib.impl("good_meta", lambda x: x + 1, "CPU")
lib.impl("good_meta", lambda x: torch.empty_like(x), "Meta")


def test_a_correct_meta_only_registration_passes():
    assert failing(torch.ops.opcheck_checks_test.good_meta.default, torch.randn(3)) == {}


lib.define("no_fake(Tensor x) -> Tensor")
lib.impl("no_fake", lambda x: x + 1, "CPU")


def test_an_op_without_any_fake_kernel():
    failures = failing(torch.ops.opcheck_checks_test.no_fake.default, torch.randn(3))
    assert failures["test_faketensor"].startswith(f"{NS}::no_fake has no fake (meta) kernel")
    # Tracing under AOTAutograd needs the fake kernel too.
    assert set(failures) == {"test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic"}


# -- test_schema ---------------------------------------------------------------------------
@torch.library.custom_op(f"{NS}::mutates_a_little", mutates_args=())
def mutates_a_little(x: Tensor) -> Tensor:
    row_max = x.amax(dim=1, keepdim=True)
    x.sub_(row_max)
    out = x.exp().sum(1).log()
    x.add_(row_max)  # x - m + m is not x in floating point
    return out + row_max.squeeze(1)


mutates_a_little.register_fake(lambda x: x.new_empty(x.shape[0]))


def test_an_undeclared_ulp_sized_mutation_is_caught_bit_for_bit():
    x = (
        torch.rand(16, 32, generator=torch.Generator().manual_seed(0)) * 10 + 0.5
    )  # away from 0: allclose's rtol hides ulps
    message = failing(mutates_a_little._opoverload, x)["test_schema"]
    assert message.startswith("argument 'x' is not declared mutable in the schema, but the op changed ")
    assert "too small for torch.library.opcheck's allclose-based test_schema to notice" in message
    # torch's own test_schema compares with allclose and passes this op.
    assert torch.library.opcheck(mutates_a_little, (x,), test_utils="test_schema") == {"test_schema": "SUCCESS"}


@torch.library.custom_op(f"{NS}::declared_mutation", mutates_args=["x"])
def declared_mutation(x: Tensor) -> None:
    x.mul_(2)


declared_mutation.register_fake(lambda x: None)


def test_a_declared_mutation_is_fine():
    assert failing(declared_mutation._opoverload, torch.randn(3)) == {}


lib.define("returns_a_view(Tensor x) -> Tensor")
lib.impl("returns_a_view", lambda x: x.view(-1), "CPU")
lib.impl("returns_a_view", lambda x: x.new_empty(x.numel()), "Meta")


def test_an_output_that_aliases_an_input():
    failures = failing(torch.ops.opcheck_checks_test.returns_a_view.default, torch.randn(2, 3))
    assert failures["test_schema"] == "Argument x is not defined to alias output but was aliasing"
    assert failures["test_faketensor"] == "an output aliases an input for the real kernel, but not for the fake kernel"


# -- test_autograd_registration ---------------------------------------------------------------
lib.define("no_formula(Tensor x) -> Tensor")


def _no_formula_cpu(x):
    with torch.no_grad():
        return x.sin()


lib.impl("no_formula", _no_formula_cpu, "CPU")
lib.impl("no_formula", lambda x: torch.empty_like(x), "Meta")


def test_a_differentiable_op_without_autograd_formula_is_flagged():
    op = torch.ops.opcheck_checks_test.no_formula.default
    x = torch.randn(3, requires_grad=True)
    message = failing(op, x)["test_autograd_registration"]
    assert "has no autograd formula" in message
    assert "1 of 1 input gradients came back None" in message
    # torch.library.opcheck passes every one of its checks on this call.
    assert set(torch.library.opcheck(op, (x,)).values()) == {"SUCCESS"}


@torch.library.custom_op(f"{NS}::custom_op_no_formula", mutates_args=())
def custom_op_no_formula(x: Tensor) -> Tensor:
    return x.cos()


custom_op_no_formula.register_fake(lambda x: torch.empty_like(x))


def test_a_custom_op_called_with_grad_but_without_formula():
    failures = failing(custom_op_no_formula._opoverload, torch.randn(3, requires_grad=True))
    assert failures["test_autograd_registration"].startswith(
        f"{NS}::custom_op_no_formula was called with inputs that require grad, but it has no autograd formula, "
        "so backward raises"
    )


lib.define("autograd_at_backend_key(Tensor x) -> Tensor")
lib.impl("autograd_at_backend_key", lambda x: x.sin(), "CPU")  # records autograd below the Autograd key
lib.impl("autograd_at_backend_key", lambda x: torch.empty_like(x), "Meta")


def test_torchs_registration_check_still_runs():
    failures = failing(
        torch.ops.opcheck_checks_test.autograd_at_backend_key.default, torch.randn(3, requires_grad=True)
    )
    assert "does not have an autograd kernel defined at an autograd key" in failures["test_autograd_registration"]


# -- test_aot_dispatch_static / _dynamic -------------------------------------------------------
@functools.cache
def _padded(length):
    return (length + 7) // 8 * 8


@torch.library.custom_op(f"{NS}::dynamic_only", mutates_args=())
def dynamic_only(x: Tensor) -> Tensor:
    return torch.nn.functional.pad(x, (0, _padded(x.shape[-1]) - x.shape[-1]))


dynamic_only.register_fake(lambda x: x.new_empty(x.shape[0], _padded(x.shape[1])))


def test_an_op_that_breaks_only_with_dynamic_shapes():
    failures = failing(dynamic_only._opoverload, torch.randn(2, 5))
    assert list(failures) == ["test_aot_dispatch_dynamic"]
    assert failures["test_aot_dispatch_dynamic"].startswith("TypeError: unhashable type: non-nested SymInt (raised at")
    assert failures["test_aot_dispatch_dynamic"].endswith(
        "(passes with static shapes: it breaks only when sizes are symbolic SymInts)"
    )


@torch.library.custom_op(f"{NS}::not_reproducible", mutates_args=())
def not_reproducible(x: Tensor) -> Tensor:
    return x + random.random()  # Python's RNG: torch's seeding cannot make two runs agree


not_reproducible.register_fake(lambda x: torch.empty_like(x))


def test_aot_dispatch_compares_outputs_with_eager():
    failures = failing(not_reproducible._opoverload, torch.randn(3))
    assert set(failures) == {"test_aot_dispatch_static", "test_aot_dispatch_dynamic"}
    assert failures["test_aot_dispatch_static"].startswith("Outputs of the operator are different in eager-mode")
    assert failures["test_aot_dispatch_dynamic"].startswith("Outputs of the operator are different in eager-mode")
