"""``docs/architecture.md`` names only what the code has: every file it names in backticks
exists, and every Python name it quotes (``registration.with_charges``, ``Leader``,
``uow.scratch``) is still spelled somewhere in the source. A function renamed or removed
without the floor plan saying so fails here (the plan once sent readers to a
``_charges_before_lock`` that no longer existed)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
SOURCES = ("app", "core", "client", "benchmarks", "tests", "migrations")
#: where the names are spelled: the code, not its tests (which may quote a name that is gone)
CODE = ("app", "core", "client", "benchmarks", "migrations")
#: where a path the plan names may start (it often names one relative to its package)
BASES = (ROOT, ROOT / "core", ROOT / "core" / "odometer_core", ROOT / "client")
FILE = re.compile(r"[\w./-]+\.(?:py|js|json|md|toml|css|html)")
NAME = re.compile(r"([A-Za-z_][\w.]*?)(?:\(\))?")


def quoted(text: str) -> list[str]:
    return [span.strip() for span in re.findall(r"`([^`\n]+)`", text)]


@cache
def spelled() -> frozenset[str]:
    """Every identifier of the code, the Makefile and the pyproject files."""
    files = [
        p
        for folder in CODE
        for p in (ROOT / folder).rglob("*")
        if p.suffix in (".py", ".js", ".toml") and "build" not in p.relative_to(ROOT).parts
    ]
    files += [ROOT / "Makefile", ROOT / "pyproject.toml"]
    text = "\n".join(p.read_text("utf-8", errors="replace") for p in files)
    return frozenset(re.findall(r"[A-Za-z_]\w*", text))


@cache
def file_names() -> frozenset[str]:
    return frozenset(
        p.name for folder in (*SOURCES, "docs", "openapi") for p in (ROOT / folder).rglob("*")
    )


def missing(text: str) -> list[str]:
    """What the text quotes that the tree does not have."""
    absent = []
    for span in quoted(text):
        if FILE.fullmatch(span):
            found = (
                any((base / span).exists() for base in BASES)
                if "/" in span
                else span in file_names()
            )
            if not found:
                absent.append(span)
        elif (name := NAME.fullmatch(span)) and name[1].split(".")[-1] not in spelled():
            absent.append(span)
    return absent


def test_every_file_and_name_the_floor_plan_quotes_exists() -> None:
    assert missing(DOC.read_text("utf-8")) == []


def test_a_name_that_is_gone_is_found() -> None:
    text = "(`with_charges` → `_charges_before_lock`, `app/services/charging.py`, `nowhere.py`)"
    assert missing(text) == ["_charges_before_lock", "nowhere.py"]
