"""What ``python -m replay`` prints: records written, a replay's result, a record's contents.

Each printer has a JSON twin (the dict it renders), so ``--json`` prints the same facts.
:func:`describe_node` summarizes a value-tree node in a few words ("tensor float32[8, 16]
requires_grad", "Linear (nn.Module, from torch.nn.modules.linear)") without rebuilding
anything: showing a record imports and executes nothing from it.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _ref_label(node: dict[str, Any]) -> str:
    return node.get("ref") or "?"


def describe_node(node: Any, manifest: dict[str, Any], depth: int = 0) -> str:
    """A short human description of one value-tree node."""
    objects = manifest.get("objects", {})
    sources = manifest.get("sources", [])
    if node is None or isinstance(node, (bool, int, float, str)):
        text = repr(node)
        return text if len(text) <= 60 else text[:57] + "..."
    kind = node.get("t")
    if kind == "ref":
        target = objects.get(node.get("id"), {})
        return describe_node(target, manifest, depth) if depth < 4 else "..."
    if kind == "tensor":
        flags = [
            w
            for w, on in (
                ("Parameter", node.get("parameter")),
                ("requires_grad", node.get("requires_grad") and not node.get("parameter")),
                ("view", "view" in node),
            )
            if on
        ]
        marks = sorted(k for k in node.get("attrs", {}) if k.startswith("_dynamo_"))
        if marks:
            flags.append("marked " + ",".join(m.removeprefix("_dynamo_") for m in marks))
        device = "" if node.get("device", "cpu") == "cpu" else f" on {node['device']}"
        return f"tensor {node.get('dtype')}{node.get('shape')}{device}" + (f" ({', '.join(flags)})" if flags else "")
    if kind in ("list", "tuple", "set", "frozenset"):
        items = node.get("items", [])
        inner = ", ".join(describe_node(i, manifest, depth + 1) for i in items[:3]) if depth < 2 else "..."
        return f"{kind}[{len(items)}]" + (f" ({inner}{', ...' if len(items) > 3 else ''})" if items else "")
    if kind in ("dict", "odict", "defaultdict"):
        return f"{kind} with {len(node.get('items', []))} keys"
    if kind in ("module", "object"):
        cls = _class_name(node.get("class"), manifest)
        return f"{cls} ({'nn.Module' if kind == 'module' else 'object'}, rebuilt without __init__)"
    if kind == "namedtuple":
        return f"{_class_name(node.get('class'), manifest)} (NamedTuple)"
    if kind == "enum":
        return f"{_class_name(node.get('class'), manifest)}.{node.get('name')}"
    if kind == "class":
        return f"class {_class_name(node, manifest)}"
    if kind == "function":
        if "ref" in node:
            return f"function {_ref_label(node)}"
        source = sources[node["source"]] if 0 <= node.get("source", -1) < len(sources) else {}
        extra = " (closure)" if node.get("closure") else ""
        return f"function {source.get('qualname', '?')} (from source){extra}"
    if kind == "pymodule":
        return f"module {node.get('name')}"
    if kind == "unrecordable":
        return f"UNRECORDABLE {node.get('type')}: {node.get('reason')}"
    if kind in ("dtype", "device", "layout", "memory_format"):
        return f"{kind} {node.get('name')}"
    if kind == "size":
        return f"torch.Size({node.get('items')})"
    if kind == "float":
        return node.get("v", "?")
    if kind == "subclass":
        return f"tensor subclass {_class_name(node.get('class'), manifest)}{node.get('size')}"
    if kind == "op":
        return f"op {node.get('name')}"
    if kind == "method":
        return f"bound method {node.get('name')} of {describe_node(node.get('self'), manifest, depth + 1)}"
    return str(kind)


def _class_name(node: Any, manifest: dict[str, Any]) -> str:
    if not isinstance(node, dict):
        return "?"
    if node.get("t") == "ref":
        node = manifest.get("objects", {}).get(node.get("id"), {})
    if "ref" in node:
        module, _, qualname = node["ref"].partition(":")
        return f"{qualname} from {module}"
    if "source" in node:
        sources = manifest.get("sources", [])
        entry = sources[node["source"]] if 0 <= node["source"] < len(sources) else {}
        return f"{entry.get('qualname', '?')} (source)"
    return "?"


def show_data(record: Any) -> dict[str, Any]:
    """The JSON twin of ``replay show``."""
    manifest = record.manifest
    frame = manifest["frame"]
    namespace = manifest["namespaces"].get(frame.get("namespace") or "", {})
    return {
        **record.summary(),
        "snapshot": manifest.get("snapshot"),
        "compile_id": frame.get("compile_id"),
        "resume": bool(frame.get("resume")),
        "stage": manifest["failure"].get("stage"),
        "suppressed": manifest["failure"].get("suppressed"),
        "compile": manifest.get("compile"),
        "args": {name: describe_node(node, manifest) for name, node in frame["args"].items()},
        "closure": {name: describe_node(node, manifest) for name, node in frame.get("closure", {}).items()},
        "globals": {name: describe_node(node, manifest) for name, node in namespace.get("globals", {}).items()},
        "config": {
            f"{module}.{key}": describe_node(node, manifest)
            for module, values in manifest.get("config", {}).items()
            for key, node in values.items()
        },
        "global_state": manifest.get("global_state"),
        "dynamic": manifest.get("dynamic"),
        "sources": [
            {"kind": s["kind"], "qualname": s["qualname"], "file": s["file"], "line": s["firstlineno"]}
            for s in manifest.get("sources", [])
        ],
        "tensors": manifest.get("tensors", {}).get("count"),
        "notes": manifest.get("notes", []),
        "torch": manifest.get("torch"),
    }


def print_show(data: dict[str, Any], console: Console) -> None:
    failure = data["failure"]
    console.print(
        f"[bold]{data['function']}[/bold] ({data['file']}:{data['line']}), compile {data['compile_id']}"
        + (" (resume function after a graph break)" if data["resume"] else "")
    )
    console.print(
        f"failure at {data['stage']}: {failure['kind']}: {failure['exception']}: {failure['message']}"
        + (" (suppressed by suppress_errors)" if data.get("suppressed") else "")
    )
    backend = (data.get("compile") or {}).get("backend", {})
    console.print(
        f"backend {backend.get('name')!s}, fullgraph={data['compile'].get('fullgraph')}; record {data['status']}; snapshot taken at {data['snapshot']}"
    )
    for title, section in (
        ("arguments", data["args"]),
        ("closure", data["closure"]),
        ("globals", data["globals"]),
        ("non-default config", data["config"]),
    ):
        if not section:
            continue
        table = Table(title=title, title_justify="left", show_header=False)
        table.add_column("name", style="cyan")
        table.add_column("value")
        for name, text in section.items():
            table.add_row(name, text)
        console.print(table)
    state = data.get("global_state") or {}
    changed = [f"grad {'on' if state.get('grad_enabled') else 'off'}", f"default dtype {state.get('default_dtype')}"]
    changed += [f"autocast {d} {a['dtype']}" for d, a in (state.get("autocast") or {}).items() if a.get("enabled")]
    if state.get("deterministic"):
        changed.append("deterministic algorithms")
    console.print("global state: " + ", ".join(changed))
    automatic = (data.get("dynamic") or {}).get("automatic") or {}
    if automatic:
        console.print(
            "automatic dynamic: " + ", ".join(f"{name} size {entry.get('size')}" for name, entry in automatic.items())
        )
    for item in data["unrecordable"]:
        console.print(f"[yellow]not recorded[/yellow]: {item['name']} ({item['type']}): {item['reason']}")
    for note in data.get("notes", []):
        console.print(f"note: {note}")


def print_records(summary: dict[str, Any], console: Console) -> None:
    if not summary["records"]:
        console.print(
            "no frame failed: nothing was recorded"
            + (f" (the script raised {summary['script_error']})" if summary.get("script_error") else "")
        )
        return
    table = Table(title="recorded frames", title_justify="left")
    for column in ("function", "where", "failure", "record", "status"):
        table.add_column(column)
    for entry in summary["records"]:
        failure = entry["failure"]
        table.add_row(
            entry["function"],
            f"{entry['file']}:{entry['line']}",
            f"{failure['kind']}: {failure['exception']}: {failure['message']}",
            entry["path"],
            entry["status"],
        )
    console.print(table)
    for entry in summary["records"]:
        for item in entry["unrecordable"]:
            console.print(
                f"[yellow]not recorded[/yellow] in {entry['function']}: {item['name']} ({item['type']}): {item['reason']}"
            )
    console.print("replay one: python -m replay run RECORD [--backend NAME]")


def print_result(result: Any, console: Console) -> None:
    status = {
        "reproduced": "[red]reproduced[/red]",
        "passed": "[green]passed[/green]",
        "different-failure": "[yellow]different failure[/yellow]",
    }[result.status]
    console.print(
        f"{status} with backend {result.backend} (fullgraph={result.fullgraph}{', static' if result.static else ''}) in {result.seconds:.2f} s"
    )
    recorded = result.recorded
    console.print(f"recorded: {recorded.get('kind')}: {recorded.get('exception')}: {recorded.get('message')}")
    if result.failure:
        console.print(
            f"replayed: {result.failure.get('kind')}: {result.failure.get('exception')}: {result.failure.get('message')}"
        )
    if result.outputs:
        table = Table(title="outputs", title_justify="left")
        for column in ("#", "shape", "dtype", "sha256"):
            table.add_column(column)
        for i, output in enumerate(result.outputs):
            table.add_row(str(i), str(output.get("shape")), str(output.get("dtype")), str(output.get("sha256")))
        console.print(table)
