"""The ``rdp`` filter of a configuration without its PLD branch: its ladder on the whole of δ_c,
as configurations stored before accounting 1.6.0 have it. Tests whose independent computations
are of the ladder alone run on it; the reading as the smallest of the statements, PLD branch
included, is tests/accounting/test_statements.py's."""

from __future__ import annotations

from dataclasses import replace

from odometer_core.accounting.modes.rdp import RDPConfig
from odometer_core.accounting.modes.rdp import make as make_rdp


def ladder_only(config: RDPConfig) -> RDPConfig:
    """``config`` made again on its grid and weights with ``branch`` None (the same rule for
    its weights and the same without-replacement bound)."""
    alone = make_rdp(
        config.epsilon,
        config.delta,
        config.relation,
        config.final_conversion_delta,
        config.orders,
        config.weights,
    )
    return replace(
        alone,
        weights_rule=config.weights_rule,
        wor_bound=config.wor_bound,
        workload=config.workload,
    )
