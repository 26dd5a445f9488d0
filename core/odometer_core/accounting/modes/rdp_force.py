"""The filter an ``rdp`` state is decided by, once its first declaration chose (split out of
:mod:`odometer_core.accounting.modes.rdp`, whose :func:`~odometer_core.accounting.modes.rdp.
in_force` puts these together and remembers its last answer).

Under :data:`~.rdp_config.WEIGHTS_FIRST` the first admitted declaration chooses the order whose
ladder holds :data:`~.workload.WORKLOAD_SHARE` of δ_c at level 1 (:func:`first_choice`); from
accounting 1.6.0 whether the PLD branch keeps its share (:func:`_with_branch`,
:func:`_ladder_only`, measured by :func:`_repeats`); from 1.8.0 the levels its curve places
(``design``, :mod:`.rdp_shaped`: :func:`_statements`); from 1.10.0 the ladder's shape
(:func:`_ladder_choice`, :mod:`.rdp_choice`). Each is a deterministic function of the
configuration and that declaration, chosen before any output, recorded in the state and
recomputed by replay; a budget change never chooses again but caps each order's ladder at the
new ε (:func:`_caps`). ``docs/accounting.md``, *Weights chosen from the first declaration*.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from decimal import Decimal

import numpy as np
import numpy.typing as npt

from odometer_core.accounting import odometer as odo
from odometer_core.accounting.exact import DOWN, ONE, to_float_down
from odometer_core.accounting.modes import rdp_choice
from odometer_core.accounting.modes import rdp_shaped as shaped
from odometer_core.accounting.modes.common import float_text
from odometer_core.accounting.modes.rdp_config import (
    FIRST_DEFAULT,
    WEIGHTS_FIRST,
    RDPConfig,
)
from odometer_core.accounting.modes.rdp_levels import (
    _AtOrder,
    _order_pool,
    _rdp_thresholds,
    best_order,
)
from odometer_core.accounting.modes.workload import WORKLOAD_SHARE
from odometer_core.accounting.odometer import LadderShape

FloatArray = npt.NDArray[np.float64]


def order_ladder(config: RDPConfig, i: int) -> odo.AnchoredLadder | None:
    """The ladder of order i fixed at creation: top B(α), δ pool w_α·δ_c, CKS20 Prop. 12 at
    α; ``None`` for an order dropped from the grid."""
    assert config.anchor is not None and config.thresholds_top is not None
    top = config.thresholds_top[i]
    if not top > 0:
        return None
    dc = to_float_down(config.ladder_delta)
    pool = _order_pool(config.weights[i], dc)
    others = None if config.others is None else _order_pool(config.others[i], dc)
    return odo.AnchoredLadder(
        top, pool, config.anchor.epsilon, _AtOrder(config.orders[i]), others, config.shape
    )


def first_choice(config: RDPConfig, curve: FloatArray) -> str:
    """The choice :data:`WEIGHTS_FIRST` makes at the first admission, of a declaration of RDP
    ``curve``: the order of the grid where repeats of it fit the most times holding
    :data:`WORKLOAD_SHARE` of δ_c (:func:`choose_grid`'s rule on the dataset's own grid), or
    :data:`FIRST_DEFAULT` for a curve that is 0 at every order. A deterministic function of the
    configuration and the declaration, both fixed before any output (``docs/accounting.md``,
    *Weights chosen from the first declaration*)."""
    assert config.anchor is not None
    eps, dc = config.anchor.epsilon, config.ladder_delta
    held = _level_one(config)
    orders = tuple(config.orders[i] for i in held)
    best = best_order(curve[list(held)], eps, dc, orders, to_float_down(WORKLOAD_SHARE))
    return FIRST_DEFAULT if best is None else float_text(best)


def _level_one(config: RDPConfig) -> tuple[int, ...]:
    """The orders that hold a level 1 (stored weight > 0): all of them, but for the levels'
    own orders of a shaped configuration (:data:`~.rdp_shaped.LEVEL_ORDERS`)."""
    weights = config.weights if config.others is None else config.others
    return tuple(i for i, w in enumerate(weights) if w > 0)


def _weights_in_force(
    config: RDPConfig,
    first: str | None,
    design: tuple[float, ...] | None = None,
    ladder: LadderShape | None = None,
) -> RDPConfig:
    """The weights part of :func:`in_force`, on a filter whose split is decided (and, for a
    shaped configuration, the levels the first declaration's curve ``design`` places, on the
    shape ``ladder`` it chose under a ``ladder_rule``: :mod:`.rdp_choice`)."""
    if config.weights_rule != WEIGHTS_FIRST or first in (None, FIRST_DEFAULT):
        return config
    if config.others is not None:  # already the filter in force
        return config
    if config.ladder_rule is not None and ladder is not None:
        config = replace(config, shape=ladder)
    return _chosen(config, first, design if config.shape is not None else None)


def _ladder_only(config: RDPConfig) -> RDPConfig:
    """The filter whose first declaration turned the PLD branch off
    (:func:`.statements.opening`): the stored one, whose ladder holds the whole of δ_c,
    without the branch."""
    return replace(config, branch=None)


@functools.lru_cache(maxsize=256)
def _with_branch(config: RDPConfig) -> RDPConfig:
    """The filter whose first declaration kept the PLD branch: the ladders' tops at the
    creation target on the ladder's pool δ_c − P (:attr:`RDPConfig.ladder_delta`), capped by
    the budget in force."""
    assert config.anchor is not None
    on = replace(config, branch_on=True)
    top = _rdp_thresholds(
        config.anchor.epsilon, on.ladder_delta, config.orders, config.weights, True, config.shape
    )
    on = replace(on, thresholds=top, thresholds_top=top)
    if config.epsilon == config.anchor.epsilon:
        return on
    return replace(on, thresholds=_caps(on, config.epsilon))


@functools.lru_cache(maxsize=256)
def _chosen(config: RDPConfig, first: str, design: tuple[float, ...] | None = None) -> RDPConfig:
    """The filter under the weights ``first`` chose (and, under a shape, the levels the first
    declaration's curve ``design`` places: :mod:`.rdp_shaped`)."""
    assert config.anchor is not None
    weights, top = _level_one_tops(config, first)
    chosen = replace(
        config,
        weights=weights,
        thresholds=top,
        thresholds_top=top,
        others=config.weights,
        design=design,
    )
    if config.epsilon == config.anchor.epsilon and design is None:
        return chosen
    return replace(chosen, thresholds=_caps(chosen, config.epsilon))


def _level_one_tops(config: RDPConfig, first: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The weights ``first`` chose and level 1's thresholds B(α) under them (at the creation
    target, on the ladder's pool at the shape's level-1 share)."""
    assert config.anchor is not None
    best = config.orders.index(float(first))
    held = _level_one(config)
    rest = to_float_down(DOWN.divide(ONE - WORKLOAD_SHARE, Decimal(len(held) - 1)))
    weights = tuple(
        to_float_down(WORKLOAD_SHARE) if i == best else rest if i in held else 0.0
        for i in range(len(config.orders))
    )
    top = _rdp_thresholds(
        config.anchor.epsilon, config.ladder_delta, config.orders, weights, True, config.shape
    )
    return weights, top


def _ladder_choice(config: RDPConfig, first: str | None, design: tuple[float, ...]) -> LadderShape:
    """The shape the first declaration (its order ``first``, its curve ``design``) chooses
    under a ``ladder_rule`` (:func:`.rdp_choice.choose`): from level 1's thresholds under the
    weights it chose (the same in every candidate: level 1 holds 0.9 of the pool in each), the
    ladder's pool and the creation target alone, before any output."""
    assert config.anchor is not None and first is not None
    _, tops = _level_one_tops(config, first)
    pool = to_float_down(config.ladder_delta)
    return rdp_choice.chosen(config.orders, tops, design, pool, config.anchor.epsilon)


def _repeats(config: RDPConfig, curve: FloatArray) -> float:
    """How many repeats of a declaration of RDP ``curve`` the ladder on the whole of δ_c admits
    at its best order holding :data:`WORKLOAD_SHARE` of δ_c (:func:`first_choice`'s measure;
    ∞ for a curve that is 0 at every order)."""
    assert config.anchor is not None
    share = to_float_down(WORKLOAD_SHARE)
    eps, dc = config.anchor.epsilon, config.final_conversion_delta
    held = _level_one(config)
    orders = tuple(config.orders[i] for i in held)
    tops = _rdp_thresholds(eps, dc, orders, (share,) * len(orders))
    pairs = zip(tops, curve[list(held)].tolist(), strict=True)
    ratios = [b / c if c > 1e-300 else math.inf for b, c in pairs if b > 0]
    return max(ratios, default=0.0)


def _caps(config: RDPConfig, eps: Decimal) -> tuple[float, ...]:
    """Each order's threshold under the budget ε: the highest level of its ladder whose reading
    is at most ε (its top at level 1)."""
    assert config.anchor is not None and config.thresholds_top is not None
    if config.design is not None and config.shape is not None:
        found = _statements(config)
        return shaped.caps(found, config.thresholds_top, eps, config.anchor.epsilon)
    caps: list[float] = []
    for i, top in enumerate(config.thresholds_top):
        order = order_ladder(config, i)
        cap = None if order is None else order.cap(eps)
        caps.append(-math.inf if cap is None else top if cap[0] == 1 else cap[1])
    return tuple(caps)


def _statements(config: RDPConfig) -> tuple[shaped.Statement, ...]:
    """The levels k ≠ 1 of a shaped filter in force (:func:`.rdp_shaped.statements`)."""
    assert config.shape is not None and config.design is not None
    assert config.thresholds_top is not None
    pool = to_float_down(config.ladder_delta)
    whole = config.levels == shaped.WHOLE_REPEATS
    return shaped.statements(
        config.orders, config.thresholds_top, config.design, pool, config.shape, whole
    )
