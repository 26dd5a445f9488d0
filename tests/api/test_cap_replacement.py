"""Organisation caps that never lock an organisation out (docs/accounting.md, *Which cap
accounts which declaration* and *Cap replacement*).

What is checked, over HTTP on SQLite and PostgreSQL:

- the cap the walk-through of ``docs/http-api.md`` sets (read from the document) admits a DP-SGD
  job on an ``rdp`` dataset;
- a declaration the cap cannot account is a 422 that names the organisation, the cap's mode
  and the cap modes that would account it, in a preview as in a registration, even when the
  dataset refuses it first, and nothing is written;
- a ``zcdp`` cap that has counted is replaced by an ``rdp`` cap (an explicit curator action):
  the old cap's certified reading is kept as a closed statement, the organisation's statement
  is the sum of the two phases, equal to an independent fold of the core's filters and to the
  offline replay (``odometer verify-organisation``), which checks the closed statement and
  refuses it edited or dropped; exports taken before the replacement still verify; a
  replacement waits for open reservations.

Shown to fail before the change (the walk-through's ``zcdp`` cap, a 200 preview when the
dataset refused first, no ``replace``), on the starting commit:
``test_the_walk_through_cap_admits_a_dp_sgd_job`` (422 for the DP-SGD job),
``test_a_declaration_the_cap_cannot_account_is_a_422_naming_the_cap`` (no organisation id in
the detail, and the preview answered 200) and every replacement test (409 ``ModeFixed``)."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import cli
from odometer_core.accounting import (
    admit,
    fmt,
    initial_state,
    make_config,
    parse_declaration,
    state_to_json,
    status,
)
from odometer_core.accounting.levels import cap_config
from odometer_core.ledger.formats import write_export
from odometer_core.ledger.organisation import replay_organisation
from odometer_core.ledger.replay import replay
from tests.api.caps import DPSGD, GAUSSIAN, ODP, cap_dataset, organisation, register, set_cap
from tests.support import AUTH, ROOT, ledger, new_organisation, rehashed


def walk_through_cap() -> dict[str, Any]:
    """The cap body the walk-through of ``docs/http-api.md`` sends, as written there."""
    text = (ROOT / "docs" / "http-api.md").read_text("utf-8")
    sets_cap = r'-X PATCH "\$API/v1/organisations/\$ORG/cap"[^\n]*\n\s*-d \'([^\']*)\''
    found = re.search(sets_cap, text)
    assert found, "the walk-through sets no cap"
    body: dict[str, Any] = json.loads(found.group(1))
    return body


def test_the_walk_through_cap_admits_a_dp_sgd_job(client: TestClient) -> None:
    cap = walk_through_cap()
    org = new_organisation(client)
    assert set_cap(client, org, cap).status_code == 200
    training = cap_dataset(client, org, "rdp", epsilon="10")
    r = register(client, training, DPSGD)
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "accepted"
    assert cap["accounting"] == {"mode": "rdp"}, cap  # the recommended currency
    view = organisation(client, org)
    assert view["cap_seq"] == 1 and view["usage"] == {training: 1}
    # what the cap counted is DP-SGD's curve, as the core charges it at that cap
    config = cap_config(cap["epsilon"], cap["delta"], cap["accounting"])
    decided = admit(config, initial_state(config), parse_declaration(DPSGD))
    assert decided.admitted
    assert view["status"]["odometer"] == status(config, decided.state)["odometer"]


def test_a_declaration_the_cap_cannot_account_is_a_422_naming_the_cap(
    client: TestClient,
) -> None:
    org = new_organisation(client)
    roomy, tight = cap_dataset(client, org, "rdp"), cap_dataset(client, org, "rdp", epsilon="0.2")
    own = make_config("0.2", "0.001", "add_remove", {"mode": "rdp"})
    assert not admit(own, initial_state(own), parse_declaration(DPSGD)).admitted  # tight refuses
    cap = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
    assert set_cap(client, org, cap).status_code == 200
    detail = (
        f"organisation '{org}': the organisation cap (mode 'zcdp') cannot account 'dp_sgd': "
        "'dp_sgd' has no certified zCDP bound (a finite RDP grid does not certify zCDP and "
        "subsampling does not improve ρ); a cap in mode 'basic' or 'rdp' accounts it: a "
        f"curator sets one, or replaces a cap that has counted (PATCH /v1/organisations/{org}"
        '/cap with "replace": true)'
    )
    # the dataset admits it (roomy) or refuses it first (tight): the same 422, written nowhere
    answers = [
        client.post(url, json={"mechanism": DPSGD}, headers=AUTH)
        for ds in (roomy, tight)
        for url in (f"/v1/datasets/{ds}/invocations/preview", f"/v1/datasets/{ds}/invocations")
    ]
    assert [r.status_code for r in answers] == [422] * 4, [r.text for r in answers]
    for r in answers:
        assert r.json()["error"] == "UnsupportedInMode"
        assert r.json()["detail"] == detail
    assert len(ledger(client, roomy)) == len(ledger(client, tight)) == 1
    # and the cap's capacity says the same
    r = client.post(
        f"/v1/organisations/{org}/cap/capacity", json={"mechanism": DPSGD}, headers=AUTH
    )
    assert r.status_code == 422 and r.json()["detail"] == detail, r.text
    assert organisation(client, org)["cap_seq"] == 0
    # a gdp cap names the three modes that account a Laplace
    gdp = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "gdp"}}
    assert set_cap(client, org, gdp).status_code == 200
    laplace = {"type": "laplace", "scale": "2", "sensitivity": "1"}
    r = client.post(
        f"/v1/datasets/{roomy}/invocations/preview", json={"mechanism": laplace}, headers=AUTH
    )
    assert r.status_code == 422, r.text
    assert "the organisation cap (mode 'gdp') cannot account 'laplace'" in r.json()["detail"]
    assert "a cap in mode 'basic', 'zcdp' or 'rdp' accounts it" in r.json()["detail"]


def _fold(mode: str, epsilon: str, delta: str, mechanisms: list[dict[str, Any]]) -> Any:
    """An independent fold of the core's filter: a cap of (ε, δ) in ``mode`` that admitted
    ``mechanisms`` in order; its certified reading."""
    config = cap_config(epsilon, delta, {"mode": mode})
    state = initial_state(config)
    for mechanism in mechanisms:
        decided = admit(config, state, parse_declaration(mechanism))
        assert decided.admitted
        state = decided.state
    return status(config, state)["odometer"]


def _write(path: Path, entries: list[dict[str, Any]]) -> str:
    with path.open("w", encoding="utf-8") as out:
        write_export(str(entries[0]["dataset_id"]), entries, out, "json")
    return str(path)


def _verify_organisation(
    paths: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any]]:
    code = cli.main(["verify-organisation", *paths])
    verdict: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, verdict


def test_a_counted_zcdp_cap_is_replaced_by_an_rdp_cap(
    client: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    org = new_organisation(client)
    gauss, training = cap_dataset(client, org, "zcdp"), cap_dataset(client, org, "rdp")
    zcdp = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
    assert set_cap(client, org, zcdp).status_code == 200
    for i in range(6):
        assert register(client, (gauss, training)[i % 2], GAUSSIAN).status_code == 201
    assert register(client, training, DPSGD).status_code == 422  # the zcdp cap cannot
    first = _fold("zcdp", "10", "0.00001", [GAUSSIAN] * 6)
    assert organisation(client, org)["status"]["odometer"] == first
    old = [ledger(client, d) for d in (gauss, training)]

    rdp = {"epsilon": "5", "delta": "0.00001", "accounting": {"mode": "rdp"}}
    fixed = set_cap(client, org, rdp)
    assert fixed.status_code == 409 and fixed.json()["error"] == "ModeFixed", fixed.text
    assert '"replace": true' in fixed.json()["detail"]
    r = set_cap(client, org, {**rdp, "replace": True})
    assert r.status_code == 200, r.text
    view = r.json()
    assert first["delta"] == "0.0000099"  # δ_c: the 1 % kept for approximate δ spent nothing
    closed = {"mode": "zcdp", "epsilon": first["epsilon"], "delta": "0.0000099", "after_seq": 6}
    assert view["closed"] == [closed]
    assert view["cap"] == {"epsilon": "5", "delta": "0.00001", "mode": "rdp"}
    assert view["spent"] == organisation(client, org)["spent"]
    fresh = _fold("rdp", "5", "0.00001", [])
    assert view["status"]["odometer"] == fresh
    # the new cap released nothing yet: the statement is the closed one's, nothing added
    # (accounting 1.6.0: a fresh rdp filter reads (0, 0) itself; before, its empty ladder
    # reading had δ_c > 0, which the statement had to leave out)
    assert (Decimal(fresh["epsilon"]), Decimal(fresh["delta"])) == (0, 0)
    statement = {k: view["statement"][k] for k in ("epsilon", "delta", "phases")}
    assert statement == {"epsilon": first["epsilon"], "delta": "0.0000099", "phases": 1}
    assert "counted nothing yet" in view["statement"]["note"]

    # the new cap counts from now on: DP-SGD and Gaussians, in its own currency
    assert register(client, training, DPSGD).status_code == 201
    assert register(client, gauss, GAUSSIAN).status_code == 201
    second = _fold("rdp", "5", "0.00001", [DPSGD, GAUSSIAN])
    now = organisation(client, org)
    assert now["status"]["odometer"] == second
    total_delta = Decimal(first["delta"]) + Decimal(second["delta"])
    expected: dict[str, Any] = {
        # written as the service writes a sum (no trailing zeros)
        "epsilon": fmt(Decimal(first["epsilon"]) + Decimal(second["epsilon"])),
        "delta": str(total_delta),
        "phases": 2,
    }
    assert {k: now["statement"][k] for k in ("epsilon", "delta", "phases")} == expected
    assert total_delta > Decimal("0.00001")  # above either cap's δ, and the note says so
    assert "now exceeds the first cap's (0.0000099)" in now["statement"]["note"]

    # the first entry at the cap after the replacement records the closed phase
    ledgers = [ledger(client, d) for d in (gauss, training)]
    recording = next(e for e in ledgers[1] if e["org"] and e["org"]["seq"] == 7)
    assert recording["org"]["replaced"] == closed
    new_cap = cap_config("5", "0.00001", {"mode": "rdp"})
    assert recording["org"]["before"] == state_to_json(initial_state(new_cap))
    # an independent replay (offline, from exports): the statement is the two phases' sum
    paths = [_write(tmp_path / f"{i}.json", e) for i, e in enumerate(ledgers)]
    code, verdict = _verify_organisation(paths, capsys)
    assert code == 0 and verdict["ok"], verdict["problems"]
    assert verdict["decisions"] == 8 and verdict["closed"] == [closed]
    assert verdict["odometer"] == second and verdict["statement"] == expected
    report = client.get(f"/v1/organisations/{org}/report", headers=AUTH).json()
    assert report["verified"] and report["statement"] == expected, report["problems"]
    # exports taken before the replacement still verify, alone and as an organisation
    assert all(replay(e).ok for e in old + ledgers)
    old_paths = [_write(tmp_path / f"old{i}.json", e) for i, e in enumerate(old)]
    code, verdict = _verify_organisation(old_paths, capsys)
    assert code == 0 and verdict["odometer"] == first and verdict["closed"] == []
    assert verdict["statement"] == {
        "epsilon": first["epsilon"],
        "delta": first["delta"],
        "phases": 1,
    }

    # the closed statement edited (chain re-hashed), or the replacement dropped: refused
    for edit in ("understated", "dropped"):
        entries = [dict(e) for e in ledgers[1]]
        at = entries.index(recording)
        part = dict(entries[at]["org"])
        if edit == "understated":
            part["replaced"] = {**closed, "epsilon": "0.1"}
        else:
            del part["replaced"]
        entries[at] = {**entries[at], "org": part}
        paths[1] = _write(tmp_path / f"{edit}.json", rehashed(entries))
        code, verdict = _verify_organisation(paths, capsys)
        assert code == 1, edit
        wanted = "closed statement" if edit == "understated" else "mode"
        assert wanted in verdict["problems"][0], verdict["problems"]


def test_a_replacement_waits_for_open_reservations_and_closes_nothing_uncounted(
    client: TestClient,
) -> None:
    org = new_organisation(client)
    ds = cap_dataset(client, org, "basic")
    assert set_cap(client, org, {"epsilon": "10", "delta": "0.00001"}).status_code == 200
    reserved = register(client, ds, ODP)
    assert reserved.status_code == 201 and reserved.json()["status"] == "reserved"
    before = organisation(client, org)
    rdp = {"epsilon": "5", "delta": "0.00001", "accounting": {"mode": "rdp"}, "replace": True}
    r = set_cap(client, org, rdp)
    assert r.status_code == 409 and r.json()["error"] == "ReservationsOpen", r.text
    assert "1 open reservation" in r.json()["detail"]
    assert organisation(client, org) == before  # nothing changed
    url = f"/v1/datasets/{ds}/invocations/{reserved.json()['id']}/settle"
    assert client.post(url, json={"cell": "low"}, headers=AUTH).status_code == 200
    r = set_cap(client, org, rdp)
    assert r.status_code == 200, r.text
    assert r.json()["closed"] == [
        {"mode": "basic", "epsilon": "0.01", "delta": "0", "after_seq": 2}
    ]
    # replaced again before the new cap counted anything: nothing more is closed
    again = set_cap(client, org, {**rdp, "accounting": {"mode": "zcdp"}})
    assert again.status_code == 200 and len(again.json()["closed"]) == 1, again.text
    assert again.json()["cap"]["mode"] == "zcdp"
    assert register(client, ds, GAUSSIAN).status_code == 201
    verdict = replay_organisation([ledger(client, ds)])
    assert verdict.ok, verdict.problems
    assert verdict.closed == again.json()["closed"]
    assert verdict.statement is not None
    assert Decimal(verdict.statement["epsilon"]) == Decimal("0.01") + Decimal(
        organisation(client, org)["status"]["odometer"]["epsilon"]
    )
    # a replacement names the new cap
    assert set_cap(client, org, {"replace": True}).status_code == 422


def test_a_cap_changed_then_replaced_before_any_entry_replays(client: TestClient) -> None:
    """The change is never recorded (no entry at the cap follows it before the replacement):
    the closed statement, taken on the changed cap, is still the replayed reading of the cap
    the ledgers recorded (a reading depends on the counted state and the ladder fixed at
    creation, which a change keeps)."""
    org = new_organisation(client)
    ds = cap_dataset(client, org, "rdp")
    rdp = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "rdp"}}
    assert set_cap(client, org, rdp).status_code == 200
    for _ in range(6):
        assert register(client, ds, GAUSSIAN).status_code == 201
    reading = organisation(client, org)["status"]["odometer"]
    lowered = set_cap(client, org, {**rdp, "epsilon": "5"})  # kills orders, keeps the reading
    assert lowered.status_code == 200 and lowered.json()["status"]["odometer"] == reading
    zcdp = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "zcdp"}, "replace": True}
    replaced = set_cap(client, org, zcdp)
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["closed"][0]["epsilon"] == reading["epsilon"]
    assert register(client, ds, GAUSSIAN).status_code == 201
    verdict = replay_organisation([ledger(client, ds)])
    assert verdict.ok, verdict.problems
    assert verdict.closed == replaced.json()["closed"] and verdict.decisions == 7
