"""``replay script``: a record as a standalone Python script that needs only torch.

The script holds the manifest (as JSON text), a copy of :mod:`replay.rebuild` and of the
three seam functions a replay needs, and reads the tensors from the record's
``tensors.pt`` (or, where the record is gone, a ``tensors.pt`` beside the script) with ``weights_only=True``. Run, it rebuilds the frame and calls it through
``torch.compile`` with the recorded backend (``--backend``, ``--no-fullgraph``,
``--static`` as for ``replay run``); the recorded failure propagates, so the script
exits non-zero with the same error, and a passing call prints each output's digest.
That makes it a repro like ``repro.py``: ``replay minify`` hands it to ``minify run``.

A backend the record carries as source (one defined in the user's script, a lambda, a
partial, a closure: :func:`replay.state.describe_compile_backend`) is written as the
script's own top-level code, as the user's program had it. The script is then to
``minify run`` what the user's program was: a program whose backend is defined in it,
which ``minify`` carries into its repro by slicing the script. (Run in a namespace of
its own, the backend would be a function of a module no other process can import.) The
program's changes to torch the record carries (:mod:`replay.program`) are top-level code
of the script too. The machinery lives inside one function, :data:`MACHINERY`, so that
nothing those definitions bind can shadow a name it uses.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from pathlib import Path
from typing import Any

from pt2kit.errors import UnknownBackend, UsageError

from . import rebuild
from . import records as record_format

SCRIPT_NAME = "replay.py"

_MAIN = """

INTERNALS = {
    "refresh_compiler_tables": refresh,
    "regenerate_resume": regenerate,
    "restore_automatic_dynamic": restore,
    "strip_dynamic_marks": strip_dynamic_marks,
}


def main(definitions):
    \"\"\"Parse the command line and replay the frame; ``definitions``: where the backend's definitions ran.\"\"\"
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", help="compile with this backend (a registered name or module:function) instead of the recorded one")
    parser.add_argument("--fullgraph", dest="fullgraph", action="store_true", default=None)
    parser.add_argument("--no-fullgraph", dest="fullgraph", action="store_false")
    parser.add_argument("--static", action="store_true", help="replay without the recorded dynamic-shape state")
    parser.add_argument("--allow-partial", action="store_true", help="replay a partial record; values that were not recorded become placeholders")
    parser.add_argument("--tensors", help="the record's tensors.pt (default: the record's, else one beside this script)")
    options = parser.parse_args()
    import os

    # (sent on with its tensors.pt, without the record: the copy beside the script)
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensors.pt")
    found = TENSORS if os.path.exists(TENSORS) or not os.path.exists(beside) else beside
    tensors = torch.load(options.tensors or found, weights_only=True)
    backend = resolve_backend(options.backend) if options.backend else None
    apply_program_state(MANIFEST, INTERNALS, definitions)  # (its carried source ran as the script's own code)
    outputs = replay_call(
        MANIFEST,
        tensors,
        INTERNALS,
        backend=backend,
        fullgraph=options.fullgraph,
        static=options.static,
        allow_unrecordable=options.allow_partial,
        definitions=definitions,
    )
    print("passed: the frame ran without error")
    for i, value in enumerate(flat_outputs(outputs)):
        print(f"output {i}: {digest(value)}")


# The definitions below import from the user modules the record names.
add_import_roots(MANIFEST["compile"]["backend"].get("modules", []))
add_import_roots((MANIFEST.get("program_state") or {}).get("modules") or [])
return main
"""

#: The function that holds the machinery; it and ``pt2kit_main`` are the script's only top-level names
#: besides the backend's definitions (whose own pt2kit name is ``pt2kit_backend``).
MACHINERY = "pt2kit_replay"

_MACHINERY_HEAD = f"""

def {MACHINERY}():
    # pt2kit's replay machinery lives in this function's scope, not at the top level of the
    # script: the top level holds the recorded backend's definitions as your program wrote
    # them, and nothing they bind can shadow a name the machinery uses.
"""

_TAIL = f"""

pt2kit_main = {MACHINERY}()

# --- the recorded backend and the program's changes to torch: carried from your program ---
# (top-level code, as in your program: `minify run` on this script carries them into its repro)

{{definitions}}

if __name__ == "__main__":
    pt2kit_main(globals())
"""


def script_text(record_dir: Path, manifest: dict[str, Any], tensors_path: Path, name: str = SCRIPT_NAME) -> str:
    """The text of the replay script for a record."""
    from pt2kit.seams import automatic_dynamic, compiler_state, mark_dynamic, resume_functions

    from .program import apply_program_state

    frame = manifest["frame"]
    failure = manifest["failure"]
    recorded_backend = manifest.get("compile", {}).get("backend", {})
    backend = recorded_backend.get("name")
    futures, definitions = _split_futures(recorded_backend.get("definitions") or "")
    changes = manifest.get("program_state") or {}
    change_futures, carried = _split_futures(changes.get("carried") or "")
    futures |= change_futures
    if carried.strip():
        definitions = f"{definitions.rstrip()}\n\n# The program's changes to torch ({', '.join(sorted(changes.get('patches') or {}))}):\n{carried}"
    source = ""
    spec = frame["code"]
    if "source" in spec:
        source = manifest["sources"][spec["source"]]["text"]
    header = [
        f'"""Replays one recorded torch.compile frame: {frame["function"]} ({frame["file"]}:{frame["line"]}).',
        "",
        f"Recorded failure ({failure.get('stage')}): {failure.get('kind')}: {failure.get('exception')}: {failure.get('message')}",
        f"Backend: {backend}; fullgraph={manifest.get('compile', {}).get('fullgraph')}; torch {manifest.get('torch')}",
        *(
            f"Not carried (the failure may need it): the program's change to torch {item}"
            for item in changes.get("missing") or []
        ),
        f"Written by pt2kit's `replay script` from {record_dir}; needs only torch (and the modules the record imports).",
        "",
        f"Run: python {name} [--backend NAME] [--no-fullgraph] [--static] [--allow-partial] [--tensors PATH]",
        '"""',
        "# The recorded frame's source:",
        *[f"#   {line}" for line in source.splitlines()],
        "",
        # No future import of the script's own: ``minify run`` carries the script's future imports into
        # the middle of its repro along with the backend's definitions, where Python rejects them.
        *(f"from __future__ import {name}" for name in sorted(futures)),
        "",
    ]
    # rebuild.py's annotations are evaluated in the script (no ``from __future__ import annotations``),
    # so they name only what is defined above them
    body = inspect.getsource(rebuild)
    body = body.replace("from __future__ import annotations\n", "", 1)
    seams_code = "\n\n".join(
        textwrap.dedent(inspect.getsource(fn))
        for fn in (
            resume_functions.regenerate,
            automatic_dynamic.code_id,  # (restore's own helper)
            automatic_dynamic.restore,
            mark_dynamic.strip_dynamic_marks,
            compiler_state.refresh,
        )
    )
    data = [
        "",
        "# --- the record -------------------------------------------------------------",
        "",
        "import json",
        "",
        f"MANIFEST = json.loads({_json_literal(manifest)})",
        f"TENSORS = {str(tensors_path)!r}",
        "",
        "# --- private torch hooks (copied from pt2kit's seams) ---------------------------",
        "",
        "from typing import Any",
        "",
        f"DERIVED_COPY = {compiler_state.DERIVED_COPY!r}",
        "",
        seams_code,
        "",
        "# --- the program's changes to torch (a copy of pt2kit's replay/program.py) -------",
        "",
        inspect.getsource(apply_program_state),
    ]
    machinery = (
        "# --- rebuilding the frame (a copy of pt2kit's replay/rebuild.py) ---------------\n"
        + body
        + "\n".join(data)
        + _MAIN
    )
    return (
        "\n".join(header)
        + _MACHINERY_HEAD
        + textwrap.indent(machinery, "    ")
        + _TAIL.replace("{definitions}", definitions.strip("\n") or "# (none: the backend is imported by name)")
    )


def _split_futures(definitions: str) -> tuple[set[str], str]:
    """The ``from __future__`` features of carried definitions, and the definitions without them.

    They come first in the script (Python allows them nowhere else); the rest keeps its
    lines as they were.
    """
    if not definitions.strip():
        return set(), ""
    try:
        tree = ast.parse(definitions)
    except SyntaxError as e:  # the script would not compile at all
        raise UnknownBackend(f"the recorded backend's definitions do not compile: {e}") from None
    futures: set[str] = set()
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            futures.update(alias.name for alias in node.names)
            drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    lines = definitions.splitlines(keepends=True)
    return futures, "".join(line for number, line in enumerate(lines, 1) if number not in drop)


def _json_literal(manifest: dict[str, Any]) -> str:
    """The manifest as a Python string literal: one top-level key per line, readable in the script."""
    lines = ",\n".join(f"{json.dumps(key)}: {json.dumps(value)}" for key, value in manifest.items())
    text = "{\n" + lines + "\n}"
    # JSON escapes every quote inside its strings, so the text holds no triple quote; a raw
    # string keeps its backslash escapes for json.loads.
    return f'r"""{text}"""' if '"""' not in text and not text.endswith("\\") else json.dumps(json.dumps(manifest))


def write_script(path: str | Path, out: str | Path | None = None) -> Path:
    """Write the replay script of a record (default: ``<record>/replay.py``); never replaces a different file."""
    directory, manifest = record_format.read_manifest(path)
    target = Path(out) if out is not None else directory / SCRIPT_NAME
    text = script_text(directory, manifest, directory / record_format.TENSORS, target.name)
    if target.exists():
        if target.is_file() and target.read_text() == text:
            return target.resolve()
        raise UsageError(f"{target} exists; choose another file with -o")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target.resolve()
