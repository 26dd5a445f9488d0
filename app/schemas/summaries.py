"""The one-line summaries of a budget (``status.summary``) and of a refusal (a 409's ``summary``):
what it guarantees, what is left, how many more fit, and what would fit instead."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field

from app.schemas._types import JSONObject
from app.schemas.shown import percent


class SummaryGuarantee(BaseModel):
    """The certified reading so far, rounded up to 8 significant digits (still a guarantee)."""

    epsilon: str
    delta: str


class LeftAmount(BaseModel):
    """What is left of one budget, in the mode's unit, rounded down to 8 significant digits."""

    unit: Literal["epsilon", "delta", "rho", "mu_squared", "rdp"]
    amount: str
    budget: str = Field(description="the budget it is left of, in the same unit")
    fraction: str = Field(
        description="the fraction of this bound left: 1 − its fraction spent (exact spent "
        "over budget, rounded up to 4 decimals), so never above amount / budget"
    )
    order: str | None = Field(
        default=None,
        description="rdp: the order with the largest share of its threshold left (a curve "
        "budget: no (ε, δ) remainder is given, ε does not subtract)",
    )
    sub_budget: str | None = Field(default=None, description="split: the sub-budget")


#: The one fraction of a budget spent (docs/accounting.md, *One fraction per budget*).
FRACTION_SPENT = (
    "the fraction of the budget spent, in [0, 1], rounded up to 4 decimals: in the unit the "
    "mode's filter counts (basic: ε and δ; zcdp: ρ, and δ of approximate declarations; gdp: "
    "μ²; rdp: the order with the most left; split: the most spent sub-budget), the most spent "
    "of its bounds; not the certified reading's ε over ε_B (a ladder level)"
)
#: What is left of it: exactly 1 − ``fraction_spent``.
FRACTION_LEFT = (
    "exactly 1 − fraction_spent: the least left of the bounds in left[] (their fraction)"
)


class MoreOfLast(BaseModel):
    """How many more of the last admitted declaration the dataset's budget admits in a
    row, nothing else admitted meanwhile (levels above the dataset not counted)."""

    count: int
    at_least: bool = Field(description="counting stopped at 1,000,000: at least ``count``")
    of: JSONObject = Field(description="the declaration counted")
    sub_budget: str | None = None


class SummaryShown(BaseModel):
    """A summary's fractions as percentages rounded down (``48.48 %``)."""

    fraction_spent: str | None
    fraction_left: str | None
    left: list[str | None] = Field(description="each left item's fraction, in left's order")


class Summary(BaseModel):
    """One reading to quote (docs/accounting.md, *One reading to quote*)."""

    text: str = Field(
        examples=[
            "certified ε = 0.9, δ = 0 so far; left ε 0.1 (10 % of 1), δ 0.000001 (100 % of "
            "0.000001); 1 more pure_dp like the last fits"
        ]
    )
    guarantee: SummaryGuarantee
    fraction_spent: str = Field(description=FRACTION_SPENT)
    fraction_left: str = Field(description=FRACTION_LEFT)
    left: list[LeftAmount]
    more: MoreOfLast | None = None

    @computed_field(  # type: ignore[prop-decorator]
        description="the fractions above as percentages rounded down, as the dashboard "
        "prints them (app/schemas/shown.py): fraction_spent, fraction_left and each left "
        "item's fraction, in left's order ('48.48 %')"
    )
    @property
    def shown(self) -> SummaryShown:
        return SummaryShown(
            fraction_spent=percent(self.fraction_spent),
            fraction_left=percent(self.fraction_left),
            left=[percent(item.fraction) for item in self.left],
        )


class RefusalSummary(BaseModel):
    """A refusal in one line: which budget and constraint bound, what is left, and what
    would fit instead."""

    text: str
    level: Literal["dataset", "organisation", "quota"]
    bound: str = Field(description="the constraint that bound, as the filter states it")
    guarantee: SummaryGuarantee = Field(description="the refusing budget's certified reading")
    fraction_spent: str = Field(description=f"the refusing budget's: {FRACTION_SPENT}")
    fraction_left: str = Field(description=FRACTION_LEFT)
    left: list[LeftAmount]
    instead: JSONObject | None = Field(
        description="the same declaration with its privacy parameter (ε, ρ, μ, or the noise "
        "scale σ or b) at the edge of what is admitted now, checked by the admission at every "
        "level the registration spends at (dataset, quota, organisation cap): for subsampled "
        "the inner mechanism's parameter, for composed every item's noise scaled by one factor "
        "(its ε, ρ or μ divided by it; the factor is in text), searched to 4 significant "
        "digits; null for kinds without one such parameter, when none fits, or when the "
        "search's CPU bound ran out first"
    )
    alternatives: list[JSONObject] = Field(
        default_factory=list,
        description="other declarations that would be admitted now, each with one more "
        "parameter at its edge, checked like instead: for dp_sgd the same job with fewer "
        "steps, then with a lower sample_rate (instead: a larger noise_multiplier); for "
        "truncated_subsampled_gaussian a lower sampling_probability; for approx_dp and an "
        "approximate zcdp a lower delta (refused on δ, no ε helps); for subsampled a lower rate "
        "(poisson) or m (without_replacement); for a composed repetition (mechanism and count) "
        "a lower count; for a composed or subsampled declaration holding approximate items, "
        "every item's own delta divided by one factor (in text); empty for other kinds or when "
        "none fits",
    )
