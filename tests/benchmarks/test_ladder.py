"""The ladder benchmark's tables (its quick run): the rule before 1.4.0 lowers a reading, the
anchored one keeps it, and a new filter holds 0.9 of the conversion δ."""

from __future__ import annotations

import pytest

from benchmarks import ladder


def test_the_quick_run_shows_both_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert ladder.main(["--quick", "--no-results"]) == 0
    out = capsys.readouterr().out
    # the audit's history: the old rule let the budget, and with it the reading, fall
    assert "| zcdp | before 1.4.0 | 0.3241 | 0.2399 | 0.2399 |" in out
    assert "| gdp | before 1.4.0 | 0.3020 | 0.2207 | 0.2207 |" in out
    # the anchored rule: the lowest budget accepted is the reading, which stays
    assert "| zcdp | now | 0.3476 | 0.3476 | 0.3476 |" in out
    # capacity at (1, 1e-6): the filter's 0.9 share of δ_c costs gdp one Gaussian of 50
    assert "| gdp | (1, 1e-6) | 50 | 49 | -2.0 % |" in out
    assert out.startswith(ladder.BEGIN) and out.rstrip().endswith(ladder.END)
