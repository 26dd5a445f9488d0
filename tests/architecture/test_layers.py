"""The floor plan is checked, not hoped for: the layer contracts in ``pyproject.toml`` hold
(``lint-imports``) and no module of the server (``app``), the core (``odometer_core``) or the
client (``odometer_client``) takes part in an import cycle, including cycles through imports
inside functions (grimp reads every import statement of a module)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Where each distribution's package lives in the repository.
PACKAGES = {"app": Path("."), "odometer_core": Path("core"), "odometer_client": Path("client")}
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def import_cycles(imports: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(imports.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(imports.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def _graph(package: str) -> dict[str, set[str]]:
    graph = grimp.build_graph(package, cache_dir=None)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=cwd,
        env={
            "PYTHONPATH": ":".join(str(cwd / folder) for folder in PACKAGES.values()),
            "PATH": str(LINT_IMPORTS.parent),
            # wide enough that a long contract name keeps its verdict on its line (_broken)
            "COLUMNS": "1000",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


def _broken(result: subprocess.CompletedProcess[str]) -> set[str]:
    """The names of the contracts that ``lint-imports`` reports broken."""
    found = (
        re.fullmatch(r"(.+) BROKEN( \(\d+ ignored imports?\))?", line)
        for line in result.stdout.splitlines()
    )
    return {match.group(1) for match in found if match}


def test_the_layer_contracts_hold() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _broken(result) == set()


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_module_is_part_of_an_import_cycle(package: str) -> None:
    assert import_cycles(_graph(package)) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize(
    "module,forbidden,contract",
    [
        (
            "core/odometer_core/accounting/exact.py",
            "import app.db.models",
            "The accounting core is pure",
        ),
        (
            "core/odometer_core/ledger/formats.py",
            "from app.services import ledger",
            "The core (accounting, ledger, verifier)",
        ),
        ("core/odometer_core/verify.py", "import httpx", "The core (accounting, ledger, verifier)"),
        ("app/services/health.py", "from app.api import deps", "Services do not import the web"),
        ("client/odometer_client/errors.py", "import sqlalchemy", "The client imports nothing"),
        ("client/odometer_client/models.py", "import numpy", "The client imports nothing"),
        (
            "client/odometer_client/declarations.py",
            "from odometer_core.accounting import exact",
            "The client imports nothing",
        ),
        ("client/odometer_client/cli.py", "from app import cli", "The client imports nothing"),
    ],
)
def test_a_forbidden_import_breaks_the_contracts(
    tmp_path: Path, module: str, forbidden: str, contract: str
) -> None:
    """The check is shown to fail: the same contracts over a copy of the three packages with one
    forbidden import added (at function level, where it would be easiest to hide)."""
    for package, folder in PACKAGES.items():
        shutil.copytree(
            ROOT / folder / package,
            tmp_path / folder / package,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    before = _broken(_lint_imports(tmp_path))
    assert not any(name.startswith(contract) for name in before)
    target.write_text(
        target.read_text() + f"\n\ndef _smuggled() -> None:\n    {forbidden}  # noqa\n"
    )
    result = _lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout
    added = _broken(result) - before
    assert any(name.startswith(contract) for name in added), result.stdout
