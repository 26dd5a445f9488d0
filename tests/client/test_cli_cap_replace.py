"""``odometer orgs cap … --replace`` and ``set_organisation_cap(replace=True)`` against a real
server: a counted ``zcdp`` cap refuses another mode without it, is replaced with it, and the
command prints the organisation's statement (the closed cap's reading plus the new cap's),
saying that its δ now exceeds the first cap's."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx
import pytest

from app.cli import main
from odometer_client import OdometerClient
from tests.client.live import ADMIN_KEY, Server

GAUSSIAN = {"type": "gaussian", "sigma": "10", "sensitivity": "1"}
DPSGD = {"type": "dp_sgd", "noise_multiplier": "1", "sample_rate": "0.01", "steps": 100}


def _run(server: Server, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--url", server.base_url, "--key", ADMIN_KEY])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_orgs_cap_replace(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    org = client.create_organisation("cli-replace-org").id
    cap = ["orgs", "cap", "cli-replace-org", "--epsilon", "10", "--delta", "1e-5"]
    assert _run(server, capsys, *cap, "--mode", "zcdp")[0] == 0
    body = {
        "name": "cli-replace-ds",
        "budget": {"epsilon": "1000", "delta": "0.001"},
        "accounting": {"mode": "rdp"},
        "organisation_id": org,
    }
    r = httpx.post(
        f"{server.base_url}/v1/datasets",
        json=body,
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    )
    assert r.status_code == 201, r.text
    ds = r.json()["id"]
    for _ in range(2):
        assert client.register(ds, GAUSSIAN).status == "accepted"
    first = next(o for o in client.organisations() if o.id == org).status["odometer"]

    code, _, err = _run(server, capsys, *cap, "--mode", "rdp")
    assert code == 1 and "ModeFixed" in err and "replace" in err
    code, _, err = _run(server, capsys, "orgs", "cap", org, "--remove", "--replace")
    assert code != 0 and "--replace names the new cap" in err

    code, out, err = _run(server, capsys, *cap, "--mode", "rdp", "--replace")
    assert code == 0, err
    view = next(o for o in client.organisations() if o.id == org)
    statement = view.statement
    assert view.cap is not None and statement is not None
    assert view.cap["mode"] == "rdp"
    assert view.closed == [
        {"mode": "zcdp", "epsilon": first["epsilon"], "delta": first["delta"], "after_seq": 2}
    ]
    assert (statement["epsilon"], statement["delta"]) == (first["epsilon"], first["delta"])
    line = next(line for line in out.splitlines() if line.startswith("statement "))
    assert f"δ={statement['delta']}" in line and "counted nothing yet" in line

    # the Python client: DP-SGD is admitted under the new cap, and the statement adds it
    assert client.register(ds, DPSGD).status == "accepted"
    view = next(o for o in client.organisations() if o.id == org)
    second = view.status["odometer"]
    assert view.statement is not None
    assert Decimal(view.statement["delta"]) == Decimal(first["delta"]) + Decimal(second["delta"])
    assert "now exceeds the first cap's" in view.statement["note"]
    # a second replacement after it counted closes the rdp phase too
    again = client.set_organisation_cap(org, "10", "1e-5", {"mode": "rdp"}, replace=True)
    assert [p["mode"] for p in again.closed] == ["zcdp", "rdp"]
    assert again.statement is not None
    assert again.statement["phases"] == 2  # the rdp cap in force counted nothing yet
    code, out, _ = _run(server, capsys, "orgs", "report", org)
    assert code == 0 and "replay" in out and "verified" in out, out
    line = next(line for line in out.splitlines() if line.startswith("statement"))
    # the ledgers record the second replacement at the next entry at the cap: until then the
    # replay sums the zcdp phase and the rdp cap's reading, the same amounts
    assert f"δ={again.statement['delta']}" in line and "the sum of 2 cap phases" in line
    code, out, _ = _run(server, capsys, "orgs", "list", "--json")
    assert code == 0
    listed = next(o for o in json.loads(out) if o["id"] == org)
    assert {k: str(v) for k, v in listed["statement"].items()} == {
        k: str(v) for k, v in again.statement.items()
    }
