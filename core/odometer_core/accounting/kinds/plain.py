"""The plain kinds: a guarantee stated directly (ε-DP, (ε, δ)-DP, zCDP, an RDP curve, μ-GDP,
mCDP) or a mechanism whose guarantee each mode derives itself (the Gaussian, Laplace,
randomized-response and exponential mechanisms)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from itertools import pairwise
from typing import Any, ClassVar

from odometer_core.accounting.exact import ONE, UP, ZERO, fmt, mul_up
from odometer_core.accounting.kinds.base import (
    Declaration,
    DeclarationError,
    Nested,
    entries,
    only,
)
from odometer_core.accounting.kinds.fields import amount_in, read_kind, spec


@dataclass(frozen=True, slots=True)
class PureDP(Declaration):
    """ε-DP (Dwork–McSherry–Nissim–Smith 2006)."""

    kind: ClassVar[str] = "pure_dp"
    epsilon: Decimal

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "epsilon": fmt(self.epsilon)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> PureDP:
        return cls(**read_kind(params, cls.kind))


@dataclass(frozen=True, slots=True)
class ApproxDP(Declaration):
    """(ε, δ)-DP (Dwork–Kenthapadi–McSherry–Mironov–Naor 2006)."""

    kind: ClassVar[str] = "approx_dp"
    epsilon: Decimal
    delta: Decimal

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "epsilon": fmt(self.epsilon), "delta": fmt(self.delta)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> ApproxDP:
        return cls(**read_kind(params, cls.kind))


@dataclass(frozen=True, slots=True)
class ZCDP(Declaration):
    """(ξ, ρ)-zCDP, δ-approximate when δ > 0 (Bun–Steinke 2016, Def. 1.1 and §8)."""

    kind: ClassVar[str] = "zcdp"
    rho: Decimal
    xi: Decimal = ZERO
    delta: Decimal = ZERO

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "rho": fmt(self.rho),
            "xi": fmt(self.xi),
            "delta": fmt(self.delta),
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> ZCDP:
        return cls(**read_kind(params, cls.kind))


@dataclass(frozen=True, slots=True)
class RDPCurve(Declaration):
    """An RDP curve known at finitely many orders only (Mironov 2017, Def. 4).

    Orders must be strictly increasing and > 1; values non-negative and non-decreasing (RDP is
    non-decreasing in α, Mironov 2017 Prop. 9 / van Erven–Harremoës Thm 3) — a curve that
    decreases is not a valid RDP bound and is rejected rather than repaired.
    """

    kind: ClassVar[str] = "rdp"
    orders: tuple[Decimal, ...]
    values: tuple[Decimal, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "orders": [fmt(a) for a in self.orders],
            "values": [fmt(v) for v in self.values],
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> RDPCurve:
        table = spec(cls.kind)
        only(params, [f.name for f in table.fields], cls.kind)
        f_orders, f_values = table.field("orders"), table.field("values")
        assert f_orders.entries is not None and f_values.entries is not None
        assert f_orders.domain is not None and f_values.domain is not None
        raw_orders = entries(params, "orders", f_orders.entries)
        raw_values = entries(params, "values", f_values.entries)
        if len(raw_orders) != len(raw_values):
            raise DeclarationError("orders and values must have the same length")
        # each order read up to its bound here; its lower bound is said below, of the curve
        orders = tuple(
            amount_in({"order": a}, "order", f_orders.domain, low=False) for a in raw_orders
        )
        values = tuple(amount_in({"value": v}, "value", f_values.domain) for v in raw_values)
        least = f_orders.domain.low  # open: an order is > 1
        for a in orders:
            if a <= least:
                raise DeclarationError(
                    f"RDP orders must be > {fmt(least)}, got {fmt(a)}", field="orders"
                )
        for prev, nxt in pairwise(orders):
            if nxt <= prev:
                raise DeclarationError("RDP orders must be strictly increasing", field="orders")
        for prev, nxt in pairwise(values):
            if nxt < prev:
                raise DeclarationError(
                    "RDP values must be non-decreasing in the order (RDP is monotone in α)",
                    field="values",
                )
        return cls(orders, values)


@dataclass(frozen=True, slots=True)
class GDP(Declaration):
    """μ-Gaussian DP (Dong–Roth–Su 2019, Def. 2.6)."""

    kind: ClassVar[str] = "gdp"
    mu: Decimal

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "mu": fmt(self.mu)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> GDP:
        return cls(**read_kind(params, cls.kind))


@dataclass(frozen=True, slots=True)
class MCDP(Declaration):
    """(μ, τ)-mean-concentrated DP (Dwork–Rothblum 2016).

    Implies (μ − τ²/2, τ²/2)-zCDP (Bun–Steinke 2016, Lemma 4.2); see
    :func:`odometer_core.accounting.conversions.mcdp_to_zcdp`.
    """

    kind: ClassVar[str] = "mcdp"
    mu: Decimal
    tau: Decimal

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "mu": fmt(self.mu), "tau": fmt(self.tau)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> MCDP:
        return cls(**read_kind(params, cls.kind))


@dataclass(frozen=True, slots=True)
class Gaussian(Declaration):
    """Gaussian mechanism with noise std σ and ℓ₂ sensitivity Δ.

    ρ = Δ²/(2σ²) (Bun–Steinke 2016 Prop. 1.6), μ = Δ/σ (Dong–Roth–Su 2019 Thm 2.7),
    RDP αΔ²/(2σ²) (Mironov 2017 Prop. 7), exact (ε, δ) by Balle–Wang 2018 Thm 8.
    """

    kind: ClassVar[str] = "gaussian"
    sigma: Decimal
    sensitivity: Decimal = ONE

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "sigma": fmt(self.sigma), "sensitivity": fmt(self.sensitivity)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> Gaussian:
        return cls(**read_kind(params, cls.kind))

    @property
    def ratio(self) -> Decimal:
        """Δ/σ (∞ when σ = 0 and Δ > 0; 0 when Δ = 0)."""
        if self.sensitivity == 0:
            return ZERO
        if self.sigma == 0:
            return Decimal("Infinity")
        return UP.divide(self.sensitivity, self.sigma)

    @property
    def rho(self) -> Decimal:
        """ρ = Δ²/(2σ²) (Bun–Steinke 2016 Prop. 1.6): Δ/σ rounded up, squared and halved rounded
        up (∞ when σ = 0 < Δ)."""
        r = self.ratio
        if r.is_infinite():
            return r
        return UP.divide(mul_up(r, r), Decimal(2))


@dataclass(frozen=True, slots=True)
class Laplace(Declaration):
    """Laplace mechanism with scale b and ℓ₁ sensitivity Δ: ε = Δ/b (Dwork et al. 2006);
    exact RDP curve by Mironov 2017 Prop. 6."""

    kind: ClassVar[str] = "laplace"
    scale: Decimal
    sensitivity: Decimal = ONE

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "scale": fmt(self.scale), "sensitivity": fmt(self.sensitivity)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> Laplace:
        return cls(**read_kind(params, cls.kind))

    @property
    def epsilon(self) -> Decimal:
        """ε = Δ/b, rounded up (∞ when b = 0 < Δ)."""
        if self.sensitivity == 0:
            return ZERO
        if self.scale == 0:
            return Decimal("Infinity")
        return UP.divide(self.sensitivity, self.scale)


@dataclass(frozen=True, slots=True)
class RandomizedResponse(Declaration):
    """Binary randomized response with parameter ε (Warner 1965): ε-DP, and its RDP curve is
    exactly the tight pure-DP curve (Steinke 2024, Thm 4)."""

    kind: ClassVar[str] = "randomized_response"
    epsilon: Decimal

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "epsilon": fmt(self.epsilon)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> RandomizedResponse:
        return cls(**read_kind(params, cls.kind))


@dataclass(frozen=True, slots=True)
class Exponential(Declaration):
    """Exponential mechanism with privacy parameter ε (McSherry–Talwar 2007): ε-DP and
    ε-bounded-range, hence ε²/8-zCDP (Cesar–Rogers 2021, Lemma 3.2)."""

    kind: ClassVar[str] = "exponential"
    epsilon: Decimal

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "epsilon": fmt(self.epsilon)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> Exponential:
        return cls(**read_kind(params, cls.kind))
