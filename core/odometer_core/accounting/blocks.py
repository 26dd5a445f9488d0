"""Partitioned datasets: one filter per block, a selection of blocks decided as one (pure).

A partitioned dataset's records fall into blocks by a public key (a day, a hash bucket, a named
part). Every block is a privacy filter of its own, with the one configuration the curator chose
for the blocks; an invocation names a selection of blocks, and is admitted only if every selected
block admits it, and then every selected block is charged its whole cost, at once.

**Why per-block filters are sound (parallel composition under full adaptivity).** Each record
lies in exactly one block, and a mechanism that reads the blocks of a selection S depends on the
records of S only: for a record in a block b ∉ S the mechanism's output distribution is the same
on neighbouring inputs that differ in that record, so it adds no privacy loss for it. The loss of
a record in block b is therefore the composition of the mechanisms whose selections contained b,
adaptively chosen, and block b's filter sees exactly that sequence, with each one's cost fixed
before it runs; the filter theorem of the blocks' mode (the same theorems as for a whole dataset:
Rogers–Roth–Ullman–Vadhan 2016 for ``basic``, Whitehouse–Ramdas–Rogers–Wu 2023 for ``zcdp``,
Feldman–Zrnic 2021 per order for ``rdp``, Smith–Thakurta 2022 for ``gdp``) bounds it. The unit
of privacy is a record (or a person, when the key puts all of a person's records in one block),
under ``add_remove``; ``replace_one`` needs a key that a replacement cannot change (then it stays
in one block). In ``rdp`` each block keeps the filter's own rule (some live order within its
threshold after the charge, every order's threshold fixed in advance), never a per-block
"fits at one order with the whole δ" test, which is not a fully adaptive filter.

**State that grows with histories, not blocks.** :class:`Blocks` keeps maximal runs of
consecutive open blocks that share one state (one history), as an interval map: a charge over a
range splits runs only at the range's ends, decides each distinct state once and merges
neighbouring runs whose states became equal again. A dataset of 10⁶ daily blocks charged over
ranges holds O(number of charges) runs, however many blocks it has.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal

from odometer_core.accounting.declarations import Declaration
from odometer_core.accounting.filters import (
    AccountingConfig,
    Decision,
    FilterState,
    Reservation,
    admit,
    cancel,
    settle,
)

#: A half-open range of block indices ``[lo, hi)``.
Range = tuple[int, int]


class BlockError(ValueError):
    """A selection that names blocks which are not open, or a malformed range (HTTP 422)."""


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive open blocks ``[lo, hi)`` that share one state."""

    lo: int
    hi: int
    state: FilterState


def normalise(selection: Iterable[Range]) -> tuple[Range, ...]:
    """The selection as sorted, disjoint, non-adjacent ranges (overlaps and neighbours merged);
    empty and reversed ranges are a :class:`BlockError`."""
    ranges = sorted(selection)
    out: list[Range] = []
    for lo, hi in ranges:
        if hi <= lo:
            raise BlockError(f"the block range [{lo}, {hi}) is empty")
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    if not out:
        raise BlockError("a selection names at least one block")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Blocks:
    """The open blocks of a partitioned dataset and their states, as runs sorted by ``lo``
    (disjoint; neighbouring runs never share a state). Immutable: every operation returns a
    new value."""

    runs: tuple[Run, ...] = ()

    # ------------------------------------------------------------------ reading
    def _index(self, block: int) -> int:
        """The index of the first run whose ``hi`` is above ``block``."""
        return bisect.bisect_right([r.hi for r in self.runs], block)

    def pieces(self, lo: int, hi: int) -> Iterator[Run]:
        """The runs within ``[lo, hi)``, clipped to it (gaps, blocks not open, left out)."""
        for run in self.runs[self._index(lo) :]:
            if run.lo >= hi:
                return
            yield Run(max(run.lo, lo), min(run.hi, hi), run.state)

    def state_of(self, block: int) -> FilterState | None:
        """One block's state, ``None`` when it is not open."""
        for run in self.pieces(block, block + 1):
            return run.state
        return None

    def missing(self, selection: Sequence[Range]) -> tuple[Range, ...]:
        """The parts of ``selection`` (normalised) that are not open blocks."""
        gaps: list[Range] = []
        for lo, hi in selection:
            at = lo
            for run in self.pieces(lo, hi):
                if run.lo > at:
                    gaps.append((at, run.lo))
                at = run.hi
            if at < hi:
                gaps.append((at, hi))
        return tuple(gaps)

    # ------------------------------------------------------------------ changing
    def open(self, lo: int, hi: int, state: FilterState) -> Blocks:
        """Open the blocks ``[lo, hi)`` with ``state`` (a new block's: nothing spent). Blocks
        open (or opened before) are a :class:`BlockError`: a block's history never restarts."""
        if hi <= lo:
            raise BlockError(f"the block range [{lo}, {hi}) is empty")
        if any(True for _ in self.pieces(lo, hi)):
            raise BlockError(f"blocks of [{lo}, {hi}) are open already")
        return _replace_each(self, [Run(lo, hi, state)])


def _merged(runs: Sequence[Run]) -> tuple[Run, ...]:
    """Sorted runs with touching neighbours of equal state merged into one."""
    out: list[Run] = []
    for run in sorted(runs, key=lambda r: r.lo):
        if out and out[-1].hi == run.lo and out[-1].state == run.state:
            out[-1] = Run(out[-1].lo, run.hi, run.state)
        else:
            out.append(run)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RangeDecision:
    """One distinct state's decision over the blocks of the selection that hold it."""

    ranges: tuple[Range, ...]
    decision: Decision


@dataclass(frozen=True, slots=True)
class SelectionDecision:
    """The outcome of :func:`decide_selection`: every distinct history's decision, the blocks
    after it (unchanged when any block refused) and the ranges that refused."""

    admitted: bool
    blocks: Blocks
    decisions: tuple[RangeDecision, ...]

    @property
    def refused(self) -> tuple[RangeDecision, ...]:
        return tuple(d for d in self.decisions if not d.decision.admitted)


def _by_state(blocks: Blocks, selection: Sequence[Range]) -> list[tuple[FilterState, list[Run]]]:
    """The selected pieces grouped by state (first-seen order): each distinct history is
    decided once, whatever number of runs holds it."""
    groups: dict[FilterState, list[Run]] = {}
    for lo, hi in selection:
        for piece in blocks.pieces(lo, hi):
            groups.setdefault(piece.state, []).append(piece)
    return list(groups.items())


def decide_selection(
    config: AccountingConfig,
    blocks: Blocks,
    selection: Iterable[Range],
    declaration: Declaration,
    *,
    conversion_delta: Decimal | None = None,
) -> SelectionDecision:
    """Decide ``declaration`` on every block of ``selection``: admitted only if every selected
    block admits it, and then every selected block moves to its new state; a refusal anywhere
    changes nothing anywhere. A selection naming blocks that are not open is a
    :class:`BlockError`. Raises what :func:`~.filters.admit` raises (422)."""
    ranges = normalise(selection)
    gaps = blocks.missing(ranges)
    if gaps:
        shown = ", ".join(f"[{lo}, {hi})" for lo, hi in gaps[:5])
        raise BlockError(f"the selection names blocks that are not open: {shown}")
    decided: list[tuple[RangeDecision, list[Run]]] = []
    for state, pieces in _by_state(blocks, ranges):
        decision = admit(config, state, declaration, conversion_delta=conversion_delta)
        spans = tuple((p.lo, p.hi) for p in pieces)
        decided.append((RangeDecision(spans, decision), pieces))
    outcomes = tuple(d for d, _ in decided)
    if not all(d.decision.admitted for d in outcomes):
        return SelectionDecision(False, blocks, outcomes)
    new = sorted(
        (Run(p.lo, p.hi, d.decision.state) for d, pieces in decided for p in pieces),
        key=lambda r: r.lo,
    )
    return SelectionDecision(True, _replace_each(blocks, new), outcomes)


def finish_selection(
    config: AccountingConfig,
    blocks: Blocks,
    selection: Iterable[Range],
    reservation: Reservation,
    cell: str | None,
) -> SelectionDecision:
    """Settle (``cell``) or cancel (``None``) a reservation made on ``selection``, on every
    selected block (whose histories may have diverged since: each distinct one is finished
    once)."""
    ranges = normalise(selection)
    decided: list[tuple[RangeDecision, list[Run]]] = []
    for state, pieces in _by_state(blocks, ranges):
        if cell is None:
            decision = cancel(config, state, reservation)
        else:
            decision = settle(config, state, reservation, cell)
        decided.append((RangeDecision(tuple((p.lo, p.hi) for p in pieces), decision), pieces))
    new = sorted(
        (Run(p.lo, p.hi, d.decision.state) for d, pieces in decided for p in pieces),
        key=lambda r: r.lo,
    )
    return SelectionDecision(True, _replace_each(blocks, new), tuple(d for d, _ in decided))


def _replace_each(blocks: Blocks, new: Sequence[Run]) -> Blocks:
    """``blocks`` with each of the sorted, disjoint ``new`` runs put in place of what covered
    its range, in one pass, neighbours of equal state merged."""
    out: list[Run] = []
    i = 0
    for run in blocks.runs:
        while i < len(new) and new[i].hi <= run.lo:
            i += 1
        at, j = run.lo, i
        while j < len(new) and new[j].lo < run.hi:
            if new[j].lo > at:
                out.append(Run(at, new[j].lo, run.state))
            at = max(at, new[j].hi)
            j += 1
        if at < run.hi:
            out.append(Run(at, run.hi, run.state))
    return Blocks(_merged([*out, *new]))
