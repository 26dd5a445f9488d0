"""The capacity benchmark's quick run: a row per mode below 10⁴, the search's count the
loop's, within the 50 ms target."""

from __future__ import annotations

import pytest

from benchmarks import capacity


def test_the_quick_run_prints_a_row_per_mode_with_the_loops_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert capacity.main(["--quick", "--repeat", "1", "--no-results"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "yes" in line]
    assert [row.split(" | ")[0] for row in rows] == ["| basic", "| zcdp", "| gdp", "| rdp"]
    assert out.startswith(capacity.BEGIN) and out.rstrip().endswith(capacity.END)
    assert "met in every row" in out
