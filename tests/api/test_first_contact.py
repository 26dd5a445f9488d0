"""What a newcomer meets first (issue 38): the first URL ``make run`` prints, a body sent without
saying it is JSON, the ledger filtered by an analyst's name, the API's version, and a guessable
admin key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.settings import Settings
from tests.support import AUTH, ROOT, basic_dataset, grant, new_organisation, new_principal


def test_the_root_leads_to_the_dashboard(client: TestClient) -> None:
    r = client.get("/", follow_redirects=False)
    assert r.status_code == 307
    assert r.headers["location"] == "/dashboard"
    assert client.get("/").text.startswith("<!doctype html>")


def test_a_body_not_sent_as_json_is_415_with_what_to_send(client: TestClient) -> None:
    ds = basic_dataset(client)["id"]
    body = json.dumps({"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}).encode()
    for headers, sent_as in (({}, ""), ({"Content-Type": "text/plain"}, " (it was sent as")):
        r = client.post(f"/v1/datasets/{ds}/invocations", content=body, headers={**AUTH, **headers})
        assert r.status_code == 415, r.text
        assert r.json()["error"] == "UnsupportedMediaType"
        assert r.json()["detail"].startswith(
            "send the body as JSON, with the header Content-Type: application/json" + sent_as
        )
    assert client.get(f"/v1/datasets/{ds}/ledger", headers=AUTH).json()["entries"][-1]["seq"] == 1
    ok = client.post(
        f"/v1/datasets/{ds}/invocations",
        content=body,
        headers={**AUTH, "Content-Type": "application/json; charset=utf-8"},
    )
    assert ok.status_code == 201


def test_the_ledger_takes_an_analyst_by_name(client: TestClient) -> None:
    org = new_organisation(client)
    ann, headers = new_principal(client, org, "analyst", name="ann-ledger")
    r = client.post(
        "/v1/datasets",
        json={"name": "by-name", "budget": {"epsilon": 1, "delta": 0}, "organisation_id": org},
        headers=AUTH,
    )
    ds = r.json()["id"]
    grant(client, ds, ann)
    mechanism = {"mechanism": {"type": "pure_dp", "epsilon": "0.1"}}
    assert client.post(f"/v1/datasets/{ds}/invocations", json=mechanism, headers=headers).is_success
    url = f"/v1/datasets/{ds}/ledger"
    by_id = client.get(url, params={"actor": ann}, headers=AUTH).json()["entries"]
    by_name = client.get(url, params={"actor": "ann-ledger"}, headers=AUTH).json()["entries"]
    assert [e["seq"] for e in by_name] == [e["seq"] for e in by_id] == [3]
    twin = new_principal(client, org, "analyst", name="ann-ledger")[0]
    both = client.get(url, params={"actor": "ann-ledger"}, headers=AUTH)
    assert both.status_code == 422
    assert ann in both.json()["detail"] and twin in both.json()["detail"]


def test_the_api_states_the_distribution_version(client: TestClient) -> None:
    assert client.get("/openapi.json").json()["info"]["version"] == version("privacy-odometer")


def test_a_guessable_admin_key_is_refused_in_one_line() -> None:
    env = {**os.environ, "ODOMETER_ADMIN_KEY": "change-me", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "app.serve", "--port", "9"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "python -m app.serve: ODOMETER_ADMIN_KEY has 9 characters; an admin key needs at least "
        "16: unset it and `make run` makes one, or use the output of `python3 -c 'import "
        "secrets; print(secrets.token_urlsafe(32))'`"
    ]
    with pytest.raises(ValidationError):
        Settings(admin_key="change-me")
    assert Settings(admin_key="  ").admin_key is None  # blank: no admin key, as before
