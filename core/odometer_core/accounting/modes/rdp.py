"""``rdp`` mode: an approximate-RDP privacy filter over a grid of orders Λ.

Each order α has a threshold B(α) = ε_B + [log(w_α δ_c) + log(α−1) − α log(1−1/α)]/(α−1), the
Canonne–Kamath–Steinke 2020 (Prop. 12) conversion inverted at the order's share w_α·δ_c of δ_c
(Σw_α ≤ 1, a union bound over Λ), rounded down. Admission: Σδ_i + δ ≤ δ_A and some live order has
S(α) + ε(α) ≤ B(α); the curve is then added at every order (rounded up) and orders that crossed
their threshold die for good. Per order this is the RDP filter of Feldman–Zrnic 2021 (Thm 4.3),
valid under full adaptivity; by the union bound everything released is (ε_B, δ_A + δ_c)-DP. See
``docs/accounting.md``.

A declaration's curve (what is charged, and why a kind has none) is
:mod:`odometer_core.accounting.modes.curves`.

The weights only have to be fixed before the first charge, so they may depend on what the curator
declares up front: a declared workload gets the grid :func:`choose_grid` picks for it (recorded in
the configuration), and from accounting 1.5.0 on the default grid without one has its weights
chosen by the first declaration admitted, chosen before any output (:data:`WEIGHTS_FIRST`).
The parts of the filter in force once that declaration chose (its weights, branch split, levels
and ladder shape, and the caps a budget change puts on them) are
:mod:`odometer_core.accounting.modes.rdp_force`; :func:`in_force` puts them together.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import effort
from odometer_core.accounting import odometer as odo
from odometer_core.accounting.amounts import RdpCurve
from odometer_core.accounting.declarations import ApproxDP, Declaration, Relation
from odometer_core.accounting.exact import (
    INFINITY,
    ONE,
    ZERO,
    add_up,
    cost_from_float,
    fmt,
    sub_down,
    sub_up,
    to_float_down,
)
from odometer_core.accounting.memo import memoised
from odometer_core.accounting.modes import rdp_choice
from odometer_core.accounting.modes import rdp_shaped as shaped
from odometer_core.accounting.modes.common import (
    LEGACY_FIXED,
    ConfigError,
    Decision,
    InvalidTransition,
    Mode,
    Reservation,
    amount,
    anchored_delta_problem,
    conversion_delta_for,
    keep_conversion_delta,
    only,
    reject,
    within_creation_filter,
)

# re-exported: the wire model's workload limits, the cache the work-limit tests clear, and what
# ``rdp`` mode charges (the curves module)
from odometer_core.accounting.modes.curves import (
    _poisson_gaussian_cached as _poisson_gaussian_cached,
)
from odometer_core.accounting.modes.curves import rdp_curve as rdp_curve
from odometer_core.accounting.modes.curves import unsupported as unsupported

# the stored form (configuration, state, their JSON), re-exported
from odometer_core.accounting.modes.rdp_config import DEFAULT_RDP_ORDERS as DEFAULT_RDP_ORDERS
from odometer_core.accounting.modes.rdp_config import DEFAULT_RDP_WEIGHTS as DEFAULT_RDP_WEIGHTS
from odometer_core.accounting.modes.rdp_config import FIRST_DEFAULT as FIRST_DEFAULT
from odometer_core.accounting.modes.rdp_config import MAX_RDP_ORDERS as MAX_RDP_ORDERS
from odometer_core.accounting.modes.rdp_config import WEIGHTS_FIRST as WEIGHTS_FIRST
from odometer_core.accounting.modes.rdp_config import WEIGHTS_FIXED as WEIGHTS_FIXED
from odometer_core.accounting.modes.rdp_config import WOR_BOUNDS as WOR_BOUNDS
from odometer_core.accounting.modes.rdp_config import WOR_TIGHT as WOR_TIGHT
from odometer_core.accounting.modes.rdp_config import WOR_WBK19 as WOR_WBK19
from odometer_core.accounting.modes.rdp_config import RDPConfig as RDPConfig
from odometer_core.accounting.modes.rdp_config import RDPState as RDPState
from odometer_core.accounting.modes.rdp_config import config_from_json as config_from_json
from odometer_core.accounting.modes.rdp_config import config_to_json as config_to_json
from odometer_core.accounting.modes.rdp_config import state_from_json as state_from_json
from odometer_core.accounting.modes.rdp_config import state_to_json as state_to_json

# the filter in force once the first declaration chose (its parts), re-exported
from odometer_core.accounting.modes.rdp_force import (
    _caps,
    _ladder_choice,
    _ladder_only,
    _repeats,
    _weights_in_force,
    _with_branch,
)
from odometer_core.accounting.modes.rdp_force import _chosen as _chosen
from odometer_core.accounting.modes.rdp_force import _statements as _statements
from odometer_core.accounting.modes.rdp_force import first_choice as first_choice
from odometer_core.accounting.modes.rdp_force import order_ladder as order_ladder

# the grids of new filters (a workload's, and :func:`make`), re-exported
from odometer_core.accounting.modes.rdp_grid import CANDIDATE_ORDERS as CANDIDATE_ORDERS
from odometer_core.accounting.modes.rdp_grid import choose_grid as choose_grid
from odometer_core.accounting.modes.rdp_grid import make as make
from odometer_core.accounting.modes.rdp_levels import THRESHOLD_MARGIN as THRESHOLD_MARGIN
from odometer_core.accounting.modes.rdp_levels import (
    _rdp_level_epsilon,
)
from odometer_core.accounting.modes.rdp_shaped import (
    DEFAULT_RDP_LADDER as DEFAULT_RDP_LADDER,
)
from odometer_core.accounting.modes.rdp_shaped import LEVEL_ORDERS as LEVEL_ORDERS
from odometer_core.accounting.modes.statements import (
    DEFAULT_BRANCH,
    NO_BRANCH,
    THEOREM_PLD_BRANCH,
    BranchState,
    PldBranch,
    advance,
    may_fit,
    opening,
)
from odometer_core.accounting.modes.workload import MAX_WORKLOAD_COUNT as MAX_WORKLOAD_COUNT
from odometer_core.accounting.modes.workload import MAX_WORKLOAD_ITEMS as MAX_WORKLOAD_ITEMS
from odometer_core.accounting.modes.workload import (
    parse_workload,
)
from odometer_core.accounting.odometer import LadderShape, Reading

FloatArray = npt.NDArray[np.float64]


# ---------------------------------------------------------------------------- configuration
def parse(
    eps: Decimal,
    dlt: Decimal,
    rel: Relation,
    acc: Mapping[str, Any],
    anchored: bool = True,
    branch: PldBranch | None = DEFAULT_BRANCH,
    shape: LadderShape | Literal["default"] | None = "default",
) -> RDPConfig:
    """``{"mode": "rdp", "final_conversion_delta"?, "orders"?, "weights"?, "workload"?}``: δ_c
    defaults to δ_B; the grid to :data:`DEFAULT_RDP_ORDERS` with :data:`DEFAULT_RDP_WEIGHTS`,
    given orders to equal weights; a ``workload`` (instead of orders and weights) has the grid
    chosen for it (:func:`choose_grid`). ``anchored`` False makes it as versions before 1.4.0
    did (replay only); ``branch`` is the PLD branch's δ split (:mod:`.statements`; the
    default from accounting 1.6.0, ``None`` as configurations stored before; an anchored filter
    only); ``shape`` the ladder's shape of a default grid without a workload (from accounting
    1.8.0, with :data:`~.rdp_shaped.LEVEL_ORDERS` added at weight 0; ``None`` as stored
    before, and so with ``branch`` ``None``: :mod:`.rdp_shaped`): ``"default"`` is
    :data:`~.rdp_shaped.DEFAULT_RDP_LADDER` with its levels at whole repeats
    (:data:`~.rdp_shaped.WHOLE_REPEATS`, accounting 1.9.0), a shape given is placed as 1.8.0
    placed it (:data:`~.rdp_shaped.LADDER_1_8` makes a 1.8.0 configuration). From accounting
    1.10.0 ``"default"`` also records :data:`~.rdp_choice.DEFAULT_LADDER_RULE`: the first
    admission chooses the ladder's spacing and span (:mod:`.rdp_choice`)."""
    branch = branch if anchored else None
    only(acc, ("mode", "final_conversion_delta", "orders", "weights", "workload", "wor_bound"))
    dc = amount(acc, "final_conversion_delta", default=dlt)
    wor = acc.get("wor_bound", WOR_TIGHT)
    if wor not in WOR_BOUNDS:
        raise ConfigError(f"wor_bound must be one of {', '.join(repr(w) for w in WOR_BOUNDS)}")
    if dc > dlt:
        raise ConfigError("final_conversion_delta must be ≤ the budget delta")
    if acc.get("workload") is not None:
        if acc.get("orders") is not None or acc.get("weights") is not None:
            raise ConfigError("give either a workload or orders/weights, not both")
        items = parse_workload(acc["workload"], rel)
        return choose_grid(eps, dlt, rel, dc, items, wor, anchored, branch)
    orders = _orders(acc.get("orders"))
    rule, levels, ladder_rule = WEIGHTS_FIXED, shaped.LEVELS_1_8, None
    if acc.get("orders") is None and acc.get("weights") is None:
        weights = tuple(to_float_down(Decimal(w)) for w in DEFAULT_RDP_WEIGHTS)
        rule = WEIGHTS_FIRST if anchored else WEIGHTS_FIXED
        # a configuration made as stored before 1.6.0 (no branch) has no shape either
        # new configurations place their levels at whole repeats (accounting 1.9.0); a shape
        # given is made as stored before (1.8.0: ``shaped.LADDER_1_8``, multiples)
        if shape == "default":
            shape, levels = shaped.DEFAULT_RDP_LADDER, shaped.DEFAULT_LEVELS
            ladder_rule = rdp_choice.DEFAULT_LADDER_RULE  # accounting 1.10.0
        shape = shape if anchored and branch is not None else None
        if shape is not None:  # the levels' own orders, weight 0 at level 1 (1.8.0 on)
            orders = orders + shaped.LEVEL_ORDERS
            weights = weights + (0.0,) * len(shaped.LEVEL_ORDERS)
    else:
        weights, shape = _weights(acc.get("weights"), len(orders)), None
    config = make(eps, dlt, rel, dc, orders, weights, anchored, branch, shape)
    levels = levels if shape is not None else shaped.LEVELS_1_8
    ladder_rule = ladder_rule if levels == shaped.WHOLE_REPEATS else None
    return replace(config, wor_bound=wor, weights_rule=rule, levels=levels, ladder_rule=ladder_rule)


def _orders(raw: object) -> tuple[float, ...]:
    if raw is None:
        return DEFAULT_RDP_ORDERS
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_RDP_ORDERS:
        raise ConfigError(f"orders must be a list of 1–{MAX_RDP_ORDERS} numbers")
    out: list[float] = []
    for a in raw:
        d = amount({"order": a}, "order")
        if d <= 1 or d > 10**6:
            raise ConfigError("RDP orders must be in (1, 1e6]")
        out.append(float(d))
    if sorted(set(out)) != out:
        raise ConfigError("orders must be strictly increasing")
    return tuple(out)


def _weights(raw: object, n: int) -> tuple[float, ...]:
    if raw is None:
        return tuple([1.0 / n] * n)
    if not isinstance(raw, list) or len(raw) != n:
        raise ConfigError("weights must have one entry per order")
    ws = [amount({"weight": w}, "weight") for w in raw]
    if add_up(*ws) > ONE:
        raise ConfigError("weights must sum to ≤ 1 (union bound over the orders)")
    return tuple(to_float_down(w) for w in ws)


def initial_state(config: RDPConfig) -> RDPState:
    dead = tuple(b == -math.inf for b in config.thresholds)
    return RDPState(tuple([0.0] * len(config.orders)), dead)


# ---------------------------------------------------------------------------- weights of the first
def in_force(config: RDPConfig, state: RDPState) -> RDPConfig:
    """The filter ``state`` is decided by: ``config`` itself, or under :data:`WEIGHTS_FIRST`
    once the first admission chose, the same filter with the chosen weights at level 1 of each
    order's ladder (the order chosen holds :data:`WORKLOAD_SHARE` of δ_c, the other orders split
    the rest equally, as for a declared workload; the tops B(α) at the creation target from
    them), the stored weights at the ladders' other levels (``others``), and the caps the budget
    in force puts on them (:func:`change_budget`). From accounting 1.6.0, first the split the
    first declaration chose (``state.pld``): the branch kept, the ladders' tops on the ladder's
    pool (:func:`_with_branch`), or off, the stored ladder on the whole of δ_c. A pure function
    of the configuration and the recorded choices, so replay recomputes it; the last answer is
    kept with the very objects it came from (by identity: a loop of admissions on one filter
    carries them from state to state; rebuilding was most of an admission's CPU)."""
    global _IN_FORCE_LAST
    last, kept = _IN_FORCE_LAST, (config, state.first, state.design, state.ladder)
    same = last is not None and all(a is b for a, b in zip(last[0], kept, strict=True))
    if same and last is not None and last[1] is state.pld:
        return last[3]
    split = config.branch is not None and not config.branch_on and state.pld != NO_BRANCH
    off = split and state.pld.off
    if same and last is not None and last[2] == (split, off):
        return last[3]
    found = (_ladder_only(config) if off else _with_branch(config)) if split else config
    found = _weights_in_force(found, state.first, state.design, state.ladder)
    _IN_FORCE_LAST = (kept, state.pld, (split, off), found)  # one tuple, replaced whole
    return found


_IN_FORCE_LAST: tuple[tuple[object, ...], object, tuple[bool, bool], RDPConfig] | None = None


# ---------------------------------------------------------------------------- admission
@functools.lru_cache(maxsize=256)
def _grid(orders: tuple[float, ...], thresholds: tuple[float, ...]) -> _Grid:
    """Arrays and text of a configuration's grid, built once per configuration (hot path)."""
    return _Grid(
        np.asarray(orders, dtype=np.float64),
        np.asarray(thresholds, dtype=np.float64),
        [repr(a) for a in orders],
    )


@dataclass(frozen=True, slots=True)
class _Grid:
    orders: np.ndarray[Any, np.dtype[np.float64]]
    thresholds: np.ndarray[Any, np.dtype[np.float64]]
    order_text: list[str]


def _floats_text(values: np.ndarray[Any, np.dtype[np.float64]]) -> list[str]:
    return [repr(v) for v in values.tolist()]


def _rdp_remaining(
    config: RDPConfig,
    grid: _Grid,
    rdp: np.ndarray[Any, np.dtype[np.float64]],
    dead: np.ndarray[Any, np.dtype[np.bool_]],
    delta: Decimal,
) -> RdpCurve:
    # B(α) − S(α) rounded down where positive and live, else 0 (binary64 as numpy's, 4x faster)
    p = zip(grid.thresholds.tolist(), rdp.tolist(), dead.tolist(), strict=True)
    rem = tuple(0.0 if d or not b - x > 0 else math.nextafter(b - x, -math.inf) for b, x, d in p)
    return RdpCurve(config.orders, rem, sub_down(config.delta_approx, delta))


@memoised
def charged_curve(
    decl: Declaration, relation: Relation, orders: tuple[float, ...], tight: bool = False
) -> tuple[FloatArray, Decimal]:
    """:func:`rdp_curve` on a configuration's grid, within the work limit (a 422 past it;
    :mod:`odometer_core.accounting.effort`). Memoised, so that the service can compute
    it before taking the budget's lock (:mod:`odometer_core.accounting.memo`); the array is
    read-only."""
    with effort.limited():
        curve, delta = rdp_curve(decl, relation, np.asarray(orders, dtype=np.float64), tight=tight)
    curve.setflags(write=False)
    return curve, delta


def _admit_rdp(config: RDPConfig, state: RDPState, decl: Declaration) -> Decision:
    """Admit iff Σδ + δ_i ≤ δ_A and some live α has S(α) + ε_i(α) ≤ B(α); then add to every
    S(α) (rounded up) and kill orders that crossed B(α) (Feldman–Zrnic 2021 Thm 4.3 per order;
    docs/accounting.md, *rdp*). Under :data:`WEIGHTS_FIRST` the first declaration is decided
    by the filter with the weights it chooses (:func:`first_choice`), and the choice is kept in
    the state if it is admitted; a refusal leaves everything as it was."""
    weights = config.weights_rule == WEIGHTS_FIRST and state.first is None
    split = config.branch is not None and state.pld == NO_BRANCH and config.anchor is not None
    if weights or split:
        charged = charged_curve(decl, config.relation, config.orders, config.tight_wor)
        trial, base = state, in_force(config, state)
        if split:
            assert config.branch is not None and config.anchor is not None
            repeats = _repeats(config, charged[0])
            pld = opening(decl, repeats)
            trial = replace(trial, pld=pld)
            base = _ladder_only(config) if pld.off else _with_branch(config)
        if weights:
            trial = replace(trial, first=first_choice(base, charged[0]))
            if config.shape is not None and trial.first != FIRST_DEFAULT:
                trial = replace(trial, design=tuple(charged[0].tolist()))
            if config.ladder_rule is not None and trial.design is not None:
                trial = replace(trial, ladder=_ladder_choice(base, trial.first, trial.design))
        chosen = _weights_in_force(base, trial.first, trial.design, trial.ladder)
        trial = replace(
            initial_state(chosen),
            delta=state.delta,
            first=trial.first,
            pld=trial.pld,
            design=trial.design,
            ladder=trial.ladder,
        )
        decision = _decide(chosen, trial, decl, charged)
        if decision.admitted:
            return decision
        grid = _grid(config.orders, config.thresholds)
        rdp, dead = np.asarray(state.rdp), np.asarray(state.dead)
        remaining = _rdp_remaining(config, grid, rdp, dead, state.delta)
        return replace(decision, state=state, remaining=remaining)
    return _decide(in_force(config, state), state, decl)


def _decide(
    config: RDPConfig,
    state: RDPState,
    decl: Declaration,
    charged: tuple[FloatArray, Decimal] | None = None,
) -> Decision:
    grid = _grid(config.orders, config.thresholds)
    if charged is None:
        charged = charged_curve(decl, config.relation, config.orders, config.tight_wor)
    curve, delta = charged
    requested = RdpCurve(config.orders, tuple(curve.tolist()), delta)
    new_delta = add_up(state.delta, delta)
    old = np.asarray(state.rdp, dtype=np.float64)
    dead = np.asarray(state.dead, dtype=np.bool_)
    with np.errstate(over="ignore"):
        s = np.nextafter(old + curve, np.inf)
    fits = (~dead) & (s <= grid.thresholds)
    fit = bool(fits.any())
    pld, by_branch = state.pld, False
    if fit or _branch_may_fit(config, state, decl):
        pld = _branch_after(config, state, decl, delta)
        by_branch = _branch_admits(config, pld)
    why = None
    if new_delta > config.delta_approx:
        why = "delta budget exceeded"
    elif not fit and not by_branch:
        why = "RDP budget exceeded at every live order"
    elif new_delta > 0 and config.anchor is not None:
        # approximate declarations stay within the creation filter (its thresholds, its target)
        assert config.thresholds_top is not None
        if not within_creation_filter(config.epsilon, config.delta, config.anchor):
            why = "approximate declarations need the creation budget, which was lowered"
        elif not (fits & (s <= np.asarray(config.thresholds_top))).any():
            why = "approximate declarations are admitted only within the creation filter"
    if why is not None:
        zero = RdpCurve(config.orders, (0.0,) * len(config.orders))
        remaining = _rdp_remaining(config, grid, old, dead, state.delta)
        return reject(state, requested, remaining, why, zero)
    new_dead = dead | (s > grid.thresholds)
    new_state = RDPState(
        tuple(s.tolist()),
        tuple(new_dead.tolist()),
        new_delta,
        state.first,
        pld,
        state.design,
        state.ladder,
    )
    remaining = _rdp_remaining(config, grid, s, new_dead, new_delta)
    return Decision("accepted", new_state, requested, requested, remaining)


def _branch_after(
    config: RDPConfig, state: RDPState, decl: Declaration, delta: Decimal
) -> BranchState:
    """The PLD branch's statement after admitting ``decl`` (of δ ``delta`` here): unchanged
    without a branch (configurations stored before 1.6.0), else :func:`.statements.advance`
    (after an approximate declaration, retired: the reading is then the filter's target)."""
    if config.branch is None or not config.branch_on or config.anchor is None:
        return state.pld
    declared = delta if state.delta == 0 else ONE
    return advance(
        config.branch,
        config.final_conversion_delta,
        state.pld,
        decl,
        declared,
        config.anchor.epsilon,
    )


def _branch_may_fit(config: RDPConfig, state: RDPState, decl: Declaration) -> bool:
    """Whether the branch alone could admit ``decl`` (a cheap lower bound, :func:`may_fit`)."""
    if not config.branch_on or config.branch is None or state.delta > 0:
        return False
    return may_fit(config.branch, config.final_conversion_delta, state.pld, decl, config.epsilon)


def _branch_admits(config: RDPConfig, pld: BranchState) -> bool:
    """Whether the PLD branch alone keeps the reading within the budget in force."""
    return config.branch_on and not pld.retired and pld.epsilon <= config.epsilon


def admit(
    config: RDPConfig, state: RDPState, decl: Declaration, conversion_delta: Decimal | None
) -> Decision:
    return _admit_rdp(config, state, decl)


# ---------------------------------------------------------------------------- held reservations
def _held_curve(config: RDPConfig, reservation: Reservation) -> tuple[FloatArray, Decimal]:
    """The curve an ODP declaration was charged at admission: its worst cell as (ε, δ)-DP
    (:func:`rdp_curve`), computed from the reservation."""
    part = reservation.partition
    return charged_curve(
        ApproxDP(part.worst_epsilon, part.delta), config.relation, config.orders, config.tight_wor
    )


def settle_held(
    config: RDPConfig, state: RDPState, reservation: Reservation, cell: str
) -> Decision:
    """Settle, at an RDP level above a dataset, an ODP invocation the dataset reserved: the
    worst cell's curve stays charged, nothing is refunded (no filter theorem allows an
    output-dependent curve; ``docs/accounting.md``, *Organisation caps*)."""
    config = in_force(config, state)
    curve, delta = _held_curve(config, reservation)
    grid = _grid(config.orders, config.thresholds)
    old = np.asarray(state.rdp, dtype=np.float64)
    dead = np.asarray(state.dead, dtype=np.bool_)
    zero = RdpCurve(config.orders, (0.0,) * len(config.orders))
    return Decision(
        "accepted",
        state,
        zero,
        RdpCurve(config.orders, tuple(curve.tolist()), delta),
        _rdp_remaining(config, grid, old, dead, state.delta),
        refund=zero,
    )


def cancel_held(config: RDPConfig, state: RDPState, reservation: Reservation) -> Decision:
    """Cancel such a reservation: the mechanism never ran, so its worst-cell curve and δ are
    taken off the sums (rounded up, so each S(α) stays at least the sum of what ran). Orders
    that died stay dead: the filter's past decisions were made on larger sums, which only made
    them stricter (Feldman–Zrnic 2021 Thm 4.3 holds for the smaller sums)."""
    config = in_force(config, state)
    curve, delta = _held_curve(config, reservation)
    grid = _grid(config.orders, config.thresholds)
    old = np.asarray(state.rdp, dtype=np.float64)
    dead = np.asarray(state.dead, dtype=np.bool_)
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.maximum(np.nextafter(old - curve, np.inf), 0.0)
    s = np.where(np.isfinite(old), s, old)
    new_delta = max(sub_up(state.delta, delta), ZERO)
    new_state = replace(state, rdp=tuple(s.tolist()), delta=new_delta)
    held = RdpCurve(config.orders, tuple(curve.tolist()), delta)
    return Decision(
        "accepted",
        new_state,
        RdpCurve(config.orders, (0.0,) * len(config.orders)),
        held,
        _rdp_remaining(config, grid, s, dead, new_delta),
        refund=held,
    )


# ---------------------------------------------------------------------------- budget change
def change_budget(
    config: RDPConfig,
    state: RDPState,
    eps: Decimal,
    dlt: Decimal,
    final_conversion_delta: object,
    anchored: bool = True,
) -> RDPConfig:
    """A curator's new (ε_B, δ_B) on the same grid and weights.

    Before anything was charged the filter is made anew (δ_c follows δ_B when it was the whole
    of it, else stays, or is given). After that each order's ladder fixed at creation stays and
    the new ε caps the certified reading: each order's threshold becomes the highest level of
    its ladder whose reading is at most ε (above B(α) after a raise), so "some order fits"
    means "the reading after admission is at most ε" (``docs/accounting.md``, *Budget
    changes*). A filter stored before 1.4.0 changes as :func:`~odometer_core.accounting.modes.
    zcdp.change_budget` says."""
    fresh = state == initial_state(config)
    if config.anchor is not None and not fresh:
        return _capped_change(config, eps, dlt, final_conversion_delta)
    if config.anchor is None and anchored and not fresh:
        raise InvalidTransition("BudgetFixed", LEGACY_FIXED)
    anchored = anchored or config.anchor is not None
    dc = conversion_delta_for(
        config.final_conversion_delta, config.delta, dlt, final_conversion_delta
    )
    new = make(
        eps,
        dlt,
        config.relation,
        dc,
        config.orders,
        config.weights,
        anchored,
        config.branch,
        config.shape,
    )
    # the record of the workload the grid was chosen for stays (its expected counts are those
    # of the budget at creation), and so do the without-replacement bound and the weights' rule
    return replace(
        new,
        workload=config.workload,
        wor_bound=config.wor_bound,
        weights_rule=config.weights_rule,
        levels=config.levels,
        ladder_rule=config.ladder_rule,
    )


def _capped_change(
    config: RDPConfig, eps: Decimal, dlt: Decimal, final_conversion_delta: object
) -> RDPConfig:
    """The configuration keeps its weights and rule; under :data:`WEIGHTS_FIRST` the caps of
    the chosen weights follow from the new ε (:func:`in_force`): the choice is never made
    again."""
    keep_conversion_delta(config.final_conversion_delta, final_conversion_delta)
    return replace(config, epsilon=eps, delta=dlt, thresholds=_caps(config, eps))


def over_budget(config: RDPConfig, state: RDPState) -> str | None:
    config = in_force(config, state)
    if state.delta > config.delta_approx:
        return f"spent delta is {fmt(state.delta)}"
    if config.anchor is not None:
        # the thresholds are caps on each order's certified reading: some order must still hold
        # the running curve (a dead order revives when a raise lifts its cap above it)
        if (
            any(state.rdp)
            and not any(s <= b for s, b in zip(state.rdp, config.thresholds, strict=True))
            and not _branch_admits(config, state.pld)
        ):
            reading = fmt(odometer(config, state).epsilon)
            return f"the certified reading is epsilon={reading}, above the new budget"
        return anchored_delta_problem(
            config.epsilon,
            config.delta,
            config.anchor,
            config.final_conversion_delta,
            state.delta > 0,
        )
    # a dead order stays dead (its stopping time has passed), so only live orders can keep
    # the filter open
    live = [
        not d and s <= b for s, b, d in zip(state.rdp, config.thresholds, state.dead, strict=True)
    ]
    if not any(live):
        return "the spent RDP curve exceeds the new threshold at every live order"
    return None


def recheck_dead(config: RDPConfig, state: RDPState) -> RDPState:
    """After a budget change, orders over the new thresholds die. On an anchored filter the
    thresholds are caps on each order's certified reading and an order is live exactly while
    its running value is within its cap: its ladder certifies it whatever happened before.
    Before 1.4.0 orders dead for good stayed dead (their own filter had stopped)."""
    config = in_force(config, state)
    if config.anchor is not None:
        return replace(
            state, dead=tuple(not s <= b for s, b in zip(state.rdp, config.thresholds, strict=True))
        )
    dead = tuple(
        d or s > b for d, s, b in zip(state.dead, state.rdp, config.thresholds, strict=True)
    )
    return replace(state, dead=dead)


# ---------------------------------------------------------------------------- status
def odometer(config: RDPConfig, state: RDPState) -> Reading:
    """The certified odometer reading: one ladder of RDP filters per order of the grid
    (:mod:`odometer_core.accounting.odometer`), levels B(α)·r^−(k−1), δ shares
    w_α·δ_c·6/(π²k²) (a union bound over orders and levels), each level converted by
    Canonne–Kamath–Steinke 2020, Prop. 12 at its order; the smallest reading over the orders,
    capped at the filter's target.

    Each (α, level) is an RDP filter at order α (Feldman–Zrnic 2021, Thm 4.3). The ladder covers
    histories without approximate declarations (Σδ = 0); after one, the reading is the target
    (ε_B, δ_B) (conservative, as in ``zcdp``). The reading's δ is δ_B, fixed in advance (the
    ladder itself spends at most δ_c ≤ δ_B). The grid, weights and thresholds are the
    configuration's (:func:`in_force`); nothing here changes them."""
    config = in_force(config, state)
    if config.anchor is not None:
        return _anchored_reading(config, state)
    found = None
    if state.delta == 0:
        found = odo.rdp_ladder_epsilon(
            state.rdp,
            config.orders,
            config.thresholds,
            config.weights,
            to_float_down(config.final_conversion_delta),
            _rdp_level_epsilon,
        )
    return odo.capped(
        found,
        config.epsilon,
        config.delta,
        config.final_conversion_delta,
        odo.THEOREM_RDP,
        odo.FILTER_RDP,
    )


def _anchored_reading(config: RDPConfig, state: RDPState) -> Reading:
    """The smallest reading over the orders' ladders fixed at creation, at δ_c (all orders'
    ladders together, each filter at its level 1 included, spend at most δ_c); after an
    approximate declaration, the creation filter's target (ε_B, δ_B) of creation."""
    assert config.anchor is not None
    target = Reading(config.anchor.epsilon, config.anchor.delta, "filter", odo.FILTER_RDP)
    if state.delta > 0:
        return target
    if config.branch is not None and state.pld == NO_BRANCH and not any(state.rdp):
        return Reading(ZERO, ZERO, "ladder", odo.THEOREM_RDP, 0, ZERO)  # nothing released
    best: tuple[Decimal, int] | None = None if any(state.rdp) else (ZERO, 0)
    if best is None and config.design is not None and config.thresholds_top is not None:
        tops, eps = config.thresholds_top, config.anchor.epsilon
        best = shaped.reading(_statements(config), tops, state.rdp, eps)
    elif best is None:
        for i, spent in enumerate(state.rdp):
            order = order_ladder(config, i)
            found = None if order is None else order.reading(spent)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
    pld = state.pld.epsilon if config.branch_on else INFINITY
    if pld < (INFINITY if best is None else best[0]):
        return Reading(pld, config.final_conversion_delta, "pld_branch", THEOREM_PLD_BRANCH)
    if best is None:  # never: admission keeps some order within a level, or the branch
        return target
    eps, level = best
    theorem = odo.THEOREM_RDP if config.design is None else shaped.THEOREM
    return Reading(eps, config.final_conversion_delta, "ladder", theorem, level, eps)


def status(config: RDPConfig, state: RDPState) -> dict[str, Any]:
    """Budget and spend per order; ``odometer`` is the certified reading at any stopping time;
    ``spent_eps_delta`` converts the running curve as if the history had been fixed in advance
    (an estimate, ``certified: false``)."""
    config = in_force(config, state)
    out: dict[str, Any] = {
        "delta_approx": fmt(config.delta_approx),
        "final_conversion_delta": fmt(config.final_conversion_delta),
        "orders": [repr(a) for a in config.orders],
        "thresholds": [repr(b) for b in config.thresholds],
        "spent": {
            "rdp": [repr(s) for s in state.rdp],
            "delta": fmt(state.delta),
            "dead": list(state.dead),
        },
        "remaining": _rdp_remaining(
            config,
            _grid(config.orders, config.thresholds),
            np.asarray(state.rdp),
            np.asarray(state.dead),
            state.delta,
        ).to_json(),
        "spent_eps_delta": {
            "epsilon": _estimate_rdp(config, state),
            "delta": fmt(add_up(state.delta, config.final_conversion_delta)),
            "certified": False,
            "estimate": True,
        },
        "odometer": odometer(config, state).to_json(),
    }
    if config.weights_rule == WEIGHTS_FIRST:  # the weights in force and what chose them
        out["weights"] = [repr(w) for w in config.weights]
        out["first"] = state.first
    if config.branch is not None:  # the PLD branch's split and statement (1.6.0 on)
        out["pld_branch"] = {**config.branch.to_json(), **state.pld.to_json()}
    return out


def _estimate_rdp(config: RDPConfig, state: RDPState) -> str:
    if config.final_conversion_delta <= 0:
        return "Infinity" if any(state.rdp) else "0"
    if not any(state.rdp):
        return "0"
    e, _ = cv.rdp_to_epsilon(
        config.orders_array, np.asarray(state.rdp), to_float_down(config.final_conversion_delta)
    )
    return fmt(cost_from_float(e))


MODE = Mode(
    name="rdp",
    config_type=RDPConfig,
    state_type=RDPState,
    parse=parse,
    initial_state=initial_state,
    unsupported=unsupported,
    admit=admit,
    change_budget=change_budget,
    over_budget=over_budget,
    status=status,
    config_to_json=config_to_json,
    config_from_json=config_from_json,
    state_to_json=state_to_json,
    state_from_json=state_from_json,
    after_budget_change=recheck_dead,
    settle=settle_held,
    cancel=cancel_held,
    odometer=odometer,
)
