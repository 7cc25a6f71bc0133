"""What to do about recompiles: remedies read off the guards a function's recompiles failed.

A remedy is offered only where the failures make one clear, per input that changed:

- a size that varies: ``torch._dynamo.mark_dynamic`` on that dimension, or ``dynamic=True``;
- a size that reached 0 or 1 after going dynamic: ``torch._dynamo.decorators.mark_unbacked``;
- a Python scalar (or a global) whose value changes: pass it as a tensor (or an argument);
- a dtype that switches, or an object that is new on every call;

and, when a recompile limit refused a compile, how to raise it.
"""

from __future__ import annotations

from collections.abc import Sequence

from .guards import GuardFailure


def suggest_remedies(failures: Sequence[GuardFailure], limit_type: str | None = None) -> list[str]:
    """Remedies for the recompiles of one function, only where its failed guards make one clear.

    ``failures`` are all the guards its recompiles failed, in order; ``limit_type`` the
    recompile limit that refused a compile of it (``recompile_limit``...), if one did.
    """
    remedies: list[str] = []

    def changes_by_input(kind: str) -> dict[str, list[GuardFailure]]:
        """The failures of one kind, grouped by the input that changed, in order of appearance."""
        grouped: dict[str, list[GuardFailure]] = {}
        for failure in failures:
            if failure.kind == kind:
                grouped.setdefault(failure.name, []).append(failure)
        return grouped

    for name, changes in changes_by_input("size").items():
        dims = sorted({f.dim for f in changes if f.dim is not None})
        seen = ", ".join(f"{f.expected} → {f.actual}" for f in changes[:3])
        marks = "; ".join(f"torch._dynamo.mark_dynamic({name}, {dim})" for dim in dims)
        remedies.append(
            f"`{name}` changes size in dim {', '.join(map(str, dims))} ({seen}): call `{marks}` before the first "
            f"compiled call, or compile with `torch.compile(..., dynamic=True)`, so one graph serves every size."
        )
    for name, changes in changes_by_input("dynamic_shape").items():
        dims = sorted({f.dim for f in changes if f.dim is not None})
        marks = "; ".join(f"torch._dynamo.decorators.mark_unbacked({name}, {dim})" for dim in dims)
        marks = marks or "torch._dynamo.decorators.mark_unbacked"
        remedies.append(
            f"`{name}` reached a size of 0 or 1, which dynamic shapes compile separately: if those sizes must share "
            f"the graph, use `{marks}`."
        )
    for name, changes in changes_by_input("value").items():
        change = changes[0]
        if not _is_number(change.expected):
            continue
        if change.scope == "global":
            remedies.append(
                f"Global `{name}` changed ({change.expected} → {change.actual}); dynamo bakes globals into the graph "
                f"as constants. Pass it to the function as an argument (a tensor if it changes often)."
            )
        else:
            remedies.append(
                f"`{name}` is a Python scalar that changes between calls ({change.expected} → {change.actual}); "
                f"dynamo specializes on its value. Pass it as a tensor (`torch.tensor({name})`) instead, or "
                f"compile with `dynamic=True` so numbers stay symbolic."
            )
    for name, changes in changes_by_input("dtype").items():
        kinds = ", ".join(dict.fromkeys(f"{f.expected} → {f.actual}" for f in changes))
        remedies.append(
            f"`{name}` switches dtype ({kinds}): each dtype needs its own graph. Cast it to one dtype before the "
            f"call if you do not need both."
        )
    for name, _changes in changes_by_input("identity").items():
        remedies.append(
            f"`{name}` is a different object from call to call (e.g. a new module or function each time): create it "
            f"once and reuse it."
        )
    if limit_type is not None:
        remedies.append(
            f"Fix the changing inputs above, or raise the limit: `torch._dynamo.config.{limit_type} = N` "
            f"(or `torch.compile(..., recompile_limit=N)`)."
        )
    return remedies


def _is_number(text: str | None) -> bool:
    try:
        float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


__all__ = ["suggest_remedies"]
