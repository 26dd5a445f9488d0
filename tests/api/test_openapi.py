"""The committed OpenAPI document is the app's (regenerate with ``make openapi``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import jsonschema_rs
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.main import create_app
from app.settings import Settings
from odometer_core.accounting import parse_amount
from tests.docs.test_json_examples import response_schema
from tests.support import AUTH, ROOT, basic_dataset, grant, new_organisation, new_principal


def test_openapi_document_has_not_drifted() -> None:
    committed = json.loads((ROOT / "openapi" / "openapi.json").read_text("utf-8"))
    generated = create_app(Settings(database_url="sqlite://")).openapi()
    assert generated == committed, "openapi/openapi.json is stale: run `make openapi`"


def test_operation_ids_are_stable_and_errors_documented() -> None:
    doc = create_app(Settings(database_url="sqlite://")).openapi()
    ops = {op["operationId"]: op for path in doc["paths"].values() for op in path.values()}
    assert set(ops) == {
        "create_dataset",
        "list_datasets",
        "get_dataset",
        "change_budget",
        "change_blocks",
        "list_blocks",
        "register_invocation",
        "preview_invocation",
        "settle_invocation",
        "cancel_invocation",
        "get_invocation",
        "read_ledger",
        "ledger_inclusion_proof",
        "ledger_consistency_proof",
        "dataset_report",
        "dataset_report_spend_chart",
        "dataset_report_analysts_chart",
        "create_organisation",
        "list_organisations",
        "set_organisation_cap",
        "organisation_cap_capacity",
        "organisation_report",
        "create_principal",
        "list_principals",
        "whoami",
        "create_key",
        "revoke_key",
        "create_grant",
        "list_grants",
        "delete_grant",
        "get_checkpoint_key",
        "list_checkpoints",
        "create_checkpoint",
        "get_signed_tree_head",
        "list_published_heads",
        "list_ledger_forks",
        "get_witness",
        "check_witness",
        "import_ledger_tail",
        "acknowledge_ledger_loss",
        "healthz",
        "readyz",
        "metrics",
    }
    register = ops["register_invocation"]
    assert set(register["responses"]) >= {"201", "401", "404", "409", "413", "422"}
    kinds = doc["components"]["schemas"]["InvocationCreate"]["properties"]["mechanism"]
    assert set(kinds["discriminator"]["mapping"]) == {
        "pure_dp",
        "approx_dp",
        "zcdp",
        "rdp",
        "gdp",
        "mcdp",
        "odp",
        "gaussian",
        "laplace",
        "randomized_response",
        "exponential",
        "discrete_laplace",
        "discrete_gaussian",
        "report_noisy_max",
        "tree_aggregation",
        "subsampled",
        "composed",
        "repeat_and_select",
        "svt",
        "ptr",
        "iterative",
        "tested_release",
        "dp_sgd",
        "mixture_of_gaussians",
        "sampled_with_replacement",
        "truncated_subsampled_gaussian",
    }


def test_bounds_are_documented_as_json_schema_keywords() -> None:
    """Bounds must read ``minimum``/``maximum``: pydantic writes constraints placed after a
    validator as ``ge``/``le``, which JSON Schema does not know, so clients and schema fuzzers
    silently lose them (this caught seven integer fields of the mechanism schemas)."""
    doc = create_app(Settings(database_url="sqlite://")).openapi()
    schemas = _walk_schemas(doc["components"]["schemas"])
    assert not [s for s in schemas if {"ge", "le", "gt", "lt"} & set(s)]
    assert any("minimum" in s for s in schemas)


def _walk_schemas(node: object) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    if isinstance(node, dict):
        out.append(node)
        for value in node.values():
            out.extend(_walk_schemas(value))
    elif isinstance(node, list):
        for value in node:
            out.extend(_walk_schemas(value))
    return out


# ---------------------------------------------------------------------------- typed amounts
CURRENCIES = ("EpsilonDeltaAmount", "RhoDeltaAmount", "RdpAmount", "MuSquaredAmount")
AMOUNT_KEYS = ("charge", "requested", "remaining", "refund")
ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.05"}, {"name": "high", "epsilon": "0.1"}],
}
GAUSSIAN = {"type": "gaussian", "sigma": "3"}


class Responses:
    """Real responses collected as ``(operation id, response)``, to be checked against the
    committed document's response schemas (the JSON examples' validator, closed objects)."""

    def __init__(self, client: TestClient, analyst: dict[str, str]) -> None:
        self.client, self.analyst = client, analyst
        self.seen: list[tuple[str, Any]] = []

    def call(self, operation: str, method: str, path: str, **kwargs: Any) -> Any:
        r = self.client.request(method, path, headers=self.analyst, **kwargs)
        self.seen.append((operation, r))
        return r

    def register(self, ds: str, mechanism: dict[str, Any], **extra: Any) -> Any:
        body = {"mechanism": mechanism, **extra}
        return self.call("register_invocation", "POST", f"/v1/datasets/{ds}/invocations", json=body)

    def preview(self, ds: str, mechanism: dict[str, Any], **extra: Any) -> Any:
        path = f"/v1/datasets/{ds}/invocations/preview"
        return self.call("preview_invocation", "POST", path, json={"mechanism": mechanism, **extra})

    def read(self, ds: str, invocation: str) -> Any:
        path = f"/v1/datasets/{ds}/invocations/{invocation}"
        return self.call("get_invocation", "GET", path)

    def finish(self, ds: str, invocation: str, action: str, **body: Any) -> Any:
        path = f"/v1/datasets/{ds}/invocations/{invocation}/{action}"
        return self.call(f"{action}_invocation", "POST", path, json=body or None)

    def lifecycle(self, ds: str, odp: bool = True, **extra: Any) -> None:
        """Admitted, previewed, refused (409), read back; an ODP reservation settled and
        another cancelled, each read back (``odp``: the mode reserves ODP partitions)."""
        admitted = self.register(ds, GAUSSIAN, **extra)
        assert admitted.status_code == 201, admitted.text
        self.read(ds, admitted.json()["id"])
        assert self.preview(ds, GAUSSIAN, **extra).status_code == 200
        refused = self.register(ds, {"type": "gaussian", "sigma": "0.01"}, **extra)
        assert refused.status_code == 409, refused.text
        self.read(ds, refused.json()["id"])
        if odp:
            for action, body in (("settle", {"cell": "low"}), ("cancel", {})):
                reserved = self.register(ds, ODP, **extra)
                assert reserved.status_code == 201, reserved.text
                finished = self.finish(ds, reserved.json()["id"], action, **body)
                assert finished.status_code == 200, finished.text
                self.read(ds, reserved.json()["id"])
        self.call("get_dataset", "GET", f"/v1/datasets/{ds}")


def _dataset(
    client: TestClient, org: str, analyst: str, epsilon: str = "5", quota: str = "4", **body: Any
) -> str:
    """A dataset of ``org`` (budget (ε, 10⁻⁵)) granted to ``analyst`` with a quota (ε, 10⁻⁵)."""
    body = {"name": "typed", "budget": {"epsilon": epsilon, "delta": "0.00001"}, **body}
    r = client.post("/v1/datasets", json={**body, "organisation_id": org}, headers=AUTH)
    assert r.status_code == 201, r.text
    ds = str(r.json()["id"])
    grant(client, ds, analyst, {"epsilon": quota, "delta": "0.00001"})
    return ds


def _amounts(operation: str, body: Any) -> Iterator[tuple[str, Any]]:
    """Every amount of a response body: charge, requested, remaining, refund, at the top, in
    ``levels`` and in ``events`` (an invocation read back)."""
    if not isinstance(body, dict):
        return
    for key in AMOUNT_KEYS:
        if isinstance(body.get(key), dict) and body[key]:
            yield f"{operation}.{key}", body[key]
    levels = body.get("levels")
    if operation != "get_invocation" and isinstance(levels, dict):
        for level, part in levels.items():
            yield from _amounts(f"{operation}.levels.{level}", part)
    for event in body.get("events", []):
        yield from _amounts(f"{operation}.events", event)


def _mode_responses(client: TestClient) -> list[tuple[str, Any]]:
    """A registration's every response in every mode (a whole dataset, a split one's
    sub-budgets in other modes, a partitioned one's blocks), under organisation caps in
    zcdp and rdp and an analyst's quota; a refusal by the quota (charge {} read back)."""
    seen: list[tuple[str, Any]] = []
    for cap in ("zcdp", "rdp"):
        org = new_organisation(client)
        set_cap = client.patch(
            f"/v1/organisations/{org}/cap",
            json={"epsilon": "100", "delta": "0.001", "accounting": {"mode": cap}},
            headers=AUTH,
        )
        assert set_cap.status_code == 200, set_cap.text
        analyst_id, analyst = new_principal(client, org, "analyst")
        responses = Responses(client, analyst)
        for mode in ("basic", "zcdp", "rdp", "gdp"):
            ds = _dataset(client, org, analyst_id, accounting={"mode": mode})
            responses.lifecycle(ds, odp=mode == "basic")
        sub_budgets = [
            {
                "name": mode,
                "budget": {"epsilon": "4", "delta": "0.000001"},
                "accounting": {"mode": mode},
            }
            for mode in ("basic", "zcdp", "rdp", "gdp")
        ]
        split = _dataset(
            client,
            org,
            analyst_id,
            epsilon="20",
            quota="19",
            accounting={"mode": "split", "sub_budgets": sub_budgets},
        )
        for mode in ("basic", "zcdp", "rdp", "gdp"):
            responses.lifecycle(split, odp=mode == "basic", sub_budget=mode)
        for mode in ("basic", "rdp"):
            days = {"kind": "day", "unit": "record", "timezone": "UTC"}
            blocks = _dataset(client, org, analyst_id, accounting={"mode": mode}, partition=days)
            opened = client.post(
                f"/v1/datasets/{blocks}/blocks",
                json={"open": {"from": "2026-01-01", "to": "2026-01-03"}},
                headers=AUTH,
            )
            assert opened.status_code == 200, opened.text
            responses.lifecycle(blocks, odp=mode == "basic", blocks="all")
        quota = _dataset(client, org, analyst_id)
        refused = responses.register(quota, {"type": "pure_dp", "epsilon": "4.5"})
        assert refused.status_code == 409 and refused.json()["level"] == "quota", refused.text
        assert responses.read(quota, refused.json()["id"]).json()["charge"] == {}
        seen += responses.seen
    return seen


def test_amounts_of_real_responses_in_every_mode_match_the_schema(client: TestClient) -> None:
    """Registrations, previews, refusals (409), settles, cancels and reads in every mode —
    split and partitioned datasets, organisation caps in zcdp and rdp, a quota — validate
    against the committed document (closed objects), and each amount matches exactly one of
    the four currency schemas, all four of which occur."""
    seen = _mode_responses(client)
    problems: list[str] = []
    for operation, r in seen:
        schema = response_schema(operation, str(r.status_code), partial=False)
        for e in jsonschema_rs.Draft202012Validator(schema).iter_errors(r.json()):
            problems.append(f"{operation} {r.status_code} {list(e.instance_path)}: {e.message}")
    assert not problems, "\n".join(problems[:10])
    currencies = {name: _component_validator(name) for name in CURRENCIES}
    found: set[str] = set()
    for operation, r in seen:
        for where, amount in _amounts(operation, r.json()):
            matches = [name for name, v in currencies.items() if v.is_valid(amount)]
            assert len(matches) == 1, f"{where}: {amount} matches {matches}"
            found.update(matches)
    assert found == set(CURRENCIES)
    levels = {where for operation, r in seen for where, _ in _amounts(operation, r.json())}
    assert {
        "register_invocation.levels.organisation.charge",
        "settle_invocation.levels.quota.refund",
    } <= levels


def _component_validator(name: str) -> Any:
    document = json.loads((ROOT / "openapi" / "openapi.json").read_text("utf-8"))
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return jsonschema_rs.Draft202012Validator(schema)


# ---------------------------------------------------------------------------- amount domains
def _domains() -> dict[str, dict[str, Any]]:
    """Every amount domain of the request schemas, by a label of its bounds: the number form's
    bounds (``minimum`` …), whether 0 is admitted (its ``const`` form), the decimal-text
    ``pattern`` and the ``examples``."""
    document = create_app(Settings(database_url="sqlite://")).openapi()
    domains: dict[str, dict[str, Any]] = {}
    for node in _walk_schemas(document["components"]["schemas"]):
        union = node.get("anyOf")
        forms = [f for f in union if isinstance(f, dict)] if isinstance(union, list) else []
        texts = [f["pattern"] for f in forms if f.get("type") == "string" and "pattern" in f]
        numbers = [f for f in forms if f.get("type") == "number" and "const" not in f]
        if texts and numbers:
            zero = any(f.get("const") == 0 for f in forms)
            number = numbers[0]
            low = "[" if "minimum" in number else "("
            high = "]" if "maximum" in number else ")"
            label = (
                f"{'0|' if zero else ''}{low}"
                f"{number.get('minimum', number.get('exclusiveMinimum')):g}, "
                f"{number.get('maximum', number.get('exclusiveMaximum')):g}{high}"
            )
            domains[label] = {
                **number,
                "zero": zero,
                "pattern": texts[0],
                "examples": node.get("examples", []),
            }
    return domains


def _within(value: Decimal, domain: dict[str, Any]) -> bool:
    if value == 0:
        return bool(domain["zero"])
    low = domain.get("minimum", domain.get("exclusiveMinimum"))
    high = domain.get("maximum", domain.get("exclusiveMaximum"))
    low_ok = value >= Decimal(repr(low)) if "minimum" in domain else value > Decimal(repr(low))
    if "maximum" in domain:
        return low_ok and value <= Decimal(repr(high))
    return low_ok and value < Decimal(repr(high))


DOMAINS = _domains()


def test_every_amount_states_its_domain() -> None:
    """Amount fields say their domain: a number form with both bounds (never below 1e-300 in
    magnitude, where the server's exponent range ends) and a pattern; their examples are in it."""
    assert len(DOMAINS) >= 10, list(DOMAINS)
    for label, domain in DOMAINS.items():
        assert {"minimum", "exclusiveMinimum"} & set(domain), label
        assert {"maximum", "exclusiveMaximum"} & set(domain), label
        assert domain.get("minimum", 1) >= 1e-300
        for example in domain["examples"]:
            assert re.fullmatch(domain["pattern"], example), (example, label)
            assert _within(parse_amount(example), domain), (example, label)


@pytest.mark.parametrize("label", sorted(DOMAINS))
def test_decimal_text_the_schema_admits_is_read_in_its_domain(label: str) -> None:
    """Any decimal text a pattern admits (up to the 64 characters ``maxLength`` allows) is read
    by ``parse_amount`` (at most 30 significant digits, |exponent| ≤ 300) and lies in the
    domain the number form states."""
    domain = DOMAINS[label]

    @given(st.from_regex(domain["pattern"], fullmatch=True).filter(lambda s: len(s) <= 64))
    @settings(max_examples=150, deadline=None, database=None, suppress_health_check=[*HealthCheck])
    def check(text: str) -> None:
        assert _within(parse_amount(text), domain), (text, domain)

    check()


@pytest.mark.parametrize("label", sorted(DOMAINS))
def test_numbers_the_schema_admits_are_read_in_its_domain(label: str) -> None:
    """Any JSON number the number form admits (a float: what the server's JSON decoder makes
    of it) is read by ``parse_amount`` and lies in the domain, its bounds included."""
    domain = DOMAINS[label]
    low = domain.get("minimum", domain.get("exclusiveMinimum"))
    high = domain.get("maximum", domain.get("exclusiveMaximum"))
    numbers = st.floats(
        min_value=low,
        max_value=high,
        exclude_min="exclusiveMinimum" in domain,
        exclude_max="exclusiveMaximum" in domain,
    )

    @given(numbers)
    @settings(max_examples=100, deadline=None, database=None)
    def check(number: float) -> None:
        assert _within(parse_amount(number), domain), (number, domain)

    check()
    for boundary in (low, high):
        if f"exclusive{'Minimum' if boundary == low else 'Maximum'}" not in domain:
            assert _within(parse_amount(boundary), domain)


def test_everyday_amounts_are_admitted_and_out_of_range_ones_are_not() -> None:
    """The narrowed patterns still read what people write (plain and scientific notation)."""
    delta = DOMAINS["0|[1e-300, 1)"]["pattern"]
    budget = DOMAINS["[1e-300, 1e+06]"]["pattern"]
    for text in ("0", "0.00001", "1e-5", "1E-6", "+0.5", ".5", "0.", "1.5e-10"):
        assert re.fullmatch(delta, text), text
    for text in ("1", "-0.1", "1e0", "10e-1", "2", "1e-400", " 0.1"):
        assert not re.fullmatch(delta, text), text
    for text in ("1", "0.5", "10", "1000000", "1e6", "2.5e3", "0.1e-3"):
        assert re.fullmatch(budget, text), text
    for text in ("0", "0.0", "1000000.1", "1e7", "1E1000000", "-1"):
        assert not re.fullmatch(budget, text), text


# ------------------------------------------------------------------------ rules the schema states
def _request_validator(operation: str) -> Any:
    document = json.loads((ROOT / "openapi" / "openapi.json").read_text("utf-8"))
    ops = {op["operationId"]: op for item in document["paths"].values() for op in item.values()}
    body = ops[operation]["requestBody"]["content"]["application/json"]["schema"]
    return jsonschema_rs.Draft202012Validator({**body, "components": document["components"]})


PURE = {"type": "pure_dp", "epsilon": "0.1"}
#: (operation, path, body the server refuses with 422, the same made acceptable): the rules
#: schema fuzzing found missing from the document (tests/api/test_schemathesis.py), stated now.
STATED: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    (
        "create_dataset",
        "/v1/datasets",
        {"name": "x", "budget": {"epsilon": 0, "delta": 0}},
        {"name": "x", "budget": {"epsilon": 1, "delta": 0}},
    ),
    (
        "create_dataset",
        "/v1/datasets",
        {"name": "x", "budget": {"epsilon": "1000001", "delta": 0}},
        {"name": "x", "budget": {"epsilon": "1000000", "delta": 0}},
    ),
    (
        "set_organisation_cap",
        "/v1/organisations/{org}/cap",
        {"epsilon": 1, "delta": 1e-300, "accounting": {"mode": "zcdp"}},
        {"epsilon": 1, "delta": 1e-298, "accounting": {"mode": "zcdp"}},
    ),
    (
        "create_dataset",
        "/v1/datasets",
        {
            "name": "x",
            "budget": {"epsilon": 1, "delta": "0.001"},
            "accounting": {
                "mode": "rdp",
                "orders": [2],
                "workload": [{"mechanism": PURE, "count": 1}],
            },
        },
        {
            "name": "x",
            "budget": {"epsilon": 1, "delta": "0.001"},
            "accounting": {"mode": "rdp", "workload": [{"mechanism": PURE, "count": 1}]},
        },
    ),
    (
        "create_dataset",
        "/v1/datasets",
        {
            "name": "x",
            "budget": {"epsilon": 1, "delta": 0},
            "partition": {"kind": "bucket", "unit": "record", "timezone": "UTC"},
        },
        {
            "name": "x",
            "budget": {"epsilon": 1, "delta": 0},
            "partition": {"kind": "bucket", "unit": "record", "buckets": 8},
        },
    ),
    (
        "create_dataset",
        "/v1/datasets",
        {
            "name": "x",
            "relation": "replace_one",
            "budget": {"epsilon": 1, "delta": 0},
            "partition": {"kind": "bucket", "unit": "person", "buckets": 8},
        },
        {
            "name": "x",
            "relation": "replace_one",
            "budget": {"epsilon": 1, "delta": 0},
            "partition": {"kind": "bucket", "unit": "person", "buckets": 8, "immutable_key": True},
        },
    ),
    (
        "change_budget",
        "/v1/datasets/{ds}/budget",
        {"epsilon": "0", "delta": "0.000001"},
        {"epsilon": "2", "delta": "0.000001"},
    ),
    (
        "register_invocation",
        "/v1/datasets/{ds}/invocations",
        {"mechanism": {"type": "composed", "mechanisms": [PURE], "mechanism": PURE, "count": 2}},
        {"mechanism": {"type": "composed", "mechanism": PURE, "count": 2}},
    ),
    (
        "register_invocation",
        "/v1/datasets/{ds}/invocations",
        {"mechanism": {"type": "composed", "mechanisms": [ODP]}},
        {"mechanism": {"type": "composed", "mechanisms": [PURE]}},
    ),
    (
        "register_invocation",
        "/v1/datasets/{ds}/invocations",
        {
            "mechanism": {
                "type": "subsampled",
                "scheme": "poisson",
                "rate": "0.1",
                "m": 1,
                "mechanism": PURE,
            }
        },
        {
            "mechanism": {
                "type": "subsampled",
                "scheme": "poisson",
                "rate": "0.1",
                "mechanism": PURE,
            }
        },
    ),
    (
        "register_invocation",
        "/v1/datasets/{ds}/invocations",
        {"mechanism": {"type": "pure_dp", "epsilon": 5e-324}},
        {"mechanism": {"type": "pure_dp", "epsilon": 1e-300}},
    ),
    (
        "register_invocation",
        "/v1/datasets/{ds}/invocations",
        {"mechanism": {"type": "pure_dp", "epsilon": "1e-400"}},
        {"mechanism": {"type": "pure_dp", "epsilon": "1e-40"}},
    ),
    (
        "preview_invocation",
        "/v1/datasets/{ds}/invocations/preview",
        {"mechanism": {"type": "dp_sgd", "noise_multiplier": 1, "sample_rate": 0, "steps": 1}},
        {"mechanism": {"type": "dp_sgd", "noise_multiplier": 1, "sample_rate": "0.01", "steps": 1}},
    ),
    (
        "settle_invocation",
        "/v1/datasets/{ds}/invocations/{inv}/settle",
        {},
        {"cell": "low"},
    ),
    (
        "change_blocks",
        "/v1/datasets/{days}/blocks",
        {
            "open": {"from": "2026-01-01", "to": "2026-01-02"},
            "retire": {"from": "2026-01-01", "to": "2026-01-01"},
        },
        {"open": {"from": "2026-01-01", "to": "2026-01-02"}},
    ),
]


@pytest.mark.parametrize(
    ("operation", "path", "refused", "accepted"),
    STATED,
    ids=[f"{s[0]}-{i}" for i, s in enumerate(STATED)],
)
def test_a_request_the_server_refuses_is_one_the_schema_refuses(
    client: TestClient, operation: str, path: str, refused: dict[str, Any], accepted: dict[str, Any]
) -> None:
    """Each body is refused (422) by the server and by the document's request schema, and the
    corrected body passes both (the schema states the rule instead of admitting the body)."""
    validator = _request_validator(operation)
    assert not validator.is_valid(refused), refused
    assert validator.is_valid(accepted), list(validator.iter_errors(accepted))[:3]
    ds = str(basic_dataset(client, epsilon=5, delta="0.00001")["id"])
    days = str(
        basic_dataset(client, partition={"kind": "day", "unit": "record", "timezone": "UTC"})["id"]
    )
    reserved = client.post(f"/v1/datasets/{ds}/invocations", json={"mechanism": ODP}, headers=AUTH)
    assert reserved.status_code == 201, reserved.text
    url = path.format(ds=ds, days=days, inv=reserved.json()["id"], org=new_organisation(client))
    method = "PATCH" if operation in {"change_budget", "set_organisation_cap"} else "POST"
    refusal = client.request(method, url, json=refused, headers=AUTH)
    assert refusal.status_code == 422, refusal.text
    acceptance = client.request(method, url, json=accepted, headers=AUTH)
    assert acceptance.status_code < 300, acceptance.text
