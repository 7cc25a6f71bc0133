"""``replay script``: a record as a standalone Python script that needs only torch.

The script holds the manifest (as JSON text), a copy of :mod:`replay.rebuild` and of the
three seam functions a replay needs, and reads the tensors from the record's
``tensors.pt`` with ``weights_only=True``. Run, it rebuilds the frame and calls it through
``torch.compile`` with the recorded backend (``--backend``, ``--no-fullgraph``,
``--static`` as for ``replay run``); the recorded failure propagates, so the script
exits non-zero with the same error, and a passing call prints each output's digest.
That makes it a repro like ``repro.py``: ``replay minify`` hands it to ``minify run``.
"""

from __future__ import annotations

import inspect
import json
import textwrap
from pathlib import Path
from typing import Any

from minifier.errors import UsageError

from . import rebuild
from . import record as record_format

SCRIPT_NAME = "replay.py"

_MAIN = """

INTERNALS = {
    "regenerate_resume": regenerate,
    "restore_automatic_dynamic": restore,
    "strip_dynamic_marks": strip_dynamic_marks,
}


def main():
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", help="compile with this backend (a registered name or module:function) instead of the recorded one")
    parser.add_argument("--fullgraph", dest="fullgraph", action="store_true", default=None)
    parser.add_argument("--no-fullgraph", dest="fullgraph", action="store_false")
    parser.add_argument("--static", action="store_true", help="replay without the recorded dynamic-shape state")
    parser.add_argument("--tensors", default=TENSORS, help="the record's tensors.pt")
    options = parser.parse_args()
    tensors = torch.load(options.tensors, weights_only=True)
    backend = resolve_backend(options.backend) if options.backend else None
    outputs = replay_call(MANIFEST, tensors, INTERNALS, backend=backend, fullgraph=options.fullgraph, static=options.static)
    print("passed: the frame ran without error")
    for i, value in enumerate(flat_outputs(outputs)):
        print(f"output {i}: {digest(value)}")


if __name__ == "__main__":
    main()
"""


def script_text(record_dir: Path, manifest: dict[str, Any], tensors_path: Path) -> str:
    """The text of the replay script for a record."""
    from minifier.seams import automatic_dynamic, mark_dynamic, resume_functions

    frame = manifest["frame"]
    failure = manifest["failure"]
    backend = manifest.get("compile", {}).get("backend", {}).get("name")
    source = ""
    spec = frame["code"]
    if "source" in spec:
        source = manifest["sources"][spec["source"]]["text"]
    header = [
        f'"""Replays one recorded torch.compile frame: {frame["function"]} ({frame["file"]}:{frame["line"]}).',
        "",
        f"Recorded failure ({failure.get('stage')}): {failure.get('kind')}: {failure.get('exception')}: {failure.get('message')}",
        f"Backend: {backend}; fullgraph={manifest.get('compile', {}).get('fullgraph')}; torch {manifest.get('torch')}",
        f"Written by pt2kit's `replay script` from {record_dir}; needs only torch (and the modules the record imports).",
        "",
        "Run: python replay.py [--backend NAME] [--no-fullgraph] [--static] [--tensors PATH]",
        '"""',
        "# The recorded frame's source:",
        *[f"#   {line}" for line in source.splitlines()],
        "",
        "from __future__ import annotations",
        "",
        "import json",
        "",
    ]
    body = inspect.getsource(rebuild)
    body = body.replace("from __future__ import annotations\n", "", 1)
    seams_code = "\n\n".join(
        textwrap.dedent(inspect.getsource(fn))
        for fn in (resume_functions.regenerate, automatic_dynamic.restore, mark_dynamic.strip_dynamic_marks)
    )
    data = [
        "",
        "# --- the record -------------------------------------------------------------",
        "",
        f"MANIFEST = json.loads({_json_literal(manifest)})",
        f"TENSORS = {str(tensors_path)!r}",
        "",
        "# --- private torch hooks (copied from pt2kit's seams) ---------------------------",
        "",
        "from typing import Any  # noqa: E402",
        "",
        seams_code,
    ]
    return (
        "\n".join(header)
        + "# --- rebuilding the frame (a copy of pt2kit's replay/rebuild.py) ---------------\n"
        + body
        + "\n".join(data)
        + _MAIN
    )


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
    text = script_text(directory, manifest, directory / record_format.TENSORS)
    if target.exists():
        if target.is_file() and target.read_text() == text:
            return target.resolve()
        raise UsageError(f"{target} exists; choose another file with -o")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target.resolve()
