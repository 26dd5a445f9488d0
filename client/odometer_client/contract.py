"""The server's HTTP contract, as the client holds it: the request and response schemas of the
committed OpenAPI document (``openapi/openapi.json``), bundled as ``contract.json``.

Requests are checked against it before they are sent (a declaration the server's models would
refuse is refused here, without a round trip), and the client's result types name the response
schema they read (``tests/client/test_contract.py`` holds both against the committed document,
so a contract change the client misses fails a test). The checker knows the part of JSON Schema
that the document uses: ``$ref``, ``type``, ``const``, ``enum``, ``anyOf``, ``oneOf`` with a
discriminator, ``properties``, ``required``, ``additionalProperties``, numeric and length
bounds, ``pattern`` and ``items``.

``python client/generate.py`` (``make client-generated``) rewrites ``contract.json``.
"""

from __future__ import annotations

import json
import math
import re
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


def check(name: str, value: Any) -> list[str]:
    """What is wrong with ``value`` as an instance of the contract's schema ``name`` (empty
    when it conforms)."""
    problems: list[str] = []
    _check(schema(name), value, "$", problems)
    return problems


def _resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str):
        return schema(ref.removeprefix(_REF))
    return node


def _type_ok(expected: str, value: Any) -> bool:
    if expected == "object":
        return isinstance(value, Mapping)
    if expected == "array":
        return isinstance(value, list | tuple)
    if expected == "string":
        return isinstance(value, str)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(float(value))
        )
    if expected == "null":
        return value is None
    return True


def _check(node: Mapping[str, Any], value: Any, where: str, problems: list[str]) -> None:
    node = _resolve(node)
    if "anyOf" in node:
        if not any(_conforms(option, value) for option in node["anyOf"]):
            problems.append(f"{where}: {_describe(value)} matches none of the allowed forms")
        return
    if "oneOf" in node:
        _check_one_of(node, value, where, problems)
        return
    expected = node.get("type")
    if isinstance(expected, str) and not _type_ok(expected, value):
        problems.append(f"{where}: expected {expected}, got {_describe(value)}")
        return
    if "const" in node and value != node["const"]:
        problems.append(f"{where}: must be {node['const']!r}")
    if "enum" in node and value not in node["enum"]:
        problems.append(f"{where}: must be one of {', '.join(map(repr, node['enum']))}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        _check_bounds(node, value, where, problems)
    if isinstance(value, str):
        _check_text(node, value, where, problems)
    if isinstance(value, Mapping):
        _check_object(node, value, where, problems)
    if isinstance(value, list | tuple):
        _check_array(node, value, where, problems)


def _conforms(node: Mapping[str, Any], value: Any) -> bool:
    found: list[str] = []
    _check(node, value, "$", found)
    return not found


def _check_one_of(node: Mapping[str, Any], value: Any, where: str, problems: list[str]) -> None:
    discriminator = node.get("discriminator")
    if discriminator is not None and isinstance(value, Mapping):
        key = discriminator["propertyName"]
        target = discriminator["mapping"].get(value.get(key))
        if target is None:
            allowed = ", ".join(sorted(discriminator["mapping"]))
            problems.append(f"{where}.{key}: {value.get(key)!r} is not one of {allowed}")
            return
        _check({"$ref": target}, value, where, problems)
        return
    matches = sum(_conforms(option, value) for option in node["oneOf"])
    if matches != 1:
        problems.append(f"{where}: {_describe(value)} matches {matches} of the allowed forms")


def _check_bounds(node: Mapping[str, Any], value: float, where: str, problems: list[str]) -> None:
    if "minimum" in node and value < node["minimum"]:
        problems.append(f"{where}: must be ≥ {node['minimum']:g}")
    if "maximum" in node and value > node["maximum"]:
        problems.append(f"{where}: must be ≤ {node['maximum']:g}")
    if "exclusiveMinimum" in node and value <= node["exclusiveMinimum"]:
        problems.append(f"{where}: must be > {node['exclusiveMinimum']:g}")
    if "exclusiveMaximum" in node and value >= node["exclusiveMaximum"]:
        problems.append(f"{where}: must be < {node['exclusiveMaximum']:g}")


def _check_text(node: Mapping[str, Any], value: str, where: str, problems: list[str]) -> None:
    if "minLength" in node and len(value) < node["minLength"]:
        problems.append(f"{where}: at least {node['minLength']} characters")
    if "maxLength" in node and len(value) > node["maxLength"]:
        problems.append(f"{where}: at most {node['maxLength']} characters")
    if "pattern" in node and re.search(node["pattern"], value) is None:
        problems.append(f"{where}: {value!r} does not match {node['pattern']}")


def _check_object(
    node: Mapping[str, Any], value: Mapping[str, Any], where: str, problems: list[str]
) -> None:
    properties: Mapping[str, Any] = node.get("properties", {})
    for name in node.get("required", ()):
        if name not in value:
            problems.append(f"{where}.{name}: required")
    extra = node.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            _check(properties[name], item, f"{where}.{name}", problems)
        elif extra is False:
            problems.append(f"{where}.{name}: unknown field")
        elif isinstance(extra, Mapping):
            _check(extra, item, f"{where}.{name}", problems)


def _check_array(
    node: Mapping[str, Any], value: list[Any] | tuple[Any, ...], where: str, problems: list[str]
) -> None:
    if "minItems" in node and len(value) < node["minItems"]:
        problems.append(f"{where}: at least {node['minItems']} items")
    if "maxItems" in node and len(value) > node["maxItems"]:
        problems.append(f"{where}: at most {node['maxItems']} items")
    items = node.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            _check(items, item, f"{where}[{i}]", problems)


def _describe(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
