"""Typed amounts: what a decision charges, asks for, leaves and refunds, in its mode's unit.

A :class:`~odometer_core.accounting.modes.common.Decision` carries these immutable values, never
their
text; they become JSON only at the edge (:meth:`to_json`, the form written to responses, ledger
entries and rows), so no consumer re-parses formatted strings or guesses which keys are amounts.
Scalars are exact decimals; an RDP amount is one float per order of the dataset's grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeAlias

from odometer_core.accounting.exact import ZERO, fmt


@dataclass(frozen=True, slots=True)
class EpsilonDelta:
    """(ε, δ): ``basic`` mode, and the levels above a dataset."""

    epsilon: Decimal = ZERO
    delta: Decimal = ZERO

    def to_json(self) -> dict[str, Any]:
        return {"epsilon": fmt(self.epsilon), "delta": fmt(self.delta)}


@dataclass(frozen=True, slots=True)
class RhoDelta:
    """(ρ, δ): ``zcdp`` mode."""

    rho: Decimal = ZERO
    delta: Decimal = ZERO

    def to_json(self) -> dict[str, Any]:
        return {"rho": fmt(self.rho), "delta": fmt(self.delta)}


@dataclass(frozen=True, slots=True)
class RdpCurve:
    """ε(α) at each order of the grid, and δ: ``rdp`` mode. Floats travel as their shortest
    ``repr`` text, which reads back to the same float."""

    orders: tuple[float, ...]
    rdp: tuple[float, ...]
    delta: Decimal = ZERO

    def to_json(self) -> dict[str, Any]:
        return {
            "orders": [repr(a) for a in self.orders],
            "rdp": [repr(v) for v in self.rdp],
            "delta": fmt(self.delta),
        }


@dataclass(frozen=True, slots=True)
class MuSquared:
    """μ²: ``gdp`` mode."""

    mu_squared: Decimal = ZERO

    def to_json(self) -> dict[str, Any]:
        return {"mu_squared": fmt(self.mu_squared)}


Amount: TypeAlias = EpsilonDelta | RhoDelta | RdpCurve | MuSquared


def amount_json(amount: Amount | None) -> dict[str, Any] | None:
    """The JSON of an optional amount (``None`` stays ``None``: nothing refunded, say)."""
    return None if amount is None else amount.to_json()


__all__ = ["Amount", "EpsilonDelta", "MuSquared", "RdpCurve", "RhoDelta", "amount_json"]
