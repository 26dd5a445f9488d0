"""Creating an ``rdp`` dataset for a declared workload, over HTTP, on both backends."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from odometer_core.accounting import memo
from odometer_core.accounting.modes.rdp import DEFAULT_RDP_ORDERS, DEFAULT_RDP_WEIGHTS
from odometer_core.ledger.replay import replay
from tests.support import AUTH, basic_dataset, ledger

CHUNK: dict[str, Any] = {
    "type": "dp_sgd",
    "sample_rate": "0.01",
    "noise_multiplier": "1",
    "steps": 100,
}


def _accounting(workload: Any) -> dict[str, Any]:
    return {"mode": "rdp", "workload": workload}


def test_workload_dataset_shows_its_grid_and_expected_count(client: TestClient) -> None:
    ds = basic_dataset(
        client,
        epsilon=3,
        delta="0.000001",
        accounting=_accounting([{"mechanism": CHUNK, "count": 20}]),
    )
    config = ds["config"]
    workload = config["workload"]
    assert workload["order"] == "7.49"
    assert workload["share"] == "0.9"
    assert workload["mechanisms"] == [{"mechanism": CHUNK, "count": 20, "expected_admitted": 16}]
    assert config["weights"][config["orders"].index("7.49")] == "0.8999999999999999"
    # the ledger's genesis entry carries the same configuration, and replays
    entries = ledger(client, ds["id"])
    assert entries[0]["kind"] == "dataset_created"
    assert entries[0]["config"]["workload"] == workload
    url = f"/v1/datasets/{ds['id']}/invocations"
    accepted = 0
    while True:
        r = client.post(url, json={"mechanism": CHUNK}, headers=AUTH)
        if r.status_code == 409:
            break
        assert r.status_code == 201, r.text
        accepted += 1
    assert accepted == 16  # what the response said to expect
    r = client.patch(
        f"/v1/datasets/{ds['id']}/budget", json={"epsilon": 4, "delta": "0.000001"}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    assert r.json()["config"]["orders"] == config["orders"]
    assert replay(ledger(client, ds["id"])).ok


BAD: list[tuple[str, Any, str]] = [
    ("unknown kind", [{"mechanism": {"type": "nope"}, "count": 1}], "workload.0.mechanism"),
    ("zero count", [{"mechanism": CHUNK, "count": 0}], "workload.0.count"),
    ("negative count", [{"mechanism": CHUNK, "count": -1}], "workload.0.count"),
    ("huge count", [{"mechanism": CHUNK, "count": 10**9}], "less than or equal to 1000000"),
    ("too many declarations", [{"mechanism": CHUNK, "count": 1}] * 9, "at most 8 items"),
    ("empty", [], "at least 1 item"),
    (
        "bad value",
        [{"mechanism": {"type": "pure_dp", "epsilon": "-1"}, "count": 1}],
        "workload[0].mechanism: epsilon must be ≥ 0",
    ),
    (
        "unsupported in rdp",
        [
            {
                "mechanism": {
                    "type": "subsampled",
                    "scheme": "poisson",
                    "rate": "0.1",
                    "mechanism": {"type": "laplace", "scale": "1", "sensitivity": "1"},
                },
                "count": 1,
            }
        ],
        "workload[0].mechanism: RDP amplification by subsampling",
    ),
]


@pytest.mark.parametrize(("name", "workload", "message"), BAD)
def test_bad_workloads_are_422_and_create_nothing(
    client: TestClient, name: str, workload: Any, message: str
) -> None:
    before = client.get("/v1/datasets", params={"limit": 1000}, headers=AUTH).json()["datasets"]
    body = {
        "name": "bad",
        "budget": {"epsilon": 3, "delta": "0.000001"},
        "accounting": _accounting(workload),
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["error"] in ("ValidationError", "InvalidConfig")
    assert message in r.json()["detail"]
    after = client.get("/v1/datasets", params={"limit": 1000}, headers=AUTH).json()["datasets"]
    assert len(after) == len(before)


def test_workload_with_orders_is_422(client: TestClient) -> None:
    body = {
        "name": "bad",
        "budget": {"epsilon": 3, "delta": "0.000001"},
        "accounting": {
            "mode": "rdp",
            "orders": [2],
            "workload": [{"mechanism": CHUNK, "count": 1}],
        },
    }
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    assert "not both" in r.text


def test_workload_re_chooses_the_grid_before_the_first_charge_only(client: TestClient) -> None:
    ds = basic_dataset(client, epsilon=3, delta="0.000001", accounting={"mode": "rdp"})
    patch = f"/v1/datasets/{ds['id']}/budget"
    body = {"epsilon": 3, "delta": "0.000001", "workload": [{"mechanism": CHUNK, "count": 20}]}
    url = f"/v1/datasets/{ds['id']}/invocations"
    # a rejected invocation charges nothing: the grid may still be re-chosen after it
    r = client.post(url, json={"mechanism": {"type": "pure_dp", "epsilon": 50}}, headers=AUTH)
    assert r.status_code == 409, r.text
    r = client.patch(patch, json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    workload = r.json()["config"]["workload"]
    assert workload["order"] == "7.49"
    assert workload["mechanisms"][0]["expected_admitted"] == 16
    entries = ledger(client, ds["id"])
    assert entries[-1]["kind"] == "budget_changed"
    assert entries[-1]["request"]["workload"] == [{"mechanism": CHUNK, "count": 20}]
    assert entries[-1]["config"]["workload"] == workload
    r = client.post(url, json={"mechanism": CHUNK}, headers=AUTH)
    assert r.status_code == 201, r.text
    # once something is charged the weights are fixed for good
    r = client.patch(patch, json=body, headers=AUTH)
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "AlreadySpent"
    # a plain budget change still works, keeps the grid, and everything replays
    r = client.patch(patch, json={"epsilon": 4, "delta": "0.000001"}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["config"]["workload"] == workload
    assert replay(ledger(client, ds["id"])).ok


def test_workload_on_another_mode_is_422(client: TestClient) -> None:
    ds = basic_dataset(client, epsilon=3, delta="0.000001", accounting={"mode": "basic"})
    body = {"epsilon": 3, "delta": "0.000001", "workload": [{"mechanism": CHUNK, "count": 20}]}
    r = client.patch(f"/v1/datasets/{ds['id']}/budget", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    assert "'rdp' dataset" in r.json()["detail"]
    assert ledger(client, ds["id"])[-1]["kind"] == "dataset_created"


WOR_STEP: dict[str, Any] = {
    "type": "subsampled",
    "scheme": "without_replacement",
    "m": 1000,
    "n": 100000,
    "mechanism": {"type": "gaussian", "sigma": "4", "sensitivity": "1"},
}


def _wor_chunks_admitted(client: TestClient, accounting: dict[str, Any]) -> tuple[int, str]:
    ds = basic_dataset(
        client, epsilon=1, delta="0.000001", relation="replace_one", accounting=accounting
    )
    url = f"/v1/datasets/{ds['id']}/invocations"
    chunk = {"type": "composed", "mechanism": WOR_STEP, "count": 100}
    accepted = 0
    while (r := client.post(url, json={"mechanism": chunk}, headers=AUTH)).status_code == 201:
        accepted += 1
    assert r.status_code == 409, r.text
    # every chunk is the same declaration: its curve (a without-replacement bound, about a
    # third of a second) is computed once for the whole replay, not once per entry
    # (memo.charges: a charge is a pure function of the arguments it is keyed by)
    with memo.charges():
        assert replay(ledger(client, ds["id"])).ok
    return accepted, ds["config"].get("wor_bound", "absent")


def test_without_replacement_bound_is_part_of_the_configuration(client: TestClient) -> None:
    """New datasets charge the smaller of WBK19 and BEBP24 (54 chunks of 100 steps at σ = 4
    under (1, 1e-6); 55 with thresholds at the whole δ_c, before the filter shared it with its
    ladder); ``wbk19`` keeps the first alone (15 chunks); anything else is 422. The figures are
    of the default weights fixed at creation (given explicitly: datasets created from
    accounting 1.5.0 without them have their weights chosen by the first chunk, and admit 64
    and 17)."""
    fixed = {"orders": list(DEFAULT_RDP_ORDERS), "weights": list(DEFAULT_RDP_WEIGHTS)}
    assert _wor_chunks_admitted(client, {"mode": "rdp", **fixed}) == (54, "wbk19+bebp24")
    assert _wor_chunks_admitted(client, {"mode": "rdp", "wor_bound": "wbk19", **fixed}) == (
        15,
        "absent",
    )
    assert _wor_chunks_admitted(client, {"mode": "rdp"}) == (64, "wbk19+bebp24")
    assert _wor_chunks_admitted(client, {"mode": "rdp", "wor_bound": "wbk19"}) == (17, "absent")
    before = client.get("/v1/datasets", headers=AUTH).json()
    r = client.post(
        "/v1/datasets",
        json={
            "name": "x",
            "budget": {"epsilon": 1, "delta": "0.000001"},
            "accounting": {"mode": "rdp", "wor_bound": "exact"},
        },
        headers=AUTH,
    )
    assert r.status_code == 422, r.text
    assert "wor_bound" in r.text
    assert client.get("/v1/datasets", headers=AUTH).json() == before
