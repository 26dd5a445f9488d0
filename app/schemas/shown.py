"""Amounts as people read them, sent by the API so that no page rounds or subtracts for itself
(issue 48: one rounding for display, the core's
:func:`odometer_core.accounting.summary.shown`).

Each status the dashboard draws a gauge of (a dataset's, a sub-budget's, a run of blocks')
carries ``shown``: its certified reading rounded up to :data:`READING_DIGITS` significant
digits, and what its filter counts in the mode's own unit (spent and reserved rounded up,
what remains and the budget rounded down, to :data:`DIGITS` digits: the direction that never
flatters); a fraction is shown as a percentage rounded down. The exact figures stay where they
were; ``docs/dashboard.md``.

Every other amount a table prints (a charge, a refund, a quota, a cap, what an organisation
spent, reserved or has left, what a dataset drew from its cap) has its text beside it in one
shape: where an object carries an amount ``X`` (``{"epsilon": "0.2151001", "delta": "0"}``),
its ``shown.X`` is that amount's :data:`AmountText`, unit by unit
(``{"epsilon": "0.2151", "delta": "0"}``), built by :func:`amount_text` to :data:`DIGITS`
digits in the direction of :data:`UP` (what was spent) or down (what is given, kept or left).
A ledger entry is hashed as it is, so a ledger page carries its entries' texts by ``seq``.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from pydantic import BaseModel, Field

from odometer_core.accounting import fmt, summary

#: Significant digits of an amount the dashboard prints (the charts' too).
DIGITS = 6
#: Significant digits of a certified reading (the summary's).
READING_DIGITS = summary.DIGITS
#: Plain notation below 10**PLAIN_BELOW, scientific above (as the charts print).
PLAIN_BELOW = 15


def text(value: Any, *, up: bool, digits: int = DIGITS) -> str | None:
    """An exact decimal (text) rounded for display by the core's rule; ``None`` for none."""
    if value is None:
        return None
    try:
        return summary.shown(Decimal(str(value)), up=up, digits=digits, plain_below=PLAIN_BELOW)
    except (InvalidOperation, ValueError):
        return None


#: An amount's text by unit: the scalar units it carries (``epsilon``, ``delta``, ``rho``,
#: ``mu_squared``), each rounded to :data:`DIGITS` significant digits; an rdp curve has none.
AmountText = dict[str, str]
#: The units an amount's text has, in the order pages print them.
UNITS = ("epsilon", "rho", "mu_squared", "delta")
#: Amounts rounded up (what was spent or is held: never understated); every other amount
#: (a budget, a quota, a cap, what remains, a refund) is rounded down (never overstated).
UP = frozenset({"charge", "charged", "spent", "reserved", "drawn", "requested"})

#: The description of every ``shown`` of amounts in the API document.
SHOWN_AMOUNTS = (
    "the amounts above as pages print them (app/schemas/shown.py): by field name, each "
    "scalar unit rounded by the core's one rule for display to 6 significant digits, up for "
    "what was spent (charge, charged, spent, reserved, drawn, requested), down for the rest "
    "(budget, quota, cap, remaining, refunds); an rdp curve has none"
)


def amount_text(amount: Any, *, up: bool) -> AmountText | None:
    """``amount``'s scalar units as text rounded by the core's rule (:func:`text`), in
    :data:`UNITS` order; ``None`` when it is no amount or has no scalar unit (a curve)."""
    if isinstance(amount, BaseModel):
        amount = amount.model_dump(mode="json")
    if not isinstance(amount, Mapping):
        return None
    shown: AmountText = {}
    for unit in UNITS:
        value = amount.get(unit)
        if isinstance(value, str | int | Decimal) and not isinstance(value, bool):
            figure = text(value, up=up)
            if figure is not None:
                shown[unit] = figure
    return shown or None


def amounts_shown(**amounts: Any) -> dict[str, AmountText]:
    """``shown`` of an object's amounts, by field name: each rounded up when its name is in
    :data:`UP`, down otherwise; a field with no scalar amount is left out."""
    found = {name: amount_text(value, up=name in UP) for name, value in amounts.items()}
    return {name: value for name, value in found.items() if value is not None}


def percent(fraction: Any) -> str | None:
    """A fraction in [0, 1] as a percentage rounded down (``0.4848`` → ``48.48 %``)."""
    if fraction is None:
        return None
    try:
        value = Decimal(str(fraction)) * 100
    except InvalidOperation:
        return None
    return f"{text(value, up=False)} %"


class ShownReading(BaseModel):
    """A certified reading rounded up to 8 significant digits (still a guarantee)."""

    epsilon: str
    delta: str


class ShownCounted(BaseModel):
    """What a status's filter counts, in one unit, rounded for display (6 significant
    digits): spent and reserved up, what remains and the budget down."""

    unit: Literal["epsilon", "rho", "mu_squared"] = Field(
        description="basic: ε; zcdp: ρ; gdp: μ²; rdp: ε of the running curve's (ε, δ) "
        "conversion, an estimate that is not certified"
    )
    spent: str
    reserved: str = Field(description="open reservations (basic); 0 elsewhere")
    remaining: str = Field(description="rdp: the budget's ε less the estimate, never below 0")
    budget: str
    remaining_exact: str = Field(
        description="what remains, exact (rdp: the budget's ε less the estimate, worked out "
        "by the server; elsewhere the status's remaining)"
    )


class StatusShown(BaseModel):
    """A status's figures as the dashboard prints them (``app/schemas/shown.py``)."""

    reading: ShownReading | None = Field(
        default=None, description="the certified odometer reading, rounded up to 8 digits"
    )
    counted: ShownCounted | None = Field(
        default=None, description="what the filter counts; null for split (see sub_budgets)"
    )
    estimate_above: bool = Field(
        default=False,
        description="rdp: the (ε, δ) estimate is above the certified reading (compared "
        "exactly), so the dashboard shows no estimate",
    )
    fraction_spent: str | None = Field(
        default=None,
        description="the one fraction of the budget spent (the core's, rounded up to 4 "
        "decimals) as a percentage rounded down, e.g. '48.48 %'",
    )
    fraction_spent_exact: str | None = Field(
        default=None, description="that fraction as a decimal, for drawing a bar"
    )
    sub_budgets: dict[str, StatusShown] | None = Field(
        default=None, description="split: each sub-budget's"
    )
    budget: AmountText | None = Field(
        default=None, description="the status's budget, unit by unit, rounded down (6 digits)"
    )
    spent: AmountText | None = Field(
        default=None, description="its spent, unit by unit, rounded up (6 digits)"
    )
    spent_eps_delta: AmountText | None = Field(
        default=None, description="its spent (ε, δ), rounded up (6 digits)"
    )
    reserved: AmountText | None = Field(
        default=None, description="its reserved ε (basic), rounded up (6 digits)"
    )
    remaining: AmountText | None = Field(
        default=None,
        description="its remaining, unit by unit, rounded down (6 digits; none for a curve)",
    )


def _counted(view: Mapping[str, Any]) -> tuple[ShownCounted | None, bool]:
    mode = view.get("mode")
    spent, remaining = view.get("spent") or {}, view.get("remaining") or {}
    budget = view.get("budget") or {}
    above = False
    if mode == "basic":
        figures = ("epsilon", spent.get("epsilon"), (view.get("reserved") or {}).get("epsilon"))
        rest, whole = remaining.get("epsilon"), budget.get("epsilon")
    elif mode == "zcdp":
        figures = ("rho", spent.get("rho"), "0")
        rest, whole = remaining.get("rho"), view.get("rho_budget")
    elif mode == "gdp":
        figures = ("mu_squared", spent.get("mu_squared"), "0")
        rest, whole = remaining.get("mu_squared"), view.get("mu_squared_budget")
    elif mode == "rdp" and view.get("spent_eps_delta"):
        estimate = Decimal(view["spent_eps_delta"]["epsilon"])
        figures = ("epsilon", str(estimate), "0")
        whole = budget.get("epsilon")
        rest = None if whole is None else fmt(max(Decimal(whole) - estimate, Decimal(0)))
        reading = (view.get("odometer") or {}).get("epsilon")
        above = reading is not None and estimate > Decimal(reading)
    else:
        return None, False
    unit, spent_text, reserved = figures
    parts = (
        text(spent_text, up=True),
        text(reserved, up=True),
        text(rest, up=False),
        text(whole, up=False),
    )
    if any(p is None for p in parts):
        return None, above
    s, r, left, b = (str(p) for p in parts)
    counted = ShownCounted(
        unit=unit, spent=s, reserved=r, remaining=left, budget=b, remaining_exact=str(rest)
    )
    return counted, above


def reading(epsilon: Any, delta: Any) -> ShownReading:
    """A certified (ε, δ) rounded up to :data:`READING_DIGITS` significant digits."""
    return ShownReading(
        epsilon=str(text(epsilon, up=True, digits=READING_DIGITS)),
        delta=str(text(delta, up=True, digits=READING_DIGITS)),
    )


def status_shown(view: Mapping[str, Any], fraction: Any = None) -> StatusShown:
    """``shown`` of a status view (a filter's status, a sub-budget's, a run's); ``fraction``
    is its one fraction spent where known (a run of blocks'), else the core's."""
    odometer = view.get("odometer")
    certified = None
    if isinstance(odometer, Mapping) and "epsilon" in odometer and "delta" in odometer:
        certified = reading(odometer["epsilon"], odometer["delta"])
    counted, above = _counted(view)
    if fraction is None:
        try:
            fraction = summary.fractions(view)["fraction_spent"]
        except (KeyError, TypeError, ValueError, InvalidOperation):
            fraction = None
    subs = view.get("sub_budgets")
    return StatusShown(
        reading=certified,
        counted=counted,
        estimate_above=above,
        fraction_spent=percent(fraction),
        fraction_spent_exact=None if fraction is None else str(fraction),
        sub_budgets=(
            {name: status_shown(sub) for name, sub in subs.items()}
            if isinstance(subs, Mapping)
            else None
        ),
        budget=amount_text(view.get("budget"), up=False),
        spent=amount_text(view.get("spent"), up=True),
        spent_eps_delta=amount_text(view.get("spent_eps_delta"), up=True),
        reserved=amount_text(view.get("reserved"), up=True),
        remaining=amount_text(view.get("remaining"), up=False),
    )
