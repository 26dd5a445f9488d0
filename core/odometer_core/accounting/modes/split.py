"""``split`` mode: fixed sub-budgets, each a leaf filter with its own budget.

The sub-budgets' budgets sum to at most the dataset's (Σε_k ≤ ε_B, Σδ_k ≤ δ_B); each invocation
names the sub-budget it spends. Sub-budgets run concurrently and adaptively, and their guarantees
add by concurrent composition (Vadhan–Zhang 2023, Thm 1.3; Haney et al. 2023): everything
released is (Σε_k, Σδ_k)-DP, hence (ε_B, δ_B)-DP. See ``docs/accounting.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Final, Literal

from odometer_core.accounting import odometer as odo
from odometer_core.accounting.declarations import Declaration, DeclarationError, Relation
from odometer_core.accounting.exact import add_up, fmt
from odometer_core.accounting.modes import (
    LeafConfig,
    LeafState,
    UnusableBudget,
    budget,
    leaf_config_from_json,
    leaf_config_to_json,
    leaf_mode,
    leaf_state_to_json,
    leaf_status,
    make_leaf,
)
from odometer_core.accounting.modes.common import (
    ConfigError,
    Decision,
    InvalidTransition,
    only,
)
from odometer_core.accounting.odometer import Reading

MAX_SUB_BUDGETS: Final = 32


@dataclass(frozen=True, slots=True)
class SplitConfig:
    """``split``: named sub-budgets with Σε_k ≤ ε_B and Σδ_k ≤ δ_B."""

    epsilon: Decimal
    delta: Decimal
    relation: Relation
    sub_budgets: tuple[tuple[str, LeafConfig], ...]
    mode: Literal["split"] = "split"

    def sub_budget(self, name: str | None) -> LeafConfig:
        for n, cfg in self.sub_budgets:
            if n == name:
                return cfg
        names = ", ".join(n for n, _ in self.sub_budgets)
        raise DeclarationError(
            f"split datasets need 'sub_budget' naming one of: {names}", field="sub_budget"
        )


@dataclass(frozen=True, slots=True)
class SplitState:
    sub_budgets: tuple[tuple[str, LeafState], ...]

    def get(self, name: str) -> LeafState:
        for n, st in self.sub_budgets:
            if n == name:
                return st
        raise KeyError(name)

    def put(self, name: str, state: LeafState) -> SplitState:
        return SplitState(tuple((n, state if n == name else s) for n, s in self.sub_budgets))


# ---------------------------------------------------------------------------- configuration
def parse(eps: Decimal, dlt: Decimal, rel: Relation, acc: Mapping[str, Any]) -> SplitConfig:
    """``{"mode": "split", "sub_budgets": [{name, budget: {epsilon, delta}, accounting}, ...]}``."""
    only(acc, ("mode", "sub_budgets"))
    raw = acc.get("sub_budgets")
    if not isinstance(raw, list) or not raw:
        raise ConfigError("split mode needs a non-empty 'sub_budgets' list")
    if len(raw) > MAX_SUB_BUDGETS:
        raise ConfigError(f"at most {MAX_SUB_BUDGETS} sub-budgets")
    sub_budgets: list[tuple[str, LeafConfig]] = []
    for item in raw:
        if not isinstance(item, Mapping):
            raise ConfigError("each sub-budget must be an object {name, budget, accounting}")
        only(item, ("name", "budget", "accounting"))
        name = item.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= 64 or not name.isprintable():
            raise ConfigError("sub-budget names must be 1–64 printable characters")
        if any(n == name for n, _ in sub_budgets):
            raise ConfigError(f"duplicate sub-budget name '{name}'")
        target = item.get("budget")
        if not isinstance(target, Mapping):
            raise ConfigError(f"sub-budget '{name}' needs a budget {{epsilon, delta}}")
        sub_acc = item.get("accounting") or {"mode": "basic"}
        if not isinstance(sub_acc, Mapping) or sub_acc.get("mode") == "split":
            raise ConfigError("sub-budgets may use modes basic, zcdp, rdp or gdp")
        sub_eps, sub_dlt = budget(target.get("epsilon"), target.get("delta", 0))
        try:
            sub_budgets.append((name, make_leaf(sub_eps, sub_dlt, rel, sub_acc)))
        except UnusableBudget as exc:
            raise UnusableBudget(f"sub-budget '{name}': {exc}", exc.problem) from None
        except ConfigError as exc:
            raise ConfigError(f"sub-budget '{name}': {exc}") from None
    total_eps = add_up(*(c.epsilon for _, c in sub_budgets))
    total_delta = add_up(*(c.delta for _, c in sub_budgets))
    if total_eps > eps or total_delta > dlt:
        raise ConfigError(
            f"sub-budgets sum to ({fmt(total_eps)}, {fmt(total_delta)}), more than "
            f"the dataset budget ({fmt(eps)}, {fmt(dlt)})"
        )
    return SplitConfig(eps, dlt, rel, tuple(sub_budgets))


def initial_state(config: SplitConfig) -> SplitState:
    return SplitState(tuple((n, leaf_mode(c).initial_state(c)) for n, c in config.sub_budgets))


# ---------------------------------------------------------------------------- admission
def admit(
    config: SplitConfig,
    state: SplitState,
    decl: Declaration,
    sub_budget: str | None,
    conversion_delta: Decimal | None,
) -> Decision:
    """Admit on the named sub-budget's filter; the other sub-budgets are untouched."""
    sub = config.sub_budget(sub_budget)
    assert sub_budget is not None
    d = leaf_mode(sub).admit(sub, state.get(sub_budget), decl, conversion_delta)
    return replace(
        d,
        state=state.put(sub_budget, d.state) if d.admitted else state,
        sub_budget=sub_budget,
        reservation=replace(d.reservation, sub_budget=sub_budget) if d.reservation else None,
    )


# ---------------------------------------------------------------------------- budget change
def change_budget(
    config: SplitConfig,
    state: SplitState,
    eps: Decimal,
    dlt: Decimal,
    sub_budget: str | None,
    final_conversion_delta: object,
    anchored: bool = True,
) -> SplitConfig:
    """The dataset's own budget (``sub_budget`` None: never below what the sub-budgets hold) or
    one sub-budget's (never above what the dataset's budget leaves for it)."""
    if sub_budget is None:
        tot_e = add_up(*(c.epsilon for _, c in config.sub_budgets))
        tot_d = add_up(*(c.delta for _, c in config.sub_budgets))
        if eps < tot_e or dlt < tot_d:
            raise InvalidTransition(
                "BudgetBelowSpent",
                f"the sub-budgets already hold ({fmt(tot_e)}, {fmt(tot_d)})",
            )
        return replace(config, epsilon=eps, delta=dlt)
    sub = config.sub_budget(sub_budget)
    sub_state = state.get(sub_budget)
    mode = leaf_mode(sub)
    new_sub: LeafConfig = mode.change_budget(
        sub, sub_state, eps, dlt, final_conversion_delta, anchored
    )
    problem = mode.over_budget(new_sub, sub_state)
    if problem:
        raise InvalidTransition("BudgetBelowSpent", problem)
    sub_budgets = tuple((n, new_sub if n == sub_budget else c) for n, c in config.sub_budgets)
    tot_e = add_up(*(c.epsilon for _, c in sub_budgets))
    tot_d = add_up(*(c.delta for _, c in sub_budgets))
    if tot_e > config.epsilon or tot_d > config.delta:
        raise InvalidTransition("BudgetAboveTotal", "sub-budgets would exceed the dataset budget")
    return replace(config, sub_budgets=sub_budgets)


def after_budget_change(config: SplitConfig, state: SplitState) -> SplitState:
    return SplitState(
        tuple((n, leaf_mode(c).after_budget_change(c, state.get(n))) for n, c in config.sub_budgets)
    )


# ---------------------------------------------------------------------------- status
def odometer(config: SplitConfig, state: SplitState) -> Reading:
    """The certified odometer reading: the sum of the sub-budgets' readings. The sub-budgets run
    concurrently and adaptively; their guarantees add by concurrent composition (Vadhan–Zhang
    2023, Thm 1.3; Haney et al. 2023 carry filters and odometers with adaptively chosen
    privacy-loss parameters over to concurrent composition). Each reading is at most its
    sub-budget and the sub-budgets sum to at most (ε_B, δ_B)."""
    parts = []
    for name, sub in config.sub_budgets:
        reading = leaf_mode(sub).odometer
        assert reading is not None  # every leaf mode has one
        parts.append(reading(sub, state.get(name)))
    return odo.split_sum(parts, config.epsilon, config.delta)


def status(config: SplitConfig, state: SplitState) -> dict[str, Any]:
    """The dataset's budget, each sub-budget's status, and the certified ``odometer`` reading
    of the whole dataset (the sum of the sub-budgets')."""
    return {
        "mode": "split",
        "budget": {"epsilon": fmt(config.epsilon), "delta": fmt(config.delta)},
        "sub_budgets": {n: leaf_status(c, state.get(n)) for n, c in config.sub_budgets},
        "odometer": odometer(config, state).to_json(),
    }


# ---------------------------------------------------------------------------- codec
def config_to_json(config: SplitConfig) -> dict[str, Any]:
    return {
        "mode": "split",
        "epsilon": fmt(config.epsilon),
        "delta": fmt(config.delta),
        "relation": config.relation,
        "sub_budgets": [{"name": n, **leaf_config_to_json(c)} for n, c in config.sub_budgets],
    }


def config_from_json(obj: Mapping[str, Any]) -> SplitConfig:
    eps, dlt, rel = Decimal(obj["epsilon"]), Decimal(obj["delta"]), obj["relation"]
    sub_budgets = tuple((item["name"], leaf_config_from_json(item)) for item in obj["sub_budgets"])
    return SplitConfig(eps, dlt, rel, sub_budgets)


def state_to_json(state: SplitState) -> dict[str, Any]:
    return {
        "sub_budgets": [{"name": n, "state": leaf_state_to_json(s)} for n, s in state.sub_budgets]
    }


def state_from_json(config: SplitConfig, obj: Mapping[str, Any]) -> SplitState:
    subs: list[tuple[str, LeafState]] = []
    for item in obj["sub_budgets"]:
        sub = config.sub_budget(item["name"])
        subs.append((item["name"], leaf_mode(sub).state_from_json(item["state"])))
    return SplitState(tuple(subs))
