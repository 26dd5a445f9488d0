"""A replay's position written as JSON and read back resumes to the verdict of a full replay
(:mod:`odometer_core.ledger.resume`), at every position of ledgers that hold every part of a
replayer's state: a split dataset's sub-budgets and ODP reservations (open, settled,
cancelled), budget changes and rejections; a partitioned dataset's fragmented runs, opened and
retired blocks and an open reservation on blocks; an analyst's quota with a reservation held
at it, revoked and granted again."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db.uow import UnitOfWork
from odometer_core.ledger.replay import Replayer, replay
from odometer_core.ledger.resume import (
    FORMAT,
    PositionError,
    replayer_from_json,
    replayer_to_json,
)
from tests.services.test_replay import _export, _mixed_history
from tests.support import AUTH, grant, ledger, new_organisation, new_principal

ODP = {
    "type": "odp",
    "cells": [{"name": "a", "epsilon": "0.01"}, {"name": "b", "epsilon": "0.04"}],
    "delta": "1e-9",
}


def _ok(r: Any, code: int = 201) -> dict[str, Any]:
    assert r.status_code == code, r.text
    out: dict[str, Any] = r.json()
    return out


def _partitioned(client: TestClient) -> list[dict[str, Any]]:
    org = new_organisation(client)
    analyst, headers = new_principal(client, org, "analyst")
    ds = _ok(
        client.post(
            "/v1/datasets",
            json={
                "name": "resume",
                "organisation_id": org,
                "budget": {"epsilon": "3", "delta": "0.000001"},
                "partition": {"kind": "bucket", "unit": "record", "buckets": 200},
            },
            headers=AUTH,
        )
    )["id"]
    _ok(
        client.post(
            f"/v1/datasets/{ds}/blocks", json={"open": {"from": 0, "to": 149}}, headers=AUTH
        ),
        200,
    )
    grant(client, ds, analyst, {"epsilon": "1", "delta": "0.000001"})
    for keys in ([1, 5, 9, 40], [5, 6, 7, 100, 140], [0, 149]):
        _ok(
            client.post(
                f"/v1/datasets/{ds}/invocations",
                json={
                    "mechanism": {"type": "pure_dp", "epsilon": "0.01"},
                    "blocks": {"keys": keys},
                },
                headers=headers,
            )
        )
    held = _ok(
        client.post(
            f"/v1/datasets/{ds}/invocations",
            json={"mechanism": ODP, "blocks": {"keys": [3, 4, 120]}},
            headers=headers,
        )
    )
    settled = _ok(
        client.post(
            f"/v1/datasets/{ds}/invocations",
            json={"mechanism": ODP, "blocks": {"keys": [8, 9]}},
            headers=headers,
        )
    )
    _ok(
        client.post(
            f"/v1/datasets/{ds}/invocations/{settled['id']}/settle",
            json={"cell": "a"},
            headers=headers,
        ),
        200,
    )
    _ok(
        client.post(
            f"/v1/datasets/{ds}/blocks", json={"retire": {"from": 140, "to": 149}}, headers=AUTH
        ),
        200,
    )
    _ok(client.delete(f"/v1/datasets/{ds}/grants/{analyst}", headers=AUTH), 200)
    grant(client, ds, analyst, {"epsilon": "0.5", "delta": "0.000001"})
    _ok(
        client.post(
            f"/v1/datasets/{ds}/invocations",
            json={"mechanism": {"type": "pure_dp", "epsilon": "0.02"}, "blocks": {"keys": [2, 3]}},
            headers=headers,
        )
    )
    _ok(
        client.patch(
            f"/v1/datasets/{ds}/budget",
            json={"epsilon": "4", "delta": "0.000001"},
            headers=AUTH,
        ),
        200,
    )
    assert held["status"] == "reserved"
    return ledger(client, ds)


def _resumed_everywhere(entries: list[dict[str, Any]]) -> None:
    """At every position: write, read back (through JSON text), feed the rest; the verdict
    and the position written again equal the full replay's."""
    full = replay(entries).to_json()
    assert full["ok"], full["problems"]
    replayer = Replayer()
    for at in range(len(entries) + 1):
        written = replayer_to_json(replayer)
        text = json.dumps(written)
        read = replayer_from_json(json.loads(text))
        assert replayer_to_json(read) == written, f"position {at} does not read back"
        for entry in entries[at:]:
            read.feed(entry)
        assert read.verdict().to_json() == full, f"resumed at {at}"
        if at < len(entries):
            replayer.feed(entries[at])


def test_a_split_ledger_resumes_at_every_position(uow: UnitOfWork) -> None:
    entries = _export(uow, _mixed_history(uow))
    assert len(entries) == 15
    _resumed_everywhere(entries)


def test_a_partitioned_ledger_with_quotas_resumes_at_every_position(client: TestClient) -> None:
    entries = _partitioned(client)
    kinds = {e["kind"] for e in entries}
    assert {"blocks_opened", "blocks_retired", "grant_changed", "invocation_reserved"} <= kinds
    replayer = Replayer()
    for entry in entries:
        replayer.feed(entry)
    # the state the test means to cover is there at the head
    assert replayer.selections and replayer.reservations and replayer.quotas
    assert replayer.quota_holds
    position = replayer_to_json(replayer)
    assert len(position["blocks"]["runs"]) > 3 * 10  # lo, hi, state of each run
    assert len(position["blocks"]["states"]) < len(position["blocks"]["runs"]) // 3
    _resumed_everywhere(entries)


def test_a_replay_with_a_problem_has_no_position(uow: UnitOfWork) -> None:
    entries = _export(uow, _mixed_history(uow))
    entries[6]["charge"] = {"epsilon": "0", "delta": "0"}
    replayer = Replayer()
    for entry in entries:
        replayer.feed(entry)
    with pytest.raises(PositionError):
        replayer_to_json(replayer)


@pytest.mark.parametrize(
    "broken",
    [
        {"format": "odometer-replay-position/0"},
        {"format": FORMAT},
        {"format": FORMAT, "chain": {}},
        [],
    ],
)
def test_what_is_not_a_position_is_refused(broken: Any) -> None:
    with pytest.raises(PositionError):
        replayer_from_json(broken)


def test_runs_out_of_order_are_refused(client: TestClient) -> None:
    entries = _partitioned(client)
    replayer = Replayer()
    for entry in entries:
        replayer.feed(entry)
    written = replayer_to_json(replayer)
    runs = written["blocks"]["runs"]
    runs[0:3], runs[3:6] = runs[3:6], runs[0:3]
    with pytest.raises(PositionError, match="sorted"):
        replayer_from_json(written)
    with pytest.raises(PositionError, match="triples"):
        replayer_from_json({**written, "blocks": {**written["blocks"], "runs": runs[:-1]}})
