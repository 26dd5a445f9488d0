"""``basic`` mode from accounting 1.5.0 on: a ``composed`` declaration charged by the joint
privacy-loss distribution (PLD) of its list, where every item has one.

A ``composed`` declaration is one invocation running a fixed list of mechanisms. Until 1.5.0 its
charge was the least ε of sound candidates that compose the items' guarantees one by one (basic
composition of their (ε, δ), RDP composition converted once; :mod:`~.basic`); a list calibrated
by a PLD accountant (PipelineDP's, dp_accounting's) to exactly (ε_B, δ_B) was charged more than
ε_B. From 1.5.0 on (a ``basic`` configuration with ``composed: "joint_pld"``, which every new
configuration has) the charge is

    (min(ε_joint(δ), ε), δ)   where (ε, δ) is the 1.4.0 charge of the list

and ε_joint(δ) the ε at δ of the composition of the items' pessimistic PLDs
(:func:`odometer_core.accounting.pld.joint_epsilon`): the same δ as before (δ never drops), and an ε
never above the 1.4.0 one. Both (ε_joint(δ), δ) and (ε, δ) hold for the fixed list, so their
minimum does. Across invocations nothing changes: each invocation's charge, chosen adaptively,
enters the basic filter (Rogers–Roth–Ullman–Vadhan 2016), which needs only a valid (ε_i, δ_i)
per invocation.

The items that have a PLD here: ``gaussian`` (σ > 0) and ``gdp`` (merged into one Gaussian:
Dong–Roth–Su 2019, Cor. 3.3), ``laplace`` (its exact PLD), every pure ε-DP kind (``pure_dp``,
``randomized_response``, ``exponential``, a ``repeat_and_select`` that is ε-DP) as the (ε, 0)
pair, ``approx_dp`` as the (ε, δ) pair, the kinds charged as one of these, and nested
``composed`` lists of them. A list with any other item (a curve, a subsampled mechanism,
DP-SGD) keeps the 1.4.0 charge, as does a list whose joint PLD would need more than the work
limit (:func:`odometer_core.accounting.pld.joint_work`).
"""

from __future__ import annotations

import math
from collections import Counter
from decimal import Decimal
from fractions import Fraction
from typing import Final

from odometer_core.accounting import pld
from odometer_core.accounting import selection as sel
from odometer_core.accounting.declarations import (
    GDP,
    ApproxDP,
    ChargedAs,
    Composed,
    Declaration,
    Exponential,
    Gaussian,
    Laplace,
    PureDP,
    RandomizedResponse,
    RepeatAndSelect,
)
from odometer_core.accounting.exact import DOWN, cost_from_float, to_float_down, to_float_up

#: The ``composed`` field of a ``basic`` configuration created from accounting 1.5.0 on.
JOINT_PLD: Final = "joint_pld"

#: The rule of configurations stored before 1.5.0 (the field absent): the 1.4.0 charge.
ONE_BY_ONE: Final = "one_by_one"

COMPOSED_RULES: Final = (JOINT_PLD, ONE_BY_ONE)

#: σ of the merged Gaussian is lowered by this relative margin, far above the float error of
#: 1/√(Σ σ_i⁻²) (a few ulps): a smaller σ only increases the privacy loss.
_SIGMA_MARGIN: Final = 2.0**-40


class _NoPld(Exception):
    """An item without a PLD here: the list keeps its 1.4.0 charge."""


class _Items:
    """The components of a list, gathered item by item (counts multiplied through nesting)."""

    def __init__(self) -> None:
        self.mu_squared = Fraction(0)
        self.laplace: Counter[float] = Counter()
        self.pairs: Counter[tuple[float, float]] = Counter()
        self.releases = 0

    def add(self, decl: Declaration, count: int) -> None:
        self.releases += count
        if isinstance(decl, ChargedAs):
            self.releases -= count
            self.add(decl.charged_as(), count)
        elif isinstance(decl, Composed):
            self.releases -= count
            for item, inner in decl.items:
                self.add(item, count * inner)
        elif isinstance(decl, Gaussian):
            if decl.sensitivity > 0:
                if decl.sigma == 0:
                    raise _NoPld
                ratio = Fraction(decl.sensitivity) / Fraction(decl.sigma)
                self.mu_squared += count * ratio * ratio
        elif isinstance(decl, GDP):
            self.mu_squared += count * Fraction(decl.mu) ** 2
        elif isinstance(decl, Laplace):
            if decl.sensitivity > 0:
                if decl.scale == 0:
                    raise _NoPld
                self.laplace[to_float_down(DOWN.divide(decl.scale, decl.sensitivity))] += count
        elif isinstance(decl, ApproxDP):
            self._pair(decl.epsilon, decl.delta, count)
        elif isinstance(decl, PureDP | RandomizedResponse | Exponential):
            self._pair(decl.epsilon, Decimal(0), count)
        elif isinstance(decl, RepeatAndSelect) and sel.pure_epsilon(decl) is not None:
            pure = sel.pure_epsilon(decl)
            assert pure is not None
            self._pair(pure, Decimal(0), count)
        else:
            raise _NoPld

    def _pair(self, epsilon: Decimal, delta: Decimal, count: int) -> None:
        if not epsilon.is_finite():
            raise _NoPld
        if epsilon > 0 or delta > 0:
            self.pairs[(to_float_up(epsilon), min(to_float_up(delta), 1.0))] += count

    def components(self) -> pld.JointComponents:
        sigma: float | None = None
        if self.mu_squared > 0:
            mu_squared = float(self.mu_squared)
            if mu_squared == 0.0 or math.isinf(mu_squared):
                raise _NoPld  # beyond the float range either way
            sigma = (1.0 / math.sqrt(mu_squared)) * (1.0 - _SIGMA_MARGIN)
        return pld.JointComponents(
            sigma,
            tuple(sorted(self.laplace.items())),
            tuple(sorted((e, d, c) for (e, d), c in self.pairs.items())),
        )


def components(decl: Composed) -> pld.JointComponents | None:
    """The joint PLD's components of ``decl``'s list, or ``None`` where an item has none here
    or the list releases at most one mechanism (nothing to compose)."""
    items = _Items()
    try:
        items.add(decl, 1)
        if items.releases <= 1:
            return None
        return items.components()
    except _NoPld:
        return None


def joint_epsilon(decl: Declaration, delta: Decimal) -> Decimal | None:
    """ε at ``delta`` of the joint pessimistic PLD of ``decl``'s list, rounded up (a cost:
    :func:`odometer_core.accounting.exact.cost_from_float`), or ``None``: not a ``composed``
    declaration, no PLD for some item, δ not in (0, 1), or more work than the limit."""
    if not isinstance(decl, Composed) or not 0 < delta < 1:
        return None
    parts = components(decl)
    if parts is None:
        return None
    try:
        return cost_from_float(pld.joint_epsilon(parts, to_float_down(delta)))
    except pld.PldUnavailable:
        return None
