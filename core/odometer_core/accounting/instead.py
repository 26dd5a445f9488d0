"""What would fit instead, for the kinds that hold other mechanisms: ``subsampled`` and
``composed`` (a refusal's ``instead`` and ``alternatives``, :func:`odometer_core.accounting.
summary.refusal`, which hands these kinds to :func:`suggest`).

Each suggestion moves one *knob* of the refused declaration to the edge of what is admitted now,
by the admission the registration applies at every level it spends at (dataset, organisation
cap, analyst's quota: the ``admits`` the service passes in), so that a suggestion sent as given
is admitted:

- ``subsampled``: ``instead`` is the inner mechanism's own parameter (the kind's one
  parameter, :attr:`Rules.knobs`: its noise scale up, or its ε, ρ, μ down; for an inner
  ``composed`` list, that list's noise factor below); ``alternatives`` holds the sampling rate
  (``poisson``: ``rate`` down) or the sample size (``without_replacement``: ``m`` down, an
  integer). Values are searched to :data:`SEARCH_DIGITS` significant digits.
- ``composed``: ``instead`` scales the whole list by one **noise factor** f ≥ 1 — every item's
  noise scale (σ, b, a noise multiplier) multiplied by f and every item's ε, ρ or μ divided by
  it, each rounded to :attr:`Rules.digits` digits on the side that costs less; items with no
  such parameter are left as they are; ``alternatives`` holds, for a repeated mechanism
  (``{"mechanism": …, "count": k}``), fewer repetitions.
- Either, holding an approximate item (``approx_dp``, or ``zcdp`` with a δ): ``alternatives``
  also divides every item's own δ by one **delta factor** — refused on δ, no noise helps.

Admission is monotone in every knob (each item's charge is, in every mode, and so is every
composition rule the modes apply; each level admits iff its own charge fits), so a bisection
finds the edge of the conjunction. Every value tried is the rounded value that would be sent,
and the suggestion is one that was admitted when tried: nothing is rounded after the check.

The search is *anytime*: the service bounds it by CPU (each candidate of a ``composed`` list in
``basic`` costs a joint PLD, about 50 ms), and when the bound stops it (:attr:`Rules.stopped`)
the best admitted candidate found so far is kept — admitted, if not the closest to the edge —
and the knobs not yet searched are left out. ``docs/accounting.md``, *What would fit instead*.

The summary's tables (each kind's one parameter, the digits of its figures, the exception that
stops a search) are handed in as :class:`Rules` by :func:`odometer_core.accounting.summary.
refusal`, so this module does not import the summary (no import cycle).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from odometer_core.accounting import memo
from odometer_core.accounting.declarations import (
    ZCDP,
    ApproxDP,
    Composed,
    Declaration,
    Subsampled,
    parse_declaration,
)
from odometer_core.accounting.exact import fmt, rounded

#: The kinds :func:`suggest` answers for.
KINDS: tuple[type[Declaration], ...] = (Subsampled, Composed)
#: Significant digits of every value searched here (a ``composed`` list's noise factor, whose
#: items' values are then rounded to :attr:`Rules.digits`; a rate;
#: an inner parameter): about 14 admissions past the bracket, where each may be a PLD of its
#: own (a joint PLD of the list, or a subsampled Gaussian's, in ``basic``).
SEARCH_DIGITS = 4
#: Doublings (or halvings) tried to find a first admitted value (2^40: far past any noise or
#: rate a suggestion could usefully name).
BRACKET = 40
#: The kinds whose own δ is a privacy parameter (approximate DP, approximate zCDP): the
#: ``delta factor`` divides it.
OWN_DELTA: tuple[type[Declaration], ...] = (ApproxDP, ZCDP)

#: A declaration with one knob set to a value, or ``ValueError`` if that value is not valid.
Put = Callable[[Declaration, Decimal], Declaration]
#: Whether a declaration would be admitted now, at every level the registration spends at.
Admits = Callable[[Declaration], bool]


@dataclass(frozen=True, slots=True)
class Rules:
    """What the summary decides for every kind: each plain kind's one privacy parameter and
    whether admission grows with it (:data:`odometer_core.accounting.summary.KNOBS`), the
    significant digits of a figure (an item's value after scaling), and the exception an
    ``admits`` callback raises to stop a search."""

    knobs: Mapping[type[Declaration], tuple[str, bool]]
    digits: int
    stopped: type[Exception]


@dataclass(frozen=True, slots=True)
class Knob:
    """One parameter a suggestion may move: how the text names it, whether admission grows
    with it (smaller fits: ε, a rate, a count) or not (a noise scale or factor), whether it is
    an integer, its value in a declaration, and the declaration with it set."""

    name: str
    grows: bool
    count: bool
    get: Callable[[Declaration], Decimal]
    put: Put
    digits: int = SEARCH_DIGITS


def covers(declaration: Declaration) -> bool:
    """Whether :func:`suggest` answers for ``declaration``'s kind."""
    return isinstance(declaration, KINDS)


def suggest(
    declaration: Declaration, admitted: Admits, rules: Rules
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[str]]:
    """``instead``, ``alternatives`` and the phrases the refusal's text joins ("… would fit")
    for a refused ``subsampled`` or ``composed`` declaration (module docstring). ``admitted``
    is the registration's admission at every level (or the refusing filter's own)."""
    first, others = knobs(declaration, rules)
    suggestion: dict[str, Any] | None = None
    found: list[dict[str, Any]] = []
    phrases: list[str] = []
    with memo.charges():
        for position, knob in enumerate([first, *others]):
            if knob is None:
                continue
            edge, value, stopped = _edge(declaration, knob, admitted, rules.stopped)
            if edge is not None:
                relation = "≤" if knob.grows else "≥"
                what = f"{knob.name} {relation} {fmt(value)}"
                phrases.append(what if phrases else f"{declaration.kind} with {what}")
                if position == 0:
                    suggestion = edge.to_json()
                else:
                    found.append(edge.to_json())
            if stopped:
                break
    return suggestion, found, phrases


# ---------------------------------------------------------------------------- knobs
def knobs(declaration: Declaration, rules: Rules) -> tuple[Knob | None, list[Knob]]:
    """The knob of ``instead`` (``None`` if the kind has none) and those of ``alternatives``."""
    deltas = [_delta_factor(rules)] if _has_own_delta(declaration) else []
    if isinstance(declaration, Subsampled):
        inner = _primary(declaration.mechanism, rules)
        first = None if inner is None else _lifted(inner)
        if declaration.scheme == "poisson":
            rate = Knob("rate", True, False, _rate, _with(lambda d, x: _replace(d, rate=x)))
            return first, [rate, *deltas]
        m = Knob("m", True, True, _m, _with(lambda d, x: _replace(d, m=int(x))))
        return first, [m, *deltas]
    if isinstance(declaration, Composed):
        others = []
        if len(declaration.items) == 1 and declaration.items[0][1] > 1:
            others.append(Knob("count", True, True, _count, _with(_set_count)))
        return _primary(declaration, rules), [*others, *deltas]
    return _primary(declaration, rules), []


def _primary(declaration: Declaration, rules: Rules) -> Knob | None:
    """The one knob :func:`suggest` moves first: the kind's own parameter
    (:attr:`Rules.knobs`), the inner mechanism's for a subsampled one, the noise factor for a
    list with an item it can scale; ``None`` otherwise."""
    own = rules.knobs.get(type(declaration))
    if own is not None:
        field, grows = own
        return Knob(
            field,
            grows,
            False,
            lambda d: Decimal(getattr(d, field)),
            _with(lambda d, x: _replace(d, **{field: x})),
        )
    if isinstance(declaration, Subsampled):
        inner = _primary(declaration.mechanism, rules)
        return None if inner is None else _lifted(inner)
    if isinstance(declaration, Composed) and any(_scalable(d, rules) for d, _ in declaration.items):
        return Knob("noise factor", False, False, _one, _with(lambda d, f: _scaled(d, f, rules)))
    return None


def _lifted(inner: Knob) -> Knob:
    """``inner``, a knob of a subsampled declaration's mechanism, as a knob of the whole."""

    def get(d: Declaration) -> Decimal:
        assert isinstance(d, Subsampled)
        return inner.get(d.mechanism)

    def put(d: Declaration, x: Decimal) -> Declaration:
        assert isinstance(d, Subsampled)
        return _replace(d, mechanism=inner.put(d.mechanism, x))

    name = inner.name if inner.name == "noise factor" else f"mechanism.{inner.name}"
    return Knob(name, inner.grows, inner.count, get, _with(put), inner.digits)


def _scalable(declaration: Declaration, rules: Rules) -> bool:
    """Whether the noise factor moves anything in ``declaration``."""
    if type(declaration) in rules.knobs:
        return True
    if isinstance(declaration, Subsampled):
        return _scalable(declaration.mechanism, rules)
    if isinstance(declaration, Composed):
        return any(_scalable(d, rules) for d, _ in declaration.items)
    return False


def _scaled(declaration: Declaration, factor: Decimal, rules: Rules) -> Declaration:
    """``declaration`` with its noise multiplied by ``factor`` (its ε, ρ or μ divided by it),
    each value rounded to :attr:`Rules.digits` digits toward less privacy loss; kinds without
    such a parameter unchanged."""
    own = rules.knobs.get(type(declaration))
    if own is not None:
        field, grows = own
        value = Decimal(getattr(declaration, field))
        if grows:
            moved = rounded(value / factor, up=False, digits=rules.digits)
        else:
            moved = rounded(value * factor, up=True, digits=rules.digits)
        return _replace(declaration, **{field: moved})
    if isinstance(declaration, Subsampled):
        return _replace(declaration, mechanism=_scaled(declaration.mechanism, factor, rules))
    if isinstance(declaration, Composed):
        items = tuple((_scaled(d, factor, rules), count) for d, count in declaration.items)
        return _replace(declaration, items=items)
    return declaration


def _has_own_delta(declaration: Declaration) -> bool:
    """Whether some item of ``declaration`` states a δ of its own above 0."""
    if isinstance(declaration, (ApproxDP, ZCDP)):  # OWN_DELTA
        return declaration.delta > 0
    if isinstance(declaration, Subsampled):
        return _has_own_delta(declaration.mechanism)
    if isinstance(declaration, Composed):
        return any(_has_own_delta(d) for d, _ in declaration.items)
    return False


def _delta_scaled(declaration: Declaration, factor: Decimal, digits: int) -> Declaration:
    """``declaration`` with every item's own δ divided by ``factor``, rounded down to
    ``digits`` digits (less δ is a stronger guarantee of the same mechanism)."""
    if isinstance(declaration, (ApproxDP, ZCDP)):  # OWN_DELTA
        delta = rounded(declaration.delta / factor, up=False, digits=digits)
        return _replace(declaration, delta=delta)
    if isinstance(declaration, Subsampled):
        inner = _delta_scaled(declaration.mechanism, factor, digits)
        return _replace(declaration, mechanism=inner)
    if isinstance(declaration, Composed):
        items = tuple((_delta_scaled(d, factor, digits), n) for d, n in declaration.items)
        return _replace(declaration, items=items)
    return declaration


def _rate(d: Declaration) -> Decimal:
    assert isinstance(d, Subsampled) and d.rate is not None
    return d.rate


def _m(d: Declaration) -> Decimal:
    assert isinstance(d, Subsampled) and d.m is not None
    return Decimal(d.m)


def _count(d: Declaration) -> Decimal:
    assert isinstance(d, Composed)
    return Decimal(d.items[0][1])


def _set_count(d: Declaration, x: Decimal) -> Declaration:
    assert isinstance(d, Composed)
    return _replace(d, items=((d.items[0][0], int(x)),))


def _replace(declaration: Declaration, **changes: Any) -> Declaration:
    return dataclasses.replace(declaration, **changes)


def _one(d: Declaration) -> Decimal:
    return Decimal(1)


def _with(put: Put) -> Put:
    """``put`` followed by the parser (what the service would make of the suggestion sent):
    a value the kind does not take raises ``ValueError`` (``DeclarationError``) here."""

    def checked(declaration: Declaration, value: Decimal) -> Declaration:
        return parse_declaration(put(declaration, value).to_json())

    return checked


def _delta_factor(rules: Rules) -> Knob:
    """Refused on δ, where no noise helps: every item's own δ divided by one factor (the δ
    per declaration that fits, as ``approx_dp``'s own ``alternatives`` give it)."""
    put = _with(lambda d, f: _delta_scaled(d, f, rules.digits))
    return Knob("delta factor", False, False, _one, put)


# ---------------------------------------------------------------------------- the search
def _edge(
    declaration: Declaration, knob: Knob, admitted: Admits, stop: type[Exception]
) -> tuple[Declaration | None, Decimal, bool]:
    """The declaration with ``knob`` at the edge of what ``admitted`` admits, the knob's value
    there, and whether the search was stopped (``stop`` raised; then the best admitted so far,
    or ``None``). Every value tried is rounded
    to the knob's digits on the side that costs less and tried as it would be sent; the
    searches move toward the edge, so the last admitted is the closest."""
    best: list[tuple[Declaration, Decimal]] = []

    def fits(value: Decimal) -> bool:
        try:
            candidate = knob.put(declaration, value)
            ok = admitted(candidate)
        except stop:
            raise
        except ValueError:
            return False
        if ok:
            best[:] = [(candidate, value)]
        return ok

    try:
        if knob.count:
            _count_search(int(knob.get(declaration)), fits)
        elif knob.grows:
            _down_search(knob.get(declaration), knob.digits, fits)
        else:
            _up_search(knob.get(declaration), knob.digits, fits)
        stopped = False
    except stop:
        stopped = True
    if not best:
        return None, Decimal(0), stopped
    return best[0][0], best[0][1], stopped


def _down(value: Decimal, digits: int) -> Decimal:
    return rounded(value, up=False, digits=digits)


def _up(value: Decimal, digits: int) -> Decimal:
    return rounded(value, up=True, digits=digits)


def _count_search(refused: int, fits: Callable[[Decimal], bool]) -> None:
    """The largest count in [1, ``refused``) that fits (bisection on the integers); the last
    value ``fits`` admitted is it."""
    if refused <= 1 or not fits(Decimal(1)):
        return
    lo, hi = 1, refused
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(Decimal(mid)) else (lo, mid)


def _down_search(refused: Decimal, digits: int, fits: Callable[[Decimal], bool]) -> None:
    """The largest value below ``refused`` that fits, rounded down to ``digits`` digits: from
    the first of its halvings that fits, then bisection on rounded values."""
    lo = _down(refused / 2, digits)
    for _ in range(BRACKET):
        if lo > 0 and fits(lo):
            break
        lo = _down(lo / 2, digits)
    else:
        return
    hi = refused
    while True:
        mid = _down((lo + hi) / 2, digits)
        if mid <= lo or mid >= hi:
            break
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)


def _up_search(refused: Decimal, digits: int, fits: Callable[[Decimal], bool]) -> None:
    """The smallest value above ``refused`` that fits, rounded up to ``digits`` digits: from
    the first of its doublings that fits, then bisection on rounded values."""
    lo, hi = refused, _up(max(refused, Decimal(1)) * 2, digits)
    for _ in range(BRACKET):
        if fits(hi):
            break
        lo, hi = hi, _up(hi * 2, digits)
    else:
        return
    while True:
        mid = _up((lo + hi) / 2, digits)
        if mid <= lo or mid >= hi:
            break
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
