"""The app's layers contract is shown to fail: over a copy of the three packages, an import that
climbs a floor (or crosses between independent neighbours) breaks exactly that contract.

``test_layers.py`` shows the forbidden-import contracts failing; this contract's name is longer
than the 80 columns ``lint-imports`` wraps its report at when not writing to a terminal, so it is
run here with a wide report, where the contract's verdict stays on the line of its name.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"app": Path("."), "odometer_core": Path("core"), "odometer_client": Path("client")}
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
CONTRACT = next(
    c["name"]
    for c in tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["importlinter"][
        "contracts"
    ]
    if c["type"] == "layers"
)


def _verdicts(cwd: Path) -> tuple[int, dict[str, str]]:
    """``lint-imports``' exit status and each contract's verdict (KEPT or BROKEN) by name."""
    result = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=cwd,
        env={
            "PYTHONPATH": os.pathsep.join(str(cwd / folder) for folder in PACKAGES.values()),
            "PATH": str(LINT_IMPORTS.parent),
            "COLUMNS": "1000",  # one line per contract, however long its name
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = (
        re.fullmatch(r"(.+) (KEPT|BROKEN)( \(.*\))?", line) for line in result.stdout.split("\n")
    )
    return result.returncode, {m.group(1): m.group(2) for m in found if m}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of the three packages and the contracts, every contract kept."""
    root = tmp_path_factory.mktemp("layers")
    for package, folder in PACKAGES.items():
        shutil.copytree(
            ROOT / folder / package,
            root / folder / package,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    status, verdicts = _verdicts(root)
    assert status == 0 and verdicts[CONTRACT] == "KEPT", verdicts
    assert set(verdicts.values()) == {"KEPT"}, verdicts
    yield root


def test_the_contract_is_the_one_the_architecture_describes() -> None:
    assert CONTRACT == (
        "The app's layers: entry points | HTTP edge | use cases | persistence and wire models"
    )


@pytest.mark.parametrize(
    "module,smuggled",
    [
        # persistence climbing to the use cases
        ("app/db/uow.py", "from app.services.errors import ServiceError"),  # docs/architecture.md
        ("app/db/repositories.py", "from app.services import ledger"),
        # persistence climbing to the write path (the unit of work knows nothing of its caches)
        ("app/db/uow.py", "from app.writepath import write_path"),
        # the write path climbing to the use cases
        ("app/writepath/locking.py", "from app.services.errors import NotFound"),
        # the wire models climbing to the use cases (the use cases' own climbs to the HTTP edge
        # break "Services do not import the web edge" too: test_layers.py shows one)
        ("app/schemas/reports.py", "from app.services import reports"),
        # the dashboard's pages climbing to the entry points
        ("app/dashboard/__init__.py", "from app import cli"),
        # the HTTP edge climbing to the entry points
        ("app/api/deps.py", "from app import main"),
        # the SVG renderer climbing to the use cases
        ("app/reports_svg.py", "from app.services import reports"),
        # the settings, at the bottom, reaching up to the wire models
        ("app/settings.py", "from app.schemas import common"),
        # independent neighbours on one floor: the wire models reaching into persistence, and
        # persistence into the wire models
        ("app/schemas/common.py", "from app.db import models"),
        ("app/db/models.py", "from app.schemas import common"),
    ],
)
def test_an_import_up_a_floor_breaks_the_layers_contract(
    tree: Path, module: str, smuggled: str
) -> None:
    target = tree / module
    original = target.read_text()
    # at function level, where it would be easiest to hide
    target.write_text(original + f"\n\ndef _smuggled() -> None:\n    {smuggled}  # noqa\n")
    try:
        status, verdicts = _verdicts(tree)
    finally:
        target.write_text(original)
    assert status == 1
    broken = {name for name, verdict in verdicts.items() if verdict == "BROKEN"}
    assert broken == {CONTRACT}, verdicts
