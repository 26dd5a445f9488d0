"""What the command line shows of an organisation whose cap was replaced, and of a ``person``
dataset, against a real server:

- ``odometer orgs list`` (and ``orgs cap … --replace``) prints, under the table whose certified
  ε is the cap in force's alone, the organisation's statement (the closed phases' readings plus
  the cap in force's once it counted), the server's note (its δ now exceeds the first cap's),
  and one line per closed phase;
- ``odometer datasets show`` on a dataset partitioned by person prints what a declaration must
  state (``status.blocks.requires``), and labels the reading as the highest over every block
  ever opened, retired ones included.

Shown failing before the change: ``orgs list`` printed no statement (``StopIteration`` looking
for its line) and ``datasets show`` no ``requires`` row."""

from __future__ import annotations

from decimal import Decimal

import httpx
import pytest

from app.cli import main
from odometer_client import OdometerClient
from tests.client.live import ADMIN_KEY, Server

GAUSSIAN = {"type": "gaussian", "sigma": "10", "sensitivity": "1"}
DPSGD = {"type": "dp_sgd", "noise_multiplier": "1", "sample_rate": "0.01", "steps": 100}
AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}


def _run(server: Server, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--url", server.base_url, "--key", ADMIN_KEY])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _dataset(server: Server, body: dict[str, object]) -> str:
    r = httpx.post(f"{server.base_url}/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def test_orgs_list_prints_the_statement_and_the_closed_phases(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    org = client.create_organisation("cli-statement-org").id
    client.set_organisation_cap(org, "10", "1e-5", {"mode": "zcdp"})
    budget = {"epsilon": "1000", "delta": "0.001"}
    ds = _dataset(
        server,
        {
            "name": "cli-statement-ds",
            "budget": budget,
            "accounting": {"mode": "rdp"},
            "organisation_id": org,
        },
    )
    for _ in range(2):
        assert client.register(ds, GAUSSIAN).status == "accepted"
    code, out, err = _run(
        server,
        capsys,
        "orgs",
        "cap",
        org,
        "--epsilon",
        "5",
        "--delta",
        "1e-5",
        "--mode",
        "rdp",
        "--replace",
        "--exact",
    )
    assert code == 0, err
    view = next(o for o in client.organisations() if o.id == org)
    (closed,) = view.closed
    statement = view.statement
    assert statement is not None
    assert statement["phases"] == 1  # the rdp cap in force counted nothing yet
    assert out.splitlines()[-2:] == [
        f"statement ε={statement['epsilon']} δ={statement['delta']} of 'cli-statement-org' "
        f"(1 phase): {statement['note']}",
        f"  closed zcdp cap: ε={closed['epsilon']} δ={closed['delta']} (until cap decision 2)",
    ]
    assert client.register(ds, DPSGD).status == "accepted"
    view = next(o for o in client.organisations() if o.id == org)
    statement, reading = view.statement, view.status["odometer"]
    assert statement is not None
    assert Decimal(statement["epsilon"]) == Decimal(closed["epsilon"]) + Decimal(reading["epsilon"])
    assert Decimal(statement["delta"]) == Decimal(closed["delta"]) + Decimal(reading["delta"])
    code, out, err = _run(server, capsys, "orgs", "list", "--exact")
    assert code == 0, err
    line = next(line for line in out.splitlines() if "'cli-statement-org'" in line)
    assert line == (
        f"statement ε={statement['epsilon']} δ={statement['delta']} of 'cli-statement-org' "
        f"(2 phases): {statement['note']}"
    )
    assert f"its δ ({statement['delta']}) now exceeds the first cap's" in line
    # rounded up without --exact, as every reading the command line prints
    code, out, _ = _run(server, capsys, "orgs", "list")
    line = next(line for line in out.splitlines() if "'cli-statement-org'" in line)
    assert line.startswith("statement ε=") and "(2 phases)" in line


def test_datasets_show_prints_what_a_person_dataset_requires(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    persons = {"kind": "bucket", "unit": "person", "buckets": 8}
    ds = _dataset(
        server,
        {"name": "cli-persons", "budget": {"epsilon": "1", "delta": "0"}, "partition": persons},
    )
    base = f"{server.base_url}/v1/datasets/{ds}"
    r = httpx.post(f"{base}/blocks", json={"open": {"from": 0, "to": 3}}, headers=AUTH)
    assert r.status_code == 200, r.text
    body = {
        "mechanism": {"type": "pure_dp", "epsilon": "0.25"},
        "blocks": {"from": 1, "to": 2},
        "contribution": "person",
    }
    r = httpx.post(f"{base}/invocations", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    requires = httpx.get(base, headers=AUTH).json()["status"]["blocks"]["requires"]
    assert requires.startswith('declarations marked "contribution": "person"')
    code, out, err = _run(server, capsys, "datasets", "show", ds)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert f"requires                {requires}" in lines
    assert (
        "guarantee so far        epsilon=0.25, delta=0 (the highest over every block ever "
        "opened, retired ones included)"
    ) in lines
    # a record dataset requires nothing: no such row
    records = {"kind": "bucket", "unit": "record", "buckets": 8}
    plain = _dataset(
        server,
        {"name": "cli-records", "budget": {"epsilon": "1", "delta": "0"}, "partition": records},
    )
    code, out, _ = _run(server, capsys, "datasets", "show", plain)
    assert code == 0 and not any(line.startswith("requires") for line in out.splitlines())
