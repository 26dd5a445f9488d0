"""Revision 0008 recomputes a partitioned dataset's maintained reading from its ledger.

A dataset written before the revision has no ``highest`` in its aggregate nor in its ledger's
states, and the runs of its retired blocks are gone. The scenario is written by today's service,
then copied as such a dataset (every ``highest`` removed, the chain hashed anew, the rows as the
earlier service left them); the revision's recomputation (``recompute``, what ``upgrade`` runs)
gives it exactly what an independent replay of its ledger gives, which is what the service
maintained for the original (ε 0.8: a retired day's charge and open reservation); the dataset
then keeps admitting, its new entries carry the value, and the whole ledger replays."""

from __future__ import annotations

import copy
import importlib.util
from typing import Any

import sqlalchemy as sa
from fastapi.testclient import TestClient

from app.db.engine import make_engine
from odometer_core.ledger.replay import replay
from tests.support import ADMIN_KEY, AUTH, ROOT, Backend, ledger, rehashed, status

DAYS = {"kind": "day", "unit": "record", "timezone": "Europe/Paris"}
ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.05"}, {"name": "high", "epsilon": "0.3"}],
}


def _revision() -> Any:
    path = ROOT / "migrations" / "versions" / "0008_maintained_block_readings.py"
    spec = importlib.util.spec_from_file_location("revision_0008", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _written(client: TestClient, mode: str) -> str:
    body = {
        "name": f"events-{mode}",
        "budget": {"epsilon": "1", "delta": "0.000001"},
        "accounting": {"mode": mode},
        "partition": DAYS,
    }
    ds = str(client.post("/v1/datasets", json=body, headers=AUTH).json()["id"])
    url = f"/v1/datasets/{ds}"

    def post(path: str, payload: dict[str, Any], code: int) -> Any:
        r = client.post(f"{url}{path}", json=payload, headers=AUTH)
        assert r.status_code == code, r.text
        return r.json()

    def charge(mechanism: dict[str, Any], first: str, last: str) -> None:
        post("/invocations", {"mechanism": mechanism, "blocks": {"from": first, "to": last}}, 201)

    post("/blocks", {"open": {"from": "2026-11-01", "to": "2026-11-10"}}, 200)
    if mode == "basic":
        charge({"type": "pure_dp", "epsilon": "0.5"}, "2026-11-01", "2026-11-02")
        charge(ODP, "2026-11-02", "2026-11-03")  # left open
    else:
        for _ in range(3):
            gaussian = {"type": "gaussian", "sigma": "10", "sensitivity": "1"}
            charge(gaussian, "2026-11-01", "2026-11-02")
    charge({"type": "pure_dp", "epsilon": "0.1"}, "2026-11-05", "2026-11-06")
    post("/blocks", {"retire": {"from": "2026-11-01", "to": "2026-11-03"}}, 200)
    return ds


def _without_highest(state: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(state)
    out["blocks"].pop("highest", None)
    return out


def _copy_as_earlier(conn: sa.Connection, ds: str, entries: list[dict[str, Any]]) -> str:
    """A copy of ``ds`` as the service before revision 0008 would have left it."""
    meta = sa.MetaData()
    datasets, runs, rows = (
        sa.Table(name, meta, autoload_with=conn)
        for name in ("datasets", "block_runs", "ledger_entries")
    )
    copy_id = f"{ds}x"[:40]
    legacy = rehashed(
        [{**e, "dataset_id": copy_id, "state": _without_highest(e["state"])} for e in entries]
    )
    row = dict(conn.execute(sa.select(datasets).where(datasets.c.id == ds)).mappings().one())
    row.update(
        id=copy_id,
        name="copied",
        state_json=_without_highest(row["state_json"]),
        head_hash=legacy[-1]["hash"],
    )
    conn.execute(datasets.insert().values(**row))
    for run in conn.execute(sa.select(runs).where(runs.c.dataset_id == ds)).mappings().all():
        conn.execute(runs.insert().values(**{**run, "dataset_id": copy_id}))
    for entry in legacy:
        conn.execute(rows.insert().values(**{k: v for k, v in entry.items() if k in rows.c}))
    return copy_id


def test_0008_recomputes_the_maintained_reading_from_the_ledger(fresh_backend: Backend) -> None:
    from app.main import create_app
    from app.settings import Settings

    settings = Settings(database_url=fresh_backend.url, admin_key=ADMIN_KEY)
    with TestClient(create_app(settings)) as client:
        written = {mode: _written(client, mode) for mode in ("basic", "zcdp")}
        kept = {mode: status(client, ds)["odometer"] for mode, ds in written.items()}
        entries = {mode: ledger(client, ds) for mode, ds in written.items()}
    assert kept["basic"]["epsilon"] == "0.8"  # the retired 2nd: 0.5 + 0.3 reserved
    assert kept["zcdp"] == entries["zcdp"][-1]["state"]["blocks"]["highest"]
    engine = make_engine(fresh_backend.url, null_pool=True)
    try:
        with engine.begin() as conn:
            copies = {m: _copy_as_earlier(conn, ds, entries[m]) for m, ds in written.items()}
        with engine.begin() as conn:
            found = _revision().recompute(conn)
    finally:
        engine.dispose()
    for mode, copied in copies.items():
        earlier = rehashed(
            [
                {**e, "dataset_id": copied, "state": _without_highest(e["state"])}
                for e in entries[mode]
            ]
        )
        verdict = replay(earlier)  # an independent replay of the ledger as it was written
        assert verdict.ok, verdict.problems
        assert found[copied] == verdict.odometer == kept[mode]
        assert found[written[mode]] == kept[mode]  # the service's own value, recomputed
    with TestClient(create_app(settings)) as client:
        copied = copies["basic"]
        assert status(client, copied)["odometer"] == kept["basic"]
        r = client.post(
            f"/v1/datasets/{copied}/invocations",
            json={"mechanism": {"type": "pure_dp", "epsilon": "0.2"}, "blocks": "all"},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
        low = client.patch(
            f"/v1/datasets/{copied}/budget",
            json={"epsilon": "0.5", "delta": "0.000001"},
            headers=AUTH,
        )
        assert low.status_code == 409 and low.json()["error"] == "BudgetBelowSpent"
        after = ledger(client, copied)
        assert "highest" not in after[-2]["state"]["blocks"]
        assert after[-1]["state"]["blocks"]["highest"] == kept["basic"]
        verdict = replay(after)
        assert verdict.ok, verdict.problems
        assert verdict.odometer == status(client, copied)["odometer"] == kept["basic"]
