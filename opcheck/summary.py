"""The end-of-run views: the op x check table, and the ``--opcheck-list`` listing.

Both are plain strings for the terminal reporter to write. The table is drawn
by ``rich`` into a string at the reporter's width, with colour only when the
reporter itself uses colour, so it reads the same in a terminal, a CI log and a
captured pytester run. A cell gives the worst status among the op's distinct
signatures ("FAIL", "XPASS", "xfail", "skip", "pass", or "n/a" when a call
could not exercise the check, e.g. autograd without inputs that require grad),
followed by "k/n" when only k of its n signatures have that status. The table
is never truncated: if it is wider than the terminal, lines wrap instead.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from opcheck.runner import OpcheckRunner, SignatureRecord

CHECK_TITLES = {
    "test_schema": "schema",
    "test_autograd_registration": "autograd",
    "test_faketensor": "fake",
    "test_aot_dispatch_static": "aot\nstatic",
    "test_aot_dispatch_dynamic": "aot\ndynamic",
}
# Worst first: a cell shows the worst status among its op's signatures.
_STATUS_ORDER = ("fail", "xpass", "xfail", "skip", "pass", "n/a")
_PARTIAL = re.compile(r"\d+/\d+")
_STATUS_TEXT = {"fail": "FAIL", "xpass": "XPASS"}
_STATUS_STYLE = {
    "fail": "bold red",
    "xpass": "bold red",
    "xfail": "yellow",
    "skip": "yellow",
    "pass": "green",
    "n/a": "dim",
}


def headline(records: Sequence[SignatureRecord]) -> str:
    """E.g. "6 custom ops, 9 distinct signatures from 276 calls"."""
    ops = {r.call.signature.op_name for r in records}
    calls = sum(r.call.calls for r in records)
    return f"{_count(len(ops), 'custom op')}, {_count(len(records), 'distinct signature')} from {_count(calls, 'call')}"


def render_table(records: Sequence[SignatureRecord], checks: Sequence[str], width: int, color: bool) -> str:
    """The op x check table: one row per op, one column per check that ran (or was skipped) anywhere."""
    checks = [check for check in checks if any(check in record.shown for record in records)]
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),
    )
    table.add_column("op", no_wrap=True)
    for check in checks:
        table.add_column(CHECK_TITLES.get(check, check), no_wrap=True)
    table.add_column("sigs", justify="right", no_wrap=True)
    table.add_column("calls", justify="right", no_wrap=True)
    partial = False
    for op, op_records in _by_op(records).items():
        cells = [_cell(Counter(r.shown.get(check, "not run") for r in op_records)) for check in checks]
        partial = partial or any(_PARTIAL.search(cell) for cell in cells)
        calls = sum(r.call.calls for r in op_records)
        table.add_row(escape(op), *cells, str(len(op_records)), str(calls))
    legend = "\nk/n: k of the op's n signatures have this status, the rest a less severe one" if partial else ""
    return _render(table, width, color) + legend


def failures_file_notes(runner: OpcheckRunner, saved: Path | None) -> list[str]:
    """What the run read from, and wrote to, the failures file that the user should know."""
    notes = []
    if runner.unexpected_passes and runner.expected is not None:
        keys = [v.key for v in runner.unexpected_passes]
        notes.append(
            f"opcheck: {_count(len(keys), 'xfail entry', 'xfail entries')} of {runner.expected.path} passed "
            f"({_some(keys)}): rerun with --opcheck-accept to remove "
            f"{'it' if len(keys) == 1 else 'them'}, or delete {'it' if len(keys) == 1 else 'them'} by hand."
        )
    used = list(dict.fromkeys(key for _, key in runner.per_function_used))
    if used and runner.expected is not None and saved is None:
        notes.append(
            f"opcheck: {_count(len(used), 'entry', 'entries')} of {runner.expected.path} "
            f"name{'s' if len(used) == 1 else ''} a whole parametrized test function ({_some(used)}): a failing "
            "parametrization counts as expected, a passing one is not held to fail. "
            "Run once with --opcheck-accept to give each parametrization its own entry."
        )
    if saved is not None:
        done = runner.accept_summary
        notes.append(f"opcheck: wrote known failures to {saved} ({done.added} added, {done.removed} removed)")
        kept = list(dict.fromkeys(done.kept_per_function))
        if kept:
            notes.append(
                f"opcheck: kept {_count(len(kept), 'per-function entry', 'per-function entries')} ({_some(kept)}): "
                "not every parametrization of the test ran to completion with that op and check in this run; "
                "accept on a run of all of them to replace it by one entry per failing parametrization."
            )
    return notes


def render_listing(records: Sequence[SignatureRecord]) -> str:
    """Each op and the distinct signatures that would be checked, with call counts and first test."""
    lines = []
    for op, op_records in _by_op(records).items():
        lines.append(op)
        for record in op_records:
            call = record.call
            lines.append(f"    {call.signature.describe()}    {call.calls} call(s), first in {call.test}")
    return "\n".join(lines)


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def _some(names: Sequence[str], shown: int = 3) -> str:
    more = f", and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _by_op(records: Iterable[SignatureRecord]) -> dict[str, list[SignatureRecord]]:
    grouped: dict[str, list[SignatureRecord]] = {}
    for record in records:
        grouped.setdefault(record.call.signature.op_name, []).append(record)
    return dict(sorted(grouped.items()))


def _cell(counts: Counter[str]) -> str:
    ranked = [s for s in _STATUS_ORDER if counts[s]] + sorted(s for s in counts if s not in _STATUS_ORDER)
    worst, total = ranked[0], sum(counts.values())
    return _styled(worst) if counts[worst] == total else f"{_styled(worst)} {counts[worst]}/{total}"


def _styled(status: str) -> str:
    text = _STATUS_TEXT.get(status, status)
    style = _STATUS_STYLE.get(status)
    return f"[{style}]{text}[/]" if style else text


def _render(table: Table, width: int, color: bool) -> str:
    out = io.StringIO()
    console = Console(
        file=out, width=width, force_terminal=color, color_system="standard" if color else None, highlight=False
    )
    natural = Measurement.get(console, console.options.update_width(10_000), table).maximum
    console.width = max(width, natural)
    console.print(table)
    return out.getvalue().rstrip("\n")
