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
from decimal import Decimal
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
            problems.append(_no_form(node, value, where))
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


#: A number as JSON or decimal text writes it (a sign allowed: the value is then compared with
#: the amount's bounds, to say what it must be).
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: A JSON-number form's ``minimum`` at or below this, with no zero form beside it, is the
#: server's "nothing between 0 and 1e-300" (its exponent range): the domain starts above 0.
_ABOVE_ZERO = 1e-298


def _no_form(node: Mapping[str, Any], value: Any, where: str) -> str:
    """Why ``value`` matches none of an ``anyOf``'s forms: for an amount outside its domain,
    what it must be (``must be > 0``, ``must be < 1``, ``must be at most 1000000``), as the
    server says it; else the forms' description."""
    number = _as_number(value)
    if number is not None:
        bound = _outside([_resolve(option) for option in node["anyOf"]], number)
        if bound is not None:
            return f"{where}: must be {bound}, got {_describe(value)}"
    text = f"{where}: {_describe(value)} matches none of the allowed forms"
    description = node.get("description")
    return f"{text} ({description})" if isinstance(description, str) else text


def _as_number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        return number if number.is_finite() else None
    if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value) and len(value) <= 64:
        return Decimal(value)
    return None


def _outside(forms: list[Mapping[str, Any]], number: Decimal) -> str | None:
    """The bound of the JSON-number forms ``number`` breaks (``None`` if none)."""
    numbers = [f for f in forms if f.get("type") in ("number", "integer") and "const" not in f]
    if not numbers:
        return None
    form = numbers[0]
    low: tuple[Decimal, bool] | None = None  # (bound, open)
    if any(f.get("const") == 0 for f in forms):
        low = (Decimal(0), False)
    elif "exclusiveMinimum" in form:
        low = (_exact(form["exclusiveMinimum"]), True)
    elif "minimum" in form:
        minimum = form["minimum"]
        low = (Decimal(0), True) if 0 < minimum <= _ABOVE_ZERO else (_exact(minimum), False)
    high: tuple[Decimal, bool] | None = None
    if "exclusiveMaximum" in form:
        high = (_exact(form["exclusiveMaximum"]), True)
    elif "maximum" in form:
        high = (_exact(form["maximum"]), False)
    if low is not None and (number < low[0] or (low[1] and number == low[0])):
        return f"{'>' if low[1] else '≥'} {low[0]}"
    if high is not None and (number > high[0] or (high[1] and number == high[0])):
        return f"< {high[0]}" if high[1] else f"at most {high[0]}"
    return None


def _exact(bound: float) -> Decimal:
    """A bound of the document as the decimal it was written as (1000000.0 is 1000000)."""
    exact = Decimal(repr(bound))
    return exact.quantize(Decimal(1)) if exact == exact.to_integral_value() else exact


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
