"""One reading to quote: a budget's status summed up for people.

Every place that shows a budget (a dataset's status, a refusal, the report, the dashboard, the
command line) leads with the same summary, built here from the filter and its
:func:`~odometer_core.accounting.filters.status` view:

- ``guarantee``: the certified odometer reading so far (``status.odometer``), rounded *up* to
  :data:`DIGITS` significant digits: a rounded reading still holds (a larger ε or δ is a weaker
  statement that the same theorem covers).
- ``left``: what is left, in the mode's own unit, rounded *down* to :data:`DIGITS` significant
  digits (never overstated): ε and δ in ``basic``; ρ in ``zcdp`` (and δ where approximate
  declarations have a share); μ² in ``gdp``; in ``rdp`` the order with the largest share of its
  threshold left (an RDP budget is a curve: ε does not subtract, so no (ε, δ) remainder is
  given in the curve modes); each sub-budget's in ``split``.
- ``fraction_spent`` and ``fraction_left``: the one fraction of the budget spent
  (:func:`spent_fraction`: in the currency the mode certifies, the most spent of the bounds its
  filter keeps), rounded up to :data:`FRACTION_PLACES` places, and exactly 1 − it; every
  ``left`` item's ``fraction`` is the same rule for its own bound (``docs/accounting.md``,
  *One fraction per budget*).
- ``more``: how many more of a declaration (the last one admitted) the filter admits in a row,
  nothing else admitted meanwhile (:func:`~odometer_core.accounting.filters.capacity`: the
  count the filter's own admission gives in a loop, exact up to :data:`MORE_LIMIT`, found in
  O(log n) admissions: about 2 ms of CPU per status read at 10⁶ in ``rdp``, less elsewhere;
  ``benchmarks/capacity.py``).
- ``text``: the three in one line.

A refusal adds :func:`instead`: the largest (or, for a noise scale, the smallest) value of the
declaration's one privacy parameter that would be admitted now, found by bisection on the
admission itself — at every level the registration spends at (dataset, organisation cap,
analyst's quota: the service passes that admission in), so that what is suggested is exactly
what would be admitted, not only what the refusing level would take (a later registration can
of course change it).

The exact figures stay where they were (``status``, ``remaining``); the summary only rounds
them for reading. ``docs/accounting.md``, *One reading to quote*.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from typing import Any, cast

from odometer_core.accounting import instead as held
from odometer_core.accounting import memo
from odometer_core.accounting.declarations import (
    DPSGD,
    GDP,
    ZCDP,
    ApproxDP,
    Declaration,
    DiscreteGaussian,
    DiscreteLaplace,
    Exponential,
    Gaussian,
    Laplace,
    PureDP,
    RandomizedResponse,
    ReportNoisyMax,
    TreeAggregation,
    TruncatedSubsampledGaussian,
)
from odometer_core.accounting.exact import fmt
from odometer_core.accounting.exact import rounded as rounded  # the one rounding for display
from odometer_core.accounting.filters import (
    CAPACITY_LIMIT,
    AccountingConfig,
    FilterState,
    admit,
    capacity,
    initial_state,
    state_from_json,
    state_to_json,
    status,
)
from odometer_core.accounting.json_types import (
    Attribution,
    CurveJSON,
    DeclarationJSON,
    EpsilonDelta,
    Fractions,
    LeftItem,
    MoreOfLast,
    RefusalSummary,
    Summary,
)

#: Significant digits of every figure in a summary.
DIGITS = 8
#: ``more`` counts at most this many (then says "at least"): as far as a preview's ``fit``.
MORE_LIMIT = CAPACITY_LIMIT
#: Bisection steps of :func:`instead` (each one admission): 2^-40 of the parameter's range,
#: below the last of :data:`DIGITS` digits.
STEPS = 40

#: The unit names people read, per unit key.
UNIT_NAMES = {"epsilon": "ε", "delta": "δ", "rho": "ρ", "mu_squared": "μ²", "rdp": "RDP"}


def round_up(value: Decimal, digits: int = DIGITS) -> Decimal:
    """``value`` rounded up to ``digits`` significant digits (a reading or a spend)."""
    return rounded(value, up=True, digits=digits)


def round_down(value: Decimal, digits: int = DIGITS) -> Decimal:
    """``value`` rounded down to ``digits`` significant digits (what is left)."""
    return rounded(value, up=False, digits=digits)


def shown(value: Decimal | str, *, up: bool, digits: int = DIGITS, plain_below: int = 10) -> str:
    """A figure as text for reading: :func:`rounded`, in plain notation from 10⁻⁷ up to below
    ``10**plain_below``, else scientific (``1.5e+20``); zero is ``0``, ±∞ ``Infinity`` and
    ``-Infinity``. (The summaries' amounts are :func:`rounded` and written as the ledger writes
    amounts, :func:`~odometer_core.accounting.exact.fmt`.)"""
    d = rounded(Decimal(value), up=up, digits=digits)
    if d.is_finite() and d != 0 and not -7 <= d.adjusted() < plain_below:
        return f"{d:e}"
    return fmt(d)


# ---------------------------------------------------------------------------- left
def left(config: AccountingConfig, state: FilterState) -> list[LeftItem]:
    """What is left, per unit of the mode (see the module docstring); each item has ``unit``,
    ``amount`` and ``budget`` (each rounded down: neither flatters), ``fraction`` (what is left
    of that constraint: 1 − its :func:`shown_fraction` spent), and ``order`` (rdp) or
    ``sub_budget`` (split) where they apply."""
    return left_of(status(config, state))


@dataclass(frozen=True, slots=True)
class Constraint:
    """One bound a filter keeps, read from its status view: ``remaining`` of ``budget`` in
    ``unit`` (exact, ``remaining`` never below 0), and the order (rdp) it is at."""

    unit: str
    remaining: Decimal
    budget: Decimal
    order: str | None = None

    def spent(self) -> Decimal:
        """The fraction of this bound spent, exact, in [0, 1]; a bound of no budget (δ_B = 0)
        has nothing to spend (0)."""
        if self.budget <= 0:
            return Decimal(0)
        return min(max((self.budget - self.remaining) / self.budget, Decimal(0)), Decimal(1))


def constraints(view: Mapping[str, Any]) -> list[Constraint]:
    """The bounds a leaf filter keeps, in the unit its filter theorem counts (the currency the
    mode certifies, docs/accounting.md, *One fraction per budget*): ε and δ in ``basic``
    (Rogers et al. 2016); ρ in ``zcdp`` (Whitehouse et al. 2023, Thm 1), and δ where approximate
    declarations have a share; μ² in ``gdp`` (Smith–Thakurta 2022); in ``rdp`` the live order
    with the largest share of its threshold left (Feldman–Zrnic 2021, Thm 4.3: the filter
    admits while any order has room), none when every order is dead or spent."""
    mode = view["mode"]
    remaining = view["remaining"]
    if mode == "basic":
        budget = view["budget"]
        return [
            _bound("epsilon", remaining["epsilon"], budget["epsilon"]),
            _bound("delta", remaining["delta"], budget["delta"]),
        ]
    if mode == "zcdp":
        return [_bound("rho", remaining["rho"], view["rho_budget"]), *_approx_delta(view)]
    if mode == "gdp":
        return [_bound("mu_squared", remaining["mu_squared"], view["mu_squared_budget"])]
    if mode == "rdp":
        return _rdp_most_left(view) + _approx_delta(view)
    raise ValueError(f"unknown mode {mode!r}")


def _bound(unit: str, remaining: str, budget: str) -> Constraint:
    return Constraint(unit, max(Decimal(remaining), Decimal(0)), Decimal(budget))


def _approx_delta(view: Mapping[str, Any]) -> list[Constraint]:
    """The δ left for approximate declarations, where the dataset has such a share."""
    share = Decimal(view.get("delta_approx", "0"))
    if share <= 0:
        return []
    return [Constraint("delta", max(Decimal(view["remaining"]["delta"]), Decimal(0)), share)]


def _rdp_most_left(view: Mapping[str, Any]) -> list[Constraint]:
    """Of an ``rdp`` filter's statements, the one with the largest share left: the ladder's
    best live order (:func:`_rdp_best`) or, from accounting 1.6.0 on, the PLD branch's ε
    (:func:`_branch_left`); the filter admits while either has room (docs/accounting.md,
    *Readings as the smallest of several statements*). None when neither has."""
    kept = _rdp_best(view) + _branch_left(view)
    return [max(kept, key=lambda bound: bound.remaining / bound.budget)] if kept else []


def _branch_left(view: Mapping[str, Any]) -> list[Constraint]:
    """The ε the PLD branch has left, ε_B − Σε_i, once the first declaration kept it and while
    it is not retired (Σε_i finite); none otherwise (no branch, off, retired, or nothing
    admitted yet)."""
    branch = view.get("pld_branch")
    if not branch or branch.get("off") or int(branch.get("count", 0)) == 0:
        return []
    spent, budget = Decimal(branch["epsilon"]), Decimal(view["budget"]["epsilon"])
    if not spent.is_finite() or budget <= 0:
        return []
    return [Constraint("epsilon", max(budget - spent, Decimal(0)), budget)]


def _rdp_best(view: Mapping[str, Any]) -> list[Constraint]:
    """The order with the largest share of its threshold left (live orders only); none when
    every order is dead or spent."""
    best: tuple[Decimal, Constraint] | None = None
    spent, dead = view["spent"]["rdp"], view["spent"]["dead"]
    for order, threshold, used, is_dead in zip(
        view["orders"], view["thresholds"], spent, dead, strict=True
    ):
        top = float(threshold)
        if is_dead or not math.isfinite(top) or top <= 0:
            continue
        total = Decimal(repr(top))
        amount = max(total - Decimal(repr(float(used))), Decimal(0))
        share = amount / total
        if best is None or share > best[0]:
            best = (share, Constraint("rdp", amount, total, order))
    return [] if best is None else [best[1]]


# ---------------------------------------------------------------------------- one fraction
#: Fractions of a budget are shown to this many decimal places (their percentages to two).
FRACTION_PLACES = 4


def spent_fraction(view: Mapping[str, Any]) -> Decimal:
    """The one fraction of a budget spent, exact, in [0, 1] (docs/accounting.md, *One fraction
    per budget*): in the currency the mode's filter certifies (:func:`constraints`), the most
    spent of the bounds it keeps (``basic``: the larger of ε's and δ's; ``zcdp``: of ρ's and
    δ_A's; ``rdp``: the statement with the most left, the ladder's best live order or the PLD
    branch's ε, 1 when neither has room); a ``split`` budget's
    is its most spent sub-budget's. Not the certified reading's ε over ε_B: the reading is a
    ladder (it reads ε_B as soon as the spend passes the level below, while the filter still
    admits) and ε does not subtract in the curve modes."""
    if view["mode"] == "split":
        subs = view["sub_budgets"].values()
        return max((spent_fraction(sub) for sub in subs), default=Decimal(0))
    bounds = constraints(view)
    if view["mode"] == "rdp" and not any(bound.unit in ("rdp", "epsilon") for bound in bounds):
        return Decimal(1)  # no live order nor branch: nothing more is admitted, whatever δ_A has
    return max((bound.spent() for bound in bounds), default=Decimal(0))


def reading_spent(view: Mapping[str, Any], reading: Mapping[str, Any]) -> Decimal | None:
    """The fraction spent that a certified ``reading`` of a filter with status ``view`` stands
    for, where the mode's currency is the reading's own: in ``basic`` the reading (E + R, D) is
    the filter's sums, so :func:`spent_fraction` of a state that read it; ``None`` in the other
    modes, whose reading is a ladder level, not a spend (a partitioned dataset's maintained
    reading covers retired blocks, whose states are gone)."""
    if view["mode"] != "basic":
        return None
    budget = view["budget"]
    return max(
        Constraint(
            unit, Decimal(budget[unit]) - Decimal(reading[unit]), Decimal(budget[unit])
        ).spent()
        for unit in ("epsilon", "delta")
    )


def shown_fraction(spent: Decimal) -> Decimal:
    """A fraction spent as shown: :func:`rounded` up to :data:`FRACTION_PLACES` places (never
    below the exact one); what is left is shown as exactly 1 − this, never above the exact."""
    return rounded(spent, up=True, places=FRACTION_PLACES)


def fractions(view: Mapping[str, Any]) -> Fractions:
    """``fraction_spent`` (:func:`spent_fraction`, shown) and ``fraction_left``, exactly
    1 − ``fraction_spent``: the two always add up to 1."""
    spent = shown_fraction(spent_fraction(view))
    return {"fraction_spent": fmt(spent), "fraction_left": fmt(Decimal(1) - spent)}


def left_of(view: Mapping[str, Any]) -> list[LeftItem]:
    """:func:`left` from a :func:`~odometer_core.accounting.filters.status` view."""
    if view["mode"] == "split":
        out: list[LeftItem] = []
        for name, sub in view["sub_budgets"].items():
            out.extend({**item, "sub_budget": name} for item in left_of(sub))
        return out
    bounds = constraints(view)
    items = [_item(bound) for bound in bounds]
    if view["mode"] == "rdp" and not any(bound.unit in ("rdp", "epsilon") for bound in bounds):
        items.insert(0, _item(Constraint("rdp", Decimal(0), Decimal(0))))  # every order spent
    return items


def _item(bound: Constraint) -> LeftItem:
    left = Decimal(0) if bound.budget <= 0 else Decimal(1) - shown_fraction(bound.spent())
    item: LeftItem = {
        "unit": bound.unit,
        "amount": fmt(round_down(bound.remaining)),
        "budget": fmt(round_down(bound.budget)),
        "fraction": fmt(left),
    }
    return item if bound.unit != "rdp" else {**item, "order": bound.order}


# ---------------------------------------------------------------------------- the summary
def summarise(
    config: AccountingConfig,
    state: FilterState,
    last: Declaration | None = None,
    *,
    sub_budget: str | None = None,
    conversion_delta: Decimal | None = None,
    view: Mapping[str, Any] | None = None,
) -> Summary:
    """The summary of a filter (module docstring); ``last`` (with its ``sub_budget`` and
    ``conversion_delta``) is the declaration ``more`` counts (none: no ``more``). A
    declaration the filter cannot account (another mode's, a missing sub-budget) gets no
    count rather than an error: the summary is a reading, not a decision."""
    view = status(config, state) if view is None else view
    more = None
    if last is not None:
        more = _more(config, state, last, sub_budget, conversion_delta)
    return compose(view, more)


def compose(view: Mapping[str, Any], more: Mapping[str, Any] | None = None) -> Summary:
    """A summary from a status view and an optional ``more`` (:func:`summarise` computes one;
    a partitioned dataset composes its own from its blocks')."""
    reading = view["odometer"]
    guarantee: EpsilonDelta = {
        "epsilon": fmt(round_up(Decimal(reading["epsilon"]))),
        "delta": fmt(round_up(Decimal(reading["delta"]))),
    }
    items = left_of(view)
    return {
        "text": _text(guarantee, items, more) + _unusable_words(view),
        "guarantee": guarantee,
        **fractions(view),
        "left": items,
        "more": None if more is None else cast(MoreOfLast, dict(more)),
    }


def _more(
    config: AccountingConfig,
    state: FilterState,
    last: Declaration,
    sub_budget: str | None,
    conversion_delta: Decimal | None,
) -> MoreOfLast | None:
    try:
        fit = capacity(
            config,
            state,
            last,
            sub_budget=sub_budget,
            conversion_delta=conversion_delta,
            limit=MORE_LIMIT,
        )
    except ValueError:  # DeclarationError, ConfigError, UnsupportedInMode: not countable here
        return None
    out: MoreOfLast = {"count": fit.count, "at_least": fit.at_least, "of": last.to_json()}
    if sub_budget is not None:
        out["sub_budget"] = sub_budget
    return out


def _text(guarantee: EpsilonDelta, items: list[LeftItem], more: Mapping[str, Any] | None) -> str:
    head = f"certified ε = {guarantee['epsilon']}, δ = {guarantee['delta']} so far"
    parts = []
    for item in items:
        name = UNIT_NAMES[item["unit"]]
        where = f" at order {item['order']}" if item.get("order") else ""
        sub = f"{item['sub_budget']}: " if item.get("sub_budget") else ""
        percent = _percent(Decimal(item["fraction"]))
        parts.append(f"{sub}{name} {item['amount']}{where} ({percent} of {item['budget']})")
    text = head + "; left " + ", ".join(parts) if parts else head
    if more is not None:
        at_least = "at least " if more["at_least"] else ""
        kind = more["of"]["type"]
        count = more["count"]
        text += f"; {at_least}{count} more {kind} like the last {'fits' if count == 1 else 'fit'}"
    return text


def _unusable_words(view: Mapping[str, Any]) -> str:
    """What a status's ``unusable`` says (a budget stored before such budgets were refused,
    which can never admit anything: :func:`~odometer_core.accounting.modes.unusable`), for
    the filter or each of its sub-budgets; empty otherwise."""
    found = [("", view.get("unusable"))]
    found += [(f"{n}: ", sub.get("unusable")) for n, sub in view.get("sub_budgets", {}).items()]
    return "".join(
        f"; unusable: {where}{problem['reason']}; {problem['fix']}"
        for where, problem in found
        if problem
    )


def _percent(fraction: Decimal) -> str:
    return f"{fmt((fraction * 100).quantize(Decimal('0.01'), rounding=ROUND_FLOOR).normalize())} %"


# ---------------------------------------------------------------------------- what fits instead
#: The one privacy parameter of each kind :func:`instead` searches, and whether admission
#: grows with it (ε, ρ, μ: smaller fits) or not (a noise scale: larger fits).
KNOBS: dict[type[Declaration], tuple[str, bool]] = {
    PureDP: ("epsilon", True),
    ApproxDP: ("epsilon", True),
    RandomizedResponse: ("epsilon", True),
    Exponential: ("epsilon", True),
    ZCDP: ("rho", True),
    GDP: ("mu", True),
    Gaussian: ("sigma", False),
    Laplace: ("scale", False),
    DiscreteLaplace: ("scale", False),
    DiscreteGaussian: ("sigma", False),
    ReportNoisyMax: ("scale", False),
    TreeAggregation: ("noise_multiplier", False),
    DPSGD: ("noise_multiplier", False),
    TruncatedSubsampledGaussian: ("noise_multiplier", False),
}

#: The other ways a kind may fit (:func:`alternatives`), each a parameter, whether admission
#: grows with it (smaller fits) and whether it is a count: for a training job, as few steps
#: (the same noise, fewer epochs) or a lower sampling rate (smaller batches), beside the noise
#: multiplier :data:`KNOBS` names, as Opacus and dp_accounting solve for one or the other.
ALTERNATIVES: dict[type[Declaration], tuple[tuple[str, bool, bool], ...]] = {
    DPSGD: (("steps", True, True), ("sample_rate", True, False)),
    # refused on δ, an approximate declaration fits with less δ (its ε edge cannot help)
    ApproxDP: (("delta", True, False),),
    ZCDP: (("delta", True, False),),
    TruncatedSubsampledGaussian: (("sampling_probability", True, False),),
}


#: Whether a declaration would be admitted now (:func:`instead`'s test of a candidate).
Admits = Callable[[Declaration], bool]

#: Kinds whose every candidate may cost a PLD or a long curve (a training job's charge in
#: ``basic``, or at a ``basic`` cap): their searches are not made at all when the refusal was
#: decided on a cheap lower bound (the exact charge was never computed, and every candidate
#: would need it), and the caller may bound them (:class:`SearchStopped`). In ``rdp`` a job's
#: curve is cached by its rate and noise, so its searches take milliseconds there.
COSTLY: tuple[type[Declaration], ...] = (DPSGD, TruncatedSubsampledGaussian)
#: How a refusal decided on a lower bound names it (``basic``'s reason).
LOWER_BOUND = "(the charge is at least"


class SearchStopped(Exception):
    """Raised by an ``admits`` callback to stop a search (the service bounds a costly kind's
    search by CPU time, which the core never reads): what was not found by then is left out,
    as a suggestion is advice, never part of the ledger."""


def instead(
    config: AccountingConfig,
    state: FilterState,
    declaration: Declaration,
    *,
    sub_budget: str | None = None,
    conversion_delta: Decimal | None = None,
    admits: Admits | None = None,
) -> DeclarationJSON | None:
    """What would be admitted now in place of ``declaration``: the same declaration with its
    privacy parameter (:data:`KNOBS`) moved to the edge of what fits, rounded to :data:`DIGITS`
    digits on the admitted side and checked (module docstring). ``admits`` is the whole
    admission the registration applies — every level it spends at (the caller builds it from
    :func:`~odometer_core.accounting.levels.decide_levels` on the levels the refusal was
    decided on), so that the suggestion sent as given is admitted; without it, the refusing
    filter's own :func:`admit` alone (a filter with no level above it). Admission at every
    level is monotone in the parameter (each level's is, and the registration admits when all
    do), so the bisection finds the edge of the conjunction. ``None`` for a kind without one
    parameter, or when nothing of the kind fits (e.g. its δ alone is over what is left)."""
    knob = KNOBS.get(type(declaration))
    if knob is None:
        return None
    field, grows = knob
    admitted = _admission(config, state, sub_budget, conversion_delta, admits)
    with memo.charges():
        try:
            return _edge(declaration, field, grows, admitted)
        except SearchStopped:
            return None


def alternatives(
    config: AccountingConfig,
    state: FilterState,
    declaration: Declaration,
    *,
    sub_budget: str | None = None,
    conversion_delta: Decimal | None = None,
    admits: Admits | None = None,
) -> list[DeclarationJSON]:
    """The other declarations of :data:`ALTERNATIVES` that would be admitted now in place of
    ``declaration``, each with one more parameter moved to the edge of what fits (the steps of
    a DP-SGD job, its sampling rate), found and checked as :func:`instead` finds its own (the
    admission at every level, ``admits``). Empty for other kinds, or when none fits."""
    found = []
    admitted = _admission(config, state, sub_budget, conversion_delta, admits)
    with memo.charges():
        for field, grows, count in ALTERNATIVES.get(type(declaration), ()):
            try:
                if count:
                    edge = _count_edge(declaration, field, admitted)
                else:
                    edge = _edge(declaration, field, grows, admitted)
            except SearchStopped:
                break
            if edge is not None:
                found.append(edge)
    return found


def _admission(
    config: AccountingConfig,
    state: FilterState,
    sub_budget: str | None,
    conversion_delta: Decimal | None,
    admits: Admits | None,
) -> Admits:
    """``admits``, or the refusing filter's own :func:`admit` when there is no level above."""
    if admits is not None:
        return admits

    def admitted(candidate: Declaration) -> bool:
        return admit(
            config, state, candidate, sub_budget=sub_budget, conversion_delta=conversion_delta
        ).admitted

    return admitted


def _count_edge(declaration: Declaration, field: str, admitted: Admits) -> DeclarationJSON | None:
    """``declaration`` with the count ``field`` (≥ 1) at the largest value below its own that
    is admitted (admission shrinks as a count grows: a bisection on the integers), or ``None``
    when not even 1 fits."""

    def fits(n: int) -> bool:
        try:
            return admitted(dataclasses.replace(declaration, **{field: n}))
        except ValueError:
            return False

    lo, hi = 1, int(getattr(declaration, field))  # hi is refused
    if hi <= 1 or not fits(lo):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return dataclasses.replace(declaration, **{field: lo}).to_json()


def _edge(
    declaration: Declaration, field: str, grows: bool, admitted: Admits
) -> DeclarationJSON | None:
    """``declaration`` with ``field`` at the edge of what ``admitted`` admits, rounded to
    :data:`DIGITS` digits on the admitted side and checked (:func:`instead`). A parameter that
    admission grows with is searched from 0 when the kind takes 0 there (ε, ρ, μ), else from
    the first of its halvings that fits (a sampling rate)."""
    value = Decimal(getattr(declaration, field))

    def made(x: Decimal) -> Declaration | None:
        try:
            return dataclasses.replace(declaration, **{field: x})
        except ValueError:
            return None

    def fits(x: Decimal) -> bool:
        candidate = made(x)
        try:
            return candidate is not None and admitted(candidate)
        except ValueError:
            return False

    if grows:
        if value <= 0:
            return None
        if made(Decimal(0)) is not None:
            if not fits(Decimal(0)):
                return None
            lo = Decimal(0)
        else:
            lo = value / 2
            for _ in range(64):
                if fits(lo):
                    break
                lo /= 2
            else:
                return None
        hi = value  # lo fits, hi does not
        for _ in range(STEPS):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        found = round_down(hi) if fits(round_down(hi)) else round_down(lo)
        if found <= 0 or not fits(found):
            return None
    else:
        lo, hi = value, max(value, Decimal(1))  # lo refused, hi to be found fitting
        for _ in range(64):
            if fits(hi):
                break
            lo, hi = hi, hi * 2
        else:
            return None
        for _ in range(STEPS):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if fits(mid) else (mid, hi)
        found = round_up(lo) if fits(round_up(lo)) else round_up(hi)
        if not fits(found):
            return None
    return dataclasses.replace(declaration, **{field: found}).to_json()


def refusal(
    config: AccountingConfig,
    state: FilterState,
    declaration: Declaration,
    *,
    level: str,
    reason: str | None,
    sub_budget: str | None = None,
    conversion_delta: Decimal | None = None,
    admits: Admits | None = None,
    search: bool = True,
) -> RefusalSummary:
    """A refusal summed up: which budget (``level``: dataset, organisation or quota) and which
    constraint of it bound (the filter's ``reason``), the refusing filter's reading and what it
    has left, and :func:`instead` (checked by ``admits``, the admission at every level), in one
    line of ``text``. ``search=False``: no
    suggestion is searched (``instead`` null, ``alternatives`` empty), for a costly kind where
    the caller knows each candidate would cost a PLD (a level in ``basic``)."""
    view = status(config, state)
    reading = compose(view)
    costly = isinstance(declaration, (*COSTLY, *held.KINDS))
    suggestion: DeclarationJSON | None = None
    others: list[DeclarationJSON] = []
    phrases: list[str] = []
    # a refusal decided on the charge's cheap lower bound (the charge itself would cost more
    # than an admission may spend): each candidate of the same shape would cost as much, so
    # nothing is searched, whichever finder would search it
    on_lower_bound = costly and reason is not None and LOWER_BOUND in reason
    if search and not on_lower_bound and held.covers(declaration):
        # subsampled and composed: odometer_core.accounting.instead (anytime, CPU-bounded)
        admitted = _admission(config, state, sub_budget, conversion_delta, admits)
        rules = held.Rules(KNOBS, DIGITS, SearchStopped)
        suggestion, others, phrases = held.suggest(declaration, admitted, rules)
    elif search and not on_lower_bound:
        for finder in (instead, alternatives):
            found = finder(
                config,
                state,
                declaration,
                sub_budget=sub_budget,
                conversion_delta=conversion_delta,
                admits=admits,
            )
            if isinstance(found, list):
                others = found
            else:
                suggestion = found
    bound = reason or "budget exceeded"
    text = f"refused by the {level} budget: {bound}"
    if bound.startswith("delta") and Decimal(view.get("delta_approx", "1")) == 0:
        text += (
            " (this budget keeps no δ for approximate declarations: all of δ_B converts its "
            f"{view['mode']} total, final_conversion_delta = δ_B; declare a δ-free form such as "
            "zcdp, rdp or gaussian, or use a dataset created with final_conversion_delta < δ_B)"
        )
    if reading["left"]:
        text += "; left " + ", ".join(_left_words(item) for item in reading["left"])
    if suggestion is not None and not held.covers(declaration):
        field, grows = KNOBS[type(declaration)]
        relation = "≤" if grows else "≥"
        phrases.append(f"{suggestion['type']} with {field} {relation} {suggestion[field]}")
    listed = [] if held.covers(declaration) else others
    for other, (field, _, _) in zip(listed, _found(declaration, listed), strict=True):
        what = f"{field} ≤ {other[field]}"
        phrases.append(what if phrases else f"{other['type']} with {what}")
    if phrases:
        text += "; " + ", or ".join(phrases) + " would fit"
    elif costly and not search:
        text += (
            f"; what {declaration.kind} would fit is not searched here (each candidate would "
            "cost a PLD of its own)"
        )
    elif costly:
        text += f"; no {declaration.kind} of this shape was found to fit (searched briefly)"
    else:
        text += f"; no {declaration.kind} of this shape fits now"
    return {
        "text": text,
        "level": level,
        "bound": bound,
        "guarantee": reading["guarantee"],
        "fraction_spent": reading["fraction_spent"],
        "fraction_left": reading["fraction_left"],
        "left": reading["left"],
        "instead": suggestion,
        "alternatives": others,
    }


def _found(declaration: Declaration, others: list[DeclarationJSON]) -> list[tuple[str, bool, bool]]:
    """The :data:`ALTERNATIVES` knob of each of ``others`` (the one it changed), in order."""
    knobs = ALTERNATIVES.get(type(declaration), ())
    original = declaration.to_json()
    return [next(k for k in knobs if other.get(k[0]) != original.get(k[0])) for other in others]


def _left_words(item: Mapping[str, Any]) -> str:
    sub = f"{item['sub_budget']}: " if item.get("sub_budget") else ""
    where = f" at order {item['order']}" if item.get("order") else ""
    return f"{sub}{UNIT_NAMES[item['unit']]} {item['amount']}{where} of {item['budget']}"


# ---------------------------------------------------------------------------- attribution
#: What an attribution is, as the report says it.
ATTRIBUTION_BASIS = (
    "the (ε, δ) of these charges alone, converted as the dataset's own status converts its "
    "running totals (spent_eps_delta): an attribution, not a certified statement; shares do "
    "not add up to the dataset's reading"
)


@dataclass(slots=True)
class Spend:
    """Net charges (refunds subtracted) of one analyst or one declaration kind, per
    sub-budget, in the charges' own units: scalars (ε, δ, ρ, μ²) add; an RDP curve adds order
    by order (composition: Mironov 2017, Prop. 1)."""

    scalars: dict[str | None, dict[str, Decimal]] = dataclasses.field(default_factory=dict)
    curves: dict[str | None, tuple[list[str], list[Decimal]]] = dataclasses.field(
        default_factory=dict
    )

    def add(self, amount: Mapping[str, Any] | None, sub_budget: str | None, sign: int = 1) -> None:
        """Add a stored charge (``sign`` -1: subtract a refund)."""
        if not isinstance(amount, Mapping):
            return
        totals = self.scalars.setdefault(sub_budget, {})
        for unit in ("epsilon", "delta", "rho", "mu_squared"):
            value = amount.get(unit)
            if isinstance(value, str):
                totals[unit] = totals.get(unit, Decimal(0)) + sign * Decimal(value)
        curve, orders = amount.get("rdp"), amount.get("orders")
        if isinstance(curve, list) and isinstance(orders, list):
            known = self.curves.get(sub_budget)
            values = [Decimal(str(v)) for v in curve]
            if known is None or known[0] != orders:
                self.curves[sub_budget] = (list(orders), [sign * v for v in values])
            else:
                for i, v in enumerate(values):
                    known[1][i] += sign * v

    def curve_json(self) -> CurveJSON | None:
        """The whole dataset's curve (not a split's): orders and the summed RDP, or ``None``."""
        known = self.curves.get(None)
        if known is None:
            return None
        return {"orders": known[0], "rdp": [fmt(max(v, Decimal(0))) for v in known[1]]}

    def attribution(self, config: AccountingConfig) -> Attribution:
        """The (ε, δ) of these charges alone (:data:`ATTRIBUTION_BASIS`): each sub-budget's
        totals as a state of its filter, converted by that filter's own status
        (``spent_eps_delta``: ε from ρ by Canonne–Kamath–Steinke 2020 Cor. 13, from μ by
        Dong–Roth–Su 2019 Cor. 2.13, from an RDP curve by Canonne–Kamath–Steinke 2020
        Prop. 12), summed over sub-budgets as the split's reading is. A part that cannot be
        read (a sub-budget since removed) is left out."""
        epsilon, delta = Decimal(0), Decimal(0)
        for sub_budget in {*self.scalars, *self.curves}:
            try:
                leaf = config.sub_budget(sub_budget) if sub_budget else config  # type: ignore[union-attr]
                view = status(leaf, self._state(leaf, sub_budget))["spent_eps_delta"]
            except (AttributeError, KeyError, ValueError):
                continue
            if self._empty(sub_budget):
                continue
            epsilon += Decimal(view["epsilon"])
            delta += Decimal(view["delta"])
        return {
            "epsilon": fmt(round_up(epsilon)),
            "delta": fmt(round_up(delta)),
            "certified": False,
        }

    def _empty(self, sub_budget: str | None) -> bool:
        scalars = self.scalars.get(sub_budget, {})
        curve = self.curves.get(sub_budget)
        return all(v <= 0 for v in scalars.values()) and (
            curve is None or all(v <= 0 for v in curve[1])
        )

    def _state(self, leaf: AccountingConfig, sub_budget: str | None) -> FilterState:
        obj = state_to_json(initial_state(leaf))
        totals = {k: fmt(max(v, Decimal(0))) for k, v in self.scalars.get(sub_budget, {}).items()}
        if leaf.mode == "basic":
            obj.update(
                spent_epsilon=totals.get("epsilon", "0"), spent_delta=totals.get("delta", "0")
            )
        elif leaf.mode == "rdp":
            curve = self.curves.get(sub_budget)
            if curve is not None:
                obj["rdp"] = [repr(float(max(v, Decimal(0)))) for v in curve[1]]
            obj["delta"] = totals.get("delta", "0")
        else:  # zcdp: rho, delta; gdp: mu_squared
            obj.update({k: v for k, v in totals.items() if k in obj})
        return state_from_json(leaf, obj)
