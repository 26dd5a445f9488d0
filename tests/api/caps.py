"""What the organisation-cap tests share: their declarations, a dataset in an organisation, and
the cap, registration and organisation calls over HTTP."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.support import AUTH

GAUSSIAN = {"type": "gaussian", "sigma": "10", "sensitivity": "1"}
DPSGD = {"type": "dp_sgd", "noise_multiplier": "1", "sample_rate": "0.01", "steps": 100}
ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.01"}, {"name": "high", "epsilon": "0.5"}],
}


def cap_dataset(
    client: TestClient, org: str, mode: str, *, epsilon: str = "1000", relation: str = "add_remove"
) -> str:
    """A dataset of (``epsilon``, 0.001) in ``mode`` and ``relation`` in ``org``: its id."""
    body = {
        "name": f"{mode}-{relation}",
        "budget": {"epsilon": epsilon, "delta": "0.001"},
        "relation": relation,
        "accounting": {"mode": mode},
        "organisation_id": org,
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def set_cap(client: TestClient, org: str, body: dict[str, Any] | None) -> Any:
    return client.patch(f"/v1/organisations/{org}/cap", json=body, headers=AUTH)


def register(client: TestClient, ds: str, mechanism: dict[str, Any]) -> Any:
    return client.post(
        f"/v1/datasets/{ds}/invocations", json={"mechanism": mechanism}, headers=AUTH
    )


def organisation(client: TestClient, org: str) -> dict[str, Any]:
    found = client.get("/v1/organisations", headers=AUTH).json()["organisations"]
    view: dict[str, Any] = next(o for o in found if o["id"] == org)
    return view
