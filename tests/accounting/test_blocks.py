"""Blocks of a partitioned dataset (``odometer_core.accounting.blocks``) against a per-block
reference model: random blocks opened, random overlapping selections charged in every leaf mode,
ODP reservations settled and cancelled. After every step each open block's state equals the
reference's (which runs the filter on every block separately), no block is over its budget, a
refused selection changed nothing, and the interval map holds one run per distinct history."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from odometer_core.accounting import (
    Reservation,
    admit,
    cancel,
    initial_state,
    make_config,
    parse_declaration,
    settle,
)
from odometer_core.accounting.blocks import (
    BlockError,
    Blocks,
    decide_selection,
    finish_selection,
    normalise,
)
from odometer_core.accounting.filters import FilterState
from odometer_core.accounting.modes import leaf_mode
from tests.accounting.block_workload import BLOCK_MECHANISMS

UNIVERSE = 40
MECHANISMS = BLOCK_MECHANISMS
ranges = st.lists(
    st.tuples(st.integers(0, UNIVERSE - 1), st.integers(1, 12)).map(lambda t: (t[0], t[0] + t[1])),
    min_size=1,
    max_size=3,
)


class BlocksMachine(RuleBasedStateMachine):
    mode = "basic"

    @initialize()
    def start(self) -> None:
        self.config = make_config("2", "0.00001", "add_remove", {"mode": self.mode})
        self.blocks = Blocks()
        self.reference: dict[int, FilterState] = {}
        self.open: list[tuple[tuple[tuple[int, int], ...], Reservation]] = []

    @rule(lo=st.integers(0, UNIVERSE - 1), length=st.integers(1, 15))
    def open_blocks(self, lo: int, length: int) -> None:
        hi = lo + length
        if any(b in self.reference for b in range(lo, hi)):
            with pytest.raises(BlockError):
                self.blocks.open(lo, hi, initial_state(self.config))
            return
        self.blocks = self.blocks.open(lo, hi, initial_state(self.config))
        for b in range(lo, hi):
            self.reference[b] = initial_state(self.config)

    @rule(selection=ranges, which=st.integers(0, 5))
    def charge(self, selection: list[tuple[int, int]], which: int) -> None:
        choices = MECHANISMS[self.mode]
        declaration = parse_declaration(choices[which % len(choices)])
        chosen = sorted({b for lo, hi in selection for b in range(lo, hi)})
        if any(b not in self.reference for b in chosen):
            with pytest.raises(BlockError):
                decide_selection(self.config, self.blocks, selection, declaration)
            return
        before = self.blocks
        result = decide_selection(self.config, self.blocks, selection, declaration)
        per_block = {b: admit(self.config, self.reference[b], declaration) for b in chosen}
        assert result.admitted == all(d.admitted for d in per_block.values())
        if not result.admitted:
            assert result.blocks == before  # a refusal anywhere changes nothing
            refused = {b for d in result.refused for lo, hi in d.ranges for b in range(lo, hi)}
            assert refused == {b for b, d in per_block.items() if not d.admitted}
            return
        self.blocks = result.blocks
        for b, d in per_block.items():
            self.reference[b] = d.state
        reservation = result.decisions[0].decision.reservation
        if reservation is not None:
            self.open.append((normalise(selection), reservation))

    @rule(k=st.integers(0, 7), cell=st.sampled_from(["low", "high", None]))
    def finish(self, k: int, cell: str | None) -> None:
        if not self.open:
            return
        selection, reservation = self.open.pop(k % len(self.open))
        result = finish_selection(self.config, self.blocks, selection, reservation, cell)
        self.blocks = result.blocks
        for lo, hi in selection:
            for b in range(lo, hi):
                state = self.reference[b]
                finished = (
                    cancel(self.config, state, reservation)
                    if cell is None
                    else settle(self.config, state, reservation, cell)
                )
                self.reference[b] = finished.state

    @invariant()
    def every_block_is_its_reference(self) -> None:
        seen: dict[int, FilterState] = {}
        runs = self.blocks.runs
        for run in runs:
            for b in range(run.lo, run.hi):
                seen[b] = run.state
        assert seen == self.reference

    @invariant()
    def one_run_per_history_and_never_over_budget(self) -> None:
        runs = self.blocks.runs
        for left, right in itertools.pairwise(runs):
            assert left.hi <= right.lo
            assert not (left.hi == right.lo and left.state == right.state)
        mode = leaf_mode(self.config)  # type: ignore[arg-type]
        for run in runs:
            assert mode.over_budget(self.config, run.state) is None


def _machine(mode: str) -> type[BlocksMachine]:
    return type(f"Blocks{mode.title()}", (BlocksMachine,), {"mode": mode})


@pytest.mark.parametrize("mode", list(MECHANISMS))
def test_blocks_follow_the_per_block_reference(mode: str) -> None:
    machine = _machine(mode)
    machine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
    machine.TestCase().runTest()


def test_a_range_charge_keeps_one_run_per_history() -> None:
    """10⁶ daily blocks opened at once are one run; a charge over [10, 20) makes three; a
    second, equal charge over [20, 30) merges them back to three (two histories)."""
    config = make_config("1", "0.000001", "add_remove", {"mode": "basic"})
    blocks = Blocks().open(0, 10**6, initial_state(config))
    assert len(blocks.runs) == 1
    pure = parse_declaration({"type": "pure_dp", "epsilon": "0.1"})
    first = decide_selection(config, blocks, [(10, 20)], pure)
    assert first.admitted and [(r.lo, r.hi) for r in first.blocks.runs] == [
        (0, 10),
        (10, 20),
        (20, 10**6),
    ]
    second = decide_selection(config, first.blocks, [(20, 30)], pure)
    assert [(r.lo, r.hi) for r in second.blocks.runs] == [(0, 10), (10, 30), (30, 10**6)]
    assert second.blocks.state_of(25) == second.blocks.state_of(15)
    assert second.blocks.state_of(25).spent_epsilon == Decimal("0.1")  # type: ignore[union-attr]
    with pytest.raises(BlockError, match=r"not open: \[1000000, 1000005\)"):
        decide_selection(config, second.blocks, [(999_999, 1_000_005)], pure)
