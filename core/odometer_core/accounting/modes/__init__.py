"""The accounting modes, one module each (see :mod:`odometer_core.accounting.modes.common` for what
a
mode provides). The leaf modes are registered here; ``split`` composes them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any, Final, TypeAlias

from odometer_core.accounting.declarations import Relation
from odometer_core.accounting.exact import fmt
from odometer_core.accounting.modes import basic, gdp, rdp, zcdp
from odometer_core.accounting.modes.basic import BasicConfig, BasicState
from odometer_core.accounting.modes.common import ConfigError, Mode, amount, check_budget
from odometer_core.accounting.modes.gdp import GDPConfig, GDPState
from odometer_core.accounting.modes.rdp import RDPConfig, RDPState
from odometer_core.accounting.modes.zcdp import ZCDPConfig, ZCDPState

#: Every leaf mode by name: adding a mode is its module plus one entry here.
LEAF_MODES: Final[dict[str, Mode]] = {
    m.name: m for m in (basic.MODE, zcdp.MODE, rdp.MODE, gdp.MODE)
}

LeafConfig: TypeAlias = BasicConfig | ZCDPConfig | RDPConfig | GDPConfig
LeafState: TypeAlias = BasicState | ZCDPState | RDPState | GDPState


#: The largest budget ε (:func:`~odometer_core.accounting.modes.common.check_budget`).
MAX_EPSILON: Final = Decimal(10) ** 6

#: Every mode's name, in the order error messages list them.
MODES: Final[tuple[str, ...]] = (*LEAF_MODES, "split")


def leaf_mode(config: LeafConfig) -> Mode:
    """The mode a leaf configuration belongs to."""
    return LEAF_MODES[config.mode]


def budget(epsilon: object, delta: object) -> tuple[Decimal, Decimal]:
    """A validated target (ε_B, δ_B): ε in (0, 10⁶], δ in [0, 1)."""
    eps = amount({"epsilon": epsilon}, "epsilon")
    dlt = amount({"delta": delta}, "delta")
    check_budget(eps, dlt)
    return eps, dlt


def make_leaf(eps: Decimal, dlt: Decimal, rel: Relation, acc: Mapping[str, Any]) -> LeafConfig:
    """The configuration of a leaf mode named by ``acc["mode"]`` (default ``basic``); a
    configuration that could never admit anything (:func:`unusable`) is a :class:`ConfigError`
    saying what to set."""
    config = _parse_leaf(eps, dlt, rel, acc)
    refuse_unusable(config)
    return config


def _parse_leaf(eps: Decimal, dlt: Decimal, rel: Relation, acc: Mapping[str, Any]) -> LeafConfig:
    mode = LEAF_MODES.get(str(acc.get("mode", "basic")))
    if mode is None:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}")
    config: LeafConfig = mode.parse(eps, dlt, rel, acc)
    return config


# ---------------------------------------------------------------------------- unusable settings
@dataclass(frozen=True, slots=True)
class Unusable:
    """Why a filter can never admit anything, and the budget that would (``budget``: the
    ``epsilon``, ``delta`` and, in ``zcdp``/``rdp``, ``final_conversion_delta`` of a budget
    change made before the first charge, which makes the filter anew)."""

    reason: str
    fix: str
    budget: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "fix": self.fix, "budget": dict(self.budget)}

    def text(self) -> str:
        return f"{self.reason}; {self.fix}"


#: The δ a fix suggests where a curve mode was given none.
SUGGESTED_DELTA: Final = Decimal("0.000001")


def unusable(config: LeafConfig) -> Unusable | None:
    """Why the filter ``config`` can never admit anything, or ``None``.

    A curve mode converts its running total to (ε, δ) with the conversion δ: in ``zcdp`` and
    ``rdp`` δ_c (``final_conversion_delta``, all of δ_B unless set), in ``gdp`` δ_B. With that δ
    at 0 the threshold derived from (ε_B, δ_c) is 0 (ρ_B = 0, μ_B² = 0, every order's B(α) ≤ 0),
    and so it is in ``rdp`` whenever ε_B is below −[log δ_α + log(α−1) − α·log(1−1/α)]/(α−1) at
    every order of the grid: no declaration with any privacy loss fits, ever (a budget change
    keeps the thresholds once something was charged, and nothing can be). ``basic`` always
    admits up to ε_B > 0 (δ_B = 0 is pure ε-DP)."""
    if isinstance(config, ZCDPConfig):
        dead, unit = config.rho_budget <= 0, "its ρ budget is 0"
        conversion = config.final_conversion_delta
    elif isinstance(config, GDPConfig):
        dead, unit = config.mu_squared_budget <= 0, "its μ² budget is 0"
        conversion = config.delta
    elif isinstance(config, RDPConfig):
        dead = not any(b > 0 for b in config.thresholds)
        unit = "every order's threshold B(α) is at most 0"
        conversion = config.final_conversion_delta
    else:
        return None
    if not dead:
        return None
    name = config.mode
    if config.delta <= 0:
        article = "an" if name == "rdp" else "a"
        reason = (
            f"{article} {name} budget converts to (ε, δ) and needs δ > 0: with δ = 0 {unit}, so it "
            "could never admit anything"
        )
    elif conversion <= 0:
        reason = (
            "final_conversion_delta = 0 leaves no δ to convert the running total to ε: "
            f"{unit}, so it could never admit anything"
        )
    else:
        reason = (
            f"at ε = {fmt(config.epsilon)} and conversion δ = {fmt(conversion)} {unit}, so it "
            "could never admit anything"
        )
    budget_ = _usable_budget(config)
    fix = _fix_words(config, budget_)
    return Unusable(reason, fix, budget_)


def _usable_budget(config: ZCDPConfig | GDPConfig | RDPConfig) -> dict[str, str]:
    """A budget close to ``config``'s that admits something: δ kept if positive (else
    :data:`SUGGESTED_DELTA`), all of it converting, and in ``rdp`` ε raised (to two significant
    digits) until some order of the grid has a positive threshold."""
    dlt = config.delta if config.delta > 0 else SUGGESTED_DELTA
    acc: dict[str, Any] = {"mode": config.mode}
    if isinstance(config, ZCDPConfig | RDPConfig):
        acc["final_conversion_delta"] = fmt(dlt)
    if isinstance(config, RDPConfig):
        acc["orders"] = list(config.orders)
        acc["weights"] = list(config.weights)

    def works(eps: Decimal) -> bool:
        return unusable_raw(_parse_leaf(eps, dlt, config.relation, acc)) is False

    eps = config.epsilon
    if not works(eps):
        hi = eps
        while not works(hi) and hi < MAX_EPSILON:
            hi = min(hi * 2, MAX_EPSILON)
        lo = eps
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if works(mid) else (mid, hi)
        eps = _two_digits_up(hi)
        while not works(eps) and eps < MAX_EPSILON:  # pragma: no cover - the rounding is up
            eps = _two_digits_up(eps * Decimal("1.01"))
    out = {"epsilon": fmt(eps), "delta": fmt(dlt)}
    if "final_conversion_delta" in acc:
        out["final_conversion_delta"] = fmt(dlt)
    return out


def unusable_raw(config: LeafConfig) -> bool:
    """Whether ``config``'s thresholds admit nothing (:func:`unusable` without the words)."""
    if isinstance(config, ZCDPConfig):
        return config.rho_budget <= 0
    if isinstance(config, GDPConfig):
        return config.mu_squared_budget <= 0
    if isinstance(config, RDPConfig):
        return not any(b > 0 for b in config.thresholds)
    return False


def _two_digits_up(x: Decimal) -> Decimal:
    q = Decimal(1).scaleb(x.adjusted() - 1)
    return x.quantize(q, rounding=ROUND_CEILING).normalize()


def _fix_words(config: ZCDPConfig | GDPConfig | RDPConfig, budget_: Mapping[str, str]) -> str:
    change = ", ".join(f"{k} = {v}" for k, v in budget_.items())
    words = f"set a budget that converts, e.g. {change}"
    if isinstance(config, RDPConfig) and config.delta > 0 and config.final_conversion_delta > 0:
        words += " (or add larger orders to the grid, or use mode 'zcdp')"
    if config.delta <= 0:
        words += ", or use mode 'basic' for pure ε"
    return words


class UnusableBudget(ConfigError):
    """A budget that could never admit anything (→ HTTP 422), with the :class:`Unusable` that
    says why and what would work."""

    def __init__(self, message: str, problem: Unusable) -> None:
        super().__init__(message)
        self.problem = problem


def refuse_unusable(config: LeafConfig, where: str = "") -> None:
    """:class:`UnusableBudget` when ``config`` could never admit anything (:func:`unusable`);
    ``where`` names a sub-budget."""
    problem = unusable(config)
    if problem is not None:
        prefix = f"sub-budget '{where}': " if where else ""
        raise UnusableBudget(prefix + problem.text(), problem)


def leaf_status(config: LeafConfig, state: LeafState) -> dict[str, Any]:
    """A leaf filter's status: mode, budget, then the mode's own figures; ``unusable`` (why
    and the budget that would work) only for a filter stored before such budgets were refused
    that can never admit anything."""
    out = {
        "mode": config.mode,
        "budget": {"epsilon": fmt(config.epsilon), "delta": fmt(config.delta)},
        **leaf_mode(config).status(config, state),
    }
    problem = unusable(config)
    if problem is not None:
        out["unusable"] = problem.to_json()
    return out


def leaf_config_to_json(config: LeafConfig) -> dict[str, Any]:
    """Lossless JSON of a leaf configuration (floats as ``repr`` text, amounts as decimals)."""
    return {
        "mode": config.mode,
        "epsilon": fmt(config.epsilon),
        "delta": fmt(config.delta),
        "relation": config.relation,
        **leaf_mode(config).config_to_json(config),
    }


def leaf_config_from_json(obj: Mapping[str, Any]) -> LeafConfig:
    """Inverse of :func:`leaf_config_to_json` (derived values read back, not recomputed)."""
    eps, dlt, rel = Decimal(obj["epsilon"]), Decimal(obj["delta"]), obj["relation"]
    config: LeafConfig = LEAF_MODES[obj["mode"]].config_from_json(eps, dlt, rel, obj)
    return config


def leaf_state_to_json(state: LeafState) -> dict[str, Any]:
    """Lossless JSON of a leaf filter state."""
    for mode in LEAF_MODES.values():
        if isinstance(state, mode.state_type):
            out: dict[str, Any] = mode.state_to_json(state)
            return out
    raise TypeError(f"not a leaf filter state: {state!r}")


__all__ = [
    "LEAF_MODES",
    "MODES",
    "LeafConfig",
    "LeafState",
    "Unusable",
    "UnusableBudget",
    "budget",
    "leaf_config_from_json",
    "leaf_config_to_json",
    "leaf_mode",
    "leaf_state_to_json",
    "leaf_status",
    "make_leaf",
    "refuse_unusable",
    "unusable",
]
