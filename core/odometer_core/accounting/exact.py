"""Exact scalar amounts with directed rounding (docs/accounting.md, *Rounding*).

Scalar budgets (``basic`` ε and δ, ``zcdp`` ρ and δ, ``gdp`` μ²) are kept as
:class:`decimal.Decimal`. Amounts that arrive as decimal text (``"0.1"``) are exact, so ten
charges of 0.1 fill a budget of 1.0 exactly. Values produced by transcendental conversions are
binary floats; they enter the ledger through :func:`cost_from_float` (rounded **up** onto a
grid of :data:`SIGNIFICANT_DIGITS` significant digits) or :func:`budget_from_float` (rounded
**down**). Sums of costs round up, differences that produce a remaining budget round down, so
every inexact step errs on the side of privacy.

``Decimal("Infinity")`` is a legal cost (e.g. a Gaussian with σ = 0): it is never admitted
because no finite budget is ≥ it. NaN never enters: every constructor rejects it.
"""

from __future__ import annotations

import math
from decimal import (
    ROUND_CEILING,
    ROUND_FLOOR,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    Overflow,
)
from typing import Final

#: Working precision of every ledger operation. Inputs carry at most
#: :data:`MAX_INPUT_DIGITS` digits and float-derived costs :data:`SIGNIFICANT_DIGITS`, so
#: sums of amounts of similar magnitude are exact; when magnitudes differ by more than the
#: precision, the directed rounding below keeps the result on the safe side.
PRECISION: Final = 60
SIGNIFICANT_DIGITS: Final = 20
MAX_INPUT_DIGITS: Final = 30
#: Exponent range accepted from clients (1e-300 … 1e300: every value stays a finite, normal float).
MIN_EXPONENT: Final = -300
MAX_EXPONENT: Final = 300

_TRAPS = [InvalidOperation, DivisionByZero, Overflow]
UP: Final = Context(prec=PRECISION, rounding=ROUND_CEILING, Emin=-999999, Emax=999999, traps=_TRAPS)
DOWN: Final = Context(prec=PRECISION, rounding=ROUND_FLOOR, Emin=-999999, Emax=999999, traps=_TRAPS)

_WIDE: Final = Context(prec=200, Emin=-999999, Emax=999999, traps=_TRAPS)

ZERO: Final = Decimal(0)
ONE: Final = Decimal(1)
INFINITY: Final = Decimal("Infinity")


class AmountError(ValueError):
    """A numeric parameter is not a finite, in-range decimal."""


def parse_amount(value: object, name: str = "value") -> Decimal:
    """Parse a client-supplied number into an exact Decimal.

    Accepts ``int``, ``Decimal``, decimal text and ``float`` (a float is read through its
    shortest decimal representation, ``repr``, which is what the JSON text said). Rejects
    booleans, NaN, ±∞, more than :data:`MAX_INPUT_DIGITS` significant digits and exponents
    outside [:data:`MIN_EXPONENT`, :data:`MAX_EXPONENT`].
    """
    if isinstance(value, bool) or value is None:
        raise AmountError(f"{name} must be a number, got {value!r}")
    if isinstance(value, Decimal):
        d = value
    elif isinstance(value, int):
        d = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise AmountError(f"{name} must be finite, got {value!r}")
        d = Decimal(repr(value))
    elif isinstance(value, str):
        text = value.strip()
        if len(text) > 64:
            raise AmountError(f"{name}: decimal text too long")
        try:
            d = Decimal(text)
        except InvalidOperation:
            raise AmountError(f"{name} must be a decimal number, got {value!r}") from None
    else:
        raise AmountError(f"{name} must be a number, got {type(value).__name__}")
    if not d.is_finite():
        raise AmountError(f"{name} must be finite, got {value!r}")
    if d.is_zero():
        return ZERO
    # the range check comes first: normalising "1E1000000" would overflow the context
    # (adjusted() is the exponent of the leading digit, unchanged by normalisation)
    if not MIN_EXPONENT <= d.adjusted() <= MAX_EXPONENT:
        raise AmountError(f"{name} is out of range (|exponent| > {MAX_EXPONENT})")
    d = d.normalize(_WIDE)  # exact: inputs have at most 64 characters
    if len(d.as_tuple().digits) > MAX_INPUT_DIGITS:
        raise AmountError(f"{name} has more than {MAX_INPUT_DIGITS} significant digits")
    return d


def read_amount(value: object) -> Decimal:
    """:func:`parse_amount` for a reader that names the value itself (a request's field, whose
    validation error says where): the error says what is wrong, without a name ("has more than
    30 significant digits")."""
    try:
        return parse_amount(value)
    except AmountError as exc:
        raise AmountError(str(exc).removeprefix("value ")) from None


def cost_from_float(x: float) -> Decimal:
    """A float cost rounded **up** to :data:`SIGNIFICANT_DIGITS` significant digits.

    +∞ maps to ``Decimal("Infinity")``; NaN or a negative value raises (a cost below zero is
    a bug in a conversion, never something to clip silently).
    """
    if math.isnan(x):
        raise AmountError("a conversion produced NaN")
    if x == math.inf:
        return INFINITY
    if x < 0:
        raise AmountError(f"a conversion produced a negative cost {x!r}")
    if x == 0:
        return ZERO
    exact = Decimal(x)  # exact binary value
    q = Decimal(1).scaleb(exact.adjusted() - SIGNIFICANT_DIGITS + 1)
    return exact.quantize(q, rounding=ROUND_CEILING, context=UP).normalize(UP)


def budget_from_float(x: float) -> Decimal:
    """A float budget or threshold rounded **down** to :data:`SIGNIFICANT_DIGITS` digits.

    Negative and NaN inputs are clamped to zero budget (nothing admitted) rather than raising,
    because a derived threshold below zero simply means "this budget admits nothing".
    """
    if math.isnan(x) or x <= 0:
        return ZERO
    if x == math.inf:
        return INFINITY
    exact = Decimal(x)
    q = Decimal(1).scaleb(exact.adjusted() - SIGNIFICANT_DIGITS + 1)
    return exact.quantize(q, rounding=ROUND_FLOOR, context=DOWN).normalize(DOWN)


def add_up(*amounts: Decimal) -> Decimal:
    """Σ amounts rounded toward +∞ (used for every cost sum)."""
    total = ZERO
    for a in amounts:
        total = UP.add(total, a)
    return total


def sub_down(a: Decimal, b: Decimal) -> Decimal:
    """a − b rounded toward −∞ (used for remaining budgets)."""
    if b.is_infinite():
        return -INFINITY if not a.is_infinite() else ZERO
    return DOWN.subtract(a, b)


def sub_up(a: Decimal, b: Decimal) -> Decimal:
    """a − b rounded toward +∞ (used when a running cost total decreases on a refund)."""
    return UP.subtract(a, b)


def mul_up(a: Decimal, b: Decimal) -> Decimal:
    """a · b rounded toward +∞."""
    return UP.multiply(a, b)


def fmt(d: Decimal) -> str:
    """Canonical text of an amount: plain notation for moderate exponents, else scientific.

    Equal values always give equal text (trailing zeros are dropped), which the ledger's
    canonical JSON and hash chain rely on.
    """
    if d.is_infinite():
        return "Infinity" if d > 0 else "-Infinity"
    if d.is_zero():
        return "0"
    n = d.normalize(UP)
    if -20 <= n.adjusted() <= 20:
        return format(n, "f")
    return format(n, "E").replace("E+", "E")


def to_float_up(d: Decimal) -> float:
    """The smallest float ≥ d (for feeding exact amounts into float formulas as costs)."""
    if d.is_infinite():
        return math.inf if d > 0 else -math.inf
    f = float(d)
    if Decimal(f) < d:
        f = math.nextafter(f, math.inf)
    return f


def to_float_down(d: Decimal) -> float:
    """The largest float ≤ d (for feeding budgets into float formulas)."""
    if d.is_infinite():
        return math.inf if d > 0 else -math.inf
    f = float(d)
    if Decimal(f) > d:
        f = math.nextafter(f, -math.inf)
    return f


def rounded(value: Decimal, *, up: bool, digits: int = 8, places: int | None = None) -> Decimal:
    """The one rounding for display (the summaries, the report's charts,
    ``app/reports_svg.py``, the filters' sentences, the fractions of a budget spent and left):
    ``value`` to at most ``digits`` significant digits (or, given ``places``, to that many
    decimal places: a fraction of a budget, whose percentage then has ``places`` − 2), towards
    +∞ (``up``: a reading, a spend) or towards −∞ (what is left, a budget drawn as a limit), so
    that the figure read is never more favourable than the exact one. Zero and non-finite
    values are returned as they are."""
    if not value.is_finite() or value == 0:
        return value
    exp = -places if places is not None else value.adjusted() - digits + 1
    rounding = ROUND_CEILING if up else ROUND_FLOOR
    return value.quantize(Decimal(1).scaleb(exp), rounding=rounding).normalize()
