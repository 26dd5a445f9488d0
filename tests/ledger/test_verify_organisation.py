"""``odometer verify-organisation``: an auditor replays an organisation cap offline from the
exports of its datasets' ledgers, in every export format; a missing export, an edited cap
charge (chain re-hashed) and an edited chain are each reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app import cli
from odometer_core.ledger.formats import write_export
from tests.support import AUTH, ledger, new_organisation, rehashed

GAUSSIAN = {"type": "gaussian", "sigma": "10", "sensitivity": "1"}
ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.01"}, {"name": "high", "epsilon": "0.5"}],
}


def _organisation(client: TestClient) -> tuple[str, list[str]]:
    """A zcdp cap over a zcdp and a basic dataset, Gaussians and a settled ODP on them."""
    org = new_organisation(client)
    datasets = []
    for mode in ("zcdp", "basic"):
        body = {
            "name": mode,
            "budget": {"epsilon": "100", "delta": "0.001"},
            "accounting": {"mode": mode},
            "organisation_id": org,
        }
        datasets.append(client.post("/v1/datasets", json=body, headers=AUTH).json()["id"])
    cap = {"epsilon": "10", "delta": "0.00001", "accounting": {"mode": "zcdp"}}
    assert client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH).is_success
    for i in range(5):
        url = f"/v1/datasets/{datasets[i % 2]}/invocations"
        assert client.post(url, json={"mechanism": GAUSSIAN}, headers=AUTH).status_code == 201
    url = f"/v1/datasets/{datasets[1]}/invocations"
    odp = client.post(url, json={"mechanism": ODP}, headers=AUTH).json()["id"]
    r = client.post(f"{url}/{odp}/settle", json={"cell": "low"}, headers=AUTH)
    assert r.status_code == 200, r.text
    return org, datasets


def _write(path: Path, entries: list[dict[str, object]], fmt: str) -> str:
    with path.open("w", encoding="utf-8") as out:
        write_export(str(entries[0]["dataset_id"]), entries, out, fmt)  # type: ignore[arg-type]
    return str(path)


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
def test_the_cap_verifies_offline_and_every_defect_is_found(
    client: TestClient, fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, datasets = _organisation(client)
    ledgers = [ledger(client, d) for d in datasets]
    paths = [_write(tmp_path / f"{i}.{fmt}", e, fmt) for i, e in enumerate(ledgers)]
    assert cli.main(["verify-organisation", *paths]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["ok"] and verdict["decisions"] == 7 and verdict["ledgers"] == 2
    assert verdict["datasets"][datasets[0]]["drawn"] == {"rho": "0.015", "delta": "0"}

    assert cli.main(["verify-organisation", paths[0]]) == 1
    assert "is missing" in json.loads(capsys.readouterr().out)["problems"][0]

    edited = [dict(e) for e in ledgers[0]]
    part = dict(edited[2]["org"])
    part["charge"] = {"rho": "0.001", "delta": "0"}
    edited[2]["org"] = part
    paths[0] = _write(tmp_path / f"edited.{fmt}", rehashed(edited), fmt)
    assert cli.main(["verify-organisation", *paths]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert problems and "charge" in problems[0], problems

    paths[0] = _write(tmp_path / f"chain.{fmt}", edited, fmt)  # edited, chain not re-hashed
    assert cli.main(["verify-organisation", *paths]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert problems[0].startswith(paths[0]), problems
