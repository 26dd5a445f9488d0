"""What a partition takes and what a declaration must state (``odometer_core.partition``):
keys of each kind's own type only, canonical IANA time zones for new partitions, and the
assertions a declaration needs for the dataset's budget to protect what the dataset says
(docs/accounting.md, *Partitioned datasets*)."""

from __future__ import annotations

from typing import Any

import pytest

from odometer_core.accounting import parse_declaration
from odometer_core.accounting.blocks import BlockError
from odometer_core.accounting.declarations import DeclarationError
from odometer_core.partition import (
    canonical_zone,
    check_assertions,
    new_partition,
    parse_partition,
)

DAY = parse_partition({"kind": "day", "unit": "record", "timezone": "Europe/Zurich"})
WEEK = parse_partition({"kind": "week", "unit": "record", "timezone": "UTC"})
MONTH = parse_partition({"kind": "month", "unit": "record", "timezone": "UTC"})
BUCKET = parse_partition({"kind": "bucket", "unit": "person", "buckets": 1024})
NAMED = parse_partition({"kind": "named", "unit": "record", "names": ["emea", "apac"]})


@pytest.mark.parametrize(
    "partition,key,message",
    [
        (BUCKET, True, "true is not a bucket key: a bucket key is an integer"),
        (BUCKET, False, "false is not a bucket key"),
        (BUCKET, 1.0, "1.0 is not a bucket key"),
        (BUCKET, None, "null is not a bucket key"),
        (BUCKET, " 1", "' 1' is not a bucket key"),
        (BUCKET, "1_0", "'1_0' is not a bucket key"),
        (BUCKET, "+1", "'+1' is not a bucket key"),
        (BUCKET, "-0", "'-0' is not a bucket key"),
        (BUCKET, "01", "'01' is not a bucket key"),
        (BUCKET, "\u0661\u0667", "is not a bucket key"),  # Arabic-Indic 17
        (BUCKET, "\uff11\uff17", "is not a bucket key"),  # full-width 17
        (DAY, 20_784, "20784 is not a day key: a day key is text YYYY-MM-DD"),
        (DAY, "20261127", "'20261127' is not a day key: a day key is text YYYY-MM-DD"),
        (DAY, "2026-W48-5", "'2026-W48-5' is not a day key"),
        (DAY, "2026-11-27T00:00", "is not a day key"),
        (DAY, "2026-02-30", "'2026-02-30' is not a day key: day is out of range"),
        (WEEK, 2_968, "2968 is not a week key: a week key is text YYYY-Www"),
        (WEEK, "2026-W\u0664\u0668", "is not a week key"),
        (WEEK, " 2026-W48", "is not a week key"),
        (WEEK, "2025-W53", "is not a week key"),  # 2025 has 52 ISO weeks (2026 has 53)
        (MONTH, "2026-13", "'2026-13' is not a month key: a month is 01 … 12"),
        (MONTH, "2026-00", "'2026-00' is not a month key: a month is 01 … 12"),
        (MONTH, "+2026-11", "is not a month key: a month key is text YYYY-MM"),
        (MONTH, 682, "682 is not a month key"),
        (NAMED, 0, "0 is not a named key: a named key is text, one of the declared names"),
        (NAMED, "latam", "'latam' is not a named key: not a declared name"),
    ],
)
def test_keys_of_the_partitions_own_type_only(partition: Any, key: Any, message: str) -> None:
    with pytest.raises(BlockError) as refused:
        partition.index(key)
    assert message in str(refused.value)
    with pytest.raises(BlockError):
        partition.selection({"keys": [key]})
    with pytest.raises(BlockError):
        partition.selection({"from": key, "to": key})


def test_the_keys_each_kind_takes() -> None:
    assert BUCKET.index(17) == BUCKET.index("17") == 17 and BUCKET.index("0") == 0
    assert DAY.index("2026-11-27") == 20_784
    assert WEEK.index("2026-W48") == 2_968 and WEEK.index("2020-W53") == WEEK.index("2021-W01") - 1
    assert MONTH.index("2026-11") == 682 and MONTH.index("2026-12") + 1 == MONTH.index("2027-01")
    assert NAMED.index("apac") == 1
    # keys before year 1000 are written with four digits, and read back
    assert MONTH.key(-12_000) == "0970-01" and MONTH.index("0970-01") == -12_000
    assert WEEK.index(WEEK.key(-60_000)) == -60_000


REFUSED_ZONES = [
    "localtime",
    "posixrules",
    "Factory",
    "right/UTC",
    "right/Europe/Zurich",
    "posix/Europe/Zurich",
    "US/Eastern",
    "GB",
    "EST5EDT",
    "Etc/../Europe/Zurich",
    "europe/zurich",
    "Mars/Olympus",
]


@pytest.mark.parametrize("zone", REFUSED_ZONES)
def test_a_new_partition_takes_canonical_iana_zones_only(zone: str) -> None:
    assert not canonical_zone(zone)
    with pytest.raises(BlockError, match=r"^unknown time zone"):
        new_partition({"kind": "day", "unit": "record", "timezone": zone})


@pytest.mark.parametrize(
    "zone", ["UTC", "Europe/Zurich", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "Asia/Tokyo"]
)
def test_canonical_zones(zone: str) -> None:
    assert canonical_zone(zone)
    assert new_partition({"kind": "week", "unit": "record", "timezone": zone}).timezone == zone


def test_a_stored_partition_is_read_as_it_was_declared() -> None:
    """Partitions stored before the rule keep working: only new ones are checked."""
    stored = parse_partition({"kind": "day", "unit": "record", "timezone": "posixrules"})
    assert stored.timezone == "posixrules"
    with pytest.raises(BlockError, match="'timezone' is an IANA time zone name"):
        parse_partition({"kind": "day", "unit": "record", "timezone": 5})


PURE = parse_declaration({"type": "pure_dp", "epsilon": "1"})
TREE: dict[str, Any] = {"type": "tree_aggregation", "noise_multiplier": "2", "step_counts": [7]}
TREES = [
    TREE,
    {"type": "composed", "mechanisms": [{"type": "pure_dp", "epsilon": "1"}, TREE]},
    {"type": "composed", "mechanism": TREE, "count": 3},
    {"type": "subsampled", "scheme": "poisson", "rate": "0.1", "mechanism": TREE},
    {"type": "repeat_and_select", "distribution": "poisson", "mean": "2", "mechanism": TREE},
    {
        "type": "composed",
        "mechanisms": [
            {"type": "subsampled", "scheme": "poisson", "rate": "0.5", "mechanism": TREE},
            {"type": "laplace", "scale": "1"},
        ],
    },
]


def _field(call: Any) -> tuple[str | None, str]:
    with pytest.raises(DeclarationError) as refused:
        call()
    return refused.value.field, refused.value.detail


def test_a_person_unit_needs_a_person_level_declaration() -> None:
    for contribution in (None, "record"):
        field, detail = _field(
            lambda c=contribution: check_assertions("person", "add_remove", PURE, contribution=c)
        )
        assert field == "contribution"
        assert 'send "contribution": "person"' in detail
    check_assertions("person", "add_remove", PURE, contribution="person")
    check_assertions("person", "replace_one", PURE, contribution="person")
    # a record unit or a whole dataset takes either
    for unit in ("record", None):
        check_assertions(unit, "add_remove", PURE)
        check_assertions(unit, "add_remove", PURE, contribution="person")
    field, _ = _field(lambda: check_assertions(None, "add_remove", PURE, contribution="people"))
    assert field == "contribution"


@pytest.mark.parametrize("tree", TREES, ids=[t["type"] + str(i) for i, t in enumerate(TREES)])
def test_a_tree_on_add_remove_needs_zero_out_neighbours(tree: dict[str, Any]) -> None:
    declaration = parse_declaration(tree)
    for unit in (None, "record"):
        field, detail = _field(lambda u=unit: check_assertions(u, "add_remove", declaration))
        assert field == "neighbours"
        assert "Kairouz et al. 2021" in detail and '"neighbours": "zero_out"' in detail
        check_assertions(unit, "add_remove", declaration, neighbours="zero_out")
        check_assertions(unit, "replace_one", declaration)
        check_assertions(unit, "replace_one", declaration, neighbours="zero_out")
    # on a person dataset both assertions are needed
    field, _ = _field(lambda: check_assertions("person", "add_remove", declaration))
    assert field == "contribution"
    field, _ = _field(
        lambda: check_assertions("person", "add_remove", declaration, contribution="person")
    )
    assert field == "neighbours"
    check_assertions(
        "person", "add_remove", declaration, contribution="person", neighbours="zero_out"
    )


def test_neighbours_on_a_declaration_without_a_tree_is_refused() -> None:
    for relation in ("add_remove", "replace_one"):
        field, detail = _field(
            lambda r=relation: check_assertions(None, r, PURE, neighbours="zero_out")
        )
        assert (field, "has no tree_aggregation" in detail) == ("neighbours", True)
    gaussian = parse_declaration({"type": "gaussian", "sigma": "1"})
    check_assertions(None, "add_remove", gaussian)  # no tree: nothing to assert
    field, _ = _field(lambda: check_assertions(None, "add_remove", gaussian, neighbours="add"))
    assert field == "neighbours"
