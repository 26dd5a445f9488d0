"""Concrete mechanisms whose whole proven guarantee is one a plain kind states
(:class:`~odometer_core.accounting.kinds.base.ChargedAs`): ``discrete_laplace`` (ε-DP),
``discrete_gaussian`` (ρ-zCDP), ``report_noisy_max`` (the exponential mechanism, or ε-DP) and
``tree_aggregation`` (a Gaussian mechanism). Every mode charges (or refuses) that kind in their
place, so that no charge formula is written twice."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Context, Decimal
from typing import Any, ClassVar, Final, Literal

from odometer_core.accounting.exact import DOWN, ONE, UP, fmt, mul_up
from odometer_core.accounting.kinds.base import ChargedAs, Declaration, Nested, only
from odometer_core.accounting.kinds.fields import read, read_kind, spec
from odometer_core.accounting.kinds.plain import ZCDP, Exponential, Gaussian, Laplace, PureDP


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
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> DiscreteLaplace:
        return cls(**read_kind(params, cls.kind))

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
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> DiscreteGaussian:
        return cls(**read_kind(params, cls.kind))

    @property
    def rho(self) -> Decimal:
        """ρ = Δ²/(2σ²), rounded up: the continuous Gaussian's ρ (CKS20 Thm 14)."""
        return Gaussian(self.sigma, self.sensitivity).rho

    def charged_as(self) -> ZCDP:
        return ZCDP(self.rho)


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
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> ReportNoisyMax:
        return cls(**read_kind(params, cls.kind))

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
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> TreeAggregation:
        table = spec(cls.kind)
        only(params, [f.name for f in table.fields], cls.kind)
        counts = read(params, table.field("step_counts"))
        return cls(read(params, table.field("noise_multiplier")), counts)

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
