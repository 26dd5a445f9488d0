"""A fragmented partitioned dataset: a selection reads the runs its keys touch, not the span
between them, and the limits on runs refuse what would cross them, changing nothing
(``docs/operations.md``, *Limits*).

The fragmented datasets are built fast and directly: 10⁷ buckets opened over HTTP, then their
one run replaced by R runs of equal length whose states alternate between a fresh block's and
one charged ε = 10⁻⁶ (the core's states, written as the write path writes them; the
dataset's aggregate says R runs and the charged reading), at two levels, R = 10⁴ and 10⁵. Their
ledgers do not record that history (nothing here verifies them); every decision below is taken
by the service on the runs as stored.

The rows a selection reads are counted where the service reads them: every statement of
:mod:`app.db.blocks` that reads runs for a decision (``queued``, sent in the lock statement's
round trip or alone) has its returned rows counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Table, delete, insert, update

import app.db.blocks as db_blocks
from app.db.models import BlockRun, Dataset
from app.db.uow import Database
from odometer_core.accounting import initial_state, make_config, parse_declaration, state_to_json
from odometer_core.accounting.blocks import Blocks, Run, decide_selection
from odometer_core.ledger import blocks as ledger_blocks
from odometer_core.ledger.blocks import Partitioned, reading_of
from tests.support import AUTH, ledger

BUCKETS = 10**7
TINY = {"type": "pure_dp", "epsilon": "0.000001"}
CHARGE = {"type": "pure_dp", "epsilon": "0.001"}


def _fragmented(client: TestClient, database: Database, runs: int) -> str:
    """A dataset of 10⁷ buckets whose open blocks are ``runs`` runs of equal length, even ones
    fresh, odd ones charged ε = 10⁻⁶ once."""
    r = client.post(
        "/v1/datasets",
        json={
            "name": f"fragmented-{runs}",
            "budget": {"epsilon": "1", "delta": "0.000001"},
            "accounting": {"mode": "basic"},
            "partition": {"kind": "bucket", "unit": "record", "buckets": BUCKETS},
        },
        headers=AUTH,
    )
    assert r.status_code == 201, r.text
    ds = str(r.json()["id"])
    r = client.post(
        f"/v1/datasets/{ds}/blocks", json={"open": {"from": 0, "to": BUCKETS - 1}}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    config = make_config("1", "0.000001", "add_remove", {"mode": "basic"})
    fresh = initial_state(config)
    whole = Blocks((Run(0, BUCKETS, fresh),), ((0, BUCKETS),))
    charged = decide_selection(config, whole, [(0, 1)], parse_declaration(TINY))
    charged_state = charged.blocks.runs[0].state
    length = BUCKETS // runs
    fresh_json, charged_json = state_to_json(fresh), state_to_json(charged_state)
    rows = [
        {
            "dataset_id": ds,
            "lo": i * length,
            "hi": (i + 1) * length,
            "state_json": charged_json if i % 2 else fresh_json,
        }
        for i in range(runs)
    ]
    aggregate = Partitioned(
        BUCKETS, runs, ((0, BUCKETS),), None, reading_of(config, charged_state)
    ).to_json()
    table = BlockRun.__table__
    assert isinstance(table, Table)
    with database.engine.begin() as conn:
        conn.execute(delete(table).where(table.c.dataset_id == ds))
        for at in range(0, runs, 5000):
            conn.execute(insert(table), rows[at : at + 5000])
        conn.execute(update(Dataset).where(Dataset.id == ds).values(state_json=aggregate))
    return ds


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The rows each statement reading runs for a decision returned, in order."""
    counts: list[int] = []
    real = db_blocks.queued  # type: ignore[attr-defined]

    def queued(conn: Any, sql: str, params: dict[str, Any]) -> Callable[[], list[Any]]:
        rows = real(conn, sql, params)

        def read() -> list[Any]:
            got = rows()
            counts.append(len(got))
            return got

        return read

    monkeypatch.setattr(db_blocks, "queued", queued)
    yield counts


def _register(client: TestClient, ds: str, keys: list[int], mechanism: Any = CHARGE) -> Any:
    body = {"mechanism": mechanism, "blocks": {"keys": keys}}
    return client.post(f"/v1/datasets/{ds}/invocations", json=body, headers=AUTH)


def _status(client: TestClient, ds: str) -> dict[str, Any]:
    r = client.get(f"/v1/datasets/{ds}", headers=AUTH)
    assert r.status_code == 200, r.text
    status: dict[str, Any] = r.json()["status"]
    return status


def _block(client: TestClient, ds: str, key: int) -> str:
    r = client.get(f"/v1/datasets/{ds}/blocks", params={"from": key, "to": key}, headers=AUTH)
    assert r.status_code == 200, r.text
    (run,) = r.json()["runs"]
    return str(run["status"]["odometer"]["epsilon"])


@pytest.fixture(scope="module")
def levels() -> dict[str, dict[int, str]]:
    """The fragmented datasets, built once per backend (10⁴ and 10⁵ runs)."""
    return {}


def _level(
    client: TestClient, database: Database, levels: dict[str, dict[int, str]], runs: int
) -> str:
    built = levels.setdefault(database.engine.dialect.name, {})
    if runs not in built:
        built[runs] = _fragmented(client, database, runs)
    return built[runs]


@pytest.mark.parametrize("runs", [10_000, 100_000])
def test_a_selection_reads_the_runs_its_keys_touch(
    client: TestClient,
    database: Database,
    levels: dict[str, dict[int, str]],
    counted: list[int],
    runs: int,
) -> None:
    ds = _level(client, database, levels, runs)
    length = BUCKETS // runs
    assert _status(client, ds)["blocks"]["runs"] == runs
    # two keys at both ends: the first run (fresh) and the last one (charged 1e-6)
    counted.clear()
    r = _register(client, ds, [0, BUCKETS - 1])
    assert r.status_code == 201, r.text
    assert 0 < sum(counted) <= 4, counted  # per end: the run it cuts and its neighbour
    assert _block(client, ds, 0) == "0.001"
    assert _block(client, ds, BUCKETS - 1) == "0.001001"
    assert _block(client, ds, 1) == "0"  # the rest of the first run, untouched
    assert _status(client, ds)["blocks"]["runs"] == runs + 2  # each end cut one run in two
    # 100 keys spread over the whole dataset, each inside a run of its own: at most 3 per key
    keys = [i * (runs // 100) * length + length // 2 for i in range(100)]
    counted.clear()
    r = _register(client, ds, keys)
    assert r.status_code == 201, r.text
    assert 100 <= sum(counted) <= 3 * 100, counted
    assert _status(client, ds)["blocks"]["runs"] == runs + 2 + 2 * 100  # each key: 1 run → 3
    assert _block(client, ds, keys[0]) == "0.001"  # run runs//100: even, fresh
    assert _block(client, ds, keys[0] + 1) == "0"


def test_the_limits_refuse_what_would_cross_them_and_change_nothing(
    client: TestClient,
    database: Database,
    levels: dict[str, dict[int, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ds = _level(client, database, levels, 10_000)
    length = BUCKETS // 10_000

    def snapshot() -> tuple[Any, ...]:
        status = _status(client, ds)
        entries = ledger(client, ds)
        return status["blocks"]["runs"], status["odometer"], len(entries), entries[-1]["hash"]

    before = snapshot()
    runs = before[0]
    inside = [101 * length + 7, 203 * length + 7]  # inside two charged runs: each cut in three
    # the runs one request may add (422: the selection's own shape)
    monkeypatch.setattr(ledger_blocks, "MAX_RUNS_CREATED", 3)
    r = _register(client, ds, inside)
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "InvalidBlocks" and body["field"] == "blocks"
    assert "runs_per_request = 3" in body["detail"] and "4 more runs" in body["detail"]
    assert snapshot() == before
    assert _block(client, ds, inside[0]) == "0.000001"
    monkeypatch.setattr(ledger_blocks, "MAX_RUNS_CREATED", 2_000)
    # the runs a dataset may hold (409: the dataset's state)
    monkeypatch.setattr(ledger_blocks, "MAX_RUNS", runs + 3)
    r = _register(client, ds, inside)
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["error"] == "BlockConflict"
    assert f"runs_per_dataset = {runs + 3:,}" in body["detail"]
    assert f"in {runs + 4:,} runs" in body["detail"]
    assert snapshot() == before
    assert _block(client, ds, inside[1]) == "0.000001"
    # a selection that adds no run is admitted at the limit: a whole fresh run charged 1e-6
    # becomes its neighbours' state and merges with them (three runs become one)
    fresh = {"from": 102 * length, "to": 103 * length - 1}
    body2 = {"mechanism": TINY, "blocks": fresh}
    r = client.post(f"/v1/datasets/{ds}/invocations", json=body2, headers=AUTH)
    assert r.status_code == 201, r.text
    assert _status(client, ds)["blocks"]["runs"] == runs - 2
    # one key inside a run adds two: within the limit now
    r = _register(client, ds, inside[:1])
    assert r.status_code == 201, r.text
    assert _status(client, ds)["blocks"]["runs"] == runs


def test_the_limits_admit_a_thousand_hashed_user_buckets(
    client: TestClient, database: Database, levels: dict[str, dict[int, str]]
) -> None:
    """The most a selection lists (1,000 keys), each inside a run of its own on the 10⁵-run
    dataset, adds 2,000 runs: admitted under the stated limits."""
    assert ledger_blocks.MAX_RUNS_CREATED == 2_000 and ledger_blocks.MAX_RUNS >= 200_000
    ds = _level(client, database, levels, 100_000)
    length = BUCKETS // 100_000
    before = _status(client, ds)["blocks"]["runs"]
    keys = [(200 + 97 * i) * length + 11 for i in range(1000)]
    r = _register(client, ds, keys)
    assert r.status_code == 201, r.text
    assert _status(client, ds)["blocks"]["runs"] == before + 2_000
