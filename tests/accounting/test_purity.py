"""The accounting core is a pure library (STYLE.md habit 1): it imports nothing of the web or
database layers. Walks every module's imports with ``ast``."""

from __future__ import annotations

import ast
from pathlib import Path

import app.accounting

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
    "app",
    "bisect",
    "operator",
    "enum",
}
FORBIDDEN_APP = ("app.api", "app.db", "app.services", "app.schemas", "app.main")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_accounting_imports_only_stdlib_numpy_scipy() -> None:
    root = Path(app.accounting.__file__).parent
    files = sorted(root.glob("*.py"))
    assert len(files) >= 7
    for path in files:
        for name in _imports(path):
            assert name.split(".")[0] in ALLOWED_TOP, f"{path.name} imports {name}"
            assert not name.startswith(FORBIDDEN_APP), f"{path.name} imports {name}"
            if name.startswith("app."):
                assert name.startswith("app.accounting"), f"{path.name} imports {name}"


def test_dp_accounting_only_in_the_pld_module() -> None:
    root = Path(app.accounting.__file__).parent
    for path in root.glob("*.py"):
        if path.name != "pld.py":
            assert not any(n.startswith("dp_accounting") for n in _imports(path)), path.name
