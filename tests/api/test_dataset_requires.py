"""A dataset states what a declaration must assert on it (``requires``), in its 201, its
``GET`` and the list, and every assertion it states is one the registration enforces: a
declaration without it is a 422 naming the field, with it the same declaration is admitted
(docs/accounting.md, *Blocks that protect persons* and *Tree aggregation's neighbours*)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.partition import PERSON_REQUIRED, TREE_REQUIRED
from tests.support import AUTH

TREE = {"type": "tree_aggregation", "noise_multiplier": "10", "step_counts": [15]}
PERSON = {
    "field": "contribution",
    "value": "person",
    "applies_to": "every declaration",
    "text": PERSON_REQUIRED,
}
NEIGHBOURS = {
    "field": "neighbours",
    "value": "zero_out",
    "applies_to": "declarations containing a tree_aggregation",
    "text": TREE_REQUIRED,
}
BUCKETS = {"kind": "bucket", "buckets": 4}


@pytest.mark.parametrize(
    ("relation", "partition", "expected"),
    [
        ("add_remove", None, [NEIGHBOURS]),
        ("replace_one", None, []),
        ("add_remove", {**BUCKETS, "unit": "record"}, [NEIGHBOURS]),
        ("add_remove", {**BUCKETS, "unit": "person"}, [PERSON, NEIGHBOURS]),
        ("replace_one", {**BUCKETS, "unit": "person", "immutable_key": True}, [PERSON]),
    ],
    ids=["whole", "whole-replace-one", "record-blocks", "person-blocks", "person-replace-one"],
)
def test_a_dataset_states_what_it_requires_and_enforces_each(
    client: TestClient,
    relation: str,
    partition: dict[str, Any] | None,
    expected: list[dict[str, str]],
) -> None:
    body: dict[str, Any] = {
        "name": "requires",
        "budget": {"epsilon": "10", "delta": "0.000001"},
        "relation": relation,
    }
    if partition is not None:
        body["partition"] = partition
    created = client.post("/v1/datasets", json=body, headers=AUTH)
    assert created.status_code == 201, created.text
    assert created.json()["requires"] == expected
    ds = created.json()["id"]
    read = client.get(f"/v1/datasets/{ds}", headers=AUTH).json()
    assert read["requires"] == expected
    assert _listed(client, ds)["requires"] == expected
    selection: dict[str, Any] = {}
    if partition is not None:
        opened = client.post(
            f"/v1/datasets/{ds}/blocks", json={"open": {"from": 0, "to": 3}}, headers=AUTH
        )
        assert opened.status_code == 200, opened.text
        selection = {"blocks": {"keys": [1]}}
    # every stated assertion is needed: leaving any one out is a 422 naming its field
    full = {item["field"]: item["value"] for item in expected}
    for item in expected:
        without = {k: v for k, v in full.items() if k != item["field"]}
        r = client.post(
            f"/v1/datasets/{ds}/invocations",
            json={"mechanism": TREE, **selection, **without},
            headers=AUTH,
        )
        assert r.status_code == 422, r.text
        assert (r.json()["error"], r.json()["field"]) == ("InvalidDeclaration", item["field"])
    # … and what is stated is enough: with all of them the tree is admitted
    r = client.post(
        f"/v1/datasets/{ds}/invocations",
        json={"mechanism": TREE, **selection, **full},
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "accepted"


def _listed(client: TestClient, ds: str) -> dict[str, Any]:
    """``ds`` as the dataset list shows it, whatever page it is on (the database is shared with
    the other tests, which create datasets of their own)."""
    offset = 0
    while True:
        page = client.get(f"/v1/datasets?limit=1000&offset={offset}", headers=AUTH).json()
        found = [d for d in page["datasets"] if d["id"] == ds]
        if found:
            shown: dict[str, Any] = found[0]
            return shown
        assert page["datasets"], f"{ds} is not listed"
        offset += len(page["datasets"])
