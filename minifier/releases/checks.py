"""Fixed in which torch? A finished repro run under other torch releases, and what that says.

Each release runs the repro as its reader will (:func:`~minifier.stages.elsewhere.run_elsewhere`
with that environment's interpreter: a copy in a new directory, torch alone, an empty Inductor
cache) and is a :class:`ReleaseCheck`: does it fail, and with the same failure? From the
checks, :func:`fixed_in` and :func:`regressed_in` read the two answers a triager asks for
first: the oldest listed release newer than the user's on which the repro passes, every
newer listed one passing too ("upgrade to it" is then a workaround, verified on the repro);
and, for a failure an older release did not have, the first listed release that has it.

A release that could not be installed or imported is a row with ``fails`` null and the
one line of why: never a failed run.
"""

from __future__ import annotations

import re
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pt2kit.signature import DIAGNOSTIC_SEPARATOR, Kind, Signature, compiler_diagnostic, normalize_message, shows_failure
from .environments import Environment, ReleaseSpec, Unavailable, environment

THIS_ENVIRONMENT = "this environment"


@dataclass(frozen=True)
class ReleaseCheck:
    """One row of ``report.json``'s ``versions``: the repro under one torch release.

    ``fails``: None when the release could not be checked (``note`` says why).
    ``same_failure``: it fails with the failure it fails with here.
    """

    torch: str
    where: str
    fails: bool | None
    same_failure: bool
    seconds: float = 0.0
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "torch": self.torch,
            "where": self.where,
            "fails": self.fails,
            "same_failure": self.same_failure,
        }
        return {**out, "seconds": round(self.seconds, 2), **({"note": self.note} if self.note else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReleaseCheck:
        return cls(
            data["torch"], data["where"], data.get("fails"), bool(data.get("same_failure")),
            data.get("seconds", 0.0), data.get("note"),
        )  # fmt: skip


@dataclass(frozen=True)
class Releases:
    """Every release checked (this environment's first), and what they say together."""

    checks: tuple[ReleaseCheck, ...]
    fixed_in: str | None
    regressed_in: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "versions": [c.to_json() for c in self.checks],
            "fixed_in": self.fixed_in,
            "regressed_in": self.regressed_in,
        }

    @classmethod
    def of(cls, checks: list[ReleaseCheck]) -> Releases:
        return cls(tuple(checks), fixed_in(checks), regressed_in(checks))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Releases | None:
        if data.get("versions") is None:
            return None
        return cls(
            tuple(ReleaseCheck.from_json(c) for c in data["versions"]), data.get("fixed_in"), data.get("regressed_in")
        )


def release_key(version: str) -> tuple[int, ...]:
    """``2.15.0+cu132`` -> (2, 15, 0): releases compare by their numbers (a local build label is not a release)."""
    numbers = re.match(r"(\d+(?:\.\d+)*)", version)
    return tuple(int(n) for n in numbers.group(1).split(".")) if numbers else ()


def _ours(checks: list[ReleaseCheck]) -> ReleaseCheck | None:
    return next((c for c in checks if c.where == THIS_ENVIRONMENT), None)


def fixed_in(checks: list[ReleaseCheck]) -> str | None:
    """The oldest listed release newer than this environment's on which the repro passes, every newer one passing too."""
    ours = _ours(checks)
    if ours is None or not ours.fails:
        return None
    newer = sorted(
        (c for c in checks if c.fails is not None and release_key(c.torch) > release_key(ours.torch)),
        key=lambda c: release_key(c.torch),
    )
    answer = None
    for check in reversed(newer):
        if check.fails:
            break
        answer = public_version(check.torch)
    return answer


def public_version(version: str) -> str:
    """``2.15.0+cu132`` -> ``2.15.0``: the release a user installs (the build label says only which wheel)."""
    return version.partition("+")[0]


def regressed_in(checks: list[ReleaseCheck]) -> str | None:
    """The oldest listed release, up to this environment's, from which on every one fails the same way, when an older one passed."""
    ours = _ours(checks)
    if ours is None or not ours.fails:
        return None
    older = sorted(
        (c for c in checks if c.fails is not None and release_key(c.torch) < release_key(ours.torch)),
        key=lambda c: release_key(c.torch),
    )
    first = ours.torch
    for check in reversed(older):
        if not check.fails:
            return public_version(first)
        if not check.same_failure:
            return None  # it failed another way there: where this failure began is not known
        first = check.torch
    return None


def signature_in_output(returncode: int | None, stderr: str) -> Signature | None:
    """The failure a repro's run printed, for a repro that does not record its own (torch's).

    A signal is a crash; otherwise the last ``SomeError: message`` line, with a
    compiler's first diagnostic after it as pt2kit's signatures carry one.
    """
    from pt2kit.signature import signature_of_crash

    if returncode is None or returncode == 0:
        return None
    if returncode < 0:
        return signature_of_crash(-returncode).signature
    raised = [
        m
        for line in stderr.splitlines()
        if (m := re.match(r"^\s*(?:[A-Za-z_][\w.]*\.)?([A-Za-z_]\w*(?:Error|Exception)): (.*)$", line))
    ]
    if not raised:
        return None
    exception, message = raised[-1].group(1), normalize_message(raised[-1].group(2))
    diagnostic = compiler_diagnostic(stderr)
    kind = "accuracy" if exception == "AccuracyError" else "runtime_error"
    return Signature(kind, exception, message + (DIAGNOSTIC_SEPARATOR + diagnostic if diagnostic else ""))


def check_release(
    env: Environment | Unavailable, repro: Path, target: Signature | None, timeout: float | None, ran: Any = None
) -> ReleaseCheck:
    """``repro`` under one release: does it fail, and as ``target`` (the failure here)? ``ran``: its run, when done."""
    from ..stages.elsewhere import run_elsewhere

    if isinstance(env, Unavailable):
        return ReleaseCheck(env.spec.version or "?", env.spec.where, None, False, note=env.why)
    ran = ran or run_elsewhere(repro, timeout, python=env.python)
    where = THIS_ENVIRONMENT if env.spec.text == THIS_ENVIRONMENT else env.spec.where
    if ran.returncode is None:  # a hang is an answer only for a repro whose failure is one
        hangs = target is not None and target.kind == Kind.TIMEOUT
        return ReleaseCheck(env.torch, where, True if hangs else None, hangs, ran.seconds, "did not finish in time")
    fails = ran.returncode != 0
    same = fails and target is not None and shows_failure(ran.returncode, ran.stderr, target)
    note = None if not fails or same else f"fails another way: {_last_line(ran.stderr)}"
    return ReleaseCheck(env.torch, where, fails, same, ran.seconds, note)


def _last_line(stderr: str) -> str:
    from ..stages.elsewhere import last_words

    return last_words(stderr) or "(no output)"


def this_environment() -> Environment:
    import torch

    return Environment(ReleaseSpec(THIS_ENVIRONMENT), Path(sys.executable), torch.__version__)


class Preparing:
    """The environments of ``specs`` made usable in the background, from the start of a run.

    A version's install downloads and unpacks for minutes; it starts with the run, one
    pip at a time, beside the reduction (mostly network and disk), and :meth:`check`
    waits for it only once the repro is written. ``logs``: where pip's output goes.
    """

    def __init__(self, specs: list[ReleaseSpec], logs: Path | None = None) -> None:
        self.specs = specs
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pt2kit-releases") if specs else None
        self._ready: list[Future[Environment | Unavailable]] = [
            self._pool.submit(environment, spec, log=None if logs is None else logs / f"pip-{_safe(spec.text)}.log")
            for spec in specs
        ] if self._pool else []  # fmt: skip

    def environments(self) -> list[Environment | Unavailable]:
        """Every environment, waiting for the ones still being built."""
        out: list[Environment | Unavailable] = []
        for spec, ready in zip(self.specs, self._ready):
            try:
                out.append(ready.result())
            except Exception as e:  # noqa: BLE001 - an environment pt2kit could not make is a note, never the run
                out.append(Unavailable(spec, f"{type(e).__name__}: {str(e)[:200]}"))
        return out

    def check(
        self,
        repro: Path,
        target: Signature | None,
        timeout: float | None,
        ours: ReleaseCheck | None = None,
        jobs: int = 1,
    ) -> Releases:
        """The repro under every release, ``jobs`` at a time (each a process of its own); ``ours``: this
        environment's row when already known (a verified repro)."""
        from concurrent.futures import ThreadPoolExecutor

        environments = [*([this_environment()] if ours is None else []), *self.environments()]
        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="pt2kit-release-check") as pool:
            checked = list(pool.map(lambda env: check_release(env, repro, target, timeout), environments))
        if ours is None:
            ours, checked = checked[0], checked[1:]
        return Releases.of([ours, *sorted(checked, key=lambda c: release_key(c.torch))])

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def _safe(text: str) -> str:
    return re.sub(r"[^\w.-]+", "_", text).strip("_")[:60] or "env"
