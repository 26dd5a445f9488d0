"""Idempotency storm: many concurrent requests with the same key have exactly one effect."""

from __future__ import annotations

import threading

from app.accounting import parse_declaration
from app.db.uow import Database, UnitOfWork
from app.services import datasets, invocations
from app.services.errors import IdempotencyConflict
from app.services.principals import Principal, Role

# Acting with every role (analysts need a grant; the storm is about idempotency).
ALICE = Principal("alice", Role.ADMIN, None)
THREADS = 16


def test_same_key_from_many_threads_has_one_effect(database: Database) -> None:
    ds = datasets.create_dataset(
        UnitOfWork(database),
        ALICE,
        datasets.NewDataset("storm", "1", "0", "add_remove", {"mode": "basic"}),
    )
    request = invocations.InvocationRequest(
        parse_declaration({"type": "pure_dp", "epsilon": "0.1"})
    )
    barrier = threading.Barrier(THREADS)
    bodies: list[str] = []
    conflicts: list[str] = []
    lock = threading.Lock()

    def client(key: str) -> None:
        barrier.wait()
        try:
            r = invocations.register_invocation(UnitOfWork(database), ALICE, ds["id"], request, key)
        except IdempotencyConflict as exc:  # allowed: "the stored response or 409"
            with lock:
                conflicts.append(exc.code)
            return
        with lock:
            bodies.append(r.body)

    # half the threads share one key, the other half another key
    threads = [threading.Thread(target=client, args=(f"storm-{i % 2}",)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert len(bodies) + len(conflicts) == THREADS
    assert len(set(bodies)) == 2  # one stored response per key, byte-identical for every caller
    uow = UnitOfWork(database)
    with uow.read_only():
        rows = uow.ledger.page(ds["id"], after_seq=0, limit=100, up_to_seq=100)
        kinds = [r.kind for r in rows]
        spent = rows[-1].state["spent_epsilon"]
    assert kinds == ["dataset_created", "invocation_accepted", "invocation_accepted"]
    assert spent == "0.2"
