"""The ladder benchmark's tables (its quick run): the rule before 1.4.0 lowers a reading, the
anchored one keeps it, and a new filter holds part of the conversion δ at its first level (0.85 in
zcdp, 0.6 in gdp since accounting 1.7.0's shaped ladders; 0.9 from 1.4.0 to 1.6.0)."""

from __future__ import annotations

import pytest

from benchmarks import ladder


def test_the_quick_run_shows_both_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert ladder.main(["--quick", "--no-results"]) == 0
    out = capsys.readouterr().out
    # the audit's history: the old rule let the budget, and with it the reading, fall
    assert "| zcdp | before 1.4.0 | 0.3241 | 0.2399 | 0.2399 |" in out
    assert "| gdp | before 1.4.0 | 0.3020 | 0.2207 | 0.2207 |" in out
    # the anchored rule: the lowest budget accepted is the reading (rounded up to 4 digits),
    # which stays (accounting 1.9.0, the ladder the first Gaussian shapes; 0.3087 before)
    assert "| zcdp | now | 0.3060 | 0.3061 | 0.3060 |" in out
    # capacity at (1, 1e-6): the level-1 share the first Gaussian chooses (accounting 1.9.0)
    # costs gdp three Gaussians of 50 (two under 1.7.0's constant 0.6 share, one under 1.4.0's
    # 0.9 share)
    assert "| gdp | (1, 1e-6) | 50 | 47 | -6.0 % |" in out
    assert out.startswith(ladder.BEGIN) and out.rstrip().endswith(ladder.END)
