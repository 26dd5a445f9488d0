"""The stored form of an ``rdp`` filter: its configuration and state, their defaults and their
JSON (the filter itself is :mod:`odometer_core.accounting.modes.rdp`, which re-exports every
name here).

From accounting 1.6.0 a configuration also carries its PLD branch (``branch``: the δ split of
:class:`~odometer_core.accounting.modes.statements.PldBranch`), and a state the branch's running
statement (``pld``: the count of declarations and Σε_i); both are absent on configurations
stored before, whose states are written as before.

From accounting 1.8.0 a configuration on the default grid without a workload also carries its
ladder's shape (``ladder``, :class:`~odometer_core.accounting.odometer.LadderShape`) and the
orders only its ladder's levels use (weight 0 at level 1), and a state the first declaration's
curve (``design``), from which the levels' orders and thresholds follow
(:mod:`odometer_core.accounting.modes.rdp_shaped`); both are absent on configurations stored
before, whose states are written as before.

From accounting 1.10.0 such a configuration also says ``"ladder_rule": "first_declaration"``
and its state records the ladder's shape the first declaration chose (``ladder``,
:mod:`odometer_core.accounting.modes.rdp_choice`); both are absent on configurations stored
before, which keep the shape they record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Literal

import numpy as np

from odometer_core.accounting.declarations import Relation
from odometer_core.accounting.exact import ZERO, fmt
from odometer_core.accounting.modes.common import Anchor, ConfigError, float_text
from odometer_core.accounting.modes.rdp_choice import FIRST_DECLARATION
from odometer_core.accounting.modes.rdp_shaped import LEVELS_1_8, WHOLE_REPEATS
from odometer_core.accounting.modes.statements import NO_BRANCH, BranchState, PldBranch, ladder_pool
from odometer_core.accounting.modes.workload import WorkloadChoice
from odometer_core.accounting.modes.zcdp import ladder_shape
from odometer_core.accounting.odometer import LadderShape

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

#: Default weights of new ``rdp`` datasets on :data:`DEFAULT_RDP_ORDERS` (exact decimals, sum
#: 1): 0.022 on each order, more on 5, 8, 16, 20, 32, 48 and 64. Chosen on the workload table of
#: ``docs/accounting.md`` (*Grids and weights*: DP-SGD at six (q, σ), Gaussian, Laplace, pure ε,
#: at five budgets) to raise the geometric mean of what the filter admits, relative to one ideal
#: order holding all of δ_c, from 65 % (equal weights) to 71 %, while no workload of the table
#: loses more than 3 % against equal weights. Datasets created before keep their stored (equal)
#: weights: a stored configuration never changes meaning.
DEFAULT_RDP_WEIGHTS: Final[tuple[str, ...]] = (
    "0.022",
    "0.022",
    "0.022",
    "0.022",
    "0.022",
    "0.022",
    "0.07",
    "0.022",
    "0.15",
    "0.022",
    "0.022",
    "0.1",
    "0.236",
    "0.15",
    "0.06",
    "0.036",
)


MAX_RDP_ORDERS: Final = 64


WOR_WBK19: Final = "wbk19"
"""Without-replacement Gaussian charged by Wang–Balle–Kasiviswanathan 2019 Thm 27 alone."""

WOR_TIGHT: Final = "wbk19+bebp24"
"""… by the smaller of that and Birrell–Ebrahimi–Behnia–Pacheco 2024 Thm 3.4 at each integer
order (:mod:`odometer_core.accounting.fswor`): the default of datasets created since."""

WOR_BOUNDS: Final = (WOR_WBK19, WOR_TIGHT)

WEIGHTS_FIRST: Final = "first_declaration"
"""The ``order_weights`` of an ``rdp`` configuration created from accounting 1.5.0 on with the
default grid and no workload: until something is admitted the weights are
:data:`DEFAULT_RDP_WEIGHTS`; the first declaration admitted fixes them for good as a declared
workload of repeats of it would (:func:`first_choice`, :func:`in_force`). Every filter made from
such a configuration (a dataset, each block, a quota, a cap) chooses at its own first admission."""

WEIGHTS_FIXED: Final = "fixed"
"""The weights stored in the configuration, in force from creation (configurations stored
before 1.5.0, which lack the field, explicit grids and declared workloads)."""

FIRST_DEFAULT: Final = "default"
"""The choice of a first declaration that charges nothing at any order: the default weights."""


@dataclass(frozen=True, slots=True)
class RDPConfig:
    """``rdp``: grid Λ, weights w_α, δ_B = δ_A + δ_c and per-order thresholds
    B(α) = ε_B + [log(w_α δ_c) + log(α−1) − α log(1−1/α)]/(α−1) (rounded down; −∞ = dropped)."""

    epsilon: Decimal
    delta: Decimal
    relation: Relation
    final_conversion_delta: Decimal
    delta_approx: Decimal
    orders: tuple[float, ...]
    weights: tuple[float, ...]
    thresholds: tuple[float, ...]
    #: the workload the grid was chosen for (``None``: default or explicit grid)
    workload: WorkloadChoice | None = None
    #: how a Gaussian subsampled without replacement is charged: :data:`WOR_TIGHT` (new datasets)
    #: or :data:`WOR_WBK19` (datasets created before it, whose stored configuration lacks it)
    wor_bound: str = WOR_WBK19
    #: the creation target (accounting ≥ 1.4.0; ``None`` before): ``thresholds_top`` are the
    #: thresholds derived from it, level 1 of each order's ladder, never derived again;
    #: ``thresholds`` are what the budget in force admits (the same until a budget change)
    anchor: Anchor | None = None
    thresholds_top: tuple[float, ...] | None = None
    #: :data:`WEIGHTS_FIRST` (the weights are chosen at the first admission) or
    #: :data:`WEIGHTS_FIXED` (the stored ones; every configuration stored before 1.5.0)
    weights_rule: str = WEIGHTS_FIXED
    #: under :data:`WEIGHTS_FIRST` after the choice, the weights of the ladders' levels other
    #: than 1 (the configuration's stored weights; ``None``: ``weights`` at every level)
    others: tuple[float, ...] | None = None
    #: the PLD branch's δ split (accounting ≥ 1.6.0; ``None`` before); the stored thresholds
    #: are the ladder's on the whole of δ_c, in force until a first declaration keeps the branch
    branch: PldBranch | None = None
    #: derived, never stored: the filter in force once the first declaration kept the branch
    #: (the ladder then holds :attr:`ladder_delta`, the branch the rest of δ_c)
    branch_on: bool = False
    #: the ladder's shape fixed at creation (accounting ≥ 1.8.0; ``None``: the 1.4.0 ladder)
    shape: LadderShape | None = None
    #: how a ``shape``'s levels k ≠ 1 are placed (:mod:`.rdp_shaped`): :data:`.LEVELS_1_8`
    #: (absent, accounting 1.8.0) or :data:`.WHOLE_REPEATS` (accounting ≥ 1.9.0)
    levels: str = LEVELS_1_8
    #: derived, never stored: under a ``shape``, the first declaration's curve that places the
    #: ladder's levels (:mod:`.rdp_shaped`), once the first admission recorded it
    design: tuple[float, ...] | None = None
    #: :data:`.rdp_choice.FIRST_DECLARATION` (accounting ≥ 1.10.0): the first admission
    #: chooses the ladder's shape (:func:`.rdp_choice.choose`) and the state records it;
    #: ``None``: ``shape`` is the ladder in force (configurations stored before)
    ladder_rule: str | None = None
    mode: Literal["rdp"] = "rdp"

    @property
    def ladder_delta(self) -> Decimal:
        """The ladder's pool: δ_c, less the PLD branch's pool where the branch is on."""
        return ladder_pool(self.branch if self.branch_on else None, self.final_conversion_delta)

    @property
    def tight_wor(self) -> bool:
        return self.wor_bound == WOR_TIGHT

    @property
    def orders_array(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        return np.asarray(self.orders, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class RDPState:
    """S(α) per order (float64, rounded up on every sum), dead orders, Σδ, and under
    :data:`WEIGHTS_FIRST` the choice the first admitted declaration made (``first``: the order
    given the workload's share, as text, or :data:`FIRST_DEFAULT`; ``None`` until then), and
    from accounting 1.6.0 the PLD branch's count and Σε_i (``pld``)."""

    rdp: tuple[float, ...]
    dead: tuple[bool, ...]
    delta: Decimal = ZERO
    first: str | None = None
    #: the PLD branch's running statement (configurations with a ``branch`` only)
    pld: BranchState = NO_BRANCH
    #: the first declaration's curve on the grid (configurations with a ``shape`` only, from
    #: the first admission on): what places the ladder's levels (:mod:`.rdp_shaped`)
    design: tuple[float, ...] | None = None
    #: the shape the first declaration chose (configurations with a ``ladder_rule`` only, from
    #: the first admission on; ``None`` before it and for a curve that places no level)
    ladder: LadderShape | None = None


# ---------------------------------------------------------------------------- codec
def config_to_json(config: RDPConfig) -> dict[str, Any]:
    out: dict[str, Any] = {
        "final_conversion_delta": fmt(config.final_conversion_delta),
        "delta_approx": fmt(config.delta_approx),
        "orders": [float_text(a) for a in config.orders],
        "weights": [float_text(w) for w in config.weights],
        "thresholds": [float_text(b) for b in config.thresholds],
    }
    if config.workload is not None:  # absent on configurations without one (and older ones)
        out["workload"] = config.workload.to_json()
    if config.wor_bound != WOR_WBK19:  # absent on configurations created before 1.3.0
        out["wor_bound"] = config.wor_bound
    if config.anchor is not None and config.thresholds_top is not None:  # absent before 1.4.0
        top = [float_text(b) for b in config.thresholds_top]
        out["anchor"] = {**config.anchor.to_json(), "top": top}
    if config.weights_rule != WEIGHTS_FIXED:  # absent on configurations stored before 1.5.0
        out["order_weights"] = config.weights_rule
    if config.branch is not None:  # absent on configurations stored before 1.6.0
        out["branch"] = config.branch.to_json()
    if config.shape is not None:  # absent on configurations stored before 1.8.0
        out["ladder"] = config.shape.to_json()
    if config.levels != LEVELS_1_8:  # absent on configurations stored before 1.9.0
        out["levels"] = config.levels
    if config.ladder_rule is not None:  # absent on configurations stored before 1.10.0
        out["ladder_rule"] = config.ladder_rule
    return out


def config_from_json(
    eps: Decimal, dlt: Decimal, rel: Relation, obj: Mapping[str, Any]
) -> RDPConfig:
    """Derived values (thresholds) are read back, not recomputed, so a replay uses exactly the
    thresholds that were in force; a recorded ``workload`` is read back too (it only describes
    why the grid was chosen)."""
    workload = obj.get("workload")
    anchor = obj.get("anchor")
    weights_rule = str(obj.get("order_weights", WEIGHTS_FIXED))
    if weights_rule not in (WEIGHTS_FIRST, WEIGHTS_FIXED):
        raise ConfigError(f"unknown order_weights rule {weights_rule!r}")
    levels = obj.get("levels", LEVELS_1_8)
    if levels not in (LEVELS_1_8, WHOLE_REPEATS) or (
        levels == WHOLE_REPEATS and obj.get("ladder") is None
    ):
        raise ConfigError(f"unknown levels placement {levels!r} (or no ladder to place)")
    rule = obj.get("ladder_rule")
    if rule is not None and (rule != FIRST_DECLARATION or levels != WHOLE_REPEATS):
        raise ConfigError(
            f"ladder_rule must be '{FIRST_DECLARATION}', on a ladder at whole repeats"
        )
    return RDPConfig(
        eps,
        dlt,
        rel,
        Decimal(obj["final_conversion_delta"]),
        Decimal(obj["delta_approx"]),
        tuple(float(a) for a in obj["orders"]),
        tuple(float(w) for w in obj["weights"]),
        tuple(float(b) for b in obj["thresholds"]),
        None if workload is None else WorkloadChoice.from_json(workload),
        str(obj.get("wor_bound", WOR_WBK19)),
        Anchor.from_json(anchor),
        None if anchor is None else tuple(float(b) for b in anchor["top"]),
        weights_rule,
        branch=_branch(obj.get("branch")),
        shape=ladder_shape(obj.get("ladder")),
        levels=str(levels),
        ladder_rule=None if rule is None else FIRST_DECLARATION,
    )


def _branch(raw: object) -> PldBranch | None:
    if raw is not None and not isinstance(raw, Mapping):
        raise ConfigError("branch must be an object")
    try:
        return PldBranch.from_json(raw)
    except (ValueError, KeyError, ArithmeticError) as bad:
        raise ConfigError(f"invalid PLD branch: {bad}") from None


def state_to_json(state: RDPState) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rdp": [float_text(s) for s in state.rdp],
        "dead": list(state.dead),
        "delta": fmt(state.delta),
    }
    if state.first is not None:  # the first declaration's choice (:data:`WEIGHTS_FIRST`)
        out["first"] = state.first
    if state.pld != NO_BRANCH:  # the PLD branch (configurations of 1.6.0 on)
        out["pld"] = state.pld.to_json()
    if state.design is not None:  # the first declaration's curve (configurations of 1.8.0 on)
        out["design"] = [float_text(c) for c in state.design]
    if state.ladder is not None:  # the shape the first declaration chose (1.10.0 on)
        out["ladder"] = state.ladder.to_json()
    return out


def state_from_json(obj: Mapping[str, Any]) -> RDPState:
    first = obj.get("first")
    design = obj.get("design")
    return RDPState(
        tuple(float(s) for s in obj["rdp"]),
        tuple(bool(d) for d in obj["dead"]),
        Decimal(obj["delta"]),
        None if first is None else str(first),
        BranchState.from_json(obj.get("pld")),
        None if design is None else tuple(float(c) for c in design),
        ladder_shape(obj.get("ladder")),
    )
