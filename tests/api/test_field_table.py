"""Every declaration kind is said once, in the accounting core's field table
(``odometer_core.accounting.kinds.fields``): the request models, the OpenAPI document and the
client's helpers are derived from it, and the core's parsers read their bounds from it.

- each kind's request model and the core's parser agree: the same fields, the bounds the
  document states are the ones the core enforces (a value at a closed bound accepted, one past
  it refused naming the field), the same list sizes;
- a field added to the table alone (in a fresh process: the models are built at import) reaches
  the server's validation (422 naming its bound), the document (its bounds and description),
  the client's generated helper (a parameter, sent as given) and the core's parser.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app.schemas.mechanisms import MODELS
from odometer_core.accounting import KINDS, DeclarationError, parse_declaration
from odometer_core.accounting.kinds.fields import TABLE, Field, KindSpec

ROOT = Path(__file__).resolve().parents[2]
INNER = {"type": "pure_dp", "epsilon": "0.1"}


def _value(spec: Field) -> Any:
    """A value of ``spec`` inside its bounds (a list of one, for a list)."""
    if spec.shape == "amount":
        assert spec.domain is not None
        one: Any = spec.domain.example
    elif spec.shape == "integer":
        assert spec.bounds is not None
        one = spec.bounds[0]
    elif spec.shape == "boolean":
        one = True
    elif spec.shape == "choice":
        one = spec.choices[0]
    elif spec.shape == "cells":
        return [{"name": "a", "epsilon": "0.1"}]
    else:
        one = dict(INNER)
    return [one] if spec.entries is not None else one


def payload(entry: KindSpec) -> dict[str, Any]:
    """A valid payload of ``entry``: its first form's fields (or its required ones)."""
    form = entry.forms[0] if entry.forms else None
    names = form.fields if form else [f.name for f in entry.fields if f.required]
    out: dict[str, Any] = {"type": entry.kind}
    for name in names:
        out[name] = _value(entry.field(name))
    if form is not None and form.when is not None:
        out[form.when[0]] = form.when[1]
    if entry.kind == "mixture_of_gaussians":
        out["sampling_probs"] = ["1"]  # they sum to exactly 1
    return out


def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = MODELS[kind].model_json_schema()
    if "$ref" in schema:  # a kind that nests mechanisms is a definition of its own schema
        schema = schema["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _both(kind: str, body: dict[str, Any], name: str = "") -> tuple[bool, bool, str]:
    """Whether the request model accepts ``body``, whether the core does, and the core's words;
    with ``name``, only a refusal that names that field counts (not a rule between fields, such
    as tested_release's ε_release ≥ ε_bottom)."""
    try:
        MODELS[kind].model_validate(body)
        model_ok = True
    except ValidationError:
        model_ok = False
    try:
        parse_declaration(body)
    except DeclarationError as exc:
        return model_ok, bool(name) and exc.field != name, f"{exc.field}: {exc.detail}"
    return model_ok, True, ""


def _number_form(prop: dict[str, Any]) -> dict[str, Any]:
    forms = prop.get("anyOf", [prop])
    found: dict[str, Any] = next(f for f in forms if f.get("type") == "number" and "const" not in f)
    return found


@pytest.mark.parametrize("kind", list(TABLE))
def test_each_kinds_model_and_core_parser_agree(kind: str) -> None:
    entry = TABLE[kind]
    schema = _schema(kind)
    assert list(schema["properties"]) == ["type", *[f.name for f in entry.fields]]
    assert schema["title"] == entry.title and schema["description"] == entry.description
    base = payload(entry)
    assert _both(kind, base) == (True, True, "")
    assert parse_declaration(MODELS[kind].model_validate(base).model_dump(exclude_none=True))

    # an unknown field: refused by both
    assert _both(kind, {**base, "unknown": 1})[:2] == (False, False)

    for spec in entry.fields:
        if spec.name not in base:
            continue
        prop = schema["properties"][spec.name]
        if spec.entries is not None:  # the list's size: one more than its bound is refused
            assert (prop["minItems"], prop["maxItems"]) == (1, spec.entries)
            too_many = {**base, spec.name: base[spec.name] * (spec.entries + 1)}
            assert _both(kind, too_many)[:2] == (False, False), spec.name
            assert _both(kind, {**base, spec.name: []})[:2] == (False, False), spec.name
            continue
        if spec.shape == "integer":
            assert spec.bounds == (prop["minimum"], prop["maximum"])
            low, high = spec.bounds
            body = dict(base)
            if (kind, spec.name) == ("subsampled", "m"):
                body["n"] = high  # a sample within its population
            for value, ok in ((low, True), (high, True), (low - 1, False), (high + 1, False)):
                model_ok, core_ok, words = _both(kind, {**body, spec.name: value}, spec.name)
                assert (model_ok, core_ok) == (ok, ok), (spec.name, value)
                assert ok or words.startswith(f"{spec.name}: {spec.name} must be in"), words
        if spec.shape == "amount":
            assert spec.domain is not None
            number = _number_form(prop)
            high_open = "exclusiveMaximum" in number
            top = Decimal(str(number["exclusiveMaximum" if high_open else "maximum"]))
            assert (top, high_open) == (spec.domain.high, spec.domain.high_open)
            tiny = top.scaleb(-20)  # one part in 10²⁰: past the bound, within 30 digits
            with localcontext(prec=60):
                above, below = top + tiny, top - tiny
            for given, ok in ((top, not high_open), (above, False), (below, True)):
                model_ok, core_ok, words = _both(kind, {**base, spec.name: str(given)}, spec.name)
                assert model_ok, (spec.name, given)  # the model documents, the core checks
                assert core_ok == ok, (spec.name, given, words)
                assert ok or words.startswith(f"{spec.name}: {spec.name} must be"), words
            low_open = "exclusiveMinimum" in number or not any(
                f.get("const") == 0 for f in prop.get("anyOf", [])
            )
            assert low_open == spec.domain.low_open, spec.name
            bottom = spec.domain.low
            at_low = _both(kind, {**base, spec.name: str(bottom)}, spec.name)
            assert at_low[1] == (not low_open), (spec.name, at_low)
            with localcontext(prec=60):
                above = bottom + Decimal("1e-20")
            assert _both(kind, {**base, spec.name: str(above)}, spec.name)[1], spec.name
            assert not _both(kind, {**base, spec.name: "-1"}, spec.name)[1], spec.name


def test_the_table_holds_every_kind_of_the_registry() -> None:
    assert list(TABLE) == list(KINDS)


@pytest.mark.parametrize("kind", list(TABLE))
def test_an_omitted_field_reads_as_the_core_dataclasss_default(kind: str) -> None:
    by_name = {f.name: f for f in dataclasses.fields(KINDS[kind])}
    body = payload(TABLE[kind])
    for spec in TABLE[kind].fields:
        field = by_name.get(spec.name)
        if field is None or spec.required:
            continue
        default = None if field.default is dataclasses.MISSING else field.default
        assert spec.default == default, spec.name
        if spec.name not in body:
            assert getattr(parse_declaration(body), spec.name) == default, spec.name


#: Run in a fresh process: the table is patched before the server and the core's parsers are
#: imported, as a change to the table itself would be.
EXTENDED = r"""
import dataclasses, json, sys, tempfile
from pathlib import Path

from odometer_core.accounting.kinds import fields

entry = fields.TABLE["gaussian"]
rounds = fields.Field(
    "rounds", "integer", bounds=(1, 10), required=False, default=1,
    description="how many times the noise is drawn (a field added for this test)",
)
fields.TABLE["gaussian"] = dataclasses.replace(entry, fields=(*entry.fields, rounds))

from fastapi.testclient import TestClient
from app.main import create_app
from app.settings import Settings
from odometer_core.accounting import DeclarationError, parse_declaration
from tests.support import ADMIN_KEY, AUTH, basic_dataset, fresh_database

out = {}
with tempfile.TemporaryDirectory() as tmp, fresh_database("sqlite", Path(tmp)) as backend:
    settings = Settings(database_url=backend.url, admin_key=ADMIN_KEY)
    with TestClient(create_app(settings)) as client:
        ds = basic_dataset(client)
        bad = {"mechanism": {"type": "gaussian", "sigma": 1, "rounds": 11}}
        r = client.post(f"/v1/datasets/{ds['id']}/invocations", json=bad, headers=AUTH)
        out["status"], out["body"] = r.status_code, r.json()
        out["schema"] = client.get("/openapi.json").json()
try:
    parse_declaration({"type": "gaussian", "sigma": "1", "rounds": 11})
except DeclarationError as exc:
    out["core"] = [exc.field, exc.detail]
json.dump(out, sys.stdout)
"""


def _generator() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("generate", ROOT / "client/generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_field_added_to_the_table_reaches_the_server_the_document_and_the_client() -> None:
    run = subprocess.run(
        [sys.executable, "-c", EXTENDED], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)

    # the server: the new field's bound, named in the 422
    assert out["status"] == 422, out["body"]
    assert "rounds" in json.dumps(out["body"])
    assert "less than or equal to 10" in json.dumps(out["body"]), out["body"]

    # the document: the field with its bounds and description, optional
    gaussian = out["schema"]["components"]["schemas"]["Gaussian"]
    assert gaussian["properties"]["rounds"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 10,
        "title": "Rounds",
        "description": "how many times the noise is drawn (a field added for this test)",
    }
    assert gaussian["required"] == ["type", "sigma"]

    # the client: its generated helper takes the field and sends it
    source = _generator().generated_declared(out["schema"])
    namespace: dict[str, Any] = {}
    exec(compile(source, "_declared.py", "exec"), namespace)
    helper = namespace["gaussian"]
    assert helper(2, rounds=3).to_json() == {"type": "gaussian", "sigma": "2", "rounds": 3}
    assert helper(2).to_json() == {"type": "gaussian", "sigma": "2"}
    assert "``rounds``: how many times the noise is drawn" in helper.__doc__

    # the core's parser reads the same table
    assert out["core"] == ["rounds", "rounds must be in [1, 10], got 11"]
