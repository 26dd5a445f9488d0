"""The command line says what the service means: principals by name in ``odometer grant`` and
``keys issue``, the API's warnings shown, a preview's refusal said as a refusal, and the
``> 0`` rules of amounts said before anything is sent. Against a real server.

Shown to fail on the code before the change (2026-11-29):
``test_grant_and_keys_take_a_principal_by_name`` with ``assert 1 == 0`` (the name went to the
server as an id: 404 NotFound); ``test_datasets_create_shows_the_warning`` with the warning
absent from stderr; ``test_a_refused_preview_says_it_is_refused`` with
``'would be rejected (…): charge ε=0 δ=0'`` printed; ``test_amounts_must_be_positive`` with
"matches none of the allowed forms" instead of "must be > 0".
"""

from __future__ import annotations

import json

import httpx
import pytest

from app.cli import main
from odometer_client import OdometerClient
from odometer_client import declarations as d
from tests.client.live import ADMIN_KEY, Server

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def _cli(server: Server, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--url", server.base_url, "--key", ADMIN_KEY])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _principal(server: Server, name: str, organisation: str) -> str:
    r = httpx.post(
        f"{server.base_url}/v1/principals",
        json={"name": name, "role": "analyst", "organisation_id": organisation},
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    principal: str = r.json()["id"]
    return principal


def test_grant_and_keys_take_a_principal_by_name(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    org = client.create_organisation("words-org").id
    other = client.create_organisation("words-other").id
    ds = client.create_dataset("words-grant", "1", "0")
    moved = httpx.post(
        f"{server.base_url}/v1/datasets",
        json={
            "name": "words-in-org",
            "budget": {"epsilon": "1", "delta": "0"},
            "organisation_id": org,
        },
        headers=ADMIN,
    )
    assert moved.status_code == 201, moved.text
    in_org = moved.json()["id"]
    bea = _principal(server, "words-bea", org)
    _principal(server, "words-bea", other)  # the same name in another organisation

    code, out, err = _cli(
        server, capsys, "grant", in_org, "words-bea", "--quota-epsilon", "0.5", "--quota-delta", "0"
    )
    assert (code, err) == (0, "")
    assert out == f"granted words-bea ({bea}) on {in_org} with quota epsilon=0.5, delta=0\n"
    assert [g.principal_id for g in client.grants(in_org)] == [bea]

    # the name is ambiguous where the dataset's organisation does not tell them apart
    code, out, err = _cli(server, capsys, "keys", "issue", "words-bea")
    assert code == 1 and out == ""
    assert err.startswith("error: 2 principals are named 'words-bea': give one of their ids: ")
    assert bea in err

    carol = _principal(server, "words-carol", org)
    code, out, err = _cli(server, capsys, "keys", "issue", "words-carol")
    assert code == 0 and out.startswith("odo_")
    assert err.startswith("key key_") and f" for {carol} " in err

    code, out, err = _cli(server, capsys, "grant", ds.id, "nobody-by-that-name")
    assert (code, out) == (1, "")
    assert err == (
        "error: no principal 'nobody-by-that-name' (by id or name) is visible to this key: "
        "`odometer principals list` shows them\n"
    )
    code, out, err = _cli(server, capsys, "grants", "revoke", in_org, "words-bea")
    assert (code, err) == (0, "")
    assert out == f"revoked words-bea ({bea})'s grant on {in_org}\n"


def test_datasets_create_shows_the_warning(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    first = client.create_dataset("words-twice", "1", "0")
    code, out, err = _cli(
        server, capsys, "datasets", "create", "words-twice", "--epsilon", "1", "--delta", "0", "-q"
    )
    assert code == 0
    second = out.strip()
    assert second.startswith("ds_") and second != first.id
    assert err == (
        "warning: this organisation already has 1 other dataset(s) named 'words-twice' "
        f"({first.id}): address them by id, the name no longer tells them apart\n"
    )


def test_a_refused_preview_says_it_is_refused(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = client.create_dataset("words-preview", "1", "0")
    client.register(ds, d.pure_dp("0.7"))
    mechanism = json.dumps({"type": "pure_dp", "epsilon": "0.5"})
    code, out, err = _cli(server, capsys, "preview", ds.id, "--mechanism", mechanism)
    assert (code, err) == (0, "")
    assert "charge ε" not in out  # a refusal is no charge of zero
    assert out.splitlines()[:3] == [
        "would be refused by the dataset's budget: epsilon budget exceeded; registering it "
        "would charge nothing and run nothing",
        "it asks ε=0.5 δ=0; left at the dataset's budget: ε=0.3 δ=0",
        "fit: 0 more in a row (the dataset admits the fewest) (next refused: epsilon budget "
        "exceeded)",
    ]
    # what is left fits: the same preview at ε = 0.3 is admitted, with its charge
    fits = json.dumps({"type": "pure_dp", "epsilon": "0.3"})
    code, out, _ = _cli(server, capsys, "preview", ds.id, "--mechanism", fits)
    assert code == 0
    assert out.splitlines()[0] == "would be accepted: charge ε=0.3 δ=0"


def test_amounts_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    """``-1`` and ``0`` as a budget say the rule they break, before anything is sent."""
    for value in ("-1", "0"):
        nowhere = ("--url", "http://127.0.0.1:9", "--key", "k")
        code = main(["datasets", "create", "x", f"--epsilon={value}", "--delta", "0", *nowhere])
        err = capsys.readouterr().err
        assert code == 1
        assert err == (
            "error: 422 ValidationError: refused before sending: $.budget.epsilon: must be > 0, "
            f'got "{value}"\n'
        )


def test_grants_list_shows_the_quota_reading(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    # The "quota spent" column read a key no stored quota state has ("spent"), so it printed
    # "-" for every quota, spent or not (failed before the change: ``'-' in row``).
    ds = client.create_dataset("words-quota-list", "1", "0")
    analyst = _principal(server, "words-quota-analyst", "default")
    client.grant(ds, analyst, quota={"epsilon": "0.5", "delta": "0"})
    key = httpx.post(f"{server.base_url}/v1/principals/{analyst}/keys", headers=ADMIN).json()["key"]
    with OdometerClient(server.base_url, api_key=key) as analyst_client:
        analyst_client.register(ds, d.pure_dp("0.125"))
    code, out, err = _cli(server, capsys, "grants", "list", ds.id)
    assert (code, err) == (0, "")
    header, _rule, row = [line for line in out.splitlines() if line.strip()][:3]
    assert "quota reading" in header
    assert "epsilon=0.5, delta=0  epsilon=0.125, delta=0" in row
