"""Schema fuzzing of the committed OpenAPI document with schemathesis.

Every operation of ``openapi/openapi.json`` is fuzzed in-process against the ASGI app (a
fresh, migrated SQLite database), as the admin and as a granted analyst, with schema-valid
(positive) and schema-violating (negative) requests, on real object ids (so requests reach
the accounting core instead of stopping at 404) and on generated ones. Each response must
pass schemathesis's ``not_a_server_error``, ``status_code_conformance`` (only documented
statuses), ``content_type_conformance``, ``response_schema_conformance`` and
``positive_data_acceptance`` checks: a request the document admits must not be refused (400,
413, 422) unless the refusal is one of the rules the document cannot state, each named in
:data:`NOT_IN_THE_SCHEMA` and listed per operation in ``docs/http-api.md``, *What the schema
does not say* (``test_the_allow_list_is_the_documented_list`` holds the two together). A
stateful run follows links from ``POST /v1/datasets`` (to every operation on the new dataset)
and from a registration (to its settle, cancel and read) with schema-valid requests only.

Default: a few examples per (operation, key, mode); ``ODOMETER_LONG_TESTS=1`` runs many more.

Found and fixed with this test: ``{"budget": {"epsilon": "1E1000000", ...}}`` was a 500
(``decimal.Overflow`` while normalising the amount); ``app/schemas/common.py`` now answers 422.

Also found and fixed: a body that is not JSON (or not UTF-8) is a 400 that no route documented;
``app.api.errors.responses`` now documents 400 on every route that reads a body.

Also found and fixed, once ``positive_data_acceptance`` ran (an independent run found the
first five): schema-valid requests refused with 422 — a budget ε of 0 or above 10⁶, a
``composed`` declaration with both ``mechanisms`` and ``mechanism``, an ``rdp`` accounting with
a workload and explicit orders, a settle with neither cell nor output, amounts past the
accepted exponent (5e-324, "1e-400"), a block key past 64 bits, a cap's δ of 1e-300 (its
derived conversion δ then falls out of range). The request schemas now state each rule
(``app/schemas/common.py``, *amount domains* and *fields that go together*). And the JSON
export of a ledger (``export=true``) did not match the documented page (no ``head_seq``):
``LedgerPageOut`` now documents the cursor fields as a page's only.

Shown able to fail: (1) before the first fix, the first run failed on ``POST /v1/datasets``
with "Server error" (500, ``decimal.Overflow``), and before the second on ``POST
/v1/organisations`` with "Undocumented status code … Received: 400"; (2) with 413 and 422
removed from the documented responses of ``POST /v1/datasets/{dataset_id}/invocations`` in a
copy of the document, the check
``status_code_conformance`` fails with "Undocumented status code … Received: 422"
(``test_an_undocumented_status_is_caught`` keeps that second proof in the suite); (3) with an
empty allow-list, schema-valid requests to a dataset's blocks (the fixture's dataset is not
partitioned) are reported as "Valid data should have been accepted"
(``test_a_refused_schema_valid_request_is_caught``).
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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
from schemathesis.openapi.checks import RejectedPositiveData

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
SCENARIOS = 200 if LONG else 25
DOCUMENT = ROOT / "openapi" / "openapi.json"
DOCS = ROOT / "docs" / "http-api.md"
CHECKS: list[Any] = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.positive_data_acceptance,
]


# ---------------------------------------------------------------------------- the allow-list
@dataclass(frozen=True)
class Unsaid:
    """A rule the server enforces that the OpenAPI document does not state: the operations
    (ids) it applies to, and how its refusal reads: error code → a pattern of the detail."""

    operations: frozenset[str]
    codes: tuple[tuple[str, str], ...]

    def explains(self, operation: str, body: Any) -> bool:
        if operation not in self.operations or not isinstance(body, dict):
            return False
        detail = str(body.get("detail", ""))
        return any(
            body.get("error") == code and re.search(pattern, detail, re.DOTALL) is not None
            for code, pattern in self.codes
        )


def _unsaid(operations: str, **codes: str) -> Unsaid:
    return Unsaid(frozenset(operations.split()), tuple(codes.items()))


REGISTER = "register_invocation preview_invocation"
CONFIGURING = "create_dataset change_budget set_organisation_cap"
DECLARING = f"{REGISTER} organisation_cap_capacity {CONFIGURING}"
#: A declaration in a workload is refused naming its item (``workload[2].mechanism: …``).
ITEM = r"^workload(\[\d+\]\.mechanism)?: "

#: The rules JSON Schema 2020-12 cannot state (they depend on the dataset, reservation or
#: organisation the request names, or compare one value with another), by the name
#: ``docs/http-api.md`` gives each, *What the schema does not say*. A schema-valid request
#: refused by one of them is not a failure of ``positive_data_acceptance``; any other refusal is.
NOT_IN_THE_SCHEMA: dict[str, Unsaid] = {
    "declaration-in-mode": _unsaid(
        DECLARING,
        UnsupportedInMode="",
        InvalidConfig=rf"{ITEM}.*(not supported in mode|only .*gaussian|subsampl)",
    ),
    "declaration-relation": _unsaid(
        DECLARING,
        InvalidDeclaration=r"analysed under|but the dataset uses",
        InvalidConfig=rf"{ITEM}.*(analysed under|but the dataset uses)",
    ),
    "declaration-assertions": _unsaid(
        REGISTER,
        InvalidDeclaration=(
            r"blocks protect persons|tree_aggregation on an add_remove dataset|"
            r"has no tree_aggregation"
        ),
    ),
    "declaration-order": _unsaid(
        DECLARING,
        InvalidDeclaration=(
            r"strictly increasing|non-decreasing|same length|Corollary 18|summed δ|"
            r"duplicate cell|^m must be in \[0, \d+\]|nest at most|sum to exactly 1"
        ),
        InvalidConfig=(
            rf"{ITEM}.*(strictly increasing|non-decreasing|same length|Corollary 18|summed δ|"
            r"duplicate cell|m must be in \[0, \d+\]|nest at most|sum to exactly 1)"
        ),
    ),
    "work-limit": _unsaid(
        DECLARING,
        InvalidDeclaration=r"more work than one request",
        InvalidConfig=rf"{ITEM}.*more work than one request",
        ChargeTooExpensive="",
    ),
    "conversion-delta": _unsaid(
        f"{REGISTER} organisation_cap_capacity {CONFIGURING}",
        InvalidDeclaration=r"conversion_delta exceeds the dataset's delta budget",
        InvalidConfig=r"conversion_delta must be ≤ the budget delta",
    ),
    "budget-converts": _unsaid(
        f"{CONFIGURING} create_grant", InvalidConfig=r"could never admit anything"
    ),
    "rdp-grid": _unsaid(
        "create_dataset set_organisation_cap",
        InvalidConfig=(
            r"weights must (have one entry per order|sum to ≤ 1)|orders must be strictly "
            r"increasing"
        ),
    ),
    "sub-budgets": _unsaid(
        "create_dataset change_budget",
        InvalidConfig=(
            r"duplicate sub-budget name|sub-budget names must be|sub-budgets sum to|"
            r"below the sub-budgets|less than the sub-budgets"
        ),
    ),
    "sub-budget-of-dataset": _unsaid(
        f"{REGISTER} change_budget",
        InvalidDeclaration=r"sub_budget|sub-budget",
        InvalidConfig=r"sub_budget|sub-budget",
    ),
    "workload-target": _unsaid("change_budget", InvalidConfig=r"a workload chooses the order grid"),
    "blocks-of-dataset": _unsaid(
        f"{REGISTER} change_blocks list_blocks dataset_report", InvalidBlocks=""
    ),
    "time-zone": _unsaid("create_dataset", InvalidBlocks=r"unknown time zone"),
    "reservation-cell": _unsaid(
        "settle_invocation",
        UnknownCell="",
        InvalidOutput=r"^(?!.*binary floats)",
        InvalidDeclaration=r"output|cell",
    ),
    "output-numbers": _unsaid("settle_invocation", InvalidOutput=r"binary floats"),
    "idempotency-key": _unsaid(
        "register_invocation settle_invocation cancel_invocation", IdempotencyKeyReused=""
    ),
    "ledger-filters": _unsaid(
        "read_ledger",
        ValidationError=(
            r"no principal .* in this dataset's organisation|until must be later than since"
        ),
    ),
    "grant-principal": _unsaid("create_grant", NotAnAnalyst=""),
    "tree-sizes": _unsaid(
        "ledger_inclusion_proof ledger_consistency_proof",
        ValidationError=(
            r"the ledger's head is seq|is not in the tree of the first|is larger than 'to'"
        ),
    ),
}


#: Rules the document does not state either, answered 404 or 409: a schema-valid request may
#: get those statuses (the objects it names must exist, their state allow it), so the fuzzer
#: never needs to excuse them; ``docs/http-api.md`` lists them with the others.
CONFLICTS = frozenset({"objects-exist", "budget-below-spent", "reservation-open", "cap-mode"})


@dataclass
class World:
    """The app and the objects whose ids are offered as path parameters."""

    app: FastAPI
    admin: dict[str, str]
    analyst: dict[str, str]
    ids: dict[str, str]
    #: allow-list names that excused a refusal during this module's runs
    excused: set[str] = field(default_factory=set)


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
    world: World,
    document: dict[str, Any],
    label: str,
    examples: int,
    allowed: dict[str, Unsaid] = NOT_IN_THE_SCHEMA,
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

        run_cases(st.one_of(strategies), headers, examples, report, world.excused, allowed)
    return failures


def validate(
    case: Any,
    response: Any,
    report: Callable[[str], None],
    excused: set[str],
    allowed: dict[str, Unsaid],
) -> None:
    """Run :data:`CHECKS` on one response; report every failure the allow-list does not
    explain (a schema-valid request refused for a rule the document cannot state)."""
    found: list[BaseException] = []
    try:
        case.validate_response(response, checks=CHECKS)
    except BaseExceptionGroup as group:  # schemathesis's FailureGroup: keep every failure
        found = list(group.exceptions)
    except AssertionError as single:
        found = [single]
    for problem in found:
        if isinstance(problem, RejectedPositiveData):
            name = _explained(case, response, allowed)
            if name is not None:
                excused.add(name)
                continue
        report(f"{case.as_curl_command()}\n{response.text[:300]}\n{str(problem)[:800]}")


def _explained(case: Any, response: Any, allowed: dict[str, Unsaid]) -> str | None:
    operation = case.operation.definition.raw.get("operationId", "")
    try:
        body = json.loads(response.text)
    except ValueError:
        return None
    return next((n for n, rule in allowed.items() if rule.explains(operation, body)), None)


def run_cases(
    strategy: Any,
    headers: dict[str, str],
    examples: int,
    report: Callable[[str], None],
    excused: set[str],
    allowed: dict[str, Unsaid],
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
        validate(case, case.call(), report, excused, allowed)

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


def test_a_refused_schema_valid_request_is_caught(world: World) -> None:
    """``positive_data_acceptance`` is live and the allow-list is what lets refusals through:
    without it, schema-valid requests for the blocks of a dataset that is not partitioned
    (the rule ``blocks-of-dataset``) are reported."""
    failures = fuzz(world, load_document(), "GET /v1/datasets/{dataset_id}/blocks", 20, {})
    assert any("Valid data should have been accepted" in msg for _, msg in failures), failures
    assert fuzz(world, load_document(), "GET /v1/datasets/{dataset_id}/blocks", 20) == []


# ---------------------------------------------------------------------------- stateful
#: Links the stateful run follows: from a new dataset to every operation on it, and from a
#: registration to its settle, cancel and read (the committed document has no links).
DATASET_LINKS = (
    "get_dataset",
    "change_budget",
    "register_invocation",
    "preview_invocation",
    "create_grant",
    "list_grants",
    "read_ledger",
    "dataset_report",
    "change_blocks",
    "list_blocks",
    "list_checkpoints",
)
INVOCATION_LINKS = ("settle_invocation", "cancel_invocation", "get_invocation")


def linked(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``document`` with :data:`DATASET_LINKS` and :data:`INVOCATION_LINKS`."""
    document = copy.deepcopy(document)
    paths = document["paths"]
    paths["/v1/datasets"]["post"]["responses"]["201"]["links"] = {
        op: {"operationId": op, "parameters": {"path.dataset_id": "$response.body#/id"}}
        for op in DATASET_LINKS
    }
    of_invocation = {
        "path.dataset_id": "$response.body#/dataset_id",
        "path.invocation_id": "$response.body#/id",
    }
    paths["/v1/datasets/{dataset_id}/invocations"]["post"]["responses"]["201"]["links"] = {
        op: {"operationId": op, "parameters": of_invocation} for op in INVOCATION_LINKS
    }
    return document


def test_linked_operations_conform_to_the_document(world: World) -> None:
    """Schema-valid requests only, on objects the run creates: a new dataset's every
    operation, and a new invocation's settle, cancel and read (links, not inferred ones)."""
    config = schemathesis.Config.from_dict(
        {
            "phases": {
                "stateful": {"inference": {"algorithms": []}, "generation": {"mode": "positive"}}
            }
        }
    )
    schema = schemathesis.openapi.from_dict(linked(load_document()), config=config)
    schema.app = world.app
    failures: list[str] = []
    followed: set[str] = set()

    class Machine(schema.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": dict(world.admin)}

        def validate_response(self, response: Any, case: Any, *args: Any, **kwargs: Any) -> None:
            if case.operation.label != "POST /v1/datasets" and response.status_code < 300:
                followed.add(case.operation.definition.raw["operationId"])
            validate(case, response, failures.append, world.excused, NOT_IN_THE_SCHEMA)

    Machine.run(
        settings=settings(
            max_examples=SCENARIOS,
            stateful_step_count=6,
            deadline=None,
            database=None,
            derandomize=not LONG,  # the same scenarios on every default run
            suppress_health_check=list(HealthCheck),
        )
    )
    assert failures == [], "\n\n".join(failures[:5])
    assert followed & set(DATASET_LINKS), "no link from a new dataset was followed"


# ---------------------------------------------------------------------------- the documented list
def documented_rules() -> dict[str, set[str]]:
    """The rules of *What the schema does not say* in ``docs/http-api.md``: operation id →
    the rule names its table row lists."""
    text = DOCS.read_text("utf-8")
    section = text.split("## What the schema does not say", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and (op := re.search(r"\(`(\w+)`\)", cells[0])) is not None:
            rows[op.group(1)] = set(re.findall(r"`([a-z-]+)`", cells[1]))
    return rows


def test_the_allow_list_is_the_documented_list() -> None:
    """Every rule the fuzzer lets through is listed, by name, for each operation it applies to
    in ``docs/http-api.md``; every listed name is a rule here, defined in the section."""
    rows = documented_rules()
    assert rows, "docs/http-api.md has no table under 'What the schema does not say'"
    ids = {op["operationId"] for item in load_document()["paths"].values() for op in item.values()}
    assert set(rows) <= ids, set(rows) - ids
    for name, rule in NOT_IN_THE_SCHEMA.items():
        missing = {op for op in rule.operations if name not in rows.get(op, set())}
        assert not missing, f"{name}: not listed for {sorted(missing)}"
    listed = set().union(*rows.values())
    assert listed <= set(NOT_IN_THE_SCHEMA) | CONFLICTS, listed - set(NOT_IN_THE_SCHEMA) - CONFLICTS
    section = DOCS.read_text("utf-8").split("## What the schema does not say", 1)[1]
    undefined = {n for n in listed if f"- `{n}`" not in section}
    assert not undefined, f"rules listed but not defined: {sorted(undefined)}"
