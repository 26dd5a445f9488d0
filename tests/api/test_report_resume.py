"""The report's verification resumes from the last clean report's position
(:mod:`app.services._verified`) and still gives the verdict of a full re-run.

A partitioned dataset of 1,000 buckets gets scattered selections; its report re-runs every
entry once, the next report only the entries added since (counted: the replay's per-entry step
is wrapped). Then the ledger is changed under the service, with the append-only triggers
dropped (this test's own database): an entry before the remembered head edited in place, and
the whole chain rewritten consistently (every hash recomputed, the dataset's head moved with
it). Either way the verdict equals the one a process that remembers nothing gives, problem for
problem.

Shown able to fail: with the chain walk over the remembered prefix removed from
``Verification.feed`` (resuming at the remembered head without re-hashing what lies before it),
``test_an_entry_edited_before_the_remembered_head`` failed with ``assert True is False``: the
report still said ok; with the resume taken on the entry count alone (the head hash not
compared), ``test_a_rewritten_chain`` failed on the verdict's head hash (the remembered chain's,
``2d40c1e7…``, not the rewritten ledger's ``3554931a…``: entry 4 was never re-run).
"""

from __future__ import annotations

import importlib
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.db.uow import Database, UnitOfWork
from app.main import create_app
from app.services import _verified
from app.settings import Settings
from tests.support import ADMIN_KEY, AUTH, Backend, rehashed

#: the module (the package exports its ``replay`` function under the same name)
replay_module = importlib.import_module("odometer_core.ledger.replay")

TINY = {"type": "pure_dp", "epsilon": "0.001"}
BUCKETS = 1000


@pytest.fixture
def served(fresh_backend: Backend) -> Iterator[tuple[TestClient, Database]]:
    database = Database.from_settings(Settings(database_url=fresh_backend.url))
    settings = Settings(database_url=fresh_backend.url, admin_key=ADMIN_KEY)
    _verified.VERIFIED.forget()
    with TestClient(create_app(settings, database)) as client:
        yield client, database
    _verified.VERIFIED.forget()
    database.dispose()


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the entries a replay re-runs on a partitioned dataset."""
    return counted_steps(monkeypatch)


def counted_steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``seq`` of every entry a replay re-runs on a partitioned dataset, as they come."""
    calls: list[int] = []
    original = replay_module._block_step

    def counted(entry: Any, *args: Any) -> Any:
        calls.append(int(entry["seq"]))
        return original(entry, *args)

    monkeypatch.setattr(replay_module, "_block_step", counted)
    return calls


def _dataset(client: TestClient, selections: int) -> str:
    r = client.post(
        "/v1/datasets",
        json={
            "name": "scattered",
            "budget": {"epsilon": "10", "delta": "0.000001"},
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
    _register(client, ds, selections)
    return ds


def _register(client: TestClient, ds: str, count: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for _ in range(count):
        keys = sorted(rng.sample(range(BUCKETS), 40))
        r = client.post(
            f"/v1/datasets/{ds}/invocations",
            json={"mechanism": TINY, "blocks": {"keys": keys}},
            headers=AUTH,
        )
        assert r.status_code == 201, r.text


def _verdict(client: TestClient, ds: str) -> dict[str, Any]:
    r = client.get(f"/v1/datasets/{ds}/report", headers=AUTH)
    assert r.status_code == 200, r.text
    verdict: dict[str, Any] = r.json()["verification"]
    return verdict


def _from_scratch(client: TestClient, ds: str) -> dict[str, Any]:
    """The verdict of a process that remembers nothing (a full re-run)."""
    _verified.VERIFIED.forget()
    return _verdict(client, ds)


def zero_charge(database: Database, ds: str, seq: int) -> None:
    """Entry ``seq``'s charge zeroed in place (its hash left as it was; the triggers dropped)."""
    _unlocked(database)
    with UnitOfWork(database) as uow:
        uow.session.execute(
            text("UPDATE ledger_entries SET charge = :c WHERE dataset_id = :d AND seq = :s"),
            {"c": '{"epsilon": "0", "delta": "0"}', "d": ds, "s": seq},
        )
        uow.commit()


def _unlocked(database: Database) -> None:
    """The ledger's append-only triggers dropped (this test's own database only)."""
    with database.engine.begin() as conn:
        if database.engine.dialect.name == "sqlite":
            conn.execute(text("DROP TRIGGER ledger_entries_no_update"))
            conn.execute(text("DROP TRIGGER ledger_entries_no_delete"))
        else:
            conn.execute(text("DROP TRIGGER ledger_entries_no_update_delete ON ledger_entries"))


def test_a_report_re_runs_only_what_came_after_the_last(
    served: tuple[TestClient, Database], steps: list[int]
) -> None:
    client, _ = served
    ds = _dataset(client, 6)  # entries: created, blocks opened, 6 registrations
    first = _verdict(client, ds)
    assert first["ok"] is True and first["entries"] == 8
    assert steps == [2, 3, 4, 5, 6, 7, 8]  # every entry after the creation re-run once
    remembered = _verified.VERIFIED.get(ds)
    assert remembered is not None and remembered.entries == 8
    assert remembered.head_hash == first["head_hash"]

    steps.clear()
    assert _verdict(client, ds) == first  # nothing new: nothing re-run, the same verdict
    assert steps == []

    _register(client, ds, 2, seed=8)
    steps.clear()
    resumed = _verdict(client, ds)
    assert steps == [9, 10]
    assert resumed["ok"] is True and resumed["entries"] == 10
    steps.clear()
    assert _from_scratch(client, ds) == resumed
    assert steps == list(range(2, 11))


def test_an_entry_edited_before_the_remembered_head(
    served: tuple[TestClient, Database], steps: list[int]
) -> None:
    client, database = served
    ds = _dataset(client, 5)
    assert _verdict(client, ds)["ok"] is True
    _register(client, ds, 1, seed=9)
    zero_charge(database, ds, 4)
    resumed = _verdict(client, ds)
    assert resumed["ok"] is False
    assert resumed["first_problem"] == "entry 4 (seq 4): hash does not match the entry's content"
    assert _from_scratch(client, ds) == resumed


def test_a_rewritten_chain(served: tuple[TestClient, Database], steps: list[int]) -> None:
    """Entry 4's charge zeroed and every hash from it recomputed, the dataset's head hash moved
    to the new chain's: the chain holds, only a re-run of entry 4 can tell."""
    client, database = served
    ds = _dataset(client, 5)
    before = _verdict(client, ds)
    assert before["ok"] is True and before["entries"] == 7
    forged = _rewritten(database, ds)
    steps.clear()
    resumed = _verdict(client, ds)
    assert resumed["ok"] is False
    assert resumed["head_hash"] == forged[-1]["hash"]
    assert resumed["first_problem"] is not None and "entry 4 " in resumed["first_problem"]
    assert 4 in steps  # the remembered head no longer matched: re-run from the start
    assert _from_scratch(client, ds) == resumed


def _rewritten(database: Database, ds: str) -> list[dict[str, Any]]:
    """Entry 4's charge zeroed and every hash from it recomputed, the dataset's head hash moved
    to the new chain's (the triggers dropped first); returns the forged chain."""
    with UnitOfWork(database) as uow:
        rows = uow.ledger.page(ds, after_seq=0, limit=100, up_to_seq=100)
        entries = [row.to_export() for row in rows]
    entries[3]["charge"] = {"epsilon": "0", "delta": "0"}
    forged = rehashed(entries)
    _unlocked(database)
    with UnitOfWork(database) as uow:
        for entry in forged[3:]:
            uow.session.execute(
                text(
                    "UPDATE ledger_entries SET charge = :c, prev_hash = :p, hash = :h "
                    "WHERE dataset_id = :d AND seq = :s"
                ),
                {
                    "c": '{"epsilon": "0", "delta": "0"}'
                    if entry["seq"] == 4
                    else _json(entry["charge"]),
                    "p": entry["prev_hash"],
                    "h": entry["hash"],
                    "d": ds,
                    "s": entry["seq"],
                },
            )
        uow.session.execute(
            text("UPDATE datasets SET head_hash = :h WHERE id = :d"),
            {"h": forged[-1]["hash"], "d": ds},
        )
        uow.commit()
    return forged


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def test_the_memory_is_bounded() -> None:
    """Least recently used datasets are forgotten first; unclean replays never remembered."""
    prefixes = _verified.VerifiedPrefixes(max_datasets=2, max_weight=10)
    clean = replay_module.Replayer()
    for name in ("a", "b", "c"):
        prefixes.put(name, clean)
    assert prefixes.get("a") is None and prefixes.get("b") is not None
    assert prefixes.get("c") is not None
    dirty = replay_module.Replayer()
    dirty.replay_problems.append("entry 1: a mismatch")
    prefixes.put("d", dirty)
    assert prefixes.get("d") is None
    heavy = replay_module.Replayer()
    heavy.selections.update({str(i): () for i in range(20)})
    prefixes.put("e", heavy)
    assert prefixes.get("e") is None  # more than the whole memory: not remembered
