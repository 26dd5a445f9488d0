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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from operator import attrgetter
from typing import Any

from odometer_core.accounting.amounts import Amount, EpsilonDelta, MuSquared, RdpCurve, RhoDelta
from odometer_core.accounting.declarations import Declaration
from odometer_core.accounting.exact import fmt
from odometer_core.accounting.filters import (
    CAPACITY_LIMIT,
    AccountingConfig,
    Capacity,
    Decision,
    FilterState,
    Reservation,
    admit,
    cancel,
    capacity,
    change_budget,
    initial_state,
    recheck_dead,
    settle,
)
from odometer_core.accounting.modes import budget
from odometer_core.accounting.modes.basic import BasicConfig, BasicState
from odometer_core.accounting.modes.common import InvalidTransition

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


_LO = attrgetter("lo")


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
    (disjoint; neighbouring runs never share a state), and ``opened``: every block ever opened,
    retired ones included, as normalised ranges (a block is opened once: its history never
    restarts, :meth:`open`). Immutable: every operation returns a new value.

    ``runs`` may be a *sparse* set of a dataset's runs (the service holds only the runs a
    transaction's selections touch, and their neighbours): two runs are neighbours only when
    one ends where the other starts, so nothing here assumes that the runs held cover a
    contiguous window. Every operation costs O(k log n) for the k ranges it names and the n
    runs held (a binary search per range; what is copied unchanged is copied as a slice)."""

    runs: tuple[Run, ...] = ()
    opened: tuple[Range, ...] = ()
    #: how many blocks the runs hold, when known (:attr:`count`; kept by the operations)
    known_count: int = field(default=-1, compare=False, repr=False)
    #: the runs' starts and ends, in order, when known (the binary searches' keys; built once,
    #: then carried by the operations as slices of their source's)
    known_bounds: tuple[list[int], list[int]] | None = field(
        default=None, compare=False, repr=False
    )

    # ------------------------------------------------------------------ reading
    @property
    def count(self) -> int:
        """How many blocks the runs hold: counted once, then kept by every operation that
        changes the runs (by what it changed, not by counting again)."""
        if self.known_count < 0:
            object.__setattr__(self, "known_count", sum(r.hi - r.lo for r in self.runs))
        return self.known_count

    @property
    def bounds(self) -> tuple[list[int], list[int]]:
        """The runs' starts and ends, in order (never changed once built)."""
        if self.known_bounds is None:
            bounds = ([r.lo for r in self.runs], [r.hi for r in self.runs])
            object.__setattr__(self, "known_bounds", bounds)
            return bounds
        return self.known_bounds

    def _index(self, block: int) -> int:
        """The index of the first run whose ``hi`` is above ``block`` (a binary search)."""
        return bisect.bisect_right(self.bounds[1], block)

    def _end(self, block: int) -> int:
        """The index of the first run that starts at or after ``block``."""
        return bisect.bisect_left(self.bounds[0], block)

    def pieces(self, lo: int, hi: int) -> Iterator[Run]:
        """The runs within ``[lo, hi)``, clipped to it (gaps, blocks not open, left out): a
        run that lies within the range as it is, not a copy. One binary search, then the
        pieces in order."""
        runs = self.runs
        for at in range(self._index(lo), len(runs)):  # never a slice: that copies the rest
            run = runs[at]
            if run.lo >= hi:
                return
            if lo <= run.lo and run.hi <= hi:
                yield run
            else:
                yield Run(max(run.lo, lo), min(run.hi, hi), run.state)

    def walk(self, ranges: Sequence[Range]) -> Iterator[Run]:
        """The pieces of every range of ``ranges`` in turn (:meth:`pieces`): O(k log runs)
        for k ranges."""
        for lo, hi in ranges:
            yield from self.pieces(lo, hi)

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

    def ever_opened(self, lo: int, hi: int) -> bool:
        """Whether a block of ``[lo, hi)`` is open or was ever opened (retired since)."""
        return any(a < hi and lo < b for a, b in self.opened) or any(
            True for _ in self.pieces(lo, hi)
        )

    # ------------------------------------------------------------------ changing
    def open(self, lo: int, hi: int, state: FilterState) -> Blocks:
        """Open the blocks ``[lo, hi)`` with ``state`` (a new block's: nothing spent). A block
        open now, or ever opened and retired since (:attr:`opened`), is a :class:`BlockError`:
        a block's history never restarts (its records keep what they lost), so a retired
        block's filter is never replaced by a fresh one."""
        if hi <= lo:
            raise BlockError(f"the block range [{lo}, {hi}) is empty")
        if any(True for _ in self.pieces(lo, hi)):
            raise BlockError(f"blocks of [{lo}, {hi}) are open already")
        if self.ever_opened(lo, hi):
            raise BlockError(
                f"blocks of [{lo}, {hi}) were opened before: a block's history never restarts"
            )
        opened = normalise([*self.opened, (lo, hi)])
        return Blocks(_replace_each(self, [Run(lo, hi, state)]).runs, opened)


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
    return _grouped(blocks, selection)[0]


def _grouped(
    blocks: Blocks, selection: Sequence[Range]
) -> tuple[list[tuple[FilterState, list[Run]]], tuple[Range, ...]]:
    """:func:`_by_state` and :meth:`Blocks.missing` of ``selection`` in one pass over its
    pieces."""
    groups: dict[FilterState, list[Run]] = {}
    gaps: list[Range] = []
    for lo, hi in selection:
        at = lo
        for piece in blocks.pieces(lo, hi):
            if piece.lo > at:
                gaps.append((at, piece.lo))
            at = piece.hi
            groups.setdefault(piece.state, []).append(piece)
        if at < hi:
            gaps.append((at, hi))
    return list(groups.items()), tuple(gaps)


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
    groups, gaps = _grouped(blocks, ranges)
    if gaps:
        shown = ", ".join(f"[{lo}, {hi})" for lo, hi in gaps[:5])
        raise BlockError(f"the selection names blocks that are not open: {shown}")
    decided: list[tuple[RangeDecision, list[Run]]] = []
    for state, pieces in groups:
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


@dataclass(frozen=True, slots=True)
class Finished:
    """A reservation finished on its blocks (:func:`finish_reservation`): the blocks after it,
    the dataset-level decision (:func:`summarise`'s), and the ranges of the reservation's
    blocks that were retired since it was made (their runs are gone with what they held)."""

    blocks: Blocks
    decision: Decision
    retired: tuple[Range, ...]


def finish_reservation(
    config: AccountingConfig,
    blocks: Blocks,
    selection: Iterable[Range],
    reservation: Reservation,
    cell: str | None,
) -> Finished:
    """Settle (``cell``) or cancel (``None``) a reservation made on ``selection``, whatever
    happened to its blocks since: on the blocks still open as :func:`finish_selection` does;
    the blocks retired since (every block of the selection that is not open: a block is never
    opened again) are left out and named (``retired``). Their reading was taken, reservation
    included at its worst cell, before their runs were dropped
    (:mod:`odometer_core.ledger.blocks`), so nothing they held is lost. When every block was
    retired, the dataset-level decision is the one any block holding the reservation would
    give (:func:`_held_alone`: the charge and refund depend on the reservation and the cell
    only), with nothing left (no block of the selection can be charged again)."""
    ranges = normalise(selection)
    retired = blocks.missing(ranges)
    still = normalise_or_empty(
        (piece.lo, piece.hi) for lo, hi in ranges for piece in blocks.pieces(lo, hi)
    )
    if still:
        finished = finish_selection(config, blocks, still, reservation, cell)
        return Finished(finished.blocks, summarise(finished), retired)
    return Finished(blocks, _held_alone(config, blocks, reservation, cell), retired)


def _held_alone(
    config: AccountingConfig, blocks: Blocks, reservation: Reservation, cell: str | None
) -> Decision:
    """The decision of a settle or cancel on a block that holds ``reservation`` and nothing
    else: ODP reservations exist in ``basic`` only (elsewhere :func:`~.filters.settle`'s own
    ``NotSettleable``), where the charge is the cell's ε, the refund the rest of the worst
    cell's (a cancel: all of it, with δ), whatever else the block held."""
    if not isinstance(config, BasicConfig):
        raise InvalidTransition(
            "NotSettleable", "a-posteriori settlement exists only in mode 'basic'"
        )
    partition = reservation.partition
    holding = BasicState(
        reserved_epsilon=partition.worst_epsilon,
        spent_delta=partition.delta,
        open_reservations=1,
    )
    alone = (
        cancel(config, holding, reservation)
        if cell is None
        else settle(config, holding, reservation, cell)
    )
    return Decision(
        alone.outcome,
        blocks,
        alone.charge,
        alone.requested,
        EpsilonDelta(),
        reason=alone.reason,
        refund=alone.refund,
    )


def _replace_each(blocks: Blocks, new: Sequence[Run]) -> Blocks:
    """``blocks`` with each of the sorted, disjoint ``new`` runs put in place of what covered
    its range, neighbours of equal state merged. Local: the runs no new run overlaps are
    copied as slices (their bounds too), so the work is O(k log n) searches for the k new
    runs (and a copy of the n runs held)."""
    if not new:
        return blocks
    runs = blocks.runs
    los, his = blocks.bounds
    out: list[Run] = []
    out_lo: list[int] = []
    out_hi: list[int] = []

    def emit(run: Run) -> None:
        if out and out_hi[-1] == run.lo and out[-1].state == run.state:
            out[-1] = Run(out[-1].lo, run.hi, run.state)
            out_hi[-1] = run.hi
        else:
            out.append(run)
            out_lo.append(run.lo)
            out_hi.append(run.hi)

    def copy(a: int, b: int) -> None:
        if a < b:
            emit(runs[a])  # the first may merge with what was emitted before it
            out.extend(runs[a + 1 : b])  # the others never do (they were merged already)
            out_lo.extend(los[a + 1 : b])
            out_hi.extend(his[a + 1 : b])

    change = 0  # blocks held by the runs emitted minus those of the runs they replace
    copied, k = 0, 0
    while k < len(new):
        # a group: new runs whose overlapped old runs chain into one slice [i, j)
        i = bisect.bisect_right(his, new[k].lo, lo=copied)
        j = max(i, bisect.bisect_left(los, new[k].hi, lo=i))
        m = k + 1
        while m < len(new):
            i2 = bisect.bisect_right(his, new[m].lo, lo=i)
            if i2 >= j:
                break
            j = max(j, bisect.bisect_left(los, new[m].hi, lo=i2))
            m += 1
        copy(copied, i)
        group = new[k:m]
        pieces: list[Run] = []
        g = 0
        for run in runs[i:j]:
            change -= run.hi - run.lo
            while g < len(group) and group[g].hi <= run.lo:
                g += 1
            at, h = run.lo, g
            while h < len(group) and group[h].lo < run.hi:
                if group[h].lo > at:
                    pieces.append(Run(at, group[h].lo, run.state))
                at = max(at, group[h].hi)
                h += 1
            if at < run.hi:
                pieces.append(Run(at, run.hi, run.state))
        for run in sorted([*pieces, *group], key=_LO) if pieces else group:
            emit(run)
            change += run.hi - run.lo
        copied, k = j, m
    copy(copied, len(runs))
    count = blocks.known_count + change if blocks.known_count >= 0 else -1
    return Blocks(tuple(out), blocks.opened, count, (out_lo, out_hi))


# ---------------------------------------------------------------------------- the dataset level
@dataclass(frozen=True, slots=True)
class Selected:
    """The dataset level of an invocation on a partitioned dataset: the blocks' configuration,
    the open blocks (at least every run the selection touches) and the selection, normalised."""

    config: AccountingConfig
    blocks: Blocks
    ranges: tuple[Range, ...]


def meet(amounts: Sequence[Amount]) -> Amount:
    """What is left in every one of several blocks: the componentwise minimum of their
    remaining amounts (one mode, one grid)."""
    first = amounts[0]
    if isinstance(first, EpsilonDelta):
        eds = [a for a in amounts if isinstance(a, EpsilonDelta)]
        return EpsilonDelta(min(a.epsilon for a in eds), min(a.delta for a in eds))
    if isinstance(first, RhoDelta):
        rds = [a for a in amounts if isinstance(a, RhoDelta)]
        return RhoDelta(min(a.rho for a in rds), min(a.delta for a in rds))
    if isinstance(first, MuSquared):
        return MuSquared(min(a.mu_squared for a in amounts if isinstance(a, MuSquared)))
    curves = [a for a in amounts if isinstance(a, RdpCurve)]
    return RdpCurve(
        first.orders,
        tuple(min(c.rdp[i] for c in curves) for i in range(len(first.orders))),
        min(c.delta for c in curves),
    )


def summarise(selection: SelectionDecision) -> Decision:
    """The selection's decision as one dataset-level decision: the outcome and charge every
    selected block got (every block is charged the declaration's whole cost), what is left in
    all of them (:func:`meet`), and, on a refusal, the first refusing history's reason. The
    state is the blocks after the decision."""
    decisions = [d.decision for d in selection.decisions]
    refused = [d for d in decisions if not d.admitted]
    reported = refused[0] if refused else decisions[0]
    reservations = {d.reservation for d in decisions}
    if not refused and len(reservations) != 1:  # a reservation is the declaration's, not a state's
        raise AssertionError("selected blocks reserved differently")
    return Decision(
        reported.outcome,
        selection.blocks,
        reported.charge,
        reported.requested,
        meet([d.remaining for d in decisions]),
        reason=reported.reason,
        reservation=reported.reservation if not refused else None,
        refund=reported.refund,
    )


def decide_selected(
    selected: Selected, declaration: Declaration, *, conversion_delta: Decimal | None = None
) -> SelectionDecision:
    """:func:`decide_selection` on the dataset level of a partitioned invocation."""
    return decide_selection(
        selected.config,
        selected.blocks,
        selected.ranges,
        declaration,
        conversion_delta=conversion_delta,
    )


def affordable(
    selected: Selected, declaration: Declaration, *, conversion_delta: Decimal | None = None
) -> tuple[tuple[Range, ...], tuple[Range, ...]]:
    """The ranges of the selection whose blocks can still afford ``declaration`` now, and those
    whose blocks cannot (each distinct history decided once; nothing changes)."""
    yes: list[Range] = []
    no: list[Range] = []
    decisions = decide_selected(selected, declaration, conversion_delta=conversion_delta)
    for decided in decisions.decisions:
        (yes if decided.decision.admitted else no).extend(decided.ranges)
    return normalise_or_empty(yes), normalise_or_empty(no)


def normalise_or_empty(ranges: Iterable[Range]) -> tuple[Range, ...]:
    """:func:`normalise`, with no range giving no range."""
    listed = list(ranges)
    return normalise(listed) if listed else ()


def selection_capacity(
    selected: Selected,
    declaration: Declaration,
    *,
    conversion_delta: Decimal | None = None,
    limit: int = CAPACITY_LIMIT,
) -> Capacity:
    """How many more of ``declaration`` on this selection would be admitted in a row: the
    fewest any selected block admits (each distinct history counted once; every selected block
    is charged by each one)."""
    ranges = normalise(selected.ranges)
    if selected.blocks.missing(ranges):
        raise BlockError("the selection names blocks that are not open")
    best: Capacity | None = None
    for state, _ in _by_state(selected.blocks, ranges):
        counted = capacity(
            selected.config, state, declaration, conversion_delta=conversion_delta, limit=limit
        )
        if best is None or counted.count < best.count:
            best = counted
    assert best is not None
    return best


def change_blocks(
    config: AccountingConfig,
    blocks: Blocks,
    epsilon: object,
    delta: object,
    *,
    final_conversion_delta: object = None,
    workload: object = None,
    highest: Mapping[str, Any] | None = None,
) -> tuple[AccountingConfig, Blocks]:
    """A per-block budget change, applied to every open block and to every block opened later
    (one configuration for the blocks). Each block follows the budget-change rule of a whole
    dataset (:func:`~.filters.change_budget`): while no open block has been charged the filter
    is made anew; once one has, thresholds and ladder stay and the new ε caps each block's
    certified reading, and a value below any block's reading is refused (``BudgetBelowSpent``).
    A block still fresh under a filter whose thresholds were fixed at creation is a filter whose
    thresholds were fixed before its first charge, which is all its guarantee needs.

    ``highest`` is the dataset's maintained reading (the highest over every block ever opened,
    retired ones included: :mod:`odometer_core.ledger.blocks`): a budget below it, in ε or in
    δ, is refused as well (``BudgetBelowSpent``), since what was released about the records of
    a retired block stays released however its block ended."""
    eps, dlt = budget(epsilon, delta)
    if highest is not None:
        high_eps, high_delta = Decimal(highest["epsilon"]), Decimal(highest["delta"])
        if eps < high_eps or dlt < high_delta:
            raise InvalidTransition(
                "BudgetBelowSpent",
                f"the highest certified reading of a block ever opened (retired ones "
                f"included) is (ε {fmt(high_eps)}, δ {fmt(high_delta)}): what was released "
                "stays released, so a budget below it is refused",
            )
    fresh = initial_state(config)
    states = [state for state, _ in _by_state(blocks, [(r.lo, r.hi) for r in blocks.runs])]
    charged = [s for s in states if s != fresh]

    def change(state: FilterState) -> tuple[AccountingConfig, FilterState]:
        return change_budget(
            config,
            state,
            epsilon,
            delta,
            final_conversion_delta=final_conversion_delta,
            workload=workload,
        )

    new_config, _ = change(charged[0] if charged else fresh)
    moved: dict[FilterState, FilterState] = {}
    for state in states:
        if state == fresh and charged:
            moved[state] = recheck_dead(new_config, initial_state(config))
            continue
        changed_config, changed = change(state)
        if changed_config != new_config:  # pragma: no cover - the rule depends on freshness only
            raise AssertionError("blocks' budget change diverged")
        moved[state] = changed
    runs = [Run(r.lo, r.hi, moved[r.state]) for r in blocks.runs]
    return new_config, Blocks(_merged(runs), blocks.opened)


def retire(blocks: Blocks, lo: int, hi: int) -> Blocks:
    """``blocks`` without ``[lo, hi)``, every one of which must be open (a retired block is
    never selected again, and never opened again: its history does not restart)."""
    if hi <= lo:
        raise BlockError(f"the block range [{lo}, {hi}) is empty")
    gaps = blocks.missing(((lo, hi),))
    if gaps:
        raise BlockError(f"blocks of [{lo}, {hi}) are not open")
    runs = blocks.runs
    los, his = blocks.bounds
    i, j = blocks._index(lo), blocks._end(hi)
    kept: list[Run] = list(runs[:i])
    kept_lo, kept_hi = los[:i], his[:i]
    for run in runs[i:j]:
        if run.lo < lo:
            kept.append(Run(run.lo, lo, run.state))
            kept_lo.append(run.lo)
            kept_hi.append(lo)
        if run.hi > hi:
            kept.append(Run(hi, run.hi, run.state))
            kept_lo.append(hi)
            kept_hi.append(run.hi)
    kept.extend(runs[j:])
    kept_lo.extend(los[j:])
    kept_hi.extend(his[j:])
    count = blocks.known_count - (hi - lo) if blocks.known_count >= 0 else -1
    return Blocks(tuple(kept), blocks.opened, count, (kept_lo, kept_hi))
