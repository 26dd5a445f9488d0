"""One dataset's slow decision never holds another dataset's writes.

A decision is made slow in the test (the write path's call into the core's decision waits,
under the dataset's turn, until the test lets it go), on one partitioned dataset (a selection
of 100 scattered keys: the decisions that can be slow; on a whole dataset a decision under the
lock only looks up charges computed before it), by one caller. Meanwhile
another caller registers on another dataset, 100 times in a row: every one is answered, p99
under 50 ms (or, on a loaded machine, within twice the p99 of the same registrations with no
slow decision beside them, measured first), while the slow one is still deciding; then the
slow one is let go and admitted, and both ledgers hold what was answered. The process is set
to serve as it does under concurrent traffic (its registrations decided in threads, not
inline on the event loop).

On SQLite the write lock is the database's: before the write path decided outside the write
transaction (:func:`app.services.batching._decided_before_writing`), the other dataset's first
registration waited for the slow one's transaction, behind the write gate, and this test failed
(``assert still_deciding``: the quick registrations were answered only once the slow decision's
5 s wait ran out). On
PostgreSQL, row locks are per dataset and it passed before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db.uow import Database
from app.main import create_app
from app.services import registration
from app.settings import Settings
from tests.support import ADMIN_KEY, AUTH, Backend, grant, new_organisation, new_principal

SLOW = {"type": "pure_dp", "epsilon": "0.0123"}
QUICK = {"type": "pure_dp", "epsilon": "0.0001"}
FIRST_SEEN = {"type": "pure_dp", "epsilon": "0.01"}
#: a selection of 100 scattered keys (the decisions that can be slow are a large selection's)
KEYS = {"keys": list(range(3, 1000, 10))}


@pytest.fixture
def client(fresh_backend: Backend) -> Iterator[TestClient]:
    database = Database.from_settings(Settings(database_url=fresh_backend.url))
    settings = Settings(database_url=fresh_backend.url, admin_key=ADMIN_KEY)
    app = create_app(settings, database)
    app.state.registrar.alone = lambda: False  # as under concurrent traffic
    with TestClient(app) as c:
        yield c
    database.dispose()


def _dataset(
    client: TestClient, org: str, name: str, epsilon: str = "10", *, partitioned: bool = False
) -> str:
    """A dataset of ``org``; ``partitioned``: of 1,000 buckets, every block open, and one
    registration made on it (so that the process knows it is partitioned)."""
    body: dict[str, Any] = {
        "name": name,
        "budget": {"epsilon": epsilon, "delta": "0.00001"},
        "organisation_id": org,
    }
    if partitioned:
        body["partition"] = {"kind": "bucket", "unit": "record", "buckets": 1000}
    r = client.post("/v1/datasets", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    ds = str(r.json()["id"])
    if partitioned:
        r = client.post(
            f"/v1/datasets/{ds}/blocks", json={"open": {"from": 0, "to": 999}}, headers=AUTH
        )
        assert r.status_code == 200, r.text
        assert _register(client, ds, FIRST_SEEN, AUTH, KEYS).status_code == 201
    return ds


def _register(client: TestClient, ds: str, mechanism: Any, headers: Any, blocks: Any = None) -> Any:
    body = {"mechanism": mechanism} | ({} if blocks is None else {"blocks": blocks})
    return client.post(f"/v1/datasets/{ds}/invocations", json=body, headers=headers)


def _timed(client: TestClient, ds: str, headers: Any) -> list[float]:
    """100 registrations in a row on ``ds``: their latencies (each admitted)."""
    latencies = []
    for _ in range(100):
        started = time.perf_counter()
        r = _register(client, ds, QUICK, headers)
        latencies.append(time.perf_counter() - started)
        assert r.status_code == 201, r.text
    return latencies


def test_a_slow_decision_holds_no_other_dataset(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    org = new_organisation(client)
    slow_ds = _dataset(client, org, "slow", partitioned=True)
    quick_ds = _dataset(client, org, "quick")
    slow_id, slow_key = new_principal(client, org, "analyst", name="slow")
    quick_id, quick_key = new_principal(client, org, "analyst", name="quick")
    grant(client, slow_ds, slow_id)
    grant(client, quick_ds, quick_id)

    deciding, release = threading.Event(), threading.Event()
    original = registration.admit

    def admit(prepared: Any, *args: Any, **kwargs: Any) -> Any:
        if prepared.declaration_json == SLOW:
            deciding.set()
            release.wait(timeout=5)
        return original(prepared, *args, **kwargs)

    monkeypatch.setattr(registration, "admit", admit)
    alone = sorted(_timed(client, quick_ds, quick_key))  # the same, no slow decision running
    answered: list[Any] = []
    slow = threading.Thread(
        target=lambda: answered.append(_register(client, slow_ds, SLOW, slow_key, KEYS))
    )
    slow.start()
    try:
        assert deciding.wait(timeout=10), "the slow registration never reached its decision"
        latencies = _timed(client, quick_ds, quick_key)
        still_deciding = not release.is_set() and slow.is_alive()
    finally:
        release.set()
        slow.join(timeout=30)
    latencies.sort()
    p99, p99_alone = latencies[98], alone[98]
    assert still_deciding  # every quick registration was answered during the slow decision
    # 50 ms; on a machine so loaded that the same registrations without any slow decision
    # beside them take longer, within twice their p99 (side by side, in this run)
    assert p99 < max(0.050, 2 * p99_alone), f"p99 {1000 * p99:.0f} ms ({1000 * p99_alone:.0f})"
    assert answered and answered[0].status_code == 201, answered[0].text
    for ds, count in ((slow_ds, 2), (quick_ds, 200)):
        r = client.get(f"/v1/datasets/{ds}/ledger?limit=1000", headers=AUTH)
        kinds = [e["kind"] for e in r.json()["entries"]]
        assert kinds.count("invocation_accepted") == count, kinds


def test_a_write_between_deciding_and_writing_is_decided_again(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An organisation cap of ε 1 over two datasets (0.01 spent). While a registration of ε 0.6
    on the first (partitioned) decides (admitted on what it read), another caller's ε 0.7 on
    the second dataset is decided and committed: it moved the cap's state, not the first
    dataset's row. The first must not
    write what it decided (the cap would lose the 0.7): it is decided again, and refused by
    the cap.

    Shown able to fail: with the re-read rows' comparison removed from
    ``_decided_before_writing`` (writing whatever was decided), both were answered 201 and the
    cap's state kept the first's 0.6 alone. The ledger's unique ``seq`` does not catch this: the
    first dataset's ledger did not move. On PostgreSQL the first holds the organisation's row
    lock while it decides, so the second would wait for it: the test is SQLite's."""
    if client.app.state.database.engine.dialect.name != "sqlite":  # type: ignore[attr-defined]
        pytest.skip("on PostgreSQL the decision is made under the row locks")
    org = new_organisation(client)
    cap = {"epsilon": "1", "delta": "0.00001", "accounting": {"mode": "basic"}}
    r = client.patch(f"/v1/organisations/{org}/cap", json=cap, headers=AUTH)
    assert r.status_code == 200, r.text
    one, two = _dataset(client, org, "one", partitioned=True), _dataset(client, org, "two")
    other_id, other_key = new_principal(client, org, "analyst", name="other")
    grant(client, two, other_id)
    first = {"type": "pure_dp", "epsilon": "0.6"}
    second = {"type": "pure_dp", "epsilon": "0.7"}
    original = registration.admit
    answers: dict[str, Any] = {}

    def admit(prepared: Any, *args: Any, **kwargs: Any) -> Any:
        decided = original(prepared, *args, **kwargs)
        if prepared.declaration_json == first and "second" not in answers:
            other = threading.Thread(
                target=lambda: answers.update(second=_register(client, two, second, other_key))
            )
            other.start()
            other.join(timeout=30)
        return decided

    monkeypatch.setattr(registration, "admit", admit)
    answers["first"] = _register(client, one, first, AUTH, KEYS)
    assert answers["second"].status_code == 201, answers["second"].text
    assert answers["first"].status_code == 409, answers["first"].text
    assert "organisation" in answers["first"].json()["detail"]
    view = next(
        o
        for o in client.get("/v1/organisations", headers=AUTH).json()["organisations"]
        if o["id"] == org
    )
    assert view["spent"]["epsilon"] == "0.71", view  # 0.01 first seen, then the second's
    for ds in (one, two):
        report = client.get(f"/v1/datasets/{ds}/report", headers=AUTH).json()
        assert report["verification"]["ok"] is True
