"""Shared field types: exact amounts, integers, strict models, the error body."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)

from odometer_core.accounting import AmountError, fmt, parse_amount
from odometer_core.accounting.exact import ONE, ZERO

DECIMAL_PATTERN = r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$"


def _amount(value: object) -> Decimal:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number (NaN and ±Infinity are not numbers here)")
    try:
        return parse_amount(value, "value")
    except AmountError as exc:
        raise ValueError(str(exc).removeprefix("value ")) from None


#: An exact decimal amount: a JSON number or a decimal string, returned as a decimal string.
#: Range checks (≥ 0, δ < 1, limits) belong to the accounting core, which names the field.
Amount = Annotated[
    Decimal,
    BeforeValidator(_amount),
    PlainSerializer(fmt, return_type=str, when_used="always"),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number"},
                {"type": "string", "pattern": DECIMAL_PATTERN, "maxLength": 64},
            ],
            "description": 'exact decimal: a JSON number or a decimal string such as "0.1"',
            "examples": ["0.1"],
        }
    ),
]


def _probability(value: Decimal) -> Decimal:
    if not ZERO <= value < ONE:
        raise ValueError("must be a δ: 0 ≤ δ < 1")
    return value


#: An exact δ (0 ≤ δ < 1). Used where the accounting core only compares the value with the
#: budget's δ, so that a negative or huge one is refused instead of being recorded.
Delta = Annotated[Amount, AfterValidator(_probability)]


def _integer(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError("must be an integer, not a boolean")
    return value


#: Refuses booleans before pydantic's int coercion would read ``true`` as 1. A bounded
#: integer is written ``Annotated[int, Field(ge=…, le=…), NOT_A_BOOLEAN]``: with the bounds
#: *before* the validator the schema says ``minimum``/``maximum``; after it, pydantic can only
#: document them as non-standard ``ge``/``le`` keys that clients and fuzzers ignore.
NOT_A_BOOLEAN = BeforeValidator(_integer)


def optional(**kwargs: Any) -> Any:
    """An omittable field: ``None`` when absent, documented without ``null``."""
    return Field(default=None, json_schema_extra=not_null, **kwargs)


class StrictModel(BaseModel):
    """Unknown fields are refused; an explicit ``null`` is refused too (omit the field
    instead), so every accepted document has exactly one meaning."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            nulls = sorted(str(k) for k, v in data.items() if v is None)
            if nulls:
                raise ValueError(
                    f"null is not allowed (omit the field instead): {', '.join(nulls)}"
                )
        return data


def not_null(schema: dict[str, Any]) -> None:
    """JSON-schema hook for optional fields: document them as omittable, not nullable."""
    variants = schema.pop("anyOf", None)
    if variants is not None:
        kept = [v for v in variants if v != {"type": "null"}]
        if len(kept) == 1:
            schema.update(kept[0])
        else:
            schema["anyOf"] = kept
    schema.pop("default", None)


class ErrorBody(BaseModel):
    """Every error: a stable code, a human-readable detail, and code-specific fields."""

    model_config = ConfigDict(extra="allow")

    error: str = Field(examples=["BudgetExceeded"])
    detail: str


class SummaryGuarantee(BaseModel):
    """The certified reading so far, rounded up to 8 significant digits (still a guarantee)."""

    epsilon: str
    delta: str


class LeftAmount(BaseModel):
    """What is left of one budget, in the mode's unit, rounded down to 8 significant digits."""

    unit: Literal["epsilon", "delta", "rho", "mu_squared", "rdp"]
    amount: str
    budget: str = Field(description="the budget it is left of, in the same unit")
    fraction: str = Field(description="amount / budget, rounded down to 4 decimals")
    order: str | None = Field(
        default=None,
        description="rdp: the order with the largest share of its threshold left (a curve "
        "budget: no (ε, δ) remainder is given, ε does not subtract)",
    )
    sub_budget: str | None = Field(default=None, description="split: the sub-budget")


class MoreOfLast(BaseModel):
    """How many more of the last admitted declaration the dataset's budget admits in a
    row, nothing else admitted meanwhile (levels above the dataset not counted)."""

    count: int
    at_least: bool = Field(description="counting stopped at 1000: at least ``count``")
    of: dict[str, Any] = Field(description="the declaration counted")
    sub_budget: str | None = None


class Summary(BaseModel):
    """One reading to quote (docs/accounting.md, *One reading to quote*)."""

    text: str = Field(
        examples=[
            "certified ε = 0.9, δ = 0 so far; left ε 0.1 (10 % of 1), δ 0.000001 (100 % of "
            "0.000001); 1 more pure_dp like the last fits"
        ]
    )
    guarantee: SummaryGuarantee
    left: list[LeftAmount]
    more: MoreOfLast | None = None


class RefusalSummary(BaseModel):
    """A refusal in one line: which budget and constraint bound, what is left, and what
    would fit instead."""

    text: str
    level: Literal["dataset", "organisation", "quota"]
    bound: str = Field(description="the constraint that bound, as the filter states it")
    guarantee: SummaryGuarantee = Field(description="the refusing budget's certified reading")
    left: list[LeftAmount]
    instead: dict[str, Any] | None = Field(
        description="the same declaration with its privacy parameter (ε, ρ, μ, or the noise "
        "scale σ or b) at the edge of what the refusing budget admits now, checked by its "
        "filter; null for kinds without one such parameter or when none fits"
    )


class BudgetExceededBody(ErrorBody):
    """409 for a rejected invocation (written to the ledger as ``invocation_rejected``)."""

    id: str
    level: Literal["dataset", "organisation", "quota"] = Field(
        description="the level that refused: the dataset budget, the organisation's cap or "
        "the analyst's quota"
    )
    requested: dict[str, Any]
    remaining: dict[str, Any]
    ledger_seq: int
    blocks: list[dict[str, Any]] | None = Field(
        default=None,
        description="partitioned datasets: the selected blocks that refused (at most 20 "
        "ranges), each with what it has left and why",
    )
    summary: RefusalSummary | None = Field(
        default=None,
        description="the refusal in one line, with what would fit instead (whole datasets)",
    )


def render(model: BaseModel) -> str:
    """A response body as sent and stored under an idempotency key: the model's fields in
    declaration order, an absent (``None``) top-level field left out, as compact UTF-8 JSON
    (the same form as the API's JSON responses, encoded by orjson). Nested values are written
    as they are; amounts are text, never binary floats (orjson would write a NaN float as
    ``null`` where the standard encoder refused it)."""
    fields = {name: value for name, value in model.model_dump().items() if value is not None}
    return orjson.dumps(fields).decode()
