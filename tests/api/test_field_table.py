"""Every declaration kind is said once, in the accounting core's field table
(``odometer_core.accounting.kinds.fields``): the request models, the OpenAPI document and the
client's helpers are derived from it, and the core's parsers read their bounds from it.

- each kind's request model and the core's parser agree, on every field (each in a payload of
  a form that has it, optional ones too) and the ODP cell's: the same fields, the bounds the
  document states are the ones the core enforces (a value at a closed bound accepted, one past
  it refused naming the field), a list's entries' too, the same list sizes, the same words;
- each kind's core dataclass, which still declares its fields (typed, for the type checker and
  the reader), declares the table's: the same names, types and defaults;
- a field added to the table alone (in a fresh process: the models are built at import) reaches
  the server's validation (422 naming its bound), the document (its bounds and description),
  the client's generated helper (a parameter, sent as given) and the core's parser; so does a
  field added to the ODP cell.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import typing
from collections.abc import Callable
from decimal import Decimal, localcontext
from functools import partial
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import ValidationError

from app.schemas.mechanisms import MODELS
from odometer_core.accounting import KINDS, Declaration, DeclarationError, parse_declaration
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


def payload(entry: KindSpec, field: str | None = None) -> dict[str, Any]:
    """A valid payload of ``entry``: its first form's fields (or its required ones); with
    ``field``, the first form that has it, the field given in it."""
    form = entry.forms[0] if entry.forms else None
    if field is not None and form is not None:
        form = next(f for f in entry.forms if field in f.fields)
    names = list(form.fields) if form else [f.name for f in entry.fields if f.required]
    if field is not None and field not in names:
        names.append(field)
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


def _both(
    kind: str, body: dict[str, Any], name: str | tuple[str, ...] = ""
) -> tuple[bool, bool, str]:
    """Whether the request model accepts ``body``, whether the core does, and the core's words;
    with ``name`` (or names), only a refusal that names that field counts (not a rule between
    fields, such as tested_release's ε_release ≥ ε_bottom)."""
    try:
        MODELS[kind].model_validate(body)
        model_ok = True
    except ValidationError:
        model_ok = False
    try:
        parse_declaration(body)
    except DeclarationError as exc:
        names = (name,) if isinstance(name, str) else name
        return model_ok, bool(name) and exc.field not in names, f"{exc.field}: {exc.detail}"
    return model_ok, True, ""


def _number_form(prop: dict[str, Any]) -> dict[str, Any]:
    forms = prop.get("anyOf", [prop])
    found: dict[str, Any] = next(f for f in forms if f.get("type") == "number" and "const" not in f)
    return found


def _bounds_agree(
    kind: str,
    spec: Field,
    prop: dict[str, Any],
    put: Callable[[Any], dict[str, Any]],
    item: str | None = None,
) -> None:
    """The bounds ``prop`` (the document's) states of ``spec`` are the table's, and the request
    model and the core's parser take and refuse the values there alike, the core naming the
    field; ``put(value)``: a valid payload with the field at ``value``. With ``item``, the
    field is a list's entry, which the core names so, or names the list (a kind that says an
    entry's lower bound in its own words: an RDP curve's orders)."""
    name = item or spec.name
    names = (name, spec.name) if item else (name,)
    if spec.shape == "integer":
        assert spec.bounds == (prop["minimum"], prop["maximum"])
        low, high = spec.bounds
        for value, ok in ((low, True), (high, True), (low - 1, False), (high + 1, False)):
            model_ok, core_ok, words = _both(kind, put(value), names)
            assert (model_ok, core_ok) == (ok, ok), (name, value)
            assert ok or words.startswith(f"{name}: {name} must be in"), words
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
            model_ok, core_ok, words = _both(kind, put(str(given)), names)
            assert model_ok, (name, given)  # the model documents, the core checks
            assert core_ok == ok, (name, given, words)
            assert ok or words.startswith(f"{name}: {name} must be"), words
        low_open = "exclusiveMinimum" in number or not any(
            f.get("const") == 0 for f in prop.get("anyOf", [])
        )
        assert low_open == spec.domain.low_open, name
        bottom = spec.domain.low
        at_low = _both(kind, put(str(bottom)), names)
        assert at_low[1] == (not low_open), (name, at_low)
        with localcontext(prec=60):
            above = bottom + Decimal("1e-20")
        assert _both(kind, put(str(above)), names)[1], name
        assert not _both(kind, put("-1"), names)[1], name
    if spec.shape == "boolean":
        assert prop["type"] == "boolean"
        for flag, ok in [(True, True), (False, True), (1, False), ("true", False)]:
            assert _both(kind, put(flag), names)[:2] == (ok, ok), (name, flag)
    if spec.shape == "choice":
        assert tuple(prop["enum"]) == spec.choices
        assert _both(kind, put("neither"), name)[:2] == (False, False), name
    if spec.shape == "text":
        assert prop == {"type": "string", "pattern": spec.pattern, "title": name.title()}


@pytest.mark.parametrize("kind", list(TABLE))
def test_each_kinds_model_and_core_parser_agree(kind: str) -> None:
    """Every field of every kind (each in a payload of the first form that has it), the ODP
    cell's fields included: the same names, the same list sizes, the same bounds."""
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
        body = payload(entry, spec.name)
        assert _both(kind, body) == (True, True, ""), spec.name
        prop = schema["properties"][spec.name]
        if spec.entries is not None:  # the list's size: one more than its bound is refused
            assert (prop["minItems"], prop["maxItems"]) == (1, spec.entries)
            too_many = {**body, spec.name: body[spec.name] * (spec.entries + 1)}
            assert _both(kind, too_many)[:2] == (False, False), spec.name
            assert _both(kind, {**body, spec.name: []})[:2] == (False, False), spec.name
            # each entry's bounds (a mixture's one probability is 1: its rule is their sum)
            if spec.shape in ("amount", "integer") and spec.name != "sampling_probs":
                put = partial(_entry, body, spec.name)
                _bounds_agree(kind, spec, prop["items"], put, spec.item or spec.name)
            if spec.shape == "cells":  # each of the cell's fields
                assert spec.cell is not None
                cell = MODELS[kind].model_json_schema()["$defs"][spec.cell.title]
                assert list(cell["properties"]) == [f.name for f in spec.cell.fields]
                for part in spec.cell.fields:
                    put = partial(_in_cell, body, spec.name, part.name)
                    _bounds_agree(kind, part, cell["properties"][part.name], put)
            continue
        if (kind, spec.name) == ("subsampled", "m"):
            body["n"] = spec.bounds[1] if spec.bounds else 1  # a sample within its population
        _bounds_agree(kind, spec, prop, partial(_at, body, spec.name))


def _at(body: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    """``body`` with field ``name`` at ``value``."""
    return {**body, name: value}


def _entry(body: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    """``body`` with list ``name`` of one entry, ``value``."""
    return {**body, name: [value]}


def _in_cell(body: dict[str, Any], cells: str, name: str, value: Any) -> dict[str, Any]:
    """``body`` with its first cell's field ``name`` at ``value``, its only cell."""
    return {**body, cells: [{**body[cells][0], name: value}]}


def test_the_table_holds_every_kind_of_the_registry() -> None:
    assert list(TABLE) == list(KINDS)


#: The kinds whose dataclass keeps their fields otherwise than by name: a composition keeps
#: ``mechanisms``, or ``mechanism`` repeated ``count`` times, as its (mechanism, count) items.
STORED_OTHERWISE: dict[str, dict[str, Any]] = {
    "composed": {"items": tuple[tuple[Declaration, int], ...]},
}


def _python_type(spec: Field) -> Any:
    """The type the core's dataclass gives a field of ``spec`` (a list: a tuple of its entries;
    the ODP cells: a tuple of (name, ε), the cell's fields in order)."""
    if spec.shape == "cells":
        assert spec.cell is not None
        one: Any = tuple[tuple(_python_type(f) for f in spec.cell.fields)]  # type: ignore[misc]
    elif spec.shape == "choice":
        one = Literal[spec.choices]
    else:
        one = {
            "amount": Decimal,
            "integer": int,
            "boolean": bool,
            "text": str,
            "mechanism": Declaration,
        }[spec.shape]
    if spec.entries is not None:
        one = tuple[one, ...]
    if not spec.required and spec.default is None:
        one = one | None
    return one


@pytest.mark.parametrize("kind", list(TABLE))
def test_each_kinds_dataclass_holds_the_tables_fields(kind: str) -> None:
    """The core's dataclasses still declare their own fields (typed, with defaults, for the
    type checker and the reader): each is held here to the table, field for field — its name,
    its type, whether it has a default and which — and an omitted field reads as that default."""
    cls = KINDS[kind]
    hints = typing.get_type_hints(cls)
    stored = {f.name: f for f in dataclasses.fields(cls)}
    if kind in STORED_OTHERWISE:
        assert {name: hints[name] for name in stored} == STORED_OTHERWISE[kind]
        return
    assert set(stored) == {f.name for f in TABLE[kind].fields}
    body = payload(TABLE[kind])
    for spec in TABLE[kind].fields:
        field = stored[spec.name]
        assert hints[spec.name] == _python_type(spec), spec.name
        assert field.default_factory is dataclasses.MISSING, spec.name
        if spec.required:
            assert field.default is dataclasses.MISSING, spec.name
            continue
        assert field.default == spec.default, spec.name
        assert type(field.default) is type(spec.default), spec.name
        if spec.name not in body:
            assert getattr(parse_declaration(body), spec.name) == spec.default, spec.name


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


#: As :data:`EXTENDED`, with a field added to the ODP cell (the ``cells`` field's ``cell``).
EXTENDED_CELL = r"""
import dataclasses, json, sys, tempfile
from pathlib import Path

from odometer_core.accounting.kinds import fields

entry = fields.TABLE["odp"]
cells = entry.field("cells")
rank = fields.Field(
    "rank", "integer", bounds=(1, 10), required=False, default=1,
    description="the cell's rank (a field added for this test)",
)
cell = dataclasses.replace(cells.cell, fields=(*cells.cell.fields, rank))
replaced = tuple(dataclasses.replace(f, cell=cell) if f is cells else f for f in entry.fields)
fields.TABLE["odp"] = dataclasses.replace(entry, fields=replaced)

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
        url = f"/v1/datasets/{ds['id']}/invocations"
        good = [{"name": "a", "epsilon": "0.1", "rank": 2}, {"name": "b", "epsilon": "0.2"}]
        bad = [{"name": "a", "epsilon": "0.1", "rank": 11}]
        r = client.post(url, json={"mechanism": {"type": "odp", "cells": bad}}, headers=AUTH)
        out["status"], out["body"] = r.status_code, r.json()
        r = client.post(url, json={"mechanism": {"type": "odp", "cells": good}}, headers=AUTH)
        out["accepted"] = r.status_code
        out["schema"] = client.get("/openapi.json").json()
try:
    parse_declaration({"type": "odp", "cells": [{"name": "a", "epsilon": "0.1", "rank": 0}]})
except DeclarationError as exc:
    out["core"] = [exc.field, exc.detail]
json.dump(out, sys.stdout)
"""


def test_a_field_added_to_the_odp_cell_reaches_the_server_the_document_and_the_client() -> None:
    run = subprocess.run(
        [sys.executable, "-c", EXTENDED_CELL], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)

    # the server: the new field's bound, named in the 422; a cell with it, and one without,
    # accepted
    assert out["status"] == 422, out["body"]
    assert "rank" in json.dumps(out["body"])
    assert "less than or equal to 10" in json.dumps(out["body"]), out["body"]
    assert out["accepted"] == 201

    # the document: the cell's schema with the field, its bounds and description, optional
    cell = out["schema"]["components"]["schemas"]["OdpCell"]
    assert list(cell["properties"]) == ["name", "epsilon", "rank"]
    assert cell["properties"]["rank"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 10,
        "title": "Rank",
        "description": "the cell's rank (a field added for this test)",
    }
    assert cell["required"] == ["name", "epsilon"]

    # the client: its generated odp helper sends the field when a cell has it
    source = _generator().generated_declared(out["schema"])
    namespace: dict[str, Any] = {}
    exec(compile(source, "_declared.py", "exec"), namespace)
    helper = namespace["odp"]
    declared = helper([{"name": "a", "epsilon": 0.1, "rank": 3}, {"name": "b", "epsilon": "0.2"}])
    assert declared.to_json()["cells"] == [
        {"name": "a", "epsilon": "0.1", "rank": 3},
        {"name": "b", "epsilon": "0.2"},
    ]
    assert "cells {name, epsilon, rank}" in helper.__doc__

    # the core's parser reads the same cell
    assert out["core"] == ["rank", "rank must be in [1, 10], got 0"]


def test_the_odp_cell_is_the_tables_in_the_model_the_document_and_the_core() -> None:
    """The cell as it is today: the request model's fields are the table's cell's, the name's
    pattern the core's one, and the core refuses a cell field it does not know naming ``cell``."""
    cells = TABLE["odp"].field("cells")
    assert cells.cell is not None
    schema = _schema("odp")["properties"]["cells"]["items"]
    odp = MODELS["odp"].model_json_schema()
    cell = odp["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    assert cell["title"] == cells.cell.title and cell["description"] == cells.cell.description
    assert list(cell["properties"]) == [f.name for f in cells.cell.fields]
    assert cell["properties"]["name"]["pattern"] == cells.cell.field("name").pattern
    assert cell["additionalProperties"] is False
    with pytest.raises(DeclarationError, match="unknown field\\(s\\) for 'cell': rank"):
        parse_declaration({"type": "odp", "cells": [{"name": "a", "epsilon": "0", "rank": 1}]})
