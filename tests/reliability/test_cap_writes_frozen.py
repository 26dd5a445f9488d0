"""Cap and budget writes are refused while the organisation is frozen behind its witness.

A backup is restored under the witness (as in ``test_restore.py``): one dataset of a capped
organisation loses its tail, so the cap's counted state went back with it. Then no cap write
(raise, remove, replace) and no budget change of either dataset is taken — 409
``LedgerBehindWitness`` naming the dataset behind — and nothing changes (the organisation's view,
the datasets' statuses and ledgers are as before); a capped organisation whose cap counted
nothing yet, with a dataset behind, refuses a first cap too. Once the loss is acknowledged, the
writes are taken again.

Shown to fail before the change: ``test_cap_and_budget_writes_are_refused_while_frozen``
failed with ``assert 200 == 409`` at the cap raised from 2 to 50 against the restored, lower
count; with the cap writes guarded, a budget lowered below what was spent answered
``BudgetBelowSpent`` (decided on the rolled-back state) instead of ``LedgerBehindWitness``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.reliability.test_restore import Backup, Service, _register
from tests.support import AUTH, Backend, basic_dataset, ledger, new_organisation, status


def _org(client: Any, org: str) -> dict[str, Any]:
    found = client.get("/v1/organisations", headers=AUTH).json()["organisations"]
    view: dict[str, Any] = next(o for o in found if o["id"] == org)
    return view


def _frozen(r: Any, behind: str) -> None:
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["error"] == "LedgerBehindWitness", body
    assert body["dataset_id"] == behind or body.get("sibling") == behind, body


def test_cap_and_budget_writes_are_refused_while_frozen(
    fresh_backend: Backend, tmp_path: Path
) -> None:
    service = Service(fresh_backend, tmp_path / "witness", 0.0)
    client = service.start()
    org, uncapped = new_organisation(client), new_organisation(client)
    cap = {"epsilon": "2", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
    assert client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH).status_code == 200
    behind, sibling = (basic_dataset(client, 5, organisation_id=org)["id"] for _ in range(2))
    lone = basic_dataset(client, 5, organisation_id=uncapped)["id"]
    for ds in (behind, sibling, lone):
        assert _register(client, ds, "0.1").status_code == 201
    service.stop()
    backup = Backup(service.backend, tmp_path)
    backup.take()
    client = service.start()
    for ds in (behind, lone):
        for _ in range(3):
            assert _register(client, ds, "0.1").status_code == 201
    service.stop()
    backup.restore()

    client = service.start()
    before = _org(client, org)
    datasets = {ds: (status(client, ds), len(ledger(client, ds))) for ds in (behind, sibling)}
    assert before["cap_seq"] == 2  # the restored count: the three after the backup are lost

    url = f"/v1/organisations/{org}/cap"
    raised = client.patch(url, json={**cap, "epsilon": "50"}, headers=AUTH)
    _frozen(raised, behind)
    assert f"organisation '{org}' takes no cap change" in raised.json()["detail"]
    assert raised.json()["organisation_id"] == org
    _frozen(client.patch(url, json=None, headers=AUTH), behind)
    replaced = {"epsilon": "50", "delta": "0.00001", "accounting": {"mode": "rdp"}}
    _frozen(client.patch(url, json={**replaced, "replace": True}, headers=AUTH), behind)
    # the budget of the dataset behind, and its sibling's (frozen with the organisation) raised
    # or lowered below what it spent: refused as frozen, whatever the change
    for ds, budget in ((behind, "50"), (behind, "0.05"), (sibling, "0.05"), (sibling, "50")):
        r = client.patch(
            f"/v1/datasets/{ds}/budget", json={"epsilon": budget, "delta": "0.000001"}, headers=AUTH
        )
        _frozen(r, behind)
    first = client.patch(f"/v1/organisations/{uncapped}/cap", json=cap, headers=AUTH)
    _frozen(first, lone)

    assert _org(client, org) == before
    for ds, (was, entries) in datasets.items():
        assert status(client, ds) == was and len(ledger(client, ds)) == entries
    assert _org(client, uncapped)["cap"] is None

    # the loss acknowledged: cap writes are taken again
    for ds in (behind, lone):
        r = client.post(
            f"/v1/datasets/{ds}/witness/acknowledge", json={"reason": "test"}, headers=AUTH
        )
        assert r.status_code == 201, r.text
    assert client.post("/v1/witness/check", json={}, headers=AUTH).json()["frozen"] == []
    r = client.patch(url, json={**cap, "epsilon": "3"}, headers=AUTH)
    assert r.status_code == 200 and r.json()["cap"]["epsilon"] == "3", r.text
    assert client.patch(f"/v1/organisations/{uncapped}/cap", json=cap, headers=AUTH).is_success
    service.stop()
