"""One opcheck session: record each test's custom-op calls, check them, judge the results.

The runner knows nothing of pytest's hooks (``plugin.py`` drives it). Per test it

1. records the test's calls (``recording.py``), keeping the first call of each
   signature not seen before in the session;
2. runs the checks (``checks.py``) on those calls, skipping the (op, check) pairs
   the failures file marks ``skip``;
3. folds the per-signature results into one :class:`Verdict` per (op, check) of
   the test, applying the failures file: an expected failure is ``xfail``, an
   expected failure that passed is ``xpass``. With ``accept``, the file is updated
   instead: failures become ``xfail`` entries, passing ``xfail`` entries go.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import torch

from minifier.seams import ops, optests
from opcheck.checks import CHECKS, CheckResult, run_checks, validate_checks
from opcheck.failures import FailuresFile, TestId
from opcheck.recording import CallRecorder, Op, OpSelector, RecordedCall, Signature, signature_of

VerdictStatus = Literal["pass", "fail", "xfail", "xpass", "skip", "n/a"]
#: "The op" as a user may give it: an ``OpOverload``, an ``OpOverloadPacket``, the function
#: ``torch.library.custom_op`` made (a ``CustomOpDef``), or ``"ns::name[.overload]"``.
OpLike = Any


@dataclasses.dataclass
class Verdict:
    """The outcome of one check on one op within one test, failures file applied."""

    test: TestId
    op: str
    check: str
    status: VerdictStatus
    failures: list[tuple[Signature, str]]  # (signature, what was wrong) per failing signature
    signatures: int  # how many distinct signatures of the op the test contributed
    note: str = ""  # what the failures file says about it ("xfail in FILE: comment"), if anything
    # Node id of the test that already reported this failure under the same failures
    # key (another parametrization of the same test function): no second report.
    folded_into: str | None = None

    @property
    def key(self) -> str:
        return self.test.key(self.check)

    def describe(self) -> str:
        """The report text: a one-line gist (the short summary shows it), then test, op, calls and what was wrong."""
        if self.status == "xpass":
            return (
                f"{self.op} {self.check}: expected to fail ({self.note}) but passed. "
                f"Remove the entry, or rerun with --opcheck-accept.\n  failures-file entry: {self.entry()}"
            )
        first_message = self.failures[0][1].splitlines()[0] if self.failures else self.status
        lines = [
            f"{self.op} {self.check}: {first_message}",
            f"  test: {self.test.nodeid}",
            f"  op: {self.op}   check: {self.check}",
        ]
        for signature, message in self.failures:
            lines += [f"  call: {signature.describe()}", *(f"    {line}" for line in message.splitlines())]
        lines.append(f"  failures-file entry: {self.entry()}")
        return "\n".join(lines)

    def entry(self) -> str:
        """The failures-file JSON that would mark this verdict as expected to fail."""
        return json.dumps({self.op: {self.key: {"comment": "", "status": "xfail"}}})


class OpcheckFailure(AssertionError):
    """Raised by the ``opcheck`` fixture when checks fail that the failures file does not expect."""

    def __init__(self, verdicts: Sequence[Verdict]) -> None:
        self.verdicts = list(verdicts)
        super().__init__("\n".join(v.describe() for v in self.verdicts))


@dataclasses.dataclass
class SignatureRecord:
    """One distinct signature: its first call, its check results, and how the summary shows them."""

    call: RecordedCall
    results: dict[str, CheckResult] = dataclasses.field(default_factory=dict)
    shown: dict[str, str] = dataclasses.field(default_factory=dict)  # check -> pass/fail/xfail/xpass/skip/n/a


class OpcheckRunner:
    """Records and checks custom-op calls for a whole session."""

    def __init__(
        self,
        *,
        sweep: bool,
        namespaces: frozenset[str] = frozenset(),
        checks: Sequence[str] = tuple(CHECKS),
        failures_path: Path | None = None,
        accept: bool = False,
        list_only: bool = False,
    ) -> None:
        validate_checks(checks)
        if accept and failures_path is None:
            raise ValueError("accepting results needs a failures file to write")
        self.sweep, self.checks, self.accept, self.list_only = sweep, tuple(checks), accept, list_only
        self.failures = FailuresFile.load(failures_path) if failures_path is not None else None
        self.recorder = CallRecorder()
        self.records: dict[Signature, SignatureRecord] = {}
        self.folded: list[Verdict] = []
        self._reported: dict[tuple[str, str, str], str] = {}  # (op, key, status) -> node id that reported it
        self._sweep_selector = OpSelector(all_custom=not namespaces, namespaces=namespaces)
        self._marker_selectors: dict[frozenset[str], OpSelector] = {}

    # -- recording --------------------------------------------------------------------
    def start(self) -> None:
        self.recorder.install()

    def stop(self) -> None:
        self.recorder.uninstall()

    def selector_for(self, marked_ops: Iterable[OpLike] | None) -> OpSelector | None:
        """What to record in a test: everything custom under ``--opcheck``, else what its marker names.

        ``marked_ops`` is None for a test without the ``opcheck`` marker; an empty
        marker means all custom ops.
        """
        if marked_ops is None:
            return self._sweep_selector if self.sweep else None
        names = frozenset(op_name(op) for op in marked_ops)
        if names not in self._marker_selectors:
            sweep = self._sweep_selector if self.sweep else OpSelector()
            self._marker_selectors[names] = OpSelector(
                all_custom=sweep.all_custom or not names, namespaces=sweep.namespaces, ops=names
            )
        return self._marker_selectors[names]

    @contextmanager
    def recording(self, test: TestId, selector: OpSelector) -> Iterator[None]:
        with self.recorder.recording(test.nodeid, selector):
            yield

    # -- checking ---------------------------------------------------------------------------
    def check_recorded(self, test: TestId, checks: Sequence[str] | None = None) -> list[Verdict]:
        """Check the signatures ``test`` recorded first; one verdict per (op, check)."""
        fresh = self.recorder.take_fresh()
        for call in fresh:
            self._record_of(call)
        if self.list_only:
            for call in fresh:
                call.release_tensors()
            return []
        return self._judge(test, fresh, checks or self.checks)

    def check_call(
        self,
        test: TestId,
        op: OpLike,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        checks: Sequence[str] | None = None,
    ) -> list[Verdict]:
        """The fixture's path: check one explicit call. A signature seen before reuses its results."""
        overload = resolve_op(op)
        call = self.recorder.record(overload, tuple(args), dict(kwargs), test.nodeid)
        if call is None:
            known = self.recorder.seen[signature_of(overload, tuple(args), dict(kwargs))]
            # Not stored: these arguments only serve checks not yet run on this signature.
            call = dataclasses.replace(known, args=tuple(args), kwargs=dict(kwargs))
        return self._judge(test, [call], checks or self.checks)

    def _judge(self, test: TestId, calls: list[RecordedCall], checks: Sequence[str]) -> list[Verdict]:
        checks = validate_checks(checks)
        verdicts = []
        for op, op_calls in _group_by_op(calls).items():
            expected = {check: self._expected(op, test, check) for check in checks}
            records = [self._record_of(call) for call in op_calls]
            self._run_missing(op_calls, records, [check for check in checks if expected[check] != "skip"])
            signatures = [call.signature for call in op_calls]
            for check in checks:
                results = [] if expected[check] == "skip" else [record.results[check] for record in records]
                verdict = self._verdict(test, op, check, expected[check], signatures, results)
                verdicts.append(verdict)
                for index, record in enumerate(records):
                    record.shown[check] = _shown_status(verdict.status, results[index] if results else None)
        return verdicts

    def _run_missing(self, calls: list[RecordedCall], records: list[SignatureRecord], checks: list[str]) -> None:
        """Run the checks each signature has no result for yet, then drop its argument copies."""
        with self.recorder.paused():
            for call, record in zip(calls, records, strict=True):
                missing = [check for check in checks if check not in record.results]
                if missing:
                    record.results.update((r.check, r) for r in run_checks(call.op, call.args, call.kwargs, missing))
                call.release_tensors()

    def _record_of(self, call: RecordedCall) -> SignatureRecord:
        first_call = self.recorder.seen.get(call.signature, call)
        return self.records.setdefault(call.signature, SignatureRecord(first_call))

    def _expected(self, op: str, test: TestId, check: str) -> str:
        return self.failures.status(op, test.key(check)) if self.failures else "xsuccess"

    def _verdict(
        self,
        test: TestId,
        op: str,
        check: str,
        expected: str,
        signatures: list[Signature],
        results: list[CheckResult],
    ) -> Verdict:
        note = ""
        if self.failures is not None and expected != "xsuccess":
            comment = self.failures.comment(op, test.key(check))
            note = f"{expected} in {self.failures.path}" + (f": {comment}" if comment else "")
        if expected == "skip":
            return self._folded(Verdict(test, op, check, "skip", [], len(signatures), note))
        failures = [(sig, r.message) for sig, r in zip(signatures, results, strict=True) if r.status == "fail"]
        if all(r.status == "n/a" for r in results):
            status: VerdictStatus = "n/a"
        elif failures:
            status = "xfail" if expected == "xfail" else "fail"
        else:
            status = "xpass" if expected == "xfail" else "pass"
        verdict = Verdict(test, op, check, status, failures, len(signatures), note)
        if self.accept:
            self._accept(verdict)
        return self._folded(verdict)

    def _folded(self, verdict: Verdict) -> Verdict:
        """One report per failures-file key and outcome.

        The parametrizations of a test share its key, so when several of them
        fail a check the same way only the first reports it; the rest are folded
        (listed at the end, counted in the table).
        """
        if verdict.status not in ("pass", "n/a"):
            first = self._reported.setdefault((verdict.op, verdict.key, verdict.status), verdict.test.nodeid)
            if first != verdict.test.nodeid:
                verdict.folded_into = first
                self.folded.append(verdict)
        return verdict

    def _accept(self, verdict: Verdict) -> None:
        """Update the failures file from this verdict, and report it as the file now says."""
        assert self.failures is not None  # checked in __init__
        if verdict.status == "fail":
            self.failures.set_status(verdict.op, verdict.key, "xfail", comment=_gist(verdict.failures[0][1]))
            verdict.status, verdict.note = "xfail", f"recorded as xfail in {self.failures.path}"
        elif verdict.status == "xpass":
            self.failures.set_status(verdict.op, verdict.key, "xsuccess")
            verdict.status = "pass"

    def save_failures(self) -> Path | None:
        """Write the failures file under ``accept``; returns its path if written."""
        if not self.accept or self.list_only or self.failures is None:
            return None
        self.failures.save()
        return self.failures.path


def op_name(op: OpLike) -> str:
    """``ns::name`` or ``ns::name.overload``, as the failures file and the selector spell it."""
    if isinstance(op, str):
        return op
    if ops.is_custom_op_def(op):
        return ops.custom_op_def_name(op)
    if ops.is_packet(op):
        return "::".join(ops.packet_name(op))
    return op.name()


def resolve_op(op: OpLike) -> Op:
    """The ``OpOverload`` to call for anything a user may pass as "the op"."""
    if isinstance(op, str):
        namespace, _, name = op.partition("::")
        name, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops, namespace), name)
        if overload:
            op = getattr(op, overload)
    if ops.is_custom_op_def(op):
        return ops.custom_op_def_overload(op)
    if ops.is_packet(op):
        return optests.unique_overload(op)
    return op


def _group_by_op(calls: list[RecordedCall]) -> dict[str, list[RecordedCall]]:
    grouped: dict[str, list[RecordedCall]] = {}
    for call in calls:
        grouped.setdefault(call.signature.op_name, []).append(call)
    return grouped


def _gist(message: str, limit: int = 160) -> str:
    """The first line of a failure message, cut at a word, for a failures-file comment."""
    line = message.splitlines()[0]
    return line if len(line) <= limit else line[:limit].rsplit(" ", 1)[0] + " ..."


def _shown_status(verdict_status: VerdictStatus, result: CheckResult | None) -> str:
    """One signature's cell in the summary: its own result, re-labelled by the file's expectation."""
    if result is None:
        return verdict_status  # skip
    if result.status == "fail":
        return "xfail" if verdict_status == "xfail" else "fail"
    if result.status == "pass" and verdict_status == "xpass":
        return "xpass"
    return result.status
