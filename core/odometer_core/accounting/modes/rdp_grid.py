"""The grid of a new ``rdp`` filter: :func:`make` (thresholds, anchor, PLD branch, ladder
shape) and the grid chosen for a declared workload (:func:`choose_grid`). The filter itself is
:mod:`odometer_core.accounting.modes.rdp`, which re-exports these names."""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal
from typing import Final

import numpy as np
import numpy.typing as npt

from odometer_core.accounting.declarations import Declaration, Relation
from odometer_core.accounting.exact import DOWN, ONE, sub_down, to_float_down
from odometer_core.accounting.modes.common import Anchor
from odometer_core.accounting.modes.rdp_config import (
    DEFAULT_RDP_ORDERS,
    WOR_TIGHT,
    RDPConfig,
)
from odometer_core.accounting.modes.rdp_levels import _rdp_thresholds
from odometer_core.accounting.modes.statements import PldBranch
from odometer_core.accounting.modes.workload import (
    WORKLOAD_SHARE,
    WorkloadChoice,
    workload_curve,
)
from odometer_core.accounting.odometer import LadderShape

FloatArray = npt.NDArray[np.float64]


def make(
    eps: Decimal,
    dlt: Decimal,
    rel: Relation,
    dc: Decimal,
    orders: tuple[float, ...],
    weights: tuple[float, ...],
    anchored: bool = True,
    branch: PldBranch | None = None,
    shape: LadderShape | None = None,
) -> RDPConfig:
    """A new filter on the grid: anchored (thresholds at level 1's share of each order's
    w_α·δ_c, so that the orders' ladders contain them; with the PLD ``branch``'s split stored,
    the ladder on the whole of δ_c is in force until a first declaration keeps the branch,
    :func:`in_force`; level 1 at the ``shape``'s share from accounting 1.8.0), or as before
    1.4.0 (replay only)."""
    thresholds = _rdp_thresholds(eps, dc, orders, weights, anchored, shape)
    config = RDPConfig(eps, dlt, rel, dc, sub_down(dlt, dc), orders, weights, thresholds)
    if not anchored:
        return config
    return replace(
        config, anchor=Anchor(eps, dlt), thresholds_top=thresholds, branch=branch, shape=shape
    )


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
    branch: PldBranch | None = None,
) -> RDPConfig:
    """The grid of a dataset created for a declared workload (``branch``: the PLD branch's
    split, :mod:`.statements`).

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
    config = make(eps, dlt, rel, dc, orders, tuple(weight[a] for a in orders), anchored, branch)
    config = replace(config, wor_bound=wor_bound)
    final_curve, _ = workload_curve(items, rel, config.orders_array, tight)
    t = _scale(
        np.asarray(config.thresholds, dtype=np.float64), final_curve, delta, config.delta_approx
    )
    expected = tuple(n if t >= 1 else min(n, math.floor(t * n)) for _, n in items)
    return replace(config, workload=WorkloadChoice(items, best, expected))
