"""A partitioned dataset's blocks as one transaction holds them: the runs read, and written.

The pure part is the core's (:class:`odometer_core.ledger.blocks.Held`: the runs decided on in
memory, the aggregate and the touched blocks' digest the ledger records, what changed); this
module reads the runs the selections touch under the dataset's lock (:mod:`app.db.blocks`; in
the lock statement's round trip when the process knows the dataset's partition), maps what the
core refuses to the API's errors (the limits on runs included), and stages what changed with
the transaction's other writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection

from app.db.blocks import BlockWindow, Window, read_window
from app.db.rows import DatasetRow
from app.db.writes import Writes
from app.services.errors import BlockConflict, InvalidBlocks
from odometer_core.accounting import AccountingConfig, config_from_json
from odometer_core.accounting.blocks import Range, Selected
from odometer_core.accounting.levels import LevelsDecision
from odometer_core.ledger.admission import BadSelection, Prepared, Spans, resolve_selection
from odometer_core.ledger.blocks import SHOWN_RANGES, Held, NotOpen, RunLimit, Staged, refusal
from odometer_core.partition import Partition, parse_partition, window_of

#: A selection as resolved: index ranges, or ``None`` for every open block.
Resolved = tuple[Range, ...] | None


def partition_of(partition_json: Mapping[str, Any] | None) -> Partition | None:
    """The partition of ``partition_json``, parsed once per process (a partition never
    changes, and each write on a partitioned dataset needs it: parsed again per request, it was
    parsed twice per registration)."""
    if partition_json is None:
        return None
    return _parsed(json.dumps(partition_json, sort_keys=True, separators=(",", ":")))


@lru_cache(maxsize=4096)
def _parsed(text: str) -> Partition:
    return parse_partition(json.loads(text))


@dataclass(frozen=True, slots=True)
class Resolution:
    """One transaction's requests on a partitioned dataset, their selections resolved once,
    before the lock, on the partition this process knows (a partition never changes): reused
    under the lock (:func:`app.services.registration.decide_in_order`), so no selection is
    resolved twice; :attr:`window`: the spans of runs they touch, read with the lock."""

    partition: Partition
    prepared: list[Prepared]
    window: Spans


def resolve_all(partition: Partition, selections: Sequence[object]) -> list[Resolved | Exception]:
    """Each selection resolved, or its own :class:`InvalidBlocks` (refused when decided)."""
    resolved: list[Resolved | Exception] = []
    for selection in selections:
        try:
            resolved.append(resolve(partition, selection))
        except InvalidBlocks as exc:
            resolved.append(exc)
    return resolved


def resolve(partition: Partition | None, selection: object) -> Resolved:
    """The index ranges a request's ``blocks`` names on a dataset of ``partition`` (``None``:
    not partitioned), :func:`odometer_core.ledger.admission.resolve_selection`'s: a selection
    on a whole dataset, none on a partitioned one, or a malformed one is
    :class:`InvalidBlocks`."""
    try:
        return resolve_selection(partition, selection)
    except BadSelection as exc:
        raise InvalidBlocks(str(exc), field="blocks") from None


def load(conn: Connection, ds: DatasetRow | Any, config: AccountingConfig, spans: Spans) -> Held:
    """The runs of ``ds`` in ``spans`` (:func:`~odometer_core.partition.window_of`'s; and the
    run that holds each span's first block), held."""
    rows = read_window(conn, ds.id, spans) if spans else []
    return Held(config, ds.state_json, rows)


def stage(writes: Writes, dataset_id: str, held: Held) -> None:
    """Stage what the decisions changed in ``held`` (nothing when they changed nothing)."""
    gone, runs = held.changes()
    if gone or runs:
        writes.blocks.append(BlockWindow(dataset_id, gone, runs))


def not_open(exc: NotOpen, partition: Partition) -> BlockConflict:
    """The API's answer to a selection naming blocks that are not open, by their keys."""
    if not exc.gaps:
        return BlockConflict(str(exc))
    return BlockConflict(
        f"{exc}: {partition.label(exc.gaps)} (open them first, or leave them out)",
        not_open=partition.keys(exc.gaps[:SHOWN_RANGES]),
    )


class PartitionLevel:
    """The dataset level of one transaction's requests on a partitioned dataset: their
    selections resolved (a malformed one is that request's own 422) and the runs they touch
    held once, under the dataset's lock; decided one after another on it, then
    written back (:meth:`stage`)."""

    def __init__(
        self,
        dataset_id: str,
        partition: Partition,
        held: Held,
        resolved: list[Resolved | Exception],
    ) -> None:
        self.dataset_id = dataset_id
        self.partition = partition
        self.held = held
        self.resolved = resolved

    @classmethod
    def prepare(
        cls,
        connection: Callable[[], Connection],
        ds: DatasetRow,
        selections: Sequence[object],
        prefetched: Window | None = None,
    ) -> PartitionLevel | None:
        """``None`` for a whole dataset. ``prefetched``: the runs read with the lock, used
        when their spans cover what ``selections`` touch (otherwise read now, on
        ``connection()``)."""
        partition = partition_of(ds.partition_json)
        if partition is None:
            return None
        resolved = resolve_all(partition, selections)
        window = window_of([r for r in resolved if not isinstance(r, Exception)])
        config = config_from_json(ds.config_json)
        if prefetched is not None and prefetched.covers(window):
            held = Held(config, ds.state_json, prefetched.rows())
        else:
            held = load(connection(), ds, config, window)
        return cls(ds.id, partition, held, resolved)

    def level(self, position: int) -> Selected:
        """The dataset level of the ``position``-th request (its own 422 or 409 raised)."""
        resolved = self.resolved[position]
        if isinstance(resolved, Exception):
            raise resolved
        try:
            return self.held.select(resolved)
        except NotOpen as exc:
            raise not_open(exc, self.partition) from None

    def check(self, levels: LevelsDecision) -> None:
        """Refuse an admission that would cross a limit on runs (``docs/operations.md``,
        *Limits*): 422 for the runs one request may add (the selection's own shape), 409 for
        the runs the dataset may hold (its state); nothing of the request is staged."""
        try:
            self.held.check(levels)
        except RunLimit as exc:
            if exc.per_request:
                raise InvalidBlocks(str(exc), field="blocks") from None
            raise BlockConflict(str(exc)) from None

    def decided(self, levels: LevelsDecision, selected: Selected) -> Staged:
        return self.held.decided(levels, selected, self.partition)

    def refusal(self, levels: LevelsDecision) -> str:
        return refusal(levels, self.partition)

    def stage(self, writes: Writes) -> None:
        stage(writes, self.dataset_id, self.held)
