"""Partitioned datasets' use cases: the partition checked at creation, blocks opened and
retired on the public schedule, per-block budget changes, and the per-block status.

Registrations, settles and cancels on blocks go through the one write path
(:mod:`app.services.registration`, :mod:`app.services.reservations`), whose dataset level is
then the selection of blocks (:class:`app.services._blocks.PartitionLevel`). What a block protects
and why per-block filters compose in parallel: ``docs/accounting.md``, *Partitioned datasets*.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Final, Literal, NotRequired, TypedDict

from app.db.blocks import read_page, read_states
from app.db.models import Dataset
from app.db.uow import UnitOfWork
from app.db.writes import Writes
from app.services._aggregate import stage_entry, visible_dataset, write_now
from app.services._blocks import load, partition_of, stage
from app.services._common import utc_now
from app.services._types import JSONObject, LedgerHead
from app.services.errors import BlockConflict, InvalidBlocks
from app.services.principals import Principal
from odometer_core.accounting import (
    AccountingConfig,
    ConfigError,
    FilterState,
    config_from_json,
    config_to_json,
    fmt,
    initial_state,
    state_from_json,
    status,
)
from odometer_core.accounting.blocks import BlockError, change_blocks, retire
from odometer_core.accounting.json_types import (
    BlockSpan,
    EpsilonDelta,
    OdometerReading,
    PartitionJSON,
    Summary,
)
from odometer_core.accounting.summary import compose, reading_spent, shown_fraction, spent_fraction
from odometer_core.ledger import EntryKind
from odometer_core.ledger.blocks import Partitioned, higher, shown_reading
from odometer_core.partition import UNBOUNDED, Partition, new_partition

#: A new partitioned dataset's aggregate: no block open yet.
NO_BLOCKS: Final = Partitioned(0, 0, (), None).to_json()
#: The most blocks one curator action opens (a run each: a single row, whatever the count).
MAX_OPEN: Final = 10_000_000
#: The most runs a page of the per-block status holds.
MAX_PAGE: Final = 1000


class PartitionBlocks(TypedDict):
    """A partitioned dataset's blocks as its status shows them."""

    unit: str
    protects: str
    requires: str | None
    open: int
    runs: int
    #: the blocks ever opened, as key ranges (``Partition.keys``)
    opened: list[BlockSpan]
    highest_fraction_spent: str


class PartitionStatus(TypedDict):
    """A partitioned dataset's status (:func:`partition_status`): the blocks' mode and budget
    as :func:`~odometer_core.accounting.status` shows them, the maintained reading, its
    blocks and its summary."""

    mode: str
    budget: EpsilonDelta
    unusable: NotRequired[Any]
    odometer: OdometerReading
    per_block: bool
    blocks: PartitionBlocks
    summary: Summary


class _Unusable(TypedDict, total=False):
    """A status's ``unusable`` part, when it has one (placed where the status places it)."""

    unusable: Any


#: A run of open blocks of equal history in a page (:func:`blocks_page`), with its status.
BlockRun = TypedDict(
    "BlockRun",
    {"from": str, "to": str, "blocks": int, "fraction_spent": str, "status": JSONObject},
)


class BlocksPage(TypedDict):
    """A page of a partitioned dataset's open blocks (:func:`blocks_page`)."""

    dataset_id: str
    partition: PartitionJSON | None  # as stored
    open: int
    runs: list[BlockRun]
    next: str | None


class BlocksAction(TypedDict):
    """What a curator's opening or retirement of blocks answers (:func:`open_or_retire`)."""

    dataset_id: str
    action: Literal["opened", "retired"]
    range: BlockSpan  # the blocks, as keys (the core's Partition.keys)
    open: int
    ledger: LedgerHead


def check_partition(config: AccountingConfig, partition: Mapping[str, Any]) -> PartitionJSON:
    """The partition as stored, checked against the blocks' filter: leaf modes only, and
    ``replace_one`` only with a key the curator asserts immutable (a replacement then stays
    in its block; otherwise one replacement touches two blocks and a per-block budget B
    becomes 2B)."""
    try:
        parsed = new_partition({k: v for k, v in partition.items() if v is not None})
    except BlockError as exc:
        raise InvalidBlocks(str(exc), field="partition") from None
    if config.mode == "split":
        raise ConfigError("a partitioned dataset's blocks take a leaf mode, not 'split'")
    if config.relation == "replace_one" and not parsed.immutable_key:
        raise ConfigError(
            "a partitioned dataset uses relation 'add_remove', or 'replace_one' only with a "
            "block key that a replacement cannot change ('immutable_key': true): otherwise "
            "one replacement touches two blocks and each block's budget B becomes 2B"
        )
    return parsed.to_json()


def _partition(ds: Dataset) -> Partition:
    partition = partition_of(ds.partition_json)
    if partition is None:
        raise InvalidBlocks(f"dataset '{ds.id}' is not partitioned", field="dataset_id")
    return partition


def _distinct_states(
    config: AccountingConfig, states: Sequence[Mapping[str, Any]]
) -> list[FilterState]:
    seen: dict[FilterState, None] = {}
    for state in states:
        seen.setdefault(state_from_json(config, state))
    return list(seen)


def partition_status(
    uow: UnitOfWork, ds: Dataset, config: AccountingConfig
) -> PartitionStatus | None:
    """A partitioned dataset's status (``None`` for a whole dataset): the blocks' mode and
    per-block budget, the dataset's certified reading and its blocks. The reading is the
    maintained one (``highest`` in the dataset's aggregate,
    :mod:`odometer_core.ledger.blocks`): the highest over every block ever opened, retired
    ones included, which no curator action lowers (parallel composition:
    ``docs/accounting.md``, *Partitioned datasets*). What is left is the most spent open
    block's (by :func:`~odometer_core.accounting.summary.spent_fraction`, the one fraction of
    a budget spent): the distinct states of the open runs, each sent once by the database
    however many runs hold it (no run is sent or decoded per run); every block's own reading:
    :func:`blocks_page`. ``highest_fraction_spent`` is that block's fraction spent, which with
    the summary's ``fraction_left`` adds up to 1; in ``basic``, where the maintained reading is
    itself the filter's sums, it also covers retired blocks and refunded spends, and may then
    be higher (docs/accounting.md, *One fraction per budget*)."""
    partition = partition_of(ds.partition_json)
    if partition is None:
        return None
    aggregate = Partitioned.from_json(ds.state_json)
    fresh = status(config, initial_state(config))
    states = read_states(uow.connection(), ds.id) if aggregate.runs else []
    views = [status(config, s) for s in _distinct_states(config, states)]
    worst = max(views, key=_most_spent, default=fresh)
    highest = shown_reading(config, higher(aggregate.highest, worst["odometer"]))
    spent = max(spent_fraction(worst), reading_spent(fresh, highest) or Decimal(0))
    unusable: _Unusable = {"unusable": fresh["unusable"]} if "unusable" in fresh else {}
    return {
        "mode": fresh["mode"],
        "budget": fresh["budget"],
        **unusable,
        "odometer": highest,
        "per_block": True,
        "blocks": {
            "unit": partition.unit,
            "protects": partition.protects,
            "requires": partition.requires,
            "open": aggregate.open,
            "runs": aggregate.runs,
            "opened": partition.keys(aggregate.opened),
            "highest_fraction_spent": fmt(shown_fraction(spent)),
        },
        "summary": _summary(worst, highest, opened=bool(views)),
    }


def _most_spent(view: Mapping[str, Any]) -> tuple[Decimal, Decimal]:
    """A block's rank among the open ones: its fraction spent, then its reading's ε."""
    return spent_fraction(view), Decimal(view["odometer"]["epsilon"])


#: What a partitioned dataset's summary reads first: the reading covers every block.
EVERY_BLOCK: Final = "every block ever opened, retired ones included"


def _summary(worst: Mapping[str, Any], highest: OdometerReading, *, opened: bool) -> Summary:
    """The summary of a partitioned dataset: the guarantee is the maintained reading (every
    block ever opened, retired ones included), what is left the most spent open block's."""
    summary = compose({**worst, "odometer": highest})
    head, left, rest = str(summary["text"]).partition("; left ")
    if not opened:
        summary["text"] = f"{EVERY_BLOCK}: {head}; no block is open"
    elif left:
        summary["text"] = f"{EVERY_BLOCK}: {head}; the most spent open block has left {rest}"
    else:
        summary["text"] = f"{EVERY_BLOCK}: {head}"
    return summary


def blocks_page(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    *,
    first: str | None,
    last: str | None,
    limit: int,
) -> BlocksPage:
    """The open blocks from ``first`` to ``last`` (keys, both included; default: all), as runs
    of equal history with each run's status, at most ``limit`` runs; ``next`` continues."""
    with uow.read_only():
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        partition = _partition(ds)
        lo, hi = key_range(ds.partition_json, first, last)
        rows = read_page(uow.connection(), ds.id, lo, hi, limit + 1)
        config = state_config(ds)
        aggregate = Partitioned.from_json(ds.state_json)
    runs: list[BlockRun] = []
    statuses: dict[FilterState, JSONObject] = {}  # each distinct history's status once
    for run_lo, run_hi, state_json in rows[:limit]:
        a, b = max(run_lo, lo), min(run_hi, hi)
        state = state_from_json(config, state_json)
        block_status = statuses.get(state)
        if block_status is None:
            block_status = statuses[state] = status(config, state)
        runs.append(
            {
                "from": partition.key(a),
                "to": partition.key(b - 1),
                "blocks": b - a,
                "fraction_spent": fmt(shown_fraction(spent_fraction(block_status))),
                "status": block_status,
            }
        )
    more = rows[limit] if len(rows) > limit else None
    return {
        "dataset_id": ds.id,
        "partition": ds.partition_json,
        "open": aggregate.open,
        "runs": runs,
        "next": None if more is None else partition.key(max(more[0], lo)),
    }


def state_config(ds: Dataset) -> AccountingConfig:
    """Every block's filter configuration."""
    return config_from_json(ds.config_json)


def _index(partition: Partition, key: object, name: str) -> int:
    try:
        return partition.index(key)
    except BlockError as exc:
        raise InvalidBlocks(str(exc), field=name) from None


def open_or_retire(
    uow: UnitOfWork,
    principal: Principal,
    dataset_id: str,
    *,
    opening: tuple[str | int, str | int] | None,
    retiring: tuple[str | int, str | int] | None,
) -> BlocksAction:
    """Open blocks (never opened before) or retire open ones: a curator's action on the
    public schedule, one ledger entry (``blocks_opened`` / ``blocks_retired``)."""
    if (opening is None) == (retiring is None):
        raise InvalidBlocks("send exactly one of 'open' and 'retire'")
    first, last = opening or retiring  # type: ignore[misc]
    with uow:
        ds = visible_dataset(uow, principal, dataset_id, lock=True)
        partition = _partition(ds)
        lo, hi = _index(partition, first, "from"), _index(partition, last, "to") + 1
        if hi <= lo:
            raise InvalidBlocks(f"the range {first} … {last} is reversed")
        if hi - lo > MAX_OPEN:
            raise InvalidBlocks(f"one action opens or retires at most {MAX_OPEN} blocks")
        config = state_config(ds)
        store = load(uow.connection(), ds, config, ((lo - 1, hi + 1),))
        if opening is not None:
            try:  # the core refuses a block ever opened (its history never restarts)
                store.moved(store.blocks.open(lo, hi, initial_state(config)))
            except BlockError:
                raise BlockConflict(
                    f"blocks of {first} … {last} were opened before: a block's history never "
                    "restarts (its records keep what they lost)"
                ) from None
            store.touched([(lo, hi)])
            kind = EntryKind.BLOCKS_OPENED
        else:
            try:
                retired = retire(store.blocks, lo, hi)
            except BlockError:
                raise BlockConflict(f"blocks of {first} … {last} are not all open") from None
            # the retired blocks' readings, reservations at their worst cell, are kept in
            # the dataset's maintained reading before their runs are dropped
            store.touched([(lo, hi)])
            store.moved(retired)
            kind = EntryKind.BLOCKS_RETIRED
        writes = Writes()
        stage(writes, ds.id, store)
        at = utc_now()
        stage_entry(
            uow,
            writes,
            ds,
            kind=kind,
            actor=principal.id,
            at=at,
            request={"from": lo, "to": hi, "keys": [partition.key(lo), partition.key(hi - 1)]},
            state=store.aggregate([(lo, hi)]).to_json(),
        )
        write_now(uow, writes)
        view: BlocksAction = {
            "dataset_id": ds.id,
            "action": "opened" if opening is not None else "retired",
            "range": partition.keys([(lo, hi)])[0],
            "open": store.aggregate([]).open,
            "ledger": {"last_seq": ds.last_seq, "head_hash": ds.head_hash},
        }
        uow.commit()
    return view


def change_blocks_budget(
    uow: UnitOfWork,
    principal: Principal,
    ds: Dataset,
    config: AccountingConfig,
    request: JSONObject,
    *,
    workload: object,
    final_conversion_delta: object,
) -> tuple[AccountingConfig, str]:
    """A per-block budget change (in the caller's transaction, the dataset locked): applied
    to every open block and to every block opened later
    (:func:`odometer_core.accounting.blocks.change_blocks`), one ``budget_changed`` entry
    whose digest covers every open block."""
    if request.get("sub_budget") is not None:
        raise ConfigError("'sub_budget' is only allowed on split datasets")
    store = load(uow.connection(), ds, config, ((-UNBOUNDED, UNBOUNDED),))
    new_config, moved = change_blocks(
        config,
        store.blocks,
        request["epsilon"],
        request["delta"],
        final_conversion_delta=final_conversion_delta,
        workload=workload,
        highest=store.highest,
    )
    store.moved(moved, config=new_config)
    store.touched([(r.lo, r.hi) for r in moved.runs])
    writes = Writes()
    stage(writes, ds.id, store)
    config_json = config_to_json(new_config)
    stage_entry(
        uow,
        writes,
        ds,
        kind=EntryKind.BUDGET_CHANGED,
        actor=principal.id,
        at=utc_now(),
        request=request,
        config=config_json,
        state=store.aggregate([(r.lo, r.hi) for r in moved.runs]).to_json(),
    )
    ds.config_json = config_json
    write_now(uow, writes)
    return new_config, (
        "applies to every open block and every block opened later; each block follows the "
        "budget-change rule of a whole dataset (docs/accounting.md, *Budget changes*)"
    )


def key_range(
    partition_json: Mapping[str, Any] | None, first: str | None, last: str | None
) -> tuple[int, int]:
    """The block indices ``[lo, hi)`` of the keys ``first`` … ``last`` (both included; each
    unbounded when omitted); a reversed range (``first`` after ``last``) is a 422."""
    partition = partition_of(partition_json)
    assert partition is not None
    lo = -UNBOUNDED if first is None else _index(partition, first, "from")
    hi = UNBOUNDED if last is None else _index(partition, last, "to") + 1
    if hi <= lo:
        raise InvalidBlocks(
            f"the range {first} … {last} is reversed ('from' after 'to')", field="to"
        )
    return lo, hi
