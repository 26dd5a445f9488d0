"""The PLD branch: one of the statements a curve mode's certified reading is the smallest of
(accounting 1.6.0; ``docs/accounting.md``, *Readings as the smallest of several statements*).

A configuration created from accounting 1.6.0 on splits its conversion δ_c, once, at creation,
between two statements, each of which holds at every stopping time:

- the mode's ladder of filters (:mod:`odometer_core.accounting.odometer`), on the pool
  (1 − ``share``)·δ_c, exactly as before but on the smaller pool;
- the *PLD branch*, on the pool P = ``share``·δ_c: the i-th admitted declaration is given
  δ_i = P·``first`` (i = 1) or P·(1 − ``first``)·6/(π²(i − 1)²) (i ≥ 2), a schedule fixed at
  creation whose terms sum to at most P, and its own ε_i at δ_i: the ``basic`` charge of the
  declaration at conversion δ δ_i (:func:`odometer_core.accounting.modes.basic.charge`:
  dp_accounting's pessimistic PLD for DP-SGD and a Poisson-subsampled Gaussian,
  Koskela–Jälkö–Honkela 2020, Doroshenko et al. 2022; the exact Gaussian, Balle–Wang 2018,
  Thm 8; the pure ε of Laplace and pure kinds; Dong–Roth–Su 2019, Cor. 2.13 for GDP). The
  branch reads Σε_i at δ P: basic composition of adaptively chosen (ε_i, δ_i), valid at
  every stopping time because δ_i depends on the position i alone, fixed before the
  declaration is chosen, and the schedule never sums past P (Rogers–Roth–Ullman–Vadhan
  2016, the basic-composition privacy odometer; pathwise as the ``basic`` mode's reading).

The branch is *retired* (reads ∞ for good) at the first declaration it cannot state within its
slot: a declaration whose charge carries its own δ (the slot would have to be at least that δ,
and the rdp reading after an approximate declaration is the filter's target anyway), an
output-dependent one, one ``basic`` cannot charge, or one past the work limit; and once Σε_i
exceeds the creation target, so that a long history stops paying for a statement that can no
longer give the reading. Retiring only drops a statement, which is always sound.

The reading is the minimum over the statements. Each is a time-uniform statement at its own
share, the shares sum to at most δ_c, and the minimum is a function of the transcript, so the
union bound over the statements certifies it at δ_c (docs). The filter admits iff that minimum
after the admission stays within the budget in force.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from odometer_core.accounting.declarations import (
    DPSGD,
    GDP,
    ChargedAs,
    Declaration,
    DeclarationError,
    Exponential,
    Gaussian,
    Laplace,
    PureDP,
    RandomizedResponse,
    Subsampled,
)
from odometer_core.accounting.exact import (
    DOWN,
    INFINITY,
    ONE,
    ZERO,
    add_up,
    fmt,
    sub_down,
    to_float_down,
    to_float_up,
)

#: 6/π² rounded down (0.607927101854…): Σ_{k ≥ 1} c/k² ≤ 1 for this c.
INVERSE_ZETA_2: Final = Decimal("0.6079271018")

THEOREM_PLD_BRANCH: Final = (
    "PLD branch: each declaration's own (ε_i, δ_i) from its PLD (dp_accounting pessimistic; "
    "Koskela–Jälkö–Honkela 2020; Doroshenko et al. 2022) at δ_i of a schedule fixed at "
    "creation, composed basically (Rogers–Roth–Ullman–Vadhan 2016, Thm 3.6); the smallest of "
    "the statements fixed at creation, by the union bound over their δ shares"
)


@dataclass(frozen=True, slots=True)
class PldBranch:
    """The δ split of a configuration created from accounting 1.6.0 on: ``share`` of δ_c to
    the PLD branch (the rest to the ladder), ``first`` of the branch's pool to the first
    declaration (the rest spread as 6/(π²(i − 1)²) over the later ones). Exact decimals in
    (0, 1), fixed at creation and stored in the configuration."""

    share: Decimal
    first: Decimal

    def to_json(self) -> dict[str, str]:
        return {"share": fmt(self.share), "first": fmt(self.first)}

    @staticmethod
    def from_json(obj: Mapping[str, Any] | None) -> PldBranch | None:
        if obj is None:
            return None
        branch = PldBranch(Decimal(obj["share"]), Decimal(obj["first"]))
        if not (0 < branch.share < 1 and 0 < branch.first <= 1):
            raise ValueError("a PLD branch's shares are in (0, 1)")
        return branch


#: The default split of new configurations: 0.6 of δ_c to the PLD branch, 0.9 of that to the
#: first declaration (the tutorial DP-SGD job declared once then reads 1.04× dp_accounting's PLD
#: ε; ``python -m benchmarks quote`` prints the split and what it gives).
DEFAULT_BRANCH: Final = PldBranch(Decimal("0.6"), Decimal("0.9"))


def pool(branch: PldBranch, conversion_delta: Decimal) -> Decimal:
    """The branch's δ pool, share·δ_c, rounded down."""
    return DOWN.multiply(branch.share, conversion_delta)


def ladder_pool(branch: PldBranch | None, conversion_delta: Decimal) -> Decimal:
    """What is left of δ_c for the ladder: δ_c − the branch's pool, rounded down (δ_c itself
    without a branch), so that the two pools sum to at most δ_c."""
    if branch is None:
        return conversion_delta
    return sub_down(conversion_delta, pool(branch, conversion_delta))


def slot(branch: PldBranch, conversion_delta: Decimal, i: int) -> Decimal:
    """δ_i of the i-th declaration (i ≥ 1), rounded down: P·first, then
    P·(1 − first)·c/(i − 1)² with c = :data:`INVERSE_ZETA_2` ≤ 6/π², so that
    Σ_i δ_i ≤ P·first + P·(1 − first) = P."""
    if i < 1:
        raise ValueError("declarations are counted from 1")
    p = pool(branch, conversion_delta)
    if i == 1:
        return DOWN.multiply(p, branch.first)
    rest = DOWN.multiply(p, ONE - branch.first)
    return DOWN.divide(DOWN.multiply(rest, INVERSE_ZETA_2), Decimal((i - 1) * (i - 1)))


@dataclass(frozen=True, slots=True)
class BranchState:
    """The branch's running statement: ``count`` declarations admitted, Σε_i (``epsilon``,
    rounded up; :data:`~odometer_core.accounting.exact.INFINITY` once retired); ``off`` when
    the first declaration left the whole of δ_c to the ladder (:func:`opening`)."""

    count: int = 0
    epsilon: Decimal = ZERO
    off: bool = False

    @property
    def retired(self) -> bool:
        return not self.epsilon.is_finite()

    def to_json(self) -> dict[str, Any]:
        if self.off:
            return {"off": True}
        return {"count": self.count, "epsilon": fmt(self.epsilon)}

    @staticmethod
    def from_json(obj: Mapping[str, Any] | None) -> BranchState:
        if obj is None:
            return BranchState()
        if obj.get("off"):
            return OFF
        return BranchState(int(obj["count"]), Decimal(obj["epsilon"]))


RETIRED: Final = INFINITY

#: The branch of a state before anything was admitted, and of every configuration without one.
NO_BRANCH: Final = BranchState()

#: The branch the first declaration turned off: the ladder holds the whole of δ_c.
OFF: Final = BranchState(0, INFINITY, off=True)

#: The first declaration keeps the branch (with its share of δ_c) when the ladder, holding the
#: whole of δ_c, would admit fewer than this many repeats of it (its best order at the share a
#: declared workload gets): a history of a few big declarations, where the branch's PLD is far
#: tighter than the ladder and basic composition does not yet lose to it. A declaration the
#: ladder would admit more often (an epoch, a chunk of steps, one of many Gaussians) leaves the
#: whole of δ_c to the ladder, which serves long histories: the DP-SGD jobs of
#: ``python -m benchmarks quote`` declared once fit 7.2–9.5 times, 100-step chunks of
#: tests/accounting/test_rdp_grids.py 16 times, σ = 20 Gaussians on (1, 10⁻⁵) about 23 times.
OPENING_REPEATS: Final = 12


def opening(decl: Declaration, repeats: float) -> BranchState:
    """The split the first declaration chooses: :data:`NO_BRANCH` (the branch on, with its
    share) when the ladder would admit fewer than :data:`OPENING_REPEATS` ``repeats`` of it
    and it is of a kind the branch states, else :data:`OFF`. A deterministic function of the
    configuration and the first declaration, both fixed before any output, so the split is
    fixed before anything is released, as the ladder's thresholds it decides
    (``docs/accounting.md``)."""
    if not repeats < OPENING_REPEATS or not _stated(decl):
        return OFF
    return NO_BRANCH


def may_fit(
    branch: PldBranch,
    conversion_delta: Decimal,
    state: BranchState,
    decl: Declaration,
    epsilon: Decimal,
) -> bool:
    """Whether the branch could keep Σε_i within ``epsilon`` after ``decl``, by a cheap lower
    bound on ε_i (for DP-SGD, :func:`odometer_core.accounting.bounds.poisson_gaussian_epsilon_floor`
    at its slot; elsewhere 0): ``False`` lets a refusal the ladder already decided skip the PLD."""
    from odometer_core.accounting import bounds

    if state.off or state.retired:
        return False
    if isinstance(decl, DPSGD):
        delta_i = to_float_down(slot(branch, conversion_delta, state.count + 1))
        floor = bounds.poisson_gaussian_epsilon_floor(
            to_float_down(decl.noise_multiplier), to_float_up(decl.sample_rate), decl.steps, delta_i
        )
        return state.epsilon + Decimal(floor) * (1 - Decimal("1e-9")) <= epsilon
    return True


def _stated(decl: Declaration) -> bool:
    """Whether the branch states ``decl``: the kinds whose ``basic`` charge is one closed form
    or one PLD on a grid within the default limits (DP-SGD, a Poisson-subsampled Gaussian, the
    Gaussian, Laplace, GDP and pure ε-DP kinds). Others (lists, curves, mixtures, selections)
    retire the branch, so that it never adds more than one bounded charge to an admission."""
    from odometer_core.accounting import pld

    match decl:
        case ChargedAs():
            return _stated(decl.charged_as())
        case DPSGD(noise_multiplier=multiplier, sample_rate=q, steps=steps):
            return pld.fits_default_grid(to_float_down(multiplier), to_float_up(q), steps)
        case Subsampled(scheme="poisson", mechanism=Gaussian() as inner, rate=rate):
            if rate is None or inner.sensitivity <= 0 or inner.sigma <= 0:
                return rate is not None
            ratio = to_float_down(DOWN.divide(inner.sigma, inner.sensitivity))
            return pld.fits_default_grid(ratio, to_float_up(rate), 1)
        case Gaussian() | Laplace() | GDP() | PureDP() | RandomizedResponse() | Exponential():
            return True
    return False


def own_epsilon(decl: Declaration, delta_i: Decimal) -> Decimal | None:
    """ε_i of ``decl`` at its slot δ_i: the ``basic`` charge at conversion δ δ_i, where that
    charge's δ is within δ_i and it is not output-dependent; ``None`` where the branch cannot
    state it (then it retires)."""
    from odometer_core.accounting.modes import basic  # basic imports the curve modes

    if delta_i <= 0 or not _stated(decl):
        return None
    try:
        cost = basic.charge(decl, delta_i)
    except DeclarationError:  # not chargeable in basic, or past the work limit
        return None
    if cost.partition is not None or cost.delta > delta_i or not cost.epsilon.is_finite():
        return None
    return cost.epsilon


def advance(
    branch: PldBranch,
    conversion_delta: Decimal,
    state: BranchState,
    decl: Declaration,
    declared_delta: Decimal,
    creation_epsilon: Decimal,
) -> BranchState:
    """The branch after admitting ``decl`` (whose own δ in the mode is ``declared_delta``):
    one more declaration counted, its ε_i added, or retired (module docstring)."""
    if state.off:
        return state
    count = state.count + 1
    if state.retired or declared_delta > 0:
        return BranchState(count, RETIRED)
    eps = own_epsilon(decl, slot(branch, conversion_delta, count))
    if eps is None:
        return BranchState(count, RETIRED)
    total = add_up(state.epsilon, eps)
    return BranchState(count, RETIRED if total > creation_epsilon else total)


__all__ = [
    "DEFAULT_BRANCH",
    "INVERSE_ZETA_2",
    "NO_BRANCH",
    "OFF",
    "OPENING_REPEATS",
    "RETIRED",
    "THEOREM_PLD_BRANCH",
    "BranchState",
    "PldBranch",
    "advance",
    "ladder_pool",
    "may_fit",
    "opening",
    "own_epsilon",
    "pool",
    "slot",
]
