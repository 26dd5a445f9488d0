"""The server's HTTP contract, as the client holds it: the request and response schemas of the
committed OpenAPI document (``openapi/openapi.json``), bundled as ``contract.json``.

The client's result types name the response schema they read, and ``tests/client/
test_contract.py`` holds them against the committed document, so that a contract change the
client misses fails a test. Requests are not checked against it: the server is the judge of a
request (a 422 naming the field and the rule, raised as ``InvalidRequest``).

``python client/generate.py`` (``make client-generated``) rewrites ``contract.json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import cache
from importlib import resources
from typing import Any

#: The request bodies the client sends, and the response documents its result types read.
REQUEST_SCHEMAS = (
    "DatasetCreate",
    "BudgetPatch",
    "InvocationCreate",
    "SettleRequest",
    "GrantCreate",
    "OrganisationCreate",
    "PrincipalCreate",
    "KeyCreate",
    "Cap",
    "OrganisationCap",
    "CapacityQuery",
    "BlocksChange",
)
RESPONSE_SCHEMAS = (
    "DatasetOut",
    "DatasetList",
    "InvocationOut",
    "InvocationCreated",
    "InvocationFinished",
    "Preview",
    "GrantOut",
    "OrganisationOut",
    "OrganisationList",
    "CapacityOut",
    "OrganisationReport",
    "PrincipalOut",
    "PrincipalList",
    "KeyCreated",
    "KeyRevoked",
    "BlocksChanged",
    "BlocksPage",
    "ErrorBody",
)
#: A mechanism declaration on its own (the ``mechanism`` property of ``InvocationCreate``).
MECHANISM = "Mechanism"

_REF = "#/components/schemas/"


def extract(openapi: Mapping[str, Any]) -> dict[str, Any]:
    """The bundled contract of an OpenAPI document: the named schemas and every schema they
    reference, keyed by name, plus ``Mechanism`` (the union of declarations)."""
    schemas: Mapping[str, Any] = openapi["components"]["schemas"]
    out: dict[str, Any] = {}
    todo = [*REQUEST_SCHEMAS, *RESPONSE_SCHEMAS]
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out[name] = schemas[name]
        todo.extend(_refs(schemas[name]))
    out[MECHANISM] = schemas["InvocationCreate"]["properties"]["mechanism"]
    return {"openapi_version": openapi["info"]["version"], "schemas": dict(sorted(out.items()))}


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            yield ref.removeprefix(_REF)
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


@cache
def bundled() -> dict[str, Any]:
    """The contract shipped with this client."""
    text = resources.files("odometer_client").joinpath("contract.json").read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def schema(name: str) -> dict[str, Any]:
    found: dict[str, Any] = bundled()["schemas"][name]
    return found
