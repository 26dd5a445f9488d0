"""The grids benchmark's quick run: the workload grid admits at least the default's count and
no filter beats dp_accounting's PLD, with the table rows the section shows."""

from __future__ import annotations

import re

import pytest

from benchmarks import grids


def test_the_quick_run_keeps_every_filter_under_pld(capsys: pytest.CaptureFixture[str]) -> None:
    # main's exit status is its own check: every filter count ≤ PLD's, old ≤ new ≤ ceiling
    assert grids.main(["--quick", "--no-results"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(grids.BEGIN) and out.rstrip().endswith(grids.END)
    rows = re.findall(
        r"^\| (Gaussian σ=20|Laplace b=10 \(ε=0.1 each\)|Laplace b=100 \(ε=0.01 each\)) \| 1 \| "
        r"([\d,]+) \| ([\d,]+) \| ([\d,]+) \([\d.]+, [\d.]+\) \| ([\d,]+) \| ([\d,]+) \|$",
        out,
        re.M,
    )
    assert [r[0] for r in rows] == [w.name for w in grids.QUICK_WORKLOADS]
    for _, *counts in rows:
        old, default, workload, rdp, pld = (int(c.replace(",", "")) for c in counts)
        assert 0 < old <= default <= workload <= pld and rdp <= pld
    # dp_accounting's non-adaptive counts for Gaussian σ = 20 at (1, 1e-6): RDP 19, PLD 22
    assert re.search(r"^\| Gaussian σ=20 \| 1 \| .* \| 19 \| 22 \|$", out, re.M)
    charged = re.search(r"basic` mode: [\d.]+ s of CPU, ε = ([\d.]+) .* ε = ([\d.]+) \(ours", out)
    assert charged is not None and float(charged.group(1)) >= float(charged.group(2))
    assert "| 8 × composed of 256 distinct DP-SGD segments |" in out
    assert "422 (work limit) |" in out
