"""Every benchmark the entry point lists is in the table of ``docs/development.md``
(*Benchmarks*), in the same order, under its make target and its name, and nothing else is."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.__main__ import BENCHMARKS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "development.md"


def table() -> list[tuple[str, str, str]]:
    """The benchmarks table's rows: (make target, name, quick run)."""
    section = DOCS.read_text("utf-8").split("\n## Benchmarks\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` / `([^`]+)` \| .+ \| (.+) \|$", section, re.M)
    return [(target, name, quick) for target, name, quick in rows]


def test_the_docs_table_lists_every_benchmark_in_the_registrys_order() -> None:
    rows = table()
    assert [name for _, name, _ in rows] == list(BENCHMARKS)
    assert all(target == f"bench-{name}" for target, name, _ in rows), rows


def test_every_row_says_how_to_run_it_quickly() -> None:
    assert all(quick.strip().startswith("`--") for _, _, quick in table())
