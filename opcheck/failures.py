"""Known failures, in torch's failures-dict JSON format.

The file is the one ``generate_opcheck_tests`` reads and writes::

    {"_description": "...", "_version": 1,
     "data": {"mylib::rowsum": {"TestOps.test_faketensor__test_rowsum[cpu-2]":
                                {"comment": "", "status": "xfail"}}}}

so a project that already has one keeps it. ``data`` maps an op's qualified name
(``OpOverload.name()``: ``ns::name`` or ``ns::name.overload``) to test keys.

Test keys
---------
Torch names a key ``"<TestClass>.<check>__<test method>"``. A pytest item maps
onto it as follows (see :class:`TestId`):

* ``<TestClass>`` is the test's class (the innermost, for nested classes), so a
  ``unittest.TestCase`` suite that used ``generate_opcheck_tests`` keeps its keys;
  a module-level test function uses its module's file stem instead
  (``tests/test_ops.py::test_rowsum`` -> ``test_ops``).
* ``<test method>`` is the item's name *with* its parametrization id, exactly as
  pytest spells it in the node id (``test_rowsum[cpu-2]``; pytest escapes non-ASCII
  ids as ``\\u00e9``). Each parametrization passes or fails on its own, so each has
  its own entry; one key shared by all of them would make a passing parametrization
  an unexpected pass of the failing one's entry. Torch's own validator strips a
  ``[...]`` suffix the same way, but splits a key at every ``.``: an id holding a
  ``.`` (``[1-2.5]``) works here, not in a file ``generate_opcheck_tests`` also reads.
* ``<check>`` is torch's test-util name, e.g. ``test_faketensor``.

The per-function form
---------------------
Files written before keys carried the parametrization id have one key per test
function (``test_ops.test_faketensor__test_rowsum``). For a parametrized test it is
read where its meaning is unambiguous: ``skip`` skips the check for every
parametrization, and ``xfail`` ("some parametrization fails") makes a failing
parametrization expected, without requiring any given one to fail. A key of the
item's own always wins. ``--opcheck-accept`` replaces such an entry with per-item
entries once every parametrization of the function ran (see ``runner.py``).

Differences from torch's ``FailuresDict``
-----------------------------------------
* A missing (or empty) file is an empty dict: ``--opcheck-accept`` creates it.
  Torch's ``FailuresDict.load(create_file=True)`` calls ``save`` unbound and crashes.
* Keys of tests that did not run are kept and never validated against the run, so
  one file serves several suites or a ``-k`` selection (pytorch#111924).
The written text is torch's, byte for byte (torch's own ``FailuresDict`` writes it).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Literal, cast

Status = Literal["xfail", "skip", "xsuccess"]
STATUSES: tuple[Status, ...] = ("xfail", "skip", "xsuccess")
VERSION = 1


class FailuresFileError(ValueError):
    """The file is not a failures dict we can read."""


@dataclasses.dataclass(frozen=True)
class TestId:
    """A pytest item as the failures file names it, plus its node id."""

    __test__ = False  # not a pytest test class, despite the name

    nodeid: str
    suite: str  # the class name, or the module's file stem for a plain function
    name: str  # the item's name: the function's name plus its parametrization id, if any
    function: str = ""  # the function's name alone; "" when it is ``name``

    def key(self, check: str) -> str:
        """The item's failures-dict key of ``check``, e.g. ``TestOps.test_schema__test_add[2]``."""
        return f"{self.suite}.{check}__{self.name}"

    def function_key(self, check: str) -> str | None:
        """The per-function key of a parametrized item (``TestOps.test_schema__test_add``), else None."""
        if not self.function or self.function == self.name:
            return None
        return f"{self.suite}.{check}__{self.function}"


@dataclasses.dataclass(frozen=True)
class Expectation:
    """What the file says about one (op, item, check)."""

    status: Status
    key: str | None = None  # the entry that says so; None when there is none
    comment: str = ""
    per_function: bool = False  # the entry is the per-function form, shared by all parametrizations

    @property
    def strict(self) -> bool:
        """Must the check fail? Only an item's own ``xfail`` entry says so."""
        return self.status == "xfail" and not self.per_function


NO_ENTRY = Expectation("xsuccess")


class FailuresFile:
    """A loaded failures dict: look up and change statuses, then save."""

    def __init__(self, path: Path, data: dict[str, dict[str, dict[str, str]]]) -> None:
        self.path = path
        self.data = data

    @classmethod
    def load(cls, path: str | Path) -> FailuresFile:
        """Read ``path``; a missing or blank file gives an empty dict (it is created on save)."""
        path = Path(path)
        text = path.read_text() if path.exists() else ""
        if not text.strip():
            return cls(path, {})
        try:
            content = json.loads(text)
        except json.JSONDecodeError as error:
            raise FailuresFileError(f"{path}: not JSON ({error})") from error
        if (
            not isinstance(content, dict)
            or content.get("_version") != VERSION
            or not isinstance(content.get("data"), dict)
        ):
            raise FailuresFileError(
                f'{path}: expected {{"_version": {VERSION}, "data": {{...}}}}, torch\'s failures-dict format'
            )
        for op, tests in content["data"].items():
            if not isinstance(tests, dict):
                raise FailuresFileError(f"{path}: {op}: expected a dict of test keys, got {tests!r}")
            for key, entry in tests.items():
                if not isinstance(entry, dict) or entry.get("status") not in STATUSES:
                    raise FailuresFileError(f"{path}: {op} / {key}: status must be one of {STATUSES}, got {entry!r}")
        return cls(path, content["data"])

    def copy(self) -> FailuresFile:
        return FailuresFile(self.path, copy.deepcopy(self.data))

    def status(self, op: str, key: str) -> Status:
        """``xsuccess`` (expected to pass) unless the file says ``xfail`` or ``skip``."""
        return cast(Status, self.data.get(op, {}).get(key, {}).get("status", "xsuccess"))

    def comment(self, op: str, key: str) -> str:
        return self.data.get(op, {}).get(key, {}).get("comment", "")

    def expectation(self, op: str, test: TestId, check: str) -> Expectation:
        """The item's own entry, else (for a parametrized item) its function's entry, else none."""
        own = test.key(check)
        if own in self.data.get(op, {}):
            return Expectation(self.status(op, own), own, self.comment(op, own))
        shared = test.function_key(check)
        if shared is not None and shared in self.data.get(op, {}):
            return Expectation(self.status(op, shared), shared, self.comment(op, shared), per_function=True)
        return NO_ENTRY

    def set_status(self, op: str, key: str, status: Status, comment: str | None = None) -> None:
        """Record ``status``; ``xsuccess`` removes the entry (torch's convention). Keeps an existing comment."""
        tests = self.data.setdefault(op, {})
        if status == "xsuccess":
            tests.pop(key, None)
            if not tests:
                del self.data[op]
            return
        entry = tests.setdefault(key, {"comment": "", "status": status})
        entry["status"] = status
        if comment is not None and not entry["comment"]:
            entry["comment"] = comment

    def to_text(self) -> str:
        """Torch's serialization, so ``generate_opcheck_tests`` accepts the file's formatting unchanged."""
        from pt2kit.seams import optests

        return optests.failures_text(str(self.path), self.data)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(self.to_text())
