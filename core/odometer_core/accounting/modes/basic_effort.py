"""How ``basic`` mode spends one charge's work on a declaration, fixed before any of it is
computed (so that the same declaration is always charged the same way): the RDP grid on which
composed declarations are converted (dense, or coarse where the curves would cost too much) and
how many PLDs share the work limits of one (:mod:`odometer_core.accounting.effort`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from odometer_core.accounting import effort as work
from odometer_core.accounting.declarations import (
    DPSGD,
    Composed,
    Declaration,
    Gaussian,
    Subsampled,
    TruncatedSubsampledGaussian,
)

FloatArray = npt.NDArray[np.float64]

#: Orders used to compose RDP curves *inside one invocation* in ``basic`` mode before the
#: final CKS conversion (dp_accounting's default grid: 1.25 … 256 plus 512, 1024).
DENSE_ORDERS: Final[FloatArray] = np.array(
    [1 + x / 10.0 for x in range(1, 100)]
    + [12.0, 14.0, 16.0, 20.0, 24.0, 28.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0],
    dtype=np.float64,
)


#: The RDP grid of ``composed`` declarations with more distinct subsampled-Gaussian items than
#: :data:`DENSE_CURVES` allows (the dense grid's 99 fractional orders would cost too much):
#: dp_accounting's coarse default orders up to 256.
COARSE_ORDERS: Final[FloatArray] = np.array(
    [
        *(1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 8.0, 10.0, 12.0),
        *(16.0, 20.0, 24.0, 32.0, 64.0, 128.0, 256.0),
    ],
    dtype=np.float64,
)

#: Most work units (:mod:`odometer_core.accounting.effort`) a charge may spend on the dense grid.
DENSE_CURVES: Final = 300.0

#: Most distinct PLD-charged items of one declaration that each get their own PLD (sharing the
#: work limits of one); above it their (ε, δ) come from their RDP curves.
MAX_PLD_ITEMS: Final = 4


@dataclass(frozen=True, slots=True)
class Effort:
    """How one declaration's charge is computed, fixed before any of it is (so that the same
    declaration is always charged the same way): the RDP grid of composed declarations, and
    ``pld_share`` — each PLD gets 1/``pld_share`` of the work limits, or ``None``: no PLD, the
    RDP bound instead."""

    orders: FloatArray
    pld_share: int | None


def _pld_items(decl: Declaration) -> int:
    """Distinct PLD computations ``decl`` may need (DP-SGD runs, Poisson-subsampled Gaussians,
    and the repeated Gaussian of a one-item composition)."""
    return len({node for node in work.walk(decl) if _needs_pld(node)})


def _needs_pld(node: Declaration) -> bool:
    if isinstance(node, DPSGD):
        return True
    if isinstance(node, Subsampled):
        return node.scheme == "poisson" and isinstance(node.mechanism, Gaussian)
    if isinstance(node, Composed):
        return len(node.items) == 1 and isinstance(node.items[0][0], Gaussian)
    return isinstance(node, TruncatedSubsampledGaussian)


def effort_for(decl: Declaration) -> Effort:
    """The :class:`Effort` of ``decl``: the dense grid unless its curves would cost more than
    :data:`DENSE_CURVES` by the a-priori estimate (then :data:`COARSE_ORDERS`); one PLD each
    for up to :data:`MAX_PLD_ITEMS` PLD items, sharing one PLD's work limits."""
    orders = DENSE_ORDERS
    if work.declaration_curve_work(decl, tuple(DENSE_ORDERS.tolist())) > DENSE_CURVES:
        orders = COARSE_ORDERS
    items = _pld_items(decl)
    return Effort(orders, max(items, 1) if items <= MAX_PLD_ITEMS else None)
