"""Each distribution declares what its package imports, and imports what it declares.

The imports are read with grimp (every import statement, those inside functions too) and mapped
to the distributions that provide them in this environment; the declarations are the
``dependencies`` and extras of the three ``pyproject.toml`` files. What is declared but not
imported, or imported without being declared, is named below with the reason.
"""

from __future__ import annotations

import re
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Distribution → (its folder, the package it ships).
DISTRIBUTIONS = {
    "privacy-odometer": (ROOT, "app"),
    "privacy-odometer-core": (ROOT / "core", "odometer_core"),
    "privacy-odometer-client": (ROOT / "client", "odometer_client"),
}
#: Declared, not imported by the package: what each is for instead.
NOT_IMPORTED = {
    "privacy-odometer": {
        "alembic": "the migrations (migrations/, beside the package) run on it",
        "fastapi-offline": "its Swagger UI and ReDoc bundles are read as package data "
        "(app/api/docs.py, importlib.resources)",
    },
    "privacy-odometer-core": {
        "privacy-odometer-client": "the `odometer` command that `verify` plugs into (an entry "
        "point, not an import)",
    },
    "privacy-odometer-client": {
        "pipeline-dp": "the `pipelinedp` extra: odometer_client.adapters.pipelinedp imports it "
        "by name when an accountant is first built (importlib, so that the client needs only "
        "httpx), which the import graph does not show",
    },
}
#: Imported, not declared by the distribution itself: where it comes from instead.
UNDECLARED = {
    "privacy-odometer": {
        "anyio": "fastapi",  # required by fastapi (and by starlette under it)
        "starlette": "fastapi",
        # the type of a validation error's entries (ErrorDetails), pinned by pydantic itself
        "pydantic-core": "pydantic",
    },
    "privacy-odometer-core": {},
    "privacy-odometer-client": {
        # the local replay of `odometer report`, loaded when the core is installed beside the
        # client; the core depends on the client, so the client cannot declare it
        "privacy-odometer-core": "",
    },
}


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement or a distribution (PEP 503)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def _project(distribution: str) -> dict[str, object]:
    folder, _ = DISTRIBUTIONS[distribution]
    project: dict[str, object] = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))
    return project


def declared(distribution: str) -> tuple[set[str], set[str]]:
    """The distribution's runtime dependencies and its extras' requirements, by name (not the
    ``dev`` extra's: the tools the tests, linters and benchmarks run with, not the package)."""
    project = _project(distribution)["project"]
    assert isinstance(project, dict)
    extras: set[str] = set()
    for extra, requirements in project.get("optional-dependencies", {}).items():
        if extra != "dev":
            extras |= {_name(r) for r in requirements}
    return {_name(r) for r in project.get("dependencies", [])}, extras


@cache
def imported(package: str) -> frozenset[str]:
    """The distributions (by name) providing the third-party modules the package imports."""
    graph = grimp.build_graph(package, include_external_packages=True, cache_dir=None)
    providers = metadata.packages_distributions()
    found: set[str] = set()
    for module in graph.modules:
        if module.split(".")[0] != package:
            continue
        for target in graph.find_modules_directly_imported_by(module):
            top = target.split(".")[0]
            if top == package or top in sys.stdlib_module_names:
                continue
            assert top in providers, f"{module} imports {top}, which no distribution provides"
            found |= {_name(d) for d in providers[top]}
    return frozenset(found)


@pytest.mark.parametrize("distribution", sorted(DISTRIBUTIONS))
def test_every_import_is_declared_or_named(distribution: str) -> None:
    runtime, extras = declared(distribution)
    undeclared = imported(DISTRIBUTIONS[distribution][1]) - runtime - extras
    assert undeclared == set(UNDECLARED[distribution])


@pytest.mark.parametrize("distribution", sorted(DISTRIBUTIONS))
def test_every_declared_dependency_is_imported_or_named(distribution: str) -> None:
    runtime, extras = declared(distribution)
    unused = (runtime | extras) - imported(DISTRIBUTIONS[distribution][1])
    assert unused == set(NOT_IMPORTED[distribution])


def test_what_comes_through_another_dependency_does() -> None:
    """An import left undeclared because a declared dependency brings it: that dependency is
    declared, and its installed metadata requires it unconditionally."""
    for distribution, undeclared in UNDECLARED.items():
        runtime, _ = declared(distribution)
        for name, through in undeclared.items():
            if not through:
                continue
            assert through in runtime
            requires = metadata.requires(through) or []
            assert name in {_name(r) for r in requires if "extra ==" not in r}, (name, through)


@pytest.mark.parametrize("distribution", sorted(DISTRIBUTIONS))
def test_each_distribution_ships_its_package(distribution: str) -> None:
    folder, package = DISTRIBUTIONS[distribution]
    project = _project(distribution)
    assert project["project"]["name"] == distribution  # type: ignore[index]
    find = project["tool"]["setuptools"]["packages"]["find"]  # type: ignore[index]
    assert find == {"include": [f"{package}*"]}
    assert (folder / package / "__init__.py").is_file()
