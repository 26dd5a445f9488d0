"""Input grammar and HTTP hygiene: what the server reads is exactly what docs/http-api.md says.

- Decimal text has one grammar (*Numbers*): ASCII digits with an optional fraction and
  exponent, no sign but ``+``, nothing around it. Python's ``Decimal`` reads more, and the
  server read it: ``"1_0"`` as 10, full-width and Arabic-Indic digits, ``" 1"``, ``"-0"``.
- A JSON number is read from its literal: ``1e-400`` was decoded to the float 0 and charged
  as 0 where the text ``"1e-400"`` is a 422; ``0.10000000000000000001`` was rounded to 0.1.
- A value outside a budget's domain says what it must be (``-1`` as a budget's ε: "must be
  > 0", where the server said "epsilon must be ≥ 0").
- A reversed block range (``from=5&to=2``) on the report is a 422, not a 200.
- A 405 lists every method of the path in ``Allow`` (Starlette listed the first route's).

Each refusal is checked for its exact status and message, and for changing nothing (the
ledger, the status, the listing). Shown failing on the code before these changes: every row
of the grammar and underflow tables answered 201/200 (or, for budgets, "epsilon must be ≥ 0"),
the report's reversed range 200, ``Allow: POST`` on ``DELETE /v1/datasets``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support import AUTH, ledger, new_organisation, new_principal, status

JSON = {**AUTH, "content-type": "application/json"}

#: The form the answer names for text outside the grammar.
FORM = (
    "must be decimal text: ASCII digits with an optional fraction and exponent (such as 1, 0.5 "
    "or 1e-6), no sign but +, no spaces"
)
OUT_OF_RANGE = "Value error, is out of range (|exponent| > 300)"
EPSILON_DOMAIN = "(a budget's ε: 0 < ε ≤ 10⁶)"
DELTA_DOMAIN = "(a δ: 0 ≤ δ < 1)"

#: (raw JSON of the value, the message after the field's location). Text outside the grammar.
OUTSIDE_THE_GRAMMAR: list[tuple[str, str]] = [
    ('"1_0"', f"Value error, {FORM}, got '1_0'"),
    ('"\\uff11"', f"Value error, {FORM}, got '１'"),  # full-width 1
    ('"\\u0661"', f"Value error, {FORM}, got '١'"),  # Arabic-Indic 1
    ('"\\u0967"', f"Value error, {FORM}, got '१'"),  # Devanagari 1
    ('" 1"', f"Value error, {FORM}, got ' 1'"),
    ('"1 "', f"Value error, {FORM}, got '1 '"),
    ('"\\t0.1"', f"Value error, {FORM}, got '\\t0.1'"),
    ('"0.1\\n"', f"Value error, {FORM}, got '0.1\\n'"),
    ('"-0"', f"Value error, {FORM}, got '-0'"),
    ('"-0.0e5"', f"Value error, {FORM}, got '-0.0e5'"),
    ('"0x10"', f"Value error, {FORM}, got '0x10'"),
    ('"NaN"', f"Value error, {FORM}, got 'NaN'"),
    ('"Infinity"', f"Value error, {FORM}, got 'Infinity'"),
    ('"1e"', f"Value error, {FORM}, got '1e'"),
    ('"."', f"Value error, {FORM}, got '.'"),
    ('"++1"', f"Value error, {FORM}, got '++1'"),
    ('"1,5"', f"Value error, {FORM}, got '1,5'"),
]

#: JSON numbers whose float is 0 (or ∞) but whose literal is not: refused like their text.
UNDERFLOWING: list[tuple[str, str]] = [
    ("1e-400", OUT_OF_RANGE),
    ("2.5e-999", OUT_OF_RANGE),
    ("0.1e-330", OUT_OF_RANGE),
    ('"1e-400"', OUT_OF_RANGE),
]


def _with(template: str, raw: str, principal: str = "") -> str:
    """A body's JSON text with the raw value (``$V``) and a principal's id (``$P``) in it."""
    return template.replace("$V", raw).replace("$P", principal)


def _dataset(client: TestClient, **extra: Any) -> str:
    body = {"name": "grammar", "budget": {"epsilon": "1", "delta": "0.000001"}, **extra}
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _refused(r: Any, loc: str, message: str) -> None:
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "ValidationError", r.text
    assert r.json()["detail"] == f"{loc}: {message}", r.text


def _snapshot(client: TestClient, ds: str) -> tuple[Any, ...]:
    return ledger(client, ds), status(client, ds)


@pytest.mark.parametrize(("raw", "message"), OUTSIDE_THE_GRAMMAR + UNDERFLOWING)
def test_a_declaration_outside_the_grammar_is_refused_and_changes_nothing(
    client: TestClient, raw: str, message: str
) -> None:
    ds = _dataset(client)
    before = _snapshot(client, ds)
    for route in ("invocations", "invocations/preview"):
        r = client.post(
            f"/v1/datasets/{ds}/{route}",
            content=_with('{"mechanism": {"type": "pure_dp", "epsilon": $V}}', raw),
            headers=JSON,
        )
        _refused(r, "body.mechanism.pure_dp.epsilon", message)
    assert _snapshot(client, ds) == before  # no ledger entry, no charge


@pytest.mark.parametrize(("raw", "message"), OUTSIDE_THE_GRAMMAR + UNDERFLOWING)
def test_a_budget_outside_the_grammar_is_refused_everywhere(
    client: TestClient, raw: str, message: str
) -> None:
    """A dataset's budget, a budget change, an organisation's cap and an analyst's quota."""
    org = new_organisation(client)
    analyst, _ = new_principal(client, org, "analyst")
    ds = _dataset(client, organisation_id=org)
    before = _snapshot(client, ds)
    listing = client.get("/v1/datasets", headers=AUTH).json()
    organisation = client.get("/v1/organisations", headers=AUTH).json()

    r = client.post(
        "/v1/datasets",
        content=_with('{"name": "x", "budget": {"epsilon": $V, "delta": "0"}}', raw),
        headers=JSON,
    )
    _refused(r, "body.budget.epsilon", message)
    r = client.patch(
        f"/v1/datasets/{ds}/budget",
        content=_with('{"epsilon": "2", "delta": $V}', raw),
        headers=JSON,
    )
    _refused(r, "body.delta", message)
    r = client.patch(
        f"/v1/organisations/{org}/cap",
        content=_with('{"epsilon": $V, "delta": "0"}', raw),
        headers=JSON,
    )
    _refused(r, "body.epsilon", message)
    r = client.post(
        f"/v1/datasets/{ds}/grants",
        content=_with(
            '{"principal_id": "$P", "quota": {"epsilon": $V, "delta": "0"}}', raw, analyst
        ),
        headers=JSON,
    )
    _refused(r, "body.quota.epsilon", message)

    assert _snapshot(client, ds) == before
    assert client.get("/v1/datasets", headers=AUTH).json() == listing
    assert client.get("/v1/organisations", headers=AUTH).json() == organisation
    assert client.get(f"/v1/datasets/{ds}/grants", headers=AUTH).json()["grants"] == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("1e-400", "Value error, must be an integer, got 1e-400"),
        ("2.5", "Value error, must be an integer, got 2.5"),
        ("1.0000000000000000001", "Value error, must be an integer, got 1.0000000000000000001"),
        (
            '"1_0"',
            "Value error, must be an integer: a JSON number, or ASCII digits with no sign but "
            "+, got '1_0'",
        ),
        (
            '" 2"',
            "Value error, must be an integer: a JSON number, or ASCII digits with no sign but "
            "+, got ' 2'",
        ),
        (
            '"\\uff12"',
            "Value error, must be an integer: a JSON number, or ASCII digits with no sign but "
            "+, got '２'",
        ),
    ],
)
def test_an_integer_is_read_from_its_literal(client: TestClient, raw: str, message: str) -> None:
    ds = _dataset(client)
    before = _snapshot(client, ds)
    body = '{"mechanism": {"type": "composed", "mechanism": {"type": "pure_dp", "epsilon": "0.1"}, '
    r = client.post(
        f"/v1/datasets/{ds}/invocations", content=_with(body + '"count": $V}}', raw), headers=JSON
    )
    _refused(r, "body.mechanism.composed.count", message)
    assert _snapshot(client, ds) == before


def test_numbers_in_the_grammar_are_read_exactly(client: TestClient) -> None:
    """What the grammar admits is read, and a JSON number is its literal, not its float."""
    ds = _dataset(client)
    url = f"/v1/datasets/{ds}/invocations"
    charged = []
    for raw in ('"+0.1"', '".1"', '"1e-1"', '"0.1E0"', "0.10000000000000000001", "3e0"):
        mechanism = _with('{"type": "pure_dp", "epsilon": $V}', raw)
        if raw == "3e0":  # an integer field: 3e0 is 3
            mechanism = '{"type": "composed", "mechanism": {"type": "pure_dp", "epsilon": "0.01"}, '
            mechanism += '"count": 3e0}'
        r = client.post(url, content=_with('{"mechanism": $V}', mechanism), headers=JSON)
        assert r.status_code == 201, (raw, r.text)
        charged.append(r.json()["charge"]["epsilon"])
    assert charged == ["0.1", "0.1", "0.1", "0.1", "0.10000000000000000001", "0.03"]
    assert status(client, ds)["odometer"]["epsilon"] == "0.53000000000000000001"
    # a route other than registration reads its body the same way
    r = client.post(
        "/v1/datasets",
        content='{"name": "exact", "budget": {"epsilon": 1.00000000000000000001, "delta": 0}}',
        headers=JSON,
    )
    assert r.status_code == 201, r.text
    assert r.json()["status"]["budget"]["epsilon"] == "1.00000000000000000001"


@pytest.mark.parametrize(
    ("field", "raw", "message"),
    [
        ("epsilon", "-1", f"must be > 0 {EPSILON_DOMAIN}, got -1"),
        ("epsilon", '"-1"', f"must be > 0 {EPSILON_DOMAIN}, got -1"),
        ("epsilon", "-0.5e-3", f"must be > 0 {EPSILON_DOMAIN}, got -0.0005"),
        ("epsilon", "0", f"must be > 0 {EPSILON_DOMAIN}, got 0"),
        ("epsilon", '"0.0"', f"must be > 0 {EPSILON_DOMAIN}, got 0"),
        ("epsilon", "1000001", f"must be at most 1000000 {EPSILON_DOMAIN}, got 1000001"),
        ("epsilon", '"1.0000001e6"', f"must be at most 1000000 {EPSILON_DOMAIN}, got 1000000.1"),
        ("delta", "-1", f"must be ≥ 0 {DELTA_DOMAIN}, got -1"),
        ("delta", '"-1e-9"', f"must be ≥ 0 {DELTA_DOMAIN}, got -0.000000001"),
        ("delta", "1", f"must be < 1 {DELTA_DOMAIN}, got 1"),
        ("delta", '"1.5"', f"must be < 1 {DELTA_DOMAIN}, got 1.5"),
    ],
)
def test_an_out_of_domain_budget_says_what_it_must_be(
    client: TestClient, field: str, raw: str, message: str
) -> None:
    """The same words for a JSON number and its text, on every budget: a dataset's, a
    budget change's, a cap's and a quota's."""
    org = new_organisation(client)
    analyst, _ = new_principal(client, org, "analyst")
    ds = _dataset(client, organisation_id=org)
    before = _snapshot(client, ds)
    budget = {"epsilon": '"1"', "delta": '"0"', field: raw}
    pair = f'"epsilon": {budget["epsilon"]}, "delta": {budget["delta"]}'
    for method, url, body, loc in [
        ("POST", "/v1/datasets", _with('{"name": "x", "budget": {$V}}', pair), "body.budget"),
        ("PATCH", f"/v1/datasets/{ds}/budget", _with("{$V}", pair), "body"),
        ("PATCH", f"/v1/organisations/{org}/cap", _with("{$V}", pair), "body"),
        (
            "POST",
            f"/v1/datasets/{ds}/grants",
            _with('{"principal_id": "$P", "quota": {$V}}', pair, analyst),
            "body.quota",
        ),
    ]:
        r = client.request(method, url, content=body, headers=JSON)
        _refused(r, f"{loc}.{field}", f"Value error, {message}")
    assert _snapshot(client, ds) == before
    assert client.get(f"/v1/datasets/{ds}/grants", headers=AUTH).json()["grants"] == []


def test_a_reversed_block_range_is_refused_on_the_report(client: TestClient) -> None:
    ds = _dataset(client, partition={"kind": "bucket", "unit": "record", "buckets": 8})
    r = client.post(f"/v1/datasets/{ds}/blocks", json={"open": {"from": 0, "to": 7}}, headers=AUTH)
    assert r.status_code == 200, r.text
    before = _snapshot(client, ds)
    for route in ("report", "blocks"):
        r = client.get(f"/v1/datasets/{ds}/{route}", params={"from": 5, "to": 2}, headers=AUTH)
        assert r.status_code == 422, (route, r.text)
        assert r.json() == {
            "error": "InvalidBlocks",
            "detail": "the range 5 … 2 is reversed ('from' after 'to')",
            "field": "to",
        }
    # one block is a range, not a reversed one
    r = client.get(f"/v1/datasets/{ds}/report", params={"from": 5, "to": 5}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert _snapshot(client, ds) == before
    # the ledger's time window: an empty or reversed one is refused as well
    r = client.get(
        f"/v1/datasets/{ds}/ledger",
        params={"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
        headers=AUTH,
    )
    assert (r.status_code, r.json()["detail"]) == (
        422,
        "query.until: until must be later than since",
    )


_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def _concrete(template: str) -> str:
    return re.sub(r"\{[^}]+\}", "zz_test", template)


def test_a_405_lists_every_method_of_the_path(client: TestClient) -> None:
    """On every path of the OpenAPI document, every method it does not list is a 405 whose
    ``Allow`` is exactly the methods the document lists for the paths the URL matches."""
    paths: dict[str, Any] = client.app.openapi()["paths"]  # type: ignore[attr-defined]
    patterns = {
        template: re.compile(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$")
        for template in paths
    }
    wrong: list[str] = []
    details: list[Any] = []
    expected: list[Any] = []
    for template in paths:
        url = _concrete(template)
        allowed = sorted(
            {
                method.upper()
                for other, pattern in patterns.items()
                if pattern.match(url)
                for method in paths[other]
            }
        )
        for method in _METHODS:
            if method in allowed:
                continue
            r = client.request(method, url, headers=AUTH)
            assert r.status_code == 405, (method, url, r.text)
            if r.headers["allow"] != ", ".join(allowed):
                wrong.append(f"{method} {url}: Allow {r.headers['allow']}, not {allowed}")
            details.append(r.json())
            expected.append(
                {
                    "error": "MethodNotAllowed",
                    "detail": f"{method} is not allowed here; allowed: {', '.join(allowed)}",
                }
            )
    assert wrong == []
    assert details == expected
    assert len(expected) > 100  # every path, several methods each


def test_every_route_reads_its_body_exactly() -> None:
    """Every API route decodes its body with the exact decoder (the register route with its
    own resolver, which calls the same one)."""
    from fastapi.routing import APIRoute, iter_route_contexts

    from app.api.jsonbody import ExactJsonRoute
    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(database_url="sqlite://", admin_key="k" * 32))
    routes = [
        context.original_route
        for context in iter_route_contexts(app.router.routes)
        if isinstance(context.original_route, APIRoute)
    ]
    with_body = [r for r in routes if r.body_field is not None]
    assert len(with_body) >= 14  # registration, preview, settle, budgets, caps, grants, …
    for route in routes:
        if route.path.startswith("/v1/") or route.body_field is not None:
            assert isinstance(route, ExactJsonRoute), route.path


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/v1/datasets", "limit"),
        ("/v1/datasets", "offset"),
        ("/v1/datasets/{ds}/ledger", "after_seq"),
        ("/v1/datasets/{ds}/ledger", "limit"),
        ("/v1/datasets/{ds}/checkpoints", "after_seq"),
        ("/v1/datasets/{ds}/blocks", "limit"),
    ],
)
def test_an_integer_query_parameter_is_ascii_digits(
    client: TestClient, path: str, name: str
) -> None:
    """pydantic alone read ``1_0`` as 10, `` 5`` as 5 and ``-0`` as 0 in a query."""
    ds = _dataset(client, partition={"kind": "bucket", "unit": "record", "buckets": 8})
    url = path.replace("{ds}", ds)
    for value in ("1_0", " 5", "5 ", "-0", "\u0665", "5.0", "0x5"):
        r = client.get(url, params={name: value}, headers=AUTH)
        assert r.status_code == 422, (name, value, r.text)
        assert r.json()["detail"] == (
            f"query.{name}: Value error, must be an integer in ASCII digits (no sign but +, "
            f"no spaces), got {value!r}"
        )
    r = client.get(url, params={name: "-5"}, headers=AUTH)  # a negative one: its bound says so
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith(f"query.{name}: Input should be greater than or equal")
    r = client.get(url, params={name: "+5"}, headers=AUTH)
    assert r.status_code == 200, r.text  # +5 is 5
