"""The service benchmark's own correctness: its prefilled ledgers are ledgers the service can
continue, and a tiny run of the whole benchmark completes without a failed request."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from benchmarks import service
from benchmarks.service_growth import prefill_sqlite
from odometer_core.ledger.replay import replay
from tests.support import ADMIN_KEY, AUTH, ledger, migrate


def test_prefilled_ledger_is_continued_by_the_service(tmp_path: Path) -> None:
    """300 generated entries inserted behind the service's back, then 3 admissions through the
    API: the whole ledger (303 entries) must chain and replay exactly, the new entries
    continuing the prefilled head. Shown to fail once by leaving ``head_hash`` at the insert's
    placeholder in ``_update_params`` (``v["head_hash"]`` → ``"0" * 64``): the service chained
    entry 301 to ``"000…0"`` instead of entry 300's hash and the ``prev_hash`` assertion failed
    (``'000000000000...0000000000000' == '500041ad2d45...'``)."""
    path = tmp_path / "grown.db"
    url = f"sqlite:///{path}"
    migrate(url)
    prefill_sqlite(str(path), "ds_prefilled", 300)
    app = create_app(Settings(database_url=url, admin_key=ADMIN_KEY))
    with TestClient(app) as client:
        for _ in range(3):
            r = client.post(
                "/v1/datasets/ds_prefilled/invocations",
                json={"mechanism": {"type": "pure_dp", "epsilon": "0.0001"}},
                headers=AUTH,
            )
            assert r.status_code == 201, r.text
        entries = ledger(client, "ds_prefilled")
    assert [e["seq"] for e in entries] == list(range(1, 304))
    assert entries[300]["prev_hash"] == entries[299]["hash"]
    verdict = replay(entries)
    assert verdict.ok, verdict.problems
    assert verdict.entries == 303


@pytest.mark.skipif(
    os.environ.get("ODOMETER_LONG_TESTS") != "1",
    reason="starts two servers and ~10 load processes (15-45 s); ODOMETER_LONG_TESTS=1 runs it",
)
def test_tiny_quick_run_has_no_errors(tmp_path: Path) -> None:
    """The whole benchmark at a tiny size on SQLite (PostgreSQL skipped): every cell answered
    requests, none failed, the growth datasets kept their prefilled length plus what was
    admitted, and the plot and raw JSON were written."""
    rc = service.main(
        ["--quick", "--postgres", "none", "--workers", "1", "--clients", "1",
         "--duration", "0.4", "--warmup", "0.1", "--many", "3", "--sizes", "50,120",
         "--out", str(tmp_path), "--no-results"]
    )  # fmt: skip
    assert rc == 0
    result = json.loads((tmp_path / "service-quick.json").read_text())
    data = result["backends"]["sqlite"]
    cells = {(r["scenario"], r["system"]) for r in data["runs"]}
    assert cells == {(s, m) for s in ("hot", "many") for m in ("baseline", "basic", "zcdp", "rdp")}
    for run in data["runs"]:
        assert run["errors"] == 0, run
        assert run["ok"] > 0 and run["p50_ms"] <= run["p99_ms"], run
    for row in data["growth"]:
        admitted = row["admission"]["ok"]
        assert row["admission"]["errors"] == 0 and row["export_errors"] == 0
        assert row["entries_after"] >= row["size"] + admitted
    assert [g["size"] for g in data["growth"]] == [50, 120]
    assert (tmp_path / "service-quick.svg").read_text().startswith("<svg")
