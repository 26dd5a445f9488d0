"""A partitioned dataset's blocks as one transaction holds them.

The partition (:class:`odometer_core.partition.Partition`) turns the keys a request names into
block-index ranges; :class:`BlockStore` reads the window of runs the transaction's requests
touch once, under the dataset's lock (:mod:`app.db.blocks`), lets them be decided one after
another in memory (:func:`odometer_core.accounting.blocks.decide_selection` through the levels'
decision), and stages the window's replacement with the transaction's other writes. What the
ledger records of it (the selection, the aggregate state and the touched blocks' digest) is
:mod:`odometer_core.ledger.blocks`'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import Connection

from app.db.blocks import UNBOUNDED, BlockWindow, Window, read_window
from app.db.rows import DatasetRow
from app.db.writes import Writes
from app.services.errors import BlockConflict, InvalidBlocks
from odometer_core.accounting import (
    AccountingConfig,
    config_from_json,
    state_from_json,
    state_to_json,
)
from odometer_core.accounting.blocks import BlockError, Blocks, Range, Run, Selected
from odometer_core.accounting.levels import DATASET, LevelsDecision
from odometer_core.ledger.blocks import Partitioned, ranges_json, touched_digest
from odometer_core.partition import Partition, parse_partition

#: A selection as resolved: index ranges, or ``None`` for every open block.
Resolved = tuple[Range, ...] | None
#: The selection that names every open block.
EVERY_OPEN_BLOCK: Final = "all"
#: How many refused ranges a 409 lists.
SHOWN_RANGES: Final = 20


def partition_of(partition_json: Mapping[str, Any] | None) -> Partition | None:
    return None if partition_json is None else parse_partition(partition_json)


def resolve(partition: Partition | None, selection: object) -> Resolved:
    """The index ranges a request's ``blocks`` names on a dataset of ``partition`` (``None``:
    not partitioned). A selection on a whole dataset, or none on a partitioned one, is
    :class:`InvalidBlocks`."""
    if partition is None:
        if selection is not None:
            raise InvalidBlocks("this dataset is not partitioned: send no 'blocks'", field="blocks")
        return ()
    if selection is None:
        raise InvalidBlocks(
            "this dataset is partitioned: name the blocks the mechanism reads in 'blocks' "
            "({'from': key, 'to': key}, {'keys': [...]}, {'ranges': [...]} or 'all')",
            field="blocks",
        )
    if selection == EVERY_OPEN_BLOCK:
        return None
    if not isinstance(selection, Mapping):
        raise InvalidBlocks("'blocks' is an object or 'all'", field="blocks")
    try:
        return partition.selection(selection)
    except BlockError as exc:
        raise InvalidBlocks(str(exc), field="blocks") from None


def ranges_out(partition: Partition, ranges: Sequence[Range]) -> list[dict[str, Any]]:
    """Index ranges as a person reads them: inclusive keys and the number of blocks."""
    return [
        {"from": partition.key(lo), "to": partition.key(hi - 1), "blocks": hi - lo}
        for lo, hi in ranges
    ]


def label(partition: Partition, ranges: Sequence[Range], limit: int = 5) -> str:
    """``2026-11-20 … 2026-11-26, 2026-11-28`` (and how many more)."""
    parts = [
        partition.key(lo) if hi - lo == 1 else f"{partition.key(lo)} … {partition.key(hi - 1)}"
        for lo, hi in ranges[:limit]
    ]
    more = f" and {len(ranges) - limit} more ranges" if len(ranges) > limit else ""
    return ", ".join(parts) + more


def unit_note(partition: Partition) -> str:
    """What one block's budget protects, as the API says it."""
    if partition.unit == "person":
        return "each block's budget protects every person whose records fall in it"
    return "each block's budget protects one record (an event) of the block"


def window_of(selections: Sequence[Resolved]) -> tuple[int, int]:
    """The blocks a transaction's selections touch and their neighbours (whose states decide
    whether new runs merge with them)."""
    if any(s is None for s in selections):
        return -UNBOUNDED, UNBOUNDED
    ranges = [r for s in selections if s for r in s]
    if not ranges:
        return 0, 0
    return min(lo for lo, _ in ranges) - 1, max(hi for _, hi in ranges) + 1


class BlockStore:
    """The window of a partitioned dataset's runs one transaction reads, decides on and writes
    back (under the dataset's lock)."""

    def __init__(
        self,
        dataset_id: str,
        config: AccountingConfig,
        aggregate: Mapping[str, Any],
        rows: Sequence[tuple[int, int, dict[str, Any]]],
    ) -> None:
        self.dataset_id = dataset_id
        self.config = config
        self.base = Partitioned.from_json(aggregate)
        self.loaded = Blocks(tuple(Run(lo, hi, state_from_json(config, s)) for lo, hi, s in rows))
        self.blocks = self.loaded
        self.opened = self.base
        self.retired = 0

    @classmethod
    def load(
        cls,
        conn: Connection,
        dataset_id: str,
        config: AccountingConfig,
        aggregate: Mapping[str, Any],
        window: tuple[int, int],
    ) -> BlockStore:
        lo, hi = window
        rows = read_window(conn, dataset_id, lo, hi) if hi > lo else []
        return cls(dataset_id, config, aggregate, rows)

    # ------------------------------------------------------------------ deciding
    def selected(self, resolved: Resolved, partition: Partition) -> Selected:
        """The dataset level of an invocation on ``resolved`` (``None``: every open block);
        blocks that are not open are :class:`BlockConflict` (named by ``partition``'s keys)."""
        if resolved is None:
            resolved = tuple((r.lo, r.hi) for r in self.blocks.runs)
            if not resolved:
                raise BlockConflict("no block of this dataset is open")
            resolved = _joined(resolved)
        gaps = self.blocks.missing(resolved)
        if gaps:
            raise BlockConflict(
                f"the selection names blocks that are not open: {label(partition, gaps)} (open "
                "them first, or leave them out)",
                not_open=ranges_out(partition, gaps[:SHOWN_RANGES]),
            )
        return Selected(self.config, self.blocks, resolved)

    def moved(self, blocks: Blocks, *, opened: Range | None = None, retired: int = 0) -> None:
        """The blocks after a decision (``opened``: the range opened; ``retired``: how many
        blocks were retired)."""
        self.blocks = blocks
        if opened is not None:
            self.opened = self.opened.opening(*opened, "")
        self.retired += retired

    def aggregate(self, touched: Sequence[Range]) -> Partitioned:
        """The dataset's aggregate after the last decision, with the digest of ``touched``."""
        return Partitioned(
            self.opened.open - self.retired,
            self.base.runs - len(self.loaded.runs) + len(self.blocks.runs),
            self.opened.opened,
            touched_digest(self.blocks, touched),
        )

    # ------------------------------------------------------------------ writing
    def stage(self, writes: Writes) -> None:
        """Stage the window's replacement (nothing when no decision changed it)."""
        if self.blocks is self.loaded:
            return
        kept = set(self.loaded.runs)
        starts = {r.lo for r in self.blocks.runs}
        gone = tuple(r.lo for r in self.loaded.runs if r.lo not in starts)
        runs = tuple(
            (r.lo, r.hi, state_to_json(r.state)) for r in self.blocks.runs if r not in kept
        )
        if gone or runs:
            writes.blocks.append(BlockWindow(self.dataset_id, gone, runs))


def _joined(ranges: Sequence[Range]) -> tuple[Range, ...]:
    out: list[Range] = []
    for lo, hi in ranges:
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Staged:
    """What one decision on blocks writes and answers: the selection the ledger entry and the
    invocation row record (index ranges), the dataset's aggregate state after it, the
    selection as keys (the 201), and the refusing blocks with what each has left (a 409)."""

    selection: list[list[int]]
    state: dict[str, Any]
    selected: list[dict[str, Any]]
    refused: list[dict[str, Any]] | None


class PartitionLevel:
    """The dataset level of one transaction's registrations on a partitioned dataset: their
    selections resolved (a malformed one is that request's own 422) and the window of runs
    they touch read once, under the dataset's lock; decided one after another on it, then
    written back (:meth:`stage`)."""

    def __init__(
        self, partition: Partition, store: BlockStore, resolved: list[Resolved | Exception]
    ) -> None:
        self.partition = partition
        self.store = store
        self.resolved = resolved

    @classmethod
    def prepare(
        cls,
        connection: Callable[[], Connection],
        ds: DatasetRow,
        selections: Sequence[object],
        prefetched: Window | None = None,
    ) -> PartitionLevel | None:
        """``None`` for a whole dataset. ``prefetched``: the window read with the lock, used
        when it covers what ``selections`` touch (otherwise read now, on ``connection()``)."""
        partition = partition_of(ds.partition_json)
        if partition is None:
            return None
        resolved: list[Resolved | Exception] = []
        for selection in selections:
            try:
                resolved.append(resolve(partition, selection))
            except InvalidBlocks as exc:
                resolved.append(exc)
        window = window_of([r for r in resolved if not isinstance(r, Exception)])
        config = config_from_json(ds.config_json)
        if prefetched is not None and prefetched.covers(*window):
            store = BlockStore(ds.id, config, ds.state_json, prefetched.rows())
        else:
            store = BlockStore.load(connection(), ds.id, config, ds.state_json, window)
        return cls(partition, store, resolved)

    def level(self, position: int) -> Selected:
        """The dataset level of the ``position``-th request (its own 422 or 409 raised)."""
        resolved = self.resolved[position]
        if isinstance(resolved, Exception):
            raise resolved
        return self.store.selected(resolved, self.partition)

    def decided(self, levels: LevelsDecision, selected: Selected) -> Staged:
        """The blocks after ``levels`` (moved if it admitted), and what that decision records
        and answers."""
        if levels.admitted and levels.selection is not None:
            self.store.moved(levels.selection.blocks)
        refused = None
        if levels.selection is not None and levels.refused_by == DATASET:
            refused = []
            for decision in levels.selection.refused:
                for item in ranges_out(self.partition, decision.ranges):
                    item["remaining"] = decision.decision.remaining.to_json()
                    item["reason"] = decision.decision.reason
                    refused.append(item)
            refused.sort(key=lambda b: self.partition.index(b["from"]))
        return Staged(
            ranges_json(selected.ranges),
            self.store.aggregate(selected.ranges).to_json(),
            ranges_out(self.partition, selected.ranges),
            None if refused is None else refused[:SHOWN_RANGES],
        )

    def refusal(self, levels: LevelsDecision) -> str:
        """The recorded reason of a refusal by blocks: which blocks, why, and what each block's
        budget protects."""
        assert levels.selection is not None and levels.refusal is not None
        refused = sorted(r for d in levels.selection.refused for r in d.ranges)
        return (
            f"{sum(hi - lo for lo, hi in refused)} of the selected blocks cannot afford it "
            f"({label(self.partition, refused)}): {levels.refusal.reason or 'budget exceeded'}"
            f"; {unit_note(self.partition)}"
        )

    def stage(self, writes: Writes) -> None:
        self.store.stage(writes)


def window_known(
    partition_json: Mapping[str, Any] | None, selections: Sequence[object]
) -> tuple[int, int] | None:
    """The window of runs ``selections`` touch on a dataset of ``partition_json`` (``None``: a
    whole dataset, nothing to read); malformed selections are left out (each is refused when
    it is decided)."""
    partition = partition_of(partition_json)
    if partition is None:
        return None
    resolved: list[Resolved] = []
    for selection in selections:
        try:
            resolved.append(resolve(partition, selection))
        except InvalidBlocks:
            continue
    return window_of(resolved)
