"""What a declaration must state for a dataset's budget to protect what the dataset says it
protects, and block keys of the partition's own type, over HTTP on SQLite and PostgreSQL
(docs/accounting.md, *Partitioned datasets*: *Blocks that protect persons* and *Tree
aggregation's neighbours*).

- A dataset whose partition's unit is ``person`` admits only declarations marked
  ``"contribution": "person"`` (their guarantee holds for neighbouring inputs that differ in
  any or all of one person's records in each selected block); the others, registered or
  previewed,
  are a 422 that says what to do, and nothing is recorded. The marked one is admitted and the
  mark is in its ledger entry's request, which replays. The dataset's 201 and ``GET`` state the
  condition.
- A ``tree_aggregation`` (at any depth) on an ``add_remove`` dataset needs ``"neighbours":
  "zero_out"`` (each record keeps its leaf when another is added or removed); a
  ``replace_one`` dataset needs none; ``neighbours`` on a declaration without a tree is refused.
- Block keys are of the partition's own type: ``{"keys": [true]}`` is not bucket 1, ``1.0`` is
  not a key, a day is ``YYYY-MM-DD`` text only (not ``20261127``, a week date nor an integer),
  a bucket's text is ASCII digits without sign or leading zero, a month is 01 … 12.
- A new partition's time zone is a canonical IANA name."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.ledger.replay import replay
from tests.support import AUTH, ledger, status

PERSONS = {"kind": "bucket", "unit": "person", "buckets": 8}
BUCKETS = {"kind": "bucket", "unit": "record", "buckets": 8}
DAYS = {"kind": "day", "unit": "record", "timezone": "Europe/Zurich"}
PURE = {"type": "pure_dp", "epsilon": "0.4"}
#: What a person dataset's status says it requires.
PERSON_REQUIRED = (
    'declarations marked "contribution": "person": their guarantee holds for neighbouring '
    "inputs that differ in any or all of one person's records in each selected block (the "
    "analyst bounds each person's contribution to a block and calibrates the sensitivity to "
    "that bound); declarations stated for one record are refused"
)
TREE = {"type": "tree_aggregation", "noise_multiplier": "10", "step_counts": [15]}


def _dataset(
    client: TestClient,
    partition: dict[str, Any] | None,
    *,
    relation: str = "add_remove",
    mode: str = "basic",
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "assertions",
        "budget": {"epsilon": "1", "delta": "0.000001"},
        "relation": relation,
        "accounting": {"mode": mode},
    }
    if partition is not None:
        body["partition"] = partition
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    created: dict[str, Any] = r.json()
    return created


def _opened(client: TestClient, partition: dict[str, Any], first: Any, last: Any) -> str:
    ds = str(_dataset(client, partition)["id"])
    r = client.post(
        f"/v1/datasets/{ds}/blocks", json={"open": {"from": first, "to": last}}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    return ds


def _post(client: TestClient, ds: str, body: dict[str, Any], preview: bool = False) -> Any:
    path = f"/v1/datasets/{ds}/invocations" + ("/preview" if preview else "")
    return client.post(path, json=body, headers=AUTH)


def _unchanged(client: TestClient, ds: str, entries: int) -> None:
    """Nothing was recorded: the ledger has ``entries`` entries and nothing is spent."""
    assert len(ledger(client, ds)) == entries
    assert status(client, ds)["odometer"]["epsilon"] == "0"


# ---------------------------------------------------------------------------- person unit
@pytest.mark.parametrize("preview", [False, True])
@pytest.mark.parametrize("sent", [{}, {"contribution": "record"}])
def test_a_person_dataset_refuses_a_declaration_stated_for_one_record(
    client: TestClient, preview: bool, sent: dict[str, Any]
) -> None:
    ds = _opened(client, PERSONS, 0, 7)
    before = len(ledger(client, ds))
    r = _post(client, ds, {"mechanism": PURE, "blocks": {"from": 0, "to": 3}, **sent}, preview)
    assert r.status_code == 422, r.text
    body = r.json()
    assert (body["error"], body["field"]) == ("InvalidDeclaration", "contribution")
    assert body["detail"].startswith(
        "this dataset's blocks protect persons (partition unit 'person'): it admits only "
        "declarations whose guarantee holds for neighbouring inputs that differ in any or all "
        "of one person's records in each selected block."
    )
    assert 'send "contribution": "person"' in body["detail"]
    assert "group privacy" in body["detail"]
    _unchanged(client, ds, before)


def test_a_person_dataset_admits_a_marked_declaration_and_records_the_mark(
    client: TestClient,
) -> None:
    ds = _opened(client, PERSONS, 0, 7)
    marked = {"mechanism": PURE, "blocks": {"from": 0, "to": 3}, "contribution": "person"}
    preview = _post(client, ds, marked, preview=True)
    assert preview.status_code == 200, preview.text
    assert (preview.json()["status"], preview.json()["charge"]) == (
        "accepted",
        {"epsilon": "0.4", "delta": "0"},
    )
    r = _post(client, ds, marked)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["contribution"] == "person"
    assert body["charge"] == {"epsilon": "0.4", "delta": "0"}
    assert body["blocks"] == [{"from": "0", "to": "3", "blocks": 4}]
    entries = ledger(client, ds)
    entry = entries[-1]
    assert (entry["kind"], entry["seq"]) == ("invocation_accepted", body["ledger_seq"])
    assert entry["request"]["contribution"] == "person"
    assert "neighbours" not in entry["request"]
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert status(client, ds)["odometer"]["epsilon"] == "0.4"
    # the same key with the mark left out is another request
    keyed = {**AUTH, "Idempotency-Key": "person-once"}
    first = client.post(f"/v1/datasets/{ds}/invocations", json=marked, headers=keyed)
    assert first.status_code == 201, first.text
    unmarked = {k: v for k, v in marked.items() if k != "contribution"}
    again = client.post(f"/v1/datasets/{ds}/invocations", json=unmarked, headers=keyed)
    assert (again.status_code, again.json()["error"]) == (422, "IdempotencyKeyReused")


def test_the_dataset_states_what_a_person_block_requires(client: TestClient) -> None:
    created = _dataset(client, PERSONS)
    blocks = created["status"]["blocks"]
    assert blocks["unit"] == "person"
    assert (
        blocks["protects"] == "each block's budget protects every person whose records fall in it"
    )
    assert blocks["requires"] == PERSON_REQUIRED
    r = client.get(f"/v1/datasets/{created['id']}", headers=AUTH)
    assert r.status_code == 200
    assert r.json()["status"]["blocks"]["requires"] == PERSON_REQUIRED
    events = _dataset(client, DAYS)["status"]["blocks"]
    assert (events["unit"], events["requires"]) == ("record", None)


def test_a_record_dataset_takes_a_person_level_declaration(client: TestClient) -> None:
    """A guarantee for a person's whole contribution is also one for each of its records."""
    ds = _opened(client, DAYS, "2026-11-01", "2026-11-02")
    body = {"mechanism": PURE, "blocks": "all", "contribution": "person"}
    r = _post(client, ds, body)
    assert r.status_code == 201, r.text
    assert ledger(client, ds)[-1]["request"]["contribution"] == "person"


# ---------------------------------------------------------------------------- tree aggregation
COMPOSED_TREE = {"type": "composed", "mechanisms": [PURE, TREE]}


@pytest.mark.parametrize("preview", [False, True])
@pytest.mark.parametrize("mechanism", [TREE, COMPOSED_TREE], ids=["tree", "composed"])
def test_tree_aggregation_on_add_remove_needs_its_assumption(
    client: TestClient, preview: bool, mechanism: dict[str, Any]
) -> None:
    ds = str(_dataset(client, None, mode="zcdp")["id"])
    before = len(ledger(client, ds))
    r = _post(client, ds, {"mechanism": mechanism}, preview)
    assert r.status_code == 422, r.text
    body = r.json()
    assert (body["error"], body["field"]) == ("InvalidDeclaration", "neighbours")
    assert body["detail"].startswith(
        "tree_aggregation on an add_remove dataset is charged for zero-out neighbours "
        "(Kairouz et al. 2021)"
    )
    assert 'send "neighbours": "zero_out"' in body["detail"]
    _unchanged(client, ds, before)


def test_tree_aggregation_with_its_assumption_is_admitted_and_recorded(
    client: TestClient,
) -> None:
    ds = str(_dataset(client, None, mode="zcdp")["id"])
    r = _post(client, ds, {"mechanism": TREE, "neighbours": "zero_out"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["neighbours"] == "zero_out"
    assert body["charge"] == {"rho": "0.02", "delta": "0"}  # d = 4 levels: ρ = d/(2σ²)
    entries = ledger(client, ds)
    assert entries[-1]["request"]["neighbours"] == "zero_out"
    assert replay(entries).ok


def test_tree_aggregation_on_replace_one_needs_no_assumption(client: TestClient) -> None:
    ds = str(_dataset(client, None, relation="replace_one", mode="zcdp")["id"])
    r = _post(client, ds, {"mechanism": TREE})
    assert r.status_code == 201, r.text
    assert r.json()["charge"] == {"rho": "0.02", "delta": "0"}


def test_neighbours_without_a_tree_is_refused(client: TestClient) -> None:
    ds = str(_dataset(client, None)["id"])
    before = len(ledger(client, ds))
    r = _post(client, ds, {"mechanism": PURE, "neighbours": "zero_out"})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "neighbours"
    assert "has no tree_aggregation" in r.json()["detail"]
    _unchanged(client, ds, before)


# ---------------------------------------------------------------------------- key types
@pytest.mark.parametrize(
    "blocks",
    [
        {"keys": [True]},
        {"keys": [False, 2]},
        {"keys": [1.5]},
        {"from": True, "to": 2},
        {"from": 0, "to": 2.5},
        {"ranges": [{"from": 0, "to": True}]},
        {"keys": [None]},
    ],
)
def test_a_block_key_is_never_a_boolean_nor_a_fraction(
    client: TestClient, blocks: dict[str, Any]
) -> None:
    ds = _opened(client, BUCKETS, 0, 7)
    before = len(ledger(client, ds))
    body = {"mechanism": PURE, "blocks": blocks}
    r = _post(client, ds, body)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "ValidationError"
    assert "a block key is text" in r.text
    _unchanged(client, ds, before)


@pytest.mark.parametrize(
    "partition,first,last,key,detail",
    [
        (BUCKETS, 0, 7, " 1", "' 1' is not a bucket key"),
        (BUCKETS, 0, 7, "1_0", "'1_0' is not a bucket key"),
        (BUCKETS, 0, 7, "+1", "'+1' is not a bucket key"),
        (BUCKETS, 0, 7, "01", "'01' is not a bucket key"),
        (BUCKETS, 0, 7, "\u0661", "'\u0661' is not a bucket key"),
        (DAYS, "2026-11-01", "2026-11-30", 20_784, "20784 is not a day key: a day key is text"),
        (DAYS, "2026-11-01", "2026-11-30", "20261127", "'20261127' is not a day key"),
        (DAYS, "2026-11-01", "2026-11-30", "2026-W48-5", "'2026-W48-5' is not a day key"),
        (
            {"kind": "week", "unit": "record", "timezone": "UTC"},
            "2026-W40",
            "2026-W50",
            "2026-W\u0664\u0668",
            "is not a week key",
        ),
        (
            {"kind": "month", "unit": "record", "timezone": "UTC"},
            "2026-01",
            "2027-12",
            "2026-13",
            "'2026-13' is not a month key: a month is 01 … 12",
        ),
        (
            {"kind": "named", "unit": "record", "names": ["emea", "apac"]},
            "emea",
            "apac",
            0,
            "0 is not a named key: a named key is text",
        ),
    ],
)
def test_a_block_key_is_of_its_partitions_own_type(
    client: TestClient, partition: dict[str, Any], first: Any, last: Any, key: Any, detail: str
) -> None:
    ds = _opened(client, partition, first, last)
    before = len(ledger(client, ds))
    for blocks in ({"keys": [key]}, {"from": key, "to": last}):
        r = _post(client, ds, {"mechanism": PURE, "blocks": blocks})
        assert r.status_code == 422, r.text
        assert r.json()["error"] == "InvalidBlocks"
        assert detail in r.json()["detail"]
    r = client.post(
        f"/v1/datasets/{ds}/blocks", json={"retire": {"from": key, "to": key}}, headers=AUTH
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "InvalidBlocks"
    if isinstance(key, str):
        r = client.get(f"/v1/datasets/{ds}/blocks", params={"from": key}, headers=AUTH)
        assert r.status_code == 422, r.text
    _unchanged(client, ds, before)


def test_an_integer_written_with_a_fraction_is_that_integer(client: TestClient) -> None:
    """As everywhere JSON Schema says "integer": 3.0 and 3e0 are bucket 3; 1e-400 is not 0."""
    ds = _opened(client, BUCKETS, 0, 7)
    r = _post(client, ds, {"mechanism": PURE, "blocks": {"keys": [3.0, 5e0]}})
    assert r.status_code == 201, r.text
    assert r.json()["blocks"] == [
        {"from": "3", "to": "3", "blocks": 1},
        {"from": "5", "to": "5", "blocks": 1},
    ]
    r = client.post(
        f"/v1/datasets/{ds}/invocations",
        content=b'{"mechanism": {"type": "pure_dp", "epsilon": "0.4"}, '
        b'"blocks": {"keys": [1e-400]}}',
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert "a block key is text" in r.text


def test_opening_blocks_takes_keys_of_the_partitions_type(client: TestClient) -> None:
    ds = str(_dataset(client, BUCKETS)["id"])
    for change in ({"from": True, "to": 3}, {"from": 0, "to": 3.5}):
        r = client.post(f"/v1/datasets/{ds}/blocks", json={"open": change}, headers=AUTH)
        assert r.status_code == 422, r.text
        assert r.json()["error"] == "ValidationError"
    assert status(client, ds)["blocks"]["open"] == 0


# ---------------------------------------------------------------------------- time zones
@pytest.mark.parametrize(
    "zone",
    ["localtime", "posixrules", "Factory", "right/UTC", "posix/Europe/Zurich", "US/Eastern", "GB"],
)
def test_a_partition_takes_canonical_iana_zones_only(client: TestClient, zone: str) -> None:
    body = {
        "name": "zoned",
        "budget": {"epsilon": "1", "delta": "0"},
        "partition": {"kind": "day", "unit": "record", "timezone": zone},
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "InvalidBlocks"
    assert r.json()["detail"].startswith(f"unknown time zone {zone!r}: a partition's time zone")


@pytest.mark.parametrize("zone", ["Europe/Zurich", "UTC", "America/Argentina/Buenos_Aires"])
def test_canonical_zones_are_taken(client: TestClient, zone: str) -> None:
    created = _dataset(client, {"kind": "month", "unit": "record", "timezone": zone})
    assert created["partition"]["timezone"] == zone
