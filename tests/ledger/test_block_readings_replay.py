"""The replay checks a partitioned dataset's maintained reading (``state.blocks.highest``) and
still verifies ledgers written before it existed (docs/accounting.md, *Partitioned datasets*).

Entries written before the maintained reading carry no ``highest``: a ledger without it anywhere,
or without it in a prefix, replays and reads the value recomputed; an entry without it after
one that carries it, a value edited, and a value absent from the dataset's creation but present
later with a wrong value are found."""

from __future__ import annotations

import copy
from typing import Any

from fastapi.testclient import TestClient

from odometer_core.ledger.replay import replay
from tests.support import AUTH, ledger, rehashed, status

ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.05"}, {"name": "high", "epsilon": "0.3"}],
}


def _scenario(client: TestClient) -> tuple[str, list[dict[str, Any]]]:
    body = {
        "name": "buckets",
        "budget": {"epsilon": "1", "delta": "0.000001"},
        "partition": {"kind": "bucket", "unit": "record", "buckets": 20},
    }
    ds = str(client.post("/v1/datasets", json=body, headers=AUTH).json()["id"])
    url = f"/v1/datasets/{ds}"
    pure = {"type": "pure_dp", "epsilon": "0.4"}
    steps: list[tuple[str, dict[str, Any]]] = [
        ("/blocks", {"open": {"from": 0, "to": 9}}),
        ("/invocations", {"mechanism": pure, "blocks": {"from": 0, "to": 1}}),
        ("/invocations", {"mechanism": ODP, "blocks": {"keys": [1, 5]}}),
        ("/blocks", {"retire": {"from": 0, "to": 2}}),
        ("/invocations", {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}, "blocks": "all"}),
    ]
    for path, payload in steps:
        r = client.post(f"{url}{path}", json=payload, headers=AUTH)
        assert r.status_code in (200, 201), r.text
    return ds, ledger(client, ds)


def _stripped(entries: list[dict[str, Any]], positions: range) -> list[dict[str, Any]]:
    out = copy.deepcopy(entries)
    for i in positions:
        del out[i]["state"]["blocks"]["highest"]
    return rehashed(out)


def test_ledgers_without_the_maintained_reading_still_verify(client: TestClient) -> None:
    ds, entries = _scenario(client)
    shown = status(client, ds)["odometer"]
    assert shown["epsilon"] == "0.7"  # block 1: 0.4 + 0.3 reserved, retired
    whole = replay(entries)
    assert whole.ok, whole.problems
    assert whole.odometer == shown
    for upto in (len(entries), 3, 1):  # everything, a prefix, the creation only
        earlier = replay(_stripped(entries, range(upto)))
        assert earlier.ok, (upto, earlier.problems)
        assert earlier.odometer == shown  # recomputed from the selections alone


def test_a_missing_or_edited_reading_is_found(client: TestClient) -> None:
    _, entries = _scenario(client)
    last = len(entries) - 1
    gap = replay(_stripped(entries, range(last, last + 1)))
    assert not gap.ok
    assert "maintained reading" in gap.problems[0]
    edited = copy.deepcopy(entries)
    edited[last]["state"]["blocks"]["highest"]["epsilon"] = "0.5"  # the retired block forgotten
    found = replay(rehashed(edited))
    assert not found.ok and f"entry {last + 1}" in found.problems[0]
    assert "state" in found.problems[0]
    late = _stripped(entries, range(3))
    late[-1]["state"]["blocks"]["highest"]["delta"] = "0.000001"
    assert not replay(rehashed(late)).ok
