"""``issue.md``: a run directory as a bug report upstream can take, in the shape of PyTorch's template.

Drawn, like ``report.html``, from the very data of ``report.json`` and the repro beside it:
a title, the failure in one line, the repro inline, the stage table, the subsystem and
workaround, the other torch releases where they were checked, and the environment as
``torch.utils.collect_env`` prints it (PyTorch's template asks for exactly that).

It is meant to be pasted into a public tracker, so nothing of the user's machine is in it
beyond what ``collect_env`` prints: absolute paths outside that block are cut to their last
part (the repro names its data file relative to itself, and the run directory is ``.``).
A run that found no failure writes none: there is nothing to report. One that found a failure
but no repro (exit 5) holds pt2kit's diagnosis, and the program itself as the repro.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from pt2kit.errors import NotReproducible
from pt2kit.signature import Kind, error_shown, message_as_said, shown

ISSUE_MD = "issue.md"
_ABSOLUTE = re.compile(r"(?<![\w)\]}.:/])(?:~/|/)(?:[\w.+@-]+/)+([\w.+@-]*)")  # (not a URL's path)
_STAGES = ("eager", "aot_eager", "aot_eager_decomp_partition")
_KIND_WORDS = {
    Kind.ACCURACY: "a wrong answer",
    Kind.COMPILE_ERROR: "a compile error",
    Kind.RUNTIME_ERROR: "a run-time error",
    Kind.CRASH: "a crash",
    Kind.TIMEOUT: "a hang",
}


_environment: Future[str] | None = None


def _collect_environment() -> str:
    if os.environ.get("PT2KIT_COLLECT_ENV") == "0":  # (pt2kit's own test suite, for speed: see tests/conftest.py)
        return "(not collected: PT2KIT_COLLECT_ENV=0)"
    try:
        from torch.utils.collect_env import get_pretty_env_info

        return get_pretty_env_info()
    except Exception as e:  # noqa: BLE001 - a report without its environment still helps
        return f"(torch.utils.collect_env failed: {type(e).__name__}: {e})"


def prefetch_environment() -> None:
    """Start collecting the environment now, beside the run (it runs pip, lscpu, gcc: seconds)."""
    global _environment
    if _environment is None:
        _environment = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pt2kit-collect-env").submit(
            _collect_environment
        )


def environment() -> str:
    """``python -m torch.utils.collect_env``'s report of this machine, collected once per process."""
    prefetch_environment()
    assert _environment is not None
    return _environment.result()


def scrub(text: str, run_dir: Path | None = None) -> str:
    """``text`` without the absolute paths of this machine: the run directory is ``.``, any other path its last part."""
    if run_dir is not None:
        text = text.replace(str(run_dir.resolve()) + "/", "").replace(str(run_dir) + "/", "")
    return _ABSOLUTE.sub(lambda m: m.group(1) or ".", text)


def has_failure(report: dict[str, Any]) -> bool:
    failure = report.get("failure") or {}
    return bool(failure.get("kind") or failure.get("signature") or failure.get("exception"))


def title(report: dict[str, Any]) -> str:
    failure = report["failure"]
    stage = failure.get("stage") or report.get("program_fails_at") or report.get("fails_in") or "torch.compile"
    subsystem = {"dynamo": "dynamo", "inductor": "inductor", "aot_eager": "aot", "aot_eager_decomp_partition": "decomp", "eager": "dynamo"}
    ops = report.get("ops_after") or []
    what = error_shown(failure.get("exception"), failure.get("message"))
    where = f" in {', '.join(ops[:3])}" if ops and len(ops) <= 3 else ""
    return f"[{subsystem.get(stage, stage)}] {failure.get('kind')}{where}: {what}"[:140].rstrip()


def render_issue(report: dict[str, Any], repro: str | None, run_dir: Path | None = None) -> str:
    """The whole ``issue.md`` text for ``report`` (``report.json``'s data) and the repro's source."""
    failure = report["failure"]
    parts = [f"# {title(report)}", "", "### 🐛 Describe the bug", ""]
    stage = failure.get("stage") or report.get("program_fails_at")
    where = (
        "in dynamo, at the **eager** stage (no backend compiles yet)"
        if stage == "eager"
        else f"at the **{stage}** stage"
        if stage
        else "in dynamo (no backend compiles yet)"
        if report.get("fails_in") == "dynamo"
        else ""
    )
    exception = failure.get("exception")
    error = f"`{exception}`, raised with no message" if failure.get("message") == exception else f"`{exception}: {_message(failure)}`"
    parts.append(
        f"`torch.compile` fails{' ' * bool(where)}{where} with {_KIND_WORDS.get(failure.get('kind'), failure.get('kind'))}: {error}."
    )
    if report.get("nodes_before"):
        parts.append(
            f"Minified by pt2kit from a graph of {report['nodes_before']} nodes to {report['nodes_after']}"
            f" ({', '.join(report.get('ops_after') or []) or 'no ops'})."
        )
    if repro is not None:
        parts += ["", "Repro (plain torch; `python repro.py` exits non-zero and prints the failure):", "", "```python"]
        parts += [repro.rstrip(), "```"]
        if report.get("inputs") == "real" and "torch.load(" in repro:  # (few real values are literals in it)
            parts.append("The repro loads its real inputs from the data file named in it: attach that file too.")
    else:
        parts += _no_repro(report)
    stages = report.get("stages") or {}
    if stages:
        parts += ["", "| stage | " + " | ".join(stages) + " |", "|---" * (len(stages) + 1) + "|"]
        parts.append("| result | " + " | ".join(stages.values()) + " |")
        first = next((s for s, v in stages.items() if v == "fail"), None)
        lighter = list(stages)[: list(stages).index(first)] if first is not None else []
        if first is not None and first not in _STAGES and all(stages[s] == "pass" for s in lighter):
            parts.append(f"\nEvery stage before `{first}` passes: the bug is in `{first}` itself.")
    parts += _below(report) + _releases(report)
    versions = ["", "### Versions", "", "```", environment().rstrip(), "```", ""]
    return scrub("\n".join(parts), run_dir) + "\n" + "\n".join(versions)


#: The most of torch's own message the bug's first line quotes (the signature's is cut shorter, and normalized).
MESSAGE_SHOWN = 600


def _message(failure: dict[str, Any]) -> str:
    """The failure's message as torch said it (its first line, uncut up to :data:`MESSAGE_SHOWN`), else the signature's."""
    message = failure.get("message") or ""
    said = message_as_said(message, failure.get("details") or "")
    if said is None:
        return shown(message)  # (details that are not the message uncut: a wrong answer's, say)
    return said if len(said) <= MESSAGE_SHOWN else said[:MESSAGE_SHOWN] + "…"


#: The longest program inlined as its own repro; a longer one is named, to attach.
PROGRAM_LINES = 150


def _no_repro(report: dict[str, Any]) -> list[str]:
    """A run that ended without a repro.py: what pt2kit found (its message), and, where the program fails but no
    graph does alone (exit 5: the failure needs the whole program, on one backend where ``program_fails_at``
    says which), the program itself as the repro."""
    out = ["", f"pt2kit found no smaller repro: {report['message']}"] if report.get("message") else []
    stage, script = report.get("program_fails_at"), report.get("script")
    if not script or not (stage or report.get("exit_code") == NotReproducible.exit_code):
        return out
    try:
        program = Path(script).read_text()
    except (OSError, UnicodeDecodeError):
        return out
    name = Path(script).name
    said = f"Repro: the program itself, `{report.get('launch') or 'python'} {name}`" + (
        f"; it fails the same way with every `torch.compile` on `backend='{stage}'`" if stage else ""
    )
    if len(program.splitlines()) > PROGRAM_LINES:
        return [*out, "", f"{said} ({len(program.splitlines())} lines: attach {name})."]
    return [*out, "", f"{said}:", "", "```python", program.rstrip(), "```"]


def _below(report: dict[str, Any]) -> list[str]:
    out = []
    subsystem, workaround = report.get("subsystem"), report.get("workaround")
    if subsystem:
        named = " / ".join(str(subsystem[k]) for k in ("backend", "name", "detail") if subsystem.get(k))
        out.append(f"Subsystem: {named}" + (f" (application {subsystem['application']})" if subsystem.get("application") else ""))
        if subsystem.get("name") == "lowerings":  # (CompilerBisector's answer is a fallback that avoids it)
            out.append("(the first lowering whose fallback to eager avoids the failure: the bug is in it or in the kernel it is fused into)")
    if workaround:
        verified = {"program": "the whole program runs right with it", "repro": "repro.py passes with it"}
        said = verified.get(workaround.get("verified_on"), "the graph runs right with it")
        out.append(
            f"Workaround: {workaround.get('what')} ({said}" + (f"; the program {workaround['program']} with it" if workaround.get("program") else "") + ")"
        )
        if workaround.get("code"):
            out += ["```python", workaround["code"].rstrip(), "```"]
    return ["", *out] if out else []


def _releases(report: dict[str, Any]) -> list[str]:
    versions = report.get("versions")
    if not versions:
        return []
    said = {None: "not checked", True: "fails", False: "passes"}
    out = [
        "",
        "Other torch releases (the repro alone, an empty Inductor cache):",
        "",
        "| torch | repro | same failure |",
    ]
    out.append("|---|---|---|")
    out += [f"| {v['torch']} | {said[v.get('fails')]} | {'yes' if v.get('same_failure') else ''} |" for v in versions]
    if report.get("fixed_in"):
        out.append(f"\nFixed in torch {report['fixed_in']}.")
    if report.get("regressed_in"):
        out.append(f"\nRegressed in torch {report['regressed_in']}.")
    return out


def write_issue(run_dir: Path, report: dict[str, Any]) -> Path | None:
    """``run_dir/issue.md`` for a run that found a failure; None (and nothing written) for one that did not."""
    if not has_failure(report):
        return None
    repro_path = Path(report["repro"]) if report.get("repro") else None
    try:
        repro = repro_path.read_text() if repro_path is not None else None
    except OSError:
        repro = None
    path = run_dir / ISSUE_MD
    path.write_text(render_issue(report, repro, run_dir))
    return path
