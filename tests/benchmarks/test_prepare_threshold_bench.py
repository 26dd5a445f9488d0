"""``python -m benchmarks prepare-threshold`` at a quick size on the PostgreSQL the suite tests
against (a scratch database of its own there, dropped after): two servers, one with psycopg's
prepared statements and one with ``prepare_threshold=none``, every registration answered 201,
and the table's ratios those of the one round. Skipped without PostgreSQL, as the suite's other
PostgreSQL tests are."""

from __future__ import annotations

import re

import pytest

from benchmarks.prepare_threshold import main
from tests.support import PG_SKIP_REASON, postgres_url

pytestmark = pytest.mark.skipif(postgres_url() is None, reason=PG_SKIP_REASON)


def test_a_round_of_each_setting(capsys: pytest.CaptureFixture[str]) -> None:
    url = str(postgres_url()).rsplit("/", 1)[0] + "/odometer_prepare_smoke"
    argv = ["--url", url, "--rounds", "1", "--count", "200", "--clients", "2", "--warm", "20"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    windows = re.findall(r"^round 1 +(default|none): .*, failed (\d+), load", out, re.M)
    assert windows == [("default", "0"), ("none", "0")]
    rows = re.findall(
        r"^\| ([^|]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \(([\d.]+) … ([\d.]+)\) \|$", out, re.M
    )
    assert [r[0] for r in rows] == [
        "registrations/s",
        "server CPU per registration (ms)",
        "PostgreSQL CPU per registration (ms)",
        "both (ms)",
    ]
    for _, default, none, ratio, low, high in rows:
        # one round: its ratio is the median and the whole range, of two positive figures
        assert float(default) > 0 and float(none) > 0
        assert ratio == low == high
        assert float(ratio) == pytest.approx(float(none) / float(default), rel=0.02)
