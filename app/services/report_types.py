"""The shapes of a dataset's report as :func:`app.services.reports.dataset_report` builds it:
each part a TypedDict, field for field its wire model's (``app/schemas/reports.py``, ``ReportOut``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from app.services import blocks
from odometer_core.accounting.json_types import Attribution, ConfigJSON, CurveJSON


class TotalsJson(TypedDict):
    """What a per-kind and a per-analyst row of the report share (:func:`_totals_json`):
    decimal strings by unit, the core's (ε, δ) attribution and summed RDP curve, counts."""

    charged: dict[str, str]
    refunded: dict[str, str]
    attribution: Attribution | None  # the core's attribution of the (ε, δ) to the kinds
    curve: CurveJSON | None  # the core's summed RDP curve
    accepted: int
    reserved: int
    rejected: int
    settled: int
    cancelled: int


class AnalystJson(TotalsJson):
    """One actor's row of the report."""

    actor: str
    name: str | None
    curve_charges: int


class MechanismJson(TotalsJson):
    """One declaration kind's row of the report."""

    kind: str


class VerdictJson(TypedDict):
    """The report's ``verification``: the replay verdict and the checks that tie the ledger
    to the dataset row (:func:`_verdict`)."""

    ok: bool
    entries: int
    head_hash: str
    first_problem: str | None
    problem_count: int
    problems: list[str]


class IdentityJson(TypedDict):
    id: str
    name: str
    organisation: str
    relation: str
    mode: str


class GuaranteeJson(TypedDict):
    mode: str
    relation: str
    budget: dict[str, str]
    config: ConfigJSON  # the dataset's configuration, as stored
    certified: bool


class PointJson(TypedDict):
    seq: int
    at: str
    spent: str
    budget: str
    spent_delta: str
    budget_delta: str
    reserved: str


class SeriesJson(TypedDict):
    unit: str
    stride: int
    points: list[PointJson]


class RefundsJson(TypedDict):
    total: dict[str, str]
    odp_savings: dict[str, str]


class RejectionsJson(TypedDict):
    total: int
    by_level: dict[str, int]
    by_reason: dict[str, int]


class LedgerCountsJson(TypedDict):
    entries: int
    kinds: dict[str, int]


class ChainHeadJson(TypedDict):
    seq: int
    hash: str


class ReportJson(TypedDict):
    """A dataset's report (:func:`dataset_report`; its wire model: ``ReportOut``)."""

    dataset: IdentityJson
    guarantee: GuaranteeJson
    #: the status the dataset row claims now (``None``: the row cannot be read)
    status: Mapping[str, Any] | None
    series: SeriesJson
    analysts: list[AnalystJson]
    mechanisms: list[MechanismJson]
    refunds: RefundsJson
    rejections: RejectionsJson
    ledger: LedgerCountsJson
    chain_head: ChainHeadJson
    verification: VerdictJson | None
    blocks: blocks.BlocksPage | None
