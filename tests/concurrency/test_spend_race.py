"""The spend race against a real multi-worker server, and the same checker
against deliberately broken builds to prove it can fail.

Size: 64 concurrent clients; ``ODOMETER_RACE_REQUESTS`` requests each (default 50, so that
both backends, the broken builds included, finish in about two minutes on a 2-core machine);
``ODOMETER_LONG_TESTS=1`` runs the full 64 × 200 of the specification.
"""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path

from tests.concurrency.race import RaceResult, run_race
from tests.concurrency.server import running_server
from tests.support import Backend

CLIENTS = 64
PER_CLIENT = (
    200
    if os.environ.get("ODOMETER_LONG_TESTS") == "1"
    else int(os.environ.get("ODOMETER_RACE_REQUESTS", "50"))
)
BROKEN_PER_CLIENT = 10
WORKERS = 3
BUDGET, EPSILON = "2.5", "0.01"  # admits exactly 250 requests


def _race(backend: Backend, tmp_path: Path, factory: str, per_client: int) -> RaceResult:
    with running_server(
        backend.url, tmp_path / "server.log", workers=WORKERS, factory=factory, preload=True
    ) as server:
        result = run_race(
            server.base_url,
            backend.url,
            budget=BUDGET,
            epsilon=EPSILON,
            clients=CLIENTS,
            per_client=per_client,
        )
    print(
        f"\n[{backend.name} {factory}] {result.sent} requests in {result.seconds:.1f}s: "
        f"{dict(result.statuses)}; accepted total {result.accepted_total} of budget {BUDGET}; "
        f"overspend {result.overspend}"
    )
    return result


def test_spend_race_never_overspends(fresh_backend: Backend, tmp_path: Path) -> None:
    result = _race(fresh_backend, tmp_path, "app.main:create_app", PER_CLIENT)
    assert result.problems() == []
    assert result.accepted_total == Decimal(BUDGET)
    assert len(result.accepted_charges) == 250
    assert result.statuses == {"201": 250, "409 BudgetExceeded": CLIENTS * PER_CLIENT - 250}


def test_stale_check_build_overspends_and_is_caught(fresh_backend: Backend, tmp_path: Path) -> None:
    """Read-check-write with the check outside the lock: the checker must see the overspend.
    Overspending needs actual interleaving; a run without it is retried (at most 3 runs)."""
    for attempt in range(3):
        result = _race(
            fresh_backend,
            tmp_path,
            "tests.concurrency.broken_app:create_stale_check_app",
            BROKEN_PER_CLIENT,
        )
        if result.overspend > 0:
            break
        print(f"attempt {attempt + 1}: no interleaving happened, retrying")
    assert result.overspend > 0
    problems = result.problems()
    assert any(p.startswith("overspend") for p in problems), problems
    assert any(p.startswith("replay") for p in problems), problems


def test_unlocked_build_is_caught_by_the_backstops(fresh_backend: Backend, tmp_path: Path) -> None:
    """FOR UPDATE removed and SQLite's BEGIN deferred: the unique (dataset_id, seq) constraint
    (PostgreSQL) and SQLite's snapshot rule turn the race into failed requests, which the
    checker reports, but never into an overspend. Failures need actual interleaving; a run
    without it (seen once in a full-suite run on a loaded machine) is retried, at most 3 runs."""
    for attempt in range(3):
        result = _race(
            fresh_backend,
            tmp_path,
            "tests.concurrency.broken_app:create_unlocked_app",
            BROKEN_PER_CLIENT,
        )
        assert result.overspend == 0
        if result.problems():
            break
        print(f"attempt {attempt + 1}: no interleaving happened, retrying")
    assert result.overspend == 0
    assert result.problems() != []
    failures = {s: n for s, n in result.statuses.items() if s not in ("201", "409 BudgetExceeded")}
    assert failures, result.statuses
