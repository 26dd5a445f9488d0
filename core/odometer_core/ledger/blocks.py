"""What a partitioned dataset's ledger records of its blocks, and how a replay rebuilds them.

A partitioned dataset's ledger has no per-block rows. An entry records the *selection* it acted
on (``request.blocks``: half-open block-index ranges, "every open block" already resolved) and
the dataset's aggregate state after it (:class:`Partitioned`, the entry's ``state``):

- ``open``: how many blocks are open, and ``runs``: how many runs of equal history hold them
  (the interval map of :mod:`odometer_core.accounting.blocks`);
- ``opened``: every block ever opened, as ranges (a retired block is never opened again);
- ``digest``: the SHA-256 of the canonical JSON of the touched blocks' states after the entry,
  ``[[lo, hi, state], …]`` clipped to the selection (to every open block after a budget
  change; to the range opened or retired);
- ``highest``: the dataset's certified reading, the highest over every block ever opened,
  retired ones included (:func:`raised`), ``null`` before any block was opened. It is
  *maintained*, never a scan: every entry raises it to the readings of the runs it touched
  (after the decision; a retired range's *before* its runs are dropped), so it never falls,
  whatever a curator does. Entries written before it existed have no ``highest``; a replay
  accepts that until the first entry that carries one, and requires it from there on.

The replay (:mod:`odometer_core.ledger.replay`) re-runs each entry on the blocks it holds and
checks all five, so a replay rebuilds every block's state from the selections alone and
matches it against what the service wrote.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, cast

from odometer_core.accounting import (
    AccountingConfig,
    FilterState,
    initial_state,
    state_from_json,
    state_to_json,
    status,
)
from odometer_core.accounting.blocks import (
    BlockError,
    Blocks,
    Range,
    Run,
    Selected,
)
from odometer_core.accounting.exact import fmt
from odometer_core.accounting.json_types import (
    BlockSpan,
    OdometerReading,
    PartitionedPart,
    PartitionedState,
    RefusedSpan,
    StateJSON,
)
from odometer_core.accounting.levels import DATASET, LevelsDecision
from odometer_core.ledger.chain import canonical_bytes
from odometer_core.partition import Partition

#: The key of the selection in an entry's ``request``.
BLOCKS: Final = "blocks"


def touched_digest(blocks: Blocks, ranges: Sequence[Range]) -> str:
    """The SHA-256 hex digest of the states of ``blocks`` within ``ranges``, clipped to them."""
    written: dict[FilterState, StateJSON] = {}  # each distinct state written once
    pieces = []
    for run in blocks.walk(ranges):
        state = written.get(run.state)
        if state is None:
            state = written[run.state] = state_to_json(run.state)
        pieces.append([run.lo, run.hi, state])
    return hashlib.sha256(canonical_bytes(pieces)).hexdigest()


def ranges_json(ranges: Sequence[Range]) -> list[list[int]]:
    return [[lo, hi] for lo, hi in ranges]


def ranges_from_json(obj: object) -> tuple[Range, ...]:
    if not isinstance(obj, list):
        raise ValueError("a block selection is a list of [lo, hi] ranges")
    return tuple((int(lo), int(hi)) for lo, hi in obj)


#: The key of the maintained reading in the aggregate.
HIGHEST: Final = "highest"


@dataclass(frozen=True, slots=True)
class Partitioned:
    """A partitioned dataset's aggregate state (what its row and each entry's ``state``
    hold). ``blocks`` is every open block's state when a replay holds it, the touched window
    when the service does (the runs live in their own table). ``highest``: the maintained
    reading (module docstring); ``legacy``: read from a state written before it existed
    (:meth:`to_json` then leaves it out, as that state did)."""

    open: int
    runs: int
    opened: tuple[Range, ...]
    digest: str | None
    highest: OdometerReading | None = None
    legacy: bool = False

    def to_json(self) -> PartitionedState:
        part: PartitionedPart = {
            "open": self.open,
            "runs": self.runs,
            "opened": ranges_json(self.opened),
            "digest": self.digest,
        }
        if not self.legacy:
            part[HIGHEST] = self.highest
        return {BLOCKS: part}

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> Partitioned:
        part = obj[BLOCKS]
        highest = part.get(HIGHEST)
        return Partitioned(
            int(part["open"]),
            int(part["runs"]),
            ranges_from_json(part["opened"]),
            part["digest"],
            None if highest is None else cast(OdometerReading, dict(highest)),
            HIGHEST not in part,
        )


def reading_of(config: AccountingConfig, state: FilterState) -> OdometerReading:
    """One block's certified reading, as its status shows it."""
    reading: OdometerReading = status(config, state)["odometer"]
    return reading


def higher(highest: OdometerReading | None, reading: OdometerReading) -> OdometerReading | None:
    """The maintained reading after a block read ``reading``: the reading of the block with
    the larger ε (blocks are compared by ε, as the status always compared them; a tie keeps
    the earlier), with δ the larger of the two, so that the one statement holds for the
    records of every block (parallel composition: each record's loss is bounded by its own
    block's (ε_b, δ_b), hence by (max ε_b, max δ_b)). ``None`` stays ``None`` until a block
    is read."""
    if highest is None:
        return reading.copy()
    eps, delta = Decimal(highest["epsilon"]), Decimal(highest["delta"])
    new_eps, new_delta = Decimal(reading["epsilon"]), Decimal(reading["delta"])
    if new_eps <= eps and new_delta <= delta:
        return highest.copy()
    base = reading.copy() if new_eps > eps else highest.copy()
    base["delta"] = fmt(max(delta, new_delta))
    return base


def raised(
    highest: OdometerReading | None,
    config: AccountingConfig,
    blocks: Blocks,
    ranges: Sequence[Range],
    readings: dict[FilterState, OdometerReading] | None = None,
) -> OdometerReading | None:
    """``highest`` raised to the readings of the runs of ``blocks`` within ``ranges`` (each
    distinct state read once; ``readings`` memoises them across calls)."""
    memo = {} if readings is None else readings
    out = None if highest is None else highest.copy()
    seen: set[FilterState] = set()  # a state read again cannot raise it further
    for run in blocks.walk(ranges):
        if run.state in seen:
            continue
        seen.add(run.state)
        reading = memo.get(run.state)
        if reading is None:
            reading = memo[run.state] = reading_of(config, run.state)
        out = higher(out, reading)
    return out


def shown_reading(config: AccountingConfig, highest: OdometerReading | None) -> OdometerReading:
    """The dataset's certified reading as shown: the maintained one, a fresh block's before any
    block was opened."""
    if highest is None:
        return reading_of(config, initial_state(config))
    return highest.copy()


def fresh_blocks(config: AccountingConfig, lo: int, hi: int, blocks: Blocks) -> Blocks:
    """``blocks`` with ``[lo, hi)`` opened, nothing spent."""
    return blocks.open(lo, hi, initial_state(config))


__all__ = [
    "BLOCKS",
    "HIGHEST",
    "MAX_RUNS",
    "MAX_RUNS_CREATED",
    "SHOWN_RANGES",
    "BlockHistory",
    "Held",
    "NotOpen",
    "Partitioned",
    "RunLimit",
    "Staged",
    "fresh_blocks",
    "higher",
    "raised",
    "ranges_from_json",
    "ranges_json",
    "reading_of",
    "refusal",
    "shown_reading",
    "touched_digest",
]


@dataclass(frozen=True, slots=True)
class BlockHistory:
    """What a replay holds of a partitioned dataset: its aggregate and every open block."""

    aggregate: Partitioned
    blocks: Blocks

    def to_json(self) -> PartitionedState:
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
    state: PartitionedState
    selected: list[BlockSpan]
    refused: list[RefusedSpan] | None


#: How many refused ranges a 409 lists.
SHOWN_RANGES: Final = 20

#: The most runs one request may add to a dataset: two per range of the most a selection lists
#: (a range cuts a run at each of its ends; ``MAX_SELECTION_ITEMS`` in
#: :mod:`odometer_core.partition`), so that 1,000 hashed user buckets are always admitted.
MAX_RUNS_CREATED: Final = 2_000
#: The most runs a dataset's open blocks may be held in: a selection that would leave more is
#: refused (one that adds none never is). Every per-selection read is bounded by the runs the
#: selection touches whatever this is; it bounds what a request on every open block ("all",
#: a budget change) reads and writes.
MAX_RUNS: Final = 250_000


class RunLimit(BlockError):
    """An admission that would cross a limit on runs (``name``, ``value``): refused, nothing
    changed. ``per_request``: the selection's own shape (the same anywhere); otherwise the
    dataset's state (the same request may be admitted on a less fragmented dataset)."""

    def __init__(self, detail: str, name: str, value: int, *, per_request: bool) -> None:
        super().__init__(detail)
        self.name, self.value, self.per_request = name, value, per_request


class Held:
    """A partitioned dataset's runs as one transaction holds them: the runs it read under the
    dataset's lock (``rows``: ``(lo, hi, state_json)``; the runs its selections touch and their
    neighbours, a sparse set: :class:`~odometer_core.accounting.blocks.Blocks`), decided on one
    request after another in memory, and what changed, to be written back (:meth:`changes`).
    The aggregate's counts are the stored ones moved by the difference between the runs held
    now and those read, which holds for any set of runs read. Pure: the service reads and
    writes the rows."""

    def __init__(
        self,
        config: AccountingConfig,
        aggregate: Mapping[str, Any],
        rows: Sequence[tuple[int, int, Mapping[str, Any]]],
    ) -> None:
        self.config = config
        self.base = Partitioned.from_json(aggregate)
        runs = tuple(Run(lo, hi, state_from_json(config, s)) for lo, hi, s in rows)
        self.loaded = Blocks(runs, self.base.opened)
        self.blocks = self.loaded
        self.highest = self.base.highest
        self._readings: dict[FilterState, OdometerReading] = {}

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

    def moved(self, blocks: Blocks, *, config: AccountingConfig | None = None) -> None:
        """The blocks after a decision (``config``: the blocks' configuration after a budget
        change)."""
        self.blocks = blocks
        if config is not None and config != self.config:
            self.config = config
            self._readings = {}

    def touched(self, ranges: Sequence[Range]) -> None:
        """Raise the maintained reading to the readings of the runs within ``ranges`` now
        (after a decision on them; before retiring them)."""
        self.highest = raised(self.highest, self.config, self.blocks, ranges, self._readings)

    def aggregate(self, touched: Sequence[Range]) -> Partitioned:
        """The dataset's aggregate after the last decision, with the digest of ``touched``."""
        return Partitioned(
            self.base.open - _count(self.loaded) + _count(self.blocks),
            self.base.runs - len(self.loaded.runs) + len(self.blocks.runs),
            self.blocks.opened,
            touched_digest(self.blocks, touched),
            self.highest,
        )

    def check(self, levels: LevelsDecision) -> None:
        """Refuse (:class:`RunLimit`) an admission that would add more runs than one request
        may (:data:`MAX_RUNS_CREATED`), or leave the dataset with more than it may hold
        (:data:`MAX_RUNS`); a refusal, or an admission that adds no run, passes."""
        if not levels.admitted or levels.selection is None:
            return
        created = len(levels.selection.blocks.runs) - len(self.blocks.runs)
        if created > MAX_RUNS_CREATED:
            raise RunLimit(
                f"this selection would cut the dataset's blocks into {created:,} more runs; "
                f"one request adds at most {MAX_RUNS_CREATED:,} (limit runs_per_request = "
                f"{MAX_RUNS_CREATED:,}): select fewer, or wider, ranges",
                "runs_per_request",
                MAX_RUNS_CREATED,
                per_request=True,
            )
        total = self.base.runs - len(self.loaded.runs) + len(levels.selection.blocks.runs)
        if created > 0 and total > MAX_RUNS:
            raise RunLimit(
                f"this selection would leave the dataset's open blocks in {total:,} runs; a "
                f"dataset holds at most {MAX_RUNS:,} (limit runs_per_dataset = {MAX_RUNS:,}): "
                "select ranges that follow the runs already there (a selection that adds no "
                "run is admitted), or ask a curator (docs/operations.md, Limits)",
                "runs_per_dataset",
                MAX_RUNS,
                per_request=False,
            )

    def decided(self, levels: LevelsDecision, selected: Selected, partition: Partition) -> Staged:
        """The blocks after ``levels`` (moved if it admitted), and what that decision records
        and answers."""
        if levels.admitted and levels.selection is not None:
            self.moved(levels.selection.blocks)
            self.touched(selected.ranges)
        refused: list[RefusedSpan] | None = None
        if levels.selection is not None and levels.refused_by == DATASET:
            refused = []
            for decision in levels.selection.refused:
                for span in partition.keys(decision.ranges):
                    item = cast(RefusedSpan, span)
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

    def changes(self) -> tuple[tuple[int, ...], tuple[tuple[int, int, StateJSON], ...]]:
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


def _count(blocks: Blocks) -> int:
    return blocks.count


def _joined(ranges: Sequence[Range]) -> tuple[Range, ...]:
    out: list[Range] = []
    for lo, hi in ranges:
        if out and out[-1][1] == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)
