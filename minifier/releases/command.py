"""``minify versions``: any repro, pt2kit's or torch's own, under other torch releases; its table, or ``--json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from pt2kit.errors import UsageError, exit_with
from ..isolation.jobs import jobs_option
from .checks import Releases

#: The variable ``minify run`` and ``minify versions`` read SPECs from when ``--torch-versions`` is not given.
VERSIONS_VARIABLE = "PT2KIT_TORCH_VERSIONS"

torch_versions_option = click.option(
    "--torch-versions",
    "torch_versions",
    multiple=True,
    envvar=VERSIONS_VARIABLE,
    metavar="SPEC[,SPEC...]",
    help="Also run the repro under these torch releases: a version (installed once into ~/.cache/pt2kit/torch) "
    f"or a path to a Python environment [env: {VERSIONS_VARIABLE}].",
)


def specs_or_exit(torch_versions: tuple[str, ...], as_json: bool) -> list[Any]:
    """``--torch-versions`` parsed, or one line and exit 2."""
    from .environments import parse_specs

    try:
        return parse_specs(torch_versions)
    except ValueError as e:
        exit_with(UsageError(f"--torch-versions: {e}"), "minify", as_json)
        raise  # (exit_with exits)


def versions_table(releases: Releases) -> Any:
    from rich.table import Table

    table = Table("torch", "where", "fails", "same failure", "seconds", "note")
    for check in releases.checks:
        fails = {None: "[yellow]not checked[/]", True: "[red]fails[/]", False: "[green]passes[/]"}[check.fails]
        same = "yes" if check.same_failure else "" if not check.fails else "no"
        table.add_row(check.torch, check.where, fails, same, f"{check.seconds:.1f}", check.note or "")
    return table


def verdict_line(releases: Releases) -> str:
    """One sentence: fixed in which release, regressed in which, or neither."""
    if releases.fixed_in:
        return f"fixed in torch {releases.fixed_in}: upgrading torch is a workaround (verified on the repro)"
    ours = releases.checks[0] if releases.checks else None
    if ours is not None and not ours.fails:
        return "the repro does not fail in this environment"
    still = [c.torch for c in releases.checks[1:] if c.fails and c.same_failure]
    line = f"still fails on {', '.join(still)}" if still else "no listed release fixes it"
    return line + (f"; regressed in torch {releases.regressed_in}" if releases.regressed_in else "")


def releases_line(releases: Releases) -> str:
    """Every release in a few words, then the verdict (``minify run``'s summary row)."""
    said = {None: "not checked", True: "fails", False: "passes"}
    each = ", ".join(
        f"{c.torch} {said[c.fails]}" + (" another way" if c.fails and not c.same_failure else "")
        for c in releases.checks
    )
    return f"{each}: {verdict_line(releases)}"


def print_versions(releases: Releases, console: Any) -> None:
    console.print(versions_table(releases))
    console.print(verdict_line(releases))


@click.command("versions", context_settings={"help_option_names": ["-h", "--help"]})
@torch_versions_option
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Seconds per run of the repro.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout, nothing else.")
@jobs_option
@click.argument("repro", type=click.Path(dir_okay=False, path_type=Path))
def versions_command(repro: Path, torch_versions: tuple[str, ...], timeout: float, as_json: bool) -> None:
    """Run REPRO here and under other torch releases: fixed in which torch?"""
    from rich.console import Console

    from pt2kit.script import resolve_script
    from pt2kit.errors import Interrupted, UserFacingError
    from ..isolation.session import print_json
    from ..isolation.jobs import default_jobs
    from ..stages.elsewhere import run_elsewhere
    from .checks import Preparing, check_release, signature_in_output, this_environment

    try:
        path = resolve_script(repro, "repro")
    except UserFacingError as error:
        exit_with(error, "minify", as_json)
    specs = specs_or_exit(torch_versions, as_json)
    if not specs:
        exit_with(
            UsageError(f"no release to check: pass --torch-versions SPEC[,SPEC...] or set {VERSIONS_VARIABLE}"),
            "minify",
            as_json,
        )
    err = Console(stderr=True)
    preparing = Preparing(specs)  # (installs start now, beside the run here)
    try:
        with err.status(f"running {path.name} in this environment (torch alone, an empty Inductor cache)"):
            here = this_environment()
            ran = run_elsewhere(path, timeout, python=here.python)
            target = recorded_failure(path) or signature_in_output(ran.returncode, ran.stderr)
            ours = check_release(here, path, target, timeout, ran=ran)
        with err.status(f"{len(specs)} other release(s): installing where asked, then running {path.name}"):
            releases = preparing.check(path, target, timeout, ours=ours, jobs=default_jobs())
    except KeyboardInterrupt:
        exit_with(Interrupted("interrupted: no release was left half installed"), "minify", as_json)
    finally:
        preparing.close()
    if as_json:
        print_json({"repro": str(path), **releases.to_json()})
    else:
        console = Console()
        print_versions(releases, console if console.is_terminal else Console(width=140))


def recorded_failure(path: Path) -> Any:
    """The failure a pt2kit repro records in its header; None for any other repro (torch's own)."""
    from ..repro.files import read_metadata

    try:
        meta = read_metadata(path.read_text(), path)
    except Exception:  # noqa: BLE001 - not a pt2kit repro: its failure is read from its output instead
        return None
    from pt2kit.signature import Signature

    return Signature.from_json(meta["failure"]) if meta.get("failure") else None
