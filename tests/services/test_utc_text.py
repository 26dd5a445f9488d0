"""The clock's text (:func:`app.services._common.utc_text`, what :func:`utc_now` writes) is
``datetime``'s ISO 8601 text of the same instant, its ``+00:00`` written ``Z``: fixed width,
microseconds floored, whatever second it falls in and whichever second was written before.

Shown able to fail: with the kept text of the previous second reused without comparing the
second (``if known[0] < 0``), the cases after the first failed; with the microseconds rounded
(``round(ns / 1000)``) in place of floored, the five ending in 999 nanoseconds did."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from app.services import _common
from app.services._common import utc_now, utc_text

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _expected(ns: int) -> str:
    at = EPOCH + timedelta(microseconds=ns // 1000)
    return at.isoformat(timespec="microseconds")[:-6] + "Z"


CASES = [
    0,
    999,
    1_000,
    999_999_999,
    1_000_000_000,
    1_796_000_000_999_999_999,  # 2026-11-30, the last nanosecond of a second
    1_796_000_001_000_000_000,
    1_796_000_001_000_000_999,
    1_796_000_001_000_001_000,
    4_102_444_799_999_999_999,  # 2099-12-31T23:59:59.999999
    951_782_400_000_000_000,  # 2000-02-29
]


@pytest.mark.parametrize("ns", CASES)
def test_a_text_is_datetimes(ns: int) -> None:
    assert utc_text(ns) == _expected(ns)


def test_texts_in_any_order_are_datetimes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_common, "_second", (-1, ""))
    rng = random.Random(48)
    instants = [rng.randrange(0, 4_102_444_800 * 10**9) for _ in range(2_000)]
    near = [1_796_000_000 * 10**9 + rng.randrange(0, 3 * 10**9) for _ in range(2_000)]
    for ns in instants + sorted(near) + near:
        assert utc_text(ns) == _expected(ns)


def test_now_is_fixed_width_and_ordered() -> None:
    texts = [utc_now() for _ in range(1_000)]
    assert all(len(t) == 27 and t.endswith("Z") for t in texts)
    assert texts == sorted(texts)
    at = datetime.fromisoformat(texts[-1].replace("Z", "+00:00"))
    assert abs(datetime.now(UTC) - at) < timedelta(seconds=5)
