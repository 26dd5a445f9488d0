"""The accounting benchmark's quick run: every mode's admission latency, the RDP speed table
and the tightness tables, with the figures the section exists to show in range."""

from __future__ import annotations

import re

import pytest

from benchmarks import accounting


def test_the_quick_run_reports_latency_speed_and_tightness(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert accounting.main(["--quick", "--no-results"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(accounting.BEGIN) and out.rstrip().endswith(accounting.END)
    assert "| mode | N = 0 | N = 100 |" in out
    for mode in ("basic", "zcdp", "gdp", "rdp", "rdp (dp_sgd decl.)"):
        row = re.search(rf"^\| {re.escape(mode)} \| ([\d.]+) \| ([\d.]+) \|$", out, re.M)
        assert row is not None, mode
        # µs per admit(): the targets are 50 (200 for rdp); a shared machine is given 10×
        assert all(0 < float(x) < 2000 for x in row.groups()), row.group(0)
    # the vectorised subsampled-Gaussian RDP: faster than dp_accounting, never below it
    speed = re.findall(
        r"^\| [\d.e-]+ \| [\d.]+ \| \d+ \| \d+ \| ([\d.]+)× \|.* \| (\w+) \|$", out, re.M
    )
    assert len(speed) == 5
    assert all(float(x) > 1 and never_below == "True" for x, never_below in speed)
    # basic's PLD charge within 0.5 % of dp_accounting's PLD, never below it
    ratio = re.search(r"`basic` charge / PLD = ([\d.]+)", out)
    assert ratio is not None and 1.0 <= float(ratio.group(1)) <= 1.005
    # dp_accounting's own counts (no filter): 22 Gaussians σ = 20 under PLD at (1, 1e-6)
    assert "| dp_accounting PLD (fixed k) | 22 |" in out
