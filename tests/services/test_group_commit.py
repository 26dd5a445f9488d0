"""Group commit in the invocations service: registrations of one caller on one dataset that
arrive while an earlier one is being written share the next transaction, are decided one after
another in arrival order, and each gets its own answer (SQLite and PostgreSQL).

Shown able to fail: with ``_decide_group`` deciding every member on the state the group's lock
read (not on the state the previous member left), the budget test failed on SQLite and
PostgreSQL: all six requests of a budget for four were admitted."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from functools import partial
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError

from app.db import driver, writes
from app.db.uow import Database, UnitOfWork
from app.services import datasets, idempotency, invocations, organisations
from app.services.batching import Registrar
from app.services.errors import IdempotencyKeyReused, NotFound
from app.services.idempotency import RecordedResponse
from app.services.principals import Principal, Role
from app.services.registration import InvocationRequest, Registration
from app.writepath import admission, write_path
from app.writepath.groups import GroupCommit
from app.writepath.stored import stored
from odometer_core.accounting import parse_declaration
from odometer_core.ledger.chain import verify_chain
from tests.support import service_dataset

ADMIN = Principal("admin", Role.ADMIN, None)
PURE = {"type": "pure_dp", "epsilon": "0.25"}
#: one registration: the dataset, the declaration, the idempotency key
Call = tuple[str, dict[str, Any], str | None]


@pytest.fixture
def grouped(database: Database) -> Database:
    return database


class HeldCommit:
    """The service's commit seam, counting; the first commit waits until released, so that
    the requests behind it gather."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0
        self.real = idempotency.commit

    def __call__(self, uow: UnitOfWork) -> None:
        self.calls += 1
        if self.calls == 1:
            assert self.release.wait(10)
        self.real(uow)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldCommit]:
    commit = HeldCommit()
    monkeypatch.setattr(idempotency, "commit", commit)
    yield commit
    commit.release.set()


async def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.001)


def _waiting(groups: GroupCommit[Any, Any], key: str, n: int) -> bool:
    return groups.waiting(key) == n


def _register_in_order(
    database: Database,
    dataset_id: str,
    calls: list[tuple[dict[str, Any], str | None]],
    release: threading.Event,
) -> list[RecordedResponse | BaseException]:
    """Register ``calls`` (declaration, idempotency key) on ``dataset_id``, as
    :func:`_register_across` does."""
    return _register_across(database, [(dataset_id, d, k) for d, k in calls], release)


def _register_across(
    database: Database,
    calls: list[Call],
    release: threading.Event,
) -> list[RecordedResponse | BaseException]:
    """Register ``calls`` (dataset, declaration, idempotency key) as the HTTP route does, one
    coroutine each, each started once the previous one is in line behind the first (held)
    commit; then release it."""
    groups: GroupCommit[Registration, RecordedResponse] = GroupCommit(64)
    registrar = Registrar(database, None, groups, alone=lambda: False)

    async def main() -> list[RecordedResponse | BaseException]:
        started = []
        for i, (dataset_id, declaration, key) in enumerate(calls):
            request = InvocationRequest(parse_declaration(declaration))
            call = registrar.register(ADMIN, dataset_id, request, key)
            started.append(asyncio.ensure_future(call))
            if i > 0:  # the first holds its commit; the others line up behind it, in order
                await _until(partial(_waiting, groups, ADMIN.id, i))
            else:
                await asyncio.sleep(0.05)
        release.set()
        return list(await asyncio.gather(*started, return_exceptions=True))

    return asyncio.run(asyncio.wait_for(main(), 20))


def _ledger(database: Database, dataset_id: str) -> list[dict[str, Any]]:
    uow = UnitOfWork(database)
    with uow.read_only():
        rows = uow.ledger.page(dataset_id, after_seq=0, limit=1000, up_to_seq=10**9)
        return [r.to_export() for r in rows]


def _body(outcome: object) -> dict[str, Any]:
    assert isinstance(outcome, RecordedResponse), outcome
    body: dict[str, Any] = json.loads(outcome.body)
    return body


def test_a_group_spends_in_arrival_order_and_refuses_past_the_budget(
    grouped: Database, held: HeldCommit
) -> None:
    ds = service_dataset(UnitOfWork(grouped), "group", epsilon="1")  # four charges of 0.25 fit
    outcomes = _register_in_order(grouped, ds, [(PURE, None)] * 6, held.release)
    statuses = [o.outcome for o in outcomes if isinstance(o, RecordedResponse)]
    assert statuses == ["created"] * 4 + ["BudgetExceeded"] * 2
    # one commit for the first, one for the five that waited behind it
    assert held.calls == 2
    seqs = [_body(o)["ledger_seq"] for o in outcomes]
    assert seqs == [2, 3, 4, 5, 6, 7]
    remaining = [Decimal(_body(o)["remaining"]["epsilon"]) for o in outcomes[:4]]
    assert remaining == [Decimal("0.75"), Decimal("0.5"), Decimal("0.25"), Decimal("0")]
    entries = _ledger(grouped, ds)
    assert [e["seq"] for e in entries] == [1, 2, 3, 4, 5, 6, 7]
    assert [e["kind"] for e in entries[1:]] == ["invocation_accepted"] * 4 + [
        "invocation_rejected"
    ] * 2
    assert verify_chain(entries) == []


def test_a_key_repeated_inside_a_group_replays_the_first_answer(
    grouped: Database, held: HeldCommit
) -> None:
    ds = service_dataset(UnitOfWork(grouped), "group-keys", epsilon="10")
    other = {"type": "pure_dp", "epsilon": "0.5"}
    outcomes = _register_in_order(
        grouped,
        ds,
        [(PURE, "first"), (PURE, "k"), (PURE, "k"), (other, "k"), (PURE, None)],
        held.release,
    )
    first, again = outcomes[1], outcomes[2]
    assert isinstance(first, RecordedResponse)
    assert isinstance(again, RecordedResponse)
    assert not first.replayed and again.replayed and again.body == first.body
    assert isinstance(outcomes[3], IdempotencyKeyReused)  # same key, another request: 422
    assert _body(outcomes[4])["ledger_seq"] == 4
    assert [e["seq"] for e in _ledger(grouped, ds)] == [1, 2, 3, 4]


def test_a_failed_group_is_not_half_applied_and_each_request_is_answered_alone(
    grouped: Database, held: HeldCommit, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = service_dataset(UnitOfWork(grouped), "group-fail", epsilon="10")
    real_write = writes.write
    failed: list[int] = []

    def write(conn: Any, writes: Any, *args: Any) -> None:
        if len(writes.ledger) > 1 and not failed:  # the group's write fails once
            failed.append(len(writes.ledger))
            real_write(conn, writes, *args)  # written, then the transaction is lost
            raise IntegrityError("INSERT", {}, Exception("ledger_entries: lost connection"))
        real_write(conn, writes, *args)

    monkeypatch.setattr(idempotency, "write", write)
    outcomes = _register_in_order(
        grouped, ds, [(PURE, None), (PURE, "a"), (PURE, "b"), (PURE, None)], held.release
    )
    assert failed == [3]
    assert [_body(o)["ledger_seq"] for o in outcomes] == [2, 3, 4, 5]
    entries = _ledger(grouped, ds)
    assert [e["seq"] for e in entries] == [1, 2, 3, 4, 5]
    assert verify_chain(entries) == []


# ---------------------------------------------------------------------------- across datasets
def _seqs(database: Database, dataset_id: str) -> list[int]:
    entries = _ledger(database, dataset_id)
    assert verify_chain(entries) == []
    return [e["seq"] for e in entries]


def test_a_group_spans_the_caller_s_datasets_in_one_transaction(
    grouped: Database, held: HeldCommit
) -> None:
    """Requests of one caller on three datasets that wait behind the first share one commit;
    on each dataset they are decided in arrival order, on the state the previous one left."""
    a, b, c = (service_dataset(UnitOfWork(grouped), f"across-{n}", epsilon="1") for n in "abc")
    half = {"type": "pure_dp", "epsilon": "0.5"}
    calls: list[Call] = [
        (a, PURE, None),
        (b, half, None),
        (c, PURE, None),
        (b, half, None),
        (b, half, None),
    ]
    calls += [(a, PURE, "across-ka")]
    outcomes = _register_across(grouped, calls, held.release)
    assert held.calls == 2  # the first alone, the five behind it together
    statuses = [o.outcome for o in outcomes if isinstance(o, RecordedResponse)]
    assert statuses == ["created"] * 4 + ["BudgetExceeded", "created"]
    assert [_body(o)["ledger_seq"] for o in outcomes] == [2, 2, 2, 3, 4, 3]
    assert [_body(outcomes[i])["remaining"]["epsilon"] for i in (0, 1, 2, 3, 5)] == [
        "0.75",
        "0.5",
        "0.75",
        "0",
        "0.5",
    ]
    assert _seqs(grouped, a) == [1, 2, 3]
    assert _seqs(grouped, b) == [1, 2, 3, 4]
    assert _seqs(grouped, c) == [1, 2]


def test_a_dataset_the_caller_may_not_see_is_refused_and_the_group_goes_on(
    grouped: Database, held: HeldCommit
) -> None:
    a, b = (service_dataset(UnitOfWork(grouped), f"seen-{n}", epsilon="1") for n in "ab")
    calls: list[Call] = [
        (a, PURE, None),
        (b, PURE, None),
        ("ds_missing", PURE, None),
        (a, PURE, None),
    ]
    outcomes = _register_across(grouped, calls, held.release)
    assert isinstance(outcomes[2], NotFound)
    assert [_body(outcomes[i])["ledger_seq"] for i in (0, 1, 3)] == [2, 2, 3]
    assert held.calls == 2
    assert _seqs(grouped, a) == [1, 2, 3] and _seqs(grouped, b) == [1, 2]


def _capped_dataset(database: Database, name: str, cap: str) -> str:
    """A dataset (ε = 10) of an organisation of its own whose cap is ``cap``."""
    org = organisations.create_organisation(UnitOfWork(database), ADMIN, f"org-{name}")["id"]
    organisations.set_cap(UnitOfWork(database), ADMIN, org, (cap, "0"))
    new = datasets.NewDataset(name, "10", "0.00001", "add_remove", {"mode": "basic"}, org)
    return str(datasets.create_dataset(UnitOfWork(database), ADMIN, new)["id"])


def test_a_dataset_under_a_known_cap_gets_a_transaction_of_its_own(
    grouped: Database, held: HeldCommit
) -> None:
    """Its organisation row is held alone, so it is not locked together with other datasets
    (two such transactions could wait on each other's organisation row)."""
    a, b = (service_dataset(UnitOfWork(grouped), f"free-{n}", epsilon="1") for n in "ab")
    capped = _capped_dataset(grouped, "known", cap="0.5")
    write_path(grouped).org_modes.learn(capped, True)
    calls: list[Call] = [
        (a, PURE, None),
        (capped, PURE, None),
        (b, PURE, None),
        (capped, PURE, None),
    ]
    calls += [(capped, PURE, None)]
    outcomes = _register_across(grouped, calls, held.release)
    assert held.calls == 3  # the first; a and b together; the capped dataset's three
    statuses = [o.outcome for o in outcomes if isinstance(o, RecordedResponse)]
    assert statuses == ["created"] * 4 + ["BudgetExceeded"]
    assert _seqs(grouped, capped) == [1, 2, 3, 4]


def test_a_cap_found_in_force_runs_the_group_again_each_alone(
    grouped: Database, held: HeldCommit
) -> None:
    """The process guessed no cap: the shared transaction may not roll back and lock again
    (it holds the other dataset's work), so nothing of it is committed and each request is
    decided alone, the cap included."""
    a = service_dataset(UnitOfWork(grouped), "guess-a", epsilon="1")
    capped = _capped_dataset(grouped, "unknown", cap="0.5")
    calls: list[Call] = [
        (a, PURE, None),
        (capped, PURE, None),
        (a, PURE, None),
        (capped, PURE, None),
    ]
    calls += [(capped, PURE, None)]
    outcomes = _register_across(grouped, calls, held.release)
    statuses = [o.outcome for o in outcomes if isinstance(o, RecordedResponse)]
    assert statuses == ["created"] * 4 + ["BudgetExceeded"]
    assert held.calls == 5  # the first; then each of the four alone
    assert write_path(grouped).org_modes.guess(capped) == "update"
    assert _seqs(grouped, a) == [1, 2, 3] and _seqs(grouped, capped) == [1, 2, 3, 4]


def test_a_keyed_registration_locked_again_for_a_cap_reads_its_key_again(
    database: Database,
) -> None:
    """The stored responses are read right after the lock statement; when the levels are
    locked again (a cap in force where none was known), what the first transaction read is
    forgotten and read again under the new lock, and the key still replays."""
    capped = _capped_dataset(database, f"keyed-{time.monotonic_ns()}", cap="0.5")
    assert write_path(database).org_modes.guess(capped) == "share"
    key = f"cap-{capped}"
    request = InvocationRequest(parse_declaration(PURE))
    first = invocations.register_invocation(UnitOfWork(database), ADMIN, capped, request, key)
    assert write_path(database).org_modes.guess(capped) == "update"
    again = invocations.register_invocation(UnitOfWork(database), ADMIN, capped, request, key)
    assert not first.replayed and again.replayed and again.body == first.body
    kinds = [e["kind"] for e in _ledger(database, capped)]
    assert kinds.count("invocation_accepted") == 1


def test_a_rollback_forgets_what_the_transaction_read_and_kept(database: Database) -> None:
    uow = UnitOfWork(database)
    key = f"rolled-back-{time.monotonic_ns()}"
    with uow.core():
        stored(uow).remember("admin", key, admission.StoredResponse("f", "created", "{}"))
        assert stored(uow).get("admin", key) is not None
        uow.rollback()
        assert stored(uow).get("admin", key) is None  # never stored: read from the database


def test_a_failed_group_across_datasets_is_not_half_applied(
    grouped: Database, held: HeldCommit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's one write (both datasets' entries and new heads) fails after it was
    written: nothing of the group is committed, and each request is answered alone."""
    a, b = (service_dataset(UnitOfWork(grouped), f"half-{n}", epsilon="1") for n in "ab")
    real_write = writes.write
    written: list[list[str]] = []

    def write(conn: Any, writes: Any, datasets: Any, *args: Any) -> None:
        written.append(sorted(d.id for d in datasets))
        real_write(conn, writes, datasets, *args)
        if len(written) == 2:  # the group's write (after the first request's own)
            raise IntegrityError("INSERT", {}, Exception("ledger_entries: lost connection"))

    monkeypatch.setattr(idempotency, "write", write)
    calls: list[Call] = [(a, PURE, None), (a, PURE, None), (b, PURE, None), (a, PURE, None)]
    outcomes = _register_across(grouped, calls, held.release)
    assert written == [[a], sorted([a, b]), [a], [b], [a]]  # then each request alone
    assert [_body(o)["ledger_seq"] for o in outcomes] == [2, 3, 2, 4]
    assert _seqs(grouped, a) == [1, 2, 3, 4] and _seqs(grouped, b) == [1, 2]


def test_a_long_group_write_is_sent_with_native_placeholders(
    grouped: Database, held: HeldCommit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group's write statement longer than psycopg caches the parse of goes out with
    PostgreSQL's own placeholders (parsed once per shape, here), and lands as any other."""
    ds = service_dataset(UnitOfWork(grouped), "native", epsilon="10")
    sent: list[int] = []
    real_native = driver._native

    def native(sql: str) -> tuple[str, tuple[str, ...]]:
        text, names = real_native(sql)
        sent.append(len(names))
        return text, names

    monkeypatch.setattr(driver, "_native", native)
    outcomes = _register_in_order(
        grouped, ds, [(PURE, f"native-{i}") for i in range(12)], held.release
    )
    assert [_body(o)["ledger_seq"] for o in outcomes] == list(range(2, 14))
    assert _seqs(grouped, ds) == list(range(1, 14))
    if grouped.engine.dialect.name == "postgresql":
        assert len(sent) == 1 and sent[0] > 100  # the eleven's write, not the first's
    else:
        assert sent == []


def test_a_short_group_write_with_many_parameters_is_sent_with_native_placeholders(
    grouped: Database, held: HeldCommit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg caches no parse of a statement with more than 50 parameters, however short: a
    group of two's write on one dataset (79 parameters, 2.4 KB) goes out natively too; one
    registration's (42) does not."""
    ds = service_dataset(UnitOfWork(grouped), "native-two", epsilon="10")
    sent: list[tuple[int, int]] = []
    real_native = driver._native

    def native(sql: str) -> tuple[str, tuple[str, ...]]:
        text, names = real_native(sql)
        sent.append((len(sql), len(names)))
        return text, names

    monkeypatch.setattr(driver, "_native", native)
    outcomes = _register_in_order(grouped, ds, [(PURE, f"two-{i}") for i in range(3)], held.release)
    assert [_body(o)["ledger_seq"] for o in outcomes] == [2, 3, 4]
    assert _seqs(grouped, ds) == [1, 2, 3, 4]
    if grouped.engine.dialect.name == "postgresql":
        assert len(sent) == 1
        length, parameters = sent[0]
        assert length <= driver.PARSE_CACHED_UP_TO
        assert parameters > driver.PARSE_CACHED_PARAMS
    else:
        assert sent == []


def test_native_placeholders_are_numbered_in_order_of_appearance() -> None:
    text, names = driver._native("INSERT INTO t (a, b) VALUES (%(a0)s, CAST(%(b0)s AS JSON))")
    assert text == "INSERT INTO t (a, b) VALUES ($1, CAST($2 AS JSON))"
    assert names == ("a0", "b0")
