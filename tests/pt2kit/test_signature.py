"""Failure signatures (pt2kit.signature): when two failures are the same failure."""

import pytest
import torch

from pt2kit.signature import MESSAGE_LIMIT, Kind, Signature, innermost_exception, normalize_message, shown, shows_failure, signature_of_exception


# --------------------------------------------------------------------------- #
# Signatures
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("message", "normalized"),
    [
        ("C++ compile error\n\nCommand:\ng++ /tmp/x/abc.cpp", "C++ compile error"),
        ("bad pointer 0x7ffd3a2b in /tmp/torchinductor_root/xk/cxk2tiw6ldlulrtgaorpqlhfk.cpp:78", "bad pointer 0x? in <path>:78"),
        ("arg0_1 and add_3 into buf12 via tmp3 for s0", "arg_# and add_# into buf# via tmp# for s#"),
        ("expected float32 but got float64 for shape [4, 16]", "expected float32 but got float64 for shape [4, 16]"),
        # the autograd node a saved tensor came out of is the input's history, not the bug (pytorch#185497)
        (
            "modified by an inplace operation: [torch.FloatTensor [3]], which is output 0 of AsStridedBackward0, is at version 1",
            "modified by an inplace operation: [torch.FloatTensor [3]] is at version 1",
        ),
        ("modified by an inplace operation: [torch.FloatTensor [3]] is at version 1", "modified by an inplace operation: [torch.FloatTensor [3]] is at version 1"),
        # a version counter counts the program's earlier writes: the graph alone on fresh inputs counts fewer (hunt j)
        (
            "[torch.LongTensor []] is at version 4; expected version 3 instead. Hint: enable anomaly detection",
            "[torch.LongTensor []] is at version #; expected version # instead. Hint: enable anomaly detection",
        ),
        # a graph input, by dynamo's name for its source in a repro, by the program's in the program (pytorch#125284)
        ("input 0 (L_stack0_) and input 1 (L_y_) share storage", "input 0 (stack0) and input 1 (y) share storage"),
        ("input 0 (___stack0) and input 1 (y) share storage", "input 0 (stack0) and input 1 (y) share storage"),
        # dynamo's compile id: a replay compiles the frame afresh (hunt 13: "0/1" recorded, "0/0" replayed)
        (
            "Guard failed on the same frame it was created. Guard fail reason: 0/1: tensor 'x' size mismatch at index 0",
            "Guard failed on the same frame it was created. Guard fail reason: #/#: tensor 'x' size mismatch at index 0",
        ),
        ("[0/1_1] graph break in 3/4 of the calls", "[#/#] graph break in 3/4 of the calls"),
        # a subclass's __torch_dispatch__ refusing: the op that met it first differs by stage (pytorch#193932)
        (
            "Multiple dispatch failed for 'torch._ops.aten.mm.out'; all __torch_dispatch__ handlers returned NotImplemented",
            "Multiple dispatch failed for '<op>'; all __torch_dispatch__ handlers returned NotImplemented",
        ),
    ],
)
def test_messages_are_normalized_but_keep_what_distinguishes_bugs(message, normalized):
    assert normalize_message(message) == normalized


def test_wrapped_backend_errors_keep_their_own_signature():
    def broken_backend(gm, example_inputs):
        raise ValueError("cannot lower aten.sin at 0xdeadbeef")

    with pytest.raises(Exception) as info:
        torch.compile(lambda x: x.sin(), backend=broken_backend)(torch.ones(3))
    assert type(info.value).__name__ == "BackendCompilerFailed"
    assert isinstance(innermost_exception(info.value), ValueError)
    signature = signature_of_exception(info.value).signature
    assert (signature.kind, signature.exception, signature.message) == ("compile_error", "ValueError", "cannot lower aten.sin at 0x?")


def test_an_assert_with_no_message_is_named_once_as_raised_with_none():
    def asserting_backend(gm, example_inputs):
        raise AssertionError  # (as a bare ``assert`` in torch raises it: pytest's rewriting adds a message here)

    with pytest.raises(Exception) as info:
        torch.compile(lambda x: x.sin(), backend=asserting_backend)(torch.ones(3))
    failure = signature_of_exception(info.value)
    assert failure.signature.message == "AssertionError"  # (what two such failures compare by)
    assert str(failure.signature) == "compile_error: AssertionError: (raised with no message)" == failure.as_said


def _compiled_inside_a_handler(fn, where: str) -> BaseException:
    """What ``torch.compile(fn, fullgraph=True)`` raises when called inside ``except KeyError:`` (``where``: in this
    frame, the frame that catches it, or in a function below)."""

    def compile_it():
        torch.compile(fn, backend="eager", fullgraph=True)(torch.zeros(()))

    def in_a_function():
        try:
            raise KeyError("the program's own, long handled")
        except KeyError:
            compile_it()

    torch._dynamo.reset()
    try:
        if where == "below":
            in_a_function()
        else:
            try:
                raise KeyError("the program's own, long handled")
            except KeyError:
                compile_it()
    except Exception as e:  # noqa: BLE001 - the error to read
        return e
    raise AssertionError("it compiled")


@pytest.mark.parametrize("where", ["here", "below"])
def test_an_error_the_program_was_handling_around_the_compile_is_not_the_failure(where):
    # Python hands dynamo's error the KeyError as its __context__; it was the failure's signature
    # (`minify run` said "compile_error: KeyError" for a graph break under fullgraph=True)
    def breaks(x):
        print("a side effect")
        return x + 1

    def loops(x):  # dynamo raises while handling the body's own TypeError: that one is the failure
        return torch.while_loop(lambda i: i < 3, lambda i: (i + 1,), (x, 5))

    raised = _compiled_inside_a_handler(breaks, where)
    assert type(innermost_exception(raised)).__name__ == "Unsupported"
    assert signature_of_exception(raised).signature.exception == "Unsupported"
    inner = innermost_exception(_compiled_inside_a_handler(loops, where))
    assert isinstance(inner, TypeError) and "positional" in str(inner)


def test_a_cpp_compile_error_is_known_by_the_compilers_first_diagnostic():
    from torch._inductor.exc import CppCompileError

    output = (
        "/tmp/torchinductor_u/hq/chq.main.cpp: In function 'void kernel(const at::Half*)':\n"
        "/tmp/torchinductor_u/hq/chq.main.cpp:115:26: error: conflicting declaration \u2018auto at_Half_tmp_acc0_vec\u2019\n"
        "/tmp/torchinductor_u/hq/chq.main.cpp:124:26: error: something after it\n"
    )
    first = signature_of_exception(CppCompileError(["g++", "x.cpp"], output)).signature
    assert first.message == "C++ compile error | error: conflicting declaration 'auto at_Half_tmp_acc#_vec'"
    renumbered = signature_of_exception(CppCompileError(["g++", "y.cpp"], output.replace("acc0", "acc3").replace(":115:", ":9:"))).signature
    assert renumbered == first
    other = signature_of_exception(CppCompileError(["g++", "x.cpp"], "/t/a.cpp:3:1: error: no matching function for call to 'convert<double, 2, int32_t, 1>'")).signature
    assert other != first and other.message.endswith("convert<double, 2, int32_t, 1>'")


STICKY = (
    "CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect."
)


def test_a_sticky_device_error_is_one_crash_wherever_and_however_it_surfaces():
    """Kernels run asynchronously: the same illegal access surfaces in a compile (autotuning ran the kernel)
    or at a later call, as a RuntimeError or an AcceleratorError. Every later call of that process fails."""
    from pt2kit.signature import DEVICE_ERROR, Signature, mark_compile_phase, shows_failure

    in_compile = RuntimeError(STICKY)
    mark_compile_phase(in_compile)
    at_run = getattr(torch, "AcceleratorError", RuntimeError)(STICKY)
    wrapped = RuntimeError("while handling the output")
    wrapped.__cause__ = at_run
    signatures = {signature_of_exception(e).signature for e in (in_compile, at_run, wrapped)}
    assert signatures == {Signature("crash", DEVICE_ERROR, STICKY.splitlines()[0])}
    assert signature_of_exception(RuntimeError("CUDA error: device-side assert triggered")).signature not in signatures
    assert signature_of_exception(RuntimeError("CUDA error: out of memory")).signature.kind == "runtime_error"  # (not sticky)

    (target,) = signatures
    shown = "Traceback (most recent call last):\n  ...\ntorch.AcceleratorError: " + STICKY + "\n"
    assert shows_failure(1, shown, target) and shows_failure(-6, shown, target)
    assert not shows_failure(0, shown, target) and not shows_failure(None, shown, target)
    assert not shows_failure(1, shown.replace("an illegal memory access was encountered", "device-side assert triggered"), target)


def test_an_error_of_tritons_compiler_is_a_compile_error_also_at_a_kernels_first_launch():
    from pt2kit.signature import mark_compile_phase

    # (Triton's own class, as its compiler raises it where no GPU is at hand to make it for real)
    CompilationError = type("CompilationError", (Exception,), {"__module__": "triton.compiler.errors"})
    error = CompilationError("at 12:8: unsupported tensor index")
    assert signature_of_exception(error).signature.kind == "compile_error"
    at_launch = RuntimeError("launch failed")  # an error raised from it is of the compile too
    at_launch.__cause__ = error
    assert signature_of_exception(at_launch).signature.kind == "compile_error"
    assert signature_of_exception(RuntimeError("launch failed")).signature.kind == "runtime_error"
    compiled_for_launch = CompilationError("at 12:8: unsupported tensor index")
    mark_compile_phase(compiled_for_launch)
    assert signature_of_exception(compiled_for_launch).signature == signature_of_exception(error).signature


def test_plain_exception_is_a_runtime_error():
    signature = signature_of_exception(IndexError("index 7 is out of bounds")).signature
    assert (signature.kind, signature.exception) == ("runtime_error", "IndexError")


def test_a_message_cut_at_its_limit_shows_it_is_cut_and_compares_as_it_is():
    # pytorch#165409's functionalization error runs past the limit: "...removing the mutation from your model."
    long = "functionalization encountered a tensor being mutated that has internal overlap. " * 5
    message = normalize_message(long)
    assert len(message) == MESSAGE_LIMIT and not message.endswith("…")  # the identity, as report.json keeps it
    signature = Signature(Kind.RUNTIME_ERROR, "RuntimeError", message)
    assert str(signature).endswith(message + "…")
    assert shows_failure(1, f"RuntimeError: {long}", signature)
    short = Signature(Kind.RUNTIME_ERROR, "RuntimeError", normalize_message("boom"))
    assert str(short) == "runtime_error: RuntimeError: boom"
    diagnostic = " | error: 'x' was not declared" + " in this scope" * 25
    diagnosed = Signature(Kind.COMPILE_ERROR, "CppCompileError", "C++ compile error" + diagnostic)
    assert len(diagnosed.message) > MESSAGE_LIMIT and str(diagnosed).endswith("C++ compile error" + diagnostic)  # not cut
    assert shown(message + " | error: 'x' was not declared") == message + "… | error: 'x' was not declared"


def test_a_crash_glibc_reports_as_heap_corruption_is_told_from_other_crashes():
    # pytorch#196681: a kernel writes past its buffer; whether the process then aborts hangs on the
    # allocator, so two crashing looks are no evidence the next one crashes (it is measured instead)
    import signal

    from pt2kit.signature import memory_corrupted, signature_of_crash

    assert memory_corrupted(signature_of_crash(signal.SIGABRT, "max abs diff: 3.0\ncorrupted size vs. prev_size\n"))
    assert memory_corrupted(signature_of_crash(signal.SIGABRT, "free(): invalid pointer"))
    assert memory_corrupted(signature_of_crash(signal.SIGABRT, "double free or corruption (out)"))
    assert not memory_corrupted(signature_of_crash(signal.SIGABRT, "terminate called after throwing an instance of 'c10::Error'"))
    assert not memory_corrupted(signature_of_crash(signal.SIGSEGV, "Fatal Python error: Segmentation fault"))


def test_a_failure_is_said_as_torch_said_it_where_its_signature_normalized_it():
    # (hunt 12: the terminal showed "Multiple dispatch failed for '<op>'", hiding the op the program failed on)
    from pt2kit.signature import Failure, signature_of_exception

    try:
        raise TypeError("Multiple dispatch failed for 'torch._ops.aten.mm.out'; all handlers returned NotImplemented:\n  - mode")
    except TypeError as e:
        failure = signature_of_exception(e)
    assert "'<op>'" in str(failure.signature) and "'torch._ops.aten.mm.out'" in failure.as_said
    assert failure.as_said.startswith("runtime_error: TypeError: ")
    # details that are not the message (a wrong answer's) leave the signature as it is
    assert Failure(failure.signature, "output 0: RMSE 0.3").as_said == str(failure.signature)
