"""The blocks benchmark's quick run: a small partition, its charges admitted, a table row per
mode with the runs the charges left."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import blocks
from benchmarks.blocks_attack import BEGIN as ATTACK_BEGIN
from benchmarks.blocks_attack import END as ATTACK_END


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


def test_the_attack_runs_small_on_sqlite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fragmenting attack at a small size on SQLite (a server of its own): a row per
    request, the fragmented dataset holding about two runs per key, the others few."""
    url = f"sqlite:///{tmp_path / 'attack.db'}"
    argv = ["--attack", url, "--buckets", "100000", "--registrations", "3", "--keys", "50"]
    assert blocks.main([*argv, "--repeat", "1", "--no-results"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(ATTACK_BEGIN) and out.rstrip().endswith(ATTACK_END)
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| SQLite")]
    assert [row[2] for row in rows] == [
        "50-key registration",
        "two keys, both ends",
        "block page (100 runs)",
        "report (every hash re-checked, the entries since the last report re-run)",
        "report, the dataset's first (re-runs what the background verification has not)",
        "report, the first after a server restart (resumed from the stored position)",
        "the attack: 3 × 50 keys",
    ]
    fragmented, plain, same = (int(n.replace(",", "")) for n in rows[0][1].split(" / "))
    assert 250 <= fragmented <= 301  # 3 × 50 scattered keys: two runs each, a few merged
    assert plain <= 7 and same <= 101  # contiguous ranges; one set of 50 keys
