"""The accounting core: a pure library (stdlib, numpy, scipy; dp_accounting for PLD only).

Nothing here imports the web or database layers (checked by ``tests/accounting/test_purity.py``
and the layer contracts). One module per accounting mode in :mod:`odometer_core.accounting.modes`;
public
entry points: :func:`parse_declaration`, :func:`make_config`, :func:`initial_state`,
:func:`supports`, :func:`admit`, :func:`settle`, :func:`cancel`, :func:`change_budget`,
:func:`status`, and the lossless JSON codecs of configurations and states.
"""

from odometer_core.accounting.declarations import (
    KINDS,
    Declaration,
    DeclarationError,
    OdpPartition,
    parse_declaration,
)
from odometer_core.accounting.exact import AmountError, fmt, parse_amount
from odometer_core.accounting.filters import (
    TRANSITION_CODES,
    AccountingConfig,
    Capacity,
    ConfigError,
    Decision,
    FilterState,
    InvalidTransition,
    Reservation,
    admit,
    cancel,
    capacity,
    change_budget,
    config_from_json,
    config_to_json,
    eps_delta_guarantee,
    explain_change,
    initial_state,
    make_config,
    settle,
    state_from_json,
    state_to_json,
    status,
    supports,
)
from odometer_core.accounting.modes.common import UnsupportedInMode
from odometer_core.accounting.outputs import cell_from_output

#: Recorded in every ledger row: a replay must use the same accounting rules (entries of 1.0.0,
#: whose only difference is a field name, are read through :mod:`odometer_core.accounting.legacy`;
#: 1.1.0 to 1.9.0 entries are read as written — see ``legacy.VERSION_1_1`` to
#: ``legacy.VERSION_1_9`` for how each later version differs).
ACCOUNTING_VERSION = "1.10.0"

__all__ = [
    "ACCOUNTING_VERSION",
    "KINDS",
    "TRANSITION_CODES",
    "AccountingConfig",
    "AmountError",
    "Capacity",
    "ConfigError",
    "Decision",
    "Declaration",
    "DeclarationError",
    "FilterState",
    "InvalidTransition",
    "OdpPartition",
    "Reservation",
    "UnsupportedInMode",
    "admit",
    "cancel",
    "capacity",
    "cell_from_output",
    "change_budget",
    "config_from_json",
    "config_to_json",
    "eps_delta_guarantee",
    "explain_change",
    "fmt",
    "initial_state",
    "make_config",
    "parse_amount",
    "parse_declaration",
    "settle",
    "state_from_json",
    "state_to_json",
    "status",
    "supports",
]
