"""``zcdp`` mode: an approximate-zCDP privacy filter.

Admission: Σρ_i + ρ ≤ ρ_B and Σδ_i + δ ≤ δ_A, where the dataset's δ_B = δ_A + δ_c and ρ_B is the
largest ρ whose conversion at ε_B costs at most δ_c (Canonne–Kamath–Steinke 2020, Cor. 13),
rounded down. Valid under full adaptivity by the approximate-zCDP filter of Whitehouse–Ramdas–
Rogers–Wu 2023 (Thm 1; Feldman–Zrnic 2021 Rem. 4.4 for the RDP form), so everything released is
(ε_B, δ_A + δ_c)-DP. See ``docs/accounting.md``.

From accounting 1.7.0 a new configuration records its ladder's shape (``"ladder"``,
:class:`~odometer_core.accounting.odometer.LadderShape`: levels 2^(1/6) apart, level 1 at
:data:`DEFAULT_LADDER`'s share of δ_c, the decades below the budget evenly shared), fixed at
creation, and reads (0, 0) while nothing was released. The readings are the union bound over
the ladder's levels, each a ρ_k-zCDP filter (Whitehouse–Ramdas–Rogers–Wu 2023, Thm 1) converted
by Canonne–Kamath–Steinke 2020, Cor. 13 at its share (``docs/accounting.md``, *Readings as the
smallest of several statements*). Configurations stored before keep the 1.4.0 ladder.

From accounting 1.9.0 a new configuration says ``"ladder_rule": "first_declaration"``: the
shape is chosen at the first admission from that declaration's ρ and the creation target alone
(:mod:`odometer_core.accounting.modes.first_ladder`), recorded in the state (``"first"``) and
kept from then on; the first declaration is admitted by the filter of the shape it chose
(:func:`in_force`). Configurations stored before keep :data:`DEFAULT_LADDER`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Final, Literal, overload

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import mixtures as mx
from odometer_core.accounting import odometer as odo
from odometer_core.accounting import selection as sel
from odometer_core.accounting.amounts import RhoDelta
from odometer_core.accounting.declarations import (
    DPSGD,
    GDP,
    MCDP,
    ZCDP,
    ApproxDP,
    ChargedAs,
    Composed,
    Declaration,
    Exponential,
    Gaussian,
    Laplace,
    MixtureOfGaussians,
    OdpCapable,
    PureDP,
    RandomizedResponse,
    RDPCurve,
    Relation,
    RepeatAndSelect,
    SampledWithReplacement,
    Subsampled,
    TruncatedSubsampledGaussian,
)
from odometer_core.accounting.exact import (
    UP,
    ZERO,
    add_up,
    budget_from_float,
    cost_from_float,
    fmt,
    mul_up,
    sub_down,
    sub_up,
    to_float_down,
    to_float_up,
)
from odometer_core.accounting.modes import first_ladder
from odometer_core.accounting.modes.common import (
    LEGACY_FIXED,
    Anchor,
    ConfigError,
    Decision,
    InvalidTransition,
    Mode,
    Reservation,
    UnsupportedInMode,
    amount,
    anchored_delta_problem,
    conversion_delta_for,
    keep_conversion_delta,
    only,
    reject,
    spent_on_ladder,
    within_creation_filter,
)
from odometer_core.accounting.odometer import LadderShape, Reading

#: The ladder of configurations created from accounting 1.7.0 on: r = 2^(1/6), level 1 (the
#: filter) 0.85 of δ_c, the 40 levels below it (ρ down to 1 % of the top, where readings
#: pass 10 % of the budget) 0.133 evenly, the tail 0.007, the levels above 0.01. Chosen from
#: the family of ``python -m benchmarks quote`` (docs/accounting.md): the level-1 share keeps
#: the reading at the last admitted Gaussian within 1.12× the exact ε.
DEFAULT_LADDER: Final = LadderShape(6, Decimal("0.85"), 40, Decimal("0.133"), Decimal("0.01"))


#: The ladder rule of configurations created from accounting 1.9.0 on: the first admitted
#: declaration chooses the shape (:mod:`~odometer_core.accounting.modes.first_ladder`).
DEFAULT_RULE: Final[str | None] = first_ladder.FIRST_DECLARATION


@dataclass(frozen=True, slots=True)
class ZCDPConfig:
    """``zcdp``: δ_B = δ_A + δ_c; ρ_top = max{ρ : CKS δ(ρ, ε_B) ≤ 0.9·δ_c}, rounded down, the
    filter's threshold fixed at creation (level 1 of its ladder, ``anchor`` the creation
    target); ``rho_budget`` the largest Σρ the budget in force admits (ρ_top until a curator
    changes the budget: :func:`change_budget`). Configurations stored before accounting 1.4.0
    have no anchor and ρ_B computed at the whole δ_c."""

    epsilon: Decimal
    delta: Decimal
    relation: Relation
    final_conversion_delta: Decimal
    delta_approx: Decimal
    rho_budget: Decimal
    anchor: Anchor | None = None
    rho_top: Decimal | None = None
    #: the ladder's shape fixed at creation (accounting ≥ 1.7.0; ``None``: the 1.4.0 ladder); under
    #: ``ladder_rule`` the shape until the first admission, which chooses the one in force
    shape: LadderShape | None = None
    #: ``"first_declaration"`` (accounting ≥ 1.9.0): the first admitted declaration chooses the
    #: ladder's shape (:mod:`~odometer_core.accounting.modes.first_ladder`); ``None``: ``shape``
    ladder_rule: str | None = None
    mode: Literal["zcdp"] = "zcdp"


@dataclass(frozen=True, slots=True)
class ZCDPState:
    """Σρ and Σδ of admitted invocations; under a ``ladder_rule`` (1.9.0 on), from the first
    admission, that declaration's ρ (``first``) and the ladder shape it chose (``ladder``)."""

    rho: Decimal = ZERO
    delta: Decimal = ZERO
    first: Decimal | None = None
    ladder: LadderShape | None = None


# ---------------------------------------------------------------------------- configuration
def parse(eps: Decimal, dlt: Decimal, rel: Relation, acc: Mapping[str, Any]) -> ZCDPConfig:
    """``{"mode": "zcdp", "final_conversion_delta"?}``: δ_c defaults to the whole δ_B."""
    only(acc, ("mode", "final_conversion_delta"))
    dc = amount(acc, "final_conversion_delta", default=dlt)
    if dc > dlt:
        raise ConfigError("final_conversion_delta must be ≤ the budget delta")
    made = make(eps, dlt, rel, dc, shape=DEFAULT_LADDER)
    return replace(made, ladder_rule=DEFAULT_RULE)


def make(
    eps: Decimal,
    dlt: Decimal,
    rel: Relation,
    dc: Decimal,
    anchored: bool = True,
    shape: LadderShape | None = None,
) -> ZCDPConfig:
    """A new filter: anchored (its threshold at level 1's share of δ_c, so that its ladder
    contains it; with the ``shape`` of accounting ≥ 1.7.0, or the 1.4.0 ladder), or, for
    replaying entries of accounting versions before 1.4.0, as they were made (at the whole
    δ_c, the ladder beside it)."""
    pool = to_float_down(dc)
    share = odo.anchored_share(pool, 1, shape) if anchored else pool
    rho_b = budget_from_float(cv.zcdp_rho_budget(to_float_down(eps), share)) if dc > 0 else ZERO
    config = ZCDPConfig(eps, dlt, rel, dc, sub_down(dlt, dc), rho_b)
    if not anchored:
        return config
    return replace(config, anchor=Anchor(eps, dlt), rho_top=rho_b, shape=shape)


def ladder(config: ZCDPConfig) -> odo.AnchoredLadder:
    """The ladder fixed at the filter's creation: top ρ_top, δ pool δ_c, CKS20 Cor. 13."""
    assert config.anchor is not None and config.rho_top is not None
    return odo.AnchoredLadder(
        to_float_down(config.rho_top),
        to_float_down(config.final_conversion_delta),
        config.anchor.epsilon,
        cv.zcdp_epsilon,
        shape=config.shape,
    )


def initial_state(config: ZCDPConfig) -> ZCDPState:
    return ZCDPState()


# ---------------------------------------------------------------------------- the shape in force
#: The reading at the last repeat of the first declaration that a chosen level-1 share must
#: keep within this factor of the exact ε of the Gaussian of the same ρ (the issue's bound at
#: the last admitted: ``docs/accounting.md``, *Ladders shaped by the first declaration*).
LAST_WITHIN: Final = 1.12


def level_one(epsilon: Decimal, pool: Decimal, shape: LadderShape) -> Decimal:
    """ρ_top of a filter of target ``epsilon`` and δ_c ``pool`` under ``shape``: the largest ρ
    whose conversion at level 1's share is at most ``epsilon`` (CKS20 Cor. 13), rounded down."""
    share = odo.anchored_share(to_float_down(pool), 1, shape)
    return budget_from_float(cv.zcdp_rho_budget(to_float_down(epsilon), share))


def chosen_shape(config: ZCDPConfig, rho: Decimal) -> LadderShape | None:
    """The shape a first declaration of ``rho`` chooses for ``config`` (a function of the
    creation target, δ_c and ``rho`` alone; ``None``: the configuration's own)."""
    if config.ladder_rule != first_ladder.FIRST_DECLARATION or config.anchor is None:
        return None
    if config.final_conversion_delta <= 0:
        return None
    return first_ladder.chosen(
        level_one,
        cv.zcdp_epsilon,
        config.anchor.epsilon,
        config.final_conversion_delta,
        rho,
        2.0,
        LAST_WITHIN,
    )


def in_force(config: ZCDPConfig, state: ZCDPState) -> ZCDPConfig:
    """The filter in force: ``config`` itself, or, once a first declaration chose a shape other
    than the one ``config`` holds, the filter made at the creation target with that shape (a
    budget change after the first admission writes that filter back, with its cap:
    :func:`change_budget`). The last answer is kept with the very configuration and shape it
    came from (by identity: a loop of admissions on one filter carries them from state to state,
    and the copy and the amounts' text were a large part of an admission's CPU)."""
    global _IN_FORCE_LAST
    if state.ladder is None or config.shape == state.ladder or config.anchor is None:
        return config
    last = _IN_FORCE_LAST
    if last is not None and last[0] is config and last[1] is state.ladder:
        return last[2]
    anchor = config.anchor
    dc = config.final_conversion_delta
    made = _made(str(anchor.epsilon), str(anchor.delta), config.relation, str(dc), state.ladder)
    found = replace(
        made, epsilon=config.epsilon, delta=config.delta, ladder_rule=config.ladder_rule
    )
    _IN_FORCE_LAST = (config, state.ladder, found)  # one tuple, replaced whole
    return found


_IN_FORCE_LAST: tuple[ZCDPConfig, LadderShape, ZCDPConfig] | None = None


@functools.lru_cache(maxsize=1024)
def _made(eps: str, dlt: str, rel: Relation, dc: str, shape: LadderShape) -> ZCDPConfig:
    """:func:`make` with ``shape``, once per filter (keyed by the amounts' text, so that the
    configuration keeps their digits): every admission after the first reads the filter in
    force, and making it solves for ρ_top, a root finding, each time."""
    return make(Decimal(eps), Decimal(dlt), rel, Decimal(dc), shape=shape)


# ---------------------------------------------------------------------------- charge
def unsupported(decl: Declaration) -> str | None:
    """Why ``decl`` has no certified zCDP charge (the 422 message), or ``None``: the walk of
    :func:`zcdp_charge`, asked only whether it can account ``decl``."""
    try:
        _walk(decl, False)
    except UnsupportedInMode as refused:
        return refused.detail
    return None


def zcdp_charge(decl: Declaration) -> tuple[Decimal, Decimal]:
    """(ρ, δ) charged in ``zcdp`` mode.

    - ρ-zCDP / (ξ, ρ)-zCDP → ξ + ρ (RDP ξ + ρα ≤ (ξ + ρ)α for α ≥ 1; Bun–Steinke 2016 Def. 1.1);
    - pure ε (and randomized response, Laplace at ε = Δ/b) → ε·tanh(ε/2), tight
      (Steinke 2024, "Sharp RDP & zCDP from pure DP", Thm 5; ≤ ε²/2 of BS16 Prop. 1.4);
    - exponential mechanism → min(ε²/8, ε·tanh(ε/2)) (Cesar–Rogers 2021 Lemma 3.2);
    - (ε, δ) → (ε²/2, δ) (Bun–Steinke 2016 Prop. 1.13 / §8; the tighter tanh form for δ > 0
      is not used);
    - μ-GDP → μ²/2 and Gaussian → Δ²/(2σ²) (BS16 Prop. 1.6);
    - mCDP → ξ + ρ via BS16 Lemma 4.2; ODP → its worst cell as pure / approximate DP;
    - composed → Σ count·ρ, Σ count·δ (BS16 Lemma 2.3);
    - discrete Laplace, discrete Gaussian, report noisy max → the kind that states their
      guarantee (:class:`~odometer_core.accounting.declarations.ChargedAs`): pure ε = Δ/t;
      ρ = Δ²/(2σ²) (Canonne–Kamath–Steinke 2020 Thm 14); the exponential mechanism's rule for
      Gumbel noise, the pure-ε rule for exponential noise (not bounded-range).
    RDP grid curves, subsampled mechanisms and DP-SGD are rejected: a finite grid does not
    certify zCDP and subsampling does not improve ρ (a lower bound of Steinke 2022). So is
    ``repeat_and_select``: its Rényi bound (Papernot–Steinke 2022) is not of the form ξ + ρα.
    So are ``mixture_of_gaussians``, ``sampled_with_replacement`` and
    ``truncated_subsampled_gaussian``: ρ cannot state their amplification
    (:func:`odometer_core.accounting.mixtures.refusal`).
    ``tree_aggregation`` is charged as the Gaussian it is (ρ = d/(2σ²)).
    """
    return _walk(decl, True)


#: Why a curve on finitely many orders, a subsampled mechanism and DP-SGD are refused.
_NO_ZCDP_BOUND: Final = (
    "has no certified zCDP bound (a finite RDP grid does not certify zCDP and subsampling does "
    "not improve ρ); use a dataset or sub-budget in mode 'rdp'"
)


@overload
def _walk(decl: Declaration, compose: Literal[True]) -> tuple[Decimal, Decimal]: ...
@overload
def _walk(decl: Declaration, compose: Literal[False]) -> None: ...
@overload
def _walk(decl: Declaration, compose: bool) -> tuple[Decimal, Decimal] | None: ...
def _walk(decl: Declaration, compose: bool) -> tuple[Decimal, Decimal] | None:
    """The one walk of ``zcdp`` mode over a declaration, in the manner of dp_accounting's
    ``_maybe_compose(event, count, do_compose)``: where the mode has no certified charge for
    ``decl`` or for a mechanism nested in it, it raises :class:`UnsupportedInMode` with the
    reason; else it returns (ρ, δ) when ``compose``, and nothing (computing nothing) when only
    asked whether. A kind the mode accounts is one with a case here that returns."""
    match decl:
        case ChargedAs():
            return _walk(decl.charged_as(), compose)
        case ZCDP(xi=xi, rho=rho, delta=delta):
            return (add_up(xi, rho), delta) if compose else None
        case MCDP():
            if not compose:
                return None
            xi, rho = zcdp_pair(decl)
            return add_up(xi, rho), ZERO
        case PureDP(epsilon=eps) | RandomizedResponse(epsilon=eps):
            return (_pure_rho(eps), ZERO) if compose else None
        case Laplace():
            return (_pure_rho(decl.epsilon), ZERO) if compose else None
        case Exponential(epsilon=eps):
            if not compose:
                return None
            eps8 = UP.divide(mul_up(eps, eps), Decimal(8))
            return min(eps8, _pure_rho(eps)), ZERO
        case ApproxDP(epsilon=eps, delta=delta):
            if not compose:
                return None
            if delta == 0:
                return _pure_rho(eps), ZERO
            return UP.divide(mul_up(eps, eps), Decimal(2)), delta
        case GDP(mu=mu):
            return (UP.divide(mul_up(mu, mu), Decimal(2)), ZERO) if compose else None
        case Gaussian():
            return (decl.rho, ZERO) if compose else None
        case OdpCapable():
            if not compose:
                return None
            part = decl.partition()
            return _walk(ApproxDP(part.worst_epsilon, part.delta), True)
        case Composed(items=items):
            if not compose:
                for item, _ in items:
                    _walk(item, False)
                return None
            rho, delta = ZERO, ZERO
            for item, count in items:
                r, d = _walk(item, True)
                rho = add_up(rho, mul_up(Decimal(count), r))
                delta = add_up(delta, mul_up(Decimal(count), d))
            return rho, delta
        case RDPCurve() | Subsampled() | DPSGD():
            raise UnsupportedInMode(f"'{decl.kind}' {_NO_ZCDP_BOUND}")
        case RepeatAndSelect():
            raise UnsupportedInMode(sel.refusal("zcdp", "ξ + ρα"))
        case MixtureOfGaussians() | SampledWithReplacement() | TruncatedSubsampledGaussian():
            raise UnsupportedInMode(mx.refusal("zcdp", decl))
    raise UnsupportedInMode(f"kind '{decl.kind}' is not supported in mode 'zcdp'")


def zcdp_pair(decl: ZCDP | MCDP) -> tuple[Decimal, Decimal]:
    """(ξ, ρ) of a zCDP or mCDP declaration; mCDP via Bun–Steinke 2016 Lemma 4.2
    ((μ, τ)-mCDP ⇒ (μ − τ²/2, τ²/2)-zCDP), with ξ clamped at 0 (a larger ξ is conservative)."""
    if isinstance(decl, ZCDP):
        return decl.xi, decl.rho
    rho = UP.divide(mul_up(decl.tau, decl.tau), Decimal(2))
    xi = UP.subtract(decl.mu, rho)
    return (xi if xi > 0 else ZERO), rho


def _pure_rho(epsilon: Decimal) -> Decimal:
    """ε·tanh(ε/2), rounded up (Steinke 2024 Thm 5); ε for ε ≥ 1e3 where tanh = 1."""
    if epsilon == 0:
        return ZERO
    e = to_float_up(epsilon)
    return cost_from_float(cv.pure_dp_zcdp(e))


# ---------------------------------------------------------------------------- admission
def _zcdp_remaining(config: ZCDPConfig, state: ZCDPState) -> RhoDelta:
    return RhoDelta(
        sub_down(config.rho_budget, state.rho), sub_down(config.delta_approx, state.delta)
    )


def _admit_zcdp(config: ZCDPConfig, state: ZCDPState, decl: Declaration) -> Decision:
    """Admit iff Σρ + ρ_i ≤ ρ_B and Σδ + δ_i ≤ δ_A (WRRW23 approximate-zCDP filter)."""
    rho, delta = zcdp_charge(decl)
    requested = RhoDelta(rho, delta)
    new_rho = add_up(state.rho, rho)
    new_delta = add_up(state.delta, delta)
    why = None
    if new_rho > config.rho_budget or new_delta > config.delta_approx:
        why = f"{'rho' if new_rho > config.rho_budget else 'delta'} budget exceeded"
    elif new_delta > 0 and config.anchor is not None:
        assert config.rho_top is not None
        if not within_creation_filter(config.epsilon, config.delta, config.anchor):
            why = "approximate declarations need the creation budget, which was lowered"
        elif new_rho > config.rho_top:
            why = "approximate declarations are admitted only within the creation filter"
    if why is not None:
        return reject(state, requested, _zcdp_remaining(config, state), why, RhoDelta())
    new_state = ZCDPState(new_rho, new_delta, state.first, state.ladder)  # replace(), faster
    return Decision("accepted", new_state, requested, requested, _zcdp_remaining(config, new_state))


def admit(
    config: ZCDPConfig, state: ZCDPState, decl: Declaration, conversion_delta: Decimal | None
) -> Decision:
    """Under a ``ladder_rule``, the first admission is decided by the filter of the shape the
    declaration chooses, and records the choice; later ones by the filter in force."""
    if config.ladder_rule is None or state.first is not None:
        return _admit_zcdp(in_force(config, state), state, decl)
    rho, _ = zcdp_charge(decl)
    shape = chosen_shape(config, rho) or config.shape
    decision = _admit_zcdp(in_force(config, replace(state, ladder=shape)), state, decl)
    if not decision.admitted:
        return decision
    return replace(decision, state=replace(decision.state, first=rho, ladder=shape))


# ---------------------------------------------------------------------------- held reservations
def settle_held(
    config: ZCDPConfig, state: ZCDPState, reservation: Reservation, cell: str
) -> Decision:
    """Settle, at a zCDP level above a dataset, an ODP invocation the dataset reserved: the
    worst cell was charged at admission and stays charged. No filter theorem allows an
    output-dependent ρ (Hartmann et al. 2022 Thm 7 is a basic-composition result), so nothing
    is refunded here (``docs/accounting.md``, *Organisation caps*)."""
    rho, delta = zcdp_charge(
        ApproxDP(reservation.partition.worst_epsilon, reservation.partition.delta)
    )
    held = RhoDelta(rho, delta)
    left = _zcdp_remaining(in_force(config, state), state)
    return Decision("accepted", state, RhoDelta(), held, left, refund=RhoDelta())


def cancel_held(config: ZCDPConfig, state: ZCDPState, reservation: Reservation) -> Decision:
    """Cancel such a reservation: the mechanism never ran, so its worst-cell (ρ, δ) is taken off
    the counts (rounded up, so the counts stay at least the charges of what ran; the filter's
    past decisions were made on larger counts, which only made them stricter)."""
    rho, delta = zcdp_charge(
        ApproxDP(reservation.partition.worst_epsilon, reservation.partition.delta)
    )
    new_state = replace(
        state, rho=max(sub_up(state.rho, rho), ZERO), delta=max(sub_up(state.delta, delta), ZERO)
    )
    held = RhoDelta(rho, delta)
    return Decision(
        "accepted",
        new_state,
        RhoDelta(),
        held,
        _zcdp_remaining(in_force(config, new_state), new_state),
        refund=held,
    )


# ---------------------------------------------------------------------------- budget change
def change_budget(
    config: ZCDPConfig,
    state: ZCDPState,
    eps: Decimal,
    dlt: Decimal,
    final_conversion_delta: object,
    anchored: bool = True,
) -> ZCDPConfig:
    """A curator's new (ε_B, δ_B).

    Before anything was charged nothing was released, so the filter is simply made anew for
    the new target (δ_c follows δ_B when it was the whole of it, else stays, or is given).
    After that the ladder fixed at creation stays and the new ε is enforced as a cap on its
    certified reading: ``rho_budget`` becomes the highest level whose reading is at most ε
    (:meth:`~odometer_core.accounting.odometer.AnchoredLadder.cap`; above ρ_top after a raise).
    δ_c, δ_A and the ladder's δ shares stay as created: a δ raise funds nothing here
    (``docs/accounting.md``, *Budget changes*). A filter stored before 1.4.0 (no anchor) may
    change only before its first charge, and is then anchored; with ``anchored`` False (replay
    of entries written before 1.4.0) it follows the rule of its time, which re-derived
    everything from the new target."""
    fresh = state == ZCDPState()
    if config.anchor is None or fresh:
        if config.anchor is None and anchored and not fresh:
            raise InvalidTransition("BudgetFixed", LEGACY_FIXED)
        dc = conversion_delta_for(
            config.final_conversion_delta, config.delta, dlt, final_conversion_delta
        )
        anchored = anchored or config.anchor is not None
        made = make(eps, dlt, config.relation, dc, anchored, config.shape)
        return replace(made, ladder_rule=config.ladder_rule)
    keep_conversion_delta(config.final_conversion_delta, final_conversion_delta)
    config = in_force(config, state)  # the shape the first declaration chose stays
    assert config.rho_top is not None
    rho_cap = odo.cap_amount(ladder(config), eps, config.rho_top)
    return replace(config, epsilon=eps, delta=dlt, rho_budget=rho_cap)


def over_budget(config: ZCDPConfig, state: ZCDPState) -> str | None:
    config = in_force(config, state)
    if state.rho > config.rho_budget or state.delta > config.delta_approx:
        certified = fmt(odometer(config, state).epsilon) if config.anchor is not None else None
        tail = f" (its certified reading is epsilon={certified})" if certified else ""
        return f"spent is rho={fmt(state.rho)}, delta={fmt(state.delta)}{tail}"
    if config.anchor is not None:
        return anchored_delta_problem(
            config.epsilon,
            config.delta,
            config.anchor,
            config.final_conversion_delta,
            state.delta > 0,
        )
    return None


# ---------------------------------------------------------------------------- status
def odometer(config: ZCDPConfig, state: ZCDPState) -> Reading:
    """The certified odometer reading: the ladder of zCDP filters over ρ
    (:mod:`odometer_core.accounting.odometer`), levels ρ_B·r^−(k−1), δ shares of δ_c, each
    level converted by Canonne–Kamath–Steinke 2020, Cor. 13; capped at the filter's target.

    The ladder covers histories of pure zCDP (Σδ = 0): each level is then a ρ_k-zCDP filter
    (Whitehouse–Ramdas–Rogers–Wu 2023, Thm 1; Feldman–Zrnic 2021, Rem. 4.4). Once an
    approximate declaration (δ_i > 0) was admitted, the reading is the target (ε_B, δ_B)
    (conservative: the union bound over levels would count δ_A once per level). The reading's
    δ is δ_B, fixed in advance (the ladder itself spends at most δ_c ≤ δ_B)."""
    if config.anchor is not None:
        return _anchored_reading(in_force(config, state), state)
    found = None
    if state.delta == 0:
        found = odo.ladder_epsilon(
            to_float_up(state.rho),
            to_float_down(config.rho_budget),
            to_float_down(config.final_conversion_delta),
            cv.zcdp_epsilon,
        )
    return odo.capped(
        found,
        config.epsilon,
        config.delta,
        config.final_conversion_delta,
        odo.THEOREM_ZCDP,
        odo.FILTER_ZCDP,
    )


def _anchored_reading(config: ZCDPConfig, state: ZCDPState) -> Reading:
    """The reading of a filter anchored at creation: the smallest ε of a level of its ladder
    holding Σρ, at δ_c (the whole ladder, the filter at level 1 included, spends at most δ_c);
    after an approximate declaration, the creation filter's target (its ρ_top-zCDP filter
    with δ_A, WRRW23 Thm 1), certified at the creation (ε_B, δ_B)."""
    assert config.anchor is not None
    if state.delta > 0:
        return Reading(config.anchor.epsilon, config.anchor.delta, "filter", odo.FILTER_ZCDP)
    if config.shape is not None and state.rho == 0:  # nothing released (1.7.0 on)
        return Reading(ZERO, ZERO, "ladder", odo.THEOREM_ZCDP, 0, ZERO)
    assert config.rho_top is not None
    found = ladder(config).reading(spent_on_ladder(state.rho, config.rho_top))
    if found is None:  # never: admission keeps Σρ within a level
        return Reading(config.anchor.epsilon, config.anchor.delta, "filter", odo.FILTER_ZCDP)
    eps, level = found
    return Reading(eps, config.final_conversion_delta, "ladder", odo.THEOREM_ZCDP, level, eps)


def status(config: ZCDPConfig, state: ZCDPState) -> dict[str, Any]:
    """Budget and spend in ρ; ``odometer`` is the certified reading at any stopping time;
    ``spent_eps_delta`` converts the running total as if the history had been fixed in advance
    (an estimate, ``certified: false``)."""
    config = in_force(config, state)
    est = _estimate_zcdp(state.rho, config.final_conversion_delta)
    return {
        "rho_budget": fmt(config.rho_budget),
        "delta_approx": fmt(config.delta_approx),
        "final_conversion_delta": fmt(config.final_conversion_delta),
        "spent": {"rho": fmt(state.rho), "delta": fmt(state.delta)},
        "remaining": _zcdp_remaining(config, state).to_json(),
        "spent_eps_delta": {
            "epsilon": est,
            "delta": fmt(add_up(state.delta, config.final_conversion_delta)),
            "certified": False,
            "estimate": True,
        },
        "odometer": odometer(config, state).to_json(),
    }


def _estimate_zcdp(rho: Decimal, delta_c: Decimal) -> str:
    if rho == 0:
        return "0"
    if delta_c <= 0:
        return "Infinity"
    return fmt(cost_from_float(cv.zcdp_epsilon(float(rho), to_float_down(delta_c))))


# ---------------------------------------------------------------------------- codec
def config_to_json(config: ZCDPConfig) -> dict[str, Any]:
    out: dict[str, Any] = {
        "final_conversion_delta": fmt(config.final_conversion_delta),
        "delta_approx": fmt(config.delta_approx),
        "rho_budget": fmt(config.rho_budget),
    }
    if config.anchor is not None and config.rho_top is not None:  # absent before 1.4.0
        out["anchor"] = {**config.anchor.to_json(), "top": fmt(config.rho_top)}
    if config.shape is not None:  # absent before 1.7.0
        out["ladder"] = config.shape.to_json()
    if config.ladder_rule is not None:  # absent before 1.9.0
        out["ladder_rule"] = config.ladder_rule
    return out


def config_from_json(
    eps: Decimal, dlt: Decimal, rel: Relation, obj: Mapping[str, Any]
) -> ZCDPConfig:
    anchor = obj.get("anchor")
    return ZCDPConfig(
        eps,
        dlt,
        rel,
        Decimal(obj["final_conversion_delta"]),
        Decimal(obj["delta_approx"]),
        Decimal(obj["rho_budget"]),
        Anchor.from_json(anchor),
        None if anchor is None else Decimal(anchor["top"]),
        ladder_shape(obj.get("ladder")),
        first_ladder.rule_from_json(obj.get("ladder_rule")),
    )


def ladder_shape(raw: object) -> LadderShape | None:
    """A stored ladder shape (``None`` when absent: the 1.4.0 ladder), or a
    :class:`ConfigError`."""
    if raw is not None and not isinstance(raw, Mapping):
        raise ConfigError("ladder must be an object")
    try:
        return LadderShape.from_json(raw)
    except (ValueError, KeyError, TypeError, ArithmeticError) as bad:
        raise ConfigError(f"invalid ladder: {bad}") from None


def state_to_json(state: ZCDPState) -> dict[str, Any]:
    out: dict[str, Any] = {"rho": fmt(state.rho), "delta": fmt(state.delta)}
    if state.first is not None:  # a ladder rule's first admission (1.9.0 on)
        out["first"] = first_ladder.first_to_json("rho", state.first, state.ladder)
    return out


def state_from_json(obj: Mapping[str, Any]) -> ZCDPState:
    charge, shape = first_ladder.first_from_json("rho", obj.get("first"))
    return ZCDPState(Decimal(obj["rho"]), Decimal(obj["delta"]), charge, shape)


MODE = Mode(
    name="zcdp",
    config_type=ZCDPConfig,
    state_type=ZCDPState,
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
    settle=settle_held,
    cancel=cancel_held,
    odometer=odometer,
)
