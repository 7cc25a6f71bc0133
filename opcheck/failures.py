"""Known failures, in torch's failures-dict JSON format.

The file is the one ``generate_opcheck_tests`` reads and writes::

    {"_description": "...", "_version": 1,
     "data": {"mylib::rowsum": {"TestOps.test_faketensor__test_rowsum":
                                {"comment": "", "status": "xfail"}}}}

so a project that already has one keeps it. ``data`` maps an op's qualified name
(``OpOverload.name()``: ``ns::name`` or ``ns::name.overload``) to test keys.

Test keys
---------
Torch names a key ``"<TestClass>.<check>__<test method>"``. A pytest node id maps
onto it as follows (see :class:`TestId`):

* ``<TestClass>`` is the test's class (the innermost, for nested classes), so a
  ``unittest.TestCase`` suite that used ``generate_opcheck_tests`` keeps its keys;
  a module-level test function uses its module's file stem instead
  (``tests/test_ops.py::test_rowsum`` -> ``test_ops``).
* ``<test method>`` is the function's name without the parametrization id
  (``test_rowsum[cpu-2]`` -> ``test_rowsum``): all parametrizations share one key,
  the way torch's ``opcheck_only_one`` collapses them.
* ``<check>`` is torch's test-util name, e.g. ``test_faketensor``.

Differences from torch's ``FailuresDict``
-----------------------------------------
* A missing (or empty) file is an empty dict: ``--opcheck-accept`` creates it.
  Torch's ``FailuresDict.load(create_file=True)`` calls ``save`` unbound and crashes.
* Keys of tests that did not run are kept and never validated against the run, so
  one file serves several suites or a ``-k`` selection (pytorch#111924).
The written text is torch's, byte for byte (torch's own ``FailuresDict`` writes it).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Literal

Status = Literal["xfail", "skip", "xsuccess"]
STATUSES: tuple[Status, ...] = ("xfail", "skip", "xsuccess")
VERSION = 1


class FailuresFileError(ValueError):
    """The file is not a failures dict we can read."""


@dataclasses.dataclass(frozen=True)
class TestId:
    """A test as the failures file names it, plus its pytest node id."""

    __test__ = False  # not a pytest test class, despite the name

    nodeid: str
    suite: str  # the class name, or the module's file stem for a plain function
    name: str  # the test function's name, parametrization id dropped

    def key(self, check: str) -> str:
        """The failures-dict key of ``check`` run under this test, e.g. ``TestOps.test_schema__test_add``."""
        return f"{self.suite}.{check}__{self.name}"


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
            for key, entry in tests.items():
                if not isinstance(entry, dict) or entry.get("status") not in STATUSES:
                    raise FailuresFileError(f"{path}: {op} / {key}: status must be one of {STATUSES}, got {entry!r}")
        return cls(path, content["data"])

    def status(self, op: str, key: str) -> Status:
        """``xsuccess`` (expected to pass) unless the file says ``xfail`` or ``skip``."""
        return self.data.get(op, {}).get(key, {}).get("status", "xsuccess")  # type: ignore[return-value]

    def comment(self, op: str, key: str) -> str:
        return self.data.get(op, {}).get(key, {}).get("comment", "")

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
        from minifier.seams import optests

        return optests.failures_text(str(self.path), self.data)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(self.to_text())
