"""The operator commands never guess: ``create-key`` names an organisation by id or exact name
(an unknown one is an error unless asked to create it), keeps a principal's role, and
``bootstrap-admin`` refuses to mint a second admin unless forced."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app import cli
from app.settings import get_settings
from tests.support import AUTH, Backend, new_organisation


@pytest.fixture
def operator(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[object]:
    monkeypatch.setenv("DATABASE_URL", backend.url)
    get_settings.cache_clear()
    yield capsys
    get_settings.cache_clear()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out.strip(), err


def _organisations(client: TestClient) -> dict[str, str]:
    r = client.get("/v1/organisations", headers=AUTH)
    return {o["name"]: o["id"] for o in r.json()["organisations"]}


def _me(client: TestClient, token: str) -> tuple[int, set[str]]:
    r = client.get("/v1/principals", headers={"Authorization": f"Bearer {token}"})
    return r.status_code, {p["organisation_id"] for p in r.json().get("principals", [])}


def test_create_key_finds_the_organisation_by_name_or_id_and_never_invents_one(
    client: TestClient, operator: pytest.CaptureFixture[str]
) -> None:
    acme = new_organisation(client, "acme-ops")
    before = _organisations(client)
    code, token, _ = _run(
        operator,
        "create-key",
        "--principal",
        "alice-ops",
        "--role",
        "curator",
        "--organisation",
        "acme-ops",
    )
    assert code == 0 and token.startswith("odo_key_")
    assert _me(client, token) == (200, {acme})  # by name: the existing organisation
    code, token, _ = _run(
        operator,
        "create-key",
        "--principal",
        "bob-ops",
        "--role",
        "curator",
        "--organisation",
        acme,
    )
    assert code == 0 and _me(client, token) == (200, {acme})  # by id
    code, out, err = _run(
        operator,
        "create-key",
        "--principal",
        "eve-ops",
        "--role",
        "analyst",
        "--organisation",
        "acme-opz",
    )
    assert (code, out) == (1, "")
    assert err == (
        "odometer create-key: no organisation 'acme-opz' (by id or name); create it with "
        "--create-organisation or POST /v1/organisations\n"
    )
    assert _organisations(client) == before  # the typo created nothing
    code, token, _ = _run(
        operator,
        "create-key",
        "--principal",
        "dan-ops",
        "--role",
        "curator",
        "--organisation",
        "new-co",
        "--create-organisation",
    )
    created = _organisations(client)
    assert code == 0 and set(created) - set(before) == {"new-co"}
    assert _me(client, token) == (200, {created["new-co"]})


def test_create_key_keeps_a_principals_role_and_organisation(
    client: TestClient, operator: pytest.CaptureFixture[str]
) -> None:
    new_organisation(client, "roles-ops")
    code, _, _ = _run(
        operator,
        "create-key",
        "--principal",
        "ann-ops",
        "--role",
        "analyst",
        "--organisation",
        "roles-ops",
    )
    assert code == 0
    code, out, err = _run(operator, "create-key", "--principal", "ann-ops", "--role", "admin")
    assert (code, out) == (1, "")
    assert err == (
        "odometer create-key: principal 'ann-ops' is a analyst; a admin key is refused "
        "(a principal's role never changes: create another principal)\n"
    )
    code, out, err = _run(
        operator,
        "create-key",
        "--principal",
        "ann-ops",
        "--role",
        "analyst",
        "--organisation",
        "default",
    )
    assert code == 1 and "belongs to organisation" in err and err.count("\n") == 1
    code, token, _ = _run(operator, "create-key", "--principal", "ann-ops", "--role", "analyst")
    assert code == 0 and token.startswith("odo_key_")  # a second key, same role


def test_bootstrap_admin_refuses_a_second_admin_unless_forced(
    client: TestClient, operator: pytest.CaptureFixture[str]
) -> None:
    # other tests share the database: make sure one admin principal exists, whoever made it
    code, first, _ = _run(operator, "bootstrap-admin", "--name", "root", "--force")
    assert code == 0 and first.startswith("odo_key_")
    code, out, err = _run(operator, "bootstrap-admin", "--name", "root again")
    assert (code, out) == (1, "")
    assert err.startswith("odometer bootstrap-admin: an admin principal exists already (prn_")
    assert err.endswith("); use --force to create another\n")
    code, second, _ = _run(operator, "bootstrap-admin", "--name", "second", "--force")
    assert code == 0 and second.startswith("odo_key_") and second != first
