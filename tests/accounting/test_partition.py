"""Block keys of partitioned datasets (``odometer_core.partition``): every kind's keys
map to indices and back, calendar periods are read in the partition's time zone, selections
become normalised index ranges, and bad partitions and keys are refused with the reason."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odometer_core.accounting.blocks import BlockError
from odometer_core.partition import Partition, parse_partition

DAY = parse_partition({"kind": "day", "unit": "record", "timezone": "Europe/Paris"})
WEEK = parse_partition({"kind": "week", "unit": "record", "timezone": "UTC"})
MONTH = parse_partition({"kind": "month", "unit": "record", "timezone": "America/New_York"})
BUCKET = parse_partition({"kind": "bucket", "unit": "person", "buckets": 1024})
NAMED = parse_partition({"kind": "named", "unit": "record", "names": ["emea", "apac", "amer"]})


def test_known_keys_and_their_indices() -> None:
    assert DAY.index("1970-01-01") == 0 and DAY.index("2026-11-27") == 20_784
    assert DAY.key(20_784) == "2026-11-27"
    assert WEEK.index("1970-W02") == 0 and WEEK.key(0) == "1970-W02"
    assert WEEK.index("2026-W48") == 2_968 and WEEK.key(2_968) == "2026-W48"
    assert MONTH.index("1970-01") == 0 and MONTH.index("2026-11") == 682
    assert MONTH.key(682) == "2026-11"
    assert BUCKET.index("17") == BUCKET.index(17) == 17 and BUCKET.key(17) == "17"
    assert NAMED.index("apac") == 1 and NAMED.key(2) == "amer"


@given(st.integers(-20_000, 80_000))
def test_calendar_keys_round_trip(index: int) -> None:
    for partition in (DAY, WEEK, MONTH):
        assert partition.index(partition.key(index)) == index


def test_a_moment_falls_in_the_period_of_the_partitions_time_zone() -> None:
    late = dt.datetime(2026, 11, 26, 23, 30, tzinfo=dt.UTC)  # 00:30 on the 27th in Paris
    assert DAY.key(DAY.period_of(late)) == "2026-11-27"
    new_year = dt.datetime(2027, 1, 1, 3, 0, tzinfo=dt.UTC)  # 22:00 on 31 Dec in New York
    assert MONTH.key(MONTH.period_of(new_year)) == "2026-12"
    sunday = dt.datetime(2026, 11, 29, 23, 59, tzinfo=dt.UTC)
    assert WEEK.key(WEEK.period_of(sunday)) == "2026-W48"
    with pytest.raises(BlockError, match="UTC offset"):
        DAY.period_of(dt.datetime(2026, 11, 27))
    with pytest.raises(BlockError, match="no calendar"):
        BUCKET.period_of(late)


def test_selections_become_normalised_index_ranges() -> None:
    last_week = DAY.selection({"from": "2026-11-21", "to": "2026-11-27"})
    assert last_week == ((20_778, 20_785),)
    spans = {"ranges": [{"from": "3", "to": "5"}, {"from": 5, "to": 9}, {"from": 20, "to": 20}]}
    assert BUCKET.selection(spans) == ((3, 10), (20, 21))
    assert NAMED.selection({"keys": ["amer", "emea"]}) == ((0, 1), (2, 3))


@pytest.mark.parametrize(
    "partition,selection,reason",
    [
        (DAY, {"from": "2026-11-27", "to": "2026-11-21"}, "reversed"),
        (DAY, {"from": "2026-13-01", "to": "2026-11-21"}, "not a day key"),
        (BUCKET, {"keys": [1024]}, "buckets are 0 … 1023"),
        (BUCKET, {"keys": [True]}, "not a bucket key"),
        (NAMED, {"keys": ["latam"]}, "not a declared name"),
        (NAMED, {"keys": []}, "non-empty list"),
        (BUCKET, {"keys": list(range(1_001))}, "at most 1000"),
        (DAY, {"from": "2026-11-21"}, "{'from': key, 'to': key}"),
    ],
)
def test_bad_selections_are_refused_with_the_reason(
    partition: Partition, selection: dict[str, object], reason: str
) -> None:
    with pytest.raises(BlockError, match=reason):
        partition.selection(selection)


@pytest.mark.parametrize(
    "declared,reason",
    [
        ({"kind": "hour", "unit": "record", "timezone": "UTC"}, "kind is one of"),
        ({"kind": "day", "unit": "user", "timezone": "UTC"}, "what one block protects"),
        ({"kind": "day", "unit": "record"}, "calendar partitions take a 'timezone'"),
        ({"kind": "bucket", "unit": "person", "buckets": 8, "timezone": "UTC"}, "no other"),
        ({"kind": "day", "unit": "record", "timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"kind": "bucket", "unit": "person", "buckets": 0}, "integer in 1"),
        ({"kind": "named", "unit": "record", "names": ["a", "a"]}, "distinct names"),
        ({"kind": "day", "unit": "record", "timezone": "UTC", "x": 1}, "unknown partition"),
    ],
)
def test_bad_partitions_are_refused_with_the_reason(
    declared: dict[str, object], reason: str
) -> None:
    with pytest.raises(BlockError, match=reason):
        parse_partition(declared)


def test_a_partition_round_trips_through_json() -> None:
    for partition in (DAY, WEEK, MONTH, BUCKET, NAMED):
        assert parse_partition(partition.to_json()) == partition
