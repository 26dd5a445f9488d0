"""How much numerical work a declaration's charge needs, and the limit on it.

Most charges are closed forms. The expensive ones are the subsampled-Gaussian RDP series
(Mironov–Talwar–Zhang 2019: up to 1,000 erfc terms per fractional order; the without-replacement
bound of Wang–Balle–Kasiviswanathan 2019: α terms per integer order) and PLD accounting (bounded
separately in :mod:`odometer_core.accounting.pld`). A ``composed`` declaration can hold hundreds of
such
items with different parameters, nested up to four levels.

The work is counted, not timed: :func:`count` adds the number of series terms a curve evaluated
to the :class:`Meter` of the current charge, and a curve served from a cache is charged the
terms it took when it was computed (:func:`measure`), so the count is a pure function of the
declaration and the grid. :func:`limited` opens a meter for one charge; past
:data:`MAX_SERIES_TERMS` it raises :class:`DeclarationError` (a 422 that says what to change) —
after at most one more curve than the limit allows, since the count is checked per curve. The
same declaration is therefore always refused or always accounted, and a replay agrees with the
service. :func:`declaration_curve_work` is the a-priori estimate ``basic`` mode uses to pick its
grid before computing anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from odometer_core.accounting.declarations import (
    DPSGD,
    Composed,
    Declaration,
    DeclarationError,
    Gaussian,
    MixtureOfGaussians,
    RepeatAndSelect,
    SampledWithReplacement,
    Subsampled,
    TruncatedSubsampledGaussian,
)

MAX_SERIES_TERMS: Final = 3_000_000
"""Most series terms the subsampled-Gaussian curves of one charge may evaluate (≈ 0.5 s of CPU
here in the slowest regime measured, σ = 10^12 with q near 0 or 1)."""


@dataclass(slots=True)
class Meter:
    """Series terms counted so far for one charge; ``limit`` ``None``: count only."""

    limit: int | None = None
    terms: int = 0


_METER: ContextVar[Meter | None] = ContextVar("work_meter", default=None)


def count(terms: int) -> None:
    """Add ``terms`` to the current meter (if any); past its limit, refuse the declaration."""
    meter = _METER.get()
    if meter is None:
        return
    meter.terms += terms
    if meter.limit is not None and meter.terms > meter.limit:
        raise DeclarationError(
            "accounting this declaration's subsampled-Gaussian items needs more work than one "
            f"request may do (over {meter.limit:,} RDP series terms). Merge segments that share "
            "(noise multiplier, sample rate), declare the run as several invocations, or use a "
            "grid with fewer fractional orders",
            field="mechanism",
        )


@contextmanager
def measure() -> Iterator[Meter]:
    """A fresh meter without a limit for the block (what one cached curve cost)."""
    meter = Meter()
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


@contextmanager
def limited(limit: int = MAX_SERIES_TERMS) -> Iterator[Meter]:
    """A meter for one charge, refusing past ``limit`` terms (nested charges share the
    outermost one)."""
    outer = _METER.get()
    if outer is not None:
        yield outer
        return
    meter = Meter(limit)
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


_FIXED: Final = 1.0
"""Work of one subsampled-Gaussian curve besides its fractional orders (integer orders, setup)."""

_PER_FRACTIONAL_ORDER: Final = 0.18
"""Work of one fractional order of the Mironov–Talwar–Zhang series (worst regime measured)."""

_WOR_PER_ORDER: Final = 0.05
"""Work of one integer order of the without-replacement bound (Wang–Balle–Kasiviswanathan)."""


def walk(decl: Declaration) -> Iterator[Declaration]:
    """``decl`` and every declaration nested in it (composed items, subsampled and selected
    mechanisms)."""
    yield decl
    if isinstance(decl, Composed):
        for item, _ in decl.items:
            yield from walk(item)
    elif isinstance(decl, Subsampled | RepeatAndSelect | SampledWithReplacement):
        yield from walk(decl.mechanism)


def may_be_expensive(decl: Declaration) -> bool:
    """Whether ``decl``'s charge may need numerical work beyond a closed form (a PLD, an RDP
    series, a composition, a selection's bound over the orders): the service computes those
    before taking a lock."""
    searched = MixtureOfGaussians | SampledWithReplacement | TruncatedSubsampledGaussian
    if any(isinstance(node, searched) for node in walk(decl)):
        return True  # a search over thresholds, a PLD, a sum over the draws
    return any(
        isinstance(node, DPSGD | Subsampled | Composed | RepeatAndSelect) for node in walk(decl)
    )


def subsampled_gaussian_leaves(decl: Declaration) -> set[tuple[str, Decimal, Decimal]]:
    """The distinct subsampled-Gaussian parameter sets in ``decl``: ("poisson", σ/Δ, q) for
    DP-SGD runs and Poisson-subsampled Gaussians, ("wor", σ/Δ, m/n) without replacement."""
    out: set[tuple[str, Decimal, Decimal]] = set()
    for node in walk(decl):
        if isinstance(node, DPSGD):
            out.add(("poisson", node.noise_multiplier, node.sample_rate))
        elif isinstance(node, TruncatedSubsampledGaussian):  # two curves: rates q and ≈ q
            out.add(("poisson", node.noise_multiplier, node.sampling_probability))
            out.add(("truncated", node.noise_multiplier, node.sampling_probability))
        elif isinstance(node, Subsampled) and isinstance(node.mechanism, Gaussian):
            inner = node.mechanism
            if inner.sigma > 0 and inner.sensitivity > 0:
                ratio = inner.sigma / inner.sensitivity
                if node.scheme == "poisson":
                    assert node.rate is not None
                    out.add(("poisson", ratio, node.rate))
                else:
                    assert node.m is not None and node.n is not None
                    out.add(("wor", ratio, Decimal(node.m) / Decimal(node.n)))
    return out


def curve_work(scheme: str, orders: tuple[float, ...]) -> float:
    """Estimated work units of one subsampled-Gaussian curve on ``orders``."""
    if scheme == "wor":
        return _FIXED + _WOR_PER_ORDER * sum(min(a, 256.0) for a in orders if a > 1)
    fractional = sum(1 for a in orders if a != int(a))
    return _FIXED + _PER_FRACTIONAL_ORDER * fractional


def declaration_curve_work(decl: Declaration, orders: tuple[float, ...]) -> float:
    """Estimated work units of every subsampled-Gaussian curve ``decl`` needs on ``orders``."""
    return sum(curve_work(scheme, orders) for scheme, _, _ in subsampled_gaussian_leaves(decl))
