"""``gdp`` mode: a Gaussian-DP privacy filter.

Admission: Σμ_i² + μ² ≤ μ_B² (Smith–Thakurta 2022, fully adaptive GDP filter), where μ_B solves
δ_GDP(ε_B; μ_B) = δ_B (Dong–Roth–Su 2019, Cor. 2.13), rounded down; everything released is then
μ_B-GDP, hence (ε_B, δ_B)-DP. Only certified μ-GDP declarations are accepted. See
``docs/accounting.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from odometer_core.accounting import conversions as cv
from odometer_core.accounting import odometer as odo
from odometer_core.accounting.amounts import MuSquared
from odometer_core.accounting.declarations import GDP, Composed, Declaration, Gaussian, Relation
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
from odometer_core.accounting.modes.common import (
    Decision,
    Mode,
    UnsupportedInMode,
    only,
    reject,
)
from odometer_core.accounting.odometer import Reading


@dataclass(frozen=True, slots=True)
class GDPConfig:
    """``gdp``: μ_B solves δ_GDP(ε_B; μ_B) = δ_B (rounded down); the budget is μ_B²."""

    epsilon: Decimal
    delta: Decimal
    relation: Relation
    mu_squared_budget: Decimal
    mode: Literal["gdp"] = "gdp"


@dataclass(frozen=True, slots=True)
class GDPState:
    """Σμ_i² of admitted invocations."""

    mu_squared: Decimal = ZERO


def parse(eps: Decimal, dlt: Decimal, rel: Relation, acc: Mapping[str, Any]) -> GDPConfig:
    """``{"mode": "gdp"}``: nothing to choose; μ_B follows from (ε_B, δ_B)."""
    only(acc, ("mode",))
    return make(eps, dlt, rel)


def make(eps: Decimal, dlt: Decimal, rel: Relation) -> GDPConfig:
    mu_b = 0.0 if dlt <= 0 else cv.gdp_mu_budget(to_float_down(eps), to_float_down(dlt))
    b = budget_from_float(mu_b)
    return GDPConfig(eps, dlt, rel, DOWN.multiply(b, b))


def initial_state(config: GDPConfig) -> GDPState:
    return GDPState()


def unsupported(decl: Declaration) -> str | None:
    """Why ``decl`` is not a certified μ-GDP declaration (the 422 message), or ``None``."""
    if isinstance(decl, Composed):
        for item, _ in decl.items:
            why = unsupported(item)
            if why is not None:
                return why
        return None
    if isinstance(decl, GDP | Gaussian):
        return None
    return (
        f"mode 'gdp' accepts only certified μ-GDP declarations ('gdp', 'gaussian'), not "
        f"'{decl.kind}'; use mode 'zcdp' or 'rdp'"
    )


def gdp_charge(decl: Declaration) -> Decimal:
    """μ² charged in ``gdp`` mode (Smith–Thakurta 2022 filter: Σμ_i² ≤ μ_B²).

    Only certified μ-GDP kinds: ``gdp`` (μ) and ``gaussian`` (μ = Δ/σ, Dong–Roth–Su 2019
    Thm 2.7), and compositions of them (DRS19 Cor. 3.3: μ² adds). Subsampled Gaussians are
    rejected — the CLT approximations are not certified bounds (Tran et al. 2026).
    """
    if isinstance(decl, GDP):
        return mul_up(decl.mu, decl.mu)
    if isinstance(decl, Gaussian):
        r = decl.ratio
        return INFINITY if r.is_infinite() else mul_up(r, r)
    if isinstance(decl, Composed):
        return add_up(*(mul_up(Decimal(c), gdp_charge(d)) for d, c in decl.items))
    raise UnsupportedInMode(
        f"mode 'gdp' accepts only certified μ-GDP declarations ('gdp', 'gaussian'), not "
        f"'{decl.kind}'; use mode 'zcdp' or 'rdp'"
    )


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
    new_state = GDPState(new)
    return Decision("accepted", new_state, requested, requested, _gdp_remaining(config, new_state))


def admit(
    config: GDPConfig, state: GDPState, decl: Declaration, conversion_delta: Decimal | None
) -> Decision:
    return _admit_gdp(config, state, decl)


def change_budget(
    config: GDPConfig, state: GDPState, eps: Decimal, dlt: Decimal, final_conversion_delta: object
) -> GDPConfig:
    return make(eps, dlt, config.relation)


def over_budget(config: GDPConfig, state: GDPState) -> str | None:
    if state.mu_squared > config.mu_squared_budget:
        return f"spent mu^2 is {fmt(state.mu_squared)}"
    return None


def odometer(config: GDPConfig, state: GDPState) -> Reading:
    """The certified odometer reading: the ladder of GDP filters over μ²
    (:mod:`odometer_core.accounting.odometer`), levels μ_B²·r^−(k−1), δ shares of δ_B, each
    level μ_k = √c_k converted by Dong–Roth–Su 2019, Cor. 2.13; capped at the filter's target.
    Each level is a μ_k-GDP filter (Smith–Thakurta 2022). The reading's δ is δ_B, fixed in
    advance (the ladder spends at most δ_B)."""
    ladder = odo.ladder_epsilon(
        to_float_up(state.mu_squared),
        to_float_down(config.mu_squared_budget),
        to_float_down(config.delta),
        _gdp_level_epsilon,
    )
    return odo.capped(ladder, config.epsilon, config.delta, odo.THEOREM_GDP, odo.FILTER_GDP)


def _gdp_level_epsilon(mu_squared: float, delta: float) -> float:
    """ε of √(μ²)-GDP at δ (Dong–Roth–Su 2019, Cor. 2.13), the square root rounded up."""
    return cv.gdp_epsilon(math.nextafter(math.sqrt(mu_squared), math.inf), delta)


def status(config: GDPConfig, state: GDPState) -> dict[str, Any]:
    """Budget and spend in μ²; ``odometer`` is the certified reading at any stopping time;
    ``spent_eps_delta`` converts the running μ as if the history had been fixed in advance (an
    estimate, ``certified: false``)."""
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
    return {"mu_squared_budget": fmt(config.mu_squared_budget)}


def config_from_json(
    eps: Decimal, dlt: Decimal, rel: Relation, obj: Mapping[str, Any]
) -> GDPConfig:
    return GDPConfig(eps, dlt, rel, Decimal(obj["mu_squared_budget"]))


def state_to_json(state: GDPState) -> dict[str, Any]:
    return {"mu_squared": fmt(state.mu_squared)}


def state_from_json(obj: Mapping[str, Any]) -> GDPState:
    return GDPState(Decimal(obj["mu_squared"]))


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
