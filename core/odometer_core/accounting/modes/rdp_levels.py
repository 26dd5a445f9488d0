"""The thresholds and per-order conversions of the ``rdp`` filter: each order's threshold B(α)
at its δ share (Canonne–Kamath–Steinke 2020, Prop. 12 inverted) and the ε of a ladder level at
one order. The configuration, admission and readings are
:mod:`odometer_core.accounting.modes.rdp`."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

import numpy as np
import numpy.typing as npt

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import odometer as odo
from odometer_core.accounting.exact import to_float_down

#: Relative margin by which derived RDP thresholds are rounded down (see _rdp_thresholds).
THRESHOLD_MARGIN: Final = 1e-12


def _rdp_thresholds(
    epsilon: Decimal,
    delta_c: Decimal,
    orders: tuple[float, ...],
    weights: tuple[float, ...],
    anchored: bool = True,
    shape: odo.LadderShape | None = None,
) -> tuple[float, ...]:
    """B(α) = ε_B + [log(δ_α) + log(α−1) − α·log(1−1/α)]/(α−1), rounded down; orders whose
    B(α) ≤ 0 are dropped (−∞). Inverting CKS20 Prop. 12 at the order's δ share δ_α: level 1's
    share of w_α·δ_c in an anchored ladder (:func:`order_ladder`; the ``shape``'s from
    accounting 1.8.0), the whole w_α·δ_c before accounting 1.4.0 (docs/accounting.md, *rdp*)."""
    eb = to_float_down(epsilon)
    dc = to_float_down(delta_c)
    out: list[float] = []
    for a, w in zip(orders, weights, strict=True):
        if dc <= 0 or w <= 0:
            out.append(-math.inf)
            continue
        log_share = (
            math.log(odo.anchored_share(_order_pool(w, dc), 1, shape))
            if anchored
            else math.log(w) + math.log(dc)
        )
        b = eb + (log_share + math.log(a - 1) - a * math.log1p(-1 / a)) / (a - 1)
        # Round down with a relative margin far above the float error of the logs above
        # (~1e-15), so that the CKS conversion of B(α) gives δ ≤ w_α·δ_c exactly as computed.
        b = math.nextafter(b - THRESHOLD_MARGIN * (1.0 + abs(b)), -math.inf)
        out.append(b if b > 0 else -math.inf)
    return tuple(out)


def _order_pool(weight: float, delta_c: float) -> float:
    """The δ pool of one order's ladder: w_α·δ_c, rounded down."""
    return math.nextafter(weight * delta_c, 0.0)


@dataclass(frozen=True, slots=True)
class _AtOrder:
    """The RDP conversion at one order α (compares by value, as a ladder's conversion must)."""

    alpha: float

    def __call__(self, level: float, delta: float) -> float:
        return _rdp_level_epsilon(self.alpha, level, delta)


def _rdp_level_epsilon(alpha: float, level: float, delta: float) -> float:
    """ε of (α, level)-RDP at δ (Canonne–Kamath–Steinke 2020, Prop. 12, at the one order α)."""
    eps, _ = cv.rdp_to_epsilon(np.array([alpha]), np.array([level]), delta)
    return float(eps)


def best_order(
    curve: npt.NDArray[np.float64],
    epsilon: Decimal,
    delta_c: Decimal,
    orders: tuple[float, ...],
    share: float,
) -> float | None:
    """The order of ``orders`` at which repeats of a declaration of RDP ``curve`` fit the most
    times when it holds ``share`` of δ_c, B_share(α)/ε(α) at ``epsilon`` (the smallest on ties);
    ``None`` when the curve is 0 at every order (within 1e-300: a zero curve rounded up) or no
    order fits at all."""
    values: list[float] = curve.tolist()  # a plain loop: 16 orders, on every search's candidate
    if not any(c > 1e-300 for c in values):
        return None
    best, score = None, 0.0
    shares = _share_thresholds(epsilon, delta_c, orders, share)
    for alpha, b, c in zip(orders, shares, values, strict=True):
        if b > 0 and (ratio := math.inf if c <= 1e-300 else b / c) > score:
            best, score = alpha, ratio
    return best


@functools.lru_cache(maxsize=64)
def _share_thresholds(
    epsilon: Decimal, delta_c: Decimal, orders: tuple[float, ...], share: float
) -> tuple[float, ...]:
    return _rdp_thresholds(epsilon, delta_c, orders, (share,) * len(orders))
