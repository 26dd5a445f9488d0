"""The dataset report document (``GET /v1/datasets/{id}/report``).

Every budget amount is an exact decimal string, never a JSON number: a report is an audit
artefact and must add up to the ledger digit for digit.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field, field_validator

from app.schemas._types import JSONObject
from app.schemas.shown import AmountText, amounts_shown, status_shown

#: Scalar amounts by unit (``epsilon``, ``delta``, ``rho``, ``mu_squared``), decimal strings.
Amounts = dict[str, str]


class ReportDataset(BaseModel):
    """Which dataset the report is about."""

    id: str
    name: str
    organisation: str
    relation: str
    mode: str


class Guarantee(BaseModel):
    """The guarantee the dataset enforces, with its configuration exactly as stored."""

    mode: str
    relation: str
    budget: Amounts
    config: JSONObject
    certified: bool = Field(
        description="false when the series unit is an (ε, δ) estimate (rdp/split modes)"
    )


class SpendPointOut(BaseModel):
    """The dataset's spend right after ledger entry ``seq`` (in the series unit)."""

    seq: int
    at: str
    spent: str = Field(description="spent, open reservations included (what is committed)")
    budget: str
    spent_delta: str
    budget_delta: str
    reserved: str = Field(
        description="the open reservations counted in ``spent`` (settled spend: the difference)"
    )


class SpendSeries(BaseModel):
    """Spend over time: the last entry of every ``stride`` entries (≤ 500 points)."""

    unit: str = Field(description="epsilon (basic, rdp, split), rho (zcdp) or mu_squared (gdp)")
    stride: int
    points: list[SpendPointOut]


class Attribution(BaseModel):
    """An analyst's or a kind's share of the spend as an (ε, δ): the charges alone, converted
    as the dataset's status converts its running totals; labelled not certified."""

    epsilon: str
    delta: str
    certified: Literal[False]


class RdpCurve(BaseModel):
    orders: list[str]
    rdp: list[str]


class AnalystTotalsOut(BaseModel):
    """One actor's totals; ``charged`` is net of refunds (open reservations included)."""

    actor: str
    name: str | None
    charged: Amounts
    refunded: Amounts
    attribution: Attribution | None = Field(
        default=None,
        description="the (ε, δ) of these charges alone, in every mode (docs/accounting.md, "
        "*Attribution*): not certified; shares do not add up to the dataset's reading",
    )
    curve: RdpCurve | None = Field(
        default=None, description="rdp datasets: the net RDP curve of these charges"
    )
    accepted: int
    reserved: int
    rejected: int
    settled: int
    cancelled: int
    curve_charges: int = Field(description="charges with no scalar amount (rdp curves)")


class MechanismTotalsOut(BaseModel):
    """One declaration kind's totals (``pure_dp``, ``gaussian``, ``odp``, …): net charge
    (open reservations included), refunds and counts by outcome."""

    kind: str
    charged: Amounts
    refunded: Amounts
    attribution: Attribution | None = Field(
        default=None,
        description="the (ε, δ) of these charges alone, in every mode (docs/accounting.md, "
        "*Attribution*): not certified; shares do not add up to the dataset's reading",
    )
    curve: RdpCurve | None = Field(
        default=None, description="rdp datasets: the net RDP curve of these charges"
    )
    accepted: int
    reserved: int
    rejected: int
    settled: int
    cancelled: int


class Refunds(BaseModel):
    """Refunds of settlements and cancellations; ``odp_savings`` counts settlements only."""

    total: Amounts
    odp_savings: Amounts


class Rejections(BaseModel):
    """Refused invocations, by the level that refused them and by recorded reason."""

    total: int
    by_level: dict[str, int]
    by_reason: dict[str, int]


class LedgerSummary(BaseModel):
    entries: int
    kinds: dict[str, int]


class ChainHead(BaseModel):
    """The dataset's ledger head when the report was made."""

    seq: int
    hash: str


class Verification(BaseModel):
    """Full replay of the ledger and comparison with the dataset's stored head and state."""

    ok: bool
    entries: int
    head_hash: str
    first_problem: str | None
    problem_count: int
    problems: list[str] = Field(description="the first 20 problems")


class ReportShown(BaseModel):
    """A report's amounts as pages print them, beside the rows they belong to (the rows stay
    as the ledger adds them up): by field name, each scalar unit rounded by the core's one rule
    for display to 6 significant digits, charges up, refunds down (app/schemas/shown.py)."""

    analysts: dict[str, dict[str, AmountText]] = Field(
        description="each analyst's (by actor) charged and refunded"
    )
    mechanisms: dict[str, dict[str, AmountText]] = Field(
        description="each declaration kind's charged and refunded"
    )
    refunds: dict[str, AmountText] = Field(description="refunds' total and odp_savings")


class ReportOut(BaseModel):
    """Guarantee, status, spend over time, per-analyst totals, refunds, rejections, chain
    head and replay verdict of one dataset."""

    dataset: ReportDataset
    guarantee: Guarantee
    status: JSONObject | None = Field(
        description="budget status the dataset row claims (null if the row cannot be read), "
        "with 'shown': its figures as the dashboard prints them (a dataset status's shown)"
    )
    series: SpendSeries
    analysts: list[AnalystTotalsOut]
    mechanisms: list[MechanismTotalsOut] = Field(
        description="totals per declaration kind, in kind order"
    )
    refunds: Refunds
    rejections: Rejections
    ledger: LedgerSummary
    chain_head: ChainHead
    verification: Verification
    blocks: JSONObject | None = Field(
        default=None,
        description="partitioned datasets: the block range reported ('from' … 'to' query "
        "parameters), its runs as GET …/blocks pages them (at most 1000); the totals above "
        "count the invocations whose selection meets the range",
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="the per-analyst, per-kind and refund amounts as pages print them "
        "(6 significant digits: charges up, refunds down)"
    )
    @property
    def shown(self) -> ReportShown:
        return ReportShown(
            analysts={
                a.actor: amounts_shown(charged=a.charged, refunded=a.refunded)
                for a in self.analysts
            },
            mechanisms={
                m.kind: amounts_shown(charged=m.charged, refunded=m.refunded)
                for m in self.mechanisms
            },
            refunds=amounts_shown(total=self.refunds.total, odp_savings=self.refunds.odp_savings),
        )

    @field_validator("status")
    @classmethod
    def _shown(cls, status: JSONObject | None) -> JSONObject | None:
        if status is None or "mode" not in status:
            return status
        return {**status, "shown": status_shown(status).model_dump(mode="json")}
