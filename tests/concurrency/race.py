"""The spend-race driver and its checker, shared by the real and the broken
build so that the broken build proves the checker can fail."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from urllib.parse import urlsplit

import httpx

from app.db.uow import Database, UnitOfWork
from app.services.ledger import verify_ledger
from app.services.principals import Principal, Role
from app.settings import Settings
from tests.support import AUTH

ADMIN = Principal("admin", Role.ADMIN, None)


@dataclass
class RaceResult:
    budget: Decimal
    epsilon: Decimal
    sent: int
    statuses: Counter[str] = field(default_factory=Counter)
    accepted_charges: list[Decimal] = field(default_factory=list)
    transport_errors: int = 0
    ledger_accepted: int = 0
    ledger_spent: Decimal = Decimal(0)
    replay_problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def accepted_total(self) -> Decimal:
        return sum(self.accepted_charges, Decimal(0))

    @property
    def expected_accepted(self) -> int:
        return int(self.budget // self.epsilon)

    @property
    def overspend(self) -> Decimal:
        return max(self.accepted_total - self.budget, Decimal(0))

    def problems(self) -> list[str]:
        """Everything the checker objects to (empty = the run is correct)."""
        out: list[str] = []
        if self.accepted_total > self.budget:
            out.append(f"overspend: accepted {self.accepted_total} > budget {self.budget}")
        if len(self.accepted_charges) != self.expected_accepted:
            out.append(
                f"accepted {len(self.accepted_charges)} != floor(budget/eps) = "
                f"{self.expected_accepted}"
            )
        five_xx = sum(n for s, n in self.statuses.items() if s.startswith("5"))
        if five_xx:
            out.append(f"{five_xx} responses were 5xx")
        unexpected = {
            s: n for s, n in self.statuses.items() if s not in ("201", "409 BudgetExceeded")
        }
        if unexpected:
            out.append(f"unexpected responses: {unexpected}")
        if self.transport_errors:
            out.append(f"{self.transport_errors} transport errors")
        if self.ledger_accepted != len(self.accepted_charges):
            out.append(
                f"ledger has {self.ledger_accepted} accepted entries, "
                f"clients saw {len(self.accepted_charges)}"
            )
        if self.ledger_spent != self.accepted_total:
            out.append(f"stored spent {self.ledger_spent} != acknowledged {self.accepted_total}")
        out.extend(f"replay: {p}" for p in self.replay_problems)
        return out


def _drive(
    base_url: str, dataset_id: str, epsilon: str, clients: int, per_client: int, result: RaceResult
) -> None:
    """``clients`` threads, each with its own keep-alive connection (stdlib http.client: far
    less client CPU than an async client, which matters on a small machine)."""
    body = json.dumps({"mechanism": {"type": "pure_dp", "epsilon": epsilon}})
    headers = {**AUTH, "content-type": "application/json"}
    path = f"/v1/datasets/{dataset_id}/invocations"
    host, port = urlsplit(base_url).hostname, urlsplit(base_url).port
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def one_client() -> None:
        conn = http.client.HTTPConnection(str(host), port, timeout=60)
        start.wait()
        try:
            for _ in range(per_client):
                try:
                    conn.request("POST", path, body=body, headers=headers)
                    response = conn.getresponse()
                    status, payload = response.status, response.read()
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = http.client.HTTPConnection(str(host), port, timeout=60)
                    with lock:
                        result.transport_errors += 1
                    continue
                with lock:
                    if status == 201:
                        result.statuses["201"] += 1
                        charge = json.loads(payload)["charge"]["epsilon"]
                        result.accepted_charges.append(Decimal(charge))
                    elif status == 409:
                        result.statuses[f"409 {json.loads(payload).get('error')}"] += 1
                    else:
                        result.statuses[str(status)] += 1
        finally:
            conn.close()

    threads = [threading.Thread(target=one_client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_race(
    base_url: str,
    database_url: str,
    *,
    budget: str,
    epsilon: str,
    clients: int,
    per_client: int,
) -> RaceResult:
    """Create a basic dataset, fire ``clients × per_client`` pure-DP registrations
    concurrently, then audit responses, the stored state and the ledger replay."""
    created = httpx.post(
        f"{base_url}/v1/datasets",
        json={"name": "race", "budget": {"epsilon": budget, "delta": "0"}},
        headers=AUTH,
        timeout=30,
    )
    created.raise_for_status()
    dataset_id = created.json()["id"]
    result = RaceResult(Decimal(budget), Decimal(epsilon), clients * per_client)
    began = time.monotonic()
    _drive(base_url, dataset_id, epsilon, clients, per_client, result)
    result.seconds = time.monotonic() - began
    database = Database.from_settings(Settings(database_url=database_url))
    try:
        uow = UnitOfWork(database)
        verdict = verify_ledger(uow, ADMIN, dataset_id)
        result.replay_problems = verdict.problems[:5]
        with uow.read_only():
            rows = uow.ledger.page(dataset_id, after_seq=0, limit=10**7, up_to_seq=10**9)
            result.ledger_accepted = sum(1 for r in rows if r.kind == "invocation_accepted")
            ds = uow.datasets.get(dataset_id)
            assert ds is not None
            result.ledger_spent = Decimal(ds.state_json["spent_epsilon"])
    finally:
        database.dispose()
    return result
