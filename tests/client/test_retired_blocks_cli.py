"""A retired block's reading from the command line, against a real server on SQLite and on
PostgreSQL (``ODOMETER_TEST_POSTGRES_URL``): after a charge and an open reservation on days, and
those days retired, ``odometer datasets show`` and ``odometer verify`` on an export made
afterwards still show what was released (docs/accounting.md, *Partitioned datasets*), and
``odometer budget`` below it is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.cli import main
from tests.client.live import ADMIN_KEY, Server

DAYS = {"kind": "day", "unit": "record", "timezone": "Europe/Paris"}
ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.05"}, {"name": "high", "epsilon": "0.3"}],
}


def _cli(live: Server, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--url", live.base_url, "--key", ADMIN_KEY])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _post(http: httpx.Client, path: str, body: dict[str, Any], code: int) -> dict[str, Any]:
    r = http.post(path, json=body)
    assert r.status_code == code, r.text
    out: dict[str, Any] = r.json()
    return out


def test_cli_shows_a_retired_days_reading(
    live: Server, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    with httpx.Client(base_url=live.base_url, headers=headers, timeout=30) as http:
        body = {"name": "retired-cli", "budget": {"epsilon": "1", "delta": "0"}, "partition": DAYS}
        ds = str(_post(http, "/v1/datasets", body, 201)["id"])
        november = {"from": "2026-11-01", "to": "2026-11-10"}
        _post(http, f"/v1/datasets/{ds}/blocks", {"open": november}, 200)
        charges: list[tuple[dict[str, Any], dict[str, str]]] = [
            ({"type": "pure_dp", "epsilon": "0.5"}, {"from": "2026-11-01", "to": "2026-11-02"}),
            (ODP, {"from": "2026-11-02", "to": "2026-11-03"}),  # left open: 0.3 reserved
        ]
        for mechanism, blocks in charges:
            invocation: dict[str, Any] = {"mechanism": mechanism, "blocks": blocks}
            _post(http, f"/v1/datasets/{ds}/invocations", invocation, 201)
    code, out, err = _cli(live, capsys, "blocks", "retire", ds, "2026-11-01", "2026-11-03")
    assert (code, err) == (0, ""), out

    code, out, err = _cli(live, capsys, "datasets", "show", ds)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == (
        "every block ever opened, retired ones included: certified ε = 0.8, δ = 0 so far; "
        "the most spent open block has left ε 1 (100 % of 1), δ 0 (0 % of 0)"
    )
    assert "open blocks             7 in 1 runs" in lines
    assert "highest fraction spent  0.8" in lines
    assert (
        "guarantee so far        epsilon=0.8, delta=0 (the highest over every block ever "
        "opened, retired ones included)"
    ) in lines

    code, out, err = _cli(live, capsys, "budget", "set", ds, "--epsilon", "0.5", "--delta", "0")
    assert code == 1 and out == ""
    assert err.startswith("error: 409 BudgetBelowSpent: the highest certified reading of a block")

    export = tmp_path / "export.json"
    code, out, err = _cli(live, capsys, "export", ds, "-o", str(export))
    assert code == 0, err
    assert main(["verify", "--unpinned", str(export)]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["ok"] is True
    assert (verdict["odometer"]["epsilon"], verdict["odometer"]["delta"]) == ("0.8", "0")
    assert verdict["state"]["blocks"]["highest"]["epsilon"] == "0.8"
