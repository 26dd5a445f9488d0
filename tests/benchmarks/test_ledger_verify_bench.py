"""The ledger-verify benchmark at a small size: the export it streams is one the verifier
accepts entry for entry, and the section reports it."""

from __future__ import annotations

import re

import pytest

from benchmarks import ledger_verify


def test_a_small_export_is_verified(capsys: pytest.CaptureFixture[str]) -> None:
    assert ledger_verify.main(["--entries", "2000", "--no-write"]) == 0
    out = capsys.readouterr().out
    assert "Verdict: ok = True, entries = 2000, exit code 0." in out
    row = re.search(r"^\| `odometer verify` .* \| ([\d.]+) \| ([\d,]+) \| (\d+) \|$", out, re.M)
    assert row is not None
    wall, rate, rss = float(row.group(1)), int(row.group(2).replace(",", "")), int(row.group(3))
    assert 0 < wall < 60 and rate > 0 and 0 < rss < 2048  # MiB
    assert "| generate + write export (streamed) |" in out
