"""A short history written through the service, and the same entries marked as written by an
earlier accounting version: what the ledger-replay tests of each version's new construction
(``test_shaped_ladder_legacy.py``, ``test_shaped_rdp_ladder_legacy.py``) replay."""

from __future__ import annotations

import copy
from typing import Any

from fastapi.testclient import TestClient

from tests.support import AUTH, rehashed

GAUSSIAN = {"type": "gaussian", "sigma": "20", "sensitivity": "1"}


def history(client: TestClient, mode: str) -> list[dict[str, Any]]:
    """The ledger of a ``mode`` dataset of (1, 10⁻⁶): three Gaussians of σ 20, the budget
    lowered to 0.9, one more Gaussian."""
    body = {"name": f"shaped-{mode}", "budget": {"epsilon": 1, "delta": "1e-6"}}
    body["accounting"] = {"mode": mode}
    ds = client.post("/v1/datasets", json=body, headers=AUTH).json()["id"]
    for _ in range(3):
        r = client.post(
            f"/v1/datasets/{ds}/invocations", json={"mechanism": GAUSSIAN}, headers=AUTH
        )
        assert r.status_code == 201, r.text
    lowered = {"epsilon": "0.9", "delta": "1e-6"}
    assert client.patch(f"/v1/datasets/{ds}/budget", json=lowered, headers=AUTH).status_code == 200
    r = client.post(f"/v1/datasets/{ds}/invocations", json={"mechanism": GAUSSIAN}, headers=AUTH)
    assert r.status_code == 201, r.text
    entries: list[dict[str, Any]] = client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()[
        "entries"
    ]
    return entries


def as_written_by(entries: list[dict[str, Any]], version: str) -> list[dict[str, Any]]:
    """``entries`` marked as written by accounting ``version``, their hashes made anew."""
    old = copy.deepcopy(entries)
    for entry in old:
        entry["accounting_version"] = version
    return rehashed(old)
