"""How much numerical work a declaration's charge needs, known before any of it is done.

Most charges are closed forms. The expensive ones are the subsampled-Gaussian RDP series
(Mironov–Talwar–Zhang 2019: up to 1,000 erfc terms per fractional order, ≈ 0.2 ms per order in
the worst regimes measured here) and PLD accounting (bounded separately in
:mod:`app.accounting.pld`). A ``composed`` declaration can hold hundreds of such items with
different parameters, nested up to four levels, so the work of one charge is the number of
*distinct* subsampled-Gaussian parameter sets (equal ones are computed once) times the cost of one
curve on the grid in use. :func:`curve_work` estimates that cost in units of about a millisecond
of CPU on this project's reference machine, and :func:`check_curve_work` refuses, with a message
that says what to change, a declaration whose charge would exceed :data:`MAX_CURVE_WORK` — before
anything is computed. The estimate is a pure function of the declaration and the grid, so the
same declaration is always refused or always accounted (a replay agrees with the service).
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Final

from app.accounting.declarations import (
    DPSGD,
    Composed,
    Declaration,
    DeclarationError,
    Gaussian,
    Subsampled,
)

MAX_CURVE_WORK: Final = 600.0
"""Most work units (≈ ms of CPU) the subsampled-Gaussian curves of one charge may need."""

_FIXED: Final = 1.0
"""Work of one subsampled-Gaussian curve besides its fractional orders (integer orders, setup)."""

_PER_FRACTIONAL_ORDER: Final = 0.18
"""Work of one fractional order of the Mironov–Talwar–Zhang series (worst regime measured)."""

_WOR_PER_ORDER: Final = 0.05
"""Work of one integer order of the without-replacement bound (Wang–Balle–Kasiviswanathan)."""


def _walk(decl: Declaration) -> Iterator[Declaration]:
    yield decl
    if isinstance(decl, Composed):
        for item, _ in decl.items:
            yield from _walk(item)
    elif isinstance(decl, Subsampled):
        yield from _walk(decl.mechanism)


def may_be_expensive(decl: Declaration) -> bool:
    """Whether ``decl``'s charge may need numerical work beyond a closed form (a PLD, an RDP
    series, a composition): the service computes those before taking a lock."""
    return any(isinstance(node, DPSGD | Subsampled | Composed) for node in _walk(decl))


def subsampled_gaussian_leaves(decl: Declaration) -> set[tuple[str, Decimal, Decimal]]:
    """The distinct subsampled-Gaussian parameter sets in ``decl``: ("poisson", σ/Δ, q) for
    DP-SGD runs and Poisson-subsampled Gaussians, ("wor", σ/Δ, m/n) without replacement."""
    out: set[tuple[str, Decimal, Decimal]] = set()
    for node in _walk(decl):
        if isinstance(node, DPSGD):
            out.add(("poisson", node.noise_multiplier, node.sample_rate))
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


def check_curve_work(decl: Declaration, orders: tuple[float, ...]) -> None:
    """Refuse (422) a declaration whose curves would need more than :data:`MAX_CURVE_WORK`."""
    leaves = subsampled_gaussian_leaves(decl)
    work = sum(curve_work(scheme, orders) for scheme, _, _ in leaves)
    if work > MAX_CURVE_WORK:
        raise DeclarationError(
            f"this declaration has {len(leaves)} distinct subsampled-Gaussian parameter sets; "
            f"accounting them on this grid of {len(orders)} RDP orders needs more work than one "
            "request may do. Merge segments that share (noise multiplier, sample rate), declare "
            "the run as several invocations, or use fewer fractional orders",
            field="mechanism",
        )
