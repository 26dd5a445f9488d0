"""``split`` mode: fixed sub-ledgers, each a leaf filter with its own budget.

The sub-ledgers' budgets sum to at most the dataset's (Σε_k ≤ ε_B, Σδ_k ≤ δ_B); each invocation
names the sub-ledger it spends. Sub-ledgers run concurrently and adaptively, and their guarantees
add by concurrent composition (Vadhan–Zhang 2023, Thm 1.3; Haney et al. 2023): everything
released is (Σε_k, Σδ_k)-DP, hence (ε_B, δ_B)-DP. See ``docs/accounting.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Final, Literal

from app.accounting.declarations import Declaration, DeclarationError, Relation
from app.accounting.exact import add_up, fmt
from app.accounting.modes import (
    LeafConfig,
    LeafState,
    budget,
    leaf_config_from_json,
    leaf_config_to_json,
    leaf_mode,
    leaf_state_to_json,
    leaf_status,
    make_leaf,
)
from app.accounting.modes.common import (
    ConfigError,
    Decision,
    InvalidTransition,
    only,
)

MAX_LEDGERS: Final = 32


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


# ---------------------------------------------------------------------------- configuration
def parse(eps: Decimal, dlt: Decimal, rel: Relation, acc: Mapping[str, Any]) -> SplitConfig:
    """``{"mode": "split", "ledgers": [{name, budget: {epsilon, delta}, accounting}, ...]}``."""
    only(acc, ("mode", "ledgers"))
    raw = acc.get("ledgers")
    if not isinstance(raw, list) or not raw:
        raise ConfigError("split mode needs a non-empty 'ledgers' list")
    if len(raw) > MAX_LEDGERS:
        raise ConfigError(f"at most {MAX_LEDGERS} ledgers")
    ledgers: list[tuple[str, LeafConfig]] = []
    for item in raw:
        if not isinstance(item, Mapping):
            raise ConfigError("each ledger must be an object {name, budget, accounting}")
        only(item, ("name", "budget", "accounting"))
        name = item.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= 64 or not name.isprintable():
            raise ConfigError("ledger names must be 1–64 printable characters")
        if any(n == name for n, _ in ledgers):
            raise ConfigError(f"duplicate ledger name '{name}'")
        target = item.get("budget")
        if not isinstance(target, Mapping):
            raise ConfigError(f"ledger '{name}' needs a budget {{epsilon, delta}}")
        sub_acc = item.get("accounting") or {"mode": "basic"}
        if not isinstance(sub_acc, Mapping) or sub_acc.get("mode") == "split":
            raise ConfigError("sub-ledgers may use modes basic, zcdp, rdp or gdp")
        sub_eps, sub_dlt = budget(target.get("epsilon"), target.get("delta", 0))
        ledgers.append((name, make_leaf(sub_eps, sub_dlt, rel, sub_acc)))
    total_eps = add_up(*(c.epsilon for _, c in ledgers))
    total_delta = add_up(*(c.delta for _, c in ledgers))
    if total_eps > eps or total_delta > dlt:
        raise ConfigError(
            f"sub-ledger budgets sum to ({fmt(total_eps)}, {fmt(total_delta)}), more than "
            f"the dataset budget ({fmt(eps)}, {fmt(dlt)})"
        )
    return SplitConfig(eps, dlt, rel, tuple(ledgers))


def initial_state(config: SplitConfig) -> SplitState:
    return SplitState(tuple((n, leaf_mode(c).initial_state(c)) for n, c in config.ledgers))


# ---------------------------------------------------------------------------- admission
def admit(
    config: SplitConfig,
    state: SplitState,
    decl: Declaration,
    ledger: str | None,
    conversion_delta: Decimal | None,
) -> Decision:
    """Admit on the named sub-ledger's filter; the other sub-ledgers are untouched."""
    sub = config.ledger(ledger)
    assert ledger is not None
    d = leaf_mode(sub).admit(sub, state.get(ledger), decl, conversion_delta)
    return replace(
        d,
        state=state.put(ledger, d.state) if d.admitted else state,
        ledger=ledger,
        reservation=replace(d.reservation, ledger=ledger) if d.reservation else None,
    )


# ---------------------------------------------------------------------------- budget change
def change_budget(
    config: SplitConfig,
    state: SplitState,
    eps: Decimal,
    dlt: Decimal,
    ledger: str | None,
    final_conversion_delta: object,
) -> SplitConfig:
    """The dataset's own budget (``ledger`` None: never below what the sub-ledgers hold) or
    one sub-ledger's (never above what the dataset's budget leaves for it)."""
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
    sub_state = state.get(ledger)
    mode = leaf_mode(sub)
    new_sub: LeafConfig = mode.change_budget(sub, sub_state, eps, dlt, final_conversion_delta)
    problem = mode.over_budget(new_sub, sub_state)
    if problem:
        raise InvalidTransition("BudgetBelowSpent", problem)
    ledgers = tuple((n, new_sub if n == ledger else c) for n, c in config.ledgers)
    tot_e = add_up(*(c.epsilon for _, c in ledgers))
    tot_d = add_up(*(c.delta for _, c in ledgers))
    if tot_e > config.epsilon or tot_d > config.delta:
        raise InvalidTransition(
            "BudgetAboveTotal", "sub-ledger budgets would exceed the dataset budget"
        )
    return replace(config, ledgers=ledgers)


def after_budget_change(config: SplitConfig, state: SplitState) -> SplitState:
    return SplitState(
        tuple((n, leaf_mode(c).after_budget_change(c, state.get(n))) for n, c in config.ledgers)
    )


# ---------------------------------------------------------------------------- status
def status(config: SplitConfig, state: SplitState) -> dict[str, Any]:
    return {
        "mode": "split",
        "budget": {"epsilon": fmt(config.epsilon), "delta": fmt(config.delta)},
        "ledgers": {n: leaf_status(c, state.get(n)) for n, c in config.ledgers},
    }


# ---------------------------------------------------------------------------- codec
def config_to_json(config: SplitConfig) -> dict[str, Any]:
    return {
        "mode": "split",
        "epsilon": fmt(config.epsilon),
        "delta": fmt(config.delta),
        "relation": config.relation,
        "ledgers": [{"name": n, **leaf_config_to_json(c)} for n, c in config.ledgers],
    }


def config_from_json(obj: Mapping[str, Any]) -> SplitConfig:
    eps, dlt, rel = Decimal(obj["epsilon"]), Decimal(obj["delta"]), obj["relation"]
    ledgers = tuple((item["name"], leaf_config_from_json(item)) for item in obj["ledgers"])
    return SplitConfig(eps, dlt, rel, ledgers)


def state_to_json(state: SplitState) -> dict[str, Any]:
    return {"ledgers": [{"name": n, "state": leaf_state_to_json(s)} for n, s in state.ledgers]}


def state_from_json(config: SplitConfig, obj: Mapping[str, Any]) -> SplitState:
    subs: list[tuple[str, LeafState]] = []
    for item in obj["ledgers"]:
        sub = config.ledger(item["name"])
        subs.append((item["name"], leaf_mode(sub).state_from_json(item["state"])))
    return SplitState(tuple(subs))
