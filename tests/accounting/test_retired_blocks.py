"""The core's part of retired blocks (``odometer_core.accounting.blocks``,
``odometer_core.ledger.blocks``): a block ever opened is never opened again, whatever holds the
blocks; the maintained reading takes a block's reading before it is retired and never falls; a
reservation finishes on the blocks still open and names the retired ones; a per-block budget
below the maintained reading is refused."""

from __future__ import annotations

from decimal import Decimal

import pytest

from odometer_core.accounting import (
    InvalidTransition,
    cancel,
    initial_state,
    make_config,
    parse_declaration,
    settle,
    state_to_json,
)
from odometer_core.accounting.blocks import (
    BlockError,
    Blocks,
    change_blocks,
    decide_selection,
    finish_reservation,
    retire,
)
from odometer_core.accounting.json_types import OdometerReading
from odometer_core.ledger.blocks import Held, Partitioned, higher, raised

CONFIG = make_config("1", "0.000001", "add_remove", {"mode": "basic"})
PURE = parse_declaration({"type": "pure_dp", "epsilon": "0.5"})
APPROX = parse_declaration({"type": "approx_dp", "epsilon": "0.2", "delta": "0.0000001"})
ODP = parse_declaration(
    {
        "type": "odp",
        "cells": [{"name": "low", "epsilon": "0.05"}, {"name": "high", "epsilon": "0.3"}],
    }
)


def _opened(lo: int, hi: int) -> Blocks:
    return Blocks().open(lo, hi, initial_state(CONFIG))


def test_a_block_ever_opened_is_never_opened_again() -> None:
    blocks = _opened(0, 10)
    with pytest.raises(BlockError, match="open already"):
        blocks.open(5, 12, initial_state(CONFIG))
    gone = retire(blocks, 0, 4)
    assert gone.opened == ((0, 10),) and [(r.lo, r.hi) for r in gone.runs] == [(4, 10)]
    for lo, hi in ((0, 1), (3, 4), (2, 4)):
        with pytest.raises(BlockError, match="opened before"):
            gone.open(lo, hi, initial_state(CONFIG))
    later = gone.open(10, 12, initial_state(CONFIG))  # a new range is opened as before
    assert later.opened == ((0, 12),)
    # every operation keeps what was ever opened
    charged = decide_selection(CONFIG, later, [(4, 6)], PURE).blocks
    assert charged.opened == ((0, 12),)
    _, changed = change_blocks(CONFIG, charged, "2", "0.000001")
    assert changed.opened == ((0, 12),)
    assert retire(changed, 4, 12).opened == ((0, 12),) and retire(changed, 4, 12).runs == ()


def test_held_blocks_know_the_ranges_opened_before_from_the_aggregate() -> None:
    """The service holds a window of runs; the core still refuses re-opening a block retired
    outside it, from the aggregate's ``opened``."""
    aggregate = Partitioned(5, 1, ((0, 10),), None).to_json()
    state = {"spent_epsilon": "0", "reserved_epsilon": "0", "spent_delta": "0"}
    held = Held(CONFIG, aggregate, [(5, 10, {**state, "open_reservations": 0})])
    with pytest.raises(BlockError, match="opened before"):
        held.blocks.open(0, 2, initial_state(CONFIG))


def test_the_maintained_reading_takes_a_retired_block_before_its_runs_go() -> None:
    blocks = _opened(0, 10)
    blocks = decide_selection(CONFIG, blocks, [(0, 2)], PURE).blocks
    reserved = decide_selection(CONFIG, blocks, [(1, 3)], ODP)
    reservation = reserved.decisions[0].decision.reservation
    assert reservation is not None
    blocks = reserved.blocks
    highest = raised(None, CONFIG, blocks, [(0, 10)])
    assert highest is not None and (highest["epsilon"], highest["delta"]) == ("0.8", "0")
    assert highest["source"] == "basic"
    rows = [(r.lo, r.hi, state_to_json(r.state)) for r in blocks.runs]
    aggregate = Partitioned(10, len(rows), ((0, 10),), None, None).to_json()
    held = Held(CONFIG, aggregate, rows)
    held.touched([(0, 3)])  # before retiring: the reservation at its worst cell
    held.moved(retire(held.blocks, 0, 3))
    after = held.aggregate([])
    assert (after.highest, after.open, after.opened) == (highest, 7, ((0, 10),))
    held.touched([(3, 10)])  # what is left open reads 0: the maintained value stays
    assert held.aggregate([]).highest == highest
    # the reservation finishes on the blocks still open (none) and names the retired ones
    finished = finish_reservation(CONFIG, held.blocks, [(1, 3)], reservation, "low")
    assert finished.retired == ((1, 3),)
    assert finished.blocks == held.blocks
    charge, refund = finished.decision.charge, finished.decision.refund
    assert charge is not None and refund is not None
    assert (charge.to_json(), refund.to_json()) == (
        {"epsilon": "0.05", "delta": "0"},
        {"epsilon": "0.25", "delta": "0"},
    )
    assert finished.decision.remaining.to_json() == {"epsilon": "0", "delta": "0"}


def test_a_partly_retired_reservation_finishes_on_its_open_blocks_as_on_each_block() -> None:
    blocks = decide_selection(CONFIG, _opened(0, 10), [(0, 6)], ODP).blocks
    reservation = decide_selection(CONFIG, _opened(0, 1), [(0, 1)], ODP).decisions[0]
    assert reservation.decision.reservation is not None
    held = reservation.decision.reservation
    gone = retire(blocks, 0, 2)
    for cell in ("high", None):
        finished = finish_reservation(CONFIG, gone, [(0, 6)], held, cell)
        assert finished.retired == ((0, 2),)
        one = gone.state_of(3)
        assert one is not None
        alone = cancel(CONFIG, one, held) if cell is None else settle(CONFIG, one, held, cell)
        assert finished.blocks.state_of(3) == alone.state
        assert finished.blocks.state_of(7) == gone.state_of(7)
        assert finished.decision.charge == alone.charge
        assert finished.decision.refund == alone.refund


def test_higher_keeps_the_largest_epsilon_reading_with_the_largest_delta() -> None:
    pure = OdometerReading(
        epsilon="0.9",
        delta="0",
        certified=True,
        source="basic",
        level=None,
        ladder_epsilon=None,
        theorem="t",
    )
    approx: OdometerReading = {**pure, "epsilon": "0.5", "delta": "0.000001"}
    assert higher(None, pure) == pure
    both = higher(pure, approx)
    assert both == {**pure, "delta": "0.000001"}  # one statement covers both blocks
    assert higher(both, pure) == both
    assert higher(approx, pure) == {**pure, "delta": "0.000001"}
    assert higher(pure, {**pure, "epsilon": "0.95"}) == {**pure, "epsilon": "0.95"}


def test_a_block_budget_below_the_maintained_reading_is_refused() -> None:
    blocks = decide_selection(CONFIG, _opened(0, 4), [(0, 1)], PURE).blocks
    blocks = decide_selection(CONFIG, blocks, [(1, 2)], APPROX).blocks
    highest = raised(None, CONFIG, blocks, [(0, 4)])
    assert highest is not None and (highest["epsilon"], highest["delta"]) == ("0.5", "0.0000001")
    gone = retire(blocks, 0, 2)  # every charged block retired: the open ones read 0
    for epsilon, delta in (("0.4", "0.000001"), ("1", "0.00000005")):
        with pytest.raises(InvalidTransition) as refused:
            change_blocks(CONFIG, gone, epsilon, delta, highest=highest)
        assert refused.value.code == "BudgetBelowSpent"
    config, _ = change_blocks(CONFIG, gone, "0.5", "0.0000001", highest=highest)
    assert (config.epsilon, config.delta) == (Decimal("0.5"), Decimal("0.0000001"))
    # without the maintained reading only the open blocks' rule applies (a scan would allow it)
    low, _ = change_blocks(CONFIG, gone, "0.05", "0.000001")
    assert low.epsilon == Decimal("0.05")
