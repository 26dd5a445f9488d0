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
        assert main(["verify", str(path)]) == 0
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
