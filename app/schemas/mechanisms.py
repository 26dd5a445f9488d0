"""Mechanism declarations as a discriminated union on ``type``.

These models give the OpenAPI document one schema per kind and refuse unknown fields; the
accounting core's ``parse_declaration`` (closed registry) remains the authority on values and
is applied by :func:`to_declaration`. Field names and limits mirror
``core/odometer_core/accounting/declarations.py``.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Field, StrictBool

from app.schemas.common import (
    NOT_A_BOOLEAN,
    Form,
    Noise,
    Order,
    PositiveNoise,
    PositiveProbability,
    PositiveRate,
    Privacy,
    Probability,
    Rate,
    RunsMean,
    StrictModel,
    one_form_of,
    optional,
)
from odometer_core.accounting import KINDS, Declaration, parse_declaration
from odometer_core.accounting.declarations import (
    MAX_CELLS,
    MAX_COMPOSED_ITEMS,
    MAX_COUNT,
    MAX_CURVE_POINTS,
    MAX_MIXTURE_COMPONENTS,
    MAX_POPULATION,
    MAX_SAMPLE_SIZE,
    MAX_STEPS,
    MAX_TREES,
    WITH_REPLACEMENT_INNER,
    OdpCapable,
)

#: The kinds whose cell is decided by the released output (ODP partitions): never composed
#: inside one invocation nor subsampled (the accounting core's rule; the schema says it too).
ODP_KINDS: Final = tuple(kind for kind, cls in KINDS.items() if issubclass(cls, OdpCapable))


def _without_odp(union: dict[str, Any]) -> None:
    """A declaration union (``oneOf`` with its ``type`` discriminator) without the ODP kinds."""
    mapping = union["discriminator"]["mapping"]
    dropped = {mapping.pop(kind) for kind in ODP_KINDS}
    union["oneOf"] = [option for option in union["oneOf"] if option.get("$ref") not in dropped]


CELL_PATTERN = r"^[A-Za-z0-9_.:=+\-]{1,64}$"


class PureDP(StrictModel):
    """ε-DP."""

    type: Literal["pure_dp"]
    epsilon: Privacy


class ApproxDP(StrictModel):
    """(ε, δ)-DP."""

    type: Literal["approx_dp"]
    epsilon: Privacy
    delta: Probability


class ZCDP(StrictModel):
    """(ξ, ρ)-zCDP, δ-approximate when δ > 0."""

    type: Literal["zcdp"]
    rho: Privacy
    xi: Privacy | None = optional()
    delta: Probability | None = optional()


class RDP(StrictModel):
    """An RDP curve known at finitely many orders (orders > 1, strictly increasing)."""

    type: Literal["rdp"]
    orders: list[Order] = Field(min_length=1, max_length=MAX_CURVE_POINTS)
    values: list[Privacy] = Field(min_length=1, max_length=MAX_CURVE_POINTS)


class GDP(StrictModel):
    """μ-Gaussian DP."""

    type: Literal["gdp"]
    mu: Privacy


class MCDP(StrictModel):
    """(μ, τ)-mean-concentrated DP."""

    type: Literal["mcdp"]
    mu: Privacy
    tau: Privacy


class Gaussian(StrictModel):
    """Gaussian mechanism: noise std σ, ℓ₂ sensitivity Δ (default 1)."""

    type: Literal["gaussian"]
    sigma: Noise
    sensitivity: Noise | None = optional()


class Laplace(StrictModel):
    """Laplace mechanism: scale b, ℓ₁ sensitivity Δ (default 1)."""

    type: Literal["laplace"]
    scale: Noise
    sensitivity: Noise | None = optional()


class RandomizedResponse(StrictModel):
    """Binary randomized response with parameter ε."""

    type: Literal["randomized_response"]
    epsilon: Privacy


class Exponential(StrictModel):
    """Exponential mechanism with parameter ε."""

    type: Literal["exponential"]
    epsilon: Privacy


class DiscreteLaplace(StrictModel):
    """Discrete Laplace (two-sided geometric) noise P[x] ∝ exp(−|x|/t) on an integer-valued
    query: scale t > 0, sensitivity Δ (default 1); ε = Δ/t."""

    type: Literal["discrete_laplace"]
    scale: PositiveNoise
    sensitivity: Noise | None = optional()


class DiscreteGaussian(StrictModel):
    """Discrete Gaussian noise on an integer-valued query: σ > 0, ℓ₂ sensitivity Δ (default 1);
    ρ = Δ²/(2σ²)-zCDP (Canonne–Kamath–Steinke 2020). Not accepted in mode ``gdp``."""

    type: Literal["discrete_gaussian"]
    sigma: PositiveNoise
    sensitivity: Noise | None = optional()


class ReportNoisyMax(StrictModel):
    """Report noisy max with ``gumbel`` noise (the exponential mechanism) or ``exponential``
    noise (permute-and-flip, charged as pure ε-DP), scale b > 0, score sensitivity Δ (default
    1): ε = Δ/b if ``monotonic`` (default false), else 2Δ/b."""

    type: Literal["report_noisy_max"]
    noise: Literal["gumbel", "exponential"]
    scale: PositiveNoise
    sensitivity: Noise | None = optional()
    monotonic: StrictBool | None = optional()


class TreeAggregation(StrictModel):
    """DP-FTRL's single-epoch tree aggregation (Kairouz et al. 2021): one tree of noisy partial
    sums per entry of ``step_counts`` (steps per tree), noise std ``noise_multiplier`` times the
    sensitivity of one record's contribution to one leaf, each record in one leaf of all the
    trees. Charged as ``gaussian`` with σ = noise_multiplier and sensitivity √d,
    d = ⌈log₂(max step_counts + 1)⌉ (rounded up), in every mode."""

    type: Literal["tree_aggregation"]
    noise_multiplier: PositiveNoise
    step_counts: list[Annotated[int, Field(ge=1, le=MAX_STEPS), NOT_A_BOOLEAN]] = Field(
        min_length=1, max_length=MAX_TREES
    )


class OdpCell(StrictModel):
    """One cell of an output-dependent partition."""

    name: str = Field(pattern=CELL_PATTERN)
    epsilon: Privacy


class ODP(StrictModel):
    """An ODP partition: named cells with ε_k and one δ (reserved at the worst cell in
    ``basic`` mode, settled to the released cell)."""

    type: Literal["odp"]
    cells: list[OdpCell] = Field(min_length=1, max_length=MAX_CELLS)
    delta: Probability | None = optional()


class SVT(StrictModel):
    """Sparse vector technique with at most ``c`` ⊤ answers (cells ``tops=0..c``)."""

    type: Literal["svt"]
    epsilon1: Privacy
    epsilon2: Privacy
    c: Annotated[int, Field(ge=1, le=MAX_CELLS - 1), NOT_A_BOOLEAN]


class PTR(StrictModel):
    """Propose-test-release (cells ``value`` and ``bottom``)."""

    type: Literal["ptr"]
    epsilon: Privacy
    delta: Probability
    tests: Annotated[int, Field(ge=1, le=2), NOT_A_BOOLEAN] | None = optional()


class Iterative(StrictModel):
    """Iterative mechanism with early stopping (cells ``stop=k``)."""

    type: Literal["iterative"]
    step_epsilon: Privacy
    step_delta: Probability
    stopping_points: list[Annotated[int, Field(ge=1, le=MAX_STEPS), NOT_A_BOOLEAN]] = Field(
        min_length=1, max_length=MAX_CELLS
    )


class TestedRelease(StrictModel):
    """Output perturbation with a DP quality test (cells ``released`` and ``bottom``)."""

    type: Literal["tested_release"]
    epsilon_release: Privacy
    epsilon_bottom: Privacy
    delta: Probability | None = optional()


class Subsampled(StrictModel):
    """An inner mechanism on a random subsample: ``poisson`` (``rate``) needs relation
    ``add_remove``; ``without_replacement`` (``m`` of ``n``) needs ``replace_one``. The inner
    mechanism is not an ODP partition."""

    model_config = ConfigDict(json_schema_extra=lambda schema: _subsampled_schema(schema))

    type: Literal["subsampled"]
    scheme: Literal["poisson", "without_replacement"]
    rate: Rate | None = optional()
    m: Annotated[int, Field(ge=0, le=MAX_POPULATION), NOT_A_BOOLEAN] | None = optional()
    n: Annotated[int, Field(ge=1, le=MAX_POPULATION), NOT_A_BOOLEAN] | None = optional()
    mechanism: Mechanism


class Composed(StrictModel):
    """Non-adaptive composition inside one invocation: ``mechanisms`` (a list), or one
    ``mechanism`` repeated ``count`` times.

    Work limit: the subsampled-Gaussian items (``dp_sgd``, ``subsampled`` Gaussians, at any
    depth) are charged through one RDP series per distinct (noise multiplier, sample rate);
    a declaration whose series would evaluate more than 3,000,000 terms on the dataset's grid
    (about half a second of CPU) is refused with 422 ``InvalidDeclaration``, nothing charged
    (merge segments that share parameters, or split the run). In ``basic`` mode up to four of
    them get their own PLD; above that they are charged by their RDP bounds. ODP partitions
    are not composed (declare them as separate invocations)."""

    model_config = ConfigDict(json_schema_extra=lambda schema: _composed_schema(schema))

    type: Literal["composed"]
    mechanisms: list[Mechanism] | None = optional(min_length=1, max_length=MAX_COMPOSED_ITEMS)
    mechanism: Mechanism | None = optional()
    count: Annotated[int, Field(ge=1, le=MAX_COUNT), NOT_A_BOOLEAN] | None = optional()


class RepeatAndSelect(StrictModel):
    """Private selection (hyperparameter tuning): ``mechanism`` run K times, only the best
    output released; K ~ ``poisson`` with mean ``mean``, or the ``truncated_negative_binomial``
    of ``shape`` η ≥ 0 (0: logarithmic, 1: geometric) with mean ``mean`` (Papernot–Steinke
    2022). Accounted in modes ``rdp`` and ``basic`` (an ε-DP mechanism under a truncated
    negative binomial: (2 + η)ε; otherwise the Rényi curve converted), refused by ``zcdp`` and
    ``gdp``; the inner mechanism declares no δ and is not an ODP partition."""

    model_config = ConfigDict(json_schema_extra=lambda schema: _repeat_and_select_schema(schema))

    type: Literal["repeat_and_select"]
    distribution: Literal["poisson", "truncated_negative_binomial"]
    mean: RunsMean
    shape: Privacy | None = optional()
    mechanism: Mechanism


class DPSGD(StrictModel):
    """DP-SGD: ``steps`` Poisson-subsampled Gaussian steps (rate q, noise multiplier σ).

    In ``basic`` mode the run is charged by PLD accounting on a grid bounded to about 0.6 s of
    CPU (coarser, still an upper bound, where the default grid would need more); where even
    that does not fit, by its RDP bound. A run whose ε is far beyond the remaining budget is
    refused on a cheap lower bound, named in the 409 ("the charge is at least …")."""

    type: Literal["dp_sgd"]
    noise_multiplier: PositiveNoise
    sample_rate: PositiveRate
    steps: Annotated[int, Field(ge=1, le=MAX_STEPS), NOT_A_BOOLEAN]
    delta: PositiveProbability | None = optional()


class MixtureOfGaussians(StrictModel):
    """A mixture of Gaussians (amplified banded matrix mechanisms; Choquette-Choo–Ganesh–
    Steinke–Thakurta 2023): N(0, σ²) against Σ_i p_i N(c_i, σ²) — ``standard_deviation`` σ > 0,
    ``sensitivities`` c_i ≥ 0 (norms), ``sampling_probs`` p_i in (0, 1] summing to exactly 1, as
    many, at most 256. Datasets with relation ``add_remove``. Accounted in ``basic`` (the exact
    (ε, δ) of both directions at the conversion δ) and ``rdp`` (a Rényi bound for both
    directions); refused by ``zcdp`` and ``gdp``."""

    type: Literal["mixture_of_gaussians"]
    standard_deviation: PositiveNoise
    sensitivities: list[Noise] = Field(min_length=1, max_length=MAX_MIXTURE_COMPONENTS)
    sampling_probs: list[PositiveRate] = Field(min_length=1, max_length=MAX_MIXTURE_COMPONENTS)


class SampledWithReplacement(StrictModel):
    """``mechanism`` on ``m`` records drawn uniformly with replacement out of ``n``
    (Balle–Barthe–Gaboardi 2018 Thm 10): datasets with relation ``replace_one``; the inner
    mechanism is ``gaussian`` or an ε-DP kind (sensitivity or ε for one substitution in the
    sample). Accounted in ``basic`` and ``rdp`` (its Rényi bound sums m + 1 terms per order,
    within the work limit of a charge); refused by ``zcdp`` and ``gdp``."""

    model_config = ConfigDict(json_schema_extra=lambda schema: _with_replacement_schema(schema))

    type: Literal["sampled_with_replacement"]
    m: Annotated[int, Field(ge=1, le=MAX_SAMPLE_SIZE), NOT_A_BOOLEAN]
    n: Annotated[int, Field(ge=1, le=MAX_POPULATION), NOT_A_BOOLEAN]
    mechanism: Mechanism


class TruncatedSubsampledGaussian(StrictModel):
    """Poisson sampling of rate ``sampling_probability`` from ``dataset_size`` records, the
    batch truncated to ``truncated_batch_size`` records by a random subset, then the Gaussian
    mechanism of ``noise_multiplier`` (noise std / clipping norm). Datasets with relation
    ``add_remove``. Accounted in ``basic`` (PLD, on a grid bounded as DP-SGD's) and ``rdp``;
    refused by ``zcdp`` and ``gdp``."""

    type: Literal["truncated_subsampled_gaussian"]
    dataset_size: Annotated[int, Field(ge=1, le=MAX_POPULATION), NOT_A_BOOLEAN]
    sampling_probability: PositiveRate
    truncated_batch_size: Annotated[int, Field(ge=1, le=MAX_POPULATION), NOT_A_BOOLEAN]
    noise_multiplier: PositiveNoise


MechanismModel = (
    PureDP
    | ApproxDP
    | ZCDP
    | RDP
    | GDP
    | MCDP
    | Gaussian
    | Laplace
    | RandomizedResponse
    | Exponential
    | DiscreteLaplace
    | DiscreteGaussian
    | ReportNoisyMax
    | TreeAggregation
    | ODP
    | SVT
    | PTR
    | Iterative
    | TestedRelease
    | Subsampled
    | Composed
    | RepeatAndSelect
    | DPSGD
    | MixtureOfGaussians
    | SampledWithReplacement
    | TruncatedSubsampledGaussian
)

#: The request field: the same union, discriminated on ``type`` (one schema per kind).
Mechanism = Annotated[MechanismModel, Field(discriminator="type")]


def _const(value: str) -> dict[str, Any]:
    return {"type": "string", "const": value}


def _subsampled_schema(schema: dict[str, Any]) -> None:
    """``poisson`` takes ``rate``, ``without_replacement`` takes ``m`` and ``n``; the inner
    mechanism is never an ODP partition."""
    _without_odp(schema["properties"]["mechanism"])
    one_form_of(
        schema,
        Form(("type", "scheme", "rate", "mechanism"), scheme=_const("poisson")),
        Form(("type", "scheme", "m", "n", "mechanism"), scheme=_const("without_replacement")),
    )


def _composed_schema(schema: dict[str, Any]) -> None:
    """Exactly one of ``mechanisms`` and ``mechanism`` (with its ``count``); no ODP items."""
    _without_odp(schema["properties"]["mechanisms"]["items"])
    _without_odp(schema["properties"]["mechanism"])
    one_form_of(schema, Form(("type", "mechanisms")), Form(("type", "mechanism", "count")))


def _repeat_and_select_schema(schema: dict[str, Any]) -> None:
    """A ``shape`` with the truncated negative binomial only; no ODP inner mechanism."""
    _without_odp(schema["properties"]["mechanism"])
    one_form_of(
        schema,
        Form(("type", "distribution", "mean", "mechanism"), distribution=_const("poisson")),
        Form(
            ("type", "distribution", "mean", "shape", "mechanism"),
            distribution=_const("truncated_negative_binomial"),
        ),
    )


def _with_replacement_schema(schema: dict[str, Any]) -> None:
    """The inner mechanism is one of the kinds whose group privacy profile is known."""
    union = schema["properties"]["mechanism"]
    mapping = union["discriminator"]["mapping"]
    dropped = {mapping.pop(kind) for kind in list(mapping) if kind not in WITH_REPLACEMENT_INNER}
    union["oneOf"] = [option for option in union["oneOf"] if option.get("$ref") not in dropped]


Subsampled.model_rebuild()
Composed.model_rebuild()
SampledWithReplacement.model_rebuild()
RepeatAndSelect.model_rebuild()


def to_declaration(mechanism: MechanismModel) -> Declaration:
    """Translate a validated request model into the accounting core's declaration (the core
    re-validates values and raises ``DeclarationError`` naming the field)."""
    data: dict[str, Any] = mechanism.model_dump(mode="json", exclude_none=True)
    return parse_declaration(data)
