"""What a partitioned dataset's ledger records of its blocks, and how a replay rebuilds them.

A partitioned dataset's ledger has no per-block rows. An entry records the *selection* it acted
on (``request.blocks``: half-open block-index ranges, "every open block" already resolved) and
the dataset's aggregate state after it (:class:`Partitioned`, the entry's ``state``):

- ``open``: how many blocks are open, and ``runs``: how many runs of equal history hold them
  (the interval map of :mod:`odometer_core.accounting.blocks`);
- ``opened``: every block ever opened, as ranges (a retired block is never opened again);
- ``digest``: the SHA-256 of the canonical JSON of the touched blocks' states after the entry,
  ``[[lo, hi, state], …]`` clipped to the selection (to every open block after a budget
  change; to the range opened or retired).

:func:`replay_blocks` re-runs one entry on the blocks a replay holds and checks all four, so a
replay rebuilds every block's state from the selections alone and matches it against what the
service wrote.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from odometer_core.accounting import (
    AccountingConfig,
    initial_state,
    state_from_json,
    state_to_json,
)
from odometer_core.accounting.blocks import (
    BlockError,
    Blocks,
    Range,
    Run,
    Selected,
    normalise_or_empty,
)
from odometer_core.accounting.levels import DATASET, LevelsDecision
from odometer_core.ledger.chain import canonical_bytes
from odometer_core.partition import Partition

#: The key of the selection in an entry's ``request``.
BLOCKS = "blocks"


def touched_digest(blocks: Blocks, ranges: Sequence[Range]) -> str:
    """The SHA-256 hex digest of the states of ``blocks`` within ``ranges``, clipped to them."""
    pieces = [
        [run.lo, run.hi, state_to_json(run.state)]
        for lo, hi in ranges
        for run in blocks.pieces(lo, hi)
    ]
    return hashlib.sha256(canonical_bytes(pieces)).hexdigest()


def ranges_json(ranges: Sequence[Range]) -> list[list[int]]:
    return [[lo, hi] for lo, hi in ranges]


def ranges_from_json(obj: object) -> tuple[Range, ...]:
    if not isinstance(obj, list):
        raise ValueError("a block selection is a list of [lo, hi] ranges")
    return tuple((int(lo), int(hi)) for lo, hi in obj)


@dataclass(frozen=True, slots=True)
class Partitioned:
    """A partitioned dataset's aggregate state (what its row and each entry's ``state``
    hold). ``blocks`` is every open block's state when a replay holds it, the touched window
    when the service does (the runs live in their own table)."""

    open: int
    runs: int
    opened: tuple[Range, ...]
    digest: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            BLOCKS: {
                "open": self.open,
                "runs": self.runs,
                "opened": ranges_json(self.opened),
                "digest": self.digest,
            }
        }

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> Partitioned:
        part = obj[BLOCKS]
        return Partitioned(
            int(part["open"]),
            int(part["runs"]),
            ranges_from_json(part["opened"]),
            part["digest"],
        )

    def opening(self, lo: int, hi: int, digest: str) -> Partitioned:
        """After ``[lo, hi)`` is opened (never opened before: checked by the caller)."""
        return Partitioned(
            self.open + hi - lo,
            self.runs,
            normalise_or_empty([*self.opened, (lo, hi)]),
            digest,
        )

    def ever_opened(self, lo: int, hi: int) -> bool:
        """Whether a block of ``[lo, hi)`` was ever opened."""
        return any(a < hi and lo < b for a, b in self.opened)


def fresh_blocks(config: AccountingConfig, lo: int, hi: int, blocks: Blocks) -> Blocks:
    """``blocks`` with ``[lo, hi)`` opened, nothing spent."""
    return blocks.open(lo, hi, initial_state(config))


__all__ = [
    "BLOCKS",
    "SHOWN_RANGES",
    "BlockHistory",
    "Held",
    "NotOpen",
    "Partitioned",
    "Staged",
    "fresh_blocks",
    "ranges_from_json",
    "ranges_json",
    "refusal",
    "touched_digest",
]


@dataclass(frozen=True, slots=True)
class BlockHistory:
    """What a replay holds of a partitioned dataset: its aggregate and every open block."""

    aggregate: Partitioned
    blocks: Blocks

    def to_json(self) -> dict[str, Any]:
        return self.aggregate.to_json()


class NotOpen(BlockError):
    """A selection that names blocks which are not open (``gaps``: those ranges)."""

    def __init__(self, detail: str, gaps: tuple[Range, ...]) -> None:
        super().__init__(detail)
        self.gaps = gaps


@dataclass(frozen=True, slots=True)
class Staged:
    """What one decision on blocks records and answers: the selection (index ranges, for the
    ledger entry and the invocation row), the dataset's aggregate state after it, the
    selection as keys (a 201), and the refusing blocks with what each has left (a 409)."""

    selection: list[list[int]]
    state: dict[str, Any]
    selected: list[dict[str, Any]]
    refused: list[dict[str, Any]] | None


#: How many refused ranges a 409 lists.
SHOWN_RANGES: Final = 20


class Held:
    """A partitioned dataset's runs as one transaction holds them: the window of runs it read
    under the dataset's lock (``rows``: ``(lo, hi, state_json)``), decided on one request after
    another in memory, and what changed, to be written back (:meth:`changes`). Pure: the
    service reads and writes the rows."""

    def __init__(
        self,
        config: AccountingConfig,
        aggregate: Mapping[str, Any],
        rows: Sequence[tuple[int, int, Mapping[str, Any]]],
    ) -> None:
        self.config = config
        self.base = Partitioned.from_json(aggregate)
        self.loaded = Blocks(tuple(Run(lo, hi, state_from_json(config, s)) for lo, hi, s in rows))
        self.blocks = self.loaded
        self.opened = self.base
        self.retired = 0

    def select(self, resolved: tuple[Range, ...] | None) -> Selected:
        """The dataset level of an invocation on ``resolved`` (``None``: every open block, as
        the ranges they hold now); :class:`NotOpen` when it names blocks that are not open."""
        if resolved is None:
            resolved = _joined([(r.lo, r.hi) for r in self.blocks.runs])
            if not resolved:
                raise NotOpen("no block of this dataset is open", ())
        gaps = self.blocks.missing(resolved)
        if gaps:
            raise NotOpen("the selection names blocks that are not open", gaps)
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

    def decided(self, levels: LevelsDecision, selected: Selected, partition: Partition) -> Staged:
        """The blocks after ``levels`` (moved if it admitted), and what that decision records
        and answers."""
        if levels.admitted and levels.selection is not None:
            self.moved(levels.selection.blocks)
        refused = None
        if levels.selection is not None and levels.refused_by == DATASET:
            refused = []
            for decision in levels.selection.refused:
                for item in partition.keys(decision.ranges):
                    item["remaining"] = decision.decision.remaining.to_json()
                    item["reason"] = decision.decision.reason
                    refused.append(item)
            refused.sort(key=lambda b: partition.index(b["from"]))
        return Staged(
            ranges_json(selected.ranges),
            self.aggregate(selected.ranges).to_json(),
            partition.keys(selected.ranges),
            None if refused is None else refused[:SHOWN_RANGES],
        )

    def changes(self) -> tuple[tuple[int, ...], tuple[tuple[int, int, dict[str, Any]], ...]]:
        """What to write back: the starts of the runs gone, and the runs new or changed
        (``(lo, hi, state_json)``); nothing when no decision changed the window."""
        if self.blocks is self.loaded:
            return (), ()
        kept = set(self.loaded.runs)
        starts = {r.lo for r in self.blocks.runs}
        gone = tuple(r.lo for r in self.loaded.runs if r.lo not in starts)
        runs = tuple(
            (r.lo, r.hi, state_to_json(r.state)) for r in self.blocks.runs if r not in kept
        )
        return gone, runs


def refusal(levels: LevelsDecision, partition: Partition) -> str:
    """The recorded reason of a refusal by blocks: which blocks, why, and what each block's
    budget protects."""
    assert levels.selection is not None and levels.refusal is not None
    refused = sorted(r for d in levels.selection.refused for r in d.ranges)
    return (
        f"{sum(hi - lo for lo, hi in refused)} of the selected blocks cannot afford it "
        f"({partition.label(refused)}): {levels.refusal.reason or 'budget exceeded'}; "
        f"{partition.protects}"
    )


def _joined(ranges: Sequence[Range]) -> tuple[Range, ...]:
    out: list[Range] = []
    for lo, hi in ranges:
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)
