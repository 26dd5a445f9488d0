"""One caller spends concurrently on several datasets of three organisations (one of them
capped) on a real multi-worker server, so that its registrations are grouped across datasets
(``app.writepath.groups``): every dataset's budget and the cap are spent exactly, no deadlock or
other server error reaches the client, and every ledger verifies."""

from __future__ import annotations

import http.client
import json
import threading
from collections import Counter
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from sqlalchemy import text

from app.db.uow import Database, UnitOfWork
from app.services.ledger import verify_ledger
from app.services.principals import Principal, Role
from app.settings import Settings
from tests.concurrency.server import running_server
from tests.support import AUTH, Backend

CLIENTS = 16
PER_CLIENT = 24
WORKERS = 3
BUDGET, EPSILON, CAP = "0.5", "0.05", "0.6"  # 10 admitted per dataset, 12 under the cap
#: organisation name → whether it has a cap; two datasets each
ORGANISATIONS = {"free-1": False, "free-2": False, "capped": True}


def _setup(base: str) -> dict[str, str]:
    """The datasets, each with the name of its organisation."""
    datasets: dict[str, str] = {}
    with httpx.Client(base_url=base, headers=AUTH, timeout=30) as c:
        for name, capped in ORGANISATIONS.items():
            org = c.post("/v1/organisations", json={"name": name}).json()["id"]
            if capped:
                cap = {"epsilon": CAP, "delta": 0}
                c.patch(f"/v1/organisations/{org}/cap", json=cap).raise_for_status()
            for i in range(2):
                body = {
                    "name": f"{name}-{i}",
                    "budget": {"epsilon": BUDGET, "delta": 0},
                    "organisation_id": org,
                }
                r = c.post("/v1/datasets", json=body)
                r.raise_for_status()
                datasets[r.json()["id"]] = name
    return datasets


def _drive(base: str, datasets: list[str]) -> tuple[Counter[str], Counter[str], list[str]]:
    """Statuses, admissions per dataset, and the bodies of any answer that is not 201/409."""
    body = json.dumps({"mechanism": {"type": "pure_dp", "epsilon": EPSILON}})
    headers = {**AUTH, "content-type": "application/json"}
    url = urlsplit(base)
    lock = threading.Lock()
    start = threading.Barrier(CLIENTS)
    statuses: Counter[str] = Counter()
    admitted: Counter[str] = Counter()
    odd: list[str] = []

    def client(n: int) -> None:
        conn = http.client.HTTPConnection(str(url.hostname), url.port, timeout=60)
        start.wait()
        try:
            for i in range(PER_CLIENT):
                ds = datasets[(n + i) % len(datasets)]
                conn.request("POST", f"/v1/datasets/{ds}/invocations", body=body, headers=headers)
                response = conn.getresponse()
                status, payload = response.status, response.read().decode()
                with lock:
                    if status == 201:
                        statuses["201"] += 1
                        admitted[ds] += 1
                    elif status == 409:
                        statuses[f"409 {json.loads(payload).get('level')}"] += 1
                    else:
                        statuses[str(status)] += 1
                        odd.append(payload)
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses, admitted, odd


def test_one_caller_on_many_datasets_spends_every_budget_exactly(
    fresh_backend: Backend, tmp_path: Path
) -> None:
    with running_server(
        fresh_backend.url, tmp_path / "server.log", workers=WORKERS, preload=True
    ) as server:
        datasets = _setup(server.base_url)
        statuses, admitted, odd = _drive(server.base_url, list(datasets))
        log = server.log()
    per_dataset = int(Decimal(BUDGET) / Decimal(EPSILON))
    under_cap = int(Decimal(CAP) / Decimal(EPSILON))
    assert odd == []
    assert "deadlock" not in log.lower() and "Traceback" not in log
    free = [ds for ds, org in datasets.items() if org != "capped"]
    capped = [ds for ds, org in datasets.items() if org == "capped"]
    assert [admitted[ds] for ds in free] == [per_dataset] * len(free)
    assert sum(admitted[ds] for ds in capped) == under_cap
    assert statuses["201"] == per_dataset * len(free) + under_cap
    assert sum(statuses.values()) == CLIENTS * PER_CLIENT
    database = Database.from_settings(Settings(database_url=fresh_backend.url))
    try:
        admin = Principal("admin", Role.ADMIN, None)
        for ds in datasets:
            verdict = verify_ledger(UnitOfWork(database), admin, ds)
            assert verdict.ok, verdict.problems
        if database.engine.dialect.name == "postgresql":
            # a deadlock would be retried (each request alone) and never reach a client: the
            # server counts them (its backends report on exit, and the server has stopped)
            with database.engine.connect() as conn:
                deadlocks = conn.execute(
                    text(
                        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
                    )
                ).scalar_one()
            assert deadlocks == 0
    finally:
        database.dispose()
