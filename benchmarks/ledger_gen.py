"""Generate long, realistic ledgers without HTTP or a database.

Each entry is built exactly as the service builds it (``app.services._aggregate.append_entry``
with the arguments of ``app.services.datasets.create_dataset`` / ``change_budget`` and
``app.services.invocations.register_invocation`` / ``_finish_reservation``): the same pure
accounting calls (``make_config``, ``admit``, ``settle``, ``cancel``, ``change_budget``), the
same payload fields and :func:`odometer_core.ledger.chain.entry_hash`. Only the database round
trips are
left out, which makes 10^6 entries feasible. ``tests/reliability/test_tampering.py`` checks the
equivalence against a ledger written through the real services.

The history is mixed: accepted (``pure_dp``), reserved (``odp``, ``ptr``) then settled or
cancelled, rejected (a request above the remaining budget) and budget changes. Generation is a
generator (:func:`generate`), so a file of any length is written in bounded memory.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO, cast

from odometer_core.accounting import (
    ACCOUNTING_VERSION,
    Reservation,
    admit,
    cancel,
    change_budget,
    config_to_json,
    initial_state,
    make_config,
    parse_declaration,
    settle,
    state_to_json,
)
from odometer_core.accounting.amounts import amount_json
from odometer_core.ledger import EntryKind, next_entry


@dataclass(frozen=True, slots=True)
class Op:
    """One service call: ``register`` (mechanism), ``settle`` / ``cancel`` (an open
    reservation, by index among the open ones) or ``budget`` (new ε, δ)."""

    kind: str
    mechanism: dict[str, Any] | None = None
    pick: int = 0
    cell: str | None = None
    epsilon: str | None = None
    delta: str | None = None
    actor: str = "admin"


DATASET_NAME = "generated"
ACCOUNTING: dict[str, Any] = {"mode": "basic"}
ACTORS = ("admin", "alice", "bob", "carol")
_ODP = {
    "type": "odp",
    "cells": [{"name": "a", "epsilon": "0.001"}, {"name": "b", "epsilon": "0.004"}],
    "delta": "0",
}


def random_ops(n: int, seed: int = 0) -> Iterator[Op]:
    """``n`` service calls of a plausible mixed history (the first one is not included: the
    dataset creation is always entry 1)."""
    rng = random.Random(seed)
    open_count = 0
    budget = 10
    for _ in range(n):
        actor = ACTORS[rng.randrange(len(ACTORS))]
        r = rng.random()
        if open_count and r < 0.25:
            open_count -= 1
            if rng.random() < 0.7:
                cell = rng.choice(("a", "b"))
                yield Op("settle", pick=rng.randrange(open_count + 1), cell=cell, actor=actor)
            else:
                yield Op("cancel", pick=rng.randrange(open_count + 1), actor=actor)
        elif r < 0.27:
            yield Op("register", {"type": "pure_dp", "epsilon": "1000000"}, actor=actor)
        elif r < 0.275:
            budget += 10
            yield Op("budget", epsilon=str(budget), delta="0.001", actor="admin")
        elif r < 0.45 and open_count < 50:
            open_count += 1
            yield Op("register", dict(_ODP), actor=actor)
        else:
            eps = f"0.000{rng.randrange(1, 10)}"
            yield Op("register", {"type": "pure_dp", "epsilon": eps}, actor=actor)


def generate(
    n: int,
    seed: int = 0,
    *,
    dataset_id: str = "ds_generated",
    epsilon: str = "10",
    delta: str = "0.001",
    start: datetime | None = None,
) -> Iterator[dict[str, Any]]:
    """``n`` ledger entries (as exported: every payload field plus ``hash``)."""
    clock = start or datetime(2026, 1, 1, tzinfo=UTC)
    yield from build(
        random_ops(n - 1, seed),
        dataset_id=dataset_id,
        epsilon=epsilon,
        delta=delta,
        ids=(f"inv_{i:032x}" for i in range(1, 1 << 62)),
        times=(
            (clock + timedelta(milliseconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            for i in range(1 << 62)
        ),
    )


def build(
    ops: Iterator[Op] | list[Op],
    *,
    dataset_id: str,
    epsilon: str,
    delta: str,
    ids: Iterator[str],
    times: Iterator[str],
    creator: str = "admin",
    organisation: str = "default",
) -> Iterator[dict[str, Any]]:
    """The entries the service writes for ``create_dataset`` followed by ``ops``."""
    config = make_config(epsilon, delta, "add_remove", ACCOUNTING)
    state = initial_state(config)
    head: tuple[int, str | None] = (0, None)

    def entry(**fields: Any) -> dict[str, Any]:
        nonlocal head
        made = next_entry(
            dataset_id=dataset_id,
            head_seq=head[0],
            head_hash=head[1],
            accounting_version=ACCOUNTING_VERSION,
            **fields,
        )
        head = (made.seq, made.hash)
        return cast(dict[str, Any], made.to_export())  # the entries' readers take plain dicts

    yield entry(
        kind=EntryKind.DATASET_CREATED,
        actor=creator,
        at=next(times),
        request={"name": DATASET_NAME, "organisation": organisation},
        config=config_to_json(config),
        state=state_to_json(state),
    )
    open_: list[tuple[str, dict[str, Any]]] = []
    for op in ops:
        at = next(times)
        if op.kind == "budget":
            config, state = change_budget(config, state, op.epsilon, op.delta)
            yield entry(
                kind=EntryKind.BUDGET_CHANGED,
                actor=op.actor,
                at=at,
                request={
                    "epsilon": op.epsilon,
                    "delta": op.delta,
                    "sub_budget": None,
                    "final_conversion_delta": None,
                },
                config=config_to_json(config),
                state=state_to_json(state),
            )
        elif op.kind == "register":
            assert op.mechanism is not None
            declaration = parse_declaration(op.mechanism)
            decision = admit(config, state, declaration, sub_budget=None, conversion_delta=None)
            invocation_id = next(ids)
            reservation = decision.reservation.to_json() if decision.reservation else None
            admitted = decision.admitted
            yield entry(
                kind=EntryKind.for_invocation(decision.outcome if admitted else "rejected"),
                actor=op.actor,
                at=at,
                invocation_id=invocation_id,
                declaration=declaration.to_json(),
                request={"sub_budget": None, "conversion_delta": None},
                charge=amount_json(decision.charge),
                requested=amount_json(decision.requested),
                reservation=reservation if admitted else None,
                reason=decision.reason,
                state=state_to_json(decision.state if admitted else state),
            )
            if admitted:
                state = decision.state
                if reservation is not None:
                    open_.append((invocation_id, reservation))
        else:
            invocation_id, reservation = open_.pop(op.pick % len(open_))
            held = Reservation.from_json(reservation)
            if op.kind == "settle":
                assert op.cell is not None
                fin = settle(config, state, held, op.cell)
                status = "settled"
            else:
                fin = cancel(config, state, held)
                status = "cancelled"
            state = fin.state
            yield entry(
                kind=EntryKind.for_invocation(status),
                actor=op.actor,
                at=at,
                invocation_id=invocation_id,
                request={"cell": op.cell} if op.kind == "settle" else {},
                charge=amount_json(fin.charge),
                requested=amount_json(fin.requested),
                refund=amount_json(fin.refund),
                reservation=reservation,
                state=state_to_json(state),
            )


def write_jsonl(entries: Iterator[dict[str, Any]], out: TextIO) -> int:
    """Stream entries as JSON lines (the ``odometer export --format jsonl`` encoding)."""
    count = 0
    for e in entries:
        out.write(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n")
        count += 1
    return count
