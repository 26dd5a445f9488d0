"""Models and migrations agree (autogenerate finds nothing), on both backends."""

from __future__ import annotations

import json
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from app.db.engine import make_engine
from app.db.models import Base, compared
from app.db.uow import Database
from odometer_core.accounting import ACCOUNTING_VERSION
from tests.support import ROOT, Backend

#: Revision 0010's index of the runs by state is on an expression (its dialect's key of
#: ``state_json``), which autogenerate cannot compare (``app.db.models.compared`` leaves it out;
#: on SQLite reflection warns and skips it, pyproject.toml's filterwarnings): it is checked by
#: ``test_the_runs_are_indexed_by_state`` instead.
COMPARE = {"compare_type": True, "include_object": compared}


def test_models_and_migrations_agree(database: Database) -> None:
    with database.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts=COMPARE)
        diff = compare_metadata(context, Base.metadata)
        assert diff == []
        tables = set(inspect(conn).get_table_names())
    assert tables == {
        "alembic_version",
        "api_keys",
        "block_runs",
        "datasets",
        "grants",
        "idempotency_keys",
        "invocations",
        "ledger_checkpoints",
        "ledger_entries",
        "merkle_nodes",
        "organisations",
        "principals",
        "verified_positions",
    }


def test_the_runs_are_indexed_by_state(database: Database) -> None:
    """The index the status walks (``app.db.blocks.read_states``) exists, on the expression
    the query names, and the planner uses it for the walk's seek."""
    dialect = database.engine.dialect.name
    with database.engine.connect() as conn:
        if dialect == "sqlite":
            sql = conn.execute(
                text("SELECT sql FROM sqlite_master WHERE name = 'ix_block_runs_states'")
            ).scalar_one()
            assert "(dataset_id, CAST(state_json AS TEXT))" in sql
            plan = conn.execute(
                text(
                    "EXPLAIN QUERY PLAN SELECT min(CAST(state_json AS TEXT)) FROM block_runs "
                    "WHERE dataset_id = 'x' AND CAST(state_json AS TEXT) > 'a'"
                )
            ).all()
        else:
            sql = conn.execute(
                text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_block_runs_states'")
            ).scalar_one()
            assert "(dataset_id, md5((state_json)::text))" in sql
            conn.execute(text("SET enable_seqscan = off"))  # an empty table: ask for the index
            plan = conn.execute(
                text(
                    "EXPLAIN SELECT min(md5(CAST(state_json AS text))) FROM block_runs "
                    "WHERE dataset_id = 'x' AND md5(CAST(state_json AS text)) > 'a'"
                )
            ).all()
    assert "ix_block_runs_states" in " ".join(str(row) for row in plan), plan


def test_downgrade_and_upgrade_round_trip(fresh_backend: Backend) -> None:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", fresh_backend.url)
    cfg.attributes["configure_logging"] = False
    command.downgrade(cfg, "base")
    engine = make_engine(fresh_backend.url, null_pool=True)
    try:
        with engine.connect() as conn:
            assert set(inspect(conn).get_table_names()) <= {"alembic_version"}
        command.upgrade(cfg, "head")
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts=COMPARE)
            assert compare_metadata(context, Base.metadata) == []
            assert context.get_current_revision() == "0013"
    finally:
        engine.dispose()


def test_0002_carries_tenants_and_legacy_keys_over(fresh_backend: Backend) -> None:
    """Data written under 0001 (a dataset, a legacy ``odo_<secret>`` key) survives 0002: the
    organisations and principals are created and the old key still authenticates."""
    from sqlalchemy import text

    from app.db.uow import UnitOfWork
    from app.services.principals import Role, authenticate, hash_token

    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", fresh_backend.url)
    cfg.attributes["configure_logging"] = False
    command.downgrade(cfg, "0001")
    legacy = "odo_" + "L" * 43
    engine = make_engine(fresh_backend.url, null_pool=True)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO api_keys (id, key_hash, principal_id, role, organisation,"
                    " created_at) VALUES ('key_old', :h, 'alice', 'analyst', 'acme', 't')"
                ),
                {"h": hash_token(legacy)},
            )
        command.upgrade(cfg, "head")
        database = Database.from_engine(engine)
        uow = UnitOfWork(database)
        principal = authenticate(uow, legacy, None)
        assert (principal.id, principal.role, principal.organisation) == (
            "alice",
            Role.ANALYST,
            "acme",
        )
        with uow.read_only():
            assert uow.organisations.get("acme") is not None
            assert uow.organisations.get("default") is not None
            row = uow.principals.get("alice")
            assert row is not None and row.organisation_id == "acme"
    finally:
        engine.dispose()


def test_0004_renames_the_final_conversion_share_both_ways(fresh_backend: Backend) -> None:
    """A zcdp dataset's stored ``final_conversion_delta`` is ``delta_conversion`` below 0004
    and comes back on upgrade; the dataset keeps admitting, and its ledger (written by
    accounting 1.1.0) still replays. Likewise a split dataset's ``sub_budgets`` (``ledgers``
    below 0004) and an open reservation's ``sub_budget``, which settles after the upgrade."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings
    from odometer_core.ledger.replay import replay
    from tests.support import ADMIN_KEY, AUTH

    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", fresh_backend.url)
    cfg.attributes["configure_logging"] = False
    settings = Settings(database_url=fresh_backend.url, admin_key=ADMIN_KEY)
    body = {
        "name": "z",
        "budget": {"epsilon": 1, "delta": "1e-6"},
        "accounting": {"mode": "zcdp", "final_conversion_delta": "8e-7"},
    }
    split = {
        "name": "s",
        "budget": {"epsilon": 1, "delta": 0},
        "accounting": {"mode": "split", "sub_budgets": [{"name": "q", "budget": {"epsilon": 1}}]},
    }
    odp = {
        "type": "odp",
        "cells": [{"name": "a", "epsilon": "0.1"}, {"name": "b", "epsilon": "0.3"}],
    }
    with TestClient(create_app(settings)) as client:
        r = client.post("/v1/datasets", json=body, headers=AUTH)
        assert r.status_code == 201, r.text
        ds = r.json()["id"]
        sds = client.post("/v1/datasets", json=split, headers=AUTH).json()["id"]
        r = client.post(
            f"/v1/datasets/{sds}/invocations",
            json={"mechanism": odp, "sub_budget": "q"},
            headers=AUTH,
        )
        assert r.status_code == 201 and r.json()["status"] == "reserved", r.text
        inv = r.json()["id"]
    engine = make_engine(fresh_backend.url, null_pool=True)
    try:
        command.downgrade(cfg, "0003")
        with engine.connect() as conn:
            stored = conn.execute(
                text("SELECT config_json FROM datasets WHERE id = :id"), {"id": ds}
            ).scalar_one()
            split_config, reservation = conn.execute(
                text(
                    "SELECT d.config_json, i.reservation FROM datasets d"
                    " JOIN invocations i ON i.dataset_id = d.id WHERE d.id = :id"
                ),
                {"id": sds},
            ).one()
        old = stored if isinstance(stored, dict) else json.loads(stored)
        assert old.get("delta_conversion") == "0.0000008"
        assert "final_conversion_delta" not in old
        split_config = split_config if isinstance(split_config, dict) else json.loads(split_config)
        reservation = reservation if isinstance(reservation, dict) else json.loads(reservation)
        assert [sub["name"] for sub in split_config["ledgers"]] == ["q"]
        assert (reservation["ledger"], "sub_budget" in reservation) == ("q", False)
        command.upgrade(cfg, "head")
    finally:
        engine.dispose()
    with TestClient(create_app(settings)) as client:
        status = client.get(f"/v1/datasets/{ds}", headers=AUTH).json()["status"]
        assert status["final_conversion_delta"] == "0.0000008"
        r = client.post(
            f"/v1/datasets/{ds}/invocations",
            json={"mechanism": {"type": "zcdp", "rho": "0.01"}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text
        entries = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()["entries"]
        assert [e["accounting_version"] for e in entries] == [ACCOUNTING_VERSION] * 2
        assert replay(entries).ok
        settle = client.post(
            f"/v1/datasets/{sds}/invocations/{inv}/settle", json={"cell": "a"}, headers=AUTH
        )
        assert settle.status_code == 200, settle.text
        assert settle.json()["refund"] == {"epsilon": "0.2", "delta": "0"}
        entries = client.get(f"/v1/datasets/{sds}/ledger", headers=AUTH).json()["entries"]
        assert replay(entries).ok


def test_0005_tells_grants_apart_in_existing_data(fresh_backend: Backend) -> None:
    """Below 0005 grants have no ``granted_seq`` and invocations no ``levels.quota_grant``:
    the upgrade finds both in the ledger (the entry that made the grant; the grant in force
    when the reservation was made). A reservation made under a grant revoked and granted again
    before the upgrade (the red team's stuck reservation) then settles, its quota share
    dropped; one made under the grant in force settles at its quota; the ledger replays."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings
    from odometer_core.ledger.replay import replay
    from tests.support import ADMIN_KEY, AUTH, grant, new_organisation, new_principal

    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", fresh_backend.url)
    cfg.attributes["configure_logging"] = False
    settings = Settings(database_url=fresh_backend.url, admin_key=ADMIN_KEY)
    odp = {
        "type": "odp",
        "cells": [{"name": "low", "epsilon": "0.01"}, {"name": "high", "epsilon": "0.5"}],
    }
    quota = {"epsilon": "0.5", "delta": "0"}
    with TestClient(create_app(settings)) as client:
        org = new_organisation(client)
        body = {"name": "m", "budget": {"epsilon": 2, "delta": "1e-5"}, "organisation_id": org}
        ds = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
        analyst, headers = new_principal(client, org, "analyst")
        url = f"/v1/datasets/{ds}/invocations"
        grant(client, ds, analyst, quota)
        old = client.post(url, json={"mechanism": odp}, headers=headers).json()["id"]
        assert client.delete(f"/v1/datasets/{ds}/grants/{analyst}", headers=AUTH).is_success
        grant(client, ds, analyst, quota)
        new = client.post(url, json={"mechanism": odp}, headers=headers).json()["id"]

    def stored() -> tuple[int, dict[str, dict[str, Any]]]:
        with engine.connect() as conn:
            seq = conn.execute(text("SELECT granted_seq FROM grants")).scalar_one()
            rows = conn.execute(text("SELECT id, levels FROM invocations")).all()
        return seq, {i: v if isinstance(v, dict) else json.loads(v) for i, v in rows}

    engine = make_engine(fresh_backend.url, null_pool=True)
    try:
        before = stored()
        assert before[0] == 5  # created, granted, reserved, revoked: the new grant is entry 5
        assert before[1][old]["quota_grant"] == 2 and before[1][new]["quota_grant"] == 5
        command.downgrade(cfg, "0004")
        with engine.connect() as conn:
            assert "granted_seq" not in {c["name"] for c in inspect(conn).get_columns("grants")}
            levels = conn.execute(text("SELECT levels FROM invocations")).scalars().all()
        assert all(
            "quota_grant" not in (v if isinstance(v, dict) else json.loads(v)) for v in levels
        )
        command.upgrade(cfg, "head")
        assert stored() == before
    finally:
        engine.dispose()
    with TestClient(create_app(settings)) as client:
        r = client.post(f"{url}/{old}/settle", json={"cell": "low"}, headers=headers)
        assert r.status_code == 200, r.text
        assert "quota" not in (r.json().get("levels") or {})
        r = client.post(f"{url}/{new}/settle", json={"cell": "low"}, headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["levels"]["quota"]["refund"]["epsilon"] == "0.49"
        status = client.get(f"/v1/datasets/{ds}", headers=AUTH).json()["status"]
        assert status["reserved"]["epsilon"] == "0" and status["spent"]["epsilon"] == "0.02"
        entries = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()["entries"]
        assert [e["quota"]["outcome"] for e in entries[-2:]] == ["dropped", "accepted"]
        verdict = replay(entries)
        assert verdict.ok, verdict.problems


def test_0006_keeps_basic_caps_and_never_reuses_an_organisation_seq(
    fresh_backend: Backend,
) -> None:
    """A basic cap set before 0006 (no cap configuration, counting under way) keeps counting
    after the upgrade; the first entry after it records the configuration, and the cap replays
    from its datasets' ledgers. A downgrade and upgrade continue the organisation's numbers
    after the highest one its ledgers hold, and a downgrade refuses while a curve cap exists."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings
    from odometer_core.ledger.organisation import replay_organisation
    from tests.support import ADMIN_KEY, AUTH, new_organisation

    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", fresh_backend.url)
    cfg.attributes["configure_logging"] = False
    settings = Settings(database_url=fresh_backend.url, admin_key=ADMIN_KEY)
    pure = {"mechanism": {"type": "pure_dp", "epsilon": "0.5"}}

    def setup(client: TestClient) -> tuple[str, str]:
        org = new_organisation(client)
        body = {"name": "m", "budget": {"epsilon": 50, "delta": "1e-5"}, "organisation_id": org}
        ds = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
        cap = {"epsilon": "4", "delta": "0.00001"}
        assert client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH).is_success
        return org, ds

    def register(client: TestClient, ds: str, n: int) -> list[int]:
        return [
            client.post(f"/v1/datasets/{ds}/invocations", json=pure, headers=AUTH).status_code
            for _ in range(n)
        ]

    command.downgrade(cfg, "0005")
    engine = make_engine(fresh_backend.url, null_pool=True)
    try:
        with engine.begin() as conn:  # an organisation as 0005 left it: a basic cap, counting
            conn.execute(
                text(
                    "INSERT INTO organisations (id, name, cap_json, cap_state_json, created_at,"
                    " updated_at) VALUES ('org_old', 'old', :cap, :state, 'x', 'x')"
                ),
                {
                    "cap": json.dumps({"epsilon": "4", "delta": "0.00001"}),
                    "state": json.dumps(
                        {
                            "spent_epsilon": "1",
                            "spent_delta": "0",
                            "reserved_epsilon": "0",
                            "open_reservations": 0,
                        }
                    ),
                },
            )
        command.upgrade(cfg, "head")
        with TestClient(create_app(settings)) as client:
            body = {"name": "o", "budget": {"epsilon": 50, "delta": "1e-5"}}
            body["organisation_id"] = "org_old"
            ds = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
            assert register(client, ds, 7) == [201] * 6 + [409]  # 1 + 6 · 0.5 = 4
            entries = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()["entries"]
            assert [e["org"]["seq"] for e in entries[1:]] == list(range(1, 8))
            assert entries[1]["org"]["before"]["spent_epsilon"] == "1"
            assert replay_organisation([entries]).ok
            org, other = setup(client)
            assert register(client, other, 3) == [201] * 3
        command.downgrade(cfg, "0005")
        command.upgrade(cfg, "head")
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, cap_seq FROM organisations")).all()
        seqs: dict[str, int] = {str(i): int(s) for i, s in rows}
        assert seqs["org_old"] == 7 and seqs[org] == 3
        with TestClient(create_app(settings)) as client:
            assert register(client, other, 1) == [201]
            entries = client.get(f"/v1/datasets/{other}/ledger", headers=AUTH).json()["entries"]
            assert [e["org"]["seq"] for e in entries[1:]] == [1, 2, 3, 4]
            verdict = replay_organisation([entries])
            assert verdict.ok and verdict.decisions == 4, verdict.problems
            curve = {"epsilon": "4", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
            fresh = new_organisation(client)
            r = client.patch(f"/v1/organisations/{fresh}/cap", json=curve, headers=AUTH)
            assert r.status_code == 200, r.text
        with pytest.raises(RuntimeError, match="'zcdp' cap"):
            command.downgrade(cfg, "0005")
    finally:
        engine.dispose()


def test_0012_builds_the_merkle_frontier_of_every_ledger(fresh_backend: Backend) -> None:
    """Below 0012 datasets keep no Merkle frontier: the upgrade builds each one from its
    ledger's hashes, the same the service wrote entry by entry (and a dataset keeps admitting
    after it, its frontier moving on from the built one)."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings
    from odometer_core.ledger.merkle import Frontier, entry_leaf_hash
    from tests.support import ADMIN_KEY, AUTH

    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", fresh_backend.url)
    cfg.attributes["configure_logging"] = False
    settings = Settings(database_url=fresh_backend.url, admin_key=ADMIN_KEY)
    pure = {"mechanism": {"type": "pure_dp", "epsilon": "0.01"}}
    with TestClient(create_app(settings)) as client:
        body = {"name": "m", "budget": {"epsilon": 1, "delta": 0}}
        ids = [client.post("/v1/datasets", json=body, headers=AUTH).json()["id"] for _ in range(3)]
        for n, ds in zip((6, 0, 1), ids, strict=True):
            for _ in range(n):
                r = client.post(f"/v1/datasets/{ds}/invocations", json=pure, headers=AUTH)
                assert r.status_code == 201, r.text

    def stored() -> dict[str, Any]:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, merkle_json FROM datasets")).all()
        return {i: v if isinstance(v, dict) else json.loads(v) for i, v in rows}

    engine = make_engine(fresh_backend.url, null_pool=True)
    try:
        before = stored()
        assert [before[ds]["size"] for ds in ids] == [7, 1, 2]
        command.downgrade(cfg, "0011")
        with engine.connect() as conn:
            assert "merkle_json" not in {c["name"] for c in inspect(conn).get_columns("datasets")}
        command.upgrade(cfg, "head")
        assert stored() == before
    finally:
        engine.dispose()
    with TestClient(create_app(settings)) as client:
        r = client.post(f"/v1/datasets/{ids[0]}/invocations", json=pure, headers=AUTH)
        assert r.status_code == 201, r.text
        entries = client.get(f"/v1/datasets/{ids[0]}/ledger", headers=AUTH).json()["entries"]
    expected = Frontier.of_leaf_hashes(entry_leaf_hash(e["hash"]) for e in entries)
    assert Frontier.from_json(stored_after(fresh_backend.url, ids[0])) == expected


def stored_after(url: str, dataset_id: str) -> dict[str, Any]:
    engine = make_engine(url, null_pool=True)
    try:
        with engine.connect() as conn:
            doc = conn.execute(
                text("SELECT merkle_json FROM datasets WHERE id = :id"), {"id": dataset_id}
            ).scalar_one()
    finally:
        engine.dispose()
    return doc if isinstance(doc, dict) else dict(json.loads(doc))
