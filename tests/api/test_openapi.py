"""The committed OpenAPI document is the app's (regenerate with ``make openapi``)."""

from __future__ import annotations

import json

from app.main import create_app
from app.settings import Settings
from tests.support import ROOT


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
        "subsampled",
        "composed",
        "svt",
        "ptr",
        "iterative",
        "tested_release",
        "dp_sgd",
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
