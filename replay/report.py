"""What ``python -m replay`` prints: records written, a replay's result, a record's contents.

Each printer has a JSON twin (the dict it renders), so ``--json`` prints the same facts.
:func:`describe_node` summarizes a value-tree node in a few words ("tensor float32[8, 16]
requires_grad", "Linear (nn.Module, from torch.nn.modules.linear)") without rebuilding
anything: showing a record imports and executes nothing from it. :func:`object_state`
lists what a recorded ``nn.Module`` or object holds (parameters, buffers, plain
attributes, child modules), for the frame's ``self`` and every other module or object the
frame receives.

Two rules for the rich views. Text that comes from a record or a user's program (paths,
messages, names) is never read as rich markup: a message such as ``expected [s0, 4]``
prints as it is. A path the user must copy (a record's directory) is printed whole on a
line of its own, never cut or folded to the terminal's width.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree


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


#: The bookkeeping of ``nn.Module`` that :func:`object_state` lists in sections of their own.
_MODULE_SECTIONS = ("_parameters", "_buffers", "_non_persistent_buffers_set", "_modules")
_CONTAINERS = ("dict", "odict", "defaultdict", "list", "tuple", "set", "frozenset")


def _target(node: Any, manifest: dict[str, Any]) -> Any:
    """The node a reference points to (any other node is itself)."""
    if isinstance(node, dict) and node.get("t") == "ref":
        return manifest.get("objects", {}).get(node.get("id"), {})
    return node


def _items(node: Any, manifest: dict[str, Any]) -> list[tuple[Any, Any]]:
    """The (key, value) pairs of a recorded mapping (none for anything else)."""
    target = _target(node, manifest)
    if not isinstance(target, dict) or target.get("t") not in ("dict", "odict", "defaultdict"):
        return []
    return [(key, value) for key, value in target.get("items", []) if isinstance(key, str)]


def _unset(node: Any, manifest: dict[str, Any]) -> bool:
    """None or an empty container: what a private attribute holds when nothing was ever set in it."""
    target = _target(node, manifest)
    if target is None:
        return True
    return isinstance(target, dict) and target.get("t") in _CONTAINERS and not target.get("items")


def object_state(node: Any, manifest: dict[str, Any], shown: dict[str, str] | None = None, path: str = "") -> Any:
    """What a recorded ``nn.Module`` or object holds, as ``replay show`` lists it; None for other values.

    ``{"class", "kind": "nn.Module" | "object", "parameters", "buffers", "attributes",
    "modules"}`` (the first two sections and the last for modules only): parameters and
    buffers are the module's own (a non-persistent buffer says so), child modules nest in
    ``modules``, and ``attributes`` holds every other attribute the record keeps, private
    ones (``_name``) only when they hold something. An object reached a second time is
    named by the path where it was listed (``"same object as self.inner"``).
    """
    target = _target(node, manifest)
    if not isinstance(target, dict) or target.get("t") not in ("module", "object"):
        return None
    shown = {} if shown is None else shown
    key = node.get("id") if node.get("t") == "ref" else None
    if key is not None:
        if key in shown:
            return f"same object as {shown[key]}"
        shown[key] = path
    recorded_state = target.get("state")
    state: dict[str, Any] = recorded_state if isinstance(recorded_state, dict) else {}
    is_module = target["t"] == "module"
    out: dict[str, Any] = {"class": _class_name(target.get("class"), manifest)}
    out["kind"] = "nn.Module" if is_module else "object"
    if is_module:
        out["parameters"] = {
            name: describe_node(value, manifest) for name, value in _items(state.get("_parameters"), manifest)
        }
        names = _target(state.get("_non_persistent_buffers_set"), manifest)
        non_persistent = {n for n in names.get("items", []) if isinstance(n, str)} if isinstance(names, dict) else set()
        out["buffers"] = {
            name: describe_node(value, manifest) + (" (non-persistent)" if name in non_persistent else "")
            for name, value in _items(state.get("_buffers"), manifest)
        }
    out["attributes"] = {
        name: describe_node(value, manifest)
        for name, value in state.items()
        if not (is_module and name in _MODULE_SECTIONS) and not (name.startswith("_") and _unset(value, manifest))
    }
    if is_module:
        out["modules"] = {
            name: object_state(child, manifest, shown, f"{path}.{name}") or describe_node(child, manifest)
            for name, child in _items(state.get("_modules"), manifest)
        }
    return out


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
        "state": _frame_state(frame, namespace, manifest),
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
        "program_state": manifest.get("program_state") or {},
    }


def _frame_state(frame: dict[str, Any], namespace: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    """:func:`object_state` of each module or object among the frame's arguments, closure cells and globals.

    Keyed as :attr:`unrecordable` names values: ``self``, ``closure fn``, ``global model``.
    """
    shown: dict[str, str] = {}
    labelled = [
        *frame["args"].items(),
        *((f"closure {name}", node) for name, node in frame.get("closure", {}).items()),
        *((f"global {name}", node) for name, node in namespace.get("globals", {}).items()),
    ]
    state = {label: object_state(node, manifest, shown, label) for label, node in labelled}
    return {label: value for label, value in state.items() if isinstance(value, dict)}


def _state_tree(label: str, state: dict[str, Any]) -> Tree:
    """The rich tree of one :func:`object_state`."""
    tree = Tree(Text.assemble((label, "cyan"), f": {state['class']} ({state['kind']})"))
    for section in ("parameters", "buffers", "attributes"):
        entries = state.get(section) or {}
        if entries:
            branch = tree.add(Text(section, style="bold"))
            for name, text in entries.items():
                branch.add(Text.assemble((name, "cyan"), f": {text}"))
    for name, child in (state.get("modules") or {}).items():
        if isinstance(child, dict):
            tree.add(_state_tree(name, child))
        else:
            tree.add(Text.assemble((name, "cyan"), f": {child}"))
    return tree


#: How a record's role reads beside its function's name.
ROLE_SHOWN = {
    "call": " (the whole call: its resume function failed)",
    "resume": " (resume function after a graph break)",
}


def print_show(data: dict[str, Any], console: Console) -> None:
    failure = data["failure"]
    console.print(
        Text.assemble(
            (data["function"], "bold"),
            f" ({data['file']}:{data['line']}), compile {data['compile_id']}",
            ROLE_SHOWN.get(data.get("role", ""), ""),
        )
    )
    console.print(
        Text(
            f"failure at {data['stage']}: {failure['kind']}: {failure['exception']}: {failure['message']}"
            + (" (suppressed by suppress_errors)" if data.get("suppressed") else "")
        )
    )
    backend = (data.get("compile") or {}).get("backend", {})
    name = backend.get("name") or f"that cannot be rebuilt ({backend.get('why')})"
    console.print(
        Text(
            f"backend {name}, fullgraph={data['compile'].get('fullgraph')}; record {data['status']}; snapshot taken at {data['snapshot']}"
        )
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
            table.add_row(Text(name), Text(text))
        console.print(table)
    for label, state in (data.get("state") or {}).items():
        console.print(_state_tree(label, state))
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
        console.print(Text.assemble(("not recorded", "yellow"), f": {item['name']} ({item['type']}): {item['reason']}"))
    program = data.get("program_state") or {}
    for target, function in (program.get("patches") or {}).items():
        console.print(Text(f"the program's change to torch, carried: {target} = {function}"))
    for name, _ in program.get("modules") or []:
        console.print(Text(f"the program's changes to torch, imported again: module {name}"))
    for item in program.get("missing") or []:
        console.print(Text.assemble(("not recorded", "yellow"), f": the program's change to torch {item}"))
    for note in data.get("notes", []):
        console.print(Text(f"note: {note}"))


def print_records(summary: dict[str, Any], console: Console) -> None:
    if not summary["records"]:
        console.print(Text(no_record_message(summary)))
        return
    table = Table(title="recorded frames", title_justify="left")
    table.add_column("#", justify="right")
    for column in ("function", "where", "failure", "status"):
        table.add_column(column, overflow="fold")
    for number, entry in enumerate(summary["records"], 1):
        failure = entry["failure"]
        table.add_row(
            str(number),
            Text(entry["function"] + ROLE_SHOWN.get(entry.get("role", ""), "")),
            Text(f"{entry['file']}:{entry['line']}"),
            Text(f"{failure['kind']}: {failure['exception']}: {failure['message']}"),
            entry["status"],
        )
    console.print(table)
    for entry in summary["records"]:
        for missing in entry.get("state_missing") or []:
            console.print(
                Text.assemble(
                    ("not recorded", "yellow"), f" in {entry['function']}: the program's change to torch {missing}"
                )
            )
        for item in entry["unrecordable"]:
            console.print(
                Text.assemble(
                    ("not recorded", "yellow"),
                    f" in {entry['function']}: {item['name']} ({item['type']}): {item['reason']}",
                )
            )
    console.print("records (replay one: python -m replay run RECORD [--backend NAME]):")
    for number, entry in enumerate(summary["records"], 1):
        # whole, on a line of its own, at any width: this is the text the user copies
        console.print(f"{number:>2} {entry['path']}", soft_wrap=True, markup=False, highlight=False)


def no_record_message(summary: dict[str, Any]) -> str:
    """What ``replay record`` says when it wrote nothing."""
    error = summary.get("script_error")
    if summary.get("unsaved"):
        return (
            f"nothing was recorded: a compiled frame failed, but its record could not be written ({'; '.join(summary['unsaved'])})"
        )
    if not error:
        return "no frame failed: nothing was recorded"
    return (
        f"nothing was recorded: the script raised {error}, but not while a compiled frame was compiled, ran, or"
        " ran its first backward; replay records only those (a wrong answer the script checks: `minify run --accuracy`"
        " judges each graph, and `python -m explain` lists each compile's guards)"
    )


def print_result(result: Any, console: Console) -> None:
    status = {
        "reproduced": "[red]reproduced[/red]",
        "passed": "[green]passed[/green]",
        "different-failure": "[yellow]different failure[/yellow]",
    }[result.status]
    caveat = f", but {escape(result.caveat)}" if result.caveat else ""
    console.print(
        f"{status} with backend {escape(str(result.backend))} (fullgraph={result.fullgraph}{', static' if result.static else ''}) in {result.seconds:.2f} s{caveat}"
    )
    recorded = result.recorded
    console.print(Text(f"recorded: {recorded.get('kind')}: {recorded.get('exception')}: {recorded.get('message')}"))
    if result.failure:
        console.print(
            Text(
                f"replayed: {result.failure.get('kind')}: {result.failure.get('exception')}: {result.failure.get('message')}"
            )
        )
    if result.outputs:
        table = Table(title="outputs", title_justify="left")
        for column in ("#", "shape", "dtype", "sha256"):
            table.add_column(column)
        for i, output in enumerate(result.outputs):
            table.add_row(str(i), str(output.get("shape")), str(output.get("dtype")), str(output.get("sha256")))
        console.print(table)
