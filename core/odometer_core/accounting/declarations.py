"""Invocation declarations: what an analyst says will run, before it runs.

Every kind is an immutable, validated dataclass with a canonical JSON form. Parsing goes
through a **closed registry** (:data:`KINDS`): a payload's ``"type"`` selects one of the
classes below and nothing else is ever imported or constructed from a payload. A stored
``type`` never changes meaning; a new meaning gets a new kind.

The declarations say *what ran*; how it is counted lives in the modes of
:mod:`odometer_core.accounting.modes`, reached through :mod:`odometer_core.accounting.filters`
(events kept apart from
accountants, as in Google's ``dp_accounting``).

Output-dependent (ODP) kinds — ``odp`` and the templates ``svt``, ``ptr``, ``iterative`` and
``tested_release`` — expose :meth:`OdpCapable.partition`: the named cells with their ε and the
single δ of the partition (Hartmann et al. 2022, Definition 2).

Concrete mechanisms whose whole proven guarantee is one an existing kind states —
``discrete_laplace`` (ε-DP), ``discrete_gaussian`` (ρ-zCDP), ``report_noisy_max`` (the
exponential mechanism, or ε-DP) and ``tree_aggregation`` (a Gaussian mechanism) — expose
:meth:`ChargedAs.charged_as`: that kind, which every mode charges (or refuses) in their place,
so that no charge formula is written twice.

The module is long (about 1,000 lines) because it is one closed registry: each kind's validation,
bounds and canonical JSON sit next to the parser that is the only way to build it, so that no
kind can be constructed from a payload without passing through them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Context, Decimal
from itertools import pairwise
from typing import Any, ClassVar, Final, Literal

from odometer_core.accounting.exact import (
    DOWN,
    ONE,
    UP,
    ZERO,
    AmountError,
    add_up,
    fmt,
    mul_up,
    parse_amount,
)

# ---------------------------------------------------------------------------- limits
#: "Absurd sizes" are rejected; these bounds keep every computation
#: finite and every payload small.
MAX_PRIVACY_PARAMETER: Final = Decimal(10) ** 6  # ε, ρ, ξ, μ, τ
MAX_MECHANISM_PARAMETER: Final = Decimal(10) ** 12  # σ, b, Δ
MAX_CELLS: Final = 1024
MAX_CURVE_POINTS: Final = 256
MAX_COMPOSED_ITEMS: Final = 256
MAX_COUNT: Final = 10**7
MAX_STEPS: Final = 10**7
MAX_DEPTH: Final = 4
MAX_POPULATION: Final = 10**12
MAX_ORDER: Final = Decimal(10) ** 6
MAX_TREES: Final = 1024  # trees of one tree_aggregation
MAX_RUNS_MEAN: Final = Decimal(10) ** 6  # E[K] of repeat_and_select
MAX_MIXTURE_COMPONENTS: Final = 256  # components of one mixture_of_gaussians
MAX_SAMPLE_SIZE: Final = 10**6  # draws of one sampled_with_replacement
CELL_NAME: Final = re.compile(r"^[A-Za-z0-9_.:=+\-]{1,64}$")

Relation = Literal["add_remove", "replace_one"]
RELATIONS: Final[tuple[str, ...]] = ("add_remove", "replace_one")


class DeclarationError(ValueError):
    """A declaration is malformed, out of range, or not valid for the dataset (→ HTTP 422)."""

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field


# ---------------------------------------------------------------------------- field parsing
def _amount(
    params: Mapping[str, Any],
    name: str,
    *,
    default: Decimal | None = None,
    upper: Decimal = MAX_PRIVACY_PARAMETER,
    positive: bool = False,
    below_one: bool = False,
) -> Decimal:
    if name not in params:
        if default is None:
            raise DeclarationError(f"missing field '{name}'", field=name)
        return default
    try:
        d = parse_amount(params[name], name)
    except AmountError as exc:
        raise DeclarationError(str(exc), field=name) from None
    if d < 0:
        raise DeclarationError(f"{name} must be ≥ 0, got {fmt(d)}", field=name)
    if positive and d == 0:
        raise DeclarationError(f"{name} must be > 0", field=name)
    if below_one and d >= 1:
        raise DeclarationError(f"{name} must be < 1, got {fmt(d)}", field=name)
    if d > upper:
        raise DeclarationError(f"{name} must be ≤ {fmt(upper)}, got {fmt(d)}", field=name)
    return d


def _integer(params: Mapping[str, Any], name: str, *, lower: int, upper: int) -> int:
    if name not in params:
        raise DeclarationError(f"missing field '{name}'", field=name)
    v = params[name]
    if isinstance(v, bool):
        raise DeclarationError(f"{name} must be an integer", field=name)
    if isinstance(v, str) and re.fullmatch(r"[0-9]{1,15}", v.strip()):
        v = int(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        v = int(v)
    if not isinstance(v, int):
        raise DeclarationError(f"{name} must be an integer", field=name)
    if not lower <= v <= upper:
        raise DeclarationError(f"{name} must be in [{lower}, {upper}], got {v}", field=name)
    return v


def _only(params: Mapping[str, Any], allowed: Sequence[str], kind: str) -> None:
    unknown = sorted(set(params) - set(allowed) - {"type"})
    if unknown:
        raise DeclarationError(f"unknown field(s) for '{kind}': {', '.join(unknown)}")


def _list(params: Mapping[str, Any], name: str, limit: int) -> list[Any]:
    v = params.get(name)
    if not isinstance(v, list):
        raise DeclarationError(f"{name} must be a list", field=name)
    if not v:
        raise DeclarationError(f"{name} must not be empty", field=name)
    if len(v) > limit:
        raise DeclarationError(f"{name} has more than {limit} entries", field=name)
    return v


# ---------------------------------------------------------------------------- base classes
@dataclass(frozen=True, slots=True)
class Declaration:
    """Base of every kind. Subclasses set :attr:`kind` and implement the codec."""

    kind: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> Declaration:  # pragma: no cover
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class OdpPartition:
    """An ODP partition (Hartmann et al. 2022, Definition 2): named cells, each with ε_k, one δ.

    The mechanism is then (max_k ε_k, δ)-DP (Lemma 4), and in a basic-composition filter the
    realised cell's ε_k is the charge (Hartmann et al. 2022, Theorem 7 and Algorithm 1 line 14).
    """

    cells: tuple[tuple[str, Decimal], ...]
    delta: Decimal

    @property
    def worst_epsilon(self) -> Decimal:
        """sup_k ε_k: the (ε, δ)-DP guarantee of the whole mechanism (Lemma 4)."""
        return max(e for _, e in self.cells)

    def epsilon_of(self, cell: str) -> Decimal | None:
        """ε of the named cell, or ``None`` when the cell was not declared."""
        for name, eps in self.cells:
            if name == cell:
                return eps
        return None


class OdpCapable:
    """Mixin for kinds with an output-dependent partition."""

    def partition(self) -> OdpPartition:  # pragma: no cover - abstract
        raise NotImplementedError


class ChargedAs:
    """Mixin for mechanisms whose guarantee is exactly what another kind declares.

    :meth:`charged_as` is that kind, built from the mechanism's parameters by the theorem cited
    on the class; the modes charge it in the mechanism's place (``gdp`` refuses with its own
    reason). The declaration keeps its own kind in the ledger: what ran, not what it cost.
    """

    def charged_as(self) -> Declaration:  # pragma: no cover - abstract
        raise NotImplementedError


# ---------------------------------------------------------------------------- plain kinds
@dataclass(frozen=True, slots=True)
class PureDP(Declaration):
    """ε-DP (Dwork–McSherry–Nissim–Smith 2006)."""

    kind: ClassVar[str] = "pure_dp"
    epsilon: Decimal

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "epsilon": fmt(self.epsilon)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> PureDP:
        _only(params, ["epsilon"], cls.kind)
        return cls(_amount(params, "epsilon"))


@dataclass(frozen=True, slots=True)
class ApproxDP(Declaration):
    """(ε, δ)-DP (Dwork–Kenthapadi–McSherry–Mironov–Naor 2006)."""

    kind: ClassVar[str] = "approx_dp"
    epsilon: Decimal
    delta: Decimal

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "epsilon": fmt(self.epsilon), "delta": fmt(self.delta)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> ApproxDP:
        _only(params, ["epsilon", "delta"], cls.kind)
        return cls(_amount(params, "epsilon"), _amount(params, "delta", below_one=True))


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
    def from_params(cls, params: Mapping[str, Any], depth: int) -> ZCDP:
        _only(params, ["rho", "xi", "delta"], cls.kind)
        return cls(
            _amount(params, "rho"),
            _amount(params, "xi", default=ZERO),
            _amount(params, "delta", default=ZERO, below_one=True),
        )


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
    def from_params(cls, params: Mapping[str, Any], depth: int) -> RDPCurve:
        _only(params, ["orders", "values"], cls.kind)
        raw_orders = _list(params, "orders", MAX_CURVE_POINTS)
        raw_values = _list(params, "values", MAX_CURVE_POINTS)
        if len(raw_orders) != len(raw_values):
            raise DeclarationError("orders and values must have the same length")
        orders = tuple(_amount({"order": a}, "order", upper=MAX_ORDER) for a in raw_orders)
        values = tuple(_amount({"value": v}, "value") for v in raw_values)
        for a in orders:
            if a <= 1:
                raise DeclarationError(f"RDP orders must be > 1, got {fmt(a)}", field="orders")
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
    def from_params(cls, params: Mapping[str, Any], depth: int) -> GDP:
        _only(params, ["mu"], cls.kind)
        return cls(_amount(params, "mu"))


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
    def from_params(cls, params: Mapping[str, Any], depth: int) -> MCDP:
        _only(params, ["mu", "tau"], cls.kind)
        return cls(_amount(params, "mu"), _amount(params, "tau"))


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
    def from_params(cls, params: Mapping[str, Any], depth: int) -> Gaussian:
        _only(params, ["sigma", "sensitivity"], cls.kind)
        return cls(
            _amount(params, "sigma", upper=MAX_MECHANISM_PARAMETER),
            _amount(params, "sensitivity", default=ONE, upper=MAX_MECHANISM_PARAMETER),
        )

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
    def from_params(cls, params: Mapping[str, Any], depth: int) -> Laplace:
        _only(params, ["scale", "sensitivity"], cls.kind)
        return cls(
            _amount(params, "scale", upper=MAX_MECHANISM_PARAMETER),
            _amount(params, "sensitivity", default=ONE, upper=MAX_MECHANISM_PARAMETER),
        )

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
    def from_params(cls, params: Mapping[str, Any], depth: int) -> RandomizedResponse:
        _only(params, ["epsilon"], cls.kind)
        return cls(_amount(params, "epsilon"))


@dataclass(frozen=True, slots=True)
class Exponential(Declaration):
    """Exponential mechanism with privacy parameter ε (McSherry–Talwar 2007): ε-DP and
    ε-bounded-range, hence ε²/8-zCDP (Cesar–Rogers 2021, Lemma 3.2)."""

    kind: ClassVar[str] = "exponential"
    epsilon: Decimal

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "epsilon": fmt(self.epsilon)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> Exponential:
        _only(params, ["epsilon"], cls.kind)
        return cls(_amount(params, "epsilon"))


@dataclass(frozen=True, slots=True)
class DiscreteLaplace(Declaration, ChargedAs):
    """Discrete Laplace (two-sided geometric) noise P[x] ∝ e^{−|x|/t} on an integer-valued query
    of sensitivity Δ: ε-DP with ε = Δ/t (Ghosh–Roughgarden–Sundararajan 2012, the geometric
    mechanism; also discussed by Canonne–Kamath–Steinke 2020 beside the discrete Gaussian): the
    privacy loss (|y − k| − |y|)/t of an output y for a shift |k| ≤ Δ is at most Δ/t. Charged
    as ``pure_dp`` at that ε in every mode.

    RDP: the pure-DP curve is the tight RDP bound of an ε-DP mechanism (Steinke 2024, Thm 4), and
    for Δ = 1 it is this mechanism's exact curve: the loss then takes only the values ±1/t, with
    the probabilities of randomized response, 1/(1 + e^{∓1/t}). The continuous Laplace curve
    (Mironov 2017 Prop. 6) is not used: it is smaller and does not cover integer noise.
    A sensitivity that is not an integer is charged as given (an integer query's sensitivity is
    at most ⌊Δ⌋, so Δ/t is an upper bound)."""

    kind: ClassVar[str] = "discrete_laplace"
    scale: Decimal
    sensitivity: Decimal = ONE

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "scale": fmt(self.scale), "sensitivity": fmt(self.sensitivity)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> DiscreteLaplace:
        _only(params, ["scale", "sensitivity"], cls.kind)
        return cls(
            _amount(params, "scale", upper=MAX_MECHANISM_PARAMETER, positive=True),
            _amount(params, "sensitivity", default=ONE, upper=MAX_MECHANISM_PARAMETER),
        )

    @property
    def epsilon(self) -> Decimal:
        """ε = Δ/t, rounded up: the Laplace mechanism's ε at the same scale and sensitivity."""
        return Laplace(self.scale, self.sensitivity).epsilon

    def charged_as(self) -> PureDP:
        return PureDP(self.epsilon)


@dataclass(frozen=True, slots=True)
class DiscreteGaussian(Declaration, ChargedAs):
    """Discrete Gaussian noise N_ℤ(0, σ²) (P[x] ∝ e^{−x²/(2σ²)} on ℤ, per coordinate) on an
    integer-valued query of ℓ₂ sensitivity Δ: Δ²/(2σ²)-zCDP, the same ρ as the continuous
    Gaussian (Canonne–Kamath–Steinke 2020, arXiv 2004.00010, Thm 14), hence RDP αΔ²/(2σ²) at
    every order. Charged as ``zcdp`` at that ρ in every mode: ``basic`` converts it by CKS20
    Cor. 13 at the conversion δ, as any ρ.

    The continuous Gaussian's exact (ε, δ) (Balle–Wang 2018 Thm 8) and its μ-GDP (Dong–Roth–Su
    2019 Thm 2.7) are *not* used: no theorem carries them to the discrete Gaussian (its exact δ(ε)
    is CKS20 Thm 7, a sum over ℤ, for one dimension only), so ``gdp`` refuses it."""

    kind: ClassVar[str] = "discrete_gaussian"
    sigma: Decimal
    sensitivity: Decimal = ONE

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "sigma": fmt(self.sigma), "sensitivity": fmt(self.sensitivity)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> DiscreteGaussian:
        _only(params, ["sigma", "sensitivity"], cls.kind)
        return cls(
            _amount(params, "sigma", upper=MAX_MECHANISM_PARAMETER, positive=True),
            _amount(params, "sensitivity", default=ONE, upper=MAX_MECHANISM_PARAMETER),
        )

    @property
    def rho(self) -> Decimal:
        """ρ = Δ²/(2σ²), rounded up: the continuous Gaussian's ρ (CKS20 Thm 14)."""
        return Gaussian(self.sigma, self.sensitivity).rho

    def charged_as(self) -> ZCDP:
        return ZCDP(self.rho)


#: The noises of ``report_noisy_max``.
NOISES: Final[tuple[str, ...]] = ("gumbel", "exponential")


@dataclass(frozen=True, slots=True)
class ReportNoisyMax(Declaration, ChargedAs):
    """Report noisy max: the index of the largest of the scores plus i.i.d. noise of scale b,
    each score of sensitivity Δ; ε = Δ/b when the scores are monotonic (all move the same way
    between neighbours), else 2Δ/b (Dwork–Roth 2014, Claim 3.9 and §3.4).

    - ``gumbel`` noise samples index i with probability ∝ e^{q_i/b}: it *is* the exponential
      mechanism with that ε (McSherry–Talwar 2007; Dwork–Roth 2014 Thm 3.10), ε-bounded-range,
      hence charged as ``exponential`` (ε²/8-zCDP, Cesar–Rogers 2021 Lemma 3.2, and its RDP
      curve).
    - ``exponential`` noise is permute-and-flip (Ding–Kifer–Wang–Zhang 2021, "The permute-and-
      flip mechanism is identical to report-noisy-max with exponential noise"; McKenna–Sheldon
      2020): ε-DP but *not* ε-bounded-range — the loss of one output reaches +ε while another's
      is negative — so it is charged as ``pure_dp`` (ε·tanh(ε/2)-zCDP, the RR curve), never at
      the bounded-range ε²/8, a quarter of that for small ε (OpenDP issue #2911)."""

    kind: ClassVar[str] = "report_noisy_max"
    noise: Literal["gumbel", "exponential"]
    scale: Decimal
    sensitivity: Decimal = ONE
    monotonic: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "noise": self.noise,
            "scale": fmt(self.scale),
            "sensitivity": fmt(self.sensitivity),
            "monotonic": self.monotonic,
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> ReportNoisyMax:
        _only(params, ["noise", "scale", "sensitivity", "monotonic"], cls.kind)
        if "noise" not in params:
            raise DeclarationError("missing field 'noise'", field="noise")
        noise = params["noise"]
        if noise not in NOISES:
            raise DeclarationError("noise must be 'gumbel' or 'exponential'", field="noise")
        monotonic = params.get("monotonic", False)
        if not isinstance(monotonic, bool):
            raise DeclarationError("monotonic must be true or false", field="monotonic")
        return cls(
            noise,
            _amount(params, "scale", upper=MAX_MECHANISM_PARAMETER, positive=True),
            _amount(params, "sensitivity", default=ONE, upper=MAX_MECHANISM_PARAMETER),
            monotonic,
        )

    @property
    def epsilon(self) -> Decimal:
        """ε = Δ/b (monotonic) or 2Δ/b, rounded up."""
        spread = self.sensitivity if self.monotonic else mul_up(Decimal(2), self.sensitivity)
        return UP.divide(spread, self.scale)

    def charged_as(self) -> Exponential | PureDP:
        if self.noise == "gumbel":
            return Exponential(self.epsilon)
        return PureDP(self.epsilon)


#: √d is written with this many significant digits, rounded up.
_ROOT_DIGITS: Final = Context(prec=30, rounding=ROUND_CEILING)


@dataclass(frozen=True, slots=True)
class TreeAggregation(Declaration, ChargedAs):
    """DP-FTRL's single-epoch tree aggregation (Kairouz–McMahan–Song–Thakkar–Thakurta–Xu 2021,
    "Practical and private (deep) learning without sampling or shuffling", ICML, Appendix D),
    as dp_accounting's ``SingleEpochTreeAggregationDpEvent(noise_multiplier, step_counts)``: one
    tree of noisy partial sums over each entry's steps (the tree restarted between entries),
    Gaussian noise on every node of std σ = ``noise_multiplier`` times the ℓ₂ sensitivity of one
    record's contribution to one leaf under the dataset's relation, each record in at most one
    leaf of all the trees.

    A tree over T steps releases the dyadic nodes [(j − 1)2^ℓ + 1, j·2^ℓ] ⊆ [1, T], so a leaf
    lies in one node of each of its ⌊log₂ T⌋ + 1 = ⌈log₂(T + 1)⌉ levels (T's bit length); one
    record therefore moves at most d = ⌈log₂(max T + 1)⌉ nodes, each by at most the sensitivity,
    and no node of the other trees. Conditioned on what was released before, each node is a
    Gaussian mechanism, so the release is the adaptive composition of d Gaussian mechanisms of
    noise multiplier σ: the Gaussian mechanism of ℓ₂ sensitivity √d (RDP αd/(2σ²), Mironov 2017
    Prop. 7 with adaptive composition, Prop. 1; √d/σ-GDP, Dong–Roth–Su 2019 Thm 2.7 and
    Cor. 3.3), the curve dp_accounting's RdpAccountant computes for the event. Charged as
    ``gaussian`` σ = noise_multiplier, Δ = √d in every mode (``gdp`` included): √d rounded up to
    30 digits where it is irrational — a larger sensitivity only costs more."""

    kind: ClassVar[str] = "tree_aggregation"
    noise_multiplier: Decimal
    step_counts: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "noise_multiplier": fmt(self.noise_multiplier),
            "step_counts": list(self.step_counts),
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> TreeAggregation:
        _only(params, ["noise_multiplier", "step_counts"], cls.kind)
        raw = _list(params, "step_counts", MAX_TREES)
        counts = tuple(
            _integer({"step_counts": t}, "step_counts", lower=1, upper=MAX_STEPS) for t in raw
        )
        sigma = _amount(params, "noise_multiplier", upper=MAX_MECHANISM_PARAMETER, positive=True)
        return cls(sigma, counts)

    @property
    def depth(self) -> int:
        """d = ⌈log₂(max T + 1)⌉, the levels of the tallest tree: max T's bit length (exact)."""
        return max(self.step_counts).bit_length()

    @property
    def sensitivity(self) -> Decimal:
        """√d, rounded up to 30 significant digits (exact when d is a square)."""
        d = Decimal(self.depth)
        root = d.sqrt(_ROOT_DIGITS)
        while DOWN.multiply(root, root) < d:  # a rounded-down square ≥ d: the root is ≥ √d
            root = root.next_plus(_ROOT_DIGITS)
        return root

    def charged_as(self) -> Gaussian:
        return Gaussian(self.noise_multiplier, self.sensitivity)


# ---------------------------------------------------------------------------- ODP kinds
@dataclass(frozen=True, slots=True)
class ODP(Declaration, OdpCapable):
    """An explicit ODP partition: named cells with ε_k and one δ (Hartmann et al. 2022,
    Definition 2)."""

    kind: ClassVar[str] = "odp"
    cells: tuple[tuple[str, Decimal], ...]
    delta: Decimal = ZERO

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "cells": [{"name": n, "epsilon": fmt(e)} for n, e in self.cells],
            "delta": fmt(self.delta),
        }

    def partition(self) -> OdpPartition:
        return OdpPartition(self.cells, self.delta)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> ODP:
        _only(params, ["cells", "delta"], cls.kind)
        raw = _list(params, "cells", MAX_CELLS)
        cells: list[tuple[str, Decimal]] = []
        seen: set[str] = set()
        for item in raw:
            if not isinstance(item, Mapping):
                raise DeclarationError("each cell must be an object {name, epsilon}", field="cells")
            _only(item, ["name", "epsilon"], "cell")
            name = item.get("name")
            if not isinstance(name, str) or not CELL_NAME.match(name):
                raise DeclarationError(
                    "cell names must match [A-Za-z0-9_.:=+-]{1,64}", field="cells"
                )
            if name in seen:
                raise DeclarationError(f"duplicate cell name '{name}'", field="cells")
            seen.add(name)
            cells.append((name, _amount(item, "epsilon")))
        return cls(tuple(cells), _amount(params, "delta", default=ZERO, below_one=True))


@dataclass(frozen=True, slots=True)
class SVT(Declaration, OdpCapable):
    """Sparse vector technique with at most c ⊤ answers (Hartmann et al. 2022, Algorithm 2).

    Lemma 8: the cell of outputs with exactly c' ⊤ answers has ε(c') = ε₁ + (c'/c)·ε₂, and the
    mechanism is ODP with δ = 0. Cells are named ``tops=c'`` for c' = 0..c.
    """

    kind: ClassVar[str] = "svt"
    epsilon1: Decimal
    epsilon2: Decimal
    c: int

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "epsilon1": fmt(self.epsilon1),
            "epsilon2": fmt(self.epsilon2),
            "c": self.c,
        }

    def partition(self) -> OdpPartition:
        cells = tuple(
            (
                f"tops={k}",
                add_up(
                    self.epsilon1, UP.divide(mul_up(Decimal(k), self.epsilon2), Decimal(self.c))
                ),
            )
            for k in range(self.c + 1)
        )
        return OdpPartition(cells, ZERO)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> SVT:
        _only(params, ["epsilon1", "epsilon2", "c"], cls.kind)
        return cls(
            _amount(params, "epsilon1"),
            _amount(params, "epsilon2"),
            _integer(params, "c", lower=1, upper=MAX_CELLS - 1),
        )


@dataclass(frozen=True, slots=True)
class PTR(Declaration, OdpCapable):
    """Propose-test-release (Hartmann et al. 2022, Definition 9 and Lemma 10).

    ``tests = 1``: one (ε, δ)-PTR function — released value cell 2ε, ⊥ cell ε (Def. 9 with
    the ε-DP release). ``tests = 2``: the IQR construction of Lemma 10 — value 3ε, ⊥ 2ε. δ is
    the PTR function's δ and is charged in full.
    """

    kind: ClassVar[str] = "ptr"
    epsilon: Decimal
    delta: Decimal
    tests: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "epsilon": fmt(self.epsilon),
            "delta": fmt(self.delta),
            "tests": self.tests,
        }

    def partition(self) -> OdpPartition:
        t = Decimal(self.tests)
        return OdpPartition(
            (("value", mul_up(t + 1, self.epsilon)), ("bottom", mul_up(t, self.epsilon))),
            self.delta,
        )

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> PTR:
        _only(params, ["epsilon", "delta", "tests"], cls.kind)
        tests = _integer(params, "tests", lower=1, upper=2) if "tests" in params else 1
        return cls(_amount(params, "epsilon"), _amount(params, "delta", below_one=True), tests)


@dataclass(frozen=True, slots=True)
class Iterative(Declaration, OdpCapable):
    """Iterative mechanism with data-dependent early stopping (Hartmann et al. 2022,
    Algorithm 3, Lemma 11).

    Each step is (ε_step, δ_step)-DP; the run may stop at the declared points k_1 < … < k_n.
    With COMP = basic composition, stopping point k has ε^k = k·ε_step and δ^k = k·δ_step, and
    Lemma 11 makes the whole mechanism ODP with cells ``stop=k`` (ε^k) and
    δ = Σ_i δ^{k_i} — summed over **all** potential stopping points, reserved in full.
    """

    kind: ClassVar[str] = "iterative"
    step_epsilon: Decimal
    step_delta: Decimal
    stopping_points: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "step_epsilon": fmt(self.step_epsilon),
            "step_delta": fmt(self.step_delta),
            "stopping_points": list(self.stopping_points),
        }

    def partition(self) -> OdpPartition:
        cells = tuple(
            (f"stop={k}", mul_up(Decimal(k), self.step_epsilon)) for k in self.stopping_points
        )
        delta = add_up(*(mul_up(Decimal(k), self.step_delta) for k in self.stopping_points))
        return OdpPartition(cells, delta)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> Iterative:
        _only(params, ["step_epsilon", "step_delta", "stopping_points"], cls.kind)
        raw = _list(params, "stopping_points", MAX_CELLS)
        points = tuple(
            _integer({"stopping_point": k}, "stopping_point", lower=1, upper=MAX_STEPS) for k in raw
        )
        for prev, nxt in pairwise(points):
            if nxt <= prev:
                raise DeclarationError(
                    "stopping_points must be strictly increasing", field="stopping_points"
                )
        part = cls(
            _amount(params, "step_epsilon"),
            _amount(params, "step_delta", below_one=True),
            points,
        )
        if part.partition().delta >= 1:
            raise DeclarationError("the summed δ over all stopping points must be < 1")
        return part


@dataclass(frozen=True, slots=True)
class TestedRelease(Declaration, OdpCapable):
    """Output perturbation with a DP quality test (Hartmann et al. 2022, Algorithm 5, Corollary 18).

    Cells ``released`` (ε₁) and ``bottom`` (ε₂, the ⊥ answer), valid when ε₁ ≥ ε₂; one δ.
    """

    kind: ClassVar[str] = "tested_release"
    epsilon_release: Decimal
    epsilon_bottom: Decimal
    delta: Decimal = ZERO

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "epsilon_release": fmt(self.epsilon_release),
            "epsilon_bottom": fmt(self.epsilon_bottom),
            "delta": fmt(self.delta),
        }

    def partition(self) -> OdpPartition:
        return OdpPartition(
            (("released", self.epsilon_release), ("bottom", self.epsilon_bottom)), self.delta
        )

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> TestedRelease:
        _only(params, ["epsilon_release", "epsilon_bottom", "delta"], cls.kind)
        decl = cls(
            _amount(params, "epsilon_release"),
            _amount(params, "epsilon_bottom"),
            _amount(params, "delta", default=ZERO, below_one=True),
        )
        if decl.epsilon_bottom > decl.epsilon_release:
            raise DeclarationError("Corollary 18 needs epsilon_release ≥ epsilon_bottom")
        return decl


# ---------------------------------------------------------------------------- wrappers
@dataclass(frozen=True, slots=True)
class Subsampled(Declaration):
    """An inner mechanism run on a random subsample.

    ``poisson`` with rate q needs the add/remove relation; ``without_replacement`` (m of n)
    needs replace-one (Balle–Barthe–Gaboardi 2018). The inner kind may not be an ODP kind
    (its cells describe the inner output space, not amplified probabilities).
    """

    kind: ClassVar[str] = "subsampled"
    scheme: Literal["poisson", "without_replacement"]
    mechanism: Declaration
    rate: Decimal | None = None
    m: int | None = None
    n: int | None = None

    @property
    def gamma(self) -> Decimal:
        """The sampling probability q (Poisson) or m/n (without replacement)."""
        if self.scheme == "poisson":
            assert self.rate is not None
            return self.rate
        assert self.m is not None and self.n is not None
        return UP.divide(Decimal(self.m), Decimal(self.n))

    @property
    def required_relation(self) -> Relation:
        """The neighbouring relation under which the amplification theorem holds."""
        return "add_remove" if self.scheme == "poisson" else "replace_one"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, "scheme": self.scheme}
        if self.scheme == "poisson":
            assert self.rate is not None
            out["rate"] = fmt(self.rate)
        else:
            out["m"] = self.m
            out["n"] = self.n
        out["mechanism"] = self.mechanism.to_json()
        return out

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> Subsampled:
        scheme = params.get("scheme")
        if scheme == "poisson":
            _only(params, ["scheme", "rate", "mechanism"], cls.kind)
            rate = _amount(params, "rate", upper=ONE)
            inner = _parse(params.get("mechanism"), depth + 1)
            decl = cls("poisson", inner, rate=rate)
        elif scheme == "without_replacement":
            _only(params, ["scheme", "m", "n", "mechanism"], cls.kind)
            n = _integer(params, "n", lower=1, upper=MAX_POPULATION)
            m = _integer(params, "m", lower=0, upper=n)
            inner = _parse(params.get("mechanism"), depth + 1)
            decl = cls("without_replacement", inner, m=m, n=n)
        else:
            raise DeclarationError(
                "scheme must be 'poisson' or 'without_replacement'", field="scheme"
            )
        if isinstance(inner, OdpCapable):
            raise DeclarationError("an ODP partition cannot be subsampled", field="mechanism")
        return decl


@dataclass(frozen=True, slots=True)
class Composed(Declaration):
    """Non-adaptive composition of a fixed list of mechanisms inside one invocation.

    Items are (declaration, count) pairs: ``{"mechanisms": [...]}`` gives count 1 each,
    ``{"mechanism": ..., "count": k}`` one item with count k. ODP kinds cannot be composed
    (their cell would be a product space; declare them as separate invocations).
    """

    kind: ClassVar[str] = "composed"
    items: tuple[tuple[Declaration, int], ...]

    def to_json(self) -> dict[str, Any]:
        if len(self.items) == 1 and self.items[0][1] != 1:
            decl, count = self.items[0]
            return {"type": self.kind, "mechanism": decl.to_json(), "count": count}
        out: list[dict[str, Any]] = []
        for decl, count in self.items:
            out.extend([decl.to_json()] * count)
        return {"type": self.kind, "mechanisms": out}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> Composed:
        if "mechanisms" in params:
            _only(params, ["mechanisms"], cls.kind)
            raw = _list(params, "mechanisms", MAX_COMPOSED_ITEMS)
            items = tuple((_parse(r, depth + 1), 1) for r in raw)
        else:
            _only(params, ["mechanism", "count"], cls.kind)
            inner = _parse(params.get("mechanism"), depth + 1)
            items = ((inner, _integer(params, "count", lower=1, upper=MAX_COUNT)),)
        for decl, _ in items:
            if isinstance(decl, OdpCapable):
                raise DeclarationError(
                    "ODP partitions cannot be composed inside one invocation", field="mechanisms"
                )
        return cls(items)


#: The distributions of the number of runs of ``repeat_and_select``.
RUN_DISTRIBUTIONS: Final[tuple[str, ...]] = ("poisson", "truncated_negative_binomial")


@dataclass(frozen=True, slots=True)
class RepeatAndSelect(Declaration):
    """Private selection (hyperparameter tuning): the inner ``mechanism`` run K times, K random,
    and only the best of its K outputs released (Liu–Talwar 2019, "Private selection from
    private candidates", STOC; Papernot–Steinke 2022, "Hyperparameter tuning with Rényi
    differential privacy", ICLR), as dp_accounting's ``RepeatAndSelectDpEvent(event, mean,
    shape)``.

    K ~ Poisson(``mean``) (PS22 Thm 6; dp_accounting's shape ∞), or K ~ the truncated negative
    binomial D_{η,γ} on {1, 2, …} of ``shape`` η ≥ 0 whose mean is ``mean`` (PS22 Def. 1 and
    Thm 2; η = 0 is the logarithmic distribution, η = 1 the geometric). ``mean`` > 1: a
    distribution on {1, 2, …} with mean 1 is K = 1, the mechanism itself. The inner mechanism
    may not be an ODP partition (its cells describe one run's outputs). How each mode charges it
    (or refuses): :mod:`odometer_core.accounting.selection` and ``docs/accounting.md``."""

    kind: ClassVar[str] = "repeat_and_select"
    mechanism: Declaration
    mean: Decimal
    distribution: Literal["poisson", "truncated_negative_binomial"]
    shape: Decimal | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.kind,
            "distribution": self.distribution,
            "mean": fmt(self.mean),
        }
        if self.shape is not None:
            out["shape"] = fmt(self.shape)
        out["mechanism"] = self.mechanism.to_json()
        return out

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> RepeatAndSelect:
        distribution = params.get("distribution")
        if distribution == "poisson":
            _only(params, ["distribution", "mean", "mechanism"], cls.kind)
            shape = None
        elif distribution == "truncated_negative_binomial":
            _only(params, ["distribution", "mean", "shape", "mechanism"], cls.kind)
            shape = _amount(params, "shape")
        else:
            raise DeclarationError(
                "distribution must be 'poisson' or 'truncated_negative_binomial'",
                field="distribution",
            )
        mean = _amount(params, "mean", upper=MAX_RUNS_MEAN)
        if mean <= 1:
            raise DeclarationError(f"mean must be > 1, got {fmt(mean)}", field="mean")
        inner = _parse(params.get("mechanism"), depth + 1)
        if isinstance(inner, OdpCapable):
            raise DeclarationError(
                "an ODP partition cannot be repeated and selected", field="mechanism"
            )
        return cls(inner, mean, distribution, shape)


@dataclass(frozen=True, slots=True)
class DPSGD(Declaration):
    """DP-SGD (Abadi et al. 2016): ``steps`` Poisson-subsampled Gaussian steps, sample rate q,
    noise multiplier σ (std / clipping norm), as Opacus users state them.

    ``delta`` is the δ at which ``basic`` mode converts the run to one (ε, δ) charge (PLD,
    tight for this fixed schedule); RDP-based modes charge the exact Mironov–Talwar–Zhang 2019
    curve × steps and ignore it.
    """

    kind: ClassVar[str] = "dp_sgd"
    noise_multiplier: Decimal
    sample_rate: Decimal
    steps: int
    delta: Decimal | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.kind,
            "noise_multiplier": fmt(self.noise_multiplier),
            "sample_rate": fmt(self.sample_rate),
            "steps": self.steps,
        }
        if self.delta is not None:
            out["delta"] = fmt(self.delta)
        return out

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> DPSGD:
        _only(params, ["noise_multiplier", "sample_rate", "steps", "delta"], cls.kind)
        delta = (
            _amount(params, "delta", below_one=True, positive=True) if "delta" in params else None
        )
        return cls(
            _amount(params, "noise_multiplier", upper=MAX_MECHANISM_PARAMETER, positive=True),
            _amount(params, "sample_rate", upper=ONE, positive=True),
            _integer(params, "steps", lower=1, upper=MAX_STEPS),
            delta,
        )


@dataclass(frozen=True, slots=True)
class MixtureOfGaussians(Declaration):
    """A mixture of Gaussians (Choquette-Choo–Ganesh–Steinke–Thakurta 2023, "Privacy
    amplification for matrix mechanisms", MMCC), as dp_accounting's
    ``MixtureOfGaussiansDpEvent(standard_deviation, sensitivities, sampling_probs)``: on one of
    two neighbours the output is N(0, σ²), on the other Σ_i p_i N(c_i, σ²) — the dominating pair
    of an amplified banded matrix mechanism, c_i the norms of its possible sensitivity vectors
    (their Cor. 4.7). Analysed under add/remove, as dp_accounting does; both directions are
    charged. How each mode charges it: :mod:`odometer_core.accounting.mixtures`.

    At most :data:`MAX_MIXTURE_COMPONENTS` components; σ > 0, c_i ≥ 0, p_i in (0, 1] summing
    to exactly 1 (as decimals)."""

    kind: ClassVar[str] = "mixture_of_gaussians"
    standard_deviation: Decimal
    sensitivities: tuple[Decimal, ...]
    sampling_probs: tuple[Decimal, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "standard_deviation": fmt(self.standard_deviation),
            "sensitivities": [fmt(c) for c in self.sensitivities],
            "sampling_probs": [fmt(p) for p in self.sampling_probs],
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> MixtureOfGaussians:
        _only(params, ["standard_deviation", "sensitivities", "sampling_probs"], cls.kind)
        sigma = _amount(params, "standard_deviation", upper=MAX_MECHANISM_PARAMETER, positive=True)
        raw_c = _list(params, "sensitivities", MAX_MIXTURE_COMPONENTS)
        raw_p = _list(params, "sampling_probs", MAX_MIXTURE_COMPONENTS)
        if len(raw_c) != len(raw_p):
            raise DeclarationError(
                "sensitivities and sampling_probs must have the same length", field="sampling_probs"
            )
        sens = tuple(
            _amount({"sensitivities": c}, "sensitivities", upper=MAX_MECHANISM_PARAMETER)
            for c in raw_c
        )
        probs = tuple(
            _amount({"sampling_probs": p}, "sampling_probs", upper=ONE, positive=True)
            for p in raw_p
        )
        low, high = ZERO, ZERO
        for p in probs:
            low, high = DOWN.add(low, p), UP.add(high, p)
        if low != ONE or high != ONE:
            raise DeclarationError(
                f"sampling_probs must sum to exactly 1, got {fmt(high)}", field="sampling_probs"
            )
        return cls(sigma, sens, probs)


#: The inner kinds of ``sampled_with_replacement``: those whose group privacy profile is known.
WITH_REPLACEMENT_INNER: Final[tuple[str, ...]] = (
    "gaussian",
    "pure_dp",
    "laplace",
    "randomized_response",
    "exponential",
    "discrete_laplace",
    "report_noisy_max",
)


@dataclass(frozen=True, slots=True)
class SampledWithReplacement(Declaration):
    """The inner ``mechanism`` run on m records drawn uniformly with replacement out of n, as
    dp_accounting's ``SampledWithReplacementDpEvent(source_dataset_size, sample_size, event)``.

    Balle–Barthe–Gaboardi 2018 Thm 10 analyses it under the replace-one relation (the dataset's
    size n is fixed), from the inner mechanism's group privacy profile: the record can be drawn
    up to m times. The inner kind is therefore the Gaussian mechanism or an ε-DP kind
    (:data:`WITH_REPLACEMENT_INNER`), whose profiles at k substitutions are known (sensitivity
    kΔ; kε-DP); its sensitivity or ε is for one substitution in the sample. How each mode
    charges it: :mod:`odometer_core.accounting.mixtures`."""

    kind: ClassVar[str] = "sampled_with_replacement"
    mechanism: Declaration
    m: int
    n: int

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "m": self.m, "n": self.n, "mechanism": self.mechanism.to_json()}

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> SampledWithReplacement:
        _only(params, ["m", "n", "mechanism"], cls.kind)
        n = _integer(params, "n", lower=1, upper=MAX_POPULATION)
        m = _integer(params, "m", lower=1, upper=MAX_SAMPLE_SIZE)
        inner = _parse(params.get("mechanism"), depth + 1)
        if inner.kind not in WITH_REPLACEMENT_INNER:
            raise DeclarationError(
                "the mechanism of sampled_with_replacement must be one of "
                f"{', '.join(WITH_REPLACEMENT_INNER)}, not '{inner.kind}': the amplification "
                "(Balle–Barthe–Gaboardi 2018 Thm 10) needs the inner mechanism's privacy when "
                "the record is drawn k times, known for these",
                field="mechanism",
            )
        return cls(inner, m, n)


@dataclass(frozen=True, slots=True)
class TruncatedSubsampledGaussian(Declaration):
    """Poisson sampling of rate q from n records, the batch truncated to at most B records by
    a uniformly random subset, then the Gaussian mechanism of noise multiplier σ (noise std /
    clipping norm), as dp_accounting's ``TruncatedSubsampledGaussianDpEvent(dataset_size,
    sampling_probability, truncated_batch_size, noise_multiplier)`` ("Tighter privacy analysis
    for truncated Poisson sampling", arXiv 2508.15089). Analysed under add/remove, as DP-SGD;
    how each mode charges it: :mod:`odometer_core.accounting.mixtures`."""

    kind: ClassVar[str] = "truncated_subsampled_gaussian"
    dataset_size: int
    sampling_probability: Decimal
    truncated_batch_size: int
    noise_multiplier: Decimal

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "dataset_size": self.dataset_size,
            "sampling_probability": fmt(self.sampling_probability),
            "truncated_batch_size": self.truncated_batch_size,
            "noise_multiplier": fmt(self.noise_multiplier),
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any], depth: int) -> TruncatedSubsampledGaussian:
        _only(
            params,
            ["dataset_size", "sampling_probability", "truncated_batch_size", "noise_multiplier"],
            cls.kind,
        )
        return cls(
            _integer(params, "dataset_size", lower=1, upper=MAX_POPULATION),
            _amount(params, "sampling_probability", upper=ONE, positive=True),
            _integer(params, "truncated_batch_size", lower=1, upper=MAX_POPULATION),
            _amount(params, "noise_multiplier", upper=MAX_MECHANISM_PARAMETER, positive=True),
        )


#: The closed registry: the only classes a payload can name.
KINDS: Final[dict[str, type[Declaration]]] = {
    cls.kind: cls
    for cls in (
        PureDP,
        ApproxDP,
        ZCDP,
        RDPCurve,
        GDP,
        MCDP,
        Gaussian,
        Laplace,
        RandomizedResponse,
        Exponential,
        DiscreteLaplace,
        DiscreteGaussian,
        ReportNoisyMax,
        TreeAggregation,
        ODP,
        SVT,
        PTR,
        Iterative,
        TestedRelease,
        Subsampled,
        Composed,
        RepeatAndSelect,
        DPSGD,
        MixtureOfGaussians,
        SampledWithReplacement,
        TruncatedSubsampledGaussian,
    )
}


def _parse(obj: object, depth: int) -> Declaration:
    if depth > MAX_DEPTH:
        raise DeclarationError(f"declarations may nest at most {MAX_DEPTH} levels")
    if not isinstance(obj, Mapping):
        raise DeclarationError("a mechanism must be a JSON object with a 'type'")
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in KINDS:
        raise DeclarationError(
            f"unknown mechanism type {kind!r}; expected one of {', '.join(sorted(KINDS))}",
            field="type",
        )
    return KINDS[kind].from_params(obj, depth)


def parse_declaration(obj: object) -> Declaration:
    """Validate a JSON object and build its declaration (closed registry, no imports).

    Raises :class:`DeclarationError` with a message that names the offending field.
    """
    return _parse(obj, 0)
