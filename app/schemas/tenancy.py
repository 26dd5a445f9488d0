"""Organisations, principals, keys and grants: requests and responses."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, computed_field, field_validator

from app.schemas._types import JSONObject
from app.schemas.common import BudgetDelta, BudgetEpsilon, Delta, StrictModel, optional
from app.schemas.datasets import NAME_PATTERN, LeafAccounting
from app.schemas.mechanisms import Mechanism, to_declaration
from app.schemas.shown import (
    SHOWN_AMOUNTS,
    AmountText,
    ShownReading,
    amount_text,
    amounts_shown,
    reading,
    status_shown,
)
from app.schemas.summaries import Summary
from odometer_core.accounting import Declaration


class OrganisationCreate(StrictModel):
    name: str = Field(min_length=1, max_length=200, pattern=NAME_PATTERN)


class Cap(StrictModel):
    """An (ε, δ) target: the organisation's cap or an analyst's quota."""

    epsilon: BudgetEpsilon
    delta: BudgetDelta


class OrganisationCap(StrictModel):
    """An organisation's cap: a target (ε, δ) and the filter's mode, one filter over every
    invocation on the organisation's datasets. Curve caps (``zcdp``, ``rdp``) keep 1 % of δ
    for the δ of approximate (ε, δ) declarations unless ``final_conversion_delta`` is given;
    the mode and the grid are fixed once the cap has counted something, unless the cap is
    replaced (``replace``). ``rdp`` accounts every kind ``zcdp`` does and DP-SGD besides."""

    epsilon: BudgetEpsilon
    delta: BudgetDelta
    accounting: LeafAccounting | None = optional(
        description="the cap filter's mode and parameters; default: the cap's mode in force "
        '(with that mode\'s defaults), {"mode": "basic"} for an organisation that never had one'
    )
    replace: bool = Field(
        default=False,
        description="replace a cap that has counted by this one, in any mode: the counted "
        "cap's certified reading is kept as a closed statement, this cap counts from now on "
        "and the organisation's statement is their sum (ε₁ + ε₂, δ₁ + δ₂: its δ exceeds the "
        "first cap's); 409 ReservationsOpen while a reservation is open",
    )

    def accounting_json(self) -> JSONObject | None:
        if self.accounting is None:
            return None
        data: JSONObject = self.accounting.model_dump(mode="json", exclude_none=True)
        return data


class ClosedCap(BaseModel):
    """A cap replaced after it counted: its statement, fixed when it was replaced."""

    mode: str
    epsilon: str = Field(description="its certified reading's ε when it was replaced")
    delta: str = Field(description="its certified reading's δ when it was replaced")
    after_seq: int = Field(description="the last organisation sequence number it counted")


class OrganisationStatement(BaseModel):
    """The organisation's (ε, δ) across cap replacements: basic composition of the phases."""

    epsilon: str = Field(description="Σ ε of the closed caps and the cap in force's reading")
    delta: str = Field(description="Σ δ of the same: above any one cap's δ once one is replaced")
    phases: int = Field(
        description="the phases summed: the closed caps, and the cap in force once it counted"
    )
    note: str


class OrganisationShown(BaseModel):
    """An organisation's readings as the dashboard prints them."""

    statement: ShownReading | None = Field(description="the organisation's statement, rounded up")
    closed: list[ShownReading] = Field(
        description="each closed cap's reading, rounded up, in order"
    )
    cap: AmountText | None = Field(
        default=None, description="the cap's (ε, δ), rounded down to 6 digits (null: no cap)"
    )
    spent: AmountText | None = Field(default=None, description="spent, rounded up to 6 digits")
    reserved: AmountText | None = Field(
        default=None, description="reserved, rounded up to 6 digits (null: none)"
    )
    remaining: AmountText | None = Field(
        default=None, description="remaining, rounded down to 6 digits (null: none)"
    )


class OrganisationOut(BaseModel):
    id: str
    name: str
    cap: JSONObject | None = Field(description="the cap in force (epsilon, delta, mode), or null")
    spent: JSONObject = Field(
        description="what the cap's filter counted, in its currency (ε and δ in basic, ρ and δ "
        "in zcdp, the curve in rdp, μ² in gdp)"
    )
    reserved: JSONObject | None = Field(description="open ODP reservations (basic caps)")
    remaining: JSONObject | None
    status: JSONObject = Field(
        description="the cap filter's status as a dataset's, with its certified odometer "
        "reading and 'shown', its figures as the dashboard prints them (a dataset status's)"
    )
    guarantee: JSONObject | None = Field(
        description="the (ε, δ) the cap promises across the organisation's datasets, or null"
    )
    summary: Summary | None = Field(
        default=None,
        description="the cap's reading to quote and what is left of it in its currency (null "
        "without a cap)",
    )
    closed: list[ClosedCap] = Field(
        default_factory=list,
        description="caps replaced after they counted, oldest first, each with its certified "
        "reading when it was replaced",
    )
    statement: OrganisationStatement | None = Field(
        default=None,
        description="the organisation's (ε, δ) statement: the closed caps' readings plus the "
        "reading of the cap in force",
    )
    cap_seq: int = Field(description="ledger entries that touched the cap, across datasets")
    usage: dict[str, int] = Field(
        description="invocations each dataset (by id) registered under the cap"
    )
    created_at: str
    updated_at: str

    @computed_field(  # type: ignore[prop-decorator]
        description="the statement's and the closed caps' readings as the dashboard prints "
        "them: rounded up to 8 significant digits (still guarantees); the cap, spent, reserved "
        "and remaining amounts unit by unit, to 6 (spent and reserved up, the rest down)"
    )
    @property
    def shown(self) -> OrganisationShown:
        statement = self.statement
        return OrganisationShown(
            statement=None if statement is None else reading(statement.epsilon, statement.delta),
            closed=[reading(phase.epsilon, phase.delta) for phase in self.closed],
            cap=amount_text(self.cap, up=False),
            spent=amount_text(self.spent, up=True),
            reserved=amount_text(self.reserved, up=True),
            remaining=amount_text(self.remaining, up=False),
        )

    @field_validator("status")
    @classmethod
    def _shown(cls, status: JSONObject) -> JSONObject:
        if "mode" not in status:
            return status
        return {**status, "shown": status_shown(status).model_dump(mode="json")}


class CapacityQuery(StrictModel):
    """How many more of one declaration the organisation's cap admits."""

    mechanism: Mechanism
    dataset_id: str | None = optional(
        max_length=64,
        description="the dataset the invocations would read: its neighbouring relation is the "
        "one the cap charges under (default add_remove)",
    )
    conversion_delta: Delta | None = optional(
        description="δ for converting a curve-based guarantee to (ε, δ) (basic caps)"
    )

    def to_declaration(self) -> Declaration:
        return to_declaration(self.mechanism)


class CapacityOut(BaseModel):
    organisation: str
    mode: str = Field(description="the cap's mode")
    relation: str = Field(description="the relation the cap charged under")
    count: int = Field(description="how many more the cap admits, one after another")
    at_least: bool = Field(description="counting stopped at the limit: at least count")
    reason: str | None = Field(description="why the next one would be refused")
    limit: int


class OrganisationReportDataset(BaseModel):
    id: str
    name: str
    mode: str
    relation: str
    decisions: int = Field(description="entries of this dataset that the cap decided")
    admitted: int
    drawn: JSONObject = Field(
        description="what the dataset drew from the cap, in its currency: charges less refunds"
    )

    @computed_field(description=SHOWN_AMOUNTS)  # type: ignore[prop-decorator]
    @property
    def shown(self) -> dict[str, AmountText]:
        return amounts_shown(drawn=self.drawn)


class OrganisationReport(BaseModel):
    """The cap's decisions replayed from every dataset's ledger in their organisation order."""

    organisation: OrganisationOut
    verified: bool
    problems: list[str]
    decisions: int
    odometer: JSONObject | None = Field(description="the replayed certified reading")
    closed: list[ClosedCap] = Field(
        default_factory=list, description="the closed caps, each checked by the replay"
    )
    statement: JSONObject | None = Field(
        default=None,
        description="the replayed statement (epsilon, delta, phases): the closed caps' readings "
        "plus the replayed reading of the cap in force once it counted",
    )
    datasets: list[OrganisationReportDataset]

    @computed_field(  # type: ignore[prop-decorator]
        description="the replayed reading (odometer) and statement as pages print them: "
        "epsilon and delta rounded up to 8 significant digits (still guarantees)"
    )
    @property
    def shown(self) -> dict[str, AmountText]:
        found: dict[str, AmountText] = {}
        for name, value in (("odometer", self.odometer), ("statement", self.statement)):
            if value is not None and "epsilon" in value and "delta" in value:
                found[name] = reading(value["epsilon"], value["delta"]).model_dump()
        return found


class OrganisationList(BaseModel):
    organisations: list[OrganisationOut]


class PrincipalCreate(StrictModel):
    name: str = Field(min_length=1, max_length=200, pattern=NAME_PATTERN)
    role: Literal["admin", "curator", "analyst", "auditor"]
    organisation_id: str | None = optional(
        max_length=64, description="default: the caller's organisation; none for admins"
    )


class PrincipalOut(BaseModel):
    id: str
    name: str
    role: str
    organisation_id: str | None
    created_at: str


class QuotaOut(BaseModel):
    budget: dict[str, str] = Field(description="the quota's (ε, δ)")
    summary: Summary = Field(description="the quota's reading, what is left of it")

    @computed_field(description=SHOWN_AMOUNTS)  # type: ignore[prop-decorator]
    @property
    def shown(self) -> dict[str, AmountText]:
        return amounts_shown(budget=self.budget)


class MyGrant(BaseModel):
    dataset_id: str
    dataset_name: str | None
    quota: QuotaOut | None = Field(description="null: no quota, the dataset's budget alone")


class Me(BaseModel):
    """The caller: identity, role and, for an analyst, its grants with their quotas."""

    id: str
    name: str
    role: Literal["admin", "curator", "analyst", "auditor"]
    organisation: str | None = Field(description="null for the admin (every organisation)")
    grants: list[MyGrant] = Field(description="an analyst's grants (empty for other roles)")


class PrincipalList(BaseModel):
    principals: list[PrincipalOut]


class KeyCreate(StrictModel):
    expires_at: datetime | None = optional(description="ISO 8601; UTC when no offset is given")


class KeyCreated(BaseModel):
    """The token is shown in this response only; the service keeps its SHA-256."""

    id: str
    key: str
    principal_id: str
    expires_at: str | None


class KeyRevoked(BaseModel):
    id: str
    principal_id: str
    revoked_at: str
    expires_at: str | None


class GrantCreate(StrictModel):
    principal_id: str = Field(min_length=1, max_length=128)
    quota: Cap | None = optional(description="the analyst's quota inside this dataset")


class GrantOut(BaseModel):
    dataset_id: str
    principal_id: str
    quota: JSONObject | None
    quota_state: JSONObject | None
    quota_summary: Summary | None = Field(
        default=None, description="the quota's reading and what is left of it (null: no quota)"
    )
    created_by: str
    created_at: str

    @computed_field(description=SHOWN_AMOUNTS)  # type: ignore[prop-decorator]
    @property
    def shown(self) -> dict[str, AmountText]:
        return amounts_shown(quota=self.quota)


class GrantList(BaseModel):
    grants: list[GrantOut]
