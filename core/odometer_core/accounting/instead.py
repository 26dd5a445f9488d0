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
- ``dp_sgd``: ``instead`` is the noise multiplier up; ``alternatives`` hold the steps (an
  integer, down) and the sampling rate (down). Each candidate may cost a PLD at every level
  (the rdp PLD branch's ε_i, from accounting 1.6.0), so the candidates are placed by a cheap
  proxy of the job's charge (:func:`proxy`, its RDP conversion) rather than halfway: one
  candidate per knob first, the steps' (whose candidates reuse the job's PLD step) placing the
  others near where the proxy puts its edge, then halving each bracket on the proxy's scale
  (:func:`_guided_edges`). Every candidate is still decided by the admission itself, so the
  proxy only saves candidates, never decides one.
- Either, holding an approximate item (``approx_dp``, or ``zcdp`` with a δ): ``alternatives``
  also divides every item's own δ by one **delta factor** — refused on δ, no noise helps.

Admission is monotone in every knob (each item's charge is, in every mode, and so is every
composition rule the modes apply; each level admits iff its own charge fits), so a bisection
finds the edge of the conjunction. Every value tried is the rounded value that would be sent,
and the suggestion is one that was admitted when tried: nothing is rounded after the check.

The search is *anytime* and breadth first: the service bounds it by CPU (each candidate of a
``composed`` list in ``basic`` costs a joint PLD, about 50 ms; of a training job in ``rdp``, a
PLD of the branch), so every knob first gets one admitted value (its bracket) before any knob is
bisected, and when the bound stops it (:attr:`Rules.stopped`) each knob keeps the best admitted
candidate found so far — admitted, if not the closest to the edge — and the knobs not reached
are left out. ``docs/accounting.md``, *What would fit instead*.

The summary's tables (each kind's one parameter, the digits of its figures, the exception that
stops a search) are handed in as :class:`Rules` by :func:`odometer_core.accounting.summary.
refusal`, so this module does not import the summary (no import cycle).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from odometer_core.accounting import memo
from odometer_core.accounting.conversions import rdp_to_epsilon
from odometer_core.accounting.declarations import (
    DPSGD,
    ZCDP,
    ApproxDP,
    Composed,
    Declaration,
    Gaussian,
    Subsampled,
    parse_declaration,
)
from odometer_core.accounting.exact import fmt, rounded, to_float_down, to_float_up
from odometer_core.accounting.subsampling import poisson_gaussian_rdp

#: The kinds :func:`suggest` answers for.
KINDS: tuple[type[Declaration], ...] = (Subsampled, Composed, DPSGD)
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
        if guided(declaration):
            edges = _guided_edges(declaration, [first, *others], admitted, rules.stopped)
        else:
            edges = _edges(declaration, [first, *others], admitted, rules.stopped)
    for position, (knob, edge) in enumerate(zip([first, *others], edges, strict=True)):
        if knob is None or edge is None:
            continue
        relation = "≤" if knob.grows else "≥"
        what = f"{knob.name} {relation} {fmt(edge[1])}"
        phrases.append(what if phrases else f"{declaration.kind} with {what}")
        if position == 0:
            suggestion = _as_sent(knob, edge[0])
        else:
            found.append(_as_sent(knob, edge[0]))
    return suggestion, found, phrases


def _as_sent(knob: Knob, declaration: Declaration) -> dict[str, Any]:
    """``declaration`` as a suggestion: a repeated mechanism's fewer repetitions keep the
    refused form ``{"mechanism": …, "count": k}`` even at k = 1, which
    :meth:`~odometer_core.accounting.declarations.Composed.to_json` writes as a list of one
    item (the same declaration, but not the shape the text's "count ≤ 1" names, and without
    the ``mechanism`` a caller of the repeated form reads: a search its bound cut after the
    count's first candidate returned it)."""
    if knob.count and knob.name == "count" and isinstance(declaration, Composed):
        ((item, count),) = declaration.items
        return {"type": declaration.kind, "mechanism": item.to_json(), "count": count}
    return declaration.to_json()


#: A knob's edge: the declaration there and the knob's value (``None``: none found).
Edge = tuple[Declaration, Decimal] | None


def _edges(
    declaration: Declaration, knobs: list[Knob | None], admitted: Admits, stop: type[Exception]
) -> list[Edge]:
    """Each knob's edge (the kinds whose candidates are not placed by :func:`proxy`), breadth
    first as :func:`_guided_edges`: every knob's bracket (its first admitted value) before any
    bisection, so that a search the bound stops has a suggestion for every knob it reached,
    the nearest to its edge it found."""
    best: dict[int, list[tuple[Declaration, Decimal]]] = {}
    searches = [
        (knob, _search(declaration, knob, admitted, stop, best.setdefault(i, [])))
        for i, knob in enumerate(knobs)
        if knob is not None
    ]
    # narrowed integers first: a count's bisection ends in log2(count) candidates, where a
    # value's runs to SEARCH_DIGITS digits (about 14); cut by the bound after the noise
    # factor's, a count kept its bracket (1) instead of its edge
    narrowing = sorted(searches, key=lambda pair: not pair[0].count)
    try:
        for _, search in searches:
            next(search, None)
        for _, search in narrowing:
            for _ in search:
                pass
    except stop:
        pass
    return [best[i][0] if best.get(i) else None for i in range(len(knobs))]


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
    if isinstance(declaration, DPSGD):
        steps = Knob("steps", True, True, _steps, _with(lambda d, x: _replace(d, steps=int(x))))
        rate = Knob(
            "sample_rate", True, False, _sample_rate, _with(lambda d, x: _replace(d, sample_rate=x))
        )
        return _primary(declaration, rules), [steps, rate]
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


def _steps(d: Declaration) -> Decimal:
    assert isinstance(d, DPSGD)
    return Decimal(d.steps)


def _sample_rate(d: Declaration) -> Decimal:
    assert isinstance(d, DPSGD)
    return d.sample_rate


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
def _fits(
    declaration: Declaration,
    knob: Knob,
    admitted: Admits,
    stop: type[Exception],
    kept: list[tuple[Declaration, Decimal]],
) -> Callable[[Decimal], bool]:
    """Whether ``declaration`` with ``knob`` at a value is admitted (a value the knob cannot
    take is not); the last admitted candidate and its value are kept in ``kept``, and ``stop``
    raised by ``admitted`` goes through."""

    def fits(value: Decimal) -> bool:
        try:
            candidate = knob.put(declaration, value)
            ok = admitted(candidate)
        except stop:
            raise
        except ValueError:
            return False
        if ok:
            kept[:] = [(candidate, value)]
        return ok

    return fits


def _search(
    declaration: Declaration,
    knob: Knob,
    admitted: Admits,
    stop: type[Exception],
    kept: list[tuple[Declaration, Decimal]],
) -> Iterator[None]:
    """The search of ``knob``'s edge, paused once after its bracket (its first admitted value):
    ``kept`` holds the last admitted declaration and value. Every value tried is rounded to the
    knob's digits on the side that costs less and tried as it would be sent; the searches move
    toward the edge, so the last admitted is the closest. ``stop`` raised by ``admitted``
    goes through."""

    fits = _fits(declaration, knob, admitted, stop, kept)

    if knob.count:
        return _count_search(int(knob.get(declaration)), fits)
    if knob.grows:
        return _down_search(knob.get(declaration), knob.digits, fits)
    return _up_search(knob.get(declaration), knob.digits, fits)


def _down(value: Decimal, digits: int) -> Decimal:
    return rounded(value, up=False, digits=digits)


def _up(value: Decimal, digits: int) -> Decimal:
    return rounded(value, up=True, digits=digits)


def _count_search(refused: int, fits: Callable[[Decimal], bool]) -> Iterator[None]:
    """The largest count in [1, ``refused``) that fits (bisection on the integers); the last
    value ``fits`` admitted is it. Pauses once 1 is admitted."""
    if refused <= 1 or not fits(Decimal(1)):
        return
    yield
    lo, hi = 1, refused
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(Decimal(mid)) else (lo, mid)


def _down_search(refused: Decimal, digits: int, fits: Callable[[Decimal], bool]) -> Iterator[None]:
    """The largest value below ``refused`` that fits, rounded down to ``digits`` digits: from
    the first of its halvings that fits (then a pause), then bisection on rounded values."""
    lo = _down(refused / 2, digits)
    for _ in range(BRACKET):
        if lo > 0 and fits(lo):
            break
        lo = _down(lo / 2, digits)
    else:
        return
    yield
    hi = refused
    while True:
        mid = _down((lo + hi) / 2, digits)
        if mid <= lo or mid >= hi:
            break
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)


def _up_search(refused: Decimal, digits: int, fits: Callable[[Decimal], bool]) -> Iterator[None]:
    """The smallest value above ``refused`` that fits, rounded up to ``digits`` digits: from
    the first of its doublings that fits (then a pause), then bisection on rounded values."""
    lo, hi = refused, _up(max(refused, Decimal(1)) * 2, digits)
    for _ in range(BRACKET):
        if fits(hi):
            break
        lo, hi = hi, _up(hi * 2, digits)
    else:
        return
    yield
    while True:
        mid = _up((lo + hi) / 2, digits)
        if mid <= lo or mid >= hi:
            break
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)


# ---------------------------------------------------------------------------- training jobs
#: The δ at which :func:`proxy` converts a training job's RDP curve. Any fixed δ serves: the
#: proxy only orders candidates and places the next one tried, it never decides one.
PROXY_DELTA = 1e-5
#: The orders of :func:`proxy`'s curve.
PROXY_ORDERS: tuple[float, ...] = (
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 14.0, 16.0,
    20.0, 24.0, 32.0, 48.0, 64.0, 128.0, 256.0,
)  # fmt: skip
#: Where a training job's search first looks, knowing nothing yet: this much below the refused
#: job's proxy (then twice as far each time that is refused too). A first guess that is
#: admitted places every other knob's first candidate (:class:`_Guide`); a refused one costs a
#: candidate more, which the 0.1 s a refusal may search cannot spare.
FIRST_STEP = 0.19
#: Where a later knob's search first looks: this much below the proxy the search has seen
#: admitted (then 4× as far each time that is refused): the proxy's ratio to the charge that
#: decides drifts by about 0.5 % between the three knobs' edges (the tutorial's job in rdp:
#: the edges' proxies 2.1011 for the steps, 2.0951 for the rate, 2.0915 for the noise).
MARGIN = 0.005
#: Iterations of :func:`_solve` (a bracketed root of a smooth monotone function in log-log).
SOLVE_STEPS = 12
#: :func:`_solve` stops when the proxy is within this relative distance of its target: a
#: tenth of :data:`MARGIN`, finer than the proxy predicts the charge (each proxy of a new rate
#: or noise costs about a millisecond, counted in the search's CPU).
SOLVE_TOLERANCE = MARGIN / 10


@memo.memoised
def _step_curve(rate: float, noise: float) -> tuple[float, ...]:
    """The RDP curve of one Poisson-subsampled Gaussian step on :data:`PROXY_ORDERS`
    (Mironov–Talwar–Zhang 2019, :func:`~odometer_core.accounting.subsampling.
    poisson_gaussian_rdp`); memoised, so that a search tried again finds it."""
    orders = np.asarray(PROXY_ORDERS, dtype=np.float64)
    return tuple(poisson_gaussian_rdp(rate, noise, orders).tolist())


def proxy(declaration: Declaration) -> float:
    """A training job's search proxy: ε at :data:`PROXY_DELTA` of its RDP curve (one step's
    curve × steps, Mironov 2017 Prop. 1; converted by Canonne–Kamath–Steinke 2020 Prop. 12).
    It grows with the steps and the sampling rate and falls as the noise grows, as every level's
    charge of the job does; it costs a millisecond where a PLD of the job (the rdp PLD branch's
    ε_i, ``basic``'s charge) costs 50–140 ms."""
    params = _job(declaration)
    assert params is not None
    rate, noise, steps = params
    step = _step_curve(to_float_up(rate), to_float_down(noise))
    curve = np.asarray(step, dtype=np.float64) * steps
    return float(rdp_to_epsilon(PROXY_ORDERS, curve, PROXY_DELTA)[0])


def guided(declaration: Declaration) -> bool:
    """Whether a search for ``declaration`` places its candidates by :func:`proxy`: a DP-SGD
    job, or one Poisson-subsampled Gaussian (a job of one step, whose every candidate is a PLD
    of the rdp branch too)."""
    return _job(declaration) is not None


def _job(declaration: Declaration) -> tuple[Decimal, Decimal, int] | None:
    """(rate, noise multiplier, steps) of a training job: a DP-SGD run, or one
    Poisson-subsampled Gaussian (σ/Δ, 1 step); ``None`` for other kinds."""
    if isinstance(declaration, DPSGD):
        return declaration.sample_rate, declaration.noise_multiplier, declaration.steps
    if (
        isinstance(declaration, Subsampled)
        and declaration.scheme == "poisson"
        and declaration.rate is not None
        and isinstance(declaration.mechanism, Gaussian)
        and declaration.mechanism.sensitivity > 0
        and declaration.mechanism.sigma > 0
    ):
        inner = declaration.mechanism
        return declaration.rate, inner.sigma / inner.sensitivity, 1
    return None


@dataclass(slots=True)
class _Guide:
    """What a training job's search has learned across its knobs, on the proxy's scale: the
    largest proxy of a candidate admitted (``lo``) and the smallest of one refused (``hi``).
    The levels admit a job roughly when its proxy is below one threshold, the same for every
    knob (the charge that decides is a smooth function of the proxy), so this bracket places
    the next knob's first candidate near its edge."""

    lo: float = 0.0
    hi: float = math.inf


@dataclass(slots=True)
class _Walk:
    """One knob's search for a training job: the admitted value nearest the edge so far
    (``a``, its proxy ``pa``; ``None`` before one), the refused one nearest it (``b``, ``pb``;
    first the refused job's own value), how many first tries were refused (``misses``) and
    whether the grid has no value left between them (``done``)."""

    declaration: Declaration
    knob: Knob
    fits: Callable[[Decimal], bool]
    grid: _Grid
    b: Decimal
    pb: float
    a: Decimal | None = None
    pa: float = 0.0
    misses: int = 0
    done: bool = False
    seen: dict[Decimal, float | None] = dataclasses.field(default_factory=dict)

    def at(self, x: Decimal) -> float | None:
        """The proxy of the declaration with the knob at ``x`` (``None``: not a valid value),
        kept for the walk (placing one candidate evaluates the bracket's ends again)."""
        if x not in self.seen:
            try:
                self.seen[x] = proxy(self.knob.put(self.declaration, x))
            except ValueError:
                self.seen[x] = None
        return self.seen[x]

    @property
    def reuses_step(self) -> bool:
        """Whether the candidates keep the refused job's step (rate and noise): the step
        count's, each a new count of one PLD step (:mod:`~odometer_core.accounting.pld`
        keeps the step and its moments: an admission of about a fifth of one that moves the
        step)."""
        return self.knob.count

    def tries(self, target: float, guide: _Guide) -> bool | None:
        """Admission of the grid value nearest where the proxy is ``target`` between ``a``
        and ``b`` (``None``, and ``done``, when there is none)."""
        x = self.grid.inside(_solve(self.at, self.grid, self.a, self.b, target), self.a, self.b)
        p = None if x is None else self.at(x)
        if x is None or p is None:
            self.done = True
            return None
        if self.fits(x):
            self.a, self.pa = x, p
            guide.lo = max(guide.lo, p)
            return True
        self.b, self.pb = x, p
        guide.hi = min(guide.hi, p)
        return False

    def find(self, guide: _Guide) -> None:
        """A first admitted value: just below what ``guide`` saw admitted (an earlier knob's
        edge predicts this one's), or, knowing nothing yet, a step below the refused job;
        each time refused, further."""
        while self.a is None and not self.done:
            if guide.lo > 0:
                target = min(guide.lo, self.pb) * (1 - MARGIN * 4**self.misses)
            else:
                target = self.pb * (1 - FIRST_STEP) ** (2**self.misses)
            if self.tries(target, guide) is False:
                self.misses += 1
                if self.misses > 6:
                    self.done = True

    def narrow(self, guide: _Guide) -> None:
        """From the first admitted value to the edge (``a`` when the grid has no value left
        between ``a`` and ``b``): first where ``guide`` predicts the edge, just above the
        proxy admitted (a knob placed by an earlier one's edge starts within about
        :data:`MARGIN` of its own), then halving the bracket on the proxy's scale."""
        ups = 0
        while self.a is not None and not self.done:
            near = max(min(guide.hi, self.pb), self.pa) * (1 + MARGIN * 4**ups / 2)
            if ups < 3 and near < self.pb:
                target = near
                ups += 1
            else:
                target = math.sqrt(self.pa * self.pb)
            if self.tries(target, guide) is False:
                ups = 3  # the edge is bracketed near the prediction: halve from here


def _guided_edges(
    declaration: Declaration, knobs: list[Knob | None], admitted: Admits, stop: type[Exception]
) -> list[Edge]:
    """Each knob's edge for a training job (:func:`guided`), every candidate decided by
    ``admitted`` (the admission at every level: the last admitted is the edge, on the same
    grid of values as :func:`_count_search`, :func:`_down_search` and :func:`_up_search`),
    placed by :func:`proxy` rather than halfway.

    In rdp each candidate may cost a PLD of the branch (45-55 ms of CPU for the MNIST
    tutorial's job with a new rate or noise, 10 ms for a new step count of the same step), and
    the service stops the search after 0.1 s of CPU. So the search is breadth first: first one
    admitted value for every knob — the step count's first (its candidates are the cheap ones),
    bracketed on the proxy's scale to :data:`FIND_RATIO`, which places every other knob's one
    candidate just below what it admitted (:class:`_Guide`) — and only then each knob narrowed
    to its edge, in the same order. Stopped, each knob keeps the admitted value nearest its
    edge found so far: every suggestion is one the admission admitted (``docs/accounting.md``,
    *What would fit instead*)."""
    guide = _Guide()
    walks: list[_Walk | None] = []
    best: dict[int, list[tuple[Declaration, Decimal]]] = {}
    for position, knob in enumerate(knobs):
        walk = None if knob is None else _walk(declaration, knob, admitted, stop, best, position)
        walks.append(walk)
    order = sorted((w for w in walks if w is not None), key=lambda w: not w.reuses_step)
    try:
        for walk in order:
            walk.find(guide)
        for walk in order:
            walk.narrow(guide)
    except stop:
        pass
    return [best[i][0] if best.get(i) else None for i in range(len(knobs))]


def _walk(
    declaration: Declaration,
    knob: Knob,
    admitted: Admits,
    stop: type[Exception],
    best: dict[int, list[tuple[Declaration, Decimal]]],
    position: int,
) -> _Walk | None:
    """The search of ``knob`` (:class:`_Walk`), whose admissions keep the last admitted
    candidate in ``best[position]``; ``None`` when the refused job has no proxy."""
    kept = best.setdefault(position, [])

    fits = _fits(declaration, knob, admitted, stop, kept)

    refused = knob.get(declaration)
    walk = _Walk(declaration, knob, fits, _Grid(knob), refused, 0.0)
    p = walk.at(refused)
    if p is None or p <= 0:
        return None
    walk.pb = p
    return walk


@dataclass(frozen=True, slots=True)
class _Grid:
    """The values a knob's search tries: integers (a count) or :attr:`Knob.digits` significant
    digits, > 0; ``toward`` is the side admission grows on (down for steps and rates, up for a
    noise multiplier)."""

    knob: Knob

    def step(self, x: Decimal) -> Decimal:
        if self.knob.count:
            return Decimal(1)
        return Decimal(1).scaleb(x.adjusted() - self.knob.digits + 1)

    def snap(self, x: Decimal) -> Decimal:
        """``x`` on the grid, on the side admission grows on."""
        if self.knob.count:
            return Decimal(math.floor(x)) if self.knob.grows else Decimal(math.ceil(x))
        return rounded(x, up=not self.knob.grows, digits=self.knob.digits)

    def inside(self, x: Decimal | None, a: Decimal | None, b: Decimal) -> Decimal | None:
        """A grid value strictly between the admitted ``a`` (``None``: none yet) and the
        refused ``b``, as near ``x`` as the grid allows; ``None`` when there is none (the
        edge is found: ``a``)."""
        if x is None:
            return None
        x = self.snap(x)
        sign = -1 if self.knob.grows else 1  # toward admission
        if x == b or (x - b) * sign < 0:  # not on the admitted side of b: one step toward it
            x = b + sign * self.step(b) if self.knob.count else self.snap(b + sign * self.step(b))
        if a is not None and (x - a) * sign >= 0:  # at or past a: one step toward b
            x = a - sign * self.step(a)
            if not self.knob.count:
                x = rounded(x, up=self.knob.grows, digits=self.knob.digits)
            if (x - b) * sign <= 0:
                return None
        if x <= 0:
            return None
        return x


def _solve(
    at: Callable[[Decimal], float | None],
    grid: _Grid,
    a: Decimal | None,
    b: Decimal,
    target: float,
) -> Decimal | None:
    """The knob's value whose :func:`proxy` is ``target``, between the admitted ``a`` and the
    refused ``b`` (``a`` ``None``: beyond ``b``, by doublings or halvings): the Illinois
    variant of regula falsi on log value against log proxy, :data:`SOLVE_STEPS` steps at most.
    Only places a candidate; ``None`` when the proxy cannot place one."""
    sign = -1 if grid.knob.grows else 1  # toward admission
    far = a
    if far is None:
        far = b
        for _ in range(BRACKET):
            far = far * 2 if sign > 0 else far / 2
            if grid.knob.count and far < 1:
                far = Decimal(1)
            p = at(far)
            if p is not None and p <= target:
                break
            if grid.knob.count and far == 1:
                return far
        else:
            return None
    pf, pn = at(far), at(b)
    if pf is None or pn is None or pf <= 0 or pn <= target:
        return far
    if pf >= target:
        return far
    u0, u1 = math.log(float(far)), math.log(float(b))
    g0, g1 = math.log(pf) - math.log(target), math.log(pn) - math.log(target)
    side = 0
    u = u0
    for _ in range(SOLVE_STEPS):
        u = u1 - g1 * (u1 - u0) / (g1 - g0) if g1 != g0 else (u0 + u1) / 2
        p = at(Decimal(repr(math.exp(u))))
        if p is None or p <= 0:
            break
        g = math.log(p) - math.log(target)
        if abs(g) < SOLVE_TOLERANCE:
            break
        if (g < 0) == (g0 < 0):
            u0, g0 = u, g
            if side == -1:
                g1 /= 2
            side = -1
        else:
            u1, g1 = u, g
            if side == 1:
                g0 /= 2
            side = 1
    return Decimal(repr(math.exp(u)))
