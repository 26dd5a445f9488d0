"""Partitioned datasets over HTTP: one filter per block, a selection decided as one
(docs/accounting.md, *Partitioned datasets*).

What is checked, with exact values: a charge over a range moves exactly the selected blocks; a
selection refused by one block is a 409 that names that block and what it has left, and changes
nothing anywhere (blocks, ledger state, the organisation cap); ODP reservations settle and
cancel on every reserved block; preview says which blocks can still afford a declaration and
how many more fit; a per-block budget change applies to open and future blocks; the
organisation cap and the analyst's quota are charged once per invocation, whatever the number
of blocks; blocks are opened and retired by curators, never twice; relations, modes and
malformed selections are refused with a reason; the export replays block by block and an
edited digest or block state is found."""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import cli as verify_cli
from odometer_core.ledger.replay import replay
from tests.support import AUTH, grant, ledger, new_organisation, new_principal, rehashed

DAYS = {"kind": "day", "unit": "record", "timezone": "Europe/Paris"}
PURE = {"type": "pure_dp", "epsilon": "0.4"}
ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.05"}, {"name": "high", "epsilon": "0.2"}],
}


def _dataset(
    client: TestClient,
    *,
    partition: dict[str, Any] | None = None,
    epsilon: str = "1",
    mode: str = "basic",
    organisation: str | None = None,
    headers: dict[str, str] = AUTH,
) -> str:
    body: dict[str, Any] = {
        "name": "events",
        "budget": {"epsilon": epsilon, "delta": "0.000001"},
        "accounting": {"mode": mode},
        "partition": partition or DAYS,
    }
    if organisation is not None:
        body["organisation_id"] = organisation
    r = client.post("/v1/datasets", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _open(client: TestClient, ds: str, first: Any, last: Any) -> Any:
    return client.post(
        f"/v1/datasets/{ds}/blocks", json={"open": {"from": first, "to": last}}, headers=AUTH
    )


def _register(
    client: TestClient,
    ds: str,
    blocks: Any,
    mechanism: dict[str, Any] = PURE,
    headers: dict[str, str] = AUTH,
    contribution: str | None = None,
    **extra: Any,
) -> Any:
    body = {"mechanism": mechanism, "blocks": blocks}
    if contribution is not None:  # a person's whole contribution ('person' datasets)
        body["contribution"] = contribution
    return client.post(f"/v1/datasets/{ds}/invocations", json=body, headers={**headers, **extra})


def _days(first: str, last: str) -> dict[str, str]:
    return {"from": first, "to": last}


def _runs(client: TestClient, ds: str, **params: Any) -> list[tuple[str, str, str]]:
    r = client.get(f"/v1/datasets/{ds}/blocks", params=params, headers=AUTH)
    assert r.status_code == 200, r.text
    return [(run["from"], run["to"], run["fraction_spent"]) for run in r.json()["runs"]]


def _november(client: TestClient, **kwargs: Any) -> str:
    ds = _dataset(client, **kwargs)
    r = _open(client, ds, "2026-11-01", "2026-11-30")
    assert r.status_code == 200, r.text
    assert r.json()["open"] == 30
    return ds


def test_a_charge_moves_exactly_the_selected_blocks(client: TestClient) -> None:
    ds = _november(client)
    r = _register(client, ds, _days("2026-11-20", "2026-11-26"))
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["charge"] == {"epsilon": "0.4", "delta": "0"}
    assert body["remaining"] == {"epsilon": "0.6", "delta": "0.000001"}
    assert body["blocks"] == [{"from": "2026-11-20", "to": "2026-11-26", "blocks": 7}]
    assert _register(client, ds, _days("2026-11-24", "2026-11-27")).status_code == 201
    assert _runs(client, ds) == [
        ("2026-11-01", "2026-11-19", "0"),
        ("2026-11-20", "2026-11-23", "0.4"),
        ("2026-11-24", "2026-11-26", "0.8"),
        ("2026-11-27", "2026-11-27", "0.4"),
        ("2026-11-28", "2026-11-30", "0"),
    ]
    status = client.get(f"/v1/datasets/{ds}", headers=AUTH).json()["status"]
    assert status["odometer"]["epsilon"] == "0.8"  # the highest block's reading
    assert status["blocks"]["open"] == 30
    assert status["blocks"]["runs"] == 5
    assert status["blocks"]["highest_fraction_spent"] == "0.8"
    assert "one record" in status["blocks"]["protects"]


def test_a_refusal_names_the_blocks_and_changes_nothing(client: TestClient) -> None:
    org = new_organisation(client)
    cap = client.patch(
        f"/v1/organisations/{org}/cap", json={"epsilon": "50", "delta": "0.001"}, headers=AUTH
    )
    assert cap.status_code == 200, cap.text
    ds = _november(client, organisation=org)
    assert _register(client, ds, _days("2026-11-20", "2026-11-26")).status_code == 201
    assert _register(client, ds, _days("2026-11-24", "2026-11-27")).status_code == 201
    before_runs = _runs(client, ds)
    before_org = client.get("/v1/organisations", headers=AUTH).json()
    before_state = ledger(client, ds)[-1]["state"]
    r = _register(
        client,
        ds,
        {"ranges": [_days("2026-11-10", "2026-11-12"), _days("2026-11-25", "2026-11-28")]},
    )
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["level"] == "dataset"
    assert body["blocks"] == [
        {
            "from": "2026-11-25",
            "to": "2026-11-26",
            "blocks": 2,
            "remaining": {"epsilon": "0.2", "delta": "0.000001"},
            "reason": "epsilon budget exceeded",
        }
    ]
    assert body["detail"].startswith(
        "2 of the selected blocks cannot afford it (2026-11-25 … 2026-11-26)"
    )
    assert body["remaining"] == {"epsilon": "0.2", "delta": "0.000001"}
    assert _runs(client, ds) == before_runs
    after_org = client.get("/v1/organisations", headers=AUTH).json()
    mine = [o for o in after_org["organisations"] if o["id"] == org]
    was = [o for o in before_org["organisations"] if o["id"] == org]
    assert mine[0]["usage"] == was[0]["usage"]
    entries = ledger(client, ds)
    assert entries[-1]["kind"] == "invocation_rejected"
    assert entries[-1]["state"]["blocks"]["runs"] == before_state["blocks"]["runs"]
    assert replay(entries).ok


def test_odp_settles_and_cancels_on_every_reserved_block(client: TestClient) -> None:
    ds = _november(client)
    assert _register(client, ds, _days("2026-11-05", "2026-11-06")).status_code == 201
    r = _register(client, ds, _days("2026-11-01", "2026-11-10"), ODP)
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "reserved"
    reserved = r.json()["id"]
    assert _runs(client, ds, to="2026-11-11") == [
        ("2026-11-01", "2026-11-04", "0.2"),
        ("2026-11-05", "2026-11-06", "0.6"),
        ("2026-11-07", "2026-11-10", "0.2"),
        ("2026-11-11", "2026-11-11", "0"),
    ]
    s = client.post(
        f"/v1/datasets/{ds}/invocations/{reserved}/settle", json={"cell": "low"}, headers=AUTH
    )
    assert s.status_code == 200, s.text
    assert s.json()["refund"] == {"epsilon": "0.15", "delta": "0"}
    assert _runs(client, ds, to="2026-11-11") == [
        ("2026-11-01", "2026-11-04", "0.05"),
        ("2026-11-05", "2026-11-06", "0.45"),
        ("2026-11-07", "2026-11-10", "0.05"),
        ("2026-11-11", "2026-11-11", "0"),
    ]
    r = _register(client, ds, "all", ODP)
    assert r.status_code == 201, r.text
    assert r.json()["blocks"] == [{"from": "2026-11-01", "to": "2026-11-30", "blocks": 30}]
    c = client.post(f"/v1/datasets/{ds}/invocations/{r.json()['id']}/cancel", headers=AUTH)
    assert c.status_code == 200, c.text
    assert c.json()["refund"] == {"epsilon": "0.2", "delta": "0"}
    assert _runs(client, ds, to="2026-11-11")[1] == ("2026-11-05", "2026-11-06", "0.45")
    assert replay(ledger(client, ds)).ok


def test_preview_says_which_blocks_can_afford_it_and_how_many_more_fit(
    client: TestClient,
) -> None:
    ds = _november(client)
    assert _register(client, ds, _days("2026-11-03", "2026-11-04")).status_code == 201
    body = {
        "mechanism": {"type": "pure_dp", "epsilon": "0.3"},
        "blocks": _days("2026-11-01", "2026-11-05"),
    }
    r = client.post(f"/v1/datasets/{ds}/invocations/preview", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    preview = r.json()
    assert preview["status"] == "accepted"
    assert preview["blocks"]["affordable"] == [
        {"from": "2026-11-01", "to": "2026-11-05", "blocks": 5}
    ]
    assert preview["blocks"]["refused"] == []
    # 2026-11-03 and -04 have 0.6 left: 0.3 fits twice more there (the others: three times)
    assert preview["blocks"]["fit"] == {
        "count": 2,
        "at_least": False,
        "reason": "epsilon budget exceeded",
    }
    body["mechanism"] = {"type": "pure_dp", "epsilon": "0.7"}
    preview = client.post(f"/v1/datasets/{ds}/invocations/preview", json=body, headers=AUTH).json()
    assert preview["status"] == "rejected"
    assert preview["blocks"]["affordable"] == [
        {"from": "2026-11-01", "to": "2026-11-02", "blocks": 2},
        {"from": "2026-11-05", "to": "2026-11-05", "blocks": 1},
    ]
    assert preview["blocks"]["refused"] == [{"from": "2026-11-03", "to": "2026-11-04", "blocks": 2}]
    assert preview["blocks"]["fit"]["count"] == 0
    assert len(ledger(client, ds)) == 3  # created, opened, one charge: preview wrote nothing


def test_a_budget_change_applies_to_open_and_future_blocks(client: TestClient) -> None:
    ds = _dataset(client)
    assert _open(client, ds, "2026-11-01", "2026-11-10").status_code == 200
    assert _register(client, ds, _days("2026-11-01", "2026-11-02")).status_code == 201
    assert _register(client, ds, _days("2026-11-01", "2026-11-01")).status_code == 201
    low = client.patch(
        f"/v1/datasets/{ds}/budget", json={"epsilon": "0.7", "delta": "0.000001"}, headers=AUTH
    )
    assert low.status_code == 409, low.text
    assert low.json()["error"] == "BudgetBelowSpent"
    r = client.patch(
        f"/v1/datasets/{ds}/budget", json={"epsilon": "2", "delta": "0.000001"}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    assert "every open block and every block opened later" in r.json()["effect"]
    assert _runs(client, ds) == [
        ("2026-11-01", "2026-11-01", "0.4"),
        ("2026-11-02", "2026-11-02", "0.2"),
        ("2026-11-03", "2026-11-10", "0"),
    ]
    assert _open(client, ds, "2026-11-11", "2026-11-12").status_code == 200
    for _ in range(5):
        assert _register(client, ds, _days("2026-11-12", "2026-11-12")).status_code == 201
    assert _register(client, ds, _days("2026-11-12", "2026-11-12")).status_code == 409
    assert replay(ledger(client, ds)).ok


def test_the_cap_and_the_quota_are_charged_once_per_invocation(client: TestClient) -> None:
    org = new_organisation(client)
    cap = client.patch(
        f"/v1/organisations/{org}/cap", json={"epsilon": "1", "delta": "0.001"}, headers=AUTH
    )
    assert cap.status_code == 200, cap.text
    analyst, headers = new_principal(client, org, "analyst")
    ds = _november(client, organisation=org, epsilon="10")
    grant(client, ds, analyst, quota={"epsilon": "0.8", "delta": "0.0001"})
    r = _register(client, ds, "all", headers=headers)
    assert r.status_code == 201, r.text
    assert r.json()["levels"] == {
        "organisation": {
            "charge": {"epsilon": "0.4", "delta": "0"},
            "remaining": {"epsilon": "0.6", "delta": "0.001"},
        },
        "quota": {
            "charge": {"epsilon": "0.4", "delta": "0"},
            "remaining": {"epsilon": "0.4", "delta": "0.0001"},
        },
    }
    assert (
        _register(client, ds, _days("2026-11-01", "2026-11-02"), headers=headers).status_code == 201
    )
    third = _register(client, ds, _days("2026-11-03", "2026-11-03"), headers=headers)
    assert third.status_code == 409
    assert third.json()["level"] == "organisation"
    assert "blocks" not in third.json()


def test_blocks_are_opened_and_retired_by_curators_and_never_reopened(client: TestClient) -> None:
    org = new_organisation(client)
    curator = new_principal(client, org, "curator")[1]
    analyst, analyst_headers = new_principal(client, org, "analyst")
    ds = _dataset(client, organisation=org, headers=curator)
    grant(client, ds, analyst)
    denied = client.post(
        f"/v1/datasets/{ds}/blocks",
        json={"open": _days("2026-11-01", "2026-11-02")},
        headers=analyst_headers,
    )
    assert denied.status_code == 403
    assert _register(client, ds, "all").status_code == 409  # nothing open: BlockConflict
    assert _open(client, ds, "2026-11-01", "2026-11-10").status_code == 200
    again = _open(client, ds, "2026-11-10", "2026-11-12")
    assert again.status_code == 409
    assert again.json()["error"] == "BlockConflict"
    retired = client.post(
        f"/v1/datasets/{ds}/blocks",
        json={"retire": _days("2026-11-01", "2026-11-03")},
        headers=curator,
    )
    assert retired.status_code == 200, retired.text
    assert retired.json()["open"] == 7
    gone = _register(client, ds, _days("2026-11-02", "2026-11-05"))
    assert gone.status_code == 409
    assert gone.json()["error"] == "BlockConflict"
    assert _open(client, ds, "2026-11-01", "2026-11-01").status_code == 409
    assert _open(client, ds, "2026-11-11", "2026-11-20").status_code == 200
    assert _runs(client, ds) == [("2026-11-04", "2026-11-20", "0")]
    kinds = [e["kind"] for e in ledger(client, ds)]
    assert kinds == [
        "dataset_created",
        "grant_changed",
        "blocks_opened",
        "blocks_retired",
        "blocks_opened",
    ]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"relation": "replace_one"}, 422, "InvalidConfig"),
        ({"accounting": {"mode": "split", "sub_budgets": []}}, 422, None),
        ({"partition": {"kind": "day", "unit": "record"}}, 422, "InvalidBlocks"),
        (
            {"partition": {"kind": "day", "unit": "record", "timezone": "Mars/Olympus"}},
            422,
            "InvalidBlocks",
        ),
        ({"partition": {"kind": "bucket", "unit": "people", "buckets": 3}}, 422, "ValidationError"),
        ({"partition": {"kind": "bucket", "unit": "person", "buckets": 0}}, 422, "ValidationError"),
    ],
)
def test_bad_partitions_are_refused(
    client: TestClient, body: dict[str, Any], status: int, code: str | None
) -> None:
    full = {"name": "bad", "budget": {"epsilon": "1", "delta": "0.000001"}, "partition": DAYS}
    full.update(body)
    r = client.post("/v1/datasets", json=full, headers=AUTH)
    assert r.status_code == status, r.text
    if code is not None:
        assert r.json()["error"] == code


def test_replace_one_needs_an_immutable_key(client: TestClient) -> None:
    body = {
        "name": "buckets",
        "budget": {"epsilon": "1", "delta": "0.000001"},
        "relation": "replace_one",
        "partition": {"kind": "bucket", "unit": "person", "buckets": 64, "immutable_key": True},
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    assert r.json()["partition"]["immutable_key"] is True


@pytest.mark.parametrize(
    ("blocks", "code"),
    [
        (None, "InvalidBlocks"),
        ({"from": "2026-11-05", "to": "2026-11-01"}, "InvalidBlocks"),
        ({"from": "2026-13-01", "to": "2026-13-02"}, "InvalidBlocks"),
        ({"keys": ["2026-11-01", "tomorrow"]}, "InvalidBlocks"),
        ({"from": "2026-10-30", "to": "2026-11-02"}, "BlockConflict"),
        ({"from": "2026-11-01"}, "ValidationError"),
        ("every", "ValidationError"),
    ],
)
def test_bad_selections_are_refused_and_change_nothing(
    client: TestClient, blocks: Any, code: str
) -> None:
    ds = _november(client)
    head = ledger(client, ds)
    body: dict[str, Any] = {"mechanism": PURE}
    if blocks is not None:
        body["blocks"] = blocks
    r = client.post(f"/v1/datasets/{ds}/invocations", json=body, headers=AUTH)
    assert r.status_code in (409, 422), r.text
    assert r.json()["error"] == code
    assert ledger(client, ds) == head


def test_a_selection_on_a_whole_dataset_is_refused(client: TestClient) -> None:
    body = {"name": "whole", "budget": {"epsilon": "1", "delta": "0.000001"}}
    ds = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
    r = _register(client, ds, _days("2026-11-01", "2026-11-02"))
    assert r.status_code == 422
    assert r.json()["error"] == "InvalidBlocks"
    listed = client.get(f"/v1/datasets/{ds}/blocks", headers=AUTH)
    assert listed.status_code == 422


def test_idempotent_retries_answer_the_same_bytes(client: TestClient) -> None:
    ds = _november(client)
    keyed = {**AUTH, "Idempotency-Key": "blocks-1"}
    first = _register(client, ds, _days("2026-11-01", "2026-11-03"), headers=keyed)
    again = _register(client, ds, _days("2026-11-01", "2026-11-03"), headers=keyed)
    assert first.status_code == again.status_code == 201
    assert again.content == first.content
    assert again.headers["Idempotent-Replayed"] == "true"
    other = _register(client, ds, _days("2026-11-01", "2026-11-04"), headers=keyed)
    assert other.status_code == 422
    assert _runs(client, ds)[0] == ("2026-11-01", "2026-11-03", "0.4")


@pytest.mark.parametrize("mode", ["basic", "zcdp", "rdp", "gdp"])
def test_the_export_replays_block_by_block_and_edits_are_found(
    client: TestClient, mode: str
) -> None:
    ds = _dataset(
        client,
        mode=mode,
        partition={"kind": "bucket", "unit": "person", "buckets": 100},
        epsilon="3",
    )
    assert _open(client, ds, 0, 49).status_code == 200
    gaussian = {"type": "gaussian", "sigma": "3", "sensitivity": "1"}
    for blocks in ({"from": 0, "to": 20}, {"keys": [5, 7, 30]}, "all", {"from": 10, "to": 12}):
        r = _register(client, ds, blocks, gaussian, contribution="person")
        assert r.status_code in (201, 409), r.text
    entries = ledger(client, ds)
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.state == entries[-1]["state"]
    # a block's state edited (its digest kept) is found by the digest
    edited = copy.deepcopy(entries)
    charged = next(i for i, e in enumerate(edited) if e["kind"] == "invocation_accepted")
    edited[charged]["state"]["blocks"]["digest"] = "0" * 64
    found = replay(rehashed(edited))
    assert not found.ok
    assert "state" in found.problems[0]
    # a selection narrowed by one block at its boundary is found
    narrowed = copy.deepcopy(entries)
    lo, hi = narrowed[charged]["request"]["blocks"][0]
    narrowed[charged]["request"]["blocks"][0] = [lo, hi - 1]
    assert not replay(rehashed(narrowed)).ok


def test_the_dataset_listing_shows_a_partitioned_dataset(client: TestClient) -> None:
    ds = _november(client)
    listed = client.get("/v1/datasets", params={"limit": 1000}, headers=AUTH).json()["datasets"]
    mine = next(d for d in listed if d["id"] == ds)
    assert mine["partition"] == {"kind": "day", "unit": "record", "timezone": "Europe/Paris"}
    assert mine["status"]["per_block"] is True
    assert Decimal(mine["status"]["blocks"]["highest_fraction_spent"]) == 0


def test_the_report_covers_a_block_range_and_verifies(client: TestClient) -> None:
    ds = _november(client)
    assert _register(client, ds, _days("2026-11-01", "2026-11-02")).status_code == 201
    assert _register(client, ds, _days("2026-11-20", "2026-11-21")).status_code == 201
    assert _register(client, ds, _days("2026-11-21", "2026-11-22")).status_code == 201
    whole = client.get(f"/v1/datasets/{ds}/report", headers=AUTH).json()
    assert whole["verification"]["ok"] is True
    assert whole["status"]["odometer"]["epsilon"] == "0.8"
    assert whole["analysts"][0]["accepted"] == 3
    late = client.get(
        f"/v1/datasets/{ds}/report", params={"from": "2026-11-15", "to": "2026-11-30"}, headers=AUTH
    ).json()
    assert late["analysts"][0]["accepted"] == 2
    assert late["analysts"][0]["charged"] == {"epsilon": "0.8", "delta": "0"}
    assert [(r["from"], r["to"], r["fraction_spent"]) for r in late["blocks"]["runs"]] == [
        ("2026-11-15", "2026-11-19", "0"),
        ("2026-11-20", "2026-11-20", "0.4"),
        ("2026-11-21", "2026-11-21", "0.8"),
        ("2026-11-22", "2026-11-22", "0.4"),
        ("2026-11-23", "2026-11-30", "0"),
    ]
    whole_ds = client.post(
        "/v1/datasets", json={"name": "w", "budget": {"epsilon": 1, "delta": 0}}, headers=AUTH
    ).json()["id"]
    r = client.get(f"/v1/datasets/{whole_ds}/report", params={"from": "1"}, headers=AUTH)
    assert r.status_code == 422


def test_odometer_verify_checks_a_partitioned_export_offline(
    client: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = _november(client, mode="rdp", epsilon="3")
    gaussian = {"type": "gaussian", "sigma": "4", "sensitivity": "1"}
    for blocks in (_days("2026-11-01", "2026-11-15"), "all", {"keys": ["2026-11-03"]}):
        assert _register(client, ds, blocks, gaussian).status_code == 201
    r = client.get(f"/v1/datasets/{ds}/ledger", params={"export": "true"}, headers=AUTH)
    assert r.status_code == 200
    path = tmp_path / "export.json"
    path.write_bytes(r.content)
    assert verify_cli.main(["verify", str(path), "--unpinned"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert (verdict["ok"], verdict["entries"]) == (True, 5)
    exported = json.loads(r.content)
    exported["entries"][3]["state"]["blocks"]["runs"] += 1
    path.write_text(json.dumps({**exported, "entries": rehashed(exported["entries"])}))
    assert verify_cli.main(["verify", str(path), "--unpinned"]) == 1
    assert "entry 4" in json.loads(capsys.readouterr().out)["problems"][0]


def test_sampling_without_replacement_needs_the_immutable_key(client: TestClient) -> None:
    wor = {
        "type": "subsampled",
        "scheme": "without_replacement",
        "m": 100,
        "n": 10000,
        "mechanism": {"type": "gaussian", "sigma": "4", "sensitivity": "1"},
    }
    ds = _november(client, mode="rdp", epsilon="3")
    r = _register(client, ds, _days("2026-11-01", "2026-11-05"), wor)
    assert r.status_code == 422, r.text
    assert "replace_one" in r.json()["detail"]
    body = {
        "name": "people",
        "budget": {"epsilon": "3", "delta": "0.000001"},
        "relation": "replace_one",
        "accounting": {"mode": "rdp"},
        "partition": {"kind": "bucket", "unit": "person", "buckets": 8, "immutable_key": True},
    }
    people = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
    assert _open(client, people, 0, 7).status_code == 200
    r = _register(client, people, "all", wor, contribution="person")
    assert r.status_code == 201, r.text


def test_blocks_not_open_are_named_by_their_keys(client: TestClient) -> None:
    ds = _november(client)
    r = _register(client, ds, _days("2026-10-30", "2026-11-02"))
    assert r.status_code == 409
    body = r.json()
    assert body["error"] == "BlockConflict"
    assert "2026-10-30 … 2026-10-31" in body["detail"]
    assert body["not_open"] == [{"from": "2026-10-30", "to": "2026-10-31", "blocks": 2}]
