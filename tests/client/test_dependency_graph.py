"""The three distributions of the repository depend on each other without a cycle.

The graph is read from the three ``pyproject.toml`` files: an edge for every requirement of one
of the repository's distributions, in ``dependencies`` or in any extra (an extra that brings a
distribution back is a cycle for whoever installs it).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = (ROOT, ROOT / "core", ROOT / "client")


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement (PEP 503)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def dependency_graph(folders: tuple[Path, ...] = PROJECTS) -> dict[str, set[str]]:
    """Distribution → the repository's distributions it requires (``dependencies`` and extras)."""
    projects = [
        tomllib.loads((f / "pyproject.toml").read_text("utf-8"))["project"] for f in folders
    ]
    ours = {_name(p["name"]) for p in projects}
    graph: dict[str, set[str]] = {}
    for project in projects:
        requirements = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            requirements += extra
        graph[_name(project["name"])] = {_name(r) for r in requirements} & ours
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path (first node repeated at the end), or ``None``."""
    done: set[str] = set()

    def walk(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for child in sorted(graph.get(node, ())):
            cycle = walk(child, [*path, node])
            if cycle:
                return cycle
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = walk(start, [])
        if cycle:
            return cycle
    return None


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_distributions_depend_on_each_other_without_a_cycle() -> None:
    graph = dependency_graph()
    assert set(graph) == {"privacy-odometer", "privacy-odometer-core", "privacy-odometer-client"}
    assert find_cycle(graph) is None, f"dependency cycle: {' -> '.join(find_cycle(graph) or [])}"
