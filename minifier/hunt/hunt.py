"""The hunt: draw programs, judge each in isolation, triage, minify each new failure, keep the distinct ones.

:func:`hunt` is the loop behind ``minify hunt``. Its steps, for each drawn program
(:mod:`~minifier.hunt.programs`):

1. written to ``OUT/work/`` and judged in a child of pt2kit's warm process
   (:func:`~minifier.hunt.judge.judge`); a crash or a hang is that child's, and a verdict.
   ``--jobs`` programs are judged side by side, a core each; the steps below take them
   one at a time, in the order drawn;
2. triaged (:mod:`~minifier.hunt.triage`): each re-judging is one more child;
3. a suspect is shortened first: the shortest prefix that fails the same way, its last
   step the one output (:meth:`Hunt.shorten`, a judging a step). One whose failure and
   shortened op set the hunt has not met (and whose signature it has minified fewer
   than :data:`MINIFY_PER_SIGNATURE` times) is minified by ``minify run`` as a user
   would run it, in a process of its own;
4. the minimized failure's identity, :func:`finding_key` (kind, exception, the op set
   of the repro, subsystem), decides whether it is a new bug. A new one is written to
   ``OUT/findings/<n>-<ops>/``: the program, its ``repro.py``, ``report.json`` and
   ``finding.json`` (why it is torch's bug, and which of the corpus's invariants held).

A minification that does not end in a verified repro, or that breaks the query bound,
is pt2kit's bug, not torch's: the hunt lists it under ``pt2kit_bugs``. The whole run
is time-boxed; Ctrl-C ends it with the summary so far.
"""

from __future__ import annotations

import functools
import json
import math
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape
from pt2kit.signature import Kind, Signature
from .judge import Judging, Outcome, Verdict, judge
from .programs import Program, generate, render, shortened
from .triage import Rule, Suspect, triage

#: At most this many minifications per signature: a wrong answer's names only its kind
#: (``values``), and one bug shortens to several op sets.
MINIFY_PER_SIGNATURE = 3
JUDGE_TIMEOUT = 90.0
MINIFY_TIMEOUT = 600.0
#: Programs drawn at once (a short hunt draws fewer: drawing 1000 takes about 15 s).
BATCH = 1000


@dataclass
class Finding:
    """One distinct bug the hunt found and minified."""

    key: str
    failure: dict[str, str]
    stage: str
    ops: list[str]
    program: str
    repro: str
    why: str
    nodes: str
    queries: int
    within_query_bound: bool
    versions: list[dict[str, Any]] | None = None  # the repro under other torch releases (--torch-versions)
    fixed_in: str | None = None


@dataclass
class HuntSummary:
    """What a hunt did: the ``--json`` document (docs/hunt.md)."""

    programs: int = 0
    seconds: float = 0.0
    torch: str = ""
    seed: int = 0
    findings: list[Finding] = field(default_factory=list)
    suspects: int = 0
    duplicates: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    pt2kit_bugs: list[dict[str, str]] = field(default_factory=list)
    interrupted: bool = False

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        hours = max(self.seconds, 1.0) / 3600
        data["rates"] = {
            "programs_per_hour": round(self.programs / hours),
            "findings_per_hour": round(len(self.findings) / hours, 1),
        }
        for item in data["findings"]:
            item["signature"] = item.pop("key")
            item["kind"] = item["failure"]["kind"]
        return data


def finding_key(report: dict[str, Any]) -> str:
    """A minimized failure's identity: stage, kind and exception, the repro's op set, and the subsystem blamed."""
    failure, subsystem = report["failure"], report.get("subsystem") or {}
    ops = ", ".join(sorted(set(report.get("ops_after") or [])))
    blamed = f" · {subsystem.get('name')}" if subsystem.get("name") else ""
    return f"{failure['stage']}/{failure['kind']} {failure['exception']}: {ops}{blamed}"


def query_bound(nodes: int) -> int:
    """The corpus's bound on reduction queries for a graph of ``nodes`` nodes."""
    return 2 * math.ceil(math.log2(max(nodes, 2))) + 16


class Hunt:
    """One hunt's state: its directory, its worker, what it has seen."""

    def __init__(self, out: Path, seed: int, progress: Any, backend: str | None = None, releases: str = "") -> None:
        from ..isolation.worker import Worker

        self.out, self.seed, self.progress, self.backend, self.releases = out, seed, progress, backend, releases
        (out / "work").mkdir(parents=True, exist_ok=True)
        self.worker = Worker(log_dir=out / "logs", timeout=JUDGE_TIMEOUT)
        self.worker.warm_up("inductor", preload=["minifier.hunt.judge"])
        self.summary = HuntSummary(seed=seed)
        self.minified: Counter[Signature] = Counter()
        self.seen: set[tuple[Signature, tuple[str, ...]]] = set()
        self.keys: set[str] = set()

    def ask(self, path: Path, judging: Judging = Judging()) -> Verdict:
        """Judge the program at ``path`` in a fresh child; a crash or a hang is a failed verdict."""
        return self.ask_all([path], judging)[0]

    def ask_all(self, paths: list[Path], judging: Judging = Judging()) -> list[Verdict]:
        """Judge each program at ``paths``, side by side, a fresh child each; the verdicts in order."""
        limit = JUDGE_TIMEOUT * judging.patience
        running = [
            self.worker.start(functools.partial(judge, str(path), judging), label=path.stem, timeout=limit)
            for path in paths
        ]
        self.worker.wait(running, on_wait=self.progress.tick)
        verdicts = []
        for result in (r.result() for r in running):
            if result.failure is not None:
                verdicts.append(Verdict(Outcome.FAILED, result.failure.signature, result.failure.details[-2000:]))
            else:
                assert result.value is not None
                verdicts.append(result.value)
        return verdicts

    def write(self, number: int, program: Program) -> Path:
        path = self.out / "work" / f"p{number:05d}.py"
        path.write_text(render(program, f"Program {number} of minify hunt --seed {self.seed}."))
        return path

    def consider(self, program: Program, path: Path, first: Verdict, deadline: float) -> None:
        """Triage the program at ``path``, judged ``first``; minify a new suspect."""
        verdict = triage(first, functools.partial(self.ask, path))
        if isinstance(verdict, Rule):
            self.summary.dropped[verdict.value] = self.summary.dropped.get(verdict.value, 0) + 1
        if isinstance(verdict, Suspect):
            self.summary.suspects += 1
            short, short_path = self.shorten(program, path, verdict)
            seen = (verdict.failure, short.ops)
            if (
                seen not in self.seen
                and self.minified[verdict.failure] < MINIFY_PER_SIGNATURE
                and time.monotonic() < deadline
            ):
                self.seen.add(seen)
                self.minified[verdict.failure] += 1
                self.minify(short_path, verdict, deadline)
                return
            self.summary.duplicates += 1
        path.unlink(missing_ok=True)

    def shorten(self, program: Program, path: Path, suspect: Suspect) -> tuple[Program, Path]:
        """The shortest prefix of ``program`` that fails the same way with its last step as the output.

        One judging per step at most: far cheaper than a ``minify run``, and two programs
        that shorten to the same ops with the same failure are one bug, minified once.
        """
        for last in range(len(program.steps) - 1):
            short = shortened(program, last)
            short_path = path.with_name(f"{path.stem}-{last}.py")
            short_path.write_text(
                render(short, f"Program {path.stem} of minify hunt --seed {self.seed}, up to step {last}.")
            )
            if self.ask(short_path).failure == suspect.failure:
                return short, short_path
            short_path.unlink()
        return program, path

    def minify(self, program: Path, suspect: Suspect, deadline: float) -> None:
        """``minify run`` on the program, as a user runs it; a new bug becomes a finding."""
        self.progress.update(f"minifying {program.name}: {suspect.failure}")
        command = [sys.executable, "-m", "minifier", "run", "--wait", str(program), "--json", "--out", str(self.out / "runs")]
        if suspect.failure.kind == Kind.ACCURACY:
            command.append("--accuracy")
        if self.backend:
            command += ["--backend", self.backend]
        if self.releases:
            command += ["--torch-versions", self.releases]
        limit = max(120.0, min(MINIFY_TIMEOUT, deadline - time.monotonic() + 120.0))
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=limit, check=False)
            report = json.loads(done.stdout or "{}")
        except (subprocess.TimeoutExpired, json.JSONDecodeError) as e:
            self._pt2kit_bug(program, f"minify run gave no report ({type(e).__name__})")
            return
        if report.get("status") != "minified" or not report.get("verified"):
            # a repro written but not verified says why in its notes, not in its message
            why = report.get("message") or "; ".join(report.get("notes") or ())
            self._pt2kit_bug(program, f"minify run ended {report.get('status')} (exit {done.returncode}): {why}")
            return
        key = finding_key(report)
        if key in self.keys:
            self.summary.duplicates += 1
            return
        self.keys.add(key)
        self._write(program, suspect, report, key)

    def _pt2kit_bug(self, program: Path, what: str) -> None:
        kept = self.out / "pt2kit_bugs" / program.name
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(program, kept)
        self.summary.pt2kit_bugs.append({"program": str(kept), "what": what[:300]})
        self.progress.log(f"pt2kit could not minify {program.name}: {escape(what[:200])}")

    def _write(self, program: Path, suspect: Suspect, report: dict[str, Any], key: str) -> None:
        slug = re.sub(r"[^a-z0-9]+", "_", "-".join(sorted(set(report.get("ops_after") or ["none"]))).lower())[:60]
        home = self.out / "findings" / f"{len(self.summary.findings) + 1:02d}-{slug}"
        home.mkdir(parents=True, exist_ok=True)
        shutil.copy(program, home / "program.py")
        shutil.copy(report["repro"], home / "repro.py")
        shutil.copy(Path(report["run_dir"]) / "report.json", home / "report.json")
        for beside in Path(report["repro"]).parent.iterdir():  # what the repro reads: its data file
            if beside.is_file() and beside.suffix == ".pt":
                shutil.copy(beside, home / beside.name)
        nodes, queries = report.get("nodes_before", 0), report.get("reduction_queries", report.get("queries", 0))
        finding = Finding(
            key,
            report["failure"],
            report["failure"]["stage"],
            sorted(set(report.get("ops_after") or [])),
            str(home / "program.py"),
            str(home / "repro.py"),
            suspect.why,
            f"{nodes} -> {report.get('nodes_after')}",
            queries,
            queries <= query_bound(nodes),
            report.get("versions"),
            report.get("fixed_in"),
        )
        (home / "finding.json").write_text(json.dumps(asdict(finding), indent=2) + "\n")
        self.summary.findings.append(finding)
        if not finding.within_query_bound:
            self.summary.pt2kit_bugs.append(
                {"program": finding.program, "what": f"{queries} reduction queries for {nodes} nodes"}
            )
        self.progress.log(f"finding {len(self.summary.findings)}: {key}")


def hunt(
    minutes: float, seed: int, out: Path, progress: Any, backend: str | None = None, releases: str = ""
) -> HuntSummary:
    """Hunt for ``minutes``: programs drawn from ``seed``, findings under ``out``; ``releases``: each finding's
    repro also run under these torch releases (``--torch-versions``)."""
    import torch

    from ..isolation.jobs import default_jobs

    start = time.monotonic()
    deadline = start + minutes * 60
    state = Hunt(out, seed, progress, backend, releases)
    state.summary.torch = torch.__version__
    side_by_side = default_jobs()  # first judgings, one core each; triage and minifying take them in order
    try:
        batch = 0
        while time.monotonic() < deadline:
            drawn = generate(seed * 1000 + batch, min(BATCH, max(50, int(minutes * 60))))
            for at in range(0, len(drawn), side_by_side):
                if time.monotonic() >= deadline:
                    break
                chunk = drawn[at : at + side_by_side]
                paths = [state.write(state.summary.programs + 1 + k, program) for k, program in enumerate(chunk)]
                for program, path, first in zip(chunk, paths, state.ask_all(paths)):
                    state.summary.programs += 1
                    found = len(state.summary.findings)
                    progress.update(
                        f"program {state.summary.programs} · {state.summary.suspects} suspects · {found} findings"
                    )
                    state.consider(program, path, first, deadline)
            batch += 1
    except KeyboardInterrupt:
        state.summary.interrupted = True
    finally:
        state.worker.close()
        shutil.rmtree(out / "work", ignore_errors=True)  # findings and pt2kit's own bugs hold copies
        progress.clear()
        state.summary.seconds = round(time.monotonic() - start, 1)
        (out / "hunt.json").write_text(json.dumps(state.summary.to_json(), indent=2) + "\n")
    return state.summary
