"""The blocks benchmark's quick run: a small partition, its charges admitted, a table row per
mode with the runs the charges left."""

from __future__ import annotations

import pytest

from benchmarks import blocks


def test_the_quick_run_prints_a_row_per_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert blocks.main(["--blocks", "20000", "--charges", "50", "--no-results"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| `")]
    assert [row.split(" | ")[0] for row in rows] == ["| `basic`", "| `rdp`"]
    for row in rows:
        cells = row.split(" | ")
        assert cells[1] == "20,000" and cells[2] == "50"
        assert 1 < int(cells[3].replace(",", "")) <= 101  # at most two new runs per charge
    assert out.startswith(blocks.BEGIN) and out.rstrip().endswith(blocks.END)


def test_the_selection_is_decided_once_per_history() -> None:
    figures = blocks.run("basic", 1000, 10)
    assert figures["runs"] <= 21 and figures["span"] == 1000
