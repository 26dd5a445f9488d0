"""``python -m benchmarks write-path-count``: this checkout's register path under callgrind at a
quick size (5 registrations after the probe's warm-up; about half a minute, most of it Python
starting under valgrind). Without valgrind the test is skipped, saying so, except where
``ODOMETER_REQUIRE_VALGRIND=1`` (``.ci/run``, which installs it): there it fails."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from benchmarks.write_path_count import main

REQUIRED = "ODOMETER_REQUIRE_VALGRIND"


def _valgrind_missing() -> str | None:
    if shutil.which("valgrind") and shutil.which("callgrind_control"):
        return None
    reason = "valgrind is not installed (Debian: apt-get install valgrind; .ci/run installs it)"
    if os.environ.get(REQUIRED) == "1":
        raise RuntimeError(f"{REQUIRED}=1 but {reason}")
    return reason


@pytest.mark.skipif(_valgrind_missing() is not None, reason=str(_valgrind_missing()))
def test_it_counts_this_checkouts_registrations(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["--count", "5", "--workdir", str(tmp_path)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [{k: v for k, v in r.items() if k != "instructions"} for r in rows] == [
        {"build": "this", "probe": "service", "key": "no"}
    ]
    # A registration decided, written and committed on SQLite: about 1.7 million user-space
    # instructions at this size in November 2026 (1.8 million over 300); the bounds hold the
    # count to a registration's order of magnitude, where a probe that counted nothing (the
    # instrumentation never switched on: a few thousand) or the warm-up too (about 200 times
    # one registration, and the imports) would fall outside them.
    assert 200_000 < rows[0]["instructions"] < 20_000_000, rows
    # callgrind's file of the run, whose totals the count divides
    assert len(list(tmp_path.glob("callgrind.service.0.*"))) == 1
