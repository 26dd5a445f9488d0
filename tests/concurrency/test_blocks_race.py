"""Concurrent registrations on overlapping block selections of one partitioned dataset, on a real
multi-worker server, SQLite and PostgreSQL (docs/accounting.md, *Partitioned datasets*).

Analysts send ``pure_dp`` registrations and ODP reservations (settled or cancelled at once by
the same analyst) over random overlapping ranges of 24 hash buckets, each with a budget of
ε = 1, concurrently (and curators open new buckets meanwhile). Afterwards:

- no block was charged more than its budget: for every block, the charges of the 201s whose
  selection holds it sum to at most 1 (exact decimals);
- every block's state is exactly those 201s: its spent ε equals what they kept (ε, or the
  settled cell, or nothing once cancelled), so a refused multi-block request changed nothing,
  and no admitted one, settle or cancel was lost or half-applied;
- every 409 ``BudgetExceeded`` names blocks that could not afford it then: each had less than
  ε left, reservations held included;
- the ledger holds one entry per answer, and its export replays block by block.

Shown able to fail: with ``app.db.blocks.read_window`` answering a window it read once from a
process-wide cache (stale block states under the lock), the run on SQLite answered 179 × 201
where the budgets admit about 90, and the test failed.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from odometer_core.ledger.replay import replay
from tests.concurrency.server import running_server
from tests.support import AUTH, Backend

BUCKETS = 24
CLIENTS = 12
PER_CLIENT = 20
EPSILON = Decimal("0.1")
PURE = {"type": "pure_dp", "epsilon": str(EPSILON)}
#: reserves ε = 0.1 on every selected block; settled in "low" it keeps 0.02, cancelled 0
ODP = {
    "type": "odp",
    "cells": [{"name": "low", "epsilon": "0.02"}, {"name": "high", "epsilon": "0.1"}],
}
WORKERS = 3


def _analysts(c: httpx.Client, org: str, ds: str) -> list[dict[str, str]]:
    headers = []
    for i in range(CLIENTS):
        r = c.post(
            "/v1/principals",
            json={"name": f"blocks-analyst-{i}", "role": "analyst", "organisation_id": org},
        )
        r.raise_for_status()
        pid = r.json()["id"]
        c.post(f"/v1/datasets/{ds}/grants", json={"principal_id": pid}).raise_for_status()
        key = c.post(f"/v1/principals/{pid}/keys", json={}).json()["key"]
        headers.append({"Authorization": f"Bearer {key}"})
    return headers


def test_concurrent_selections_never_overspend_a_block(
    fresh_backend: Backend, tmp_path: Path
) -> None:
    with running_server(
        fresh_backend.url, tmp_path / "server.log", workers=WORKERS, preload=True
    ) as server:
        with httpx.Client(base_url=server.base_url, headers=AUTH, timeout=60) as c:
            org = c.post("/v1/organisations", json={"name": "blocks-race"}).json()["id"]
            r = c.post(
                "/v1/datasets",
                json={
                    "name": "buckets",
                    "budget": {"epsilon": "1", "delta": "0"},
                    "organisation_id": org,
                    "partition": {"kind": "bucket", "unit": "person", "buckets": BUCKETS},
                },
            )
            r.raise_for_status()
            ds = r.json()["id"]
            c.post(f"/v1/datasets/{ds}/blocks", json={"open": {"from": 0, "to": 15}})
            headers = _analysts(c, org, ds)
        answers: list[tuple[int, dict[str, Any]]] = []
        lock = threading.Lock()

        def analyst(i: int) -> None:
            rng = random.Random(i)
            with httpx.Client(base_url=server.base_url, headers=headers[i], timeout=60) as h:
                for _ in range(PER_CLIENT):
                    lo = rng.randrange(BUCKETS)
                    hi = min(BUCKETS - 1, lo + rng.randrange(6))
                    odp = rng.random() < 0.3
                    r = h.post(
                        f"/v1/datasets/{ds}/invocations",
                        json={
                            "mechanism": ODP if odp else PURE,
                            "blocks": {"from": lo, "to": hi},
                            "contribution": "person",
                        },
                    )
                    body = {**r.json(), "asked": (lo, hi)}
                    if r.status_code == 201 and odp:  # released in "low", or never run
                        cell = rng.choice(["low", None])
                        path = f"/v1/datasets/{ds}/invocations/{body['id']}"
                        done = (
                            h.post(f"{path}/settle", json={"cell": cell})
                            if cell
                            else h.post(f"{path}/cancel")
                        )
                        assert done.status_code == 200, done.text
                        body["kept"] = Decimal(done.json()["charge"]["epsilon"])
                    with lock:
                        answers.append((r.status_code, body))

        def curator() -> None:
            with httpx.Client(base_url=server.base_url, headers=AUTH, timeout=60) as h:
                for first in range(16, BUCKETS, 2):
                    r = h.post(
                        f"/v1/datasets/{ds}/blocks",
                        json={"open": {"from": first, "to": first + 1}},
                    )
                    assert r.status_code == 200, r.text

        threads = [threading.Thread(target=analyst, args=(i,)) for i in range(CLIENTS)]
        threads.append(threading.Thread(target=curator))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with httpx.Client(base_url=server.base_url, headers=AUTH, timeout=60) as c:
            page = c.get(f"/v1/datasets/{ds}/blocks", params={"limit": 1000}).json()
            entries = c.get(f"/v1/datasets/{ds}/ledger", params={"limit": 100_000}).json()
    statuses = Counter(f"{code} {body.get('error', '')}".strip() for code, body in answers)
    print(f"\n[{fresh_backend.name}] {dict(statuses)}")
    assert set(statuses) <= {"201", "409 BudgetExceeded", "409 BlockConflict"}, statuses
    assert statuses["201"] > 0 and statuses["409 BudgetExceeded"] > 0
    charged: dict[int, Decimal] = {b: Decimal(0) for b in range(BUCKETS)}
    for code, body in answers:
        if code == 201:
            for run in body["blocks"]:
                for b in range(int(run["from"]), int(run["to"]) + 1):
                    charged[b] += body.get("kept", EPSILON)
    served = {
        b: Decimal(run["status"]["spent"]["epsilon"])
        for run in page["runs"]
        for b in range(int(run["from"]), int(run["to"]) + 1)
    }
    assert set(served) == set(range(BUCKETS))
    for b in range(BUCKETS):
        assert served[b] == charged[b], f"block {b}"
        assert served[b] <= 1, f"block {b} overspent"
    for code, body in answers:
        if code == 409 and body["error"] == "BudgetExceeded":
            assert body["blocks"], body
            for run in body["blocks"]:  # what each had left then, reservations held included
                assert Decimal(run["remaining"]["epsilon"]) < EPSILON, run
    kinds = Counter(e["kind"] for e in entries["entries"])
    finished = kinds["invocation_settled"] + kinds["invocation_cancelled"]
    assert kinds["invocation_accepted"] + kinds["invocation_reserved"] == statuses["201"]
    assert finished == kinds["invocation_reserved"] == sum("kept" in b for _, b in answers)
    assert kinds["invocation_rejected"] == statuses["409 BudgetExceeded"]
    verdict = replay(entries["entries"])
    assert verdict.ok, verdict.problems
