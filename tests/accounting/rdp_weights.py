"""The weights and thresholds an ``rdp`` filter is decided by, computed independently of the
implementation (for the property tests)."""

from __future__ import annotations

import math

from odometer_core.accounting.modes.rdp import RDPConfig


def rdp_in_force(
    creation: RDPConfig, first: str | None
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """The thresholds at creation and the weights of an ``rdp`` filter's level 1 and of its
    other levels, computed here: those stored, or, where its first declaration chose
    (accounting 1.5.0's ``first_declaration`` rule, ``docs/accounting.md``), at level 1 0.9 on
    the chosen order and 0.1 split equally over the others, each order's threshold the CKS20
    Prop. 12 conversion inverted at level 1's share 0.9·w·δ_c, and at the other levels the
    stored weights."""
    if first is None or first == "default":
        return creation.thresholds, creation.weights, creation.weights
    assert creation.weights_rule == "first_declaration"
    n = len(creation.orders)
    weights = tuple(0.9 if a == float(first) else 0.1 / (n - 1) for a in creation.orders)
    eps, dc = float(creation.epsilon), float(creation.final_conversion_delta)
    tops = tuple(
        eps + (math.log(0.9 * w * dc) + math.log(a - 1) - a * math.log1p(-1 / a)) / (a - 1)
        for a, w in zip(creation.orders, weights, strict=True)
    )
    return tops, weights, creation.weights
