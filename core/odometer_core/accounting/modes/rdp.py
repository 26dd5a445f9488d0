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
declares up front: new datasets get :data:`DEFAULT_RDP_WEIGHTS`, and a declared workload gets the
grid :func:`choose_grid` picks for it (recorded in the configuration, read back on replay).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import effort
from odometer_core.accounting import odometer as odo
from odometer_core.accounting.amounts import RdpCurve
from odometer_core.accounting.declarations import ApproxDP, Declaration, Relation
from odometer_core.accounting.exact import (
    DOWN,
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
from odometer_core.accounting.modes.common import (
    LEGACY_FIXED,
    Anchor,
    ConfigError,
    Decision,
    InvalidTransition,
    Mode,
    Reservation,
    amount,
    anchored_delta_problem,
    conversion_delta_for,
    float_text,
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
from odometer_core.accounting.modes.workload import MAX_WORKLOAD_COUNT as MAX_WORKLOAD_COUNT
from odometer_core.accounting.modes.workload import MAX_WORKLOAD_ITEMS as MAX_WORKLOAD_ITEMS
from odometer_core.accounting.modes.workload import (
    WORKLOAD_SHARE,
    WorkloadChoice,
    parse_workload,
    workload_curve,
)
from odometer_core.accounting.odometer import Reading

FloatArray = npt.NDArray[np.float64]

#: Default order grid of ``rdp`` mode: 16 orders covering the optima of Gaussian and DP-SGD
#: workloads at ε between ~0.5 and ~20 (the optimal α of dp_accounting's conversions for the
#: reference vectors lie between 1.5 and 64).
DEFAULT_RDP_ORDERS: Final[tuple[float, ...]] = (
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    4.0,
    5.0,
    6.0,
    8.0,
    10.0,
    12.0,
    16.0,
    20.0,
    32.0,
    48.0,
    64.0,
)

#: Default weights of new ``rdp`` datasets on :data:`DEFAULT_RDP_ORDERS` (exact decimals, sum
#: 1): 0.022 on each order, more on 5, 8, 16, 20, 32, 48 and 64. Chosen on the workload table of
#: ``docs/accounting.md`` (*Grids and weights*: DP-SGD at six (q, σ), Gaussian, Laplace, pure ε,
#: at five budgets) to raise the geometric mean of what the filter admits, relative to one ideal
#: order holding all of δ_c, from 65 % (equal weights) to 71 %, while no workload of the table
#: loses more than 3 % against equal weights. Datasets created before keep their stored (equal)
#: weights: a stored configuration never changes meaning.
DEFAULT_RDP_WEIGHTS: Final[tuple[str, ...]] = (
    "0.022",
    "0.022",
    "0.022",
    "0.022",
    "0.022",
    "0.022",
    "0.07",
    "0.022",
    "0.15",
    "0.022",
    "0.022",
    "0.1",
    "0.236",
    "0.15",
    "0.06",
    "0.036",
)


MAX_RDP_ORDERS: Final = 64


#: Relative margin by which derived RDP thresholds are rounded down (see _rdp_thresholds).
THRESHOLD_MARGIN: Final = 1e-12

WOR_WBK19: Final = "wbk19"
"""Without-replacement Gaussian charged by Wang–Balle–Kasiviswanathan 2019 Thm 27 alone."""

WOR_TIGHT: Final = "wbk19+bebp24"
"""… by the smaller of that and Birrell–Ebrahimi–Behnia–Pacheco 2024 Thm 3.4 at each integer
order (:mod:`odometer_core.accounting.fswor`): the default of datasets created since."""

WOR_BOUNDS: Final = (WOR_WBK19, WOR_TIGHT)


@dataclass(frozen=True, slots=True)
class RDPConfig:
    """``rdp``: grid Λ, weights w_α, δ_B = δ_A + δ_c and per-order thresholds
    B(α) = ε_B + [log(w_α δ_c) + log(α−1) − α log(1−1/α)]/(α−1) (rounded down; −∞ = dropped)."""

    epsilon: Decimal
    delta: Decimal
    relation: Relation
    final_conversion_delta: Decimal
    delta_approx: Decimal
    orders: tuple[float, ...]
    weights: tuple[float, ...]
    thresholds: tuple[float, ...]
    #: the workload the grid was chosen for (``None``: default or explicit grid)
    workload: WorkloadChoice | None = None
    #: how a Gaussian subsampled without replacement is charged: :data:`WOR_TIGHT` (new datasets)
    #: or :data:`WOR_WBK19` (datasets created before it, whose stored configuration lacks it)
    wor_bound: str = WOR_WBK19
    #: the creation target (accounting ≥ 1.4.0; ``None`` before): ``thresholds_top`` are the
    #: thresholds derived from it, level 1 of each order's ladder, never derived again;
    #: ``thresholds`` are what the budget in force admits (the same until a budget change)
    anchor: Anchor | None = None
    thresholds_top: tuple[float, ...] | None = None
    mode: Literal["rdp"] = "rdp"

    @property
    def tight_wor(self) -> bool:
        return self.wor_bound == WOR_TIGHT

    @property
    def orders_array(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        return np.asarray(self.orders, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class RDPState:
    """S(α) per order (float64, rounded up on every sum), dead orders, Σδ."""

    rdp: tuple[float, ...]
    dead: tuple[bool, ...]
    delta: Decimal = ZERO


# ---------------------------------------------------------------------------- configuration
def parse(
    eps: Decimal, dlt: Decimal, rel: Relation, acc: Mapping[str, Any], anchored: bool = True
) -> RDPConfig:
    """``{"mode": "rdp", "final_conversion_delta"?, "orders"?, "weights"?, "workload"?}``: δ_c
    defaults to δ_B; the grid to :data:`DEFAULT_RDP_ORDERS` with :data:`DEFAULT_RDP_WEIGHTS`,
    given orders to equal weights; a ``workload`` (instead of orders and weights) has the grid
    chosen for it (:func:`choose_grid`). ``anchored`` False makes it as versions before 1.4.0
    did (replay only)."""
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
        return choose_grid(eps, dlt, rel, dc, parse_workload(acc["workload"], rel), wor, anchored)
    orders = _orders(acc.get("orders"))
    if acc.get("orders") is None and acc.get("weights") is None:
        weights = tuple(to_float_down(Decimal(w)) for w in DEFAULT_RDP_WEIGHTS)
    else:
        weights = _weights(acc.get("weights"), len(orders))
    return replace(make(eps, dlt, rel, dc, orders, weights, anchored), wor_bound=wor)


# ---------------------------------------------------------------------------- workload grids
#: Candidate orders of :func:`choose_grid`: α = 1 + 10^(k/80) for k = −80 … 192 (α from 1.1 to
#: about 250, α − 1 about 3 % apart), rounded to three significant digits.
CANDIDATE_ORDERS: Final[tuple[float, ...]] = tuple(
    sorted({float(f"{1 + 10 ** (k / 80):.3g}") for k in range(-80, 193)})
)


def _scale(thresholds: FloatArray, curve: FloatArray, delta: Decimal, delta_a: Decimal) -> float:
    """The largest t such that t × the workload fits: t·C(α) ≤ B(α) at some order (thresholds
    −∞ never fit) and t·Σδ ≤ δ_A."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where(thresholds > 0, thresholds / curve, 0.0)
    ratio = np.nan_to_num(ratio, nan=0.0, posinf=math.inf)
    t = float(ratio.max()) if ratio.size else 0.0
    if delta > 0:
        t = min(t, float(delta_a / delta))
    return t


def choose_grid(
    eps: Decimal,
    dlt: Decimal,
    rel: Relation,
    dc: Decimal,
    items: tuple[tuple[Declaration, int], ...],
    wor_bound: str = WOR_TIGHT,
    anchored: bool = True,
) -> RDPConfig:
    """The grid of a dataset created for a declared workload.

    Every candidate order α of :data:`CANDIDATE_ORDERS` is scored by the multiple of the
    workload it would admit holding :data:`WORKLOAD_SHARE` of δ_c, B_{0.9}(α)/C(α) with C the
    workload's summed curve; the best one (the smallest on ties) gets that share, and the other
    orders of :data:`DEFAULT_RDP_ORDERS` split the rest equally. Deterministic, and bounded:
    one curve per declaration on the candidate orders, within one charge's work limit.

    Sound under full adaptivity because the weights are fixed before the first invocation: the
    filter of each order is Feldman–Zrnic 2021 (Thm 4.3), whose threshold may be any constant
    chosen in advance, and the union bound over the orders needs only Σw_α ≤ 1
    (``docs/accounting.md``, *rdp*).
    """
    cand = np.asarray(CANDIDATE_ORDERS, dtype=np.float64)
    tight = wor_bound == WOR_TIGHT
    curve, delta = workload_curve(items, rel, cand, tight)
    share = to_float_down(WORKLOAD_SHARE)
    b = np.asarray(
        _rdp_thresholds(eps, dc, CANDIDATE_ORDERS, (share,) * len(CANDIDATE_ORDERS)),
        dtype=np.float64,
    )
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        score = np.nan_to_num(np.where(b > 0, b / curve, 0.0), nan=0.0, posinf=math.inf)
    best = CANDIDATE_ORDERS[int(np.argmax(score))]
    spread = [a for a in DEFAULT_RDP_ORDERS if a != best]
    rest = to_float_down(DOWN.divide(ONE - WORKLOAD_SHARE, Decimal(len(spread))))
    weight = dict.fromkeys(spread, rest)
    weight[best] = share
    orders = tuple(sorted(weight))
    config = make(eps, dlt, rel, dc, orders, tuple(weight[a] for a in orders), anchored)
    config = replace(config, wor_bound=wor_bound)
    final_curve, _ = workload_curve(items, rel, config.orders_array, tight)
    t = _scale(
        np.asarray(config.thresholds, dtype=np.float64), final_curve, delta, config.delta_approx
    )
    expected = tuple(n if t >= 1 else min(n, math.floor(t * n)) for _, n in items)
    return replace(config, workload=WorkloadChoice(items, best, expected))


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


def _rdp_thresholds(
    epsilon: Decimal,
    delta_c: Decimal,
    orders: tuple[float, ...],
    weights: tuple[float, ...],
    anchored: bool = True,
) -> tuple[float, ...]:
    """B(α) = ε_B + [log(δ_α) + log(α−1) − α·log(1−1/α)]/(α−1), rounded down; orders whose
    B(α) ≤ 0 are dropped (−∞). Inverting CKS20 Prop. 12 at the order's δ share δ_α: level 1's
    share of w_α·δ_c in an anchored ladder (:func:`order_ladder`), the whole w_α·δ_c before
    accounting 1.4.0 (docs/accounting.md, *rdp*)."""
    eb = to_float_down(epsilon)
    dc = to_float_down(delta_c)
    out: list[float] = []
    for a, w in zip(orders, weights, strict=True):
        if dc <= 0 or w <= 0:
            out.append(-math.inf)
            continue
        log_share = (
            math.log(odo.anchored_share(_order_pool(w, dc), 1))
            if anchored
            else math.log(w) + math.log(dc)
        )
        b = eb + (log_share + math.log(a - 1) - a * math.log1p(-1 / a)) / (a - 1)
        # Round down with a relative margin far above the float error of the logs above
        # (~1e-15), so that the CKS conversion of B(α) gives δ ≤ w_α·δ_c exactly as computed.
        b = math.nextafter(b - THRESHOLD_MARGIN * (1.0 + abs(b)), -math.inf)
        out.append(b if b > 0 else -math.inf)
    return tuple(out)


def make(
    eps: Decimal,
    dlt: Decimal,
    rel: Relation,
    dc: Decimal,
    orders: tuple[float, ...],
    weights: tuple[float, ...],
    anchored: bool = True,
) -> RDPConfig:
    """A new filter on the grid: anchored (thresholds at level 1's share of each order's
    w_α·δ_c, so that the orders' ladders contain them), or as before 1.4.0 (replay only)."""
    thresholds = _rdp_thresholds(eps, dc, orders, weights, anchored)
    config = RDPConfig(eps, dlt, rel, dc, sub_down(dlt, dc), orders, weights, thresholds)
    if not anchored:
        return config
    return replace(config, anchor=Anchor(eps, dlt), thresholds_top=thresholds)


def _order_pool(weight: float, delta_c: float) -> float:
    """The δ pool of one order's ladder: w_α·δ_c, rounded down."""
    return math.nextafter(weight * delta_c, 0.0)


@dataclass(frozen=True, slots=True)
class _AtOrder:
    """The RDP conversion at one order α (compares by value, as a ladder's conversion must)."""

    alpha: float

    def __call__(self, level: float, delta: float) -> float:
        return _rdp_level_epsilon(self.alpha, level, delta)


def order_ladder(config: RDPConfig, i: int) -> odo.AnchoredLadder | None:
    """The ladder of order i fixed at creation: top B(α), δ pool w_α·δ_c, CKS20 Prop. 12 at
    α; ``None`` for an order dropped from the grid."""
    assert config.anchor is not None and config.thresholds_top is not None
    top = config.thresholds_top[i]
    if not top > 0:
        return None
    pool = _order_pool(config.weights[i], to_float_down(config.final_conversion_delta))
    return odo.AnchoredLadder(top, pool, config.anchor.epsilon, _AtOrder(config.orders[i]))


def initial_state(config: RDPConfig) -> RDPState:
    dead = tuple(b == -math.inf for b in config.thresholds)
    return RDPState(tuple([0.0] * len(config.orders)), dead)


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
    with np.errstate(invalid="ignore"):
        rem = np.where(dead, 0.0, np.maximum(grid.thresholds - rdp, 0.0))
    rem = np.where(rem > 0, np.nextafter(rem, -np.inf), 0.0)  # remaining rounds down
    return RdpCurve(config.orders, tuple(rem.tolist()), sub_down(config.delta_approx, delta))


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
    docs/accounting.md, *rdp*)."""
    grid = _grid(config.orders, config.thresholds)
    curve, delta = charged_curve(decl, config.relation, config.orders, config.tight_wor)
    requested = RdpCurve(config.orders, tuple(curve.tolist()), delta)
    new_delta = add_up(state.delta, delta)
    old = np.asarray(state.rdp, dtype=np.float64)
    dead = np.asarray(state.dead, dtype=np.bool_)
    with np.errstate(over="ignore"):
        s = np.nextafter(old + curve, np.inf)
    fits = (~dead) & (s <= grid.thresholds)
    why = None
    if new_delta > config.delta_approx:
        why = "delta budget exceeded"
    elif not fits.any():
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
    new_state = RDPState(tuple(s.tolist()), tuple(new_dead.tolist()), new_delta)
    remaining = _rdp_remaining(config, grid, s, new_dead, new_delta)
    return Decision("accepted", new_state, requested, requested, remaining)


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
    curve, delta = _held_curve(config, reservation)
    grid = _grid(config.orders, config.thresholds)
    old = np.asarray(state.rdp, dtype=np.float64)
    dead = np.asarray(state.dead, dtype=np.bool_)
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.maximum(np.nextafter(old - curve, np.inf), 0.0)
    s = np.where(np.isfinite(old), s, old)
    new_delta = max(sub_up(state.delta, delta), ZERO)
    new_state = RDPState(tuple(s.tolist()), state.dead, new_delta)
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
    new = make(eps, dlt, config.relation, dc, config.orders, config.weights, anchored)
    # the record of the workload the grid was chosen for stays (its expected counts are those
    # of the budget at creation), and so does the without-replacement bound
    return replace(new, workload=config.workload, wor_bound=config.wor_bound)


def _capped_change(
    config: RDPConfig, eps: Decimal, dlt: Decimal, final_conversion_delta: object
) -> RDPConfig:
    assert config.anchor is not None and config.thresholds_top is not None
    keep_conversion_delta(config.final_conversion_delta, final_conversion_delta)
    caps: list[float] = []
    for i, top in enumerate(config.thresholds_top):
        order = order_ladder(config, i)
        cap = None if order is None else order.cap(eps)
        caps.append(-math.inf if cap is None else top if cap[0] == 1 else cap[1])
    return replace(config, epsilon=eps, delta=dlt, thresholds=tuple(caps))


def over_budget(config: RDPConfig, state: RDPState) -> str | None:
    if state.delta > config.delta_approx:
        return f"spent delta is {fmt(state.delta)}"
    if config.anchor is not None:
        # the thresholds are caps on each order's certified reading: some order must still hold
        # the running curve (a dead order revives when a raise lifts its cap above it)
        if any(state.rdp) and not any(
            s <= b for s, b in zip(state.rdp, config.thresholds, strict=True)
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
    configuration's; nothing here changes them."""
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
    best: tuple[Decimal, int] | None = None if any(state.rdp) else (ZERO, 0)
    for i, spent in enumerate(state.rdp):
        order = order_ladder(config, i)
        found = None if order is None else order.reading(spent)
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    if best is None:  # never: admission keeps some order within a level
        return target
    eps, level = best
    return Reading(eps, config.final_conversion_delta, "ladder", odo.THEOREM_RDP, level, eps)


def _rdp_level_epsilon(alpha: float, level: float, delta: float) -> float:
    """ε of (α, level)-RDP at δ (Canonne–Kamath–Steinke 2020, Prop. 12, at the one order α)."""
    eps, _ = cv.rdp_to_epsilon(np.array([alpha]), np.array([level]), delta)
    return float(eps)


def status(config: RDPConfig, state: RDPState) -> dict[str, Any]:
    """Budget and spend per order; ``odometer`` is the certified reading at any stopping time;
    ``spent_eps_delta`` converts the running curve as if the history had been fixed in advance
    (an estimate, ``certified: false``)."""
    return {
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


def _estimate_rdp(config: RDPConfig, state: RDPState) -> str:
    if config.final_conversion_delta <= 0:
        return "Infinity" if any(state.rdp) else "0"
    if not any(state.rdp):
        return "0"
    e, _ = cv.rdp_to_epsilon(
        config.orders_array, np.asarray(state.rdp), to_float_down(config.final_conversion_delta)
    )
    return fmt(cost_from_float(e))


# ---------------------------------------------------------------------------- codec
def config_to_json(config: RDPConfig) -> dict[str, Any]:
    out: dict[str, Any] = {
        "final_conversion_delta": fmt(config.final_conversion_delta),
        "delta_approx": fmt(config.delta_approx),
        "orders": [float_text(a) for a in config.orders],
        "weights": [float_text(w) for w in config.weights],
        "thresholds": [float_text(b) for b in config.thresholds],
    }
    if config.workload is not None:  # absent on configurations without one (and older ones)
        out["workload"] = config.workload.to_json()
    if config.wor_bound != WOR_WBK19:  # absent on configurations created before 1.3.0
        out["wor_bound"] = config.wor_bound
    if config.anchor is not None and config.thresholds_top is not None:  # absent before 1.4.0
        top = [float_text(b) for b in config.thresholds_top]
        out["anchor"] = {**config.anchor.to_json(), "top": top}
    return out


def config_from_json(
    eps: Decimal, dlt: Decimal, rel: Relation, obj: Mapping[str, Any]
) -> RDPConfig:
    """Derived values (thresholds) are read back, not recomputed, so a replay uses exactly the
    thresholds that were in force; a recorded ``workload`` is read back too (it only describes
    why the grid was chosen)."""
    workload = obj.get("workload")
    anchor = obj.get("anchor")
    return RDPConfig(
        eps,
        dlt,
        rel,
        Decimal(obj["final_conversion_delta"]),
        Decimal(obj["delta_approx"]),
        tuple(float(a) for a in obj["orders"]),
        tuple(float(w) for w in obj["weights"]),
        tuple(float(b) for b in obj["thresholds"]),
        None if workload is None else WorkloadChoice.from_json(workload),
        str(obj.get("wor_bound", WOR_WBK19)),
        Anchor.from_json(anchor),
        None if anchor is None else tuple(float(b) for b in anchor["top"]),
    )


def state_to_json(state: RDPState) -> dict[str, Any]:
    return {
        "rdp": [float_text(s) for s in state.rdp],
        "dead": list(state.dead),
        "delta": fmt(state.delta),
    }


def state_from_json(obj: Mapping[str, Any]) -> RDPState:
    return RDPState(
        tuple(float(s) for s in obj["rdp"]),
        tuple(bool(d) for d in obj["dead"]),
        Decimal(obj["delta"]),
    )


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
