"""The curator/auditor command line against a real server (``odometer`` entry point)."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from app.cli import main
from odometer_client import NotFound, OdometerClient
from odometer_client import declarations as d
from tests.client.figures import up8
from tests.client.live import ADMIN_KEY, Server
from tests.support import ROOT


def _run(server: Server, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--url", server.base_url, "--key", ADMIN_KEY])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_datasets_create_list_show_and_budget(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        server,
        capsys,
        "datasets",
        "create",
        "cli-demo",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--json",
    )
    assert code == 0
    ds = json.loads(out)
    assert ds["status"]["budget"] == {"epsilon": "1", "delta": "0.000001"}
    code, out, _ = _run(server, capsys, "datasets", "list")
    assert code == 0 and ds["id"] in out and "cli-demo" in out and "remaining" in out
    code, out, _ = _run(server, capsys, "datasets", "show", ds["id"])
    assert code == 0 and "budget" in out and "epsilon=1, delta=0.000001" in out
    code, out, _ = _run(
        server, capsys, "budget", "set", ds["id"], "--epsilon", "2", "--delta", "1e-6", "--json"
    )
    assert code == 0 and json.loads(out)["status"]["budget"]["epsilon"] == "2"
    code, _, err = _run(server, capsys, "datasets", "show", "ds_missing")
    assert code == 1 and "NotFound" in err


def test_rdp_dataset_and_budget_below_spent(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(
        server,
        capsys,
        "datasets",
        "create",
        "cli-rdp",
        "--epsilon",
        "3",
        "--delta",
        "1e-5",
        "--mode",
        "rdp",
        "--json",
    )
    assert code == 0 and json.loads(out)["mode"] == "rdp"
    basic = client.create_dataset("cli-below", "1", "0.000001")
    client.register(basic, d.pure_dp("0.5"))
    code, _, err = _run(
        server, capsys, "budget", "set", basic.id, "--epsilon", "0.4", "--delta", "1e-6", "--json"
    )
    assert code == 1 and json.loads(err)["status"] == 409


def test_show_gives_the_certified_reading(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = client.create_dataset("cli-odometer", "1", "0.000001", accounting={"mode": "zcdp"})
    client.register(ds, d.zcdp("0.01"))
    reading = client.get_dataset(ds.id).odometer
    assert reading["source"] == "ladder" and reading["delta"] == Decimal("0.000001")
    # never below the non-adaptive conversion of the same spend, never above the budget
    assert client.get_dataset(ds.id).spent["epsilon"] < reading["epsilon"] < 1
    code, out, _ = _run(server, capsys, "datasets", "show", ds.id)
    assert code == 0
    line = next(row for row in out.splitlines() if row.startswith("guarantee so far"))
    assert line.endswith(f"epsilon={reading['epsilon']}, delta=0.000001 (ladder)")


def test_export_verify_and_report(
    server: Server,
    client: OdometerClient,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    ds = client.create_dataset("cli-audit", "1", "0.000001")
    client.register(ds, d.pure_dp("0.1"))
    with client.reserve(ds, d.svt("0.1", "0.3", 3)) as r:
        r.settle("tops=1")
    with pytest.raises(Exception):  # noqa: B017 - any rejection will do
        client.register(ds, d.pure_dp("5"))
    for fmt in ("jsonl", "csv", "json"):
        path = tmp_path / f"ledger.{fmt}"
        code, out, _ = _run(server, capsys, "export", ds.id, "-o", str(path), "--format", fmt)
        assert code == 0 and "wrote 5 entries" in out
        assert main(["verify", str(path), "--unpinned"]) == 0  # the test server signs nothing
        verdict = json.loads(capsys.readouterr().out)
        assert (
            verdict["ok"]
            and verdict["entries"] == 5
            and verdict["head_hash"] == (client.get_dataset(ds).head_hash)
        )
    code, out, _ = _run(server, capsys, "report", ds.id, "--json")
    assert code == 0
    report = json.loads(out)  # the server's report (GET …/report), not the client fallback
    assert "source" not in report
    assert report["verification"]["ok"] is True and report["verification"]["entries"] == 5
    assert report["chain_head"] == {"seq": 5, "hash": client.get_dataset(ds).head_hash}
    assert report["ledger"]["kinds"] == {
        "dataset_created": 1,
        "invocation_accepted": 1,
        "invocation_rejected": 1,
        "invocation_reserved": 1,
        "invocation_settled": 1,
    }
    (admin,) = report["analysts"]
    assert admin["actor"] == "admin"
    assert (admin["accepted"], admin["reserved"], admin["rejected"], admin["settled"]) == (
        1,
        1,
        1,
        1,
    )
    assert Decimal(admin["charged"]["epsilon"]) == Decimal("0.3")
    assert client.get_dataset(ds).spent["epsilon"] == Decimal("0.3")
    assert report["refunds"]["odp_savings"] == {"epsilon": "0.2", "delta": "0"}
    assert report["rejections"] == {
        "total": 1,
        "by_level": {"dataset": 1},
        "by_reason": {"epsilon budget exceeded": 1},
    }
    code, out, _ = _run(server, capsys, "report", ds.id)
    assert code == 0
    assert "replay verification: OK (5 entries)" in out and "per analyst (epsilon)" in out
    assert "refunds (ODP savings):  epsilon=0.2, delta=0" in out
    assert "remaining:              epsilon=0.7, delta=0.000001" in out


def test_grant(server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]) -> None:
    ds = client.create_dataset("cli-grant", "1", "0.000001")
    try:
        client.grant(ds, "probe-principal")
    except NotFound as exc:
        if exc.detail == "Not Found":
            pytest.skip("POST /v1/datasets/{id}/grants is not on this server yet")
    created = httpx.post(
        f"{server.base_url}/v1/principals",
        json={"name": "alice", "role": "analyst", "organisation_id": ds.organisation},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    )
    assert created.status_code == 201, created.text
    alice = created.json()["id"]
    code, out, err = _run(
        server,
        capsys,
        "grant",
        ds.id,
        alice,
        "--quota-epsilon",
        "0.5",
        "--quota-delta",
        "0",
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["principal_id"] == alice
    code, _, err = _run(server, capsys, "grant", ds.id, alice, "--quota-epsilon", "0.5")
    assert code == 2 and "--quota-delta" in err


def test_installed_entry_point(server: Server) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "datasets", "list", "--json"],
        cwd=ROOT,
        env={"ODOMETER_URL": server.base_url, "ODOMETER_API_KEY": ADMIN_KEY, "PATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert isinstance(json.loads(result.stdout), list)


GAUSSIAN = {"type": "gaussian", "sigma": "10", "sensitivity": "1"}


def _org_line(out: str, org_id: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(org_id))


def test_orgs_zcdp_cap_list_capacity_and_report(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    org = client.create_organisation("cli-zcdp-org").id
    curator = client.create_principal("cli-zcdp-curator", "curator", organisation_id=org)
    analyst = client.create_principal("cli-zcdp-analyst", "analyst", organisation_id=org)
    code, out, err = _run(
        server,
        capsys,
        "orgs",
        "cap",
        "cli-zcdp-org",
        "--epsilon",
        "10",
        "--delta",
        "1e-5",
        "--mode",
        "zcdp",
    )
    assert code == 0, err
    line = _org_line(out, org)
    assert "ε=10 δ=0.00001 zcdp" in line and line.endswith("  0")  # nothing decided yet
    with (
        OdometerClient(server.base_url, client.issue_key(curator.id).key) as cur,
        OdometerClient(server.base_url, client.issue_key(analyst.id).key) as ana,
    ):
        ds = cur.create_dataset("cli-zcdp-ds", "1000", "0.001", accounting={"mode": "zcdp"})
        cur.grant(ds, analyst.id)
        for _ in range(3):
            assert ana.register(ds, GAUSSIAN).status == "accepted"
    raw = httpx.get(
        f"{server.base_url}/v1/organisations", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ).json()
    (view,) = [o for o in raw["organisations"] if o["id"] == org]
    certified = view["status"]["odometer"]["epsilon"]
    assert view["spent"] == {"rho": "0.015", "delta": "0"}  # 3 × 1/(2·10²)

    code, out, _ = _run(server, capsys, "orgs", "list")
    assert code == 0
    header, rule = out.splitlines()[:2]
    assert header.split() == ["id", "name", "cap", "mode", "spent", "certified", "ε", "decisions"]
    assert set(rule.replace(" ", "")) == {"-"}
    cells = _org_line(out, org).split()
    # id, name, cap (ε δ mode), mode, spent (ρ δ), certified ε, decisions (cap_seq)
    cap, spent = ["ε=10", "δ=0.00001", "zcdp"], ["ρ=0.015", "δ=0"]
    # the certified ε rounded up to 8 significant digits for people; in full with --exact
    assert len(Decimal(certified).as_tuple().digits) > 8
    assert cells == [org, "cli-zcdp-org", *cap, "zcdp", *spent, up8(certified), "3"]
    code, out, _ = _run(server, capsys, "orgs", "list", "--exact")
    assert code == 0
    assert _org_line(out, org).split() == [
        org,
        "cli-zcdp-org",
        *cap,
        "zcdp",
        *spent,
        certified,
        "3",
    ]
    code, out, _ = _run(server, capsys, "orgs", "list", "--json")
    (listed,) = [o for o in json.loads(out) if o["id"] == org]
    assert listed["cap"] == {"epsilon": "10", "delta": "0.00001", "mode": "zcdp"}
    assert listed["spent"] == view["spent"] and listed["cap_seq"] == 3

    query = {"mechanism": GAUSSIAN, "dataset_id": ds.id}
    expected = httpx.post(
        f"{server.base_url}/v1/organisations/{org}/cap/capacity",
        json=query,
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    ).json()
    # 340 under accounting 1.9.0 (the first declaration shapes the ladder), 352 under 1.7.0-1.8.0,
    # 353 before
    assert expected["count"] == 340 - 3 and expected["reason"] == "rho budget exceeded"
    mechanism = json.dumps(GAUSSIAN)
    code, out, _ = _run(
        server, capsys, "orgs", "capacity", org, "--mechanism", mechanism, "--dataset", ds.id
    )
    assert code == 0
    assert out == (
        f"the cap (zcdp) admits {expected['count']} more of this declaration "
        "(next refused: rho budget exceeded)\n"
    )
    code, out, _ = _run(server, capsys, "orgs", "capacity", org, "--mechanism", mechanism, "--json")
    assert code == 0 and json.loads(out) == expected
    tiny = json.dumps({**GAUSSIAN, "sigma": "1000"})  # ρ = 5e-7: more than the count's limit
    code, out, _ = _run(server, capsys, "orgs", "capacity", org, "--mechanism", tiny)
    assert code == 0 and out == "the cap (zcdp) admits at least 1000000 more of this declaration\n"
    code, out, err = _run(server, capsys, "orgs", "capacity", org, "--mechanism", "gaussian")
    assert (code, out) == (2, "") and err.startswith("error: --mechanism is not JSON: ")

    code, out, _ = _run(server, capsys, "orgs", "report", "cli-zcdp-org")
    assert code == 0
    lines = out.splitlines()
    assert "replay             verified" in lines and "decisions          3" in lines
    assert "spent              ρ=0.015 δ=0" in lines
    assert f"certified reading  ε={up8(certified)} δ=0.0000099 (ladder)" in lines
    row = next(line for line in lines if line.startswith(ds.id))
    assert row.split() == [ds.id, "cli-zcdp-ds", "zcdp", "3", "3", "ρ=0.015", "δ=0"]
    code, out, _ = _run(server, capsys, "orgs", "report", org, "--json")
    report = json.loads(out)
    assert code == 0 and report["verified"] is True and report["decisions"] == 3
    (drawn,) = report["datasets"]
    assert drawn["drawn"] == {"rho": "0.015", "delta": "0"} and drawn["admitted"] == 3

    # the cap counted something: its mode is fixed unless replaced (one clear line, exit 1)
    change = ["orgs", "cap", org, "--epsilon", "10", "--delta", "1e-5", "--mode", "rdp"]
    code, out, err = _run(server, capsys, *change)
    assert (code, out) == (1, "")
    assert err == (
        "error: 409 ModeFixed: the cap counts invocations in mode 'zcdp'; "
        'its mode is fixed once it has counted something: replace it ("replace": true) to '
        "count in another mode from now on, its reading kept as a closed statement\n"
    )
    code, out, err = _run(server, capsys, *change, "--json")
    assert (code, out) == (1, "")
    body = json.loads(err)
    assert (body["status"], body["error"]) == (409, "ModeFixed") and "fixed" in body["detail"]


def test_accounting_options_of_orgs_cap_and_datasets_create(
    server: Server, client: OdometerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    org = client.create_organisation("cli-rdp-org").id
    cap = ["orgs", "cap", org, "--epsilon", "10", "--delta", "1e-5"]
    rdp = ["--mode", "rdp", "--final-conversion-delta", "1e-6"]
    code, out, err = _run(server, capsys, *cap, *rdp, "--json")
    assert code == 0, err
    capped = json.loads(out)
    assert capped["cap"] == {"epsilon": "10", "delta": "0.00001", "mode": "rdp"}
    assert capped["status"]["final_conversion_delta"] == "0.000001"
    gdp = json.dumps({"mode": "gdp"})
    code, out, _ = _run(server, capsys, *cap, "--accounting", gdp)
    assert code == 0 and "ε=10 δ=0.00001 gdp" in _org_line(out, org)  # nothing counted: any mode
    code, out, err = _run(server, capsys, *cap, "--final-conversion-delta", "1e-6")
    assert (code, out, err) == (1, "", "error: --final-conversion-delta needs --mode zcdp or rdp\n")
    code, out, err = _run(server, capsys, *cap, "--accounting", '{"mode": "split"}')
    assert (code, out) == (1, "")
    assert err == (
        "error: 422 ValidationError: body.accounting: Input tag 'split' found using 'mode' does "
        "not match any of the expected tags: 'basic', 'zcdp', 'rdp', 'gdp'\n"
    )
    code, out, err = _run(server, capsys, *cap, "--accounting", "{mode: gdp}")
    assert (code, out) == (2, "") and err.startswith("error: --accounting is not JSON: ")
    with pytest.raises(SystemExit) as usage:  # one way of giving the mode
        _run(server, capsys, *cap, "--mode", "zcdp", "--accounting", gdp)
    assert usage.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    code, out, err = _run(server, capsys, "orgs", "cap", org, "--remove", "--mode", "zcdp")
    assert (code, err) == (1, "error: --remove takes no amounts and no accounting options\n")
    code, out, _ = _run(server, capsys, "orgs", "cap", org, "--remove", "--json")
    assert code == 0 and json.loads(out)["cap"] is None
    mechanism = json.dumps(GAUSSIAN)
    code, out, err = _run(server, capsys, "orgs", "capacity", org, "--mechanism", mechanism)
    assert (code, out) == (1, "") and err.startswith("error: 409 NoCap: ")
    # the same options on datasets create
    create = ["datasets", "create", "cli-zcdp-fcd", "--epsilon", "1", "--delta", "1e-5"]
    code, out, err = _run(
        server, capsys, *create, "--mode", "zcdp", "--final-conversion-delta", "1e-6", "--json"
    )
    assert code == 0, err
    created = json.loads(out)
    assert created["mode"] == "zcdp" and created["status"]["final_conversion_delta"] == "0.000001"
