"""The client's copy of the contract is the committed OpenAPI document's, and its result types
read only what the server's response schemas promise (without importing the server)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from odometer_client import contract
from odometer_client.models import (
    BlockRun,
    BlocksChanged,
    BlocksPage,
    Dataset,
    Invocation,
    PreviewResult,
    Settlement,
)

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = json.loads((ROOT / "openapi/openapi.json").read_text("utf-8"))
#: The committed document's schemas, the response schemas the result types are read from among
#: them (the bundled contract holds the same, for the names it bundles).
SCHEMAS: dict[str, Any] = OPENAPI["components"]["schemas"]


def test_bundled_contract_is_the_committed_openapi_documents() -> None:
    assert contract.bundled() == contract.extract(OPENAPI)
    assert contract.bundled()["openapi_version"] == OPENAPI["info"]["version"]


def test_every_declaration_type_of_the_server_is_in_the_contract() -> None:
    mapping = OPENAPI["components"]["schemas"]["InvocationCreate"]["properties"]["mechanism"]
    kinds = set(mapping["discriminator"]["mapping"])
    assert kinds == set(contract.schema(contract.MECHANISM)["discriminator"]["mapping"])
    assert {"pure_dp", "gaussian", "odp", "svt", "dp_sgd", "composed"} <= kinds


class Recording(Mapping[str, Any]):
    """A response document that records which keys the client reads: ``doc[key]`` (needed)
    into ``read``, ``doc.get(key)`` (optional) into ``optional``."""

    def __init__(
        self, data: Mapping[str, Any], read: set[str], optional: set[str], path: str = ""
    ) -> None:
        self._data, self._read, self._optional, self._path = dict(data), read, optional, path
        self._copying = 0  # ``dict(doc)`` (the ``raw`` copy) reads every key: not a use

    def keys(self) -> Any:
        self._copying = len(self._data)
        return self._data.keys()

    def _value(self, key: str) -> Any:
        value = self._data[key]
        if isinstance(value, Mapping):
            return Recording(value, self._read, self._optional, f"{self._path}{key}.")
        if isinstance(value, list):  # the items of an array of objects, as ``key[].name``
            path = f"{self._path}{key}[]."
            return [
                Recording(v, self._read, self._optional, path) if isinstance(v, Mapping) else v
                for v in value
            ]
        return value

    def __getitem__(self, key: str) -> Any:
        if self._copying:
            self._copying -= 1
            return self._data[key]
        self._read.add(self._path + key)
        return self._value(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._optional.add(self._path + key)
        return self._value(key) if key in self._data else default

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _schema(name: str) -> dict[str, Any]:
    found: dict[str, Any] = SCHEMAS[name]
    return found


def _item_ref(prop: Mapping[str, Any]) -> str | None:
    """The schema an array property's items refer to (``runs: [BlockRun]``), if any."""
    items = prop.get("items") if prop.get("type") == "array" else None
    ref = items.get("$ref") if isinstance(items, Mapping) else None
    return ref.rsplit("/", 1)[1] if isinstance(ref, str) else None


def _example(name: str) -> dict[str, Any]:
    """A document with every property of a response schema (nested objects one level down,
    arrays of objects as one item); strings are ``"1"``: a name, and an amount, alike."""
    node = _schema(name)
    out: dict[str, Any] = {}
    for key, prop in node.get("properties", {}).items():
        ref = prop.get("$ref") or next(
            (o["$ref"] for o in prop.get("anyOf", ()) if "$ref" in o), None
        )
        if ref is not None:
            inner = _schema(ref.rsplit("/", 1)[1])
            out[key] = {k: "1" for k in inner.get("properties", {})}
        elif (item := _item_ref(prop)) is not None:
            out[key] = [{k: "1" for k in _schema(item).get("properties", {})}]
        elif prop.get("type") == "integer":
            out[key] = 1
        elif prop.get("type") == "object":
            out[key] = {}
        else:
            out[key] = "1"
    return out


def _declared(name: str) -> set[str]:
    """Top-level and one-level-nested property names of a response schema."""
    node = _schema(name)
    names: set[str] = set()
    for key, prop in node.get("properties", {}).items():
        names.add(key)
        ref = prop.get("$ref") or next(
            (o["$ref"] for o in prop.get("anyOf", ()) if "$ref" in o), None
        )
        if ref is not None:
            names.update(f"{key}.{k}" for k in _schema(ref.rsplit("/", 1)[1])["properties"])
        elif (item := _item_ref(prop)) is not None:
            names.update(f"{key}[].{k}" for k in _schema(item)["properties"])
    return names


#: Free-form objects (``additionalProperties``) whose keys the schema does not declare: filled in
#: as the server writes them (the client reads them from a copy, as ``raw``).
FREE_FORM = {("BlocksChanged", "range"): {"from": "2026-11-01", "to": "2026-11-30", "blocks": 30}}


def _reads(model: Any, name: str) -> tuple[set[str], set[str]]:
    read: set[str] = set()
    optional: set[str] = set()
    document = _example(name)
    document.update({key: value for (schema, key), value in FREE_FORM.items() if schema == name})
    model.from_json(Recording(document, read, optional))
    return read, optional


@pytest.mark.parametrize(
    "model",
    [Dataset, Invocation, Settlement, PreviewResult, BlockRun, BlocksPage, BlocksChanged],
)
def test_result_types_read_only_what_the_response_schemas_declare(model: Any) -> None:
    """What a result type needs is required by every schema it is read from; what it reads
    optionally is declared by at least one of them."""
    assert model.SCHEMAS
    anywhere: set[str] = set()
    optional_reads: set[str] = set()
    for name in model.SCHEMAS:
        read, optional = _reads(model, name)
        required = set(_schema(name).get("required", ()))
        needed = {key for key in read if "." not in key}
        assert needed <= required, f"{model.__name__} needs {needed - required} from {name}"
        assert read <= _declared(name), f"{model.__name__} reads {read - _declared(name)}"
        anywhere |= _declared(name)
        optional_reads |= optional
    assert optional_reads <= anywhere, f"{model.__name__} reads {optional_reads - anywhere}"


def test_reads_inside_an_array_of_objects_are_checked() -> None:
    """A page's runs are read item by item: each field the client reads is a BlockRun's."""
    read, _ = _reads(BlocksPage, "BlocksPage")
    assert {"runs", "next", "runs[].from", "runs[].fraction_spent"} <= read
    assert read <= _declared("BlocksPage")
    assert not read <= _declared("BlocksPage") - {"runs[].fraction_spent"}


def test_a_field_the_server_drops_is_caught() -> None:
    """The check above fails when a schema no longer declares a field the client reads."""
    read, optional = _reads(Dataset, "DatasetOut")
    assert "relation" in optional | read
    declared = _declared("DatasetOut") - {"relation"}
    assert not (optional | read) <= declared
