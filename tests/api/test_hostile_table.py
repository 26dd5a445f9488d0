"""Hostile numbers on every numeric field of every request body and query.

The numeric fields are enumerated mechanically from ``openapi/openapi.json``: each request-body
schema is walked ($refs, discriminated unions, arrays, optional fields) alongside a valid base
body per route and variant, collecting the JSON path of every ``number``/``integer`` field and
every decimal-string amount, and of every array (the array itself and its first element);
integer query parameters are collected too. Each hostile value is
then substituted at each path (as raw JSON text, so ``NaN`` and ``1e309`` reach the server as
tokens). A route with numeric fields and no base body here still gets every always-refused
value, on a body built from its schema, so new routes are covered from the day they appear.

Expected outcome per (field, value) — the rules, in order:

* ``10^6``-element arrays and a 10 MB body: 413 (above the 1 MiB body limit), no effect.
* NaN, ±Infinity, 1e309, 5e-324 (exponent below -300), -1, 1e300 (every field is bounded far
  below: ε ≤ 10⁶, σ ≤ 10¹², δ < 1, counts ≤ 10¹²), booleans, null, non-numeric strings, an
  overflowing decimal string, objects, arrays (also of 10^4 elements: above every array limit,
  inside the body limit): 400 or 422, no effect.
* 0 where the specification needs a positive value (ε_B > 0, orders α > 1, counts, steps,
  ``c``, ``n``, ``tests``, stopping points, the DP-SGD noise multiplier): 422, no effect.
* 0 elsewhere is a legitimate amount: it is either refused with a 4xx and no effect, or
  applied; for a registration the decision and the charge must then equal the preview of the
  same body (a zero-cost invocation is accepted with charge 0; σ = 0 costs ∞ and is rejected
  with 409 and an ``invocation_rejected`` ledger entry).
* -0.0 (JSON's minus zero) is the number 0: the same status and the same preview as 0.
  ``"-0"`` is not decimal text (the grammar has no sign but ``+``: docs/http-api.md,
  *Numbers*) and is refused, as are ``"1_0"``, ``" 1"``, full-width and Arabic-Indic digits,
  and ``1e-400`` as a JSON number (read from its literal, not as the float 0 it rounds to).

"No effect" means every row of every table (reflected from the database, so new tables are
compared too) is unchanged. 5xx is never acceptable.

Found and fixed with this table: ``conversion_delta`` of a registration and
``final_conversion_delta`` of a budget change accepted -1, -0.1 and 1e300 (201/200, recorded in
the ledger): the accounting core only compared them with the budget's δ, or ignored them. Both
request models now require 0 ≤ δ < 1 (``app/schemas/invocations.py``, ``app/schemas/datasets.py``).

Shown able to fail: before those fixes the table failed with "POST /v1/datasets/{dataset_id}/
invocations pure_dp conversion_delta=-1: expected [400, 422], got 201" and "refused requests
changed the database"; and with the amount validator monkeypatched to read NaN as 0 (a lenient
parser), it fails with "mechanism.epsilon=NaN: expected [400, 422], got 201" —
``test_the_table_catches_a_validator_that_lets_nan_through`` keeps that proof in the suite.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import MetaData, Table, select

from app.db.uow import Database
from app.main import create_app
from app.schemas import common
from app.settings import Settings
from odometer_core.accounting import exact
from tests.conftest import BACKENDS
from tests.support import (
    ADMIN_KEY,
    AUTH,
    PG_SKIP_REASON,
    ROOT,
    fresh_database,
    new_organisation,
    new_principal,
    postgres_url,
)

JSON = {**AUTH, "content-type": "application/json"}
SENTINEL = "\x00hostile\x00"
Path = tuple[str | int, ...]

# ------------------------------------------------------------------------------- the values
REFUSED = "refused"  # 400/422, no effect
TOO_LARGE = "too_large"  # 413, no effect
ZERO = "zero"  # the number 0: per-field rule
MINUS_ZERO = "minus_zero"  # must behave exactly as 0

BIG_ARRAY = "[" + ",".join(["0"] * 10**6) + "]"
MEDIUM_ARRAY = "[" + ",".join(["0.1"] * 10**4) + "]"

#: (label, raw JSON token, rule)
HOSTILE: list[tuple[str, str, str]] = [
    ("NaN", "NaN", REFUSED),
    ("Infinity", "Infinity", REFUSED),
    ("-Infinity", "-Infinity", REFUSED),
    ("1e309", "1e309", REFUSED),
    ("-1e309", "-1e309", REFUSED),
    ("5e-324", "5e-324", REFUSED),
    ("1e300", "1e300", REFUSED),
    ("-1", "-1", REFUSED),
    ("-0.1", "-0.1", REFUSED),
    ("true", "true", REFUSED),
    ("false", "false", REFUSED),
    ("null", "null", REFUSED),
    ('"abc"', '"abc"', REFUSED),
    ('""', '""', REFUSED),
    ('"NaN"', '"NaN"', REFUSED),
    ('"Infinity"', '"Infinity"', REFUSED),
    ('"1E1000000"', '"1E1000000"', REFUSED),
    ('"0x10"', '"0x10"', REFUSED),
    ("{}", "{}", REFUSED),
    ("[0.1]", "[0.1]", REFUSED),
    ("10^4-element array", MEDIUM_ARRAY, REFUSED),
    ("10^6-element array", BIG_ARRAY, TOO_LARGE),
    ("0", "0", ZERO),
    ("-0.0", "-0.0", MINUS_ZERO),
    ('"-0"', '"-0"', REFUSED),
    ('"1_0"', '"1_0"', REFUSED),
    ('" 1"', '" 1"', REFUSED),
    ('"１"', '"\uff11"', REFUSED),
    ('"١"', '"\u0661"', REFUSED),
    ("1e-400", "1e-400", REFUSED),
]

#: Field names (last path component) where 0 is outside the specification's domain.
ZERO_REFUSED_FIELDS = frozenset(
    {"orders", "count", "steps", "c", "n", "tests", "stopping_points", "noise_multiplier"}
)
#: (route, path) pairs where 0 is refused although the field name is generic.
ZERO_REFUSED_PATHS = frozenset(
    {
        ("POST /v1/datasets", ("budget", "epsilon")),
        ("PATCH /v1/datasets/{dataset_id}/budget", ("epsilon",)),
    }
)


# ------------------------------------------------------------------------------- the world
@dataclass
class World:
    client: TestClient
    database: Database
    tables: list[Table]
    ids: dict[str, str]
    #: mechanism type → dataset to register it on (its relation must match)
    dataset_for: dict[str, str] = field(default_factory=dict)

    def fresh_analyst(self) -> str:
        principal_id, _ = new_principal(self.client, self.ids["organisation_id"], "analyst")
        return principal_id


@pytest.fixture(scope="module", params=BACKENDS)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """A database of its own (so the table dumps stay small) with the objects the routes need."""
    if request.param == "postgresql" and postgres_url() is None:
        pytest.skip(PG_SKIP_REASON)
    with fresh_database(request.param, tmp_path_factory.mktemp("hostile")) as backend:
        database = Database.from_settings(Settings(database_url=backend.url))
        app = create_app(Settings(database_url=backend.url, admin_key=ADMIN_KEY), database)
        metadata = MetaData()
        metadata.reflect(database.engine)
        tables = [t for t in metadata.sorted_tables if t.name != "alembic_version"]
        with TestClient(app) as client:
            org = new_organisation(client)
            ids = {"organisation_id": org, "backend": request.param}
            for name, relation in (("dataset_id", "add_remove"), ("replace_one", "replace_one")):
                r = client.post(
                    "/v1/datasets",
                    json={
                        "name": name,
                        "budget": {"epsilon": 100, "delta": "0.01"},
                        "relation": relation,
                        "organisation_id": org,
                    },
                    headers=AUTH,
                )
                assert r.status_code == 201, r.text
                ids[name] = r.json()["id"]
            world = World(client, database, tables, ids)
            world.dataset_for = {
                "subsampled_wor": ids["replace_one"],
                "sampled_with_replacement": ids["replace_one"],
            }
            yield world
        database.dispose()


def dump(world: World) -> dict[str, list[str]]:
    """Every row of every table, as sorted reprs."""
    with world.database.engine.connect() as conn:
        return {
            t.name: sorted(repr(tuple(row)) for row in conn.execute(select(t)))
            for t in world.tables
        }


# ------------------------------------------------------------------------------- base bodies
def _mechanisms() -> dict[str, dict[str, Any]]:
    eps = "0.01"
    pure = {"type": "pure_dp", "epsilon": eps}
    return {
        "pure_dp": pure,
        "approx_dp": {"type": "approx_dp", "epsilon": eps, "delta": "1e-7"},
        "zcdp": {"type": "zcdp", "rho": "0.0001", "xi": "0.001", "delta": "1e-8"},
        "rdp": {"type": "rdp", "orders": [2, 4], "values": ["0.001", "0.002"]},
        "gdp": {"type": "gdp", "mu": "0.01"},
        "mcdp": {"type": "mcdp", "mu": "0.01", "tau": "0.01"},
        "gaussian": {"type": "gaussian", "sigma": 100, "sensitivity": 1},
        "laplace": {"type": "laplace", "scale": 1000, "sensitivity": 1},
        "randomized_response": {"type": "randomized_response", "epsilon": eps},
        "exponential": {"type": "exponential", "epsilon": eps},
        "discrete_laplace": {"type": "discrete_laplace", "scale": 1000, "sensitivity": 1},
        "discrete_gaussian": {"type": "discrete_gaussian", "sigma": 100, "sensitivity": 1},
        "report_noisy_max": {
            "type": "report_noisy_max",
            "noise": "exponential",
            "scale": 1000,
            "sensitivity": 1,
            "monotonic": False,
        },
        "odp": {"type": "odp", "cells": [{"name": "a", "epsilon": eps}], "delta": "1e-8"},
        "svt": {"type": "svt", "epsilon1": eps, "epsilon2": eps, "c": 2},
        "ptr": {"type": "ptr", "epsilon": eps, "delta": "1e-8", "tests": 1},
        "iterative": {
            "type": "iterative",
            "step_epsilon": "0.001",
            "step_delta": "1e-9",
            "stopping_points": [1, 2],
        },
        "tested_release": {
            "type": "tested_release",
            "epsilon_release": eps,
            "epsilon_bottom": eps,
            "delta": "1e-8",
        },
        "tree_aggregation": {
            "type": "tree_aggregation",
            "noise_multiplier": 100,
            "step_counts": [10, 20],
        },
        "repeat_and_select": {
            "type": "repeat_and_select",
            "distribution": "truncated_negative_binomial",
            "mean": 2,
            "shape": 1,
            "mechanism": pure,
        },
        "mixture_of_gaussians": {
            "type": "mixture_of_gaussians",
            "standard_deviation": 100,
            "sensitivities": [0, 1],
            "sampling_probs": ["0.9", "0.1"],
        },
        "sampled_with_replacement": {
            "type": "sampled_with_replacement",
            "m": 10,
            "n": 1000,
            "mechanism": {"type": "gaussian", "sigma": 100, "sensitivity": 1},
        },
        "truncated_subsampled_gaussian": {
            "type": "truncated_subsampled_gaussian",
            "dataset_size": 1000,
            "sampling_probability": "0.01",
            "truncated_batch_size": 20,
            "noise_multiplier": 100,
        },
        "subsampled": {"type": "subsampled", "scheme": "poisson", "rate": "0.1", "mechanism": pure},
        "subsampled_wor": {
            "type": "subsampled",
            "scheme": "without_replacement",
            "m": 10,
            "n": 100,
            "mechanism": pure,
        },
        "composed": {"type": "composed", "mechanism": pure, "count": 2},
        "composed_list": {"type": "composed", "mechanisms": [pure, pure]},
        "dp_sgd": {
            "type": "dp_sgd",
            "noise_multiplier": 10,
            "sample_rate": "0.001",
            "steps": 10,
            "delta": "1e-8",
        },
    }


def _datasets() -> dict[str, dict[str, Any]]:
    budget = {"epsilon": 1, "delta": "0.001"}
    leaf = {"mode": "basic", "conversion_delta": "1e-5"}
    return {
        "basic": {"name": "h", "budget": budget, "accounting": leaf},
        "zcdp": {
            "name": "h",
            "budget": budget,
            "accounting": {"mode": "zcdp", "final_conversion_delta": "0.0005"},
        },
        "rdp": {
            "name": "h",
            "budget": budget,
            "accounting": {
                "mode": "rdp",
                "final_conversion_delta": "0.0005",
                "orders": [2, 8],
                "weights": ["0.5", "0.5"],
            },
        },
        "gdp": {"name": "h", "budget": budget, "accounting": {"mode": "gdp"}},
        "split": {
            "name": "h",
            "budget": budget,
            "accounting": {
                "mode": "split",
                "sub_budgets": [
                    {
                        "name": "a",
                        "budget": {"epsilon": "0.5", "delta": "0.0005"},
                        "accounting": leaf,
                    }
                ],
            },
        },
    }


@dataclass(frozen=True)
class Variant:
    """One valid request of a route: its base body (built fresh per request) and path ids."""

    route: str  # "METHOD /path/template"
    name: str
    body: Callable[[World], dict[str, Any]]
    path_ids: Callable[[World], dict[str, str]]
    #: the base body can be applied once only (a grant): build a fresh one per request
    fresh: bool = False


def _ids(w: World) -> dict[str, str]:
    return w.ids


def variants() -> list[Variant]:
    out: list[Variant] = []
    for route in (
        "POST /v1/datasets/{dataset_id}/invocations",
        "POST /v1/datasets/{dataset_id}/invocations/preview",
    ):
        for name, mechanism in _mechanisms().items():

            def body(_: World, m: dict[str, Any] = mechanism) -> dict[str, Any]:
                if m["type"] == "tree_aggregation":  # its assumption, on add_remove datasets
                    return {"mechanism": m, "conversion_delta": "1e-6", "neighbours": "zero_out"}
                return (
                    {"mechanism": m, "conversion_delta": "1e-6"}
                    if m["type"]
                    in {
                        "zcdp",
                        "rdp",
                        "gdp",
                        "mcdp",
                        "gaussian",
                        "discrete_gaussian",
                        "tree_aggregation",
                        "mixture_of_gaussians",
                        "sampled_with_replacement",
                        "truncated_subsampled_gaussian",
                        "subsampled",
                        "composed",
                        "dp_sgd",
                        "laplace",
                    }
                    else {"mechanism": m}
                )

            def path(w: World, n: str = name) -> dict[str, str]:
                return {"dataset_id": w.dataset_for.get(n, w.ids["dataset_id"])}

            out.append(Variant(route, name, body, path))
    for name, dataset in _datasets().items():

        def owned(w: World, d: dict[str, Any] = dataset) -> dict[str, Any]:
            return {**d, "organisation_id": w.ids["organisation_id"]}

        out.append(Variant("POST /v1/datasets", name, owned, _ids))
    out.append(
        Variant(
            "PATCH /v1/datasets/{dataset_id}/budget",
            "basic",
            lambda _: {"epsilon": 100, "delta": "0.01"},
            _ids,
        )
    )
    out.append(
        Variant(
            "PATCH /v1/organisations/{organisation_id}/cap",
            "cap",
            lambda _: {"epsilon": 1000, "delta": "0.5"},
            _ids,
        )
    )
    out.append(
        Variant(
            "POST /v1/datasets/{dataset_id}/grants",
            "quota",
            lambda w: {
                "principal_id": w.fresh_analyst(),
                "quota": {"epsilon": 1, "delta": "0.001"},
            },
            _ids,
            fresh=True,
        )
    )
    return out


VARIANTS = variants()


# ------------------------------------------------------------------------------- the walk
def load_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    return document


DOCUMENT = load_document()


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        node: Any = DOCUMENT
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def is_numeric(schema: dict[str, Any]) -> bool:
    """A number, an integer, or an amount (a number or a decimal string)."""
    schema = resolve(schema)
    if schema.get("type") in {"number", "integer"}:
        return True
    return any(resolve(s).get("type") in {"number", "integer"} for s in schema.get("anyOf", []))


def branches(schema: dict[str, Any], body: Any) -> list[dict[str, Any]]:
    """The union branch(es) a body takes: the discriminated one, else every non-null one."""
    options = [resolve(s) for s in schema.get("oneOf", []) + schema.get("anyOf", [])]
    options = [o for o in options if o.get("type") != "null"]
    disc = schema.get("discriminator", {}).get("propertyName")
    if disc and isinstance(body, dict):
        chosen = [
            o
            for o in options
            if o.get("properties", {}).get(disc, {}).get("const") == body.get(disc)
        ]
        assert chosen, f"no branch of the union for {disc}={body.get(disc)!r}"
        return chosen
    return options


def numeric_paths(schema: dict[str, Any], body: Any, path: Path = ()) -> Iterator[Path]:
    """JSON paths of the numeric fields and arrays of ``body`` under ``schema`` (absent optional
    numeric fields included; absent objects and arrays are not invented)."""
    schema = resolve(schema)
    if is_numeric(schema):
        yield path
        return
    if "oneOf" in schema or "anyOf" in schema:
        for option in branches(schema, body):
            yield from numeric_paths(option, body, path)
        return
    if schema.get("type") == "array" or "items" in schema:
        yield path  # the array itself: oversized arrays and non-arrays in its place
        items = schema.get("items", {})
        if is_numeric(items):
            yield (*path, 0)
        elif isinstance(body, list) and body:
            yield from numeric_paths(items, body[0], (*path, 0))
        return
    for name, sub in schema.get("properties", {}).items():
        if isinstance(body, dict) and name in body:
            yield from numeric_paths(sub, body[name], (*path, name))
        elif is_numeric(sub):
            yield (*path, name)


def request_schema(route: str) -> dict[str, Any] | None:
    method, template = route.split(" ", 1)
    op = DOCUMENT["paths"][template][method.lower()]
    content = op.get("requestBody", {}).get("content", {}).get("application/json")
    return None if content is None else dict(content["schema"])


def body_routes() -> list[str]:
    return [
        f"{m.upper()} {p}"
        for p, ops in DOCUMENT["paths"].items()
        for m, op in ops.items()
        if "application/json" in op.get("requestBody", {}).get("content", {})
    ]


def substitute(body: Any, path: Path, token: str) -> str:
    """The raw JSON text of ``body`` with ``token`` (raw JSON) at ``path``."""
    copy = json.loads(json.dumps(body))
    node = copy
    for part in path[:-1]:
        node = node[part]
    last = path[-1]
    if isinstance(node, list):
        node[int(last)] = SENTINEL
    else:
        node[last] = SENTINEL
    text = json.dumps(copy)
    needle = json.dumps(SENTINEL)
    assert text.count(needle) == 1
    return text.replace(needle, token)


def sample_body(schema: dict[str, Any]) -> Any:
    """A body built from a schema alone (routes without a base body here): required fields only."""
    schema = resolve(schema)
    if "oneOf" in schema or "anyOf" in schema:
        return sample_body(branches(schema, None)[0])
    if is_numeric(schema):
        return 1
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: sample_body(props[k]) for k in schema.get("required", [])}
    if kind == "array":
        return [sample_body(schema.get("items", {}))]
    if kind == "boolean":
        return False
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    return "x"


# ------------------------------------------------------------------------------- sending
def url(route: str, ids: dict[str, str]) -> tuple[str, str]:
    method, template = route.split(" ", 1)
    return method, re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), "missing"), template)


def send(world: World, route: str, ids: dict[str, str], raw: str) -> Any:
    method, target = url(route, ids)
    return world.client.request(method, target, content=raw.encode(), headers=JSON)


def zero_refused(route: str, path: Path) -> bool:
    names = [p for p in path if isinstance(p, str)]
    return (names[-1] if names else "") in ZERO_REFUSED_FIELDS or (
        route,
        tuple(p for p in path if isinstance(p, str)),
    ) in ZERO_REFUSED_PATHS


@dataclass
class Outcome:
    status: int
    body: Any
    changed: bool


def check_refused(
    world: World,
    case: str,
    route: str,
    ids: dict[str, str],
    raws: list[tuple[str, str]],
    expected: set[int],
) -> list[str]:
    """Send each raw body; each must get a status in ``expected``; the batch changes nothing."""
    problems: list[str] = []
    before = dump(world)
    for label, raw in raws:
        r = send(world, route, ids, raw)
        if r.status_code not in expected:
            problems.append(
                f"{case} {label}: expected {sorted(expected)}, got {r.status_code} {r.text[:200]}"
            )
        elif r.status_code != 413:
            body = r.json()
            if not (isinstance(body, dict) and {"error", "detail"} <= set(body)):
                problems.append(f"{case} {label}: error body {body!r}")
    if dump(world) != before:
        problems.append(f"{case}: refused requests changed the database")
    return problems


def preview_of(world: World, ids: dict[str, str], raw: str) -> tuple[int, Any]:
    r = send(world, "POST /v1/datasets/{dataset_id}/invocations/preview", ids, raw)
    return r.status_code, r.json()


def check_zero(
    world: World,
    case: str,
    route: str,
    ids: dict[str, str],
    path: Path,
    raws: list[tuple[str, str]],
) -> list[str]:
    """0 and its spellings: all the same outcome; refused where the rules say so; otherwise a
    4xx without effect or an effect consistent with the preview of the same body."""
    problems: list[str] = []
    before = dump(world)
    outcomes: list[tuple[str, Outcome, tuple[int, Any] | None]] = []
    for label, raw in raws:
        preview = preview_of(world, ids, raw) if route.endswith("/invocations") else None
        r = send(world, route, ids, raw)
        payload = r.json() if r.status_code != 413 else r.text
        outcomes.append(
            (
                label,
                Outcome(
                    r.status_code, payload, changed=r.status_code < 400 or r.status_code == 409
                ),
                preview,
            )
        )
    changed = dump(world) != before
    statuses = sorted({o.status for _, o, _ in outcomes})
    if len(statuses) != 1:
        problems.append(
            f'{case}: 0, -0.0 and "-0" differ: {[(lbl, o.status) for lbl, o, _ in outcomes]}'
        )
    charges = {json.dumps(charge_of(p)) for _, _, p in outcomes if p is not None}
    if len(charges) > 1:
        problems.append(f'{case}: 0, -0.0 and "-0" preview differently: {sorted(charges)}')
    status = statuses[0]
    # a registration refused by the budget (409) is a decision, written to the ledger
    effect_expected = status < 400 or (status == 409 and route.endswith("/invocations"))
    if route.endswith("/preview"):
        effect_expected = False
    if any(s >= 500 for s in statuses):
        problems.append(
            f"{case}=0: server error {[(lbl, o.status, o.body) for lbl, o, _ in outcomes]}"
        )
    elif changed != effect_expected:
        problems.append(f"{case}=0: status {status} but changed={changed}")
    elif zero_refused(route, path) and status != 422:
        problems.append(f"{case}=0: 0 is outside the domain, expected 422, got {status}")
    for label, outcome, preview in outcomes:
        if preview is not None:
            problems.extend(check_against_preview(f"{case}={label}", outcome, preview))
    return problems


def charge_of(preview: tuple[int, Any]) -> Any:
    """The comparable part of a preview: its status and its charge (amounts as Decimals)."""
    status, body = preview
    if status != 200:
        return [status, body.get("error") if isinstance(body, dict) else None]
    return [body["status"], {k: str(Decimal(v)) for k, v in body["charge"].items()}]


def check_against_preview(where: str, outcome: Outcome, preview: tuple[int, Any]) -> list[str]:
    """A registration must take the decision the preview announced, with the same charge."""
    p_status, p_body = preview
    if p_status != 200:
        if outcome.status != p_status or outcome.changed:
            changed = outcome.changed
            return [f"{where}: preview {p_status}, registration {outcome.status} ({changed=})"]
        return []
    decision = p_body["status"]
    want = {"accepted": 201, "reserved": 201, "rejected": 409}[decision]
    if outcome.status != want or not outcome.changed:
        changed = outcome.changed
        return [f"{where}: preview {decision}, registration {outcome.status} ({changed=})"]
    if decision != "rejected" and (
        outcome.body["status"] != decision
        or {k: Decimal(v) for k, v in outcome.body["charge"].items()}
        != {k: Decimal(v) for k, v in p_body["charge"].items()}
    ):
        return [f"{where}: charged {outcome.body['charge']}, preview said {p_body['charge']}"]
    return []


# ------------------------------------------------------------------------------- the tests
def cases_of(variant: Variant, world: World) -> list[tuple[Path, dict[str, Any]]]:
    schema = request_schema(variant.route)
    assert schema is not None, f"{variant.route} takes no JSON body any more"
    base = variant.body(world)
    return [(p, base) for p in numeric_paths(schema, base)]


def run_variant(world: World, variant: Variant) -> list[str]:
    ids = variant.path_ids(world)
    base = variant.body(world)
    r = send(world, variant.route, ids, json.dumps(base))
    if r.status_code >= 400:
        return [
            f"{variant.route} {variant.name}: the base body is refused: {r.status_code} {r.text}"
        ]
    schema = request_schema(variant.route)
    assert schema is not None
    paths = list(numeric_paths(schema, base))
    assert paths, f"{variant.route} {variant.name}: no numeric field found"
    name = f"{variant.route} {variant.name}"
    refused: list[tuple[str, str]] = []
    too_large: list[tuple[str, str]] = []
    for path in paths:
        where = ".".join(map(str, path))
        for label, token, rule in HOSTILE:
            raw = substitute(variant.body(world) if variant.fresh else base, path, token)
            if rule == REFUSED:
                refused.append((f"{where}={label}", raw))
            elif rule == TOO_LARGE:
                too_large.append((f"{where}={label}", raw))
    # one database comparison per batch: every request of it must be refused without effect
    problems = check_refused(world, name, variant.route, ids, refused, {400, 422})
    problems += check_refused(world, name, variant.route, ids, too_large, {413})
    if variant.route.endswith("/preview"):
        return problems  # 0 is compared with the preview on the registration route
    for path in paths:
        zeros = [
            (lbl, substitute(variant.body(world), path, tok))
            for lbl, tok, rule in HOSTILE
            if rule in {ZERO, MINUS_ZERO}
        ]
        problems += check_zero(
            world, f"{name} {'.'.join(map(str, path))}", variant.route, ids, path, zeros
        )
    return problems


@pytest.mark.parametrize("variant", VARIANTS, ids=[f"{v.route} {v.name}" for v in VARIANTS])
def test_hostile_values_on_every_numeric_field(world: World, variant: Variant) -> None:
    problems = run_variant(world, variant)
    assert problems == [], "\n".join(problems[:20])


def test_every_union_variant_has_a_base_body() -> None:
    """New mechanism kinds or accounting modes must get a base body here (else their fields
    would only be covered by the schema-built fallback)."""
    mech = resolve({"$ref": "#/components/schemas/InvocationCreate"})["properties"]["mechanism"]
    kinds = set(mech["discriminator"]["mapping"])
    covered = {m["type"] for m in _mechanisms().values()}
    assert kinds == covered
    acc = resolve({"$ref": "#/components/schemas/DatasetCreate"})["properties"]["accounting"]
    assert set(acc["discriminator"]["mapping"]) == set(_datasets())


def test_routes_without_a_base_body_refuse_hostile_values(world: World) -> None:
    """Every other route with a JSON body (new routes included): always-refused values at each
    numeric field of a schema-built body, and a 10 MB body, are 4xx without effect."""
    known = {v.route for v in VARIANTS}
    problems: list[str] = []
    for route in body_routes():
        schema = request_schema(route)
        if route in known or schema is None:
            continue
        base = sample_body(schema)
        for path in numeric_paths(schema, base):
            refused = [
                (lbl, substitute(base, path, tok)) for lbl, tok, rule in HOSTILE if rule == REFUSED
            ]
            problems += check_refused(
                world, f"{route} {path}", route, world.ids, refused, {400, 404, 422}
            )
    assert problems == [], "\n".join(problems[:20])


def test_ten_megabyte_body_on_every_body_route(world: World) -> None:
    """A 10 MB body (a valid base body padded, or a bare pad) is 413 on every route that reads
    a body, whether its size is announced or streamed, and changes nothing."""
    bases = {v.route: v for v in VARIANTS}
    pad = "x" * (10 * 1024 * 1024)
    problems: list[str] = []
    routes = body_routes()
    assert routes
    for route in routes:
        variant = bases.get(route)
        body = variant.body(world) if variant else {}
        ids = variant.path_ids(world) if variant else world.ids
        raw = json.dumps({**body, "pad": pad})
        problems += check_refused(world, route, route, ids, [("10 MB body", raw)], {413})
    assert problems == [], "\n".join(problems)
    # streamed (no Content-Length): the limit holds while reading
    route = "POST /v1/datasets/{dataset_id}/invocations"
    method, target = url(route, world.ids)
    raw = json.dumps({**bases[route].body(world), "pad": pad})
    before = dump(world)
    chunks = (raw[i : i + 65536].encode() for i in range(0, len(raw), 65536))
    r = world.client.request(method, target, content=chunks, headers=JSON)
    assert r.status_code == 413
    assert r.json()["error"] == "PayloadTooLarge"
    assert dump(world) == before


def integer_query_parameters() -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for template, ops in DOCUMENT["paths"].items():
        for method, op in ops.items():
            for p in op.get("parameters", []):
                if p["in"] == "query" and is_numeric(p.get("schema", {})):
                    out.append((f"{method.upper()} {template}", p["name"], number_of(p["schema"])))
    return out


def number_of(schema: dict[str, Any]) -> dict[str, Any]:
    """The numeric branch of an optional parameter's schema (``anyOf`` with ``null``), whose
    bounds are the parameter's; the schema itself otherwise."""
    schema = resolve(schema)
    numeric = [
        resolve(s)
        for s in schema.get("anyOf", [])
        if resolve(s).get("type") in {"number", "integer"}
    ]
    return numeric[0] if len(numeric) == 1 else schema


def required_beside(route: str, name: str) -> dict[str, str]:
    """The route's other required query parameters, each at its smallest value: a parameter
    is tried with them, so that what is judged is its own value, not one missing beside it."""
    method, template = route.split(" ", 1)
    op = DOCUMENT["paths"][template][method.lower()]
    return {
        p["name"]: str(number_of(p["schema"]).get("minimum", 0))
        for p in op.get("parameters", [])
        if p["in"] == "query" and p.get("required") and p["name"] != name
    }


QUERY_VALUES = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e309",
    "5e-324",
    "1e300",
    "-1",
    "true",
    "null",
    "abc",
    "",
    "0x10",
    "1.5",
    "0",
    "-0.0",
    "-0",
    "1_0",
    " 5",
    "\u0665",  # Arabic-Indic 5
    "9" * 400,
]


#: routes that sign what they answer: without a checkpoint key, 409 CheckpointsDisabled
SIGNING_ROUTES = frozenset({"GET /v1/ledger-heads"})


@pytest.mark.parametrize(
    ("route", "name", "schema"),
    integer_query_parameters(),
    ids=[f"{r} {n}" for r, n, _ in integer_query_parameters()],
)
def test_hostile_numeric_query_parameters(
    world: World, route: str, name: str, schema: dict[str, Any]
) -> None:
    """Accepted iff the value is an integer within the documented bounds; never an effect."""
    method, target = url(route, world.ids)
    before = dump(world)
    problems = []
    for value in QUERY_VALUES:
        params = {**required_beside(route, name), name: value}
        r = world.client.request(method, target, params=params, headers=AUTH)
        # the grammar of an integer in a query (docs/http-api.md, *Numbers*): ASCII digits,
        # a "-" only on a nonzero number; Python's int() also reads "-0", "1_0" and " 5"
        number = int(value) if re.fullmatch(r"\+?[0-9]+|-0*[1-9][0-9]*", value) else None
        valid = number is not None and schema.get("minimum", -(10**30)) <= number <= schema.get(
            "maximum", 10**30
        )
        # a route that signs answers 409 CheckpointsDisabled once its query is valid, since
        # the table's server has no checkpoint key: past validation, as a 200 is
        accepted = {200, 409} if route in SIGNING_ROUTES else {200}
        if value == "-0.0":  # an integral float spelling: either reading is fine, never a 5xx
            ok = r.status_code in accepted | {422}
        else:
            ok = r.status_code in (accepted if valid else {422})
        if r.status_code == 409 and r.json().get("error") != "CheckpointsDisabled":
            ok = False  # the one conflict a signing route may answer a valid query with
        if not ok:
            problems.append(f"{name}={value!r}: {r.status_code} {r.text[:120]}")
    assert dump(world) == before
    assert problems == []


def test_the_table_catches_a_validator_that_lets_nan_through(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken build: the amount validator reads NaN as 0 (finite check and parser lenient).
    The table must report the NaN rows as accepted with an effect."""
    if world.ids["backend"] != "sqlite":
        pytest.skip("the proof that the table can fail needs one backend only")
    strict = exact.parse_amount  # what the schema's amount reader calls (exact.read_amount)

    def lenient(value: object, name: str = "value") -> Decimal:
        if isinstance(value, float) and math.isnan(value):
            return Decimal(0)
        return strict(value, name)

    class NoFiniteCheck:
        @staticmethod
        def isfinite(_: float) -> bool:
            return True

    monkeypatch.setattr(exact, "parse_amount", lenient)
    monkeypatch.setattr(common, "math", NoFiniteCheck)
    variant = next(v for v in VARIANTS if v.route.endswith("/invocations") and v.name == "pure_dp")
    problems = run_variant(world, variant)
    assert any("mechanism.epsilon=NaN: expected [400, 422], got 201" in p for p in problems)
    assert any("refused requests changed the database" in p for p in problems)
