"""The accounting core is a pure library: it imports nothing of the web or database layers.
Walks the imports of every module of the package, subpackages included, with ``ast``."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import odometer_core.accounting

ALLOWED_TOP = {
    "__future__",
    "math",
    "decimal",
    "dataclasses",
    "typing",
    "collections",
    "functools",
    "itertools",
    "re",
    "fractions",
    "json",
    "numpy",
    "scipy",
    "dp_accounting",
    "odometer_core",
    "bisect",
    "operator",
    "enum",
    # the charge table of memo.py: scoped to a context (a request, a worker's job), no I/O
    "contextvars",
    "contextlib",
}
FORBIDDEN_APP = (
    "app",
    "odometer_client",
    "odometer_core.ledger",
    "odometer_core.verify",
)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _module_files() -> list[Path]:
    """Every module of ``odometer_core.accounting`` as ``pkgutil`` finds it, checked against the
    files on disk, so that a module in a new subpackage cannot be missed."""
    root = Path(odometer_core.accounting.__file__).parent
    found = [Path(odometer_core.accounting.__file__)]
    for info in pkgutil.walk_packages(
        odometer_core.accounting.__path__, "odometer_core.accounting."
    ):
        relative = info.name.removeprefix("odometer_core.accounting.").replace(".", "/")
        path = root / (f"{relative}/__init__.py" if info.ispkg else f"{relative}.py")
        assert path.is_file(), info.name
        found.append(path)
    assert sorted(found) == sorted(root.rglob("*.py"))
    return found


def test_accounting_imports_only_stdlib_numpy_scipy() -> None:
    for path in _module_files():
        for name in _imports(path):
            assert name.split(".")[0] in ALLOWED_TOP, f"{path.name} imports {name}"
            assert not name.startswith(FORBIDDEN_APP), f"{path.name} imports {name}"
            if name.startswith("odometer_core"):
                assert name.startswith("odometer_core.accounting"), f"{path.name} imports {name}"


def test_dp_accounting_only_in_the_pld_module() -> None:
    for path in _module_files():
        if path.name != "pld.py":
            assert not any(n.startswith("dp_accounting") for n in _imports(path)), path.name
