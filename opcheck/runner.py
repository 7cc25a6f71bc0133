"""One opcheck session: record each test's custom-op calls, check them, judge the results.

The runner knows nothing of pytest's hooks (``plugin.py`` drives it). Per test item it

1. records the calls the item makes in setup and in the test itself
   (``recording.py``): every signature it calls, and a copy of the first call of
   each signature new to the session;
2. runs the checks (``checks.py``) each of those signatures has no result for yet,
   skipping the (op, check) pairs the failures file marks ``skip``: a signature is
   checked once per session, however many items call it;
3. judges the item: one :class:`Verdict` per (op, check) over *all* the signatures
   the item called (and the calls it checked through the fixture), against the
   item's own failures-file entry (``failures.py``). An expected failure is
   ``xfail``; an item whose own ``xfail`` entry finds no failure is ``xpass``.

A verdict depends only on the item, its calls and the file, never on which other
items ran before it: ``-k``, ``--lf``, another order or another file that makes the
same call first give each item the same verdict and the same key.

With ``accept`` the file is rewritten at the end from the verdicts: each failure
becomes the item's ``xfail`` entry, each entry of an item that ran to completion and
no longer fails that way goes, and everything else (other items' entries, ``skip``
entries, checks or ops this run did not cover) stays. Expectations are read from
the file as it was when the session started, so the order items run in cannot
change them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import torch

from pt2kit.seams import ops, optests
from opcheck.checks import CHECKS, CheckResult, run_checks, validate_checks
from opcheck.failures import NO_ENTRY, Expectation, FailuresFile, TestId
from opcheck.recording import CallRecorder, Op, OpSelector, RecordedCall, Signature, signature_of

VerdictStatus = Literal["pass", "fail", "xfail", "xpass", "skip", "n/a"]
#: Worst first: how a signature shows in the summary when items judged it differently.
SEVERITY: tuple[VerdictStatus, ...] = ("fail", "xpass", "xfail", "skip", "pass", "n/a")
#: "The op" as a user may give it: an ``OpOverload``, an ``OpOverloadPacket``, the function
#: ``torch.library.custom_op`` made (a ``CustomOpDef``), or ``"ns::name[.overload]"``.
OpLike = Any


@dataclasses.dataclass
class Verdict:
    """The outcome of one check on one op within one test item, failures file applied."""

    test: TestId
    op: str
    check: str
    status: VerdictStatus
    failures: list[tuple[Signature, str]]  # (signature, what was wrong) per failing signature
    signatures: int  # how many distinct signatures of the op the item called
    expectation: Expectation = NO_ENTRY
    note: str = ""  # what the failures file says about it ("xfail in FILE: comment"), if anything
    # Failing signatures already described under another item: named, not described again.
    described_in: dict[Signature, str] = dataclasses.field(default_factory=dict)
    # Every failure was raised to the test by the ``opcheck`` fixture: the test saw it already.
    raised: bool = False

    @property
    def key(self) -> str:
        return self.test.key(self.check)

    def describe(self) -> str:
        """The report text: a one-line gist (the short summary shows it), then test, op, calls and what was wrong."""
        if self.status == "xpass":
            return "\n".join(
                [
                    f"{self.op} {self.check} passes now: rerun with --opcheck-accept to remove its xfail entry",
                    f"  test: {self.test.nodeid}",
                    f"  expected to fail: {self.note}",
                    f"  failures-file entry: {self.entry()}",
                ]
            )
        first_message = self.failures[0][1].splitlines()[0] if self.failures else self.status
        lines = [
            f"{self.op} {self.check}: {first_message}",
            f"  test: {self.test.nodeid}",
            f"  op: {self.op}   check: {self.check}",
        ]
        for signature, message in self.failures:
            if signature in self.described_in:
                lines.append(f"  call: {signature.describe()}: the same failure as in {self.described_in[signature]}")
            else:
                lines += [f"  call: {signature.describe()}", *(f"    {line}" for line in message.splitlines())]
        if self.status == "fail":
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
    shown: dict[str, str] = dataclasses.field(default_factory=dict)  # check -> worst status any item gave it


@dataclasses.dataclass
class ItemRun:
    """One item's checks so far: the signatures it called per op, and what it asked for."""

    test: TestId
    selector: OpSelector | None = None  # what it recorded; None for the fixture alone
    checks: tuple[str, ...] = ()  # the checks run on its recorded calls
    signatures: dict[str, dict[Signature, None]] = dataclasses.field(default_factory=dict)  # op -> its signatures
    recorded_ops: set[str] = dataclasses.field(default_factory=set)  # ops it called while recorded
    fixture_checks: dict[str, set[str]] = dataclasses.field(default_factory=dict)  # op -> checks the fixture ran
    raised: set[tuple[Signature, str]] = dataclasses.field(default_factory=set)  # failures the fixture raised

    def checks_of(self, op: str) -> tuple[str, ...]:
        """The checks the item ran on ``op``: the recorded ones if it called it, plus the fixture's."""
        recorded = self.checks if op in self.recorded_ops else ()
        return tuple(dict.fromkeys((*recorded, *sorted(self.fixture_checks.get(op, ())))))

    def covered(self, op: str) -> set[str]:
        """The checks that would have found ``op`` failing here: what its entries for other checks cannot lose.

        An op the recording selects counts even if not called: the item ran without calling it.
        """
        covered = set(self.fixture_checks.get(op, ()))
        selected = self.selector is not None and self.selector.selects_name(op)
        if op in self.recorded_ops or (selected and op not in self.fixture_checks):
            covered.update(self.checks)
        return covered


@dataclasses.dataclass(frozen=True)
class Completed:
    """A parametrization that ran to completion under accept: which (op, check) pairs its run covered."""

    selector: OpSelector | None  # the ops it recorded
    checks: frozenset[str]  # the checks run on them
    fixture: dict[str, frozenset[str]]  # op -> checks the fixture ran on it

    def covers(self, op: str, check: str) -> bool:
        recorded = self.selector is not None and self.selector.selects_name(op) and check in self.checks
        return recorded or check in self.fixture.get(op, ())


@dataclasses.dataclass
class AcceptSummary:
    """What ``--opcheck-accept`` changed, for the closing lines."""

    added: int = 0
    removed: int = 0
    kept_per_function: list[str] = dataclasses.field(default_factory=list)  # per-function keys left as they were


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
        # ``expected`` is the file as the session found it; ``accepted`` is what accept will write.
        self.expected = FailuresFile.load(failures_path) if failures_path is not None else None
        self.accepted = self.expected.copy() if (accept and self.expected is not None) else None
        self.recorder = CallRecorder()
        self.records: dict[Signature, SignatureRecord] = {}
        self.per_function_used: dict[tuple[str, str], None] = {}  # (op, per-function key) an item fell back on
        self.accept_summary = AcceptSummary()
        self.unexpected_passes: list[Verdict] = []  # xfail entries that passed (none under accept)
        self._wanted: set[str] = set(self.checks)  # every check some item may ask of a signature
        self._items: dict[str, ItemRun] = {}  # node id -> the item being run
        self._described: dict[tuple[Signature, str], str] = {}  # (signature, check) -> node id that described it
        self._families: dict[tuple[str, str], set[str]] = {}  # (suite, function) -> its parametrizations' names
        self._completed: dict[tuple[str, str], dict[str, Completed]] = {}
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

    def want_checks(self, checks: Iterable[str]) -> None:
        """Some item asks for ``checks``: keep each signature's argument copy until they have run on it."""
        self._wanted.update(checks)

    def add_family(self, test: TestId, names: Iterable[str]) -> None:
        """All the parametrizations pytest generated for ``test``'s function, before any selection."""
        parametrized = {name for name in names if name != test.function}
        if parametrized:
            self._families.setdefault((test.suite, test.function), set()).update(parametrized)

    @contextmanager
    def recording(self, test: TestId, selector: OpSelector) -> Iterator[None]:
        """Record the item's calls until :meth:`judge_item` (or the block's end: then nothing is judged)."""
        self._items[test.nodeid] = ItemRun(test, selector)
        try:
            with self.recorder.recording(test.nodeid, selector):
                yield
        finally:
            self.end_item(test)

    def judging(self, nodeid: str) -> bool:
        """Is an item with this node id being recorded, or did it check calls through the fixture?"""
        return nodeid in self._items

    def end_item(self, test: TestId) -> None:
        """Forget an item that was not judged (its setup failed or skipped); its new signatures stay unchecked."""
        self._items.pop(test.nodeid, None)
        for call in self.recorder.take_fresh():
            self._record_of(call)
        self.recorder.take_touched()

    # -- checking ---------------------------------------------------------------------------
    def judge_item(self, test: TestId, checks: Sequence[str] | None = None, *, completed: bool) -> list[Verdict]:
        """End the item's recording and judge it: one verdict per (op, check) it touched.

        ``completed``: the test itself passed, so its calls are all the calls it makes;
        under accept, only such an item's stale entries are removed.
        """
        run = self._items.pop(test.nodeid, None) or ItemRun(test)
        self.recorder.stop_recording()
        fresh = self.recorder.take_fresh()
        for call in fresh:
            self._record_of(call)
        touched = self.recorder.take_touched() if run.selector is not None else []
        if self.list_only:
            for call in fresh:
                call.release_tensors()
            return []
        run.checks = validate_checks(checks or self.checks)
        for signature in touched:
            run.signatures.setdefault(signature.op_name, {})[signature] = None
            run.recorded_ops.add(signature.op_name)
        self._check(run, touched)
        verdicts = [self._verdict(run, op, check) for op, check in self._judged_pairs(run)]
        if self.accepted is not None:
            self._accept(run, verdicts, completed)
        self.unexpected_passes += [v for v in verdicts if v.status == "xpass"]
        self._show(run, verdicts)
        return verdicts

    def check_call(
        self,
        test: TestId,
        op: OpLike,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        checks: Sequence[str] | None = None,
    ) -> tuple[dict[str, VerdictStatus], list[Verdict]]:
        """The fixture's path: check one explicit call now.

        Returns each check's status on this call and the verdicts of its unexpected
        failures (for the fixture to raise). Whether an ``xfail`` entry is an
        unexpected pass is decided for the whole item, in :meth:`judge_item`.
        """
        checks = validate_checks(checks or self.checks)
        overload = resolve_op(op)
        call = self.recorder.record(overload, tuple(args), dict(kwargs), test.nodeid)
        if call is None:
            known = self.recorder.seen[signature_of(overload, tuple(args), dict(kwargs))]
            # Not stored: these arguments only serve checks not yet run on this signature.
            call = dataclasses.replace(known, args=tuple(args), kwargs=dict(kwargs), released=False)
        run = self._items.setdefault(test.nodeid, ItemRun(test))
        name = call.signature.op_name
        run.signatures.setdefault(name, {})[call.signature] = None
        run.fixture_checks.setdefault(name, set()).update(checks)
        expected = {check: self._expected(name, test, check) for check in checks}
        record = self._record_of(call)
        self._run_missing(call, record, [check for check in checks if expected[check].status != "skip"])
        statuses: dict[str, VerdictStatus] = {}
        failed = []
        for check in checks:
            result = record.results.get(check)
            if expected[check].status == "skip" or result is None:
                statuses[check] = "skip"
            elif result.status != "fail":
                statuses[check] = result.status
            elif expected[check].status == "xfail" or self.accepted is not None:
                statuses[check] = "xfail"
            else:
                statuses[check] = "fail"
                run.raised.add((call.signature, check))
                failed.append(
                    self._described_verdict(Verdict(test, name, check, "fail", [(call.signature, result.message)], 1))
                )
        return statuses, failed

    def _check(self, run: ItemRun, signatures: list[Signature]) -> None:
        """Run the checks the item's recorded signatures lack (one copy each), skipping its ``skip`` entries."""
        for signature in signatures:
            call = self.recorder.seen[signature]
            record = self._record_of(call)
            wanted = [c for c in run.checks if self._expected(signature.op_name, run.test, c).status != "skip"]
            self._run_missing(call, record, wanted)

    def _run_missing(self, call: RecordedCall, record: SignatureRecord, checks: list[str]) -> None:
        """Run the checks ``record`` has no result for, then drop the argument copy once nothing else may need it."""
        missing = [check for check in checks if check not in record.results]
        if missing and call.released:
            # Only a check no item asked for when the copy went; cannot happen through the plugin.
            record.results.update(
                (c, CheckResult(c, "n/a", "not checked: the call's copy was released")) for c in missing
            )
            missing = []
        if missing:
            with self.recorder.paused():
                record.results.update((r.check, r) for r in run_checks(call.op, call.args, call.kwargs, missing))
        if self._wanted.issubset(record.results):
            call.release_tensors()

    def _judged_pairs(self, run: ItemRun) -> list[tuple[str, str]]:
        return [(op, check) for op in run.signatures for check in run.checks_of(op)]

    def _verdict(self, run: ItemRun, op: str, check: str) -> Verdict:
        test = run.test
        expectation = self._expected(op, test, check)
        if expectation.per_function:
            self.per_function_used[(op, expectation.key or "")] = None
        note = ""
        if self.expected is not None and expectation.status != "xsuccess":
            note = f"{expectation.status} in {self.expected.path}" + (
                f": {expectation.comment}" if expectation.comment else ""
            )
            if expectation.per_function:
                note += f" (per-function entry {expectation.key})"
        signatures = list(run.signatures.get(op, ()))
        if expectation.status == "skip":
            return Verdict(test, op, check, "skip", [], len(signatures), expectation, note)
        results = [(s, self.records[s].results[check]) for s in signatures if check in self.records[s].results]
        failures = [(s, r.message) for s, r in results if r.status == "fail"]
        if all(r.status == "n/a" for _, r in results):
            status: VerdictStatus = "n/a"
        elif failures:
            status = "xfail" if expectation.status == "xfail" else "fail"
        else:
            status = "xpass" if expectation.strict else "pass"
        verdict = Verdict(test, op, check, status, failures, len(signatures), expectation, note)
        verdict.raised = bool(failures) and all((s, check) in run.raised for s, _ in failures)
        return self._described_verdict(verdict)

    def _described_verdict(self, verdict: Verdict) -> Verdict:
        """Note which failures another item described already; claim the rest for this one."""
        for signature, _ in verdict.failures:
            first = self._described.setdefault((signature, verdict.check), verdict.test.nodeid)
            if first != verdict.test.nodeid:
                verdict.described_in[signature] = first
        return verdict

    def _show(self, run: ItemRun, verdicts: list[Verdict]) -> None:
        """Each signature's summary cell: the worst status any item gave it."""
        for verdict in verdicts:
            for signature in run.signatures.get(verdict.op, ()):
                record = self.records[signature]
                status = _shown_status(verdict.status, record.results.get(verdict.check))
                current = record.shown.get(verdict.check)
                if current is None or SEVERITY.index(status) < SEVERITY.index(current):
                    record.shown[verdict.check] = status

    def _record_of(self, call: RecordedCall) -> SignatureRecord:
        first_call = self.recorder.seen.get(call.signature, call)
        return self.records.setdefault(call.signature, SignatureRecord(first_call))

    def _expected(self, op: str, test: TestId, check: str) -> Expectation:
        return self.expected.expectation(op, test, check) if self.expected is not None else NO_ENTRY

    # -- accept -----------------------------------------------------------------------------
    def _accept(self, run: ItemRun, verdicts: list[Verdict], completed: bool) -> None:
        """Update the file to be written from the item's verdicts; report them as it now says."""
        accepted = self.accepted
        assert accepted is not None
        test, failing = run.test, set()
        for verdict in verdicts:
            if verdict.status in ("fail", "xfail"):
                failing.add((verdict.op, verdict.check))
                if accepted.status(verdict.op, verdict.key) != "xfail":
                    comment = verdict.expectation.comment or _gist(verdict.failures[0][1])
                    accepted.set_status(verdict.op, verdict.key, "xfail", comment=comment)
                    self.accept_summary.added += 1
                if verdict.status == "fail":
                    verdict.status, verdict.note = "xfail", f"recorded as xfail in {accepted.path}"
            elif verdict.status == "xpass":
                verdict.status = "pass"
        if not completed:
            return
        # The item ran to the end: its entries for what it was checked for and did not fail go.
        for op in list(accepted.data):
            for check in run.covered(op):
                if (op, check) not in failing and accepted.status(op, test.key(check)) == "xfail":
                    accepted.set_status(op, test.key(check), "xsuccess")
                    self.accept_summary.removed += 1
        if test.function_key("") is not None:
            fixture = {op: frozenset(checks) for op, checks in run.fixture_checks.items()}
            done = Completed(run.selector, frozenset(run.checks), fixture)
            self._completed.setdefault((test.suite, test.function), {})[test.name] = done

    def _retire_per_function_entries(self) -> None:
        """Remove each per-function ``xfail`` entry whose parametrizations all ran to completion.

        Each of them has its own entry now where it fails. Where one did not run (``-k``,
        a node id, ``-x``, a failed test), the entry stays: it still speaks for that one.
        """
        accepted = self.accepted
        assert accepted is not None
        for (suite, function), names in sorted(self._families.items()):
            completed = self._completed.get((suite, function), {})
            for op in list(accepted.data):
                for check in CHECKS:
                    key = f"{suite}.{check}__{function}"
                    if accepted.status(op, key) != "xfail":
                        continue
                    if all(n in completed and completed[n].covers(op, check) for n in names):
                        accepted.set_status(op, key, "xsuccess")
                        self.accept_summary.removed += 1
                    else:
                        self.accept_summary.kept_per_function.append(key)

    def save_failures(self) -> Path | None:
        """Write the failures file under ``accept``; returns its path if written."""
        if self.accepted is None or self.list_only:
            return None
        self._retire_per_function_entries()
        self.accepted.save()
        return self.accepted.path


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
