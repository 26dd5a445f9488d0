"""The caps benchmark's quick run: today's basic cap refuses the eleventh Gaussian, a curve cap
counts past the limit, and a cap that cannot account DP-SGD says 422."""

from __future__ import annotations

import pytest

from benchmarks import caps


def test_the_quick_run_counts_each_cap_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert caps.main(["--limit", "15", "--no-results"]) == 0
    out = capsys.readouterr().out
    # one zcdp dataset admits 340 under accounting 1.9.0 (the first declaration shapes the
    # ladder), 352 under 1.7.0-1.8.0, 353 before
    assert (
        "| Gaussian σ=10 over 3 zcdp datasets | 10 | ≥ 15 | ≥ 15 | ≥ 15 | ≥ 15 | 340 (zcdp) |"
        in out
    )
    assert "| DP-SGD chunk over 3 rdp datasets | 10 | 422 | ≥ 15 | ≥ 15 | 422 |" in out
    assert "| rounds [pure ε=0.05 basic, Gaussian zcdp, DP-SGD rdp] | 5 | 422 | ≥ 15 |" in out
    assert out.startswith(caps.BEGIN) and out.rstrip().endswith(caps.END)
