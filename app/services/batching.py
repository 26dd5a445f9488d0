"""Registrations decided together: one caller's concurrent registrations share a transaction.

The HTTP route hands every registration to :class:`Registrar`, which puts it in its caller's
group commit line (:mod:`app.writepath.groups`); each group is decided here
(:func:`register_group`) in as few transactions as are safe
(:func:`app.writepath.locking.transactions`): on one dataset, decided one after another in
arrival order, one ledger entry each; across datasets of organisations without a cap, all locked
in one statement and written in one; one commit, each request answered only after it. A
transaction that fails never half-applies, and each of its requests is then run alone, for its
own answer.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial

from anyio import to_thread

from app.db.rows import DatasetRow, GrantRow, OrgRow
from app.db.uow import Database, UnitOfWork
from app.db.writes import Writes
from app.services import idempotency
from app.services._blocks import Resolution
from app.services.charging import ChargeWorkers
from app.services.errors import NotFound
from app.services.idempotency import RecordedResponse
from app.services.principals import Principal
from app.services.registration import (
    InvocationRequest,
    Outcome,
    Registration,
    RequestBody,
    decide_in_order,
    known_window,
    prepare,
    with_charges,
)
from app.writepath import locking, write_path
from app.writepath.admission import Locked, StoredResponse
from app.writepath.groups import GroupCommit
from app.writepath.stored import stored
from app.writepath.witness import WitnessUnavailable


class Registrar:
    """The register use case as the HTTP route runs it: the registration prepared by the core
    (its charges then computed in a thread when they may be expensive), then decided in its
    caller's group commit line, on the event loop itself while the process serves one request
    at a time (``alone``)."""

    def __init__(
        self,
        database: Database,
        charges: ChargeWorkers | None,
        groups: GroupCommit[Registration, RecordedResponse],
        alone: Callable[[], bool],
    ) -> None:
        self.database = database
        self.charges = charges
        self.groups = groups
        self.alone = alone

    async def register(
        self,
        principal: Principal,
        dataset_id: str,
        request: InvocationRequest | RequestBody,
        idempotency_key: str | None,
    ) -> RecordedResponse:
        uow = UnitOfWork(self.database)
        item = prepare(self.database, principal, dataset_id, request, idempotency_key)
        if item.prepared.expensive:  # reads the database, may wait for a charge worker
            item = await to_thread.run_sync(with_charges, uow, item, self.charges)
        run = partial(register_group, uow)
        return await self.groups.run(principal.id, item, run, inline=self.alone())


def register_alone(uow: UnitOfWork, item: Registration) -> RecordedResponse:
    """``item`` decided in a transaction of its own; its refusal is raised."""
    outcome = _register_together(uow, (item,))[0]
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def register_group(uow: UnitOfWork, items: Sequence[Registration]) -> list[Outcome]:
    """The outcomes of a group (one caller's registrations, in arrival order), in as few
    transactions as are safe."""
    outcomes: list[Outcome | None] = [None] * len(items)
    for members in locking.transactions(uow, _by_dataset(items)):
        done = _register_part(uow, [items[i] for i in members])
        for i, outcome in zip(members, done, strict=True):
            outcomes[i] = outcome
    return [o for o in outcomes if o is not None]


def _by_dataset(items: Sequence[Registration]) -> dict[str, list[int]]:
    """The positions of ``items`` by dataset, in arrival order."""
    by_dataset: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        by_dataset.setdefault(item.dataset_id, []).append(i)
    return by_dataset


def _register_part(uow: UnitOfWork, items: Sequence[Registration]) -> list[Outcome]:
    """The outcomes of one transaction's members; a transaction that failed never half-applies
    (nothing of it was committed), and each of its requests is then run alone."""
    try:
        return _register_together(uow, items)
    except WitnessUnavailable as exc:  # committed, not witnessed: never decided again
        return [exc] * len(items)
    except Exception as exc:
        if len(items) == 1:
            return [exc]
    outcomes: list[Outcome] = []
    for item in items:
        try:
            outcomes.append(register_alone(uow, item))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


def _register_together(uow: UnitOfWork, items: Sequence[Registration]) -> list[Outcome]:
    """Decide ``items`` (one caller) in one transaction: the levels of their datasets locked at
    once, in the order of the datasets' ids; each dataset's members decided in arrival order on
    the state the previous one left; one write for all; one commit. A dataset the caller may
    not see is its members' :class:`NotFound`; the others go on. With several datasets, a cap
    found in force where none was known fails the transaction
    (:class:`~app.writepath.locking.CapAppeared`). On SQLite, one partitioned dataset's items are
    decided before the write transaction (:func:`_decided_apart`,
    :func:`_decided_before_writing`)."""
    by_dataset = _by_dataset(items)
    datasets = sorted(by_dataset)
    path = write_path(uow.database)
    if len(datasets) == 1:  # the common case, without an exit stack's bookkeeping
        (dataset_id,) = datasets
        with path.turn(dataset_id):
            if _decided_apart(uow, dataset_id, items):
                done = _decided_before_writing(uow, items, dataset_id)
                if done is not None:
                    return done
            with uow.core():
                found, outcomes, writes, _ = _decide(uow, items, by_dataset)
                _write(uow, found, writes)
        return outcomes
    with ExitStack() as held:
        for dataset_id in datasets:  # this process's turns, in the order of the row locks
            held.enter_context(path.turn(dataset_id))
        if len(datasets) == 1 and _decided_apart(uow, datasets[0], items):
            done = _decided_before_writing(uow, items, datasets[0])
            if done is not None:
                return done
        held.enter_context(uow.core())
        found, outcomes, writes, _ = _decide(uow, items, by_dataset)
        _write(uow, found, writes)
    return outcomes


#: A group whose selections name at least this many ranges (or every open block) is decided
#: apart from its write transaction on SQLite (:func:`_decided_apart`).
APART_RANGES = 64


def _decided_apart(uow: UnitOfWork, dataset_id: str, items: Sequence[Registration]) -> bool:
    """Whether a group on ``dataset_id`` is decided before its write transaction: on SQLite,
    for a dataset this process knows to be partitioned, when the group's selections name
    :data:`APART_RANGES` ranges or more, or every open block. There a decision costs what the
    selections touch (up to 1,000 ranges a selection, each distinct history decided), and
    SQLite's write lock is the whole database's. A few ranges, or a whole dataset, where a
    decision under the lock only looks up charges computed before it (an expensive
    declaration's are computed before any lock), are decided in microseconds: deciding apart
    would add a read transaction and a re-read to each registration (30 % more CPU per
    registration at one client on a whole dataset, ``python -m benchmarks compare``) to save
    nothing."""
    if uow.database.engine.dialect.name != "sqlite":
        return False
    known, partition_json = write_path(uow.database).partitions.get(dataset_id)
    if not known or partition_json is None:
        return False
    return sum(_ranges_named(item.request.blocks) for item in items) >= APART_RANGES


def _ranges_named(selection: object) -> int:
    """How many ranges a request's ``blocks`` names, as sent (every open block: no bound)."""
    if isinstance(selection, Mapping):
        for field in ("keys", "ranges"):
            named = selection.get(field)
            if isinstance(named, list):
                return len(named)
        return 1
    return APART_RANGES if selection == "all" else 0


@dataclass(frozen=True, slots=True)
class _Read:
    """What a decision read: the levels' rows as read (copies, before any decision moved them)
    and the stored responses of the caller's idempotency keys."""

    rows: tuple[DatasetRow, OrgRow, GrantRow | None] | None
    stored: tuple[StoredResponse | None, ...]


def _as_read(uow: UnitOfWork, locked: Locked | None, owner: str, keys: Sequence[str]) -> _Read:
    if locked is None:
        return _Read(None, ())
    rows = copy.deepcopy((locked.dataset, locked.org, locked.grant))
    keys_read = stored(uow)
    return _Read(rows, tuple(keys_read.get(owner, key) for key in keys))


def _decided_before_writing(
    uow: UnitOfWork, items: Sequence[Registration], dataset_id: str
) -> list[Outcome] | None:
    """SQLite admits one writer at a time, for the whole database: a decision made inside the
    write transaction held every other dataset's writes for as long as it took (20 s for a
    selection on a fragmented dataset; :func:`_decided_apart` says when this is done). So the
    items are decided in a read transaction first (which takes no write lock), and the write
    transaction then reads the same rows again — the dataset's, the organisation's, the
    grant's, the keys' stored responses, one statement — and writes what was decided only if
    they are exactly as the decision read them; ``None`` otherwise (another process wrote in
    between): the caller decides again under the lock.

    Why equal rows are enough: every change to what a decision reads moves one of them — a
    dataset's state, blocks, budget and configuration change only with a ledger entry, which
    moves the dataset row's ``last_seq`` and ``head_hash``; the cap's and the quota's states
    live in the organisation's and the grant's rows; a key answered since has a stored response.
    So the decision is the one the write transaction would have made, and nothing is written
    that it would not have written."""
    owner = items[0].principal.viewer.owner
    keys = [item.key for item in items if item.key is not None]
    with uow.core(read=True):
        by_dataset = {dataset_id: list(range(len(items)))}
        found, outcomes, writes, read = _decide(uow, items, by_dataset, observe=True)
        heads = dict(uow.heads)  # the heads the staged entries move, witnessed at the commit
    if not writes:
        return outcomes  # nothing to write (replayed answers, refusals before staging)
    with uow.core():
        again = locking.lock_levels(
            uow, items[0].principal.viewer, dataset_id, admitting=True, keys=keys
        )
        if _as_read(uow, again, owner, keys) != read:
            return None  # the block rolls back; decided again under the lock
        uow.heads.update(heads)
        _write(uow, found, writes)
    return outcomes


def _decide(
    uow: UnitOfWork,
    items: Sequence[Registration],
    by_dataset: dict[str, list[int]],
    *,
    observe: bool = False,
) -> tuple[dict[str, Locked], list[Outcome], Writes, _Read | None]:
    """Lock (or, in a read transaction, read) the levels of ``by_dataset``'s datasets and decide
    their members in arrival order, staging what they change; with one dataset and
    ``observe``, also what the decisions read (:class:`_Read`), taken before they moved
    anything."""
    viewer = items[0].principal.viewer
    datasets = sorted(by_dataset)
    keys = [item.key for item in items if item.key is not None]
    outcomes: list[Outcome | None] = [None] * len(items)
    found: dict[str, Locked]
    read: _Read | None = None
    resolution: Resolution | None = None
    if len(datasets) == 1:
        resolution = known_window(uow, datasets[0], items)
        window = None if resolution is None else resolution.window
        only = locking.lock_levels(
            uow, viewer, datasets[0], admitting=True, keys=keys, window=window
        )
        found = {} if only is None else {datasets[0]: only}
        read = _as_read(uow, only, viewer.owner, keys) if observe else None
    else:
        found = locking.lock_shared(uow, viewer, datasets, keys)
    writes = Writes()
    for dataset_id in datasets:
        members = by_dataset[dataset_id]
        locked = found.get(dataset_id)
        decided: Sequence[Outcome] = (
            [NotFound(f"dataset '{dataset_id}' not found")] * len(members)
            if locked is None
            else decide_in_order(uow, locked, [items[i] for i in members], writes, resolution)
        )
        for i, outcome in zip(members, decided, strict=True):
            outcomes[i] = outcome
    return found, [o for o in outcomes if o is not None], writes, read


def _write(uow: UnitOfWork, found: dict[str, Locked], writes: Writes) -> None:
    """Write what the decisions staged, with the levels' new states, and commit."""
    if not writes:
        return
    levels = list(found.values())
    org = levels[0].org if len(levels) == 1 else None  # shared rows are never written
    idempotency.write_rows(
        uow, writes, [lv.dataset for lv in levels], org, [lv.grant for lv in levels]
    )
    idempotency.commit(uow)
