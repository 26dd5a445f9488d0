"""The ``rdp`` filter of a configuration without its PLD branch: its ladder on the whole of δ_c,
as configurations stored before accounting 1.6.0 have it. Tests whose independent computations
are of the ladder alone run on it; the reading as the smallest of the statements, PLD branch
included, is tests/accounting/test_statements.py's. Likewise :func:`ladder_1_4` for ``zcdp``
and ``gdp``."""

from __future__ import annotations

from dataclasses import replace
from typing import overload

from odometer_core.accounting.modes.gdp import GDPConfig
from odometer_core.accounting.modes.gdp import make as make_gdp
from odometer_core.accounting.modes.rdp import RDPConfig
from odometer_core.accounting.modes.rdp import make as make_rdp
from odometer_core.accounting.modes.zcdp import ZCDPConfig
from odometer_core.accounting.modes.zcdp import make as make_zcdp


def ladder_only(config: RDPConfig) -> RDPConfig:
    """``config`` made again on its grid and weights with ``branch`` None (the same rule for
    its weights and the same without-replacement bound), and without the shaped ladder of
    accounting 1.8.0 (its levels' own orders dropped: the per-order ladders of 1.4.0–1.7.0)."""
    held = [i for i, w in enumerate(config.weights) if w > 0 or config.shape is None]
    alone = make_rdp(
        config.epsilon,
        config.delta,
        config.relation,
        config.final_conversion_delta,
        tuple(config.orders[i] for i in held),
        tuple(config.weights[i] for i in held),
    )
    return replace(
        alone,
        weights_rule=config.weights_rule,
        wor_bound=config.wor_bound,
        workload=config.workload,
    )


@overload
def ladder_1_4(config: ZCDPConfig) -> ZCDPConfig: ...
@overload
def ladder_1_4(config: GDPConfig) -> GDPConfig: ...
def ladder_1_4(config: ZCDPConfig | GDPConfig) -> ZCDPConfig | GDPConfig:
    """A ``zcdp`` or ``gdp`` ``config`` made again with the ladder of accounting 1.4.0–1.6.0
    (no shape), as configurations stored before 1.7.0 have it: tests whose independent
    computations are of that documented ladder run on it; the shaped ladder of 1.7.0 is
    tests/accounting/test_shaped_ladders.py's."""
    if isinstance(config, ZCDPConfig):
        return make_zcdp(
            config.epsilon, config.delta, config.relation, config.final_conversion_delta
        )
    return make_gdp(config.epsilon, config.delta, config.relation)
