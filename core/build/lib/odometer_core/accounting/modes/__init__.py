"""The accounting modes, one module each (see :mod:`odometer_core.accounting.modes.common` for what
a
mode provides). The leaf modes are registered here; ``split`` composes them."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
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
    """The configuration of a leaf mode named by ``acc["mode"]`` (default ``basic``)."""
    mode = LEAF_MODES.get(str(acc.get("mode", "basic")))
    if mode is None:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}")
    config: LeafConfig = mode.parse(eps, dlt, rel, acc)
    return config


def leaf_status(config: LeafConfig, state: LeafState) -> dict[str, Any]:
    """A leaf filter's status: mode, budget, then the mode's own figures."""
    return {
        "mode": config.mode,
        "budget": {"epsilon": fmt(config.epsilon), "delta": fmt(config.delta)},
        **leaf_mode(config).status(config, state),
    }


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
    "budget",
    "leaf_config_from_json",
    "leaf_config_to_json",
    "leaf_mode",
    "leaf_state_to_json",
    "leaf_status",
    "make_leaf",
]
