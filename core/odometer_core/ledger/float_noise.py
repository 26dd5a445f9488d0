"""Replay's rule for charges computed in floating point by a PLD (``docs/ledger.md``, *Charges
computed in floating point*).

A ``basic`` charge of a DP-SGD run, a Poisson-subsampled Gaussian or a ``composed`` list comes
from dp_accounting's privacy-loss distribution: an FFT convolution in floats, whose last digits
differ between machines (the PipelineDP pipeline's joint charge reads 0.99999426408817471135 on
one and 0.9999942640874297517 on another, 7·10⁻¹³ apart). The ledger records such a charge to
20 digits, so an auditor recomputing it elsewhere may find a charge that differs from the
recorded one in digits that mean nothing.

The rule: for these declarations only, and in a ``basic`` filter, a recorded charge whose δ is
the recomputed δ exactly and whose ε is within :data:`TOLERANCE` (relative) of the recomputed ε
is the mechanism's charge; the entry is then decided again *with the recorded charge*
(:func:`admit_as_recorded`), so the outcome, the state after it and every later entry are
checked exactly against what the service admitted. Anything further off is still a mismatch,
and every other charge (closed forms in exact decimals) is still compared exactly.

Why this is sound: the recorded charge is what the service admitted, and the sums of the ledger
are exact sums of recorded charges. A PLD's ε is already an upper bound with a margin for float
error (the hockey stick is read at δ·(1 − 10⁻⁶), then rounded up two ulps:
:mod:`odometer_core.accounting.pld`); a relative change of 10⁻⁹ in ε moves δ(ε) by far less than
that margin, so a recorded ε within the tolerance of the auditor's is still an upper bound of the
mechanism's ε at the recorded δ.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from odometer_core.accounting import (
    AccountingConfig,
    Decision,
    Declaration,
    FilterState,
    admit,
    memo,
)
from odometer_core.accounting.amounts import amount_json
from odometer_core.accounting.declarations import DPSGD, Composed, Subsampled
from odometer_core.accounting.effort import walk
from odometer_core.accounting.modes import basic

#: The largest relative difference between a recorded and a recomputed PLD charge's ε that is
#: read as floating-point noise (observed between two machines: 7·10⁻¹³).
TOLERANCE: Final = Decimal("1e-9")

#: The memoised functions a ``basic`` filter reads a charge from (:mod:`~odometer_core.
#: accounting.memo`): seeding them with the recorded charge decides the entry with it.
_CHARGES: Final = (basic.charge, basic.joint_charge)


def float_derived(config: AccountingConfig, sub_budget: str | None, decl: Declaration) -> bool:
    """Whether ``decl``'s charge in the filter it is decided by comes from a PLD: a ``basic``
    leaf, and a declaration holding a DP-SGD run, a subsampled mechanism or a ``composed``
    list."""
    leaf: Any = config
    if sub_budget is not None:
        leaf = config.sub_budget(sub_budget)  # type: ignore[union-attr]
    if getattr(leaf, "mode", None) != "basic":
        return False
    return any(isinstance(node, DPSGD | Subsampled | Composed) for node in walk(decl))


def within(recomputed: Mapping[str, Any], recorded: Mapping[str, Any]) -> bool:
    """Whether ``recorded`` (ε, δ) is ``recomputed`` up to :data:`TOLERANCE` in ε, δ equal."""
    if set(recomputed) != {"epsilon", "delta"} or set(recorded) != {"epsilon", "delta"}:
        return False
    if recomputed["delta"] != recorded["delta"]:
        return False
    try:
        mine, theirs = Decimal(recomputed["epsilon"]), Decimal(recorded["epsilon"])
    except (InvalidOperation, TypeError):
        return False
    if not (mine.is_finite() and theirs.is_finite()) or mine <= 0 or theirs <= 0:
        return False
    return abs(mine - theirs) <= TOLERANCE * mine


def admit_as_recorded(
    config: AccountingConfig,
    state: FilterState,
    decl: Declaration,
    *,
    sub_budget: str | None,
    conversion_delta: Decimal | None,
    recorded: object,
) -> Decision:
    """:func:`~odometer_core.accounting.admit`, except that a PLD charge the entry recorded
    (``recorded``: its ``requested`` amount, the charge asked for) within :data:`TOLERANCE` of
    the recomputed one is taken as recorded (module docstring): the entry is decided again with
    it. Otherwise the recomputed decision, for the caller to compare exactly."""
    decision = admit(config, state, decl, sub_budget=sub_budget, conversion_delta=conversion_delta)
    if not isinstance(recorded, Mapping) or not float_derived(config, sub_budget, decl):
        return decision
    recomputed = amount_json(decision.requested)
    if not isinstance(recomputed, Mapping) or recomputed == recorded:
        return decision
    if not within(recomputed, recorded):
        return decision
    leaf: Any = config if sub_budget is None else config.sub_budget(sub_budget)  # type: ignore[union-attr]
    conv = leaf.conversion_delta if conversion_delta is None else conversion_delta
    charge = basic.EpsDelta(Decimal(recorded["epsilon"]), Decimal(recorded["delta"]))
    table: dict[Any, Any] = {
        (f"{fn.__module__}.{fn.__qualname__}", (decl, conv)): charge for fn in _CHARGES
    }
    with memo.charges(table):
        return admit(config, state, decl, sub_budget=sub_budget, conversion_delta=conversion_delta)
