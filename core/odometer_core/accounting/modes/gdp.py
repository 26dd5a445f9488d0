"""``gdp`` mode: a Gaussian-DP privacy filter.

Admission: Σμ_i² + μ² ≤ μ_B² (Smith–Thakurta 2022, fully adaptive GDP filter), where μ_B solves
δ_GDP(ε_B; μ_B) = δ_B (Dong–Roth–Su 2019, Cor. 2.13), rounded down; everything released is then
μ_B-GDP, hence (ε_B, δ_B)-DP. Only certified μ-GDP declarations are accepted. See
``docs/accounting.md``.

From accounting 1.7.0 a new configuration records its ladder's shape (``"ladder"``,
:class:`~odometer_core.accounting.odometer.LadderShape`), fixed at creation, and reads (0, 0)
while nothing was released. Each level is a μ_k-GDP filter (Smith–Thakurta 2022) converted by
Dong–Roth–Su 2019, Cor. 2.13 at its share; the readings are certified at δ_B by the union bound
over the levels (``docs/accounting.md``, *Readings as the smallest of several statements*).
Configurations stored before keep the 1.4.0 ladder.

From accounting 1.9.0 a new configuration says ``"ladder_rule": "first_declaration"``: the
shape is chosen at the first admission from that declaration's μ² and the creation target alone
(:mod:`odometer_core.accounting.modes.first_ladder`), recorded in the state (``"first"``) and
kept from then on (:func:`in_force`), as in ``zcdp``. Configurations stored before keep
:data:`DEFAULT_LADDER`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Final, Literal, overload

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import mixtures as mx
from odometer_core.accounting import odometer as odo
from odometer_core.accounting import selection as sel
from odometer_core.accounting.amounts import MuSquared
from odometer_core.accounting.declarations import (
    GDP,
    Composed,
    Declaration,
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    MixtureOfGaussians,
    Relation,
    RepeatAndSelect,
    ReportNoisyMax,
    SampledWithReplacement,
    TreeAggregation,
    TruncatedSubsampledGaussian,
)
from odometer_core.accounting.exact import (
    DOWN,
    INFINITY,
    ZERO,
    add_up,
    budget_from_float,
    cost_from_float,
    fmt,
    mul_up,
    sub_down,
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
    UnsupportedInMode,
    anchored_delta_problem,
    only,
    reject,
    spent_on_ladder,
)
from odometer_core.accounting.odometer import LadderShape, Reading

#: The ladder of configurations created from accounting 1.7.0 on: r = 2^(1/6), level 1 (the
#: filter) 0.6 of δ_B, the 40 levels below it (μ² down to 1 % of the top, where readings pass
#: 10 % of the budget) 0.3705 evenly, the tail 0.0195, the levels above 0.01. Chosen from the
#: family of ``python -m benchmarks quote`` (docs/accounting.md): the best worst-case past 10 %
#: of the budget among the shapes whose reading at the last admitted Gaussian stays ≤ 1.05×
#: the exact ε.
DEFAULT_LADDER: Final = LadderShape(6, Decimal("0.6"), 40, Decimal("0.3705"), Decimal("0.01"))


#: The ladder rule of configurations created from accounting 1.9.0 on: the first admitted
#: declaration chooses the shape (:mod:`~odometer_core.accounting.modes.first_ladder`).
DEFAULT_RULE: Final[str | None] = first_ladder.FIRST_DECLARATION


@dataclass(frozen=True, slots=True)
class GDPConfig:
    """``gdp``: μ_top solves δ_GDP(ε_B; μ_top) = 0.9·δ_B (rounded down), the filter's threshold
    μ_top² fixed at creation (level 1 of its ladder, ``anchor`` the creation target);
    ``mu_squared_budget`` the largest Σμ² the budget in force admits (μ_top² until a curator
    changes the budget). Configurations stored before accounting 1.4.0 have no anchor and μ_B
    at the whole δ_B."""

    epsilon: Decimal
    delta: Decimal
    relation: Relation
    mu_squared_budget: Decimal
    anchor: Anchor | None = None
    mu_squared_top: Decimal | None = None
    #: the ladder's shape fixed at creation (accounting ≥ 1.7.0; ``None``: the 1.4.0 ladder); under
    #: ``ladder_rule`` the shape until the first admission, which chooses the one in force
    shape: LadderShape | None = None
    #: ``"first_declaration"`` (accounting ≥ 1.9.0): the first admitted declaration chooses the
    #: ladder's shape (:mod:`~odometer_core.accounting.modes.first_ladder`); ``None``: ``shape``
    ladder_rule: str | None = None
    mode: Literal["gdp"] = "gdp"


@dataclass(frozen=True, slots=True)
class GDPState:
    """Σμ_i² of admitted invocations; under a ``ladder_rule`` (1.9.0 on), from the first
    admission, that declaration's μ² (``first``) and the ladder shape it chose (``ladder``)."""

    mu_squared: Decimal = ZERO
    first: Decimal | None = None
    ladder: LadderShape | None = None


def parse(eps: Decimal, dlt: Decimal, rel: Relation, acc: Mapping[str, Any]) -> GDPConfig:
    """``{"mode": "gdp"}``: nothing to choose; μ_B follows from (ε_B, δ_B)."""
    only(acc, ("mode",))
    made = make(eps, dlt, rel, shape=DEFAULT_LADDER)
    return replace(made, ladder_rule=DEFAULT_RULE)


def make(
    eps: Decimal,
    dlt: Decimal,
    rel: Relation,
    anchored: bool = True,
    shape: LadderShape | None = None,
) -> GDPConfig:
    """A new filter: anchored (μ_top at level 1's share of δ_B, so that its ladder contains
    it; with the ``shape`` of accounting ≥ 1.7.0, or the 1.4.0 ladder), or, for replaying
    entries of versions before 1.4.0, at the whole δ_B."""
    pool = to_float_down(dlt)
    share = odo.anchored_share(pool, 1, shape) if anchored else pool
    mu_b = 0.0 if dlt <= 0 else cv.gdp_mu_budget(to_float_down(eps), share)
    b = budget_from_float(mu_b)
    config = GDPConfig(eps, dlt, rel, DOWN.multiply(b, b))
    if not anchored:
        return config
    return replace(
        config, anchor=Anchor(eps, dlt), mu_squared_top=config.mu_squared_budget, shape=shape
    )


def ladder(config: GDPConfig) -> odo.AnchoredLadder:
    """The ladder fixed at the filter's creation: top μ_top², δ pool δ_B (creation), DRS19."""
    assert config.anchor is not None and config.mu_squared_top is not None
    return odo.AnchoredLadder(
        to_float_down(config.mu_squared_top),
        to_float_down(config.anchor.delta),
        config.anchor.epsilon,
        _gdp_level_epsilon,
        shape=config.shape,
    )


def initial_state(config: GDPConfig) -> GDPState:
    return GDPState()


# ---------------------------------------------------------------------------- the shape in force
#: The reading at the last repeat of the first declaration that a chosen level-1 share must
#: keep within this factor of the exact ε of the Gaussian of the same μ² (``docs/accounting.md``,
#: *Ladders shaped by the first declaration*).
LAST_WITHIN: Final = 1.05


def level_one(epsilon: Decimal, pool: Decimal, shape: LadderShape) -> Decimal:
    """μ_top² of a filter of target ``epsilon`` and δ_B ``pool`` under ``shape`` (DRS19 Cor.
    2.13 at level 1's share; μ rounded down, then squared down), as :func:`make` computes it."""
    share = odo.anchored_share(to_float_down(pool), 1, shape)
    b = budget_from_float(cv.gdp_mu_budget(to_float_down(epsilon), share))
    return DOWN.multiply(b, b)


def chosen_shape(config: GDPConfig, mu_squared: Decimal) -> LadderShape | None:
    """The shape a first declaration of ``mu_squared`` chooses for ``config`` (a function of the
    creation target and ``mu_squared`` alone; ``None``: the configuration's own)."""
    if config.ladder_rule != first_ladder.FIRST_DECLARATION or config.anchor is None:
        return None
    if config.anchor.delta <= 0 or mu_squared.is_infinite():
        return None
    return first_ladder.chosen(
        level_one,
        _gdp_level_epsilon,
        config.anchor.epsilon,
        config.anchor.delta,
        mu_squared,
        1.0,
        LAST_WITHIN,
    )


def in_force(config: GDPConfig, state: GDPState) -> GDPConfig:
    """The filter in force: ``config`` itself, or, once a first declaration chose a shape other
    than the one ``config`` holds, the filter made at the creation target with that shape (as
    :func:`odometer_core.accounting.modes.zcdp.in_force`, the last answer kept likewise)."""
    global _IN_FORCE_LAST
    if state.ladder is None or config.shape == state.ladder or config.anchor is None:
        return config
    last = _IN_FORCE_LAST
    if last is not None and last[0] is config and last[1] is state.ladder:
        return last[2]
    anchor = config.anchor
    made = _made(str(anchor.epsilon), str(anchor.delta), config.relation, state.ladder)
    found = replace(
        made, epsilon=config.epsilon, delta=config.delta, ladder_rule=config.ladder_rule
    )
    _IN_FORCE_LAST = (config, state.ladder, found)  # one tuple, replaced whole
    return found


_IN_FORCE_LAST: tuple[GDPConfig, LadderShape, GDPConfig] | None = None


@functools.lru_cache(maxsize=1024)
def _made(eps: str, dlt: str, rel: Relation, shape: LadderShape) -> GDPConfig:
    """:func:`make` with ``shape``, once per filter (keyed by the amounts' text, so that the
    configuration keeps their digits): every admission after the first reads the filter in
    force, and making it solves for μ_top, a root finding, each time."""
    return make(Decimal(eps), Decimal(dlt), rel, shape=shape)


def unsupported(decl: Declaration) -> str | None:
    """Why ``decl`` is not a certified μ-GDP declaration (the 422 message), or ``None``: the
    walk of :func:`gdp_charge`, asked only whether it can account ``decl``."""
    try:
        _walk(decl, False)
    except UnsupportedInMode as refused:
        return refused.detail
    return None


#: Why the kinds charged as another kind elsewhere (``ChargedAs``) are refused here.
NOT_GDP: Final[dict[type[Declaration], str]] = {
    DiscreteGaussian: (
        "the discrete Gaussian is Δ²/(2σ²)-zCDP (Canonne–Kamath–Steinke 2020, Thm 14), but no "
        "theorem makes it μ-GDP with μ = Δ/σ: Dong–Roth–Su 2019 Thm 2.7 is for continuous "
        "Gaussian noise"
    ),
    DiscreteLaplace: "the discrete Laplace mechanism is ε-DP, as 'laplace' and 'pure_dp' are",
    ReportNoisyMax: (
        "report noisy max is the exponential mechanism (Gumbel noise) or ε-DP (exponential "
        "noise), as 'exponential' and 'pure_dp' are"
    ),
}


def _refusal(decl: Declaration) -> str:
    """Why ``gdp`` refuses ``decl``: no μ-GDP statement for its kind."""
    match decl:
        case RepeatAndSelect():
            return sel.refusal("gdp", "μ-GDP")
        case MixtureOfGaussians() | SampledWithReplacement() | TruncatedSubsampledGaussian():
            return mx.refusal("gdp", decl)
    why = NOT_GDP.get(type(decl))
    return (
        "mode 'gdp' accepts only certified μ-GDP declarations ('gdp', 'gaussian', "
        f"'tree_aggregation'), not '{decl.kind}'{'' if why is None else f' ({why})'}; use mode "
        "'zcdp' or 'rdp'"
    )


def gdp_charge(decl: Declaration) -> Decimal:
    """μ² charged in ``gdp`` mode (Smith–Thakurta 2022 filter: Σμ_i² ≤ μ_B²).

    Only certified μ-GDP kinds: ``gdp`` (μ) and ``gaussian`` (μ = Δ/σ, Dong–Roth–Su 2019
    Thm 2.7), ``tree_aggregation`` (the Gaussian of sensitivity √d, μ² = d/σ²), and compositions
    of them (DRS19 Cor. 3.3: μ² adds). ``repeat_and_select`` is refused (its bound is a Rényi
    curve, Papernot–Steinke 2022). Subsampled Gaussians are
    rejected — the CLT approximations are not certified bounds (Tran et al. 2026). So are
    ``discrete_laplace``, ``discrete_gaussian`` and ``report_noisy_max`` (:data:`NOT_GDP`): their
    guarantees are those of ``pure_dp``, ``zcdp`` and ``exponential``, which this mode refuses
    too, and the discrete Gaussian is not known to be μ-GDP with μ = Δ/σ.
    """
    return _walk(decl, True)


@overload
def _walk(decl: Declaration, compose: Literal[True]) -> Decimal: ...
@overload
def _walk(decl: Declaration, compose: Literal[False]) -> None: ...
def _walk(decl: Declaration, compose: bool) -> Decimal | None:
    """The one walk of ``gdp`` mode over a declaration, in the manner of dp_accounting's
    ``_maybe_compose(event, count, do_compose)``: where ``decl`` or a mechanism nested in it is
    not certified μ-GDP, it raises :class:`UnsupportedInMode` with the reason; else it returns
    μ² when ``compose``, and nothing (computing nothing) when only asked whether."""
    match decl:
        case GDP(mu=mu):
            return mul_up(mu, mu) if compose else None
        case Gaussian():
            if not compose:
                return None
            r = decl.ratio
            return INFINITY if r.is_infinite() else mul_up(r, r)
        case TreeAggregation():  # the Gaussian of sensitivity √d it is
            return _walk(decl.charged_as(), True) if compose else None
        case Composed(items=items):
            if not compose:
                for item, _ in items:
                    _walk(item, False)
                return None
            return add_up(*(mul_up(Decimal(c), _walk(d, True)) for d, c in items))
    raise UnsupportedInMode(_refusal(decl))


def _gdp_remaining(config: GDPConfig, state: GDPState) -> MuSquared:
    return MuSquared(sub_down(config.mu_squared_budget, state.mu_squared))


def _admit_gdp(config: GDPConfig, state: GDPState, decl: Declaration) -> Decision:
    """Admit iff Σμ_i² + μ_i² ≤ μ_B² (Smith–Thakurta 2022)."""
    m2 = gdp_charge(decl)
    requested = MuSquared(m2)
    new = add_up(state.mu_squared, m2)
    if new > config.mu_squared_budget:
        return reject(
            state,
            requested,
            _gdp_remaining(config, state),
            "mu budget exceeded",
            MuSquared(),
        )
    new_state = GDPState(new, state.first, state.ladder)  # replace(), faster
    return Decision("accepted", new_state, requested, requested, _gdp_remaining(config, new_state))


def admit(
    config: GDPConfig, state: GDPState, decl: Declaration, conversion_delta: Decimal | None
) -> Decision:
    """Under a ``ladder_rule``, the first admission is decided by the filter of the shape the
    declaration chooses, and records the choice; later ones by the filter in force."""
    if config.ladder_rule is None or state.first is not None:
        return _admit_gdp(in_force(config, state), state, decl)
    m2 = gdp_charge(decl)
    shape = chosen_shape(config, m2) or config.shape
    decision = _admit_gdp(in_force(config, replace(state, ladder=shape)), state, decl)
    if not decision.admitted:
        return decision
    return replace(decision, state=replace(decision.state, first=m2, ladder=shape))


def change_budget(
    config: GDPConfig,
    state: GDPState,
    eps: Decimal,
    dlt: Decimal,
    final_conversion_delta: object,
    anchored: bool = True,
) -> GDPConfig:
    """A curator's new (ε_B, δ_B): made anew while nothing was charged; after that the ladder
    fixed at creation stays and ε caps its certified reading (``mu_squared_budget`` the highest
    level reading at most ε), δ only has to cover the ladder's pool, the creation δ_B, and a δ
    raise funds nothing (as :func:`odometer_core.accounting.modes.zcdp.change_budget`).
    A filter stored before 1.4.0 changes as :func:`~odometer_core.accounting.modes.zcdp.
    change_budget` says."""
    fresh = state == GDPState()
    if config.anchor is None or fresh:
        if config.anchor is None and anchored and not fresh:
            raise InvalidTransition("BudgetFixed", LEGACY_FIXED)
        anchored = anchored or config.anchor is not None
        made = make(eps, dlt, config.relation, anchored, config.shape)
        return replace(made, ladder_rule=config.ladder_rule)
    config = in_force(config, state)  # the shape the first declaration chose stays
    assert config.mu_squared_top is not None
    m2 = odo.cap_amount(ladder(config), eps, config.mu_squared_top)
    return replace(config, epsilon=eps, delta=dlt, mu_squared_budget=m2)


def over_budget(config: GDPConfig, state: GDPState) -> str | None:
    config = in_force(config, state)
    if state.mu_squared > config.mu_squared_budget:
        tail = ""
        if config.anchor is not None:
            tail = f" (its certified reading is epsilon={fmt(odometer(config, state).epsilon)})"
        return f"spent mu^2 is {fmt(state.mu_squared)}{tail}"
    if config.anchor is not None:
        return anchored_delta_problem(
            config.epsilon, config.delta, config.anchor, config.anchor.delta, False
        )
    return None


def odometer(config: GDPConfig, state: GDPState) -> Reading:
    """The certified odometer reading: the ladder of GDP filters over μ²
    (:mod:`odometer_core.accounting.odometer`), levels μ_B²·r^−(k−1), δ shares of δ_B, each
    level μ_k = √c_k converted by Dong–Roth–Su 2019, Cor. 2.13; capped at the filter's target.
    Each level is a μ_k-GDP filter (Smith–Thakurta 2022). The reading's δ is δ_B, fixed in
    advance (the ladder spends at most δ_B)."""
    config = in_force(config, state)
    if config.anchor is not None:
        # the whole ladder, the filter at level 1 included, spends at most the creation δ_B
        assert config.mu_squared_top is not None
        if config.shape is not None and state.mu_squared == 0:  # nothing released (1.7.0 on)
            return Reading(ZERO, ZERO, "ladder", odo.THEOREM_GDP, 0, ZERO)
        spent = spent_on_ladder(state.mu_squared, config.mu_squared_top)
        found = ladder(config).reading(spent)
        if found is None:  # never: admission keeps Σμ² within a level
            return Reading(config.anchor.epsilon, config.anchor.delta, "filter", odo.FILTER_GDP)
        eps, level = found
        return Reading(eps, config.anchor.delta, "ladder", odo.THEOREM_GDP, level, eps)
    legacy = odo.ladder_epsilon(
        to_float_up(state.mu_squared),
        to_float_down(config.mu_squared_budget),
        to_float_down(config.delta),
        _gdp_level_epsilon,
    )
    return odo.capped(
        legacy, config.epsilon, config.delta, config.delta, odo.THEOREM_GDP, odo.FILTER_GDP
    )


def _gdp_level_epsilon(mu_squared: float, delta: float) -> float:
    """ε of √(μ²)-GDP at δ (Dong–Roth–Su 2019, Cor. 2.13), the square root rounded up."""
    return cv.gdp_epsilon(math.nextafter(math.sqrt(mu_squared), math.inf), delta)


def status(config: GDPConfig, state: GDPState) -> dict[str, Any]:
    """Budget and spend in μ²; ``odometer`` is the certified reading at any stopping time;
    ``spent_eps_delta`` converts the running μ as if the history had been fixed in advance (an
    estimate, ``certified: false``)."""
    config = in_force(config, state)
    mu = math.sqrt(float(state.mu_squared))
    return {
        "mu_squared_budget": fmt(config.mu_squared_budget),
        "spent": {"mu_squared": fmt(state.mu_squared)},
        "remaining": _gdp_remaining(config, state).to_json(),
        "spent_eps_delta": {
            "epsilon": fmt(cost_from_float(cv.gdp_epsilon(mu, to_float_down(config.delta))))
            if mu > 0 and config.delta > 0
            else "0",
            "delta": fmt(config.delta),
            "certified": False,
            "estimate": True,
        },
        "odometer": odometer(config, state).to_json(),
    }


def config_to_json(config: GDPConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"mu_squared_budget": fmt(config.mu_squared_budget)}
    if config.anchor is not None and config.mu_squared_top is not None:  # absent before 1.4.0
        out["anchor"] = {**config.anchor.to_json(), "top": fmt(config.mu_squared_top)}
    if config.shape is not None:  # absent before 1.7.0
        out["ladder"] = config.shape.to_json()
    if config.ladder_rule is not None:  # absent before 1.9.0
        out["ladder_rule"] = config.ladder_rule
    return out


def config_from_json(
    eps: Decimal, dlt: Decimal, rel: Relation, obj: Mapping[str, Any]
) -> GDPConfig:
    anchor = obj.get("anchor")
    return GDPConfig(
        eps,
        dlt,
        rel,
        Decimal(obj["mu_squared_budget"]),
        Anchor.from_json(anchor),
        None if anchor is None else Decimal(anchor["top"]),
        _shape(obj.get("ladder")),
        first_ladder.rule_from_json(obj.get("ladder_rule")),
    )


def _shape(raw: object) -> LadderShape | None:
    if raw is not None and not isinstance(raw, Mapping):
        raise ConfigError("ladder must be an object")
    try:
        return LadderShape.from_json(raw)
    except (ValueError, KeyError, TypeError, ArithmeticError) as bad:
        raise ConfigError(f"invalid ladder: {bad}") from None


def state_to_json(state: GDPState) -> dict[str, Any]:
    out: dict[str, Any] = {"mu_squared": fmt(state.mu_squared)}
    if state.first is not None:  # a ladder rule's first admission (1.9.0 on)
        out["first"] = first_ladder.first_to_json("mu_squared", state.first, state.ladder)
    return out


def state_from_json(obj: Mapping[str, Any]) -> GDPState:
    charge, shape = first_ladder.first_from_json("mu_squared", obj.get("first"))
    return GDPState(Decimal(obj["mu_squared"]), charge, shape)


MODE = Mode(
    name="gdp",
    config_type=GDPConfig,
    state_type=GDPState,
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
    odometer=odometer,
)
