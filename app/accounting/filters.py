"""Privacy filters, one per accounting mode (ACCOUNTING.md §3).

The single entry point is :func:`admit` — a **pure** function of (configuration, state,
declaration) returning a :class:`Decision` with the new state; :func:`settle` and
:func:`cancel` finish ODP reservations in ``basic`` mode; :func:`change_budget` moves a
dataset's target. States are O(1) (O(|Λ|) in ``rdp``), updated incrementally, and serialise
losslessly (:meth:`to_json` / :func:`state_from_json`), so a ledger can be replayed to the
exact same state.

Guarantees (each filter halts *before* an invocation whose predictable cost would cross the
budget, so it is valid under full adaptivity):

- ``basic``: Rogers–Roth–Ullman–Vadhan 2016 basic filter, with ODP a-posteriori charges by
  Hartmann et al. 2022 Theorem 7 (Algorithm 1 of seed 002; Lean-verified) → (ε_B, δ_B)-DP.
- ``zcdp``: approximate-zCDP filter (Whitehouse–Ramdas–Rogers–Wu 2023 Thm 1; Feldman–Zrnic
  2021 Rem. 4.4), converted by Canonne–Kamath–Steinke 2020 Cor. 13 → (ε_B, δ_A + δ_c)-DP.
- ``rdp``: approximate-RDP filter over a grid Λ with δ_c split by weights w_α (Feldman–Zrnic
  2021 Thm 4.3 per order, union bound over Λ; theory.md §2.3) → (ε_B, δ_A + δ_c)-DP.
- ``gdp``: Smith–Thakurta 2022 GDP filter, μ_B from Dong–Roth–Su 2019 Cor. 2.13 → μ_B-GDP.
- ``split``: fixed sub-ledgers; concurrent basic composition (Vadhan–Zhang 2023 Thm 1.3;
  Haney et al. 2023) → (Σε_k, Σδ_k)-DP.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Final, Literal, TypeAlias

import numpy as np

from app.accounting import charges as ch
from app.accounting import conversions as cv
from app.accounting.declarations import (
    RELATIONS,
    Declaration,
    DeclarationError,
    OdpCapable,
    OdpPartition,
    Relation,
)
from app.accounting.exact import (
    DOWN,
    INFINITY,
    ONE,
    ZERO,
    AmountError,
    add_up,
    budget_from_float,
    cost_from_float,
    fmt,
    parse_amount,
    sub_down,
    sub_up,
    to_float_down,
)

Mode = Literal["basic", "zcdp", "rdp", "gdp", "split"]
MODES: Final[tuple[str, ...]] = ("basic", "zcdp", "rdp", "gdp", "split")

#: Default order grid of ``rdp`` mode: 16 orders covering the optima of Gaussian and DP-SGD
#: workloads at ε between ~0.5 and ~20 (the optimal α of dp_accounting's conversions for the
#: reference vectors lie between 1.5 and 64).
DEFAULT_RDP_ORDERS: Final[tuple[float, ...]] = (
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    4.0,
    5.0,
    6.0,
    8.0,
    10.0,
    12.0,
    16.0,
    20.0,
    32.0,
    48.0,
    64.0,
)
MAX_RDP_ORDERS: Final = 64
#: Relative margin by which derived RDP thresholds are rounded down (see _rdp_thresholds).
THRESHOLD_MARGIN: Final = 1e-12
MAX_LEDGERS: Final = 32


class ConfigError(ValueError):
    """Invalid dataset / accounting configuration (→ HTTP 422)."""


#: Every code an :class:`InvalidTransition` carries, with whether it is a conflict with the
#: current state (True → HTTP 409) or a malformed request (False → HTTP 422).
TRANSITION_CODES: Final[dict[str, bool]] = {
    "UnknownCell": False,
    "NotSettleable": True,
    "NoOpenReservation": True,
    "BudgetBelowSpent": True,
    "BudgetAboveTotal": True,
}


class InvalidTransition(ValueError):
    """A settle / cancel / budget change that is not allowed in this state (→ HTTP 409/422)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


# ============================================================================ configurations
@dataclass(frozen=True, slots=True)
class BasicConfig:
    """``basic``: target (ε_B, δ_B); ``conversion_delta`` is the default δ at which curve-based
    declarations (zCDP, RDP, GDP, Gaussian, DP-SGD without its own δ) are converted to (ε, δ)."""

    epsilon: Decimal
    delta: Decimal
    relation: Relation
    conversion_delta: Decimal
    mode: Literal["basic"] = "basic"


@dataclass(frozen=True, slots=True)
class ZCDPConfig:
    """``zcdp``: δ_B = δ_A + δ_c; ρ_B = max{ρ : CKS δ(ρ, ε_B) ≤ δ_c}, rounded down."""

    epsilon: Decimal
    delta: Decimal
    relation: Relation
    delta_conversion: Decimal
    delta_approx: Decimal
    rho_budget: Decimal
    mode: Literal["zcdp"] = "zcdp"


@dataclass(frozen=True, slots=True)
class RDPConfig:
    """``rdp``: grid Λ, weights w_α, δ_B = δ_A + δ_c and per-order thresholds
    B(α) = ε_B + [log(w_α δ_c) + log(α−1) − α log(1−1/α)]/(α−1) (rounded down; −∞ = dropped)."""

    epsilon: Decimal
    delta: Decimal
    relation: Relation
    delta_conversion: Decimal
    delta_approx: Decimal
    orders: tuple[float, ...]
    weights: tuple[float, ...]
    thresholds: tuple[float, ...]
    mode: Literal["rdp"] = "rdp"

    @property
    def orders_array(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        return np.asarray(self.orders, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class GDPConfig:
    """``gdp``: μ_B solves δ_GDP(ε_B; μ_B) = δ_B (rounded down); the budget is μ_B²."""

    epsilon: Decimal
    delta: Decimal
    relation: Relation
    mu_squared_budget: Decimal
    mode: Literal["gdp"] = "gdp"


LeafConfig: TypeAlias = BasicConfig | ZCDPConfig | RDPConfig | GDPConfig


@dataclass(frozen=True, slots=True)
class SplitConfig:
    """``split``: named sub-ledgers with Σε_k ≤ ε_B and Σδ_k ≤ δ_B."""

    epsilon: Decimal
    delta: Decimal
    relation: Relation
    ledgers: tuple[tuple[str, LeafConfig], ...]
    mode: Literal["split"] = "split"

    def ledger(self, name: str | None) -> LeafConfig:
        for n, cfg in self.ledgers:
            if n == name:
                return cfg
        names = ", ".join(n for n, _ in self.ledgers)
        raise DeclarationError(
            f"split datasets need 'ledger' naming one of: {names}", field="ledger"
        )


AccountingConfig: TypeAlias = LeafConfig | SplitConfig


# ============================================================================ states
@dataclass(frozen=True, slots=True)
class BasicState:
    """E (realised ε), reserved ε (open reservations at worst case), D (δ, charged in full)."""

    spent_epsilon: Decimal = ZERO
    reserved_epsilon: Decimal = ZERO
    spent_delta: Decimal = ZERO
    open_reservations: int = 0


@dataclass(frozen=True, slots=True)
class ZCDPState:
    """Σρ and Σδ of admitted invocations."""

    rho: Decimal = ZERO
    delta: Decimal = ZERO


@dataclass(frozen=True, slots=True)
class RDPState:
    """S(α) per order (float64, rounded up on every sum), dead orders, Σδ."""

    rdp: tuple[float, ...]
    dead: tuple[bool, ...]
    delta: Decimal = ZERO


@dataclass(frozen=True, slots=True)
class GDPState:
    """Σμ_i² of admitted invocations."""

    mu_squared: Decimal = ZERO


LeafState: TypeAlias = BasicState | ZCDPState | RDPState | GDPState


@dataclass(frozen=True, slots=True)
class SplitState:
    ledgers: tuple[tuple[str, LeafState], ...]

    def get(self, name: str) -> LeafState:
        for n, st in self.ledgers:
            if n == name:
                return st
        raise KeyError(name)

    def put(self, name: str, state: LeafState) -> SplitState:
        return SplitState(tuple((n, state if n == name else s) for n, s in self.ledgers))


FilterState: TypeAlias = LeafState | SplitState


@dataclass(frozen=True, slots=True)
class Reservation:
    """An open ODP reservation (``basic`` mode): the partition and the sub-ledger it lives in."""

    partition: OdpPartition
    ledger: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "ledger": self.ledger,
            "cells": [{"name": n, "epsilon": fmt(e)} for n, e in self.partition.cells],
            "delta": fmt(self.partition.delta),
        }

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> Reservation:
        cells = tuple((c["name"], Decimal(c["epsilon"])) for c in obj["cells"])
        return Reservation(OdpPartition(cells, Decimal(obj["delta"])), obj.get("ledger"))


Outcome = Literal["accepted", "reserved", "rejected"]


@dataclass(frozen=True, slots=True)
class Decision:
    """The result of :func:`admit`, :func:`settle` or :func:`cancel`.

    ``charge`` is what this step adds to the ledger in the mode's units (zero on rejection);
    ``requested`` what the invocation asked for; ``remaining`` the budget left afterwards (for a
    rejection: what was left, unchanged); ``refund`` what a settle or cancel gave back.
    """

    outcome: Outcome
    state: FilterState
    charge: dict[str, Any]
    requested: dict[str, Any]
    remaining: dict[str, Any]
    reason: str | None = None
    reservation: Reservation | None = None
    refund: dict[str, Any] | None = None
    ledger: str | None = None

    @property
    def admitted(self) -> bool:
        return self.outcome != "rejected"


# ============================================================================ config parsing
def _amount(obj: Mapping[str, Any], name: str, *, default: Decimal | None = None) -> Decimal:
    if name not in obj or obj[name] is None:
        if default is None:
            raise ConfigError(f"missing '{name}'")
        return default
    try:
        d = parse_amount(obj[name], name)
    except AmountError as exc:
        raise ConfigError(str(exc)) from None
    if d < 0:
        raise ConfigError(f"{name} must be ≥ 0")
    return d


def _check_budget(epsilon: Decimal, delta: Decimal) -> None:
    if epsilon <= 0:
        raise ConfigError("budget epsilon must be > 0")
    if epsilon > Decimal(10) ** 6:
        raise ConfigError("budget epsilon must be ≤ 1000000")
    if delta >= 1:
        raise ConfigError("budget delta must be < 1")


def _rdp_thresholds(
    epsilon: Decimal, delta_c: Decimal, orders: tuple[float, ...], weights: tuple[float, ...]
) -> tuple[float, ...]:
    """B(α) = ε_B + [log(w_α δ_c) + log(α−1) − α·log(1−1/α)]/(α−1), rounded down; orders whose
    B(α) ≤ 0 are dropped (−∞). Inverting CKS20 Prop. 12 at per-order δ w_α·δ_c (theory.md §2.3)."""
    eb = to_float_down(epsilon)
    dc = to_float_down(delta_c)
    out: list[float] = []
    for a, w in zip(orders, weights, strict=True):
        if dc <= 0 or w <= 0:
            out.append(-math.inf)
            continue
        b = eb + (math.log(w) + math.log(dc) + math.log(a - 1) - a * math.log1p(-1 / a)) / (a - 1)
        # Round down with a relative margin far above the float error of the logs above
        # (~1e-15), so that the CKS conversion of B(α) gives δ ≤ w_α·δ_c exactly as computed.
        b = math.nextafter(b - THRESHOLD_MARGIN * (1.0 + abs(b)), -math.inf)
        out.append(b if b > 0 else -math.inf)
    return tuple(out)


def make_config(
    epsilon: object, delta: object, relation: object, accounting: Mapping[str, Any] | None
) -> AccountingConfig:
    """Build and validate a dataset's accounting configuration (ACCOUNTING.md §1, §3)."""
    eps = _amount({"epsilon": epsilon}, "epsilon")
    dlt = _amount({"delta": delta}, "delta")
    _check_budget(eps, dlt)
    if relation not in RELATIONS:
        raise ConfigError("relation must be 'add_remove' or 'replace_one'")
    rel: Relation = "add_remove" if relation == "add_remove" else "replace_one"
    acc = dict(accounting or {"mode": "basic"})
    mode = acc.get("mode", "basic")
    if mode == "split":
        _only(acc, ("mode", "ledgers"))
        raw = acc.get("ledgers")
        if not isinstance(raw, list) or not raw:
            raise ConfigError("split mode needs a non-empty 'ledgers' list")
        if len(raw) > MAX_LEDGERS:
            raise ConfigError(f"at most {MAX_LEDGERS} ledgers")
        ledgers: list[tuple[str, LeafConfig]] = []
        for item in raw:
            if not isinstance(item, Mapping):
                raise ConfigError("each ledger must be an object {name, budget, accounting}")
            _only(item, ("name", "budget", "accounting"))
            name = item.get("name")
            if not isinstance(name, str) or not 1 <= len(name) <= 64 or not name.isprintable():
                raise ConfigError("ledger names must be 1–64 printable characters")
            if any(n == name for n, _ in ledgers):
                raise ConfigError(f"duplicate ledger name '{name}'")
            budget = item.get("budget")
            if not isinstance(budget, Mapping):
                raise ConfigError(f"ledger '{name}' needs a budget {{epsilon, delta}}")
            sub_acc = item.get("accounting") or {"mode": "basic"}
            if not isinstance(sub_acc, Mapping) or sub_acc.get("mode") == "split":
                raise ConfigError("sub-ledgers may use modes basic, zcdp, rdp or gdp")
            sub = make_config(budget.get("epsilon"), budget.get("delta", 0), rel, sub_acc)
            assert not isinstance(sub, SplitConfig)
            ledgers.append((name, sub))
        total_eps = add_up(*(c.epsilon for _, c in ledgers))
        total_delta = add_up(*(c.delta for _, c in ledgers))
        if total_eps > eps or total_delta > dlt:
            raise ConfigError(
                f"sub-ledger budgets sum to ({fmt(total_eps)}, {fmt(total_delta)}), more than "
                f"the dataset budget ({fmt(eps)}, {fmt(dlt)})"
            )
        return SplitConfig(eps, dlt, rel, tuple(ledgers))
    if mode == "basic":
        _only(acc, ("mode", "conversion_delta"))
        default_conv = DOWN.divide(dlt, Decimal(10)) if dlt > 0 else ZERO
        conv = _amount(acc, "conversion_delta", default=default_conv)
        if conv > dlt:
            raise ConfigError("conversion_delta must be ≤ the budget delta")
        return BasicConfig(eps, dlt, rel, conv)
    if mode == "zcdp":
        _only(acc, ("mode", "delta_conversion"))
        dc = _amount(acc, "delta_conversion", default=dlt)
        if dc > dlt:
            raise ConfigError("delta_conversion must be ≤ the budget delta")
        return _zcdp_config(eps, dlt, rel, dc)
    if mode == "rdp":
        _only(acc, ("mode", "delta_conversion", "orders", "weights"))
        dc = _amount(acc, "delta_conversion", default=dlt)
        if dc > dlt:
            raise ConfigError("delta_conversion must be ≤ the budget delta")
        orders = _orders(acc.get("orders"))
        weights = _weights(acc.get("weights"), len(orders))
        return _rdp_config(eps, dlt, rel, dc, orders, weights)
    if mode == "gdp":
        _only(acc, ("mode",))
        return _gdp_config(eps, dlt, rel)
    raise ConfigError(f"mode must be one of {', '.join(MODES)}")


def _only(obj: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise ConfigError(f"unknown field(s): {', '.join(unknown)}")


def _orders(raw: object) -> tuple[float, ...]:
    if raw is None:
        return DEFAULT_RDP_ORDERS
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_RDP_ORDERS:
        raise ConfigError(f"orders must be a list of 1–{MAX_RDP_ORDERS} numbers")
    out: list[float] = []
    for a in raw:
        d = _amount({"order": a}, "order")
        if d <= 1 or d > 10**6:
            raise ConfigError("RDP orders must be in (1, 1e6]")
        out.append(float(d))
    if sorted(set(out)) != out:
        raise ConfigError("orders must be strictly increasing")
    return tuple(out)


def _weights(raw: object, n: int) -> tuple[float, ...]:
    if raw is None:
        return tuple([1.0 / n] * n)
    if not isinstance(raw, list) or len(raw) != n:
        raise ConfigError("weights must have one entry per order")
    ws = [_amount({"weight": w}, "weight") for w in raw]
    if add_up(*ws) > ONE:
        raise ConfigError("weights must sum to ≤ 1 (union bound over the orders)")
    return tuple(to_float_down(w) for w in ws)


def _zcdp_config(eps: Decimal, dlt: Decimal, rel: Relation, dc: Decimal) -> ZCDPConfig:
    rho_b = (
        budget_from_float(cv.zcdp_rho_budget(to_float_down(eps), to_float_down(dc)))
        if dc > 0
        else ZERO
    )
    return ZCDPConfig(eps, dlt, rel, dc, sub_down(dlt, dc), rho_b)


def _rdp_config(
    eps: Decimal,
    dlt: Decimal,
    rel: Relation,
    dc: Decimal,
    orders: tuple[float, ...],
    weights: tuple[float, ...],
) -> RDPConfig:
    return RDPConfig(
        eps,
        dlt,
        rel,
        dc,
        sub_down(dlt, dc),
        orders,
        weights,
        _rdp_thresholds(eps, dc, orders, weights),
    )


def _gdp_config(eps: Decimal, dlt: Decimal, rel: Relation) -> GDPConfig:
    mu_b = 0.0 if dlt <= 0 else cv.gdp_mu_budget(to_float_down(eps), to_float_down(dlt))
    b = budget_from_float(mu_b)
    return GDPConfig(eps, dlt, rel, DOWN.multiply(b, b))


# ============================================================================ initial state
def initial_state(config: AccountingConfig) -> FilterState:
    """The state of a dataset on which nothing has been spent."""
    if isinstance(config, BasicConfig):
        return BasicState()
    if isinstance(config, ZCDPConfig):
        return ZCDPState()
    if isinstance(config, RDPConfig):
        dead = tuple(b == -math.inf for b in config.thresholds)
        return RDPState(tuple([0.0] * len(config.orders)), dead)
    if isinstance(config, GDPConfig):
        return GDPState()
    return SplitState(tuple((n, _leaf(initial_state(c))) for n, c in config.ledgers))


def _leaf(state: FilterState) -> LeafState:
    """Narrow a state of a leaf mode (sub-ledgers are never split themselves)."""
    assert not isinstance(state, SplitState)
    return state


# ============================================================================ admission
def admit(
    config: AccountingConfig,
    state: FilterState,
    declaration: Declaration,
    *,
    ledger: str | None = None,
    conversion_delta: Decimal | None = None,
) -> Decision:
    """Decide one invocation: accept (charged), reserve (ODP in ``basic``) or reject.

    Pure: the same (config, state, declaration) always gives the same decision, and a
    rejection returns the input state unchanged. Raises :class:`DeclarationError` (including
    :class:`~app.accounting.charges.UnsupportedInMode`) for declarations the dataset cannot
    account at all — those are invalid requests, not budget decisions.
    """
    ch.check_relation(declaration, config.relation)
    if isinstance(config, SplitConfig):
        sub = config.ledger(ledger)
        assert isinstance(state, SplitState)
        assert ledger is not None
        d = _admit_leaf(sub, state.get(ledger), declaration, conversion_delta)
        return replace(
            d,
            state=state.put(ledger, _leaf(d.state)) if d.admitted else state,
            ledger=ledger,
            reservation=replace(d.reservation, ledger=ledger) if d.reservation else None,
        )
    if ledger is not None:
        raise DeclarationError("'ledger' is only allowed on split datasets", field="ledger")
    return _admit_leaf(config, state, declaration, conversion_delta)


def _admit_leaf(
    config: LeafConfig,
    state: FilterState,
    decl: Declaration,
    conversion_delta: Decimal | None,
) -> Decision:
    if isinstance(config, BasicConfig):
        assert isinstance(state, BasicState)
        return _admit_basic(config, state, decl, conversion_delta)
    if isinstance(config, ZCDPConfig):
        assert isinstance(state, ZCDPState)
        return _admit_zcdp(config, state, decl)
    if isinstance(config, RDPConfig):
        assert isinstance(state, RDPState)
        return _admit_rdp(config, state, decl)
    assert isinstance(state, GDPState)
    return _admit_gdp(config, state, decl)


def _reject(
    state: FilterState,
    requested: dict[str, Any],
    remaining: dict[str, Any],
    why: str,
    zero: dict[str, Any],
) -> Decision:
    return Decision("rejected", state, zero, requested, remaining, reason=why)


# ---------------------------------------------------------------------------- basic
def _basic_remaining(config: BasicConfig, state: BasicState) -> dict[str, Any]:
    return {
        "epsilon": fmt(
            sub_down(sub_down(config.epsilon, state.spent_epsilon), state.reserved_epsilon)
        ),
        "delta": fmt(sub_down(config.delta, state.spent_delta)),
    }


def _admit_basic(
    config: BasicConfig, state: BasicState, decl: Declaration, conversion_delta: Decimal | None
) -> Decision:
    """Algorithm 1 of seed 002 (lines 9–10): admit iff E + reserved + max_k ε_k ≤ ε_B and
    D + δ_i ≤ δ_B; an ODP declaration is reserved at its worst cell, δ charged in full."""
    conv = config.conversion_delta if conversion_delta is None else conversion_delta
    if conv > config.delta:
        raise DeclarationError("conversion_delta exceeds the dataset's delta budget")
    cost = ch.eps_delta(decl, conv)
    requested = {"epsilon": fmt(cost.epsilon), "delta": fmt(cost.delta)}
    zero = {"epsilon": "0", "delta": "0"}
    new_e = add_up(state.spent_epsilon, state.reserved_epsilon, cost.epsilon)
    new_d = add_up(state.spent_delta, cost.delta)
    if new_e > config.epsilon or new_d > config.delta:
        which = "epsilon" if new_e > config.epsilon else "delta"
        return _reject(
            state, requested, _basic_remaining(config, state), f"{which} budget exceeded", zero
        )
    if cost.partition is not None and len(cost.partition.cells) > 1:
        new_state = replace(
            state,
            reserved_epsilon=add_up(state.reserved_epsilon, cost.epsilon),
            spent_delta=new_d,
            open_reservations=state.open_reservations + 1,
        )
        return Decision(
            "reserved",
            new_state,
            requested,
            requested,
            _basic_remaining(config, new_state),
            reservation=Reservation(cost.partition),
        )
    new_state = replace(
        state, spent_epsilon=add_up(state.spent_epsilon, cost.epsilon), spent_delta=new_d
    )
    return Decision(
        "accepted", new_state, requested, requested, _basic_remaining(config, new_state)
    )


# ---------------------------------------------------------------------------- zcdp
def _zcdp_remaining(config: ZCDPConfig, state: ZCDPState) -> dict[str, Any]:
    return {
        "rho": fmt(sub_down(config.rho_budget, state.rho)),
        "delta": fmt(sub_down(config.delta_approx, state.delta)),
    }


def _admit_zcdp(config: ZCDPConfig, state: ZCDPState, decl: Declaration) -> Decision:
    """Admit iff Σρ + ρ_i ≤ ρ_B and Σδ + δ_i ≤ δ_A (WRRW23 approximate-zCDP filter)."""
    rho, delta = ch.zcdp_charge(decl)
    requested = {"rho": fmt(rho), "delta": fmt(delta)}
    new_rho = add_up(state.rho, rho)
    new_delta = add_up(state.delta, delta)
    if new_rho > config.rho_budget or new_delta > config.delta_approx:
        which = "rho" if new_rho > config.rho_budget else "delta"
        return _reject(
            state,
            requested,
            _zcdp_remaining(config, state),
            f"{which} budget exceeded",
            {"rho": "0", "delta": "0"},
        )
    new_state = ZCDPState(new_rho, new_delta)
    return Decision("accepted", new_state, requested, requested, _zcdp_remaining(config, new_state))


# ---------------------------------------------------------------------------- rdp
@functools.lru_cache(maxsize=256)
def _grid(orders: tuple[float, ...], thresholds: tuple[float, ...]) -> _Grid:
    """Arrays and text of a configuration's grid, built once per configuration (hot path)."""
    return _Grid(
        np.asarray(orders, dtype=np.float64),
        np.asarray(thresholds, dtype=np.float64),
        [repr(a) for a in orders],
    )


@dataclass(frozen=True, slots=True)
class _Grid:
    orders: np.ndarray[Any, np.dtype[np.float64]]
    thresholds: np.ndarray[Any, np.dtype[np.float64]]
    order_text: list[str]


def _floats_text(values: np.ndarray[Any, np.dtype[np.float64]]) -> list[str]:
    return [repr(v) for v in values.tolist()]


def _rdp_remaining(
    config: RDPConfig,
    grid: _Grid,
    rdp: np.ndarray[Any, np.dtype[np.float64]],
    dead: np.ndarray[Any, np.dtype[np.bool_]],
    delta: Decimal,
) -> dict[str, Any]:
    with np.errstate(invalid="ignore"):
        rem = np.where(dead, 0.0, np.maximum(grid.thresholds - rdp, 0.0))
    rem = np.where(rem > 0, np.nextafter(rem, -np.inf), 0.0)  # remaining rounds down
    return {
        "orders": grid.order_text,
        "rdp": _floats_text(rem),
        "delta": fmt(sub_down(config.delta_approx, delta)),
    }


def _admit_rdp(config: RDPConfig, state: RDPState, decl: Declaration) -> Decision:
    """Admit iff Σδ + δ_i ≤ δ_A and some live α has S(α) + ε_i(α) ≤ B(α); then add to every
    S(α) (rounded up) and kill orders that crossed B(α) (theory.md §2.3; FZ21 for |Λ| = 1)."""
    grid = _grid(config.orders, config.thresholds)
    curve, delta = ch.rdp_curve(decl, config.relation, grid.orders)
    requested = {"orders": grid.order_text, "rdp": _floats_text(curve), "delta": fmt(delta)}
    new_delta = add_up(state.delta, delta)
    old = np.asarray(state.rdp, dtype=np.float64)
    dead = np.asarray(state.dead, dtype=np.bool_)
    with np.errstate(over="ignore"):
        s = np.nextafter(old + curve, np.inf)
    fits = (~dead) & (s <= grid.thresholds)
    if new_delta > config.delta_approx or not fits.any():
        why = (
            "delta budget exceeded"
            if new_delta > config.delta_approx
            else "RDP budget exceeded at every live order"
        )
        zero = {"orders": grid.order_text, "rdp": ["0.0"] * len(config.orders), "delta": "0"}
        remaining = _rdp_remaining(config, grid, old, dead, state.delta)
        return _reject(state, requested, remaining, why, zero)
    new_dead = dead | (s > grid.thresholds)
    new_state = RDPState(tuple(s.tolist()), tuple(new_dead.tolist()), new_delta)
    remaining = _rdp_remaining(config, grid, s, new_dead, new_delta)
    return Decision("accepted", new_state, requested, requested, remaining)


# ---------------------------------------------------------------------------- gdp
def _gdp_remaining(config: GDPConfig, state: GDPState) -> dict[str, Any]:
    return {"mu_squared": fmt(sub_down(config.mu_squared_budget, state.mu_squared))}


def _admit_gdp(config: GDPConfig, state: GDPState, decl: Declaration) -> Decision:
    """Admit iff Σμ_i² + μ_i² ≤ μ_B² (Smith–Thakurta 2022)."""
    m2 = ch.gdp_charge(decl)
    requested = {"mu_squared": fmt(m2)}
    new = add_up(state.mu_squared, m2)
    if new > config.mu_squared_budget:
        return _reject(
            state,
            requested,
            _gdp_remaining(config, state),
            "mu budget exceeded",
            {"mu_squared": "0"},
        )
    new_state = GDPState(new)
    return Decision("accepted", new_state, requested, requested, _gdp_remaining(config, new_state))


# ============================================================================ settle / cancel
def _basic_of(
    config: AccountingConfig, state: FilterState, reservation: Reservation
) -> tuple[BasicConfig, BasicState]:
    sub: AccountingConfig
    st: FilterState
    if isinstance(config, SplitConfig):
        assert isinstance(state, SplitState) and reservation.ledger is not None
        sub, st = config.ledger(reservation.ledger), state.get(reservation.ledger)
    else:
        sub, st = config, state
    if not isinstance(sub, BasicConfig) or not isinstance(st, BasicState):
        raise InvalidTransition(
            "NotSettleable", "a-posteriori settlement exists only in mode 'basic'"
        )
    if st.open_reservations < 1:  # pragma: no cover - guarded by the service
        raise InvalidTransition("NoOpenReservation", "no open reservation on this ledger")
    return sub, st


def _wrap(
    config: AccountingConfig, state: FilterState, ledger: str | None, new_leaf: BasicState
) -> FilterState:
    if isinstance(config, SplitConfig):
        assert isinstance(state, SplitState) and ledger is not None
        return state.put(ledger, new_leaf)
    return new_leaf


def settle(
    config: AccountingConfig, state: FilterState, reservation: Reservation, cell: str
) -> Decision:
    """Charge the realised cell's ε_k and refund max_j ε_j − ε_k (seed 002, Algorithm 1
    line 14; Hartmann et al. 2022 Thm 7). δ was charged in full at reservation and is **never**
    refunded (seed 002 §3.2). A cell that was not declared raises :class:`InvalidTransition`."""
    sub, st = _basic_of(config, state, reservation)
    eps_cell = reservation.partition.epsilon_of(cell)
    if eps_cell is None:
        names = ", ".join(n for n, _ in reservation.partition.cells[:20])
        raise InvalidTransition("UnknownCell", f"cell '{cell}' was not declared (cells: {names})")
    worst = reservation.partition.worst_epsilon
    new_leaf = replace(
        st,
        spent_epsilon=add_up(st.spent_epsilon, eps_cell),
        reserved_epsilon=sub_up(st.reserved_epsilon, worst),
        open_reservations=st.open_reservations - 1,
    )
    refund = sub_down(worst, eps_cell)
    return Decision(
        "accepted",
        _wrap(config, state, reservation.ledger, new_leaf),
        {"epsilon": fmt(eps_cell), "delta": "0"},
        {"epsilon": fmt(worst), "delta": fmt(reservation.partition.delta)},
        _basic_remaining(sub, new_leaf),
        refund={"epsilon": fmt(refund), "delta": "0"},
        ledger=reservation.ledger,
    )


def cancel(config: AccountingConfig, state: FilterState, reservation: Reservation) -> Decision:
    """Release a reservation whose mechanism never ran: nothing was released, so the worst-case
    ε and the δ are both returned (theory.md §5.5: no output left the trusted boundary)."""
    sub, st = _basic_of(config, state, reservation)
    worst = reservation.partition.worst_epsilon
    new_leaf = replace(
        st,
        reserved_epsilon=sub_up(st.reserved_epsilon, worst),
        spent_delta=sub_up(st.spent_delta, reservation.partition.delta),
        open_reservations=st.open_reservations - 1,
    )
    return Decision(
        "accepted",
        _wrap(config, state, reservation.ledger, new_leaf),
        {"epsilon": "0", "delta": "0"},
        {"epsilon": fmt(worst), "delta": fmt(reservation.partition.delta)},
        _basic_remaining(sub, new_leaf),
        refund={"epsilon": fmt(worst), "delta": fmt(reservation.partition.delta)},
        ledger=reservation.ledger,
    )


# ============================================================================ budget changes
def change_budget(
    config: AccountingConfig,
    state: FilterState,
    epsilon: object,
    delta: object,
    *,
    ledger: str | None = None,
    delta_conversion: object = None,
) -> tuple[AccountingConfig, FilterState]:
    """A curator raises or lowers a budget; never below what is spent or reserved
    (ACCOUNTING.md §1). For ``zcdp``/``rdp`` the conversion share δ_c is kept unless given
    (and follows δ_B when all of δ_B went to conversion). On a split dataset, ``ledger`` names
    the sub-ledger to change; without it the dataset total changes (≥ Σ sub-ledgers).

    Returns the new configuration and the state with ``rdp`` orders that the new thresholds
    put over budget marked dead."""
    new = _change_budget(config, state, epsilon, delta, ledger, delta_conversion)
    return new, recheck_dead(new, state)


def _change_budget(
    config: AccountingConfig,
    state: FilterState,
    epsilon: object,
    delta: object,
    ledger: str | None,
    delta_conversion: object,
) -> AccountingConfig:
    eps = _amount({"epsilon": epsilon}, "epsilon")
    dlt = _amount({"delta": delta}, "delta")
    _check_budget(eps, dlt)
    if isinstance(config, SplitConfig):
        assert isinstance(state, SplitState)
        if ledger is None:
            tot_e = add_up(*(c.epsilon for _, c in config.ledgers))
            tot_d = add_up(*(c.delta for _, c in config.ledgers))
            if eps < tot_e or dlt < tot_d:
                raise InvalidTransition(
                    "BudgetBelowSpent",
                    f"the sub-ledgers already hold ({fmt(tot_e)}, {fmt(tot_d)})",
                )
            return replace(config, epsilon=eps, delta=dlt)
        sub = config.ledger(ledger)
        new_sub = _change_leaf(sub, state.get(ledger), eps, dlt, delta_conversion)
        ledgers = tuple((n, new_sub if n == ledger else c) for n, c in config.ledgers)
        tot_e = add_up(*(c.epsilon for _, c in ledgers))
        tot_d = add_up(*(c.delta for _, c in ledgers))
        if tot_e > config.epsilon or tot_d > config.delta:
            raise InvalidTransition(
                "BudgetAboveTotal", "sub-ledger budgets would exceed the dataset budget"
            )
        return replace(config, ledgers=ledgers)
    if ledger is not None:
        raise ConfigError("'ledger' is only allowed on split datasets")
    assert not isinstance(state, SplitState)
    return _change_leaf(config, state, eps, dlt, delta_conversion)


def _change_leaf(
    config: LeafConfig, state: LeafState, eps: Decimal, dlt: Decimal, delta_conversion: object
) -> LeafConfig:
    new: LeafConfig
    if isinstance(config, BasicConfig):
        conv = min(config.conversion_delta, dlt)
        new = BasicConfig(eps, dlt, config.relation, conv)
    elif isinstance(config, ZCDPConfig | RDPConfig):
        if delta_conversion is not None:
            dc = _amount({"delta_conversion": delta_conversion}, "delta_conversion")
        elif config.delta_conversion == config.delta:
            dc = dlt
        else:
            dc = config.delta_conversion
        if dc > dlt:
            raise ConfigError("delta_conversion must be ≤ the budget delta")
        if isinstance(config, ZCDPConfig):
            new = _zcdp_config(eps, dlt, config.relation, dc)
        else:
            new = _rdp_config(eps, dlt, config.relation, dc, config.orders, config.weights)
    else:
        new = _gdp_config(eps, dlt, config.relation)
    problem = _over_budget(new, state)
    if problem:
        raise InvalidTransition("BudgetBelowSpent", problem)
    return new


def _over_budget(config: LeafConfig, state: LeafState) -> str | None:
    """Why ``state`` would not fit under ``config`` (None when it fits)."""
    if isinstance(config, BasicConfig):
        assert isinstance(state, BasicState)
        used = add_up(state.spent_epsilon, state.reserved_epsilon)
        if used > config.epsilon or state.spent_delta > config.delta:
            return f"spent + reserved is ({fmt(used)}, {fmt(state.spent_delta)})"
        return None
    if isinstance(config, ZCDPConfig):
        assert isinstance(state, ZCDPState)
        if state.rho > config.rho_budget or state.delta > config.delta_approx:
            return f"spent is rho={fmt(state.rho)}, delta={fmt(state.delta)}"
        return None
    if isinstance(config, RDPConfig):
        assert isinstance(state, RDPState)
        if state.delta > config.delta_approx:
            return f"spent delta is {fmt(state.delta)}"
        # a dead order stays dead (§3.3), so only live orders can keep the filter open
        live = [
            not d and s <= b
            for s, b, d in zip(state.rdp, config.thresholds, state.dead, strict=True)
        ]
        if not any(live):
            return "the spent RDP curve exceeds the new threshold at every live order"
        return None
    assert isinstance(state, GDPState)
    if state.mu_squared > config.mu_squared_budget:
        return f"spent mu^2 is {fmt(state.mu_squared)}"
    return None


def recheck_dead(config: AccountingConfig, state: FilterState) -> FilterState:
    """After a budget change in ``rdp`` mode, orders over the new thresholds die and orders
    dead for good stay dead (a dead order never revives: its stopping time has passed)."""
    if isinstance(config, RDPConfig) and isinstance(state, RDPState):
        dead = tuple(
            d or s > b for d, s, b in zip(state.dead, state.rdp, config.thresholds, strict=True)
        )
        return replace(state, dead=dead)
    if isinstance(config, SplitConfig) and isinstance(state, SplitState):
        return SplitState(
            tuple((n, recheck_dead(config.ledger(n), s)) for n, s in state.ledgers)  # type: ignore[misc]
        )
    return state


# ============================================================================ status
def status(config: AccountingConfig, state: FilterState) -> dict[str, Any]:
    """Budget status in the mode's own units and as (ε, δ) (SERVICE.md §1).

    ``spent_eps_delta`` in ``zcdp``/``rdp``/``gdp`` is a conversion of the running totals,
    labelled ``estimate``: the certified guarantee is the filter target (theory.md §5.4)."""
    if isinstance(config, SplitConfig):
        assert isinstance(state, SplitState)
        return {
            "mode": "split",
            "budget": {"epsilon": fmt(config.epsilon), "delta": fmt(config.delta)},
            "ledgers": {n: status(c, state.get(n)) for n, c in config.ledgers},
        }
    base: dict[str, Any] = {
        "mode": config.mode,
        "budget": {"epsilon": fmt(config.epsilon), "delta": fmt(config.delta)},
    }
    if isinstance(config, BasicConfig):
        assert isinstance(state, BasicState)
        base.update(
            spent={"epsilon": fmt(state.spent_epsilon), "delta": fmt(state.spent_delta)},
            reserved={"epsilon": fmt(state.reserved_epsilon), "open": state.open_reservations},
            remaining=_basic_remaining(config, state),
            conversion_delta=fmt(config.conversion_delta),
            spent_eps_delta={
                "epsilon": fmt(add_up(state.spent_epsilon, state.reserved_epsilon)),
                "delta": fmt(state.spent_delta),
                "certified": True,
            },
        )
        return base
    if isinstance(config, ZCDPConfig):
        assert isinstance(state, ZCDPState)
        est = _estimate_zcdp(state.rho, config.delta_conversion)
        base.update(
            rho_budget=fmt(config.rho_budget),
            delta_approx=fmt(config.delta_approx),
            delta_conversion=fmt(config.delta_conversion),
            spent={"rho": fmt(state.rho), "delta": fmt(state.delta)},
            remaining=_zcdp_remaining(config, state),
            spent_eps_delta={
                "epsilon": est,
                "delta": fmt(add_up(state.delta, config.delta_conversion)),
                "certified": False,
            },
        )
        return base
    if isinstance(config, RDPConfig):
        assert isinstance(state, RDPState)
        base.update(
            delta_approx=fmt(config.delta_approx),
            delta_conversion=fmt(config.delta_conversion),
            orders=[repr(a) for a in config.orders],
            thresholds=[repr(b) for b in config.thresholds],
            spent={
                "rdp": [repr(s) for s in state.rdp],
                "delta": fmt(state.delta),
                "dead": list(state.dead),
            },
            remaining=_rdp_remaining(
                config,
                _grid(config.orders, config.thresholds),
                np.asarray(state.rdp),
                np.asarray(state.dead),
                state.delta,
            ),
            spent_eps_delta={
                "epsilon": _estimate_rdp(config, state),
                "delta": fmt(add_up(state.delta, config.delta_conversion)),
                "certified": False,
            },
        )
        return base
    assert isinstance(state, GDPState)
    mu = math.sqrt(float(state.mu_squared))
    base.update(
        mu_squared_budget=fmt(config.mu_squared_budget),
        spent={"mu_squared": fmt(state.mu_squared)},
        remaining=_gdp_remaining(config, state),
        spent_eps_delta={
            "epsilon": fmt(cost_from_float(cv.gdp_epsilon(mu, to_float_down(config.delta))))
            if mu > 0 and config.delta > 0
            else "0",
            "delta": fmt(config.delta),
            "certified": False,
        },
    )
    return base


def _estimate_zcdp(rho: Decimal, delta_c: Decimal) -> str:
    if rho == 0:
        return "0"
    if delta_c <= 0:
        return "Infinity"
    return fmt(cost_from_float(cv.zcdp_epsilon(float(rho), to_float_down(delta_c))))


def _estimate_rdp(config: RDPConfig, state: RDPState) -> str:
    if config.delta_conversion <= 0:
        return "Infinity" if any(state.rdp) else "0"
    if not any(state.rdp):
        return "0"
    e, _ = cv.rdp_to_epsilon(
        config.orders_array, np.asarray(state.rdp), to_float_down(config.delta_conversion)
    )
    return fmt(cost_from_float(e))


def eps_delta_guarantee(config: AccountingConfig) -> dict[str, str]:
    """The certified (ε, δ) of everything ever released: the filter target."""
    return {"epsilon": fmt(config.epsilon), "delta": fmt(config.delta)}


# ============================================================================ JSON codecs
def _f(x: float) -> str:
    return repr(float(x))


def config_to_json(config: AccountingConfig) -> dict[str, Any]:
    """Lossless JSON of a configuration (floats as ``repr`` text, amounts as decimal text)."""
    base: dict[str, Any] = {
        "mode": config.mode,
        "epsilon": fmt(config.epsilon),
        "delta": fmt(config.delta),
        "relation": config.relation,
    }
    if isinstance(config, BasicConfig):
        base["conversion_delta"] = fmt(config.conversion_delta)
    elif isinstance(config, ZCDPConfig):
        base.update(
            delta_conversion=fmt(config.delta_conversion),
            delta_approx=fmt(config.delta_approx),
            rho_budget=fmt(config.rho_budget),
        )
    elif isinstance(config, RDPConfig):
        base.update(
            delta_conversion=fmt(config.delta_conversion),
            delta_approx=fmt(config.delta_approx),
            orders=[_f(a) for a in config.orders],
            weights=[_f(w) for w in config.weights],
            thresholds=[_f(b) for b in config.thresholds],
        )
    elif isinstance(config, GDPConfig):
        base["mu_squared_budget"] = fmt(config.mu_squared_budget)
    else:
        base["ledgers"] = [{"name": n, **config_to_json(c)} for n, c in config.ledgers]
    return base


def config_from_json(obj: Mapping[str, Any]) -> AccountingConfig:
    """Inverse of :func:`config_to_json` (derived values are read back, not recomputed, so a
    replay uses exactly the thresholds that were in force)."""
    mode = obj["mode"]
    eps, dlt, rel = Decimal(obj["epsilon"]), Decimal(obj["delta"]), obj["relation"]
    if mode == "basic":
        return BasicConfig(eps, dlt, rel, Decimal(obj["conversion_delta"]))
    if mode == "zcdp":
        return ZCDPConfig(
            eps,
            dlt,
            rel,
            Decimal(obj["delta_conversion"]),
            Decimal(obj["delta_approx"]),
            Decimal(obj["rho_budget"]),
        )
    if mode == "rdp":
        return RDPConfig(
            eps,
            dlt,
            rel,
            Decimal(obj["delta_conversion"]),
            Decimal(obj["delta_approx"]),
            tuple(float(a) for a in obj["orders"]),
            tuple(float(w) for w in obj["weights"]),
            tuple(float(b) for b in obj["thresholds"]),
        )
    if mode == "gdp":
        return GDPConfig(eps, dlt, rel, Decimal(obj["mu_squared_budget"]))
    ledgers = []
    for item in obj["ledgers"]:
        sub = config_from_json(item)
        assert not isinstance(sub, SplitConfig)
        ledgers.append((item["name"], sub))
    return SplitConfig(eps, dlt, rel, tuple(ledgers))


def state_to_json(state: FilterState) -> dict[str, Any]:
    """Lossless JSON of a filter state."""
    if isinstance(state, BasicState):
        return {
            "spent_epsilon": fmt(state.spent_epsilon),
            "reserved_epsilon": fmt(state.reserved_epsilon),
            "spent_delta": fmt(state.spent_delta),
            "open_reservations": state.open_reservations,
        }
    if isinstance(state, ZCDPState):
        return {"rho": fmt(state.rho), "delta": fmt(state.delta)}
    if isinstance(state, RDPState):
        return {
            "rdp": [_f(s) for s in state.rdp],
            "dead": list(state.dead),
            "delta": fmt(state.delta),
        }
    if isinstance(state, GDPState):
        return {"mu_squared": fmt(state.mu_squared)}
    return {"ledgers": [{"name": n, "state": state_to_json(s)} for n, s in state.ledgers]}


def state_from_json(config: AccountingConfig, obj: Mapping[str, Any]) -> FilterState:
    """Inverse of :func:`state_to_json` for a state of ``config``'s mode."""
    if isinstance(config, BasicConfig):
        return BasicState(
            Decimal(obj["spent_epsilon"]),
            Decimal(obj["reserved_epsilon"]),
            Decimal(obj["spent_delta"]),
            int(obj["open_reservations"]),
        )
    if isinstance(config, ZCDPConfig):
        return ZCDPState(Decimal(obj["rho"]), Decimal(obj["delta"]))
    if isinstance(config, RDPConfig):
        return RDPState(
            tuple(float(s) for s in obj["rdp"]),
            tuple(bool(d) for d in obj["dead"]),
            Decimal(obj["delta"]),
        )
    if isinstance(config, GDPConfig):
        return GDPState(Decimal(obj["mu_squared"]))
    subs: list[tuple[str, LeafState]] = []
    for item in obj["ledgers"]:
        st = state_from_json(config.ledger(item["name"]), item["state"])
        assert not isinstance(st, SplitState)
        subs.append((item["name"], st))
    return SplitState(tuple(subs))


__all__ = [
    "DEFAULT_RDP_ORDERS",
    "INFINITY",
    "AccountingConfig",
    "BasicConfig",
    "BasicState",
    "ConfigError",
    "Decision",
    "FilterState",
    "GDPConfig",
    "GDPState",
    "InvalidTransition",
    "OdpCapable",
    "RDPConfig",
    "RDPState",
    "Reservation",
    "SplitConfig",
    "SplitState",
    "ZCDPConfig",
    "ZCDPState",
    "admit",
    "cancel",
    "change_budget",
    "config_from_json",
    "config_to_json",
    "eps_delta_guarantee",
    "initial_state",
    "make_config",
    "recheck_dead",
    "settle",
    "state_from_json",
    "state_to_json",
    "status",
]
