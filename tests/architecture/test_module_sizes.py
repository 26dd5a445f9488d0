"""No module grows past the size a reader can hold: a Python module of the service (``app``)
or a script of its dashboard at most 600 lines, one of the core or the client at most 900
(generated modules included: they are read when debugging too)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMITS = {
    ROOT / "app": 600,
    ROOT / "core" / "odometer_core": 900,
    ROOT / "client" / "odometer_client": 900,
}


def too_long(folder: Path, limit: int) -> dict[str, int]:
    """``folder``'s modules (Python; JavaScript too) longer than ``limit`` lines."""
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text("utf-8").splitlines())
        for pattern in ("*.py", "*.js")
        for path in folder.rglob(pattern)
    }
    return {name: lines for name, lines in sorted(sizes.items()) if lines > limit}


@pytest.mark.parametrize("folder", list(LIMITS), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_its_limit(folder: Path) -> None:
    assert too_long(folder, LIMITS[folder]) == {}


def test_the_dashboard_is_split_into_modules() -> None:
    scripts = sorted((ROOT / "app" / "dashboard").glob("*.js"))
    assert len(scripts) > 1 and (ROOT / "app" / "dashboard" / "app.js") in scripts
    assert too_long(ROOT / "app" / "dashboard", 600) == {}
