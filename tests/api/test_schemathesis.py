"""Schema fuzzing of the committed OpenAPI document with schemathesis.

Every operation of ``openapi/openapi.json`` is fuzzed in-process against the ASGI app (a
fresh, migrated SQLite database), as the admin and as a granted analyst, with schema-valid
(positive) and schema-violating (negative) requests, on real object ids (so requests reach
the accounting core instead of stopping at 404) and on generated ones. Each response must
pass schemathesis's ``not_a_server_error``, ``status_code_conformance`` (only documented
statuses), ``content_type_conformance`` and ``response_schema_conformance`` checks.
``positive_data_acceptance`` is deliberately not run: the document says "a number" for
amounts while the accounting core bounds them (ε ≤ 10⁶, |exponent| ≤ 300, δ < 1, …) and
refuses the rest with a documented 422.

Default: a few examples per (operation, key, mode); ``ODOMETER_LONG_TESTS=1`` runs many more.

Found and fixed with this test: ``{"budget": {"epsilon": "1E1000000", ...}}`` was a 500
(``decimal.Overflow`` while normalising the amount); ``app/schemas/common.py`` now answers 422.

Also found and fixed: a body that is not JSON (or not UTF-8) is a 400 that no route documented;
``app.api.errors.responses`` now documents 400 on every route that reads a body.

Shown able to fail: (1) before the first fix, the first run failed on ``POST /v1/datasets``
with "Server error" (500, ``decimal.Overflow``), and before the second on ``POST
/v1/organisations`` with "Undocumented status code … Received: 400"; (2) with 413 and 422
removed from the documented responses of ``POST /v1/datasets/{dataset_id}/invocations`` in a
copy of the document, the check
``status_code_conformance`` fails with "Undocumented status code … Received: 422"
(``test_an_undocumented_status_is_caught`` keeps that second proof in the suite).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import checks
from schemathesis.generation import GenerationMode

from app.db.uow import Database
from app.main import create_app
from app.settings import Settings
from tests.support import (
    ADMIN_KEY,
    AUTH,
    ROOT,
    basic_dataset,
    fresh_database,
    grant,
    new_organisation,
    new_principal,
)

LONG = os.environ.get("ODOMETER_LONG_TESTS") == "1"
EXAMPLES = 100 if LONG else 6
DOCUMENT = ROOT / "openapi" / "openapi.json"
CHECKS: list[Any] = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


@dataclass
class World:
    """The app and the objects whose ids are offered as path parameters."""

    app: FastAPI
    admin: dict[str, str]
    analyst: dict[str, str]
    ids: dict[str, str]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A fresh SQLite database with an organisation, an analyst granted on a dataset that has
    a reserved ODP invocation, and a spare principal whose key may be revoked by the fuzzer."""
    with fresh_database("sqlite", tmp_path_factory.mktemp("schemathesis")) as backend:
        config = Settings(database_url=backend.url, admin_key=ADMIN_KEY)
        database = Database.from_settings(config)
        app = create_app(config, database)
        with TestClient(app) as client:
            org = new_organisation(client)
            analyst_id, analyst = new_principal(client, org, "analyst")
            spare_id, _ = new_principal(client, org, "analyst")
            spare_key = client.post(f"/v1/principals/{spare_id}/keys", json={}, headers=AUTH)
            assert spare_key.status_code == 201, spare_key.text
            ds = basic_dataset(client, epsilon=5, delta="0.001", organisation_id=org)["id"]
            grant(client, ds, analyst_id)
            reserved = client.post(
                f"/v1/datasets/{ds}/invocations",
                json={
                    "mechanism": {
                        "type": "odp",
                        "cells": [{"name": "a", "epsilon": 0.1}, {"name": "b", "epsilon": 0.2}],
                    }
                },
                headers=analyst,
            )
            assert reserved.status_code == 201, reserved.text
            ids = {
                "organisation_id": org,
                "principal_id": spare_id,
                "key_id": spare_key.json()["id"],
                "dataset_id": ds,
                "invocation_id": reserved.json()["id"],
            }
            yield World(app, AUTH, analyst, ids)
        database.dispose()


def operations(document: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (method, path) of a document, in document order."""
    return [(m.upper(), p) for p, ops in document["paths"].items() for m in ops]


def fuzz(
    world: World, document: dict[str, Any], label: str, examples: int
) -> list[tuple[str, str]]:
    """Fuzz one operation; returns the failures found as ``(key, message)`` pairs."""
    schema = schemathesis.openapi.from_dict(document)
    schema.app = world.app
    operation = schema[label.split(" ", 1)[1]][label.split(" ", 1)[0]]
    params = {
        p["name"]: world.ids[p["name"]]
        for p in operation.definition.raw.get("parameters", [])
        if p.get("in") == "path" and p["name"] in world.ids
    }
    strategies: list[Any] = []
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        strategies.append(operation.as_strategy(generation_mode=mode, path_parameters=params))
        strategies.append(operation.as_strategy(generation_mode=mode))
    failures: list[tuple[str, str]] = []
    for who, headers in (("admin", world.admin), ("analyst", world.analyst)):

        def report(message: str, who: str = who) -> None:
            failures.append((who, message))

        run_cases(st.one_of(strategies), headers, examples, report)
    return failures


def run_cases(
    strategy: Any, headers: dict[str, str], examples: int, report: Callable[[str], None]
) -> None:
    """Send ``examples`` cases with the caller's key and report every failed check."""

    @given(case=strategy)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        case.headers = {**(case.headers or {}), **headers}
        response = case.call()
        try:
            case.validate_response(response, checks=CHECKS)
        except BaseExceptionGroup as group:  # schemathesis's FailureGroup: keep every failure
            for failure in group.exceptions:
                report(f"{case.as_curl_command()}\n{str(failure)[:800]}")
        except AssertionError as failure:
            report(f"{case.as_curl_command()}\n{str(failure)[:800]}")

    run()


def load_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(Path(DOCUMENT).read_text())
    return document


@pytest.mark.parametrize(("method", "path"), operations(load_document()))
def test_operation_conforms_to_the_document(world: World, method: str, path: str) -> None:
    failures = fuzz(world, load_document(), f"{method} {path}", EXAMPLES)
    assert failures == [], "\n\n".join(f"[{who}] {msg}" for who, msg in failures[:5])


def test_an_undocumented_status_is_caught(world: World) -> None:
    """The checks are live: with 413 and 422 dropped from the documented responses of the
    registration route, the fuzzer (whose negative cases are refused with 422) reports
    undocumented statuses."""
    document = copy.deepcopy(load_document())
    route = document["paths"]["/v1/datasets/{dataset_id}/invocations"]["post"]
    for status in ("413", "422"):
        route["responses"].pop(status)
    failures = fuzz(world, document, "POST /v1/datasets/{dataset_id}/invocations", 20)
    assert any("Undocumented status code" in msg for _, msg in failures), failures[:3]
