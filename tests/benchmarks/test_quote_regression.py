"""``python -m benchmarks quote --no-regression`` on single rows: the constrained ladder choice
never reads above the version before the mode's shaped ladder past 10 % of the budget, the
pre-shaped ladder written as a shape reads as that version, today's rule is reproduced, and
the values of two known rows."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from benchmarks import quote_regression as qr
from benchmarks.results import write_section


def never_above(new: qr.History, old: qr.History) -> None:
    common = new.past.keys() & old.past.keys()
    assert common
    for k in common:
        assert new.past[k] <= old.past[k] * Decimal(1 + 1e-9), (k, new.past[k], old.past[k])


def test_zcdp_falls_back_to_the_pre_shaped_ladder() -> None:
    """zcdp (1, 10⁻⁵), σ = 20: today's ladder reads above 1.6.0's at two counts past 10 %; the
    constrained choice is the pre-shaped ladder itself (as a shape), at 1.14× the family's
    best worst ratio."""
    row = qr.measure("zcdp", "1", "0.00001", "20")
    assert row.reproduced
    assert row.candidates == 25
    assert qr.above(row.today, row.pre)[0] == 2
    never_above(row.chosen, row.pre)
    assert row.label == "the pre-shaped ladder as a shape"
    # the pre-shaped ladder as a shape reproduces the pre-shaped readings
    assert row.pre_as_shape is not None and row.pre_as_shape <= 1e-9
    assert row.chosen.count == row.pre.count == 24
    assert row.chosen.worst == pytest.approx(row.pre.worst, rel=1e-9)
    assert row.chosen.worst == pytest.approx(1.756, abs=5e-4)
    assert row.today.worst == pytest.approx(1.537, abs=5e-4)
    assert row.best_worst == pytest.approx(1.537, abs=5e-4)


def test_rdp_keeps_a_family_member_that_never_reads_above() -> None:
    """rdp (1, 10⁻⁵), σ = 20: two of the 20 candidates never read above 1.7.0; today's rule
    among them picks steps 8, span 40, at 1.500 against the family's 1.490."""
    row = qr.measure("rdp", "1", "0.00001", "20")
    assert row.reproduced
    assert (row.admissible, row.candidates) == (2, 20)
    assert qr.above(row.today, row.pre)[0] == 1
    never_above(row.chosen, row.pre)
    assert row.label == "steps 8, level 1 0.9, span 40"
    assert row.chosen.count == 23
    assert row.chosen.worst == pytest.approx(1.500, abs=5e-4)
    assert row.best_worst == pytest.approx(1.490, abs=5e-4)


def test_the_section_has_its_own_markers(tmp_path: Path) -> None:
    row = qr.measure("zcdp", "1", "0.00001", "20")
    block = qr.section([row])
    assert block.startswith(qr.BEGIN) and block.endswith(qr.END)
    assert "| zcdp | (1, 0.00001) | 20 | 24, 1.537, 1.104 | 2 (" in block
    assert "the pre-shaped ladder in 1 of 1 rows" in block
    results = tmp_path / "RESULTS.md"
    quote_section = "<!-- quote:begin -->\nthe quote section\n<!-- quote:end -->"
    results.write_text(f"# Benchmark results\n\n{quote_section}\n", "utf-8")
    write_section(block, results)
    write_section(block, results)  # rewritten in place, once
    text = results.read_text("utf-8")
    assert quote_section in text
    assert text.count(qr.BEGIN) == 1
