"""House rules that keep the code readable: imports that follow the layout, modules of one job.

The import rules live in ``pyproject.toml`` as import-linter contracts (``make lint`` runs
``lint-imports``): the floor (``pt2kit``) imports no tool, a tool imports another only through
its face, minifier's folders are layers in the order a bug travels through them, and no
siblings import each other both ways. An import inside a function counts: a lazy import
(a heavy or optional part loaded when a feature runs) still ties two modules together.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from support.paths import PACKAGE_DIRECTORIES, REPO, TESTS
from support.scheduling import ONE_RUN_PER_PROGRAM, program_scope

PACKAGES = ("pt2kit", "minifier", "replay", "validation", "explain", "opcheck")
TOOLS = PACKAGES[1:]

#: Modules allowed past ~400 lines, each with its reason.
LARGE_FOR_A_REASON = {
    # its source is copied verbatim into standalone replay scripts (replay/script.py),
    # which must need torch alone: it cannot import a sibling module
    "replay.rebuild": 790,
}
#: Lines of code as ``ruff format --line-length 120`` lays them out (pyproject.toml).
LINE_LIMIT = 530


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _contracts() -> list[dict]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_import_contracts_hold():
    """``lint-imports`` on the house: every contract kept (``make lint`` runs the same before the tests)."""
    importlinter = pytest.importorskip("importlinter.cli")
    assert importlinter.lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True) == 0


def test_the_import_contracts_cover_every_package_and_tool():
    """A new tool or floor module is under the contracts the day it is added, not when someone remembers."""
    contracts = _contracts()
    protected = {c["protected_modules"][0].removesuffix(".**") for c in contracts if c["type"] == "protected"}
    assert protected == set(TOOLS)
    (floor,) = (c for c in contracts if c["type"] == "forbidden")
    assert floor["source_modules"] == ["pt2kit"] and set(floor["forbidden_modules"]) == set(TOOLS)
    (acyclic,) = (c for c in contracts if c["type"] == "acyclic_siblings")
    assert set(acyclic["ancestors"]) == set(PACKAGES)
    (layers,) = (c for c in contracts if c["type"] == "layers")
    placed = {name.strip() for layer in layers["layers"] for name in layer.split(":")}
    folders = {p.parent.name for p in (REPO / "minifier").glob("*/__init__.py")}
    top = {p.stem for p in (REPO / "minifier").glob("*.py")} - {"__init__"}
    assert placed == folders | top, placed ^ (folders | top)


def test_the_start_up_hook_arms_each_tool_by_name():
    """The floor's start-up hook names the tools it arms (the floor imports none): each name must import."""
    import importlib

    from pt2kit import startup

    assert [importlib.import_module(tool).arm for tool in startup.TOOLS]
    pth = (REPO / "pt2kit" / "pt2kit-autoload.pth").read_text()
    assert "'pt2kit.startup'" in pth and startup.ARM_AFTER in pth


def test_modules_stay_small_unless_they_say_why():
    too_large = {}
    for name, path in _modules().items():
        lines = len(path.read_text().splitlines())
        if lines > LARGE_FOR_A_REASON.get(name, LINE_LIMIT):
            too_large[name] = lines
    assert too_large == {}


TOP_LEVEL_LIMIT = 15


def test_minifier_keeps_its_top_level_short_and_its_folders_say_what_they_hold():
    top = sorted(p.name for p in (REPO / "minifier").glob("*.py"))
    assert len(top) <= TOP_LEVEL_LIMIT, top
    for folder in (REPO / "minifier").iterdir():
        if (folder / "__init__.py").exists():
            docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
            modules = {p.stem for p in folder.glob("*.py")} - {"__init__"}
            # the folder's docstring names every module in it (a newcomer's map)
            unnamed = {m for m in modules if not re.search(rf"\b{m}\b", docstring or "")}
            assert docstring and (unnamed == set() or folder.name == "seams"), (folder.name, unnamed)


def test_the_tests_mirror_the_packages():
    """tests/minifier/ holds minifier's tests, tests/pt2kit/ the floor's, and so on; only the house's own test
    sits at the top."""
    assert PACKAGE_DIRECTORIES == PACKAGES
    where = {path.relative_to(TESTS).parts[:-1] for path in TESTS.rglob("test_*.py")}
    assert where == {()} | {(package,) for package in PACKAGES}, where
    assert [p.name for p in TESTS.glob("test_*.py")] == ["test_house.py"]


def test_make_slow_hands_out_each_program_of_the_cached_modules_as_one_unit():
    """A genuine bug's or a scenario's tests share one worker (its ``minify run`` is cached per process);
    every other test is a unit of its own, so the slow group spreads over the workers."""
    for module in ONE_RUN_PER_PROGRAM:
        assert (TESTS / module).exists(), module
        path = f"tests/{module}"
        first, second = (program_scope(f"{path}::{test}[prog_a]") for test in ("test_verdict", "test_repro_alone"))
        assert first == second == f"{path}[prog_a]"
        assert program_scope(f"{path}::test_verdict[prog_b]") != first
    alone = ("tests/minifier/test_subsystem.py::test_bisect[x]", "tests/replay/test_replay.py::test_replay_minify")
    assert [program_scope(nodeid) for nodeid in alone] == list(alone)


def test_make_models_installs_pyprojects_models_extra():
    """``make models`` installs the extra's requirements alone (CI adds them while ``make test`` runs from the same
    venv, so pt2kit itself is not reinstalled): the Makefile's list is the extra's, and no test extra holds them."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (models,) = re.findall(r"^MODELS := (.+)$", (REPO / "Makefile").read_text(), flags=re.M)
    assert models.split() == extras["models"]
    assert not set(extras["models"]) & set(extras["test"])


def test_every_exit_code_a_tool_raises_has_one_meaning_in_the_shared_table():
    """An exit code means the same in every tool (replay once used 7, validation's "incomplete")."""
    from pt2kit.errors import EXIT_CODES

    found: dict[int, list[str]] = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            text = path.read_text()
            for code in re.findall(r"^\s+exit_code = (\d+)$", text, re.M):
                found.setdefault(int(code), []).append(str(path.relative_to(REPO)))
            for statuses in re.findall(r"\{(\"sound\": 0[^}]*)\}", text):  # validation's verdicts
                for code in re.findall(r": (\d+)", statuses):
                    found.setdefault(int(code), []).append(str(path.relative_to(REPO)))
    assert {1, 2, 5, 7, 9, 10, 70, 130} <= set(found)  # (the reader finds them)
    assert set(found) <= set(EXIT_CODES), {code: where for code, where in found.items() if code not in EXIT_CODES}
    assert "incomplete" in EXIT_CODES[7] and "rebuilt" in EXIT_CODES[10]


def test_nothing_is_imported_from_conftest():
    """What tests share lives in tests/support/; conftest.py holds pytest's hooks and fixtures alone."""
    importing = [
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("*.py")
        if re.search(r"^\s*from (tests\.)?conftest import|^\s*import (tests\.)?conftest\b", path.read_text(), re.M)
    ]
    assert importing == []


#: Imported by pt2kit's packages without being a dependency: torch's own (sympy), or only where the user's
#: environment has it, behind a guard (numpy: a recorded program's numpy RNG state; tqdm: told not to start threads).
NOT_DEPENDENCIES = {"sympy": "torch's", "numpy": "the program's", "tqdm": "the program's"}
#: A distribution's name -> the module it installs, where the two differ.
IMPORTED_AS = {"z3-solver": "z3"}


def test_every_module_pt2kit_imports_is_a_core_dependency():
    """A wheel install has only the core dependencies: ``minify hunt`` without hypothesis was "internal error"."""
    import sys

    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

    core = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    installed = {IMPORTED_AS.get(name, name) for name in (re.split(r"[<>=!~ \[]", d)[0] for d in core)}
    imported: dict[str, str] = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    imported.setdefault(name.split(".")[0], str(path.relative_to(REPO)))
    third_party = {m: p for m, p in imported.items() if m not in sys.stdlib_module_names and m not in PACKAGES}
    missing = {
        m: p for m, p in third_party.items() if m not in installed and m not in NOT_DEPENDENCIES and m != "__future__"
    }
    assert not missing, f"imported, but not a core dependency in pyproject.toml: {missing}"
    assert {"pytest", "hypothesis"} <= installed  # (the guide's core: the plugin, and the hunt)
