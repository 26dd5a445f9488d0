"""Retired blocks keep what was released, and reservations end whatever happens to their blocks
(docs/accounting.md, *Partitioned datasets*: the dataset's reading covers every block ever
opened; ODP on blocks).

Over HTTP on SQLite and PostgreSQL: a charge and an open ODP reservation on days, those days
retired; the dataset's reading, its summary, the report, the listing and ``odometer verify`` on
an export made afterwards still show what was released (0.8, exactly); a budget below it is a
409 that changes nothing; the reservations settle and cancel (200, never a 5xx), and the
organisation cap and the analyst's quota end exactly as they do when the same sequence runs with
the days left open; the ledger names the retired blocks of each finished reservation and
replays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import cli as verify_cli
from odometer_core.ledger.replay import replay
from tests.support import AUTH, grant, ledger, new_organisation, new_principal, rehashed, status

DAYS = {"kind": "day", "unit": "record", "timezone": "Europe/Paris"}
PURE = {"type": "pure_dp", "epsilon": "0.5"}
ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.05"}, {"name": "high", "epsilon": "0.3"}],
}
#: The reading released about the 2nd of November: 0.5 charged, 0.3 reserved at its worst cell.
RELEASED = "0.8"


def _days(first: str, last: str) -> dict[str, str]:
    return {"from": first, "to": last}


def _ok(r: Any, code: int = 200) -> dict[str, Any]:
    assert r.status_code == code, r.text
    body: dict[str, Any] = r.json()
    return body


class Scenario:
    """An organisation with a basic cap, an analyst with a quota, and a November of daily
    blocks (ε = 1 each) in the organisation: 0.5 charged on the 1st … 2nd, an ODP reservation
    on the 2nd … 3rd (to be settled) and one on the 3rd … 5th (to be cancelled)."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.org = new_organisation(client)
        _ok(
            client.patch(
                f"/v1/organisations/{self.org}/cap",
                json={"epsilon": "5", "delta": "0.001"},
                headers=AUTH,
            )
        )
        self.analyst, self.headers = new_principal(client, self.org, "analyst")
        body = {
            "name": "events",
            "budget": {"epsilon": "1", "delta": "0.000001"},
            "accounting": {"mode": "basic"},
            "partition": DAYS,
            "organisation_id": self.org,
        }
        self.ds = str(_ok(client.post("/v1/datasets", json=body, headers=AUTH), 201)["id"])
        grant(client, self.ds, self.analyst, {"epsilon": "3", "delta": "0.0001"})
        _ok(self.blocks({"open": _days("2026-11-01", "2026-11-30")}))
        _ok(self.register(_days("2026-11-01", "2026-11-02"), PURE), 201)
        settled = _ok(self.register(_days("2026-11-02", "2026-11-03"), ODP), 201)
        cancelled = _ok(self.register(_days("2026-11-03", "2026-11-05"), ODP), 201)
        assert settled["status"] == cancelled["status"] == "reserved"
        self.settled, self.cancelled = str(settled["id"]), str(cancelled["id"])

    def register(self, blocks: Any, mechanism: dict[str, Any]) -> Any:
        body = {"mechanism": mechanism, "blocks": blocks}
        url = f"/v1/datasets/{self.ds}/invocations"
        return self.client.post(url, json=body, headers=self.headers)

    def blocks(self, body: dict[str, Any]) -> Any:
        return self.client.post(f"/v1/datasets/{self.ds}/blocks", json=body, headers=AUTH)

    def finish(self, inv: str, action: str, body: dict[str, Any] | None = None) -> Any:
        url = f"/v1/datasets/{self.ds}/invocations/{inv}/{action}"
        return self.client.post(url, json=body, headers=self.headers)

    def upper_levels(self) -> tuple[Any, Any]:
        """The organisation's cap status and the analyst's quota status, as served."""
        orgs = _ok(self.client.get("/v1/organisations", headers=AUTH))["organisations"]
        org = next(o for o in orgs if o["id"] == self.org)
        grants = _ok(self.client.get(f"/v1/datasets/{self.ds}/grants", headers=AUTH))["grants"]
        quota = next(g for g in grants if g["principal_id"] == self.analyst)
        return org["status"], quota["quota_state"]


def _finished_levels(scenario: Scenario) -> tuple[Any, Any, Any, Any]:
    settle = _ok(scenario.finish(scenario.settled, "settle", {"cell": "low"}))
    cancel = _ok(scenario.finish(scenario.cancelled, "cancel"))
    org, quota = scenario.upper_levels()
    return (settle["levels"], settle["charge"], settle["refund"]), cancel["levels"], org, quota


def test_retiring_blocks_keeps_the_reading_and_reservations_end_as_with_blocks_open(
    client: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept_open, retired = Scenario(client), Scenario(client)
    before = status(client, retired.ds)
    assert before["odometer"]["epsilon"] == RELEASED
    _ok(retired.blocks({"retire": _days("2026-11-01", "2026-11-04")}))

    # the reading, the summary, the listing and the report still say what was released
    after = status(client, retired.ds)
    assert after["odometer"] == before["odometer"]
    assert after["blocks"]["open"] == 26
    assert after["blocks"]["highest_fraction_spent"] == RELEASED
    summary = after["summary"]
    assert summary["guarantee"] == {"epsilon": RELEASED, "delta": "0"}
    assert summary["text"].startswith(
        f"every block ever opened, retired ones included: certified ε = {RELEASED}, δ = 0 so far"
    )
    assert "the most spent open block has left" in summary["text"]
    assert "most spent open block:" not in summary["text"]
    listed = _ok(client.get("/v1/datasets", params={"limit": 1000}, headers=AUTH))["datasets"]
    assert (
        next(d for d in listed if d["id"] == retired.ds)["status"]["odometer"] == after["odometer"]
    )
    report = _ok(client.get(f"/v1/datasets/{retired.ds}/report", headers=AUTH))
    assert report["status"]["odometer"]["epsilon"] == RELEASED
    assert report["verification"]["ok"] is True, report["verification"]

    # a budget below what was released is refused and changes nothing
    head = ledger(client, retired.ds)
    for low in ("0.05", "0.79"):
        refused = client.patch(
            f"/v1/datasets/{retired.ds}/budget",
            json={"epsilon": low, "delta": "0.000001"},
            headers=AUTH,
        )
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"] == "BudgetBelowSpent"
        assert "0.8" in refused.json()["detail"]
    assert ledger(client, retired.ds) == head
    assert status(client, retired.ds)["budget"]["epsilon"] == "1"

    # both reservations end: the cap and the quota exactly as with the days left open
    ended = _finished_levels(retired)
    assert ended == _finished_levels(kept_open)
    settle_levels, charge, refund = ended[0]
    assert (charge, refund) == (
        {"epsilon": "0.05", "delta": "0"},
        {"epsilon": "0.25", "delta": "0"},
    )
    assert settle_levels["organisation"] == {
        "charge": {"epsilon": "0.05", "delta": "0"},
        "refund": {"epsilon": "0.25", "delta": "0"},
    }
    assert settle_levels["quota"] == settle_levels["organisation"]
    assert ended[1]["organisation"]["refund"] == {"epsilon": "0.3", "delta": "0"}
    org, quota = ended[2], ended[3]
    # 0.5 + 0.05 spent, nothing reserved any more, at both levels
    assert (org["spent"], org["reserved"]) == (
        {"epsilon": "0.55", "delta": "0"},
        {"epsilon": "0", "open": 0},
    )
    assert quota == {
        "spent_epsilon": "0.55",
        "reserved_epsilon": "0",
        "spent_delta": "0",
        "open_reservations": 0,
    }
    assert status(client, retired.ds)["odometer"]["epsilon"] == RELEASED  # never falls

    # the ledger names the retired blocks of each reservation, and replays
    entries = ledger(client, retired.ds)
    reserved = {e["invocation_id"]: e for e in entries if e["kind"] == "invocation_reserved"}
    finished = {e["invocation_id"]: e for e in entries[-2:]}
    on_2_3 = reserved[retired.settled]["request"]["blocks"]
    assert finished[retired.settled]["request"]["retired"] == on_2_3
    lo, hi = reserved[retired.cancelled]["request"]["blocks"][0]
    assert hi - lo == 3  # the 3rd … 5th, of which the 3rd and 4th were retired
    assert finished[retired.cancelled]["request"]["retired"] == [[lo, lo + 2]]
    assert all("retired" not in e["request"] for e in ledger(client, kept_open.ds)[-2:])
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.odometer == status(client, retired.ds)["odometer"]
    assert verdict.state == entries[-1]["state"]
    assert entries[-1]["state"]["blocks"]["highest"]["epsilon"] == RELEASED

    # odometer verify on an export made afterwards: the same reading
    export = client.get(
        f"/v1/datasets/{retired.ds}/ledger", params={"export": "true"}, headers=AUTH
    )
    path = tmp_path / "export.json"
    path.write_bytes(export.content)
    capsys.readouterr()
    assert verify_cli.main(["verify", "--unpinned", str(path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["ok"] is True
    assert shown["odometer"]["epsilon"] == RELEASED

    # a retired list edited (a block left out) is found by the replay
    edited = [dict(e) for e in entries]
    last = edited[-1] if edited[-1]["invocation_id"] == retired.cancelled else edited[-2]
    last["request"] = {**last["request"], "retired": [[lo, lo + 1]]}
    found = replay(rehashed(edited))
    assert not found.ok and "retired" in found.problems[0]


def test_a_reservation_whose_blocks_are_all_retired_settles_and_cancels(
    client: TestClient,
) -> None:
    """The issue's case: a reservation on one day, that day retired, then settled (or
    cancelled) by the analyst or the admin: 200, the invocation finished, its ε released at
    the cap and the quota."""
    scenario = Scenario(client)
    _ok(scenario.blocks({"retire": _days("2026-11-01", "2026-11-05")}))
    assert status(client, scenario.ds)["blocks"]["open"] == 25
    settled = scenario.client.post(
        f"/v1/datasets/{scenario.ds}/invocations/{scenario.settled}/settle",
        json={"cell": "high"},
        headers=AUTH,  # the admin
    )
    body = _ok(settled)
    assert (body["status"], body["charge"], body["refund"]) == (
        "settled",
        {"epsilon": "0.3", "delta": "0"},
        {"epsilon": "0", "delta": "0"},
    )
    assert body["remaining"] == {"epsilon": "0", "delta": "0"}  # no block of it can be charged
    cancelled = _ok(scenario.finish(scenario.cancelled, "cancel"))
    assert cancelled["status"] == "cancelled"
    assert cancelled["refund"] == {"epsilon": "0.3", "delta": "0"}
    again = scenario.finish(scenario.cancelled, "cancel")
    assert again.status_code == 409 and again.json()["error"] == "InvocationNotReserved"
    org, quota = scenario.upper_levels()
    assert (org["spent"]["epsilon"], org["reserved"]) == ("0.8", {"epsilon": "0", "open": 0})
    assert (quota["spent_epsilon"], quota["reserved_epsilon"], quota["open_reservations"]) == (
        "0.8",
        "0",
        0,
    )
    assert status(client, scenario.ds)["odometer"]["epsilon"] == RELEASED
    assert replay(ledger(client, scenario.ds)).ok


def test_a_lowering_above_the_released_reading_is_still_allowed(client: TestClient) -> None:
    scenario = Scenario(client)
    _ok(scenario.blocks({"retire": _days("2026-11-01", "2026-11-02")}))
    # the open blocks hold at most 0.6 (the 3rd: two reservations); the retired 2nd read 0.8
    lowered = client.patch(
        f"/v1/datasets/{scenario.ds}/budget",
        json={"epsilon": RELEASED, "delta": "0.000001"},
        headers=AUTH,
    )
    assert lowered.status_code == 200, lowered.text
    assert status(client, scenario.ds)["odometer"]["epsilon"] == RELEASED
    assert replay(ledger(client, scenario.ds)).ok


@pytest.mark.parametrize(
    ("first", "last"), [("2026-11-05", "2026-11-02"), ("2026-11-30", "2026-11-01")]
)
def test_a_reversed_range_of_blocks_is_refused(client: TestClient, first: str, last: str) -> None:
    scenario = Scenario(client)
    r = client.get(
        f"/v1/datasets/{scenario.ds}/blocks", params={"from": first, "to": last}, headers=AUTH
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "InvalidBlocks"
    assert "reversed" in r.json()["detail"]
    one = client.get(
        f"/v1/datasets/{scenario.ds}/blocks", params={"from": first, "to": first}, headers=AUTH
    )
    assert one.status_code == 200 and one.json()["runs"][0]["blocks"] == 1
