"""The dataset status carries the certified odometer reading (docs/accounting.md, *Certified
odometer readings*), in every mode, and the HTTP contract declares it."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.support import AUTH, basic_dataset, status


def _invoke(client: TestClient, ds: str, mechanism: dict[str, Any], **extra: Any) -> None:
    body = {"mechanism": mechanism, **extra}
    r = client.post(f"/v1/datasets/{ds}/invocations", json=body, headers=AUTH)
    assert r.status_code == 201, r.text


def test_status_shows_the_certified_odometer_reading(client: TestClient) -> None:
    # zcdp, (1, 1e-6), Σρ = 0.015: the reference vector of tests/accounting/test_odometer.py on
    # the ladder the first ρ = 0.005 shapes (accounting 1.9.0; 0.96898496492232122357 at level 5
    # on 1.7.0's constant shape, 0.98900974780520745089 at level 3 on the 1.4.0 ladder)
    zcdp = basic_dataset(client, accounting={"mode": "zcdp"})["id"]
    before = status(client, zcdp)["odometer"]
    assert (before["epsilon"], before["source"], before["level"]) == ("0", "ladder", 0)
    for _ in range(3):
        _invoke(client, zcdp, {"type": "zcdp", "rho": "0.005"})
    view = status(client, zcdp)
    assert view["odometer"] == {
        "epsilon": "0.96447666360218109461",
        "delta": "0.000001",
        "certified": True,
        "source": "ladder",
        "level": 4,
        "ladder_epsilon": "0.96447666360218109461",
        "theorem": view["odometer"]["theorem"],
    }
    assert "Whitehouse–Ramdas–Rogers–Wu 2023, Thm 1" in view["odometer"]["theorem"]
    # the non-adaptive conversion stays, labelled as an estimate
    assert view["spent_eps_delta"] == {
        "epsilon": "0.77173422481837472553",
        "delta": "0.000001",
        "certified": False,
        "estimate": True,
    }

    basic = basic_dataset(client)["id"]
    _invoke(client, basic, {"type": "approx_dp", "epsilon": "0.25", "delta": "1e-7"})
    reading = status(client, basic)["odometer"]
    assert (reading["epsilon"], reading["delta"], reading["source"]) == (
        "0.25",
        "0.0000001",
        "basic",
    )

    split = basic_dataset(
        client,
        epsilon=2,
        delta="2e-6",
        accounting={
            "mode": "split",
            "sub_budgets": [
                {"name": "b", "budget": {"epsilon": "1", "delta": "1e-6"}},
                {
                    "name": "z",
                    "budget": {"epsilon": "1", "delta": "1e-6"},
                    "accounting": {"mode": "zcdp"},
                },
            ],
        },
    )["id"]
    _invoke(client, split, {"type": "pure_dp", "epsilon": "0.3"}, sub_budget="b")
    for _ in range(3):
        _invoke(client, split, {"type": "zcdp", "rho": "0.005"}, sub_budget="z")
    view = status(client, split)
    assert (view["odometer"]["epsilon"], view["odometer"]["source"]) == (
        "1.26447666360218109461",
        "split",
    )
    assert view["sub_budgets"]["z"]["odometer"]["epsilon"] == "0.96447666360218109461"

    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert schema["DatasetOut"]["properties"]["status"] == {
        "$ref": "#/components/schemas/DatasetStatus"
    }
    assert "odometer" in schema["DatasetStatus"]["required"]
    assert set(schema["OdometerReading"]["required"]) >= {"epsilon", "delta", "certified"}
