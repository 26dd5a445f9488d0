"""Every JSON example of the README and of ``docs/`` is checked against the service.

A ```json block says what it is in an HTML comment on the nearest non-blank line above it:

- ``<!-- json: request POST /v1/datasets/ds_…/invocations -->``: the body of that operation;
  it is sent to the app in-process and must not be answered 422 (nor 5xx). A path segment
  ``ds_…``, ``inv_…``, ``org_…`` or ``prn_…`` is replaced by an object made for the test;
- ``<!-- json: response change_budget 200 -->``: a response of that operation id and status;
  it is validated against the response schema of ``openapi/openapi.json`` (the committed copy,
  which ``tests/api/test_openapi.py`` holds to the app). Objects are closed (a field the schema
  does not name is an error, unless the schema admits other fields), and ``partial`` after the
  status lets an example show only some of the top-level fields;
- ``<!-- json: fragment -->``: a piece of a larger document, not checked.

A block without such a marker fails the test, naming its file and line, so a new example cannot
slip in unchecked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from fastapi.testclient import TestClient

from tests.support import AUTH, ROOT, basic_dataset, new_organisation, new_principal

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OPENAPI: dict[str, Any] = json.loads((ROOT / "openapi" / "openapi.json").read_text("utf-8"))
FENCE = re.compile(r"\s*```\s*(\S*)")
MARKER = re.compile(
    r"<!-- json: (?:(?P<fragment>fragment)"
    r"|request (?P<method>GET|POST|PUT|PATCH|DELETE) (?P<path>/\S*)"
    r"|response (?P<operation>\w+) (?P<status>\d{3})(?P<partial> partial)?) -->"
)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    marker: str  # the HTML comment above it, or ""
    text: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> re.Match[str] | None:
        """The marker, parsed (``None``: no marker, or not one of the three forms)."""
        return MARKER.fullmatch(self.marker)

    def document(self) -> Any:
        try:
            return json.loads(self.text)
        except json.JSONDecodeError as e:
            pytest.fail(f"{self.name}: not JSON ({e})")


def json_blocks() -> list[Block]:
    """Every fenced block whose info string starts with ``json``, in the order of the files."""
    blocks: list[Block] = []
    for path in DOCS:
        lines = path.read_text("utf-8").splitlines()
        i = 0
        while i < len(lines):
            fence = FENCE.match(lines[i])
            if fence is None:
                i += 1
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
            if fence.group(1).lower().startswith("json"):
                above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
                marker = above.strip() if above.strip().startswith("<!--") else ""
                blocks.append(Block(path, i + 1, marker, "\n".join(lines[i + 1 : end])))
            i = end + 1
    return blocks


BLOCKS = json_blocks()
REQUESTS = [b for b in BLOCKS if b.kind and b.kind["method"]]
RESPONSES = [b for b in BLOCKS if b.kind and b.kind["operation"]]
OPERATIONS: dict[str, dict[str, Any]] = {
    op["operationId"]: op for item in OPENAPI["paths"].values() for op in item.values()
}


def test_every_json_block_is_marked() -> None:
    assert len(BLOCKS) >= 3
    unmarked = [f"{b.name}: {b.marker or '(no marker)'}" for b in BLOCKS if b.kind is None]
    assert not unmarked, (
        "JSON blocks need a marker on the line above: <!-- json: request METHOD /path -->, "
        "<!-- json: response OPERATION_ID STATUS [partial] --> or <!-- json: fragment -->\n"
        + "\n".join(unmarked)
    )


# ---------------------------------------------------------------------------- requests
def _organisation(client: TestClient, made: dict[str, str]) -> str:
    return new_organisation(client)


def _principal(client: TestClient, made: dict[str, str]) -> str:
    org = made.get("org_") or new_organisation(client)
    return new_principal(client, org, "analyst")[0]


def _dataset(client: TestClient, made: dict[str, str]) -> str:
    return str(basic_dataset(client)["id"])


def _invocation(client: TestClient, made: dict[str, str]) -> str:
    """A reservation (so that settle and cancel examples find one open)."""
    cells = [{"name": "none", "epsilon": "0.1"}, {"name": "some", "epsilon": "0.2"}]
    r = client.post(
        f"/v1/datasets/{made['ds_']}/invocations",
        json={"mechanism": {"type": "odp", "cells": cells}},
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


#: What a placeholder segment of a request path stands for (in path order: inv_… after ds_…).
MAKERS: dict[str, Callable[[TestClient, dict[str, str]], str]] = {
    "org_": _organisation,
    "prn_": _principal,
    "ds_": _dataset,
    "inv_": _invocation,
}


def materialise(client: TestClient, path: str) -> str:
    """``path`` with each ``ds_…``-style segment replaced by the id of an object made for it."""
    made: dict[str, str] = {}
    segments = []
    for segment in path.split("/"):
        if segment.endswith("…"):
            prefix = segment.removesuffix("…")
            assert prefix in MAKERS, f"{path}: no way to make a {segment} (known: {list(MAKERS)})"
            segment = made[prefix] = MAKERS[prefix](client, made)
        segments.append(segment)
    return "/".join(segments)


def test_placeholders_name_real_objects(client: TestClient) -> None:
    path = materialise(client, "/v1/datasets/ds_…/invocations/inv_…")
    assert client.get(path, headers=AUTH).json()["status"] == "reserved"
    principal = materialise(client, "/v1/principals/prn_…").rsplit("/", 1)[1]
    listed = client.get("/v1/principals", headers=AUTH).json()
    assert principal in json.dumps(listed)


@pytest.mark.parametrize("block", REQUESTS, ids=[b.name for b in REQUESTS])
def test_request_example_is_accepted(block: Block, client: TestClient) -> None:
    assert block.kind is not None
    block.document()  # JSON first: a syntax error is the example's, not the app's
    path = materialise(client, block.kind["path"])
    r = client.request(
        block.kind["method"],
        path,
        content=block.text.encode("utf-8"),
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert r.status_code != 422 and r.status_code < 500, f"{block.name}: {r.status_code} {r.text}"


# ---------------------------------------------------------------------------- responses
def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema a ``#/…`` reference points at (followed until it is not one)."""
    while "$ref" in schema:
        target: Any = OPENAPI
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        schema = target
    return schema


def _closed(schema: Any) -> Any:
    """A copy in which every object schema that names its properties, and says nothing of
    others, admits no others: a misspelt or renamed field in an example is an error."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _closed(v) for k, v in schema.items()}
    if (
        out.get("type") == "object"
        and "properties" in out
        and not {"additionalProperties", "unevaluatedProperties"} & out.keys()
    ):
        out["unevaluatedProperties"] = False
    return out


def response_schema(operation: str, status: str, *, partial: bool) -> dict[str, Any]:
    """The JSON schema of one response of the OpenAPI document, references included."""
    assert operation in OPERATIONS, f"no operation {operation!r} in openapi/openapi.json"
    responses = OPERATIONS[operation]["responses"]
    assert status in responses, f"{operation} documents no {status} (only {list(responses)})"
    top = _resolve(responses[status]["content"]["application/json"]["schema"])
    if partial:
        top = {k: v for k, v in top.items() if k != "required"}
    return {**_closed(top), "components": _closed(OPENAPI["components"])}


@pytest.mark.parametrize("block", RESPONSES, ids=[b.name for b in RESPONSES])
def test_response_example_matches_schema(block: Block) -> None:
    assert block.kind is not None
    schema = response_schema(
        block.kind["operation"], block.kind["status"], partial=bool(block.kind["partial"])
    )
    errors = [
        f"  {'/'.join(map(str, e.instance_path)) or '(top)'}: {e.message}"
        for e in jsonschema_rs.Draft202012Validator(schema).iter_errors(block.document())
    ]
    assert not errors, f"{block.name} ({block.marker}):\n" + "\n".join(errors)


def test_closed_schemas_refuse_unknown_fields() -> None:
    """The check the examples rely on: a renamed field fails even where fields are optional."""
    schema = response_schema("change_budget", "200", partial=True)
    validator = jsonschema_rs.Draft202012Validator(schema)
    assert validator.is_valid({"effect": "…"})
    assert not validator.is_valid({"effects": "…"})
    assert not validator.is_valid({"status": {"spent": {}}})  # below the top: all required
