"""A property-based fuzzer for pt2kit's minifier: random programs, planted bugs, invariants.

Hand-written minifier tests use a handful of programs their authors thought of. This
module generates the programs instead (with Hypothesis), plants a bug in each, runs
``minify run --json`` on it as a user would, and checks what must hold for *every*
program:

1. **status**: the run ends with ``"status": "minified"`` (and one JSON document);
2. **identity**: the failure has the planted stage (the planted backend's name), kind,
   exception type and message, at the planted boundary (``dynamo`` for a plain
   backend; ``aot`` with graph kind ``forward``/``inference``/``backward`` for an
   ``aot_autograd`` one);
3. **1-minimal**: ``ops_after`` is exactly the planted trigger ops, one node each
   (aten names for aot graphs, torch-level names for dynamo graphs);
4. **query bound**: ``queries <= 2*log2(n) + C`` with ``n = nodes_before`` (see
   :data:`QUERY_CONSTANT` for how ``C`` is derived);
5. **repro**: the written ``repro.py`` fails the same way with torch alone: run from
   another directory, with ``PT2KIT_AUTOLOAD=0``, pt2kit's packages blocked, and a
   ``PYTHONPATH`` holding only the planted-backend module's directory; same exception
   type and first message line, the same signal for a crash, still running after the
   timeout for a hang, an ``AccuracyError`` for a wrong answer.

The pieces, top to bottom:

- :class:`Template`: the vocabulary. Each template is one way to compute a
  ``(B, D)`` tensor from earlier ones (elementwise, reductions, matmul, softmax,
  cat/slice, view round trips), spelled several ways (``torch.cos(v)``, ``v.cos()``).
  ``uses`` names the trigger ops it contains, so that a program never holds a
  trigger op except where it was planted (``test_fuzz.py`` checks these sets against
  real dynamo and AOTAutograd graphs).
- :class:`Program`: a straight-line program, its planted bug (level, kind, trigger
  ops) and whether it runs backward. :meth:`Program.script` renders it as the user
  script pt2kit is run on. Every value that nothing reads is returned, so dynamo
  keeps every op.
- :func:`programs`: the Hypothesis strategy. It is built to shrink well: steps are
  a list (deleting one keeps the rest valid), operands are offsets back from the
  newest value (shrinking to "the previous value"), spellings and bug choices shrink
  to the first alternative.
- :func:`check_program`: runs pt2kit and checks the invariants, raising one
  :class:`InvariantBroken` subclass per invariant so that Hypothesis keeps a
  shrunk program failing *the same way* while it shrinks.
- :class:`Tally` and :func:`long_profile`: the ``make fuzz`` driver, with per-case
  figures and a summary (cases, failures found, median queries, median seconds).

The planted backends live in :mod:`fuzz_backends` (torch only), which a repro imports
by module name.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fuzz_backends as fb
from hypothesis import strategies as st

from support.paths import USER_MODULES
from support.running import RUN_REPRO

# --------------------------------------------------------------------------- #
# The vocabulary
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Template:
    """One step of a program: ``forms`` are spellings of the same computation.

    A form is a Python expression over ``{a}`` (and ``{b}`` for two operands),
    ``w`` (a ``(D, D)`` weight) and the sizes ``{B}``, ``{D}``, ``{H}`` (= D // 2).
    Every value in a program is a ``(B, D)`` float tensor.
    """

    name: str
    arity: int
    forms: tuple[str, ...]
    uses: frozenset[str] = frozenset()  # trigger ops (fuzz_backends.TRIGGERS) it contains

    def __repr__(self) -> str:  # Hypothesis prints failing programs: keep them readable
        return f"<{self.name}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # Hypothesis' pretty printer
        printer.text(repr(self))


def _t(name: str, arity: int, *forms: str, uses: tuple[str, ...] = ()) -> Template:
    return Template(name, arity, forms, frozenset(uses))


#: The trigger ops, as steps: a planted bug fires on these.
TRIGGER_TEMPLATES: dict[str, Template] = {
    "cos": _t("cos", 1, "torch.cos({a})", "{a}.cos()", uses=("cos",)),
    "sin": _t("sin", 1, "torch.sin({a})", "{a}.sin()", uses=("sin",)),
    "exp": _t("exp", 1, "torch.exp({a})", "{a}.exp()", uses=("exp",)),
    "tanh": _t("tanh", 1, "torch.tanh({a})", "{a}.tanh()", uses=("tanh",)),
    "sigmoid": _t("sigmoid", 1, "torch.sigmoid({a})", "{a}.sigmoid()", uses=("sigmoid",)),
    "relu": _t("relu", 1, "torch.relu({a})", "{a}.relu()", "torch.nn.functional.relu({a})", uses=("relu",)),
    "softmax": _t("softmax", 1, "torch.softmax({a}, dim=-1)", "{a}.softmax(-1)", "torch.nn.functional.softmax({a}, dim=-1)", uses=("softmax",)),
    "matmul": _t("matmul", 1, "{a} @ w", "torch.matmul({a}, w)", "{a}.matmul(w)", "torch.mm({a}, w)", uses=("matmul",)),
}
assert set(TRIGGER_TEMPLATES) == set(fb.TRIGGERS)

#: Everything else a program computes with. No trigger op hides in these (``uses`` is empty).
FILLER_TEMPLATES: tuple[Template, ...] = (
    _t("scale", 1, "{a} * 0.5", "torch.mul({a}, 0.5)", "{a}.mul(0.5)"),
    _t("shift", 1, "{a} + 1.0", "torch.add({a}, 1.0)", "{a}.add(1.0)"),
    _t("neg", 1, "-{a}", "torch.neg({a})", "{a}.neg()"),
    _t("abs", 1, "torch.abs({a})", "{a}.abs()"),
    _t("gelu", 1, "torch.nn.functional.gelu({a})"),
    _t("add", 2, "{a} + {b}", "torch.add({a}, {b})", "{a}.add({b})"),
    _t("sub", 2, "{a} - {b}", "torch.sub({a}, {b})", "{a}.sub({b})"),
    _t("mul", 2, "{a} * {b}", "torch.mul({a}, {b})", "{a}.mul({b})"),
    _t("center", 1, "{a} - {a}.mean(dim=-1, keepdim=True)", "{a} - torch.mean({a}, dim=-1, keepdim=True)"),
    _t("colnorm", 1, "{a} / (1.0 + {a}.abs().sum(dim=0, keepdim=True))", "torch.div({a}, torch.sum(torch.abs({a}), dim=0, keepdim=True) + 1.0)"),
    _t("maxshift", 1, "{a} - {a}.amax(dim=-1, keepdim=True)", "{a} - torch.amax({a}, dim=-1, keepdim=True)"),
    _t("catslice", 2, "torch.cat([{a}[:, :{H}], {b}[:, {H}:]], dim=1)", "torch.cat(({b}[:, {H}:], {a}[:, :{H}]), dim=-1)"),
    _t("stackslice", 2, "torch.cat([{a}, {b}], dim=0)[{B}:]", "torch.cat([{a}, {b}])[:{B}]"),
    _t("viewtrip", 1, "{a}.reshape(-1).reshape({B}, {D})", "{a}.contiguous().view(-1).view({B}, {D})", "{a}.t().contiguous().t()", "{a}.unsqueeze(0).squeeze(0)", "{a}.transpose(0, 1).reshape({D}, {B}).transpose(0, 1)"),
    _t("where", 2, "torch.where({a} > 0, {a}, {b})", "torch.where({a}.gt(0.0), {b}, {a} * 0.5)"),
)

ALL_TEMPLATES: tuple[Template, ...] = (*TRIGGER_TEMPLATES.values(), *FILLER_TEMPLATES)


# --------------------------------------------------------------------------- #
# Programs
# --------------------------------------------------------------------------- #


@dataclass(frozen=True)
class Step:
    template: Template
    form: int  # index into template.forms
    backs: tuple[int, ...]  # operands, as offsets back from the newest value (0 = newest)


@dataclass(frozen=True)
class Program:
    """A straight-line program with one planted bug."""

    level: str  # dynamo | fw | bw (see fuzz_backends)
    kind: str  # compile_error | runtime_error | abort | segfault | hang | accuracy
    triggers: tuple[str, ...]  # sorted; the bug fires when the graph holds all of them
    train: bool  # the script runs backward
    steps: tuple[Step, ...]
    B: int = 4
    D: int = 8

    @property
    def backend(self) -> str:
        return fb.backend_name(self.level, self.kind, self.triggers)

    @property
    def bucket(self) -> str:
        return f"{self.level}/{self.kind}"

    def describe(self) -> str:
        return f"{self.level}/{self.kind} on {'+'.join(self.triggers)}, {len(self.steps)} steps{', backward' if self.train else ''}, B={self.B} D={self.D}"

    def lines(self) -> tuple[list[str], list[str]]:
        """The body lines ``v<i> = <expr>`` and the names returned (every value nothing reads)."""
        values = ["x"]
        read: set[str] = set()
        body = []
        sizes = {"B": self.B, "D": self.D, "H": self.D // 2}
        for i, step in enumerate(self.steps, start=1):
            operands = [values[len(values) - 1 - (back % len(values))] for back in step.backs]
            read.update(operands)
            form = step.template.forms[step.form % len(step.template.forms)]
            expr = form.format(a=operands[0], b=operands[-1], **sizes)
            body.append(f"v{i} = {expr}")
            values.append(f"v{i}")
        returned = [v for v in values[1:] if v not in read]
        return body, returned

    def function_source(self) -> str:
        body, returned = self.lines()
        return "def f(x, w):\n" + "".join(f"    {line}\n" for line in body) + f"    return ({', '.join(returned)},)\n"

    def script(self, backends_dir: Path = USER_MODULES) -> str:
        grad = "True" if self.train else "False"
        backward = "    sum(o.sum() for o in out).backward()\n" if self.train else ""
        return (
            f'"""Generated by tests/support/fuzzing.py: {self.describe()}.\n\n'
            f"The planted bug: backend {self.backend!r}.\n"
            '"""\n'
            "import sys\n\n"
            f"sys.path.insert(0, {str(backends_dir)!r})\n"
            "import torch\n"
            "import fuzz_backends  # noqa: E402,F401  registers the planted backends\n\n\n"
            + self.function_source()
            + "\n\n"
            'if __name__ == "__main__":\n'
            "    torch.manual_seed(0)\n"
            f"    x = torch.randn({self.B}, {self.D}, requires_grad={grad})\n"
            f"    w = (torch.randn({self.D}, {self.D}) / {math.sqrt(self.D):.4f}).requires_grad_({grad})\n"
            f"    out = torch.compile(f, backend={self.backend!r}, fullgraph=True)(x, w)\n"
            + backward
            + '    print("finished:", [round(float(o.sum()), 4) for o in out])\n'
        )

    def size(self) -> tuple[int, ...]:
        """For picking the smaller of two failing programs (fewer steps first)."""
        return (len(self.steps), len(self.triggers), sum(sum(s.backs) + s.form for s in self.steps), self.B * self.D)


def evaluate(program: Program) -> list[Any]:
    """Every value the program computes, in eager (in this process; tiny tensors)."""
    import torch

    torch.manual_seed(0)
    namespace: dict[str, Any] = {"torch": torch, "x": torch.randn(program.B, program.D), "w": torch.randn(program.D, program.D) / math.sqrt(program.D)}
    body, _ = program.lines()
    values = []
    for line in body:
        exec(line, namespace)  # our own generated code
        values.append(namespace[line.split(" = ", 1)[0]])
    return values


def well_behaved(program: Program) -> bool:
    """Values stay finite and moderate, so a +0.5 bug is visible and fp64 checks are meaningful."""
    import torch

    return all(bool(torch.isfinite(v).all()) and float(v.abs().max()) < 1e3 for v in evaluate(program))


# --------------------------------------------------------------------------- #
# The strategy
# --------------------------------------------------------------------------- #


def steps_from(templates: list[Template]) -> st.SearchStrategy[Step]:
    return st.sampled_from(templates).flatmap(
        lambda t: st.builds(Step, st.just(t), st.integers(0, len(t.forms) - 1), st.tuples(*[st.integers(0, 6)] * t.arity))
    )


@st.composite
def programs(draw: Any, levels: tuple[str, ...] = fb.LEVELS, kinds: tuple[str, ...] = fb.KINDS, culprits: tuple[int, ...] = (1, 2), max_steps: int = 24) -> Program:
    """A random program with a planted bug; shrinks toward few steps and simple choices."""
    from hypothesis import assume

    level = draw(st.sampled_from(levels))
    kind = draw(st.sampled_from(kinds))
    pool = fb.triggers_for(level)
    count = draw(st.sampled_from(culprits))
    triggers = tuple(sorted(draw(st.lists(st.sampled_from(pool), min_size=count, max_size=count, unique=True))))
    train = level == "bw" or draw(st.booleans())
    fillers = [t for t in ALL_TEMPLATES if not (t.uses & set(triggers))]
    # Hypothesis keeps lists short; a drawn floor gives the reducer real work (and the
    # floor itself shrinks to 2 first, so shrinking can still delete any step).
    floor = draw(st.integers(2, max_steps // 2))
    steps = draw(st.lists(steps_from(fillers), min_size=floor, max_size=max_steps))
    for trigger in triggers:
        position = draw(st.integers(0, len(steps)))
        steps.insert(position, draw(steps_from([TRIGGER_TEMPLATES[trigger]])))
    B = draw(st.sampled_from((4, 2, 8)))
    D = draw(st.sampled_from((8, 4, 16)))
    program = Program(level, kind, triggers, train, tuple(steps), B, D)
    assume(well_behaved(program))
    return program


# --------------------------------------------------------------------------- #
# Running pt2kit and checking the invariants
# --------------------------------------------------------------------------- #


class InvariantBroken(AssertionError):
    """An invariant does not hold; the subclass says which (Hypothesis shrinks per subclass)."""

    invariant = "?"


class MinifyDidNotFinish(InvariantBroken):
    invariant = "finishes"  # exits within the time limit with one JSON document on stdout


class NotMinified(InvariantBroken):
    invariant = "status"


class WrongFailure(InvariantBroken):
    invariant = "identity"


class NotOneMinimal(InvariantBroken):
    invariant = "1-minimal"


class TooManyQueries(InvariantBroken):
    invariant = "query-bound"


class ReproMismatch(InvariantBroken):
    invariant = "repro"


#: ``C`` in ``queries <= 2*log2(n) + C`` (the issue's bound). ``queries`` is report.json's
#: count of every isolated query of the run; the 2*log2(n) term pays for the reducer's
#: two binary searches (truncate_suffix, remove_prefix), and ``C`` for everything whose
#: count does not grow with the graph:
#:
#: - the pipeline around the reducer, at most 12: the capture run 1, the four stages 4,
#:   lowering to aot graphs 1, the aot graphs' two stages each (forward and backward) 4,
#:   profiling 1, checking the written repro 1 (a dynamo-level bug has the flakiness
#:   re-check 1 instead of the aot rows);
#: - the reducer's fixed passes, at most 17: the dead-code check 1, "the last node
#:   alone" 1, the rounding of the two binary searches 2, consolidate_inputs 1,
#:   drop_backward 1, make_static 1, finish_at_once's config-less try 1 (its other
#:   try is the first of the two below), randomize_inputs over at most two inputs 3,
#:   shrink_shapes one per distinct size when size 1 reproduces (B, D and D/2 here) 3,
#:   the second round's fresh questions 2, and one query to cut everything between a
#:   pair's two ops at once (what keeps a pair logarithmic too).
#:
#: On a graph of 48 nodes or more, ``sample_op_kinds`` takes one node per kind of op and
#: asks its halves; when one fails, the halving (two queries a round over k <= n/2 nodes)
#: replaces the two binary searches, so the same 2*log2(n) term pays for it (the whole
#: sample is asked, 1 more, only when neither half fails).
#:
#: Nothing here is budgeted for delta debugging: a pair of culprit ops needs no more
#: than two binary searches and one cut, so exceeding the bound on a pair is a finding.
QUERY_CONSTANT = 29


def query_bound(nodes: int) -> float:
    return 2 * math.log2(max(nodes, 1)) + QUERY_CONSTANT


#: Per-query timeout for hang cases (seconds): a hang costs this much per failing query.
HANG_TIMEOUT = float(os.environ.get("PT2KIT_FUZZ_HANG_TIMEOUT", "8"))
QUERY_TIMEOUT = 120.0


@dataclass
class CaseResult:
    """What one fuzz case did; ``broken`` lists (invariant, detail)."""

    program: Program
    seconds: float = 0.0
    report: dict[str, Any] | None = None
    broken: list[tuple[str, str]] = field(default_factory=list)
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return not self.broken

    def figures(self) -> dict[str, Any]:
        r = self.report or {}
        return {
            "bucket": self.program.bucket,
            "triggers": list(self.program.triggers),
            "train": self.program.train,
            "steps": len(self.program.steps),
            "status": r.get("status"),
            "nodes_before": r.get("nodes_before"),
            "queries": r.get("queries"),
            "reduction_queries": r.get("reduction_queries"),
            "seconds": round(self.seconds, 1),
            "broken": [b[0] for b in self.broken],
        }


def expected_ops(program: Program) -> list[str]:
    """The ops ``ops_after`` must hold: aten names for aot graphs (one each)."""
    side = "backward" if program.level == "bw" else "forward"
    return sorted(getattr(fb.TRIGGERS[t], side) for t in program.triggers)


def dynamo_op_trigger(name: str) -> str | None:
    """The trigger op a torch-level ``ops_after`` entry (``torch.cos``, ``Tensor.cos``) names."""
    last = name.rsplit(".", 1)[-1]
    return next((op for op, t in fb.TRIGGERS.items() if last in t.dynamo), None)


def _environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment, as a user's shell would pass it on (plus ``extra``)."""
    return {**os.environ, **(extra or {})}


def run_minify(program: Program, workdir: Path) -> CaseResult:
    """``minify run --json`` on the program's script, as a user runs it (from its directory)."""
    script = workdir / "program.py"
    script.write_text(program.script())
    hang = program.kind == "hang"
    timeout = HANG_TIMEOUT if hang else QUERY_TIMEOUT
    command = [sys.executable, "-P", "-m", "minifier", "run", "--json", "--timeout", f"{timeout:g}", "--out", str(workdir / "runs")]
    if program.kind == "accuracy":
        command.append("--accuracy")
    command.append(str(script))
    result = CaseResult(program)
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=workdir, env=_environment(), start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=1200 if hang else 600)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        result.seconds = time.monotonic() - start
        result.stderr_tail = stderr[-3000:]
        result.broken.append(("finishes", f"minify run still running after {result.seconds:.0f} s; killed"))
        return result
    result.seconds = time.monotonic() - start
    result.stderr_tail = stderr[-3000:]
    (workdir / "minify.stdout").write_text(stdout)
    (workdir / "minify.stderr").write_text(stderr)
    try:
        result.report = json.loads(stdout)
    except json.JSONDecodeError:
        last = [line for line in stderr.strip().splitlines() if line.strip()][-1:] or ["(no stderr)"]
        result.broken.append(("finishes", f"exit {process.returncode} with no JSON on stdout; stderr ends: {last[0][:300]}"))
    return result


def check_identity(program: Program, report: dict[str, Any]) -> list[str]:
    """Stage, kind, exception, message and boundary are the planted ones."""
    problems = []
    failure = report.get("failure") or {}
    graph = report.get("graph") or {}
    kind = {"abort": "crash", "segfault": "crash", "hang": "timeout"}.get(program.kind, program.kind)
    want: dict[str, Any] = {"stage": program.backend, "kind": kind}
    if program.kind == "compile_error":
        want.update(exception="PlantedCompileError", message=fb.compile_message(program.triggers))
    elif program.kind == "runtime_error":
        want.update(exception="PlantedRuntimeError", message=fb.runtime_message(program.triggers))
    elif program.kind in ("abort", "segfault"):
        want["exception"] = "SIGABRT" if program.kind == "abort" else "SIGSEGV"
    elif program.kind == "accuracy":
        want["exception"] = "AccuracyError"
    for key, value in want.items():
        if failure.get(key) != value:
            problems.append(f"failure.{key} is {failure.get(key)!r}, planted {value!r}")
    if program.level == "dynamo":
        want_graph = {"boundary": "dynamo", "kind": "dynamo"}
    else:
        want_graph = {"boundary": "aot", "kind": "backward" if program.level == "bw" else ("forward" if program.train else "inference")}
    for key, value in want_graph.items():
        if graph.get(key) != value:
            problems.append(f"graph.{key} is {graph.get(key)!r}, planted {value!r}")
    return problems


def check_minimal(program: Program, report: dict[str, Any]) -> str | None:
    ops = list(report.get("ops_after") or [])
    boundary = (report.get("graph") or {}).get("boundary")
    if boundary == "aot":
        if sorted(ops) != expected_ops(program):
            return f"ops_after {ops}, planted {expected_ops(program)}"
        return None
    named = sorted(str(dynamo_op_trigger(op)) for op in ops)
    if named != sorted(program.triggers):
        return f"ops_after {ops}, planted {list(program.triggers)} (torch-level names)"
    return None


def check_repro(program: Program, report: dict[str, Any], scratch: Path) -> str | None:
    """Run repro.py with torch alone, from another directory; does it fail the same way?"""
    repro = Path(str(report.get("repro") or ""))
    if not repro.is_file():
        return f"no repro.py at {report.get('repro')!r}"
    elsewhere = scratch / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    env = _environment({"PT2KIT_AUTOLOAD": "0", "PYTHONPATH": str(USER_MODULES)})
    for variable in ("TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL"):
        env.pop(variable, None)
    hang = program.kind == "hang"
    limit = max(30.0, 3 * HANG_TIMEOUT) if hang else 300.0
    try:
        ran = subprocess.run([sys.executable, "-c", RUN_REPRO, str(repro)], capture_output=True, text=True, cwd=elsewhere, env=env, timeout=limit)
    except subprocess.TimeoutExpired:
        return None if hang else f"repro.py still running after {limit:.0f} s"
    tail = (ran.stderr.strip().splitlines() or ["(no stderr)"])[-1][:300]
    if hang:
        return f"repro.py exited ({ran.returncode}) within {limit:.0f} s; the planted bug hangs. stderr ends: {tail}"
    if program.kind in ("abort", "segfault"):
        signum = signal.SIGABRT if program.kind == "abort" else signal.SIGSEGV
        if ran.returncode != -signum:
            return f"repro.py exited with {ran.returncode}, planted a {signum.name} crash. stderr ends: {tail}"
        return None
    if ran.returncode == 0:
        return f"repro.py exits 0 (stdout: {ran.stdout.strip()[-200:]!r})"
    if program.kind == "accuracy":
        return None if "AccuracyError" in ran.stderr else f"repro.py fails without an AccuracyError: {tail}"
    if program.kind == "compile_error":
        expected = f"PlantedCompileError: {fb.compile_message(program.triggers)}"
    else:
        expected = f"PlantedRuntimeError: {fb.runtime_message(program.triggers)}"
    return None if expected in ran.stderr else f"repro.py fails differently: {tail} (planted {expected})"


def check_program(program: Program, keep: Path | None = None, *, repro: bool = True) -> CaseResult:
    """Run pt2kit on ``program`` and check every invariant; fills ``CaseResult.broken``.

    ``keep``: copy the case's directory there when an invariant breaks. ``repro=False``
    skips running the repro (the last check; shrinking another invariant does not need it).
    """
    with tempfile.TemporaryDirectory(prefix="pt2kit-fuzz-") as tmp:
        workdir = Path(tmp)
        result = run_minify(program, workdir)
        report = result.report
        if report is not None:
            if report.get("status") != "minified":
                result.broken.append(("status", f"status {report.get('status')!r}: {str(report.get('message', ''))[:300]}"))
            else:
                problems = check_identity(program, report)
                if problems:
                    result.broken.append(("identity", "; ".join(problems)))
                minimal = check_minimal(program, report)
                if minimal:
                    result.broken.append(("1-minimal", minimal))
                nodes, queries = report.get("nodes_before") or 1, report.get("queries")
                if not isinstance(queries, int) or queries > query_bound(nodes):
                    result.broken.append(("query-bound", f"{queries} queries for {nodes} nodes; bound 2*log2({nodes}) + {QUERY_CONSTANT} = {query_bound(nodes):.1f}"))
                problem = check_repro(program, report, workdir) if repro else None
                if problem:
                    result.broken.append(("repro", problem))
        if result.broken and keep is not None:
            shutil.copytree(workdir, keep / f"case-{int(time.time() * 1000)}", ignore=shutil.ignore_patterns("*.so", "*.o"))
    return result


EXCEPTIONS = {cls.invariant: cls for cls in (MinifyDidNotFinish, NotMinified, WrongFailure, NotOneMinimal, TooManyQueries, ReproMismatch)}


def raise_broken(result: CaseResult) -> None:
    """Raise the first broken invariant's exception, with the program and every problem."""
    if result.ok:
        return
    invariant = result.broken[0][0]
    lines = [f"{result.program.describe()}: {len(result.broken)} invariant(s) broken"]
    lines += [f"  - {name}: {detail}" for name, detail in result.broken]
    if result.report is not None:
        lines.append("  report: " + json.dumps({k: result.report.get(k) for k in ("status", "failure", "graph", "nodes_before", "ops_after", "queries", "message")}))
    else:
        lines.append("  minify stderr ends:\n" + "\n".join("    " + line for line in result.stderr_tail.splitlines()[-15:]))
    lines.append("  the program:\n" + "\n".join("    " + line for line in result.program.script().splitlines()))
    raise EXCEPTIONS[invariant]("\n".join(lines))


# --------------------------------------------------------------------------- #
# Figures
# --------------------------------------------------------------------------- #


@dataclass
class Tally:
    """Every case of a profile, for per-case lines and the summary."""

    cases: list[CaseResult] = field(default_factory=list)
    shrink_runs: int = 0
    shrunk: dict[str, CaseResult] = field(default_factory=dict)  # bucket key -> smallest failing case
    flaky: list[str] = field(default_factory=list)
    out: Any = sys.stdout

    def line(self, result: CaseResult, phase: str = "case") -> None:
        f = result.figures()
        status = "ok" if result.ok else "BROKEN " + ",".join(f["broken"])
        number = len(self.cases) if phase == "case" else f"shrink {self.shrink_runs}"
        print(
            f"[fuzz {number}] {result.program.describe()}: n={f['nodes_before']} queries={f['queries']} "
            f"({f['reduction_queries']} reducing) {f['seconds']} s -> {status}",
            file=self.out,
            flush=True,
        )

    def summary(self) -> dict[str, Any]:
        minified = [c for c in self.cases if c.report and c.report.get("status") == "minified"]
        by_invariant: dict[str, int] = {}
        by_bucket: dict[str, dict[str, int]] = {}
        for case in self.cases:
            bucket = by_bucket.setdefault(case.program.bucket, {"cases": 0, "failures": 0})
            bucket["cases"] += 1
            bucket["failures"] += not case.ok
            for name, _ in case.broken:
                by_invariant[name] = by_invariant.get(name, 0) + 1
        return {
            "cases": len(self.cases),
            "failures_found": sum(not c.ok for c in self.cases),
            "median_queries": statistics.median([c.report["queries"] for c in minified]) if minified else None,
            "median_seconds": round(statistics.median([c.seconds for c in self.cases]), 1) if self.cases else None,
            "broken_by_invariant": by_invariant,
            "by_bucket": dict(sorted(by_bucket.items())),
            "shrink_runs": self.shrink_runs,
            "flaky": self.flaky,
            "shrunk": {key: {"broken": c.broken, "script": c.program.script()} for key, c in self.shrunk.items()},
        }

    def print_summary(self) -> None:
        s = self.summary()
        print(
            f"\n[fuzz summary] cases {s['cases']}, failures found {s['failures_found']}, "
            f"median queries {s['median_queries']}, median seconds {s['median_seconds']}",
            file=self.out,
            flush=True,
        )
        print(f"[fuzz summary] broken invariants: {s['broken_by_invariant'] or 'none'}", file=self.out)
        for bucket, counts in s["by_bucket"].items():
            print(f"[fuzz summary]   {bucket}: {counts['failures']}/{counts['cases']} failing", file=self.out)
        for key, case in self.shrunk.items():
            print(f"\n[fuzz shrunk] {key}: {case.program.describe()}", file=self.out)
            for name, detail in case.broken:
                print(f"  - {name}: {detail}", file=self.out)
            print(case.program.function_source(), file=self.out, flush=True)


def bucket_key(result: CaseResult) -> str:
    """What makes two breakages "the same bug" for the long profile (each is shrunk once):
    the first broken invariant, the planted bug's level and kind."""
    return f"{result.broken[0][0]} @ {result.program.bucket}"


def long_profile(
    examples: int,
    *,
    seed: int = 0,
    shrink_seconds: float = 300.0,
    keep: Path | None = None,
    out: Any = sys.stdout,
    shares: list[tuple[str, str]] | None = None,
) -> Tally:
    """``make fuzz``: about ``examples`` generated cases, each new kind of breakage shrunk by Hypothesis.

    A case costs seconds to a minute, so the budget is small for Hypothesis, which
    spends a small budget on near copies of its first programs. The profile therefore
    gives every (level, kind) of planted bug its share of the budget, one Hypothesis
    run (or more) each.

    Hypothesis stops generating soon after it first sees a failure (10 s, less than one
    case here) and then shrinks it. So each share runs in rounds: a round is one
    Hypothesis run over the cases left, which raises only for a breakage whose
    ``bucket_key`` has not been shrunk yet; breakages already shrunk are counted and the
    round goes on. When a round's failure has been shrunk, the next round starts with
    a new seed. A program is run once per profile (Hypothesis starts every run with
    the simplest program, and replays its failures).
    """
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis.errors import Flaky
    from hypothesis.internal.conjecture import engine

    # Hypothesis gives up shrinking after 5 minutes (a private constant): make it a knob.
    engine.MAX_SHRINKING_SECONDS = int(shrink_seconds)
    tally = Tally(out=out)
    known: set[str] = set()
    seen: dict[str, CaseResult] = {}  # by script
    partial: dict[str, CaseResult] = {}  # by script, run while shrinking (no repro check)
    shares = shares or [(level, kind) for level in fb.LEVELS for kind in fb.KINDS]
    per_share = max(1, math.ceil(examples / len(shares)))
    round_number = 0
    for level, kind in shares:
        quota = len(tally.cases) + per_share
        first = True
        while len(tally.cases) < quota:
            round_number += 1
            state: dict[str, Any] = {"target": None}

            # (a later round of a share starts with the simplest program again: already run)
            @hypothesis_seed(seed * 1000 + round_number)
            @settings(
                max_examples=quota - len(tally.cases) + (0 if first else 1),
                deadline=None,
                database=None,
                derandomize=False,
                report_multiple_bugs=False,
                phases=(Phase.generate, Phase.shrink),
                suppress_health_check=list(HealthCheck),
                print_blob=False,
            )
            @given(programs(levels=(level,), kinds=(kind,)))
            def one_case(program: Program) -> None:
                script = program.script()
                shrinking = state["target"] is not None and not state["target"].startswith("repro ")
                cache = partial if shrinking else seen  # shrinking skips the repro run, unless that is what broke
                fresh = script not in seen and script not in cache
                if fresh:
                    cache[script] = check_program(program, keep=keep, repro=not shrinking)
                result = seen.get(script) or cache[script]
                key = bucket_key(result) if not result.ok else None
                if state["target"] is None:
                    if fresh:
                        tally.cases.append(result)
                        tally.line(result)
                    if key is not None and key not in known:
                        state["target"] = key
                        tally.shrunk[key] = result
                elif fresh:  # shrinking the target
                    tally.shrink_runs += 1
                    tally.line(result, phase="shrink")
                if key is not None and key == state["target"]:
                    if result.program.size() < tally.shrunk[key].program.size():
                        tally.shrunk[key] = result
                    raise_broken(result)

            before = len(tally.cases)
            first = False
            try:
                one_case()
                if len(tally.cases) == before:
                    break  # nothing new to generate
            except InvariantBroken:
                known.add(state["target"])
            except Flaky as e:
                tally.flaky.append(f"{state['target']}: {str(e).splitlines()[0][:300]}")
                if state["target"]:
                    known.add(state["target"])
    tally.print_summary()
    return tally


def small_profile_settings(examples: int = 5) -> Any:
    """The ``make test`` profile: a few deterministic cases, no shrinking (it would take minutes).

    ``PT2KIT_FUZZ_SMALL_EXAMPLES`` overrides ``examples``.
    """
    from hypothesis import HealthCheck, Phase, settings

    return settings(
        max_examples=int(os.environ.get("PT2KIT_FUZZ_SMALL_EXAMPLES", examples)),
        deadline=None,
        database=None,
        derandomize=True,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
