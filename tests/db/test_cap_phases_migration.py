"""Migration 0009 (closed cap phases) leaves existing caps as they were: a cap that counted
before it keeps its mode, its count and its organisation numbers, its view shows no closed
phase and a statement equal to its reading; after a replacement the downgrade refuses (the
previous revision cannot show the closed statement), and without one it goes back cleanly."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from odometer_core.ledger.organisation import replay_organisation
from tests.support import ADMIN_KEY, AUTH, ROOT, Backend, new_organisation

GAUSSIAN = {"mechanism": {"type": "gaussian", "sigma": "10", "sensitivity": "1"}}


def test_0009_keeps_existing_caps_and_refuses_to_drop_a_closed_statement(
    fresh_backend: Backend,
) -> None:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("sqlalchemy.url", fresh_backend.url)
    cfg.attributes["configure_logging"] = False
    settings = Settings(database_url=fresh_backend.url, admin_key=ADMIN_KEY)
    command.upgrade(cfg, "head")
    with TestClient(create_app(settings)) as client:
        org = new_organisation(client)
        body = {
            "name": "m",
            "budget": {"epsilon": 50, "delta": "1e-5"},
            "accounting": {"mode": "zcdp"},
            "organisation_id": org,
        }
        ds = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
        cap = {"epsilon": "4", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
        assert client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH).is_success
        for _ in range(3):
            r = client.post(f"/v1/datasets/{ds}/invocations", json=GAUSSIAN, headers=AUTH)
            assert r.status_code == 201, r.text
    command.downgrade(cfg, "0008")  # nothing replaced: the column goes, the cap stays
    command.upgrade(cfg, "head")  # an existing cap, as 0008 left it
    with TestClient(create_app(settings)) as client:
        (view,) = [
            o
            for o in client.get("/v1/organisations", headers=AUTH).json()["organisations"]
            if o["id"] == org
        ]
        assert view["cap"] == {"epsilon": "4", "delta": "0.00001", "mode": "zcdp"}
        assert view["spent"] == {"rho": "0.015", "delta": "0"} and view["cap_seq"] == 3
        assert view["closed"] == []
        reading = view["status"]["odometer"]
        assert view["statement"]["epsilon"] == reading["epsilon"]
        assert view["statement"]["delta"] == reading["delta"]
        assert view["statement"]["phases"] == 1
        entries = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()["entries"]
        assert replay_organisation([entries]).ok
        rdp = {"epsilon": "4", "delta": "0.00001", "accounting": {"mode": "rdp"}, "replace": True}
        r = client.patch(f"/v1/organisations/{org}/cap", json=rdp, headers=AUTH)
        assert r.status_code == 200 and len(r.json()["closed"]) == 1, r.text
    try:
        command.downgrade(cfg, "0008")
    except RuntimeError as exc:
        assert "replaced a cap that had counted" in str(exc)
    else:
        raise AssertionError("the downgrade dropped a closed statement")
