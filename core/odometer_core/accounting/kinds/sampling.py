"""The kinds amplified by sampling: an inner mechanism on a subsample (``subsampled``,
``sampled_with_replacement``), DP-SGD, the truncated Poisson-subsampled Gaussian, and the
mixture of Gaussians that dominates an amplified matrix mechanism."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, ClassVar, Literal

from odometer_core.accounting.exact import DOWN, ONE, UP, ZERO, fmt
from odometer_core.accounting.kinds.base import (
    Declaration,
    DeclarationError,
    Nested,
    OdpCapable,
    Relation,
    entries,
    integer,
    only,
)
from odometer_core.accounting.kinds.fields import form_of, read, read_kind, spec


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
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> Subsampled:
        table = spec(cls.kind)
        if form_of(params, cls.kind).when == ("scheme", "poisson"):
            rate = read(params, replace(table.field("rate"), required=True))
            inner = nested(params.get("mechanism"))
            decl = cls("poisson", inner, rate=rate)
        else:
            n = read(params, replace(table.field("n"), required=True))
            m_bounds = table.field("m").bounds
            assert m_bounds is not None
            m = integer(params, "m", lower=m_bounds[0], upper=n)  # a sample within its population
            inner = nested(params.get("mechanism"))
            decl = cls("without_replacement", inner, m=m, n=n)
        if isinstance(inner, OdpCapable):
            raise DeclarationError("an ODP partition cannot be subsampled", field="mechanism")
        return decl


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
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> DPSGD:
        table = spec(cls.kind)
        only(params, [f.name for f in table.fields], cls.kind)
        delta = read(params, table.field("delta"))  # read first, as it always was
        values = {f.name: read(params, f) for f in table.fields if f.name != "delta"}
        return cls(**values, delta=delta)


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
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> MixtureOfGaussians:
        table = spec(cls.kind)
        only(params, [f.name for f in table.fields], cls.kind)
        f_sens, f_probs = table.field("sensitivities"), table.field("sampling_probs")
        sigma = read(params, table.field("standard_deviation"))
        assert f_sens.entries is not None and f_probs.entries is not None
        raw_c = entries(params, "sensitivities", f_sens.entries)
        raw_p = entries(params, "sampling_probs", f_probs.entries)
        if len(raw_c) != len(raw_p):
            raise DeclarationError(
                "sensitivities and sampling_probs must have the same length", field="sampling_probs"
            )
        sens: tuple[Decimal, ...] = read(params, f_sens)
        probs: tuple[Decimal, ...] = read(params, f_probs)
        low, high = ZERO, ZERO
        for p in probs:
            low, high = DOWN.add(low, p), UP.add(high, p)
        if low != ONE or high != ONE:
            raise DeclarationError(
                f"sampling_probs must sum to exactly 1, got {fmt(high)}", field="sampling_probs"
            )
        return cls(sigma, sens, probs)


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
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> SampledWithReplacement:
        table = spec(cls.kind)
        only(params, [f.name for f in table.fields], cls.kind)
        n = read(params, table.field("n"))
        m = read(params, table.field("m"))
        inner = nested(params.get("mechanism"))
        allowed = table.field("mechanism").inner
        assert allowed is not None
        if inner.kind not in allowed:
            raise DeclarationError(
                "the mechanism of sampled_with_replacement must be one of "
                f"{', '.join(allowed)}, not '{inner.kind}': the amplification "
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
    def from_params(cls, params: Mapping[str, Any], nested: Nested) -> TruncatedSubsampledGaussian:
        return cls(**read_kind(params, cls.kind))
