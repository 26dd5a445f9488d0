"""Invocation requests and responses."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from app.schemas.common import Delta, StrictModel, optional
from app.schemas.mechanisms import CELL_PATTERN, Mechanism, to_declaration
from odometer_core.accounting import Declaration


class InvocationCreate(StrictModel):
    """Declare an invocation before it runs."""

    mechanism: Mechanism
    sub_budget: str | None = optional(
        min_length=1, max_length=64, description="sub-budget (split datasets only)"
    )
    conversion_delta: Delta | None = optional(
        description="δ for converting a curve-based guarantee to (ε, δ) (basic mode)"
    )

    def to_declaration(self) -> Declaration:
        return to_declaration(self.mechanism)


class SettleRequest(StrictModel):
    """The cell of the ODP partition the released output fell in."""

    cell: str = Field(pattern=CELL_PATTERN)


class InvocationCreated(BaseModel):
    """201: the invocation is admitted (``accepted``, charged) or ``reserved`` (ODP)."""

    id: str
    dataset_id: str
    status: Literal["accepted", "reserved"]
    mechanism: dict[str, Any]
    sub_budget: str | None = None
    conversion_delta: str | None = None
    charge: dict[str, Any]
    requested: dict[str, Any]
    remaining: dict[str, Any]
    reservation: dict[str, Any] | None = None
    levels: dict[str, Any] | None = Field(
        default=None,
        description="charges at the organisation cap and the analyst's quota, when they apply",
    )
    ledger_seq: int
    created_at: str


class InvocationFinished(BaseModel):
    """A settled or cancelled reservation."""

    id: str
    dataset_id: str
    status: Literal["settled", "cancelled"]
    cell: str | None = None
    charge: dict[str, Any]
    refund: dict[str, Any]
    remaining: dict[str, Any]
    levels: dict[str, Any] | None = None
    ledger_seq: int
    updated_at: str


class Preview(BaseModel):
    """The decision the service would take now (nothing is written)."""

    status: Literal["accepted", "reserved", "rejected"]
    mechanism: dict[str, Any]
    sub_budget: str | None = None
    charge: dict[str, Any]
    requested: dict[str, Any]
    remaining: dict[str, Any]
    reason: str | None = None
    level: str | None = Field(default=None, description="the level that would refuse")
    reservation: dict[str, Any] | None = None


class InvocationEvent(BaseModel):
    seq: int
    kind: str
    at: str
    actor: str
    charge: dict[str, Any] | None
    refund: dict[str, Any] | None
    hash: str


class InvocationOut(BaseModel):
    """One invocation, its current charge and the ledger entries that concern it."""

    id: str
    dataset_id: str
    status: Literal["accepted", "reserved", "rejected", "settled", "cancelled"]
    mechanism: dict[str, Any]
    sub_budget: str | None
    conversion_delta: str | None
    charge: dict[str, Any]
    requested: dict[str, Any]
    refund: dict[str, Any] | None
    reservation: dict[str, Any] | None
    cell: str | None
    reason: str | None
    levels: dict[str, Any] | None = Field(
        default=None,
        description="the organisation and the analyst (quota) whose levels hold this "
        "invocation's charge or reservation",
    )
    actor: str
    created_at: str
    updated_at: str
    events: list[InvocationEvent]
