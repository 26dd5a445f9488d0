"""Privacy filters: the dispatch from a dataset's configuration to its mode.

Every mode lives in one module of :mod:`odometer_core.accounting.modes` (configuration, state,
charge,
admission, settle/cancel, budget change, status, codec); this module is the small, uniform
front the rest of the service uses. :func:`admit` is a **pure** function of (configuration,
state, declaration) returning a :class:`Decision` with the new state; :func:`settle` and
:func:`cancel` finish ODP reservations: in ``basic`` mode (and ``basic`` sub-budgets) with
Hartmann et al.'s refund, and in ``zcdp`` / ``rdp`` at a level above a dataset that reserved
(charged at the worst cell; settle refunds nothing, cancel releases it);
:func:`change_budget` moves a dataset's target. States are O(1) (O(|Λ|) in ``rdp``), updated
incrementally, and serialise losslessly, so a ledger replays to the exact same state.

Each filter halts *before* an invocation whose predictable cost would cross the budget, so it is
valid under full adaptivity; the guarantee of each mode, with its theorem, is in its module's
docstring and in ``docs/accounting.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeAlias

from odometer_core.accounting import fastforward, memo
from odometer_core.accounting.declarations import RELATIONS, Declaration, DeclarationError, Relation
from odometer_core.accounting.exact import fmt, rounded
from odometer_core.accounting.json_types import CapacityJSON
from odometer_core.accounting.modes import (
    MODES,
    LeafConfig,
    LeafState,
    budget,
    leaf_config_from_json,
    leaf_config_to_json,
    leaf_mode,
    leaf_state_to_json,
    leaf_status,
    make_leaf,
    refuse_unusable,
)
from odometer_core.accounting.modes import gdp as gdp_mode
from odometer_core.accounting.modes import rdp as rdp_mode
from odometer_core.accounting.modes import split as split_mode
from odometer_core.accounting.modes import zcdp as zcdp_mode
from odometer_core.accounting.modes.basic import BasicConfig, BasicState
from odometer_core.accounting.modes.common import (
    TRANSITION_CODES,
    ConfigError,
    Decision,
    InvalidTransition,
    Reservation,
    UnsupportedInMode,
    check_relation,
)
from odometer_core.accounting.modes.gdp import GDPConfig, GDPState
from odometer_core.accounting.modes.rdp import DEFAULT_RDP_ORDERS, RDPConfig, RDPState
from odometer_core.accounting.modes.split import SplitConfig, SplitState
from odometer_core.accounting.modes.zcdp import ZCDPConfig, ZCDPState

AccountingConfig: TypeAlias = LeafConfig | SplitConfig
FilterState: TypeAlias = LeafState | SplitState


# ---------------------------------------------------------------------------- configuration
def make_config(
    epsilon: object, delta: object, relation: object, accounting: Mapping[str, Any] | None
) -> AccountingConfig:
    """Build and validate a dataset's accounting configuration (:class:`ConfigError` if bad)."""
    eps, dlt = budget(epsilon, delta)
    if relation not in RELATIONS:
        raise ConfigError("relation must be 'add_remove' or 'replace_one'")
    rel: Relation = "add_remove" if relation == "add_remove" else "replace_one"
    acc = dict(accounting or {"mode": "basic"})
    if acc.get("mode", "basic") == "split":
        return split_mode.parse(eps, dlt, rel, acc)
    return make_leaf(eps, dlt, rel, acc)


def initial_state(config: AccountingConfig) -> FilterState:
    """The state of a dataset on which nothing has been spent."""
    if isinstance(config, SplitConfig):
        return split_mode.initial_state(config)
    state: LeafState = leaf_mode(config).initial_state(config)
    return state


# ---------------------------------------------------------------------------- admission
def _leaf_of(config: AccountingConfig, sub_budget: str | None) -> LeafConfig:
    """The leaf filter an invocation spends: the dataset's, or the named sub-budget's."""
    if isinstance(config, SplitConfig):
        return config.sub_budget(sub_budget)
    if sub_budget is not None:
        raise DeclarationError("'sub_budget' is only allowed on split datasets", field="sub_budget")
    return config


def supports(
    config: AccountingConfig, declaration: Declaration, *, sub_budget: str | None = None
) -> bool:
    """Whether the dataset (or its sub-budget ``sub_budget``) can account ``declaration`` at all —
    the rule :func:`admit` applies before charging (a ``False`` there is HTTP 422, not a budget
    decision). Like dp_accounting's ``supports()``, it is checked before composing."""
    return leaf_mode(_leaf_of(config, sub_budget)).unsupported(declaration) is None


def admit(
    config: AccountingConfig,
    state: FilterState,
    declaration: Declaration,
    *,
    sub_budget: str | None = None,
    conversion_delta: Decimal | None = None,
) -> Decision:
    """Decide one invocation: accept (charged), reserve (ODP in ``basic``) or reject.

    Pure: the same (config, state, declaration) always gives the same decision, and a
    rejection returns the input state unchanged. Raises :class:`DeclarationError` (including
    :class:`UnsupportedInMode`, the rule of :func:`supports`) for declarations the dataset
    cannot account at all — those are invalid requests, not budget decisions.
    """
    check_relation(declaration, config.relation)
    leaf = _leaf_of(config, sub_budget)
    why = leaf_mode(leaf).unsupported(declaration)
    if why is not None:
        raise UnsupportedInMode(why)
    if isinstance(config, SplitConfig):
        assert isinstance(state, SplitState)
        return split_mode.admit(config, state, declaration, sub_budget, conversion_delta)
    return leaf_mode(config).admit(config, state, declaration, conversion_delta)


# ---------------------------------------------------------------------------- settle / cancel
def _reserving(
    config: AccountingConfig, state: FilterState, reservation: Reservation
) -> tuple[LeafConfig, LeafState]:
    """The leaf filter holding ``reservation`` (the dataset's, or its sub-budget's)."""
    if isinstance(config, SplitConfig):
        assert isinstance(state, SplitState) and reservation.sub_budget is not None
        return config.sub_budget(reservation.sub_budget), state.get(reservation.sub_budget)
    assert not isinstance(state, SplitState)
    return config, state


def _finish(
    config: AccountingConfig, state: FilterState, reservation: Reservation, cell: str | None
) -> Decision:
    leaf, leaf_state = _reserving(config, state, reservation)
    mode = leaf_mode(leaf)
    if mode.settle is None or mode.cancel is None:
        raise InvalidTransition(
            "NotSettleable", "a-posteriori settlement exists only in mode 'basic'"
        )
    if cell is None:
        decision = mode.cancel(leaf, leaf_state, reservation)
    else:
        decision = mode.settle(leaf, leaf_state, reservation, cell)
    if isinstance(config, SplitConfig):
        assert isinstance(state, SplitState) and reservation.sub_budget is not None
        return Decision(
            decision.outcome,
            state.put(reservation.sub_budget, decision.state),
            decision.charge,
            decision.requested,
            decision.remaining,
            decision.reason,
            decision.reservation,
            decision.refund,
            decision.sub_budget,
        )
    return decision


def settle(
    config: AccountingConfig, state: FilterState, reservation: Reservation, cell: str
) -> Decision:
    """Charge the released output's cell and refund the rest of the reservation's ε
    (:func:`odometer_core.accounting.modes.basic.settle`)."""
    return _finish(config, state, reservation, cell)


def cancel(config: AccountingConfig, state: FilterState, reservation: Reservation) -> Decision:
    """Release a reservation whose mechanism never ran (:func:`odometer_core.accounting.modes.basic.
    cancel`)."""
    return _finish(config, state, reservation, None)


# ---------------------------------------------------------------------------- capacity
@dataclass(frozen=True, slots=True)
class Capacity:
    """How many more invocations of one declaration a filter admits in a row."""

    count: int
    #: counting stopped at the limit: the filter admits at least ``count``
    at_least: bool
    #: why the next one would be refused (``None`` when counting stopped at the limit)
    reason: str | None

    def to_json(self) -> CapacityJSON:
        return {"count": self.count, "at_least": self.at_least, "reason": self.reason}


#: The most invocations :func:`capacity` counts (then it says "at least"): 10⁶, in a few
#: milliseconds of CPU (``benchmarks/capacity.py``).
CAPACITY_LIMIT = 1_000_000

#: The most a filter :mod:`.fastforward` cannot advance (none today: a mode added without it)
#: is counted to, one :func:`admit` at a time (a few ms per thousand).
LOOP_LIMIT = 10_000


def capacity(
    config: AccountingConfig,
    state: FilterState,
    declaration: Declaration,
    *,
    sub_budget: str | None = None,
    conversion_delta: Decimal | None = None,
    limit: int = CAPACITY_LIMIT,
) -> Capacity:
    """How many more of ``declaration`` the filter admits from ``state`` if nothing else runs:
    the largest n ≤ ``limit`` such that n registrations in a row would all be admitted, each
    by :func:`admit` on the state the previous one left — exactly what calling :func:`admit`
    in a loop gives, in every mode (dead orders, ladders, reservations at their worst cell,
    decimal and binary64 rounding included), and ``reason`` is the refusal of the next one.

    Counted by a galloping, then binary, search over n, each step deciding "is the n-th
    admitted?" with :func:`admit` itself on the state n − 1 admissions leave, computed at
    once and exactly by :mod:`.fastforward`; the answer is confirmed by construction: the
    count's own admission and the next one's refusal are both real :func:`admit` decisions on
    exact states. O(log n) admissions (a few ms at 10⁶) instead of n. The charge is computed
    once (:mod:`.memo`).

    The search is exact because admission is *monotone* in n in every mode: each admission
    adds the same charge (it depends on the declaration and the configuration, never on the
    state), so every running sum only grows, and every test is of the form "a sum after the
    charge is at most a constant of the configuration":

    - ``basic``: E + R + ε ≤ ε_B and D + δ ≤ δ_B (the lower-bound refusal ahead of the
      charge compares the same growing sums); E (or R for a reservation) and D only grow;
    - ``zcdp``: Σρ + ρ ≤ ρ_B, Σδ + δ ≤ δ_A and, for approximate declarations, Σρ + ρ ≤ ρ_top;
    - ``gdp``: Σμ² + μ² ≤ μ_B²;
    - ``rdp``: Σδ + δ ≤ δ_A and some order α, not dead, with S(α) + ε(α) ≤ B(α) (and ≤ its
      creation threshold for approximate declarations): S(α) only grows and a dead order
      stays dead, so the set of orders that fit only shrinks;
    - ``split``: the named sub-budget's leaf filter, one of the above;

    and each rounded sum (``add_up``, nextafter(S + ε)) is non-decreasing in its operand. So
    once the n-th is refused, every later one would be too, and the count is the last n
    admitted. Organisation caps, quotas and block selections are filters of these modes,
    counted here too. A filter :mod:`.fastforward` cannot advance is counted with the loop, up
    to :data:`LOOP_LIMIT`. Raises what :func:`admit` raises for a declaration the filter
    cannot account."""
    if limit <= 0:
        return Capacity(0, True, None)

    def decide(at: FilterState) -> Decision:
        return admit(
            config, at, declaration, sub_budget=sub_budget, conversion_delta=conversion_delta
        )

    with memo.charges():
        first = decide(state)
        if not first.admitted:
            return Capacity(0, False, first.reason)
        advance = fastforward.stepper(config, state, first)
        if advance is None or advance(state, 1) != first.state:
            return _counted_by_loop(decide, first.state, min(limit, LOOP_LIMIT))
        # lo: admitted, after_lo the state it leaves; refused: the first n known refused
        lo, after_lo = 1, first.state
        refused: tuple[int, Decision] | None = None
        step = 1
        while refused is None:
            if lo >= limit:
                return Capacity(limit, True, None)
            n = min(lo + step, limit)
            decision = decide(advance(after_lo, n - 1 - lo))
            if decision.admitted:
                lo, after_lo = n, decision.state
            else:
                refused = n, decision
            step *= 2
        while refused[0] - lo > 1:
            mid = (lo + refused[0]) // 2
            decision = decide(advance(after_lo, mid - 1 - lo))
            if decision.admitted:
                lo, after_lo = mid, decision.state
            else:
                refused = mid, decision
    return Capacity(lo, False, refused[1].reason)


def _counted_by_loop(
    decide: Callable[[FilterState], Decision], state: FilterState, limit: int
) -> Capacity:
    """The count of :func:`capacity` one admission at a time, after a first one admitted."""
    count = 1
    while count < limit:
        decision = decide(state)
        if not decision.admitted:
            return Capacity(count, False, decision.reason)
        state, count = decision.state, count + 1
    return Capacity(count, True, None)


# ---------------------------------------------------------------------------- budget changes
def change_budget(
    config: AccountingConfig,
    state: FilterState,
    epsilon: object,
    delta: object,
    *,
    sub_budget: str | None = None,
    final_conversion_delta: object = None,
    workload: object = None,
    anchored: bool = True,
    recorded: bool = False,
) -> tuple[AccountingConfig, FilterState]:
    """A curator raises or lowers a budget; never below what is spent or reserved, nor below
    what is certified, nor to a budget that could never admit anything (a :class:`ConfigError`
    saying what to set: :func:`~odometer_core.accounting.modes.unusable`; ``recorded``: a change
    read back from a ledger, replayed as it was made, even one written before such budgets were
    refused). In ``zcdp``/``rdp``/``gdp`` the thresholds, ladder and δ shares fixed at
    creation stay, and the new ε caps the certified reading (each mode's ``change_budget``;
    ``docs/accounting.md``, *Budget changes*), unless nothing was charged yet, when the
    filter is made anew (δ_c kept unless given, following δ_B when all of δ_B went to
    conversion). On a split dataset, ``sub_budget`` names the sub-budget to change; without it
    the dataset total changes (≥ Σ sub-budgets). ``anchored`` False (replaying an entry written
    before accounting 1.4.0) applies that version's rule to a filter stored without an anchor.

    ``workload`` (an ``rdp`` dataset on which nothing has been charged yet) re-chooses the grid
    for that workload (:func:`~odometer_core.accounting.modes.rdp.choose_grid`): the weights are
    still fixed before the first charge, which is all the filter's guarantee needs.

    Returns the new configuration and the state with ``rdp`` orders that the new thresholds
    put over budget marked dead."""
    eps, dlt = budget(epsilon, delta)
    if workload is not None:
        chosen, fresh = _rechoose_grid(
            config, state, eps, dlt, final_conversion_delta, workload, anchored
        )
        assert not isinstance(chosen, SplitConfig)
        if not recorded:
            refuse_unusable(chosen)
        return chosen, fresh
    if isinstance(config, SplitConfig):
        assert isinstance(state, SplitState)
        new_split = split_mode.change_budget(
            config, state, eps, dlt, sub_budget, final_conversion_delta, anchored
        )
        if sub_budget is not None and not recorded:
            refuse_unusable(new_split.sub_budget(sub_budget), sub_budget)
        return new_split, split_mode.after_budget_change(new_split, state)
    if sub_budget is not None:
        raise ConfigError("'sub_budget' is only allowed on split datasets")
    assert not isinstance(state, SplitState)
    mode = leaf_mode(config)
    new: LeafConfig = mode.change_budget(config, state, eps, dlt, final_conversion_delta, anchored)
    if not recorded:  # in rdp, with the weights the first declaration chose
        in_rdp = isinstance(new, RDPConfig) and isinstance(state, RDPState)
        refuse_unusable(rdp_mode.in_force(new, state) if in_rdp else new)  # type: ignore[arg-type]
    problem = mode.over_budget(new, state)
    if problem:
        raise InvalidTransition("BudgetBelowSpent", problem)
    new_state: LeafState = mode.after_budget_change(new, state)
    return new, new_state


def _rechoose_grid(
    config: AccountingConfig,
    state: FilterState,
    eps: Decimal,
    dlt: Decimal,
    final_conversion_delta: object,
    workload: object,
    anchored: bool,
) -> tuple[AccountingConfig, FilterState]:
    if not isinstance(config, RDPConfig):
        raise ConfigError(
            "a workload chooses the order grid of an 'rdp' dataset; this dataset's mode is "
            f"'{config.mode}' (on a split dataset, give it in the sub-budget's accounting)"
        )
    assert isinstance(state, RDPState)
    if state.delta != 0 or any(state.rdp) or state.first is not None:
        raise InvalidTransition(
            "AlreadySpent",
            "the order grid can only be re-chosen before the first charge: its weights must be "
            "fixed before anything is spent",
        )
    # the dataset keeps the without-replacement bound it was created with
    acc: dict[str, Any] = {"mode": "rdp", "workload": workload, "wor_bound": config.wor_bound}
    if final_conversion_delta is not None:
        acc["final_conversion_delta"] = final_conversion_delta
    elif config.final_conversion_delta != config.delta:
        acc["final_conversion_delta"] = fmt(config.final_conversion_delta)
    # replaying an entry of a version before 1.4.0 makes the grid as that version made it; the
    # PLD branch's split stays the one the dataset was created with (none before 1.6.0)
    anchored = anchored or config.anchor is not None
    new = rdp_mode.parse(eps, dlt, config.relation, acc, anchored, config.branch)
    return new, initial_state(new)


def explain_change(
    before: AccountingConfig,
    after: AccountingConfig,
    state: FilterState,
    *,
    sub_budget: str | None = None,
) -> str:
    """What a budget change did to the filter's capacity, in words a curator reads in the
    response: which rule applied and what the dataset can still admit (``docs/accounting.md``,
    *Budget changes*)."""
    if isinstance(after, SplitConfig):
        assert isinstance(before, SplitConfig) and isinstance(state, SplitState)
        if sub_budget is None:
            return (
                f"the dataset's total is now ({fmt(after.epsilon)}, {fmt(after.delta)}); it bounds "
                "the sum of the sub-budgets, each of which keeps its own filter"
            )
        leaf_before, leaf_after = before.sub_budget(sub_budget), after.sub_budget(sub_budget)
        return f"sub-budget '{sub_budget}': " + explain_change(
            leaf_before, leaf_after, state.get(sub_budget)
        )
    assert not isinstance(before, SplitConfig) and not isinstance(state, SplitState)
    mode = leaf_mode(after)
    remaining = mode.status(after, state)["remaining"]
    figures = ", ".join(
        f"{k} {_short(v)}" for k, v in remaining.items() if k != "delta" or v != "0"
    )
    if isinstance(after, RDPConfig):
        figures = (
            "up to each order's threshold, the highest level of the order's ladder whose "
            "reading is at most ε (status.remaining)"
        )
    left = f"it can still admit {figures}"
    if isinstance(after, BasicConfig):
        return (
            "basic composition holds along every transcript, so the new budget applies as it is; "
            + left
        )
    anchor = getattr(after, "anchor", None)
    if anchor is None or state == initial_state(after):
        return "nothing was charged yet: the filter was made anew for this budget; " + left
    reading = mode.odometer(after, state) if mode.odometer is not None else None
    parts = [
        f"the thresholds, ladder and δ shares stay those of the creation budget "
        f"({fmt(anchor.epsilon)}, {fmt(anchor.delta)}); ε = {fmt(after.epsilon)} now caps the "
        f"certified reading"
        + (f", which stays {fmt(reading.epsilon)}" if reading is not None else "")
        + f"; {left}"
    ]
    fresh = _fresh_capacity(after)
    if after.epsilon > anchor.epsilon:
        parts.append(
            "a raise climbs the ladder above the creation threshold, whose levels hold 2 % of the "
            "conversion δ, so it admits less than a dataset created with this budget would"
            + (f" (which would start at {fresh})" if fresh else "")
        )
    if after.delta > anchor.delta:
        parts.append("the δ raise funds nothing in this mode: its δ shares were fixed at creation")
    if getattr(state, "delta", 0) > 0 and after.epsilon > anchor.epsilon:
        parts.append(
            "approximate declarations were admitted, which only the creation filter covers: "
            "the filter stays within its creation threshold"
        )
    return "; ".join(parts)


def _short(text: object) -> str:
    """An amount for a sentence: six significant digits, rounded down (what is left is never
    overstated; the one rounding for display, :func:`~.exact.rounded`); the exact figures are
    in the status."""
    if not isinstance(text, str):
        return str(text)
    d = Decimal(text)
    if not d.is_finite() or d == 0:
        return text
    return fmt(rounded(d, up=False, digits=6))


def _fresh_capacity(config: LeafConfig) -> str | None:
    """What a filter made anew for ``config``'s budget would admit in all, in the mode's unit
    (a scalar unit only)."""
    if isinstance(config, ZCDPConfig):
        fresh_z = zcdp_mode.make(
            config.epsilon, config.delta, config.relation, config.final_conversion_delta
        )
        return f"rho {_short(fmt(fresh_z.rho_budget))}"
    if isinstance(config, GDPConfig):
        fresh_g = gdp_mode.make(config.epsilon, config.delta, config.relation)
        return f"mu_squared {_short(fmt(fresh_g.mu_squared_budget))}"
    return None


def recheck_dead(config: AccountingConfig, state: FilterState) -> FilterState:
    """The state after a budget change: in ``rdp``, orders over the new thresholds die and
    orders dead for good stay dead; other modes are unchanged."""
    if isinstance(config, SplitConfig):
        assert isinstance(state, SplitState)
        return split_mode.after_budget_change(config, state)
    assert not isinstance(state, SplitState)
    new_state: LeafState = leaf_mode(config).after_budget_change(config, state)
    return new_state


# ---------------------------------------------------------------------------- status
def status(config: AccountingConfig, state: FilterState) -> dict[str, Any]:
    """Budget status in the mode's own units and as (ε, δ).

    ``odometer`` is the certified reading of what has been released so far, valid at any
    stopping time the analysts choose adaptively, never above the target
    (:mod:`odometer_core.accounting.odometer`). ``spent_eps_delta`` in ``zcdp``/``rdp``/``gdp``
    is a conversion of the running totals as if the history had been fixed in advance,
    labelled ``certified: false, estimate: true``."""
    if isinstance(config, SplitConfig):
        assert isinstance(state, SplitState)
        return split_mode.status(config, state)
    assert not isinstance(state, SplitState)
    return leaf_status(config, state)


def eps_delta_guarantee(config: AccountingConfig) -> dict[str, str]:
    """The certified (ε, δ) of everything ever released: the filter target."""
    return {"epsilon": fmt(config.epsilon), "delta": fmt(config.delta)}


# ---------------------------------------------------------------------------- JSON codecs
def config_to_json(config: AccountingConfig) -> dict[str, Any]:
    """Lossless JSON of a configuration (floats as ``repr`` text, amounts as decimal text)."""
    if isinstance(config, SplitConfig):
        return split_mode.config_to_json(config)
    return leaf_config_to_json(config)


def config_from_json(obj: Mapping[str, Any]) -> AccountingConfig:
    """Inverse of :func:`config_to_json` (derived values are read back, not recomputed, so a
    replay uses exactly the thresholds that were in force)."""
    if obj["mode"] == "split":
        return split_mode.config_from_json(obj)
    return leaf_config_from_json(obj)


def state_to_json(state: FilterState) -> dict[str, Any]:
    """Lossless JSON of a filter state."""
    if isinstance(state, SplitState):
        return split_mode.state_to_json(state)
    return leaf_state_to_json(state)


def state_from_json(config: AccountingConfig, obj: Mapping[str, Any]) -> FilterState:
    """Inverse of :func:`state_to_json` for a state of ``config``'s mode."""
    if isinstance(config, SplitConfig):
        return split_mode.state_from_json(config, obj)
    state: LeafState = leaf_mode(config).state_from_json(obj)
    return state


__all__ = [
    "DEFAULT_RDP_ORDERS",
    "MODES",
    "TRANSITION_CODES",
    "AccountingConfig",
    "BasicConfig",
    "BasicState",
    "ConfigError",
    "Decision",
    "FilterState",
    "GDPConfig",
    "GDPState",
    "InvalidTransition",
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
    "explain_change",
    "initial_state",
    "make_config",
    "recheck_dead",
    "settle",
    "state_from_json",
    "state_to_json",
    "status",
    "supports",
]
