"""Dataset requests and responses."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field
from pydantic.json_schema import JsonSchemaValue

from app.schemas._types import JSONObject
from app.schemas.blocks import PartitionIn
from app.schemas.common import (
    NOT_A_BOOLEAN,
    BudgetDelta,
    BudgetEpsilon,
    Delta,
    Form,
    Order,
    Probability,
    Rate,
    StrictModel,
    one_form_of,
    optional,
)
from app.schemas.mechanisms import Mechanism
from app.schemas.shown import StatusShown, status_shown
from app.schemas.summaries import Summary
from odometer_core.accounting.modes.rdp import (
    MAX_RDP_ORDERS,
    MAX_WORKLOAD_COUNT,
    MAX_WORKLOAD_ITEMS,
)
from odometer_core.accounting.modes.split import MAX_SUB_BUDGETS

NAME_PATTERN = r"^[^\x00-\x1f\x7f]+$"


class Budget(StrictModel):
    """A target (ε_B, δ_B): ε_B > 0, 0 ≤ δ_B < 1."""

    epsilon: BudgetEpsilon
    delta: BudgetDelta


class SubBudgetTarget(StrictModel):
    epsilon: BudgetEpsilon
    delta: BudgetDelta | None = optional(description="default 0")


class BasicAccounting(StrictModel):
    """Basic composition filter with output-dependent refunds (Hartmann et al. 2022, Alg. 1)."""

    mode: Literal["basic"]
    conversion_delta: Probability | None = optional(
        description="δ at which curve-based declarations are converted (default δ_B/10; at "
        "most δ_B)"
    )


class ZcdpAccounting(StrictModel):
    """Approximate zCDP filter; δ_B = δ_A + δ_conversion."""

    mode: Literal["zcdp"]
    final_conversion_delta: Probability | None = optional(description="at most δ_B")


class WorkloadItem(StrictModel):
    """A declaration (as the register endpoint takes it) and how many times it is expected."""

    mechanism: Mechanism
    count: Annotated[int, Field(ge=1, le=MAX_WORKLOAD_COUNT), NOT_A_BOOLEAN]


class RdpAccounting(StrictModel):
    """Approximate RDP filter over a fixed order grid with weights; or, with ``workload``, the
    grid the server chooses for the expected workload (the response's ``config.workload`` shows
    the chosen order and the expected admitted counts): a workload, or orders and weights,
    never both."""

    model_config = ConfigDict(
        json_schema_extra=lambda schema: one_form_of(
            schema,
            Form(("mode", "final_conversion_delta", "orders", "weights", "wor_bound"), ("mode",)),
            Form(("mode", "final_conversion_delta", "workload", "wor_bound"), ("mode", "workload")),
        )
    )

    mode: Literal["rdp"]
    final_conversion_delta: Probability | None = optional(description="at most δ_B")
    orders: list[Order] | None = optional(
        min_length=1, max_length=MAX_RDP_ORDERS, description="strictly increasing"
    )
    weights: list[Rate] | None = optional(
        min_length=1,
        max_length=MAX_RDP_ORDERS,
        description="one per order (of the default grid without 'orders'), summing to ≤ 1",
    )
    workload: list[WorkloadItem] | None = optional(
        min_length=1,
        max_length=MAX_WORKLOAD_ITEMS,
        description="expected workload (instead of orders/weights): the server puts 90 % of "
        "the conversion δ on the order that admits most of it, the rest on the default orders",
    )
    wor_bound: Literal["wbk19+bebp24", "wbk19"] | None = optional(
        description="how a Gaussian subsampled without replacement is charged: 'wbk19+bebp24' "
        "(default) takes, order by order, the smaller of Wang–Balle–Kasiviswanathan 2019 "
        "Thm 27 and Birrell–Ebrahimi–Behnia–Pacheco 2024 Thm 3.4 (about 4× less at large "
        "noise); 'wbk19' the first alone, as datasets created before accounting 1.3.0",
    )


class GdpAccounting(StrictModel):
    """Gaussian-DP filter (certified μ-GDP declarations only)."""

    mode: Literal["gdp"]


LeafAccounting = Annotated[
    BasicAccounting | ZcdpAccounting | RdpAccounting | GdpAccounting,
    Field(discriminator="mode"),
]


class SubBudget(StrictModel):
    name: str = Field(min_length=1, max_length=64, pattern=NAME_PATTERN)
    budget: SubBudgetTarget
    accounting: LeafAccounting | None = optional()


class SplitAccounting(StrictModel):
    """Fixed sub-budgets, each in its own mode; invocations name their ``sub_budget``."""

    mode: Literal["split"]
    sub_budgets: list[SubBudget] = Field(min_length=1, max_length=MAX_SUB_BUDGETS)


Accounting = Annotated[
    BasicAccounting | ZcdpAccounting | RdpAccounting | GdpAccounting | SplitAccounting,
    Field(discriminator="mode"),
]


def _partitioned_dataset(schema: JsonSchemaValue) -> None:
    """A partitioned dataset's blocks take a leaf mode (not ``split``), and relation
    ``replace_one`` only with a key the curator asserts immutable (``immutable_key``: true)."""
    schema["dependentSchemas"] = {
        "partition": {
            "properties": {
                "accounting": {
                    "not": {"properties": {"mode": {"const": "split"}}, "required": ["mode"]}
                }
            },
            "if": {"properties": {"relation": {"const": "replace_one"}}, "required": ["relation"]},
            "then": {
                "properties": {
                    "partition": {
                        "properties": {"immutable_key": {"const": True}},
                        "required": ["immutable_key"],
                    }
                }
            },
        }
    }


class DatasetCreate(StrictModel):
    """A new dataset: its budget, neighbouring relation and accounting mode (fixed)."""

    model_config = ConfigDict(json_schema_extra=_partitioned_dataset)

    name: str = Field(min_length=1, max_length=200, pattern=NAME_PATTERN)
    budget: Budget
    relation: Literal["add_remove", "replace_one"] = "add_remove"
    accounting: Accounting | None = optional(description='default: {"mode": "basic"}')
    organisation_id: str | None = optional(
        max_length=64,
        description="owning organisation: a curator's own by default; the admin names one "
        "(default: the organisation 'default')",
    )
    partition: PartitionIn | None = optional(
        description="a partitioned dataset: its records fall into blocks by this public key, "
        "and 'budget' and 'accounting' are every block's (docs/accounting.md, *Partitioned "
        "datasets*). Blocks are opened by curators (POST …/blocks), never by the records"
    )

    def partition_json(self) -> JSONObject | None:
        if self.partition is None:
            return None
        data: JSONObject = self.partition.model_dump(exclude_none=True)
        return data

    def accounting_json(self) -> JSONObject:
        if self.accounting is None:
            return {"mode": "basic"}
        data: JSONObject = self.accounting.model_dump(mode="json", exclude_none=True)
        return data


class BudgetPatch(StrictModel):
    """A new target; on a split dataset ``sub_budget`` names the sub-budget to change. A
    ``workload`` re-chooses an ``rdp`` dataset's grid, never a sub-budget's (split datasets
    take it in the sub-budget's accounting at creation)."""

    model_config = ConfigDict(
        json_schema_extra=lambda schema: one_form_of(
            schema,
            Form(
                ("epsilon", "delta", "sub_budget", "final_conversion_delta"),
                ("epsilon", "delta"),
            ),
            Form(
                ("epsilon", "delta", "final_conversion_delta", "workload"),
                ("epsilon", "delta", "workload"),
            ),
        )
    )

    epsilon: BudgetEpsilon
    delta: BudgetDelta
    sub_budget: str | None = optional(min_length=1, max_length=64)
    final_conversion_delta: Delta | None = optional()
    workload: list[WorkloadItem] | None = optional(
        min_length=1,
        max_length=MAX_WORKLOAD_ITEMS,
        description="rdp datasets, before the first charge: re-choose the order grid for this "
        "expected workload (as at creation); 409 AlreadySpent once something is charged",
    )

    def workload_json(self) -> list[JSONObject] | None:
        if self.workload is None:
            return None
        return [item.model_dump(mode="json", exclude_none=True) for item in self.workload]


class LedgerHead(BaseModel):
    last_seq: int
    head_hash: str


class OdometerReading(BaseModel):
    """A certified odometer reading: an (ε, δ) for everything released on the dataset so far,
    valid whenever the analysts stop, however adaptively they chose (docs/accounting.md,
    *Certified odometer readings*). Never more than the budget (ε_B, δ_B), whatever curators
    changed and whenever (datasets created before accounting 1.4.0: see ``delta``)."""

    epsilon: str = Field(description="ε of the reading, exact decimal text, rounded up")
    delta: str = Field(
        description="δ at which the reading holds: the spent δ in mode basic; in zcdp and rdp "
        "the conversion δ_c fixed at creation (δ_B unless the curator set "
        "final_conversion_delta), the creation δ_B in gdp and once an approximate declaration "
        "was admitted; the sum over the sub-budgets in split. Filters created before "
        "accounting 1.4.0 show the ladder's δ plus δ_B, which is what holds for their capped "
        "readings"
    )
    certified: Literal[True] = Field(description="always true: the reading is a guarantee")
    source: Literal["basic", "ladder", "pld_branch", "filter", "split"] = Field(
        description="which statement certifies it: basic (the running sums), ladder (a level "
        "of the ladder of filters fixed at creation, whose level 1 is the filter itself), "
        "pld_branch (rdp from accounting 1.6.0: the PLD branch's sum of each declaration's own "
        "ε at its δ slot, when smaller than the ladder's), "
        "filter (the creation filter's target, once an approximate declaration was admitted, "
        "or, before 1.4.0, when the ladder would say more), split (the sum of the "
        "sub-budgets' readings)"
    )
    level: int | None = Field(
        description="the ladder level holding the running total (0: nothing spent); null where "
        "no ladder applies"
    )
    ladder_epsilon: str | None = Field(
        description="the ladder's own ε: the reading itself where the ladder applies; before "
        "1.4.0 the ladder's value before the cap at ε_B, certified alone at the ladder's δ "
        "(docs/accounting.md); null where no ladder applies"
    )
    theorem: str = Field(description="the theorems the reading rests on")


class FrozenStatus(BaseModel):
    """Why a dataset is frozen behind its witness, and what its reading is worth then."""

    reason: str = Field(description="behind, forked, unwitnessed or organisation")
    witnessed_seq: int
    database_seq: int
    sibling: str | None = Field(default=None, description="for organisation: the dataset behind")
    reading: str = Field(description="what the reading shown is worth while frozen")
    detail: str = Field(description="the refusal a write gets (409 LedgerBehindWitness)")


class DatasetStatus(BaseModel):
    """Budget status in the mode's own units (each mode adds its own fields: spent, remaining,
    reserved, …, and ``spent_eps_delta``, an (ε, δ) that is certified only where it says so),
    with the certified ``odometer`` reading. ``unusable`` (``{reason, fix, budget}``, here and
    on each sub-budget) flags a zcdp, rdp or gdp budget stored before such budgets were refused
    that can never admit anything (δ = 0, or no positive threshold): ``budget`` is a budget
    change that would work (docs/accounting.md, *Budgets that can admit something*)."""

    model_config = ConfigDict(extra="allow")

    mode: str
    budget: dict[str, str] = Field(description="the target (ε_B, δ_B)")
    odometer: OdometerReading
    summary: Summary = Field(
        description="one reading to quote: the certified guarantee so far, what is left in the "
        "mode's unit and how many more of the last declaration fit (a partitioned dataset: "
        "the guarantee over every block ever opened, retired ones included; what is left, "
        "the most spent open block's)"
    )
    frozen: FrozenStatus | None = Field(
        default=None,
        description="set while the dataset (or its capped organisation) is frozen behind its "
        "witness: the reading above may be rolled back; null otherwise",
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="the figures above as the dashboard prints them, rounded by the core's one "
        "rule for display (app/schemas/shown.py): the reading up to 8 digits, what the filter "
        "counts to 6 (spent up, remaining and budget down), the fraction spent as a percentage"
    )
    @property
    def shown(self) -> StatusShown:
        view = {**(self.model_extra or {}), "mode": self.mode, "budget": self.budget}
        return status_shown({**view, "odometer": self.odometer.model_dump()})


class Requirement(BaseModel):
    """One assertion a declaration must carry on this dataset for its budget's guarantee to
    hold (a registration or preview without it is a 422 naming ``field``)."""

    field: Literal["contribution", "neighbours"]
    value: str = Field(description="the value the field must carry")
    applies_to: str = Field(description="which declarations must carry it")
    text: str = Field(description="what the assertion means and why it is required")


class DatasetOut(BaseModel):
    """A dataset with its budget status in the mode's units and as (ε, δ)."""

    id: str
    name: str
    organisation: str
    relation: str
    mode: str
    created_by: str
    created_at: str
    updated_at: str
    config: JSONObject
    status: DatasetStatus
    ledger: LedgerHead
    partition: JSONObject | None = Field(
        default=None,
        description="a partitioned dataset's partition; its status is then per block: the "
        "highest certified reading over every block ever opened, retired ones included, and "
        "'blocks' (GET …/blocks pages "
        "every block's): 'blocks.protects' says what one block's budget protects, "
        "'blocks.requires' what a declaration must state for it to hold (for a 'person' "
        "unit: contribution 'person'; null for a 'record' unit)",
    )
    requires: list[Requirement] = Field(
        default_factory=list,
        description="what a declaration must assert on this dataset, each enforced at "
        "registration and preview: 'contribution': 'person' on a partition whose unit is "
        "'person', 'neighbours': 'zero_out' on a tree_aggregation of an 'add_remove' dataset "
        "(docs/accounting.md, *Blocks that protect persons*, *Tree aggregation's neighbours*)",
    )


class DatasetCreated(DatasetOut):
    """A new dataset; ``warnings`` says what the curator may not have meant (a name another
    dataset of the organisation already has: names are labels, ids address datasets)."""

    warnings: list[str] = Field(default_factory=list)


class BudgetChangeOut(DatasetOut):
    """The dataset after a budget change, with what the change did to its capacity."""

    effect: str = Field(
        description="which rule applied and what the dataset can still admit: a change never "
        "moves the certified reading; in zcdp, rdp and gdp, once something was charged, the "
        "thresholds and δ shares of creation stay and ε caps the certified reading, a raise "
        "climbs the ladder above the creation threshold and a δ raise funds nothing "
        "(docs/accounting.md, *Budget changes*)"
    )


class DatasetList(BaseModel):
    datasets: list[DatasetOut]
    next_offset: int | None
