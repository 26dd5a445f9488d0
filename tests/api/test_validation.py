"""Hostile numbers and bodies: always a 4xx, never an effect."""

# ruff: noqa: E501 - the table below holds literal request bodies, one per line

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db.uow import Database
from app.main import create_app
from app.settings import Settings
from tests.support import ADMIN_KEY, AUTH, Backend, basic_dataset, ledger, status

JSON = {**AUTH, "content-type": "application/json"}

# (description, raw JSON body of a registration) - every one must be refused with 422
HOSTILE_INVOCATIONS: list[tuple[str, str]] = [
    ("NaN token", '{"mechanism": {"type": "pure_dp", "epsilon": NaN}}'),
    ("Infinity token", '{"mechanism": {"type": "pure_dp", "epsilon": Infinity}}'),
    ("-Infinity token", '{"mechanism": {"type": "pure_dp", "epsilon": -Infinity}}'),
    ("overflowing number", '{"mechanism": {"type": "pure_dp", "epsilon": 1e309}}'),
    ("NaN string", '{"mechanism": {"type": "pure_dp", "epsilon": "NaN"}}'),
    ("Infinity string", '{"mechanism": {"type": "pure_dp", "epsilon": "Infinity"}}'),
    ("negative", '{"mechanism": {"type": "pure_dp", "epsilon": -0.1}}'),
    ("negative string", '{"mechanism": {"type": "pure_dp", "epsilon": "-0.1"}}'),
    ("delta = 1", '{"mechanism": {"type": "approx_dp", "epsilon": 0.1, "delta": 1}}'),
    ("delta > 1", '{"mechanism": {"type": "approx_dp", "epsilon": 0.1, "delta": "1.5"}}'),
    ("boolean", '{"mechanism": {"type": "pure_dp", "epsilon": true}}'),
    ("null", '{"mechanism": {"type": "pure_dp", "epsilon": null}}'),
    ("not a number", '{"mechanism": {"type": "pure_dp", "epsilon": "abc"}}'),
    ("empty string", '{"mechanism": {"type": "pure_dp", "epsilon": ""}}'),
    ("array", '{"mechanism": {"type": "pure_dp", "epsilon": [0.1]}}'),
    ("object", '{"mechanism": {"type": "pure_dp", "epsilon": {"v": 0.1}}}'),
    (
        "too many digits",
        '{"mechanism": {"type": "pure_dp", "epsilon": "0.1000000000000000000000000000001"}}',
    ),
    ("huge exponent", '{"mechanism": {"type": "pure_dp", "epsilon": "1e-400"}}'),
    ("above the parameter limit", '{"mechanism": {"type": "pure_dp", "epsilon": 1e7}}'),
    ("unknown field", '{"mechanism": {"type": "pure_dp", "epsilon": 0.1, "sensitivity": 1}}'),
    ("unknown top-level field", '{"mechanism": {"type": "pure_dp", "epsilon": 0.1}, "x": 1}'),
    ("unknown type", '{"mechanism": {"type": "magic", "epsilon": 0.1}}'),
    ("missing type", '{"mechanism": {"epsilon": 0.1}}'),
    ("missing mechanism", "{}"),
    ("body is a list", "[]"),
    ("body is a number", "0.1"),
    ("malformed JSON", '{"mechanism": '),
    ("cells: NaN", '{"mechanism": {"type": "odp", "cells": [{"name": "a", "epsilon": NaN}]}}'),
    ("cells: empty", '{"mechanism": {"type": "odp", "cells": []}}'),
    (
        "cells: duplicate names",
        '{"mechanism": {"type": "odp", "cells": [{"name": "a", "epsilon": 0.1}, {"name": "a", "epsilon": 0.2}]}}',
    ),
    (
        "cells: bad name",
        '{"mechanism": {"type": "odp", "cells": [{"name": "a b", "epsilon": 0.1}]}}',
    ),
    (
        "cells: oversized array",
        json.dumps(
            {
                "mechanism": {
                    "type": "odp",
                    "cells": [{"name": f"c{i}", "epsilon": 0.1} for i in range(1025)],
                }
            }
        ),
    ),
    (
        "rdp: oversized arrays",
        json.dumps(
            {"mechanism": {"type": "rdp", "orders": list(range(2, 259)), "values": [0.1] * 257}}
        ),
    ),
    ("rdp: order <= 1", '{"mechanism": {"type": "rdp", "orders": [1], "values": [0.1]}}'),
    (
        "rdp: decreasing curve",
        '{"mechanism": {"type": "rdp", "orders": [2, 3], "values": [0.2, 0.1]}}',
    ),
    (
        "svt: c boolean",
        '{"mechanism": {"type": "svt", "epsilon1": 0.1, "epsilon2": 0.1, "c": true}}',
    ),
    (
        "svt: c fractional",
        '{"mechanism": {"type": "svt", "epsilon1": 0.1, "epsilon2": 0.1, "c": 1.5}}',
    ),
    (
        "svt: c too large",
        '{"mechanism": {"type": "svt", "epsilon1": 0.1, "epsilon2": 0.1, "c": 100000}}',
    ),
    (
        "composed: count 0",
        '{"mechanism": {"type": "composed", "mechanism": {"type": "pure_dp", "epsilon": 0.1}, "count": 0}}',
    ),
    (
        "composed: too deep",
        json.dumps(
            {
                "mechanism": {
                    "type": "composed",
                    "mechanisms": [
                        {
                            "type": "composed",
                            "mechanisms": [
                                {
                                    "type": "composed",
                                    "mechanisms": [
                                        {
                                            "type": "composed",
                                            "mechanisms": [
                                                {
                                                    "type": "composed",
                                                    "mechanisms": [
                                                        {
                                                            "type": "composed",
                                                            "mechanisms": [
                                                                {"type": "pure_dp", "epsilon": 0.1}
                                                            ],
                                                        }
                                                    ],
                                                }
                                            ],
                                        }
                                    ],
                                }
                            ],
                        }
                    ],
                }
            }
        ),
    ),
    (
        "subsampled: relation mismatch",
        '{"mechanism": {"type": "subsampled", "scheme": "without_replacement", "m": 10, "n": 100, "mechanism": {"type": "pure_dp", "epsilon": 0.1}}}',
    ),
    (
        "subsampled: rate > 1",
        '{"mechanism": {"type": "subsampled", "scheme": "poisson", "rate": 2, "mechanism": {"type": "pure_dp", "epsilon": 0.1}}}',
    ),
    (
        "conversion_delta NaN",
        '{"mechanism": {"type": "gaussian", "sigma": 1}, "conversion_delta": NaN}',
    ),
    (
        "conversion_delta above budget",
        '{"mechanism": {"type": "gaussian", "sigma": 1}, "conversion_delta": 0.5}',
    ),
    (
        "ledger on a basic dataset",
        '{"mechanism": {"type": "pure_dp", "epsilon": 0.1}, "sub_budget": "x"}',
    ),
    ("huge integer literal", '{"mechanism": {"type": "pure_dp", "epsilon": ' + "9" * 5000 + "}}"),
    # found by the hostile table and schemathesis (once 201 with the value in the ledger, or 500)
    (
        "conversion_delta negative",
        '{"mechanism": {"type": "pure_dp", "epsilon": 0.1}, "conversion_delta": -1}',
    ),
    (
        "conversion_delta 1e300",
        '{"mechanism": {"type": "gaussian", "sigma": 1}, "conversion_delta": 1e300}',
    ),
    ("decimal string overflowing", '{"mechanism": {"type": "pure_dp", "epsilon": "1E1000000"}}'),
]


@pytest.fixture(scope="module")
def shared(backend: Backend, database: Database) -> Iterator[tuple[TestClient, dict[str, Any]]]:
    """One app and one dataset for the many cases of this module (they must not change it)."""
    settings = Settings(database_url=backend.url, admin_key=ADMIN_KEY)
    with TestClient(create_app(settings, database)) as c:
        yield c, basic_dataset(c, epsilon=1, delta="0.000001")


@pytest.fixture
def client(shared: tuple[TestClient, dict[str, Any]]) -> TestClient:
    return shared[0]


@pytest.fixture
def dataset(shared: tuple[TestClient, dict[str, Any]]) -> Iterator[dict[str, Any]]:
    client, ds = shared
    before = (status(client, ds["id"]), len(ledger(client, ds["id"])))
    yield ds
    # nothing any hostile request did may show in the state or the ledger
    assert (status(client, ds["id"]), len(ledger(client, ds["id"]))) == before


@pytest.mark.parametrize(
    ("case", "raw"), HOSTILE_INVOCATIONS, ids=[c for c, _ in HOSTILE_INVOCATIONS]
)
def test_hostile_invocation_is_refused_without_effect(
    client: TestClient, dataset: dict[str, Any], case: str, raw: str
) -> None:
    for path in ("invocations", "invocations/preview"):
        r = client.post(f"/v1/datasets/{dataset['id']}/{path}", content=raw.encode(), headers=JSON)
        assert r.status_code in (400, 422), (case, r.status_code, r.text)
        body = r.json()
        assert set(body) >= {"error", "detail"}
        assert body["error"] in {
            "ValidationError",
            "InvalidDeclaration",
            "UnsupportedInMode",
            "BadRequest",
        }, body


HOSTILE_DATASETS: list[tuple[str, dict[str, Any]]] = [
    ("epsilon 0", {"budget": {"epsilon": 0, "delta": 0}}),
    ("epsilon negative", {"budget": {"epsilon": -1, "delta": 0}}),
    ("epsilon string", {"budget": {"epsilon": "abc", "delta": 0}}),
    ("delta 1", {"budget": {"epsilon": 1, "delta": 1}}),
    ("delta null", {"budget": {"epsilon": 1, "delta": None}}),
    ("delta boolean", {"budget": {"epsilon": 1, "delta": False}}),
    ("unknown mode", {"budget": {"epsilon": 1, "delta": 0}, "accounting": {"mode": "fancy"}}),
    ("unknown relation", {"budget": {"epsilon": 1, "delta": 0}, "relation": "swap"}),
    ("unknown field", {"budget": {"epsilon": 1, "delta": 0}, "owner": "me"}),
    (
        "rdp orders <= 1",
        {"budget": {"epsilon": 1, "delta": 1e-6}, "accounting": {"mode": "rdp", "orders": [1]}},
    ),
    (
        "split over budget",
        {
            "budget": {"epsilon": 1, "delta": 1e-6},
            "accounting": {
                "mode": "split",
                "sub_budgets": [
                    {"name": "a", "budget": {"epsilon": 0.6}},
                    {"name": "b", "budget": {"epsilon": 0.6}},
                ],
            },
        },
    ),
]


@pytest.mark.parametrize(("case", "extra"), HOSTILE_DATASETS, ids=[c for c, _ in HOSTILE_DATASETS])
def test_hostile_dataset_is_refused(client: TestClient, case: str, extra: dict[str, Any]) -> None:
    before = client.get("/v1/datasets", params={"limit": 1000}, headers=AUTH).json()["datasets"]
    r = client.post("/v1/datasets", json={"name": "x", **extra}, headers=AUTH)
    assert r.status_code == 422, (case, r.text)
    assert r.json()["error"] in {"ValidationError", "InvalidConfig"}
    after = client.get("/v1/datasets", params={"limit": 1000}, headers=AUTH).json()["datasets"]
    assert len(after) == len(before)


def test_nan_in_budget_change_is_refused(client: TestClient, dataset: dict[str, Any]) -> None:
    r = client.patch(
        f"/v1/datasets/{dataset['id']}/budget",
        content=b'{"epsilon": NaN, "delta": 0}',
        headers=JSON,
    )
    assert r.status_code == 422
    assert r.json()["error"] == "ValidationError"


@pytest.mark.parametrize("value", ["-1", "-0.1", "1e300", '"1E1000000"'])
def test_out_of_range_final_conversion_delta_is_refused(
    client: TestClient, dataset: dict[str, Any], value: str
) -> None:
    """Once ignored on a basic dataset and recorded in the ledger (found by the hostile table)."""
    r = client.patch(
        f"/v1/datasets/{dataset['id']}/budget",
        content=f'{{"epsilon": 1, "delta": 0.000001, "final_conversion_delta": {value}}}'.encode(),
        headers=JSON,
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "ValidationError"


def test_overflowing_decimal_string_in_a_budget_is_422(client: TestClient) -> None:
    """``"1E1000000"`` overflowed while being normalised: a 500 (found by schemathesis)."""
    r = client.post(
        "/v1/datasets",
        json={"name": "x", "budget": {"epsilon": "1E1000000", "delta": 0}},
        headers=AUTH,
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "ValidationError"
    assert "out of range" in r.json()["detail"]


def test_two_megabyte_body_is_413(client: TestClient, dataset: dict[str, Any]) -> None:
    url = f"/v1/datasets/{dataset['id']}/invocations"
    big = json.dumps(
        {"mechanism": {"type": "pure_dp", "epsilon": 0.1}, "pad": "x" * (2 * 1024 * 1024)}
    )
    r = client.post(url, content=big.encode(), headers=JSON)
    assert r.status_code == 413
    assert r.json() == {
        "error": "PayloadTooLarge",
        "detail": "request body larger than 1048576 bytes",
        "limit": 1048576,
    }

    def chunked() -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding chunked
        for _ in range(32):
            yield b"x" * 65536

    r = client.post(url, content=chunked(), headers=JSON)
    assert r.status_code == 413
    assert r.json()["error"] == "PayloadTooLarge"
