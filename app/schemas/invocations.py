"""Invocation requests and responses."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, computed_field, model_validator

from app.schemas._types import JSONObject
from app.schemas.blocks import BlockSelection
from app.schemas.common import (
    AmountOut,
    AmountUnion,
    Delta,
    Documented,
    Form,
    NothingCharged,
    SchemaOnly,
    StrictModel,
    one_form_of,
    optional,
)
from app.schemas.mechanisms import CELL_PATTERN, Mechanism, to_declaration
from app.schemas.shown import SHOWN_AMOUNTS, AmountText, amounts_shown
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
    blocks: BlockSelection | None = optional(
        description="partitioned datasets: the blocks the mechanism reads (a range, keys, "
        "ranges, or 'all' for every open block). Admitted only if every selected block "
        "admits; then each is charged the whole cost"
    )
    contribution: Literal["record", "person"] | None = optional(
        description="what the declared guarantee is stated for: 'record' (the default: "
        "neighbouring inputs differ in one record) or 'person': the analyst asserts that it "
        "holds for neighbouring inputs that differ in any or all of one person's records in "
        "each selected block (e.g. each person's contribution to a block bounded, the "
        "sensitivity calibrated to that bound). Required by datasets whose partition's unit "
        "is 'person' (422 otherwise); recorded in the ledger entry's request"
    )
    neighbours: Literal["zero_out"] | None = optional(
        description="tree_aggregation's neighbouring assumption: 'zero_out', the analyst "
        "asserts that adding or removing a record changes its own leaf only, every other "
        "record keeping its step (Kairouz et al. 2021's replace-with-zero neighbours). "
        "Required for a tree_aggregation (at any depth) on an add_remove dataset, refused on "
        "a declaration without one (422); recorded in the ledger entry's request"
    )

    def to_declaration(self) -> Declaration:
        return to_declaration(self.mechanism)


class SettleRequest(StrictModel):
    """The cell of the ODP partition the released output fell in: named (``cell``), derived
    by the service from the released output (``output``, templates only), or both (they must
    agree). ``docs/http-api.md`` lists each template's output form."""

    model_config = ConfigDict(
        json_schema_extra=lambda schema: one_form_of(
            schema, Form(("cell", "output"), ("cell",)), Form(("output",))
        )
    )

    cell: str | None = optional(
        pattern=CELL_PATTERN, description="the cell the released output fell in"
    )
    output: JsonValue = Field(
        default=None,
        description="the released output, or the part that decides the cell (svt: the answers "
        "in order, true = ⊤; ptr: null for ⊥ or the released value; iterative: the number of "
        "iterations run; tested_release: the test's verdict, true = passed). Numbers as "
        "integers or decimal strings: its SHA-256 over canonical JSON is recorded in the "
        "ledger. null is a value here (⊥), unlike elsewhere",
        examples=[[False, True, False, True]],
    )

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        """Nulls are refused as everywhere, except in ``output``: ⊥ is a released output."""
        if isinstance(data, dict):
            nulls = sorted(str(k) for k, v in data.items() if v is None and k != "output")
            if nulls:
                raise ValueError(
                    f"null is not allowed (omit the field instead): {', '.join(nulls)}"
                )
        return data

    @model_validator(mode="after")
    def _cell_or_output(self) -> SettleRequest:
        if self.cell is None and not self.has_output:
            raise ValueError("send the cell, the released output, or both")
        return self

    @property
    def has_output(self) -> bool:
        """Whether ``output`` was sent (``null`` is an output: ⊥)."""
        return "output" in self.model_fields_set


class LevelCharge(Documented):
    """What a registration did at a level above the dataset, in that level's currency."""

    charge: AmountUnion
    remaining: AmountUnion


class LevelRefund(Documented):
    """What a settle or cancel did at a level above the dataset."""

    charge: AmountUnion
    refund: AmountUnion


class LevelsCharged(Documented):
    """The levels above the dataset that decided with it (only those that apply)."""

    organisation: LevelCharge | None = optional(description="the organisation's cap")
    quota: LevelCharge | None = optional(description="the analyst's quota")


class LevelsRefunded(Documented):
    """The levels above the dataset that hold the reservation (only those that apply)."""

    organisation: LevelRefund | None = optional(description="the organisation's cap")
    quota: LevelRefund | None = optional(description="the analyst's quota")


class InvocationCreated(BaseModel):
    """201: the invocation is admitted (``accepted``, charged) or ``reserved`` (ODP)."""

    id: str
    dataset_id: str
    status: Literal["accepted", "reserved"]
    mechanism: JSONObject
    sub_budget: str | None = None
    conversion_delta: str | None = None
    contribution: Literal["record", "person"] | None = Field(
        default=None, description="as requested (only when sent)"
    )
    neighbours: Literal["zero_out"] | None = Field(
        default=None, description="as requested (only when sent)"
    )
    charge: AmountOut = Field(
        description="what the dataset was charged (or reserved), in its mode's currency: "
        "(ε, δ) in basic, (ρ, δ) in zcdp, a curve in rdp, μ² in gdp; a split dataset's "
        "sub-budget's, a partitioned dataset's per block"
    )
    requested: AmountOut = Field(description="what the declaration costs, in the same currency")
    remaining: AmountOut = Field(description="what the dataset has left, in the same currency")
    reservation: JSONObject | None = None
    levels: Annotated[JSONObject, SchemaOnly(LevelsCharged)] | None = Field(
        default=None,
        description="charges at the organisation cap and the analyst's quota, when they apply",
    )
    ledger_seq: int
    created_at: str
    blocks: list[JSONObject] | None = Field(
        default=None,
        description="partitioned datasets: the selected blocks, as ranges of keys",
    )
    receipt: JSONObject | None = Field(
        default=None,
        description="the signed receipt of the ledger entry this answer wrote (dataset, seq, "
        "entry hash, time; a signed note: docs/ledger.md, Receipts); null on a server "
        "without a checkpoint key",
    )


class InvocationFinished(BaseModel):
    """A settled or cancelled reservation."""

    id: str
    dataset_id: str
    status: Literal["settled", "cancelled"]
    cell: str | None = None
    output_digest: str | None = Field(
        default=None,
        description="SHA-256 (hex) of the released output's canonical JSON, as recorded in "
        "the ledger's settle entry; only when the output was sent",
    )
    charge: AmountOut = Field(description="what stays charged, in the dataset's currency")
    refund: AmountOut = Field(description="what was given back, in the same currency")
    remaining: AmountOut = Field(description="what the dataset has left, in the same currency")
    levels: Annotated[JSONObject, SchemaOnly(LevelsRefunded)] | None = Field(
        default=None, description="the same at the organisation cap and the analyst's quota"
    )
    ledger_seq: int
    updated_at: str
    receipt: JSONObject | None = Field(
        default=None,
        description="the signed receipt of the ledger entry this answer wrote (dataset, seq, "
        "entry hash, time; a signed note: docs/ledger.md, Receipts); null on a server "
        "without a checkpoint key",
    )


class Fit(BaseModel):
    """How many more fit in a row, and what stops the next one."""

    count: int
    at_least: bool = Field(description="counting stopped at 1,000,000: at least ``count``")
    reason: str | None = Field(description="why the next one would be refused")
    level: Literal["dataset", "organisation", "quota"] = Field(
        description="the level that admits the fewest"
    )


class Preview(BaseModel):
    """The decision the service would take now (nothing is written)."""

    status: Literal["accepted", "reserved", "rejected"]
    mechanism: JSONObject
    sub_budget: str | None = None
    charge: AmountOut = Field(description="what the dataset would be charged, in its currency")
    requested: AmountOut
    remaining: AmountOut = Field(description="what the dataset has left now")
    reason: str | None = None
    level: str | None = Field(default=None, description="the level that would refuse")
    reservation: JSONObject | None = None
    fit: Fit | None = Field(
        default=None,
        description="how many more of this declaration the caller could register in a row "
        "now, nothing else admitted meanwhile: the fewest any level (dataset or its selected "
        "blocks, organisation cap, quota) admits, each counted by its filter's own admission",
    )
    blocks: JSONObject | None = Field(
        default=None,
        description="partitioned datasets: the selection ('selected'), which of its blocks "
        "can still afford the declaration ('affordable', 'refused'; at most 20 ranges each) "
        "and how many more of it fit in a row ('fit': every selected block and the levels "
        "above, nothing else admitted meanwhile)",
    )

    @computed_field(description=SHOWN_AMOUNTS)  # type: ignore[prop-decorator]
    @property
    def shown(self) -> dict[str, AmountText]:
        return amounts_shown(charge=self.charge, requested=self.requested, remaining=self.remaining)


class InvocationEvent(BaseModel):
    seq: int
    kind: str
    at: str
    actor: str
    charge: AmountOut | None = Field(description="the ledger entry's charge on the dataset")
    refund: AmountOut | None
    hash: str


class InvocationOut(BaseModel):
    """One invocation, its current charge and the ledger entries that concern it."""

    id: str
    dataset_id: str
    status: Literal["accepted", "reserved", "rejected", "settled", "cancelled"]
    mechanism: JSONObject
    sub_budget: str | None
    conversion_delta: str | None
    charge: Annotated[JSONObject, SchemaOnly(AmountUnion | NothingCharged)] = Field(
        description="what the dataset holds of it now, in its currency; {} when a level above "
        "the dataset refused it (nothing was charged on the dataset)"
    )
    requested: AmountOut
    refund: AmountOut | None
    reservation: JSONObject | None
    cell: str | None
    reason: str | None
    levels: JSONObject | None = Field(
        default=None,
        description="the organisation and the analyst (quota) whose levels hold this "
        "invocation's charge or reservation",
    )
    actor: str
    created_at: str
    updated_at: str
    events: list[InvocationEvent]

    @computed_field(description=SHOWN_AMOUNTS)  # type: ignore[prop-decorator]
    @property
    def shown(self) -> dict[str, AmountText]:
        return amounts_shown(charge=self.charge, requested=self.requested, refund=self.refund)
