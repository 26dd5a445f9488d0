"""The field table: every declaration kind's payload, said once.

For each kind (:data:`TABLE`) the fields a payload carries, in order, with what each may be:
an exact amount in a :class:`Domain` (its bounds, open or closed), a bounded integer, a
boolean, one of a few words, a list of these, the ODP cells (each a :data:`CELL`, whose fields
are said here too), or a nested mechanism; whether it may be omitted and what it then means;
the forms (:class:`Form`) of a kind whose fields go together; and the words the HTTP API's
document says of the kind.

Everything else is derived from it:

- the kinds' parsers (``from_params`` in this package) read their fields with :func:`read`
  and :func:`read_kind`, which take the bounds from here;
- the server's request models (``app/schemas/mechanisms.py``) are built from it, and the
  OpenAPI document follows from them;
- the client's declaration helpers (``odometer_client/_declared.py``) are generated from that
  document by ``client/generate.py`` (the client does not import the core).

A kind whose rule is not a bound (an RDP curve's increasing orders, a mixture's probabilities
summing to 1, a without-replacement sample no larger than its population) checks it in its
``from_params``, after the table's checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Literal

from odometer_core.accounting.exact import ONE, ZERO, fmt
from odometer_core.accounting.kinds.base import (
    CELL_NAME_PATTERN,
    MAX_CELLS,
    MAX_COMPOSED_ITEMS,
    MAX_COUNT,
    MAX_CURVE_POINTS,
    MAX_MECHANISM_PARAMETER,
    MAX_MIXTURE_COMPONENTS,
    MAX_ORDER,
    MAX_POPULATION,
    MAX_PRIVACY_PARAMETER,
    MAX_RUNS_MEAN,
    MAX_SAMPLE_SIZE,
    MAX_STEPS,
    MAX_TREES,
    DeclarationError,
    amount,
    entries,
    integer,
    only,
)

__all__ = [
    "CELL",
    "CELL_NAME_PATTERN",
    "NOISE",
    "NOISES",
    "ORDER",
    "POSITIVE_NOISE",
    "POSITIVE_PROBABILITY",
    "POSITIVE_RATE",
    "PRIVACY",
    "PROBABILITY",
    "RATE",
    "RUNS_MEAN",
    "RUN_DISTRIBUTIONS",
    "SCHEMES",
    "TABLE",
    "WITH_REPLACEMENT_INNER",
    "Domain",
    "Field",
    "Form",
    "KindSpec",
    "amount_in",
    "form_of",
    "read",
    "read_kind",
    "spec",
]


# ---------------------------------------------------------------------------- what a field is
@dataclass(frozen=True, slots=True)
class Domain:
    """The values an amount may take, from ``low`` to ``high``, each bound open or closed;
    ``what`` says it in words (the document's description), ``example`` is a value in it."""

    low: Decimal
    high: Decimal
    example: str
    what: str
    low_open: bool = False
    high_open: bool = False


#: A privacy parameter (ε, ρ, ξ, μ, τ, an RDP value): 0 … 10⁶.
PRIVACY: Final = Domain(ZERO, MAX_PRIVACY_PARAMETER, "0.1", "0 ≤ value ≤ 10⁶")
#: A noise scale or a sensitivity (σ, b, Δ): 0 … 10¹².
NOISE: Final = Domain(ZERO, MAX_MECHANISM_PARAMETER, "1", "0 ≤ value ≤ 10¹²")
#: A noise scale that must be positive (discrete noise, report noisy max, DP-SGD): (0, 10¹²].
POSITIVE_NOISE: Final = Domain(
    ZERO, MAX_MECHANISM_PARAMETER, "1", "0 < value ≤ 10¹²", low_open=True
)
#: A δ: [0, 1).
PROBABILITY: Final = Domain(ZERO, ONE, "0.00001", "0 ≤ δ < 1", high_open=True)
#: DP-SGD's own δ: (0, 1).
POSITIVE_PROBABILITY: Final = Domain(
    ZERO, ONE, "0.00001", "0 < δ < 1", low_open=True, high_open=True
)
#: A sampling rate: [0, 1].
RATE: Final = Domain(ZERO, ONE, "0.5", "0 ≤ value ≤ 1")
#: A sampling rate that must be positive: (0, 1].
POSITIVE_RATE: Final = Domain(ZERO, ONE, "0.01", "0 < value ≤ 1", low_open=True)
#: An RDP order α: (1, 10⁶].
ORDER: Final = Domain(ONE, MAX_ORDER, "2", "1 < α ≤ 10⁶", low_open=True)
#: The mean number of runs E[K] of a ``repeat_and_select``: (1, 10⁶].
RUNS_MEAN: Final = Domain(ONE, MAX_RUNS_MEAN, "10", "1 < E[K] ≤ 10⁶", low_open=True)

Shape = Literal["amount", "integer", "boolean", "choice", "text", "cells", "mechanism"]


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a payload.

    ``shape`` says what it holds: an ``amount`` in ``domain``, an ``integer`` in ``bounds``
    (both inclusive), a ``boolean``, a ``choice`` of ``choices``, ``text`` matching
    ``pattern`` (an ODP cell's name), the ODP ``cells`` (each one ``cell``, :data:`CELL`), or
    a nested ``mechanism`` (one of ``inner`` if given, else any kind but the ODP partitions). With
    ``entries`` it is a list of 1 … ``entries`` such values, each named ``item`` in an error.
    An optional field (``required=False``) reads as ``default`` when omitted; ``description``,
    when given, is what the document says of it (else its domain's words)."""

    name: str
    shape: Shape
    domain: Domain | None = None
    bounds: tuple[int, int] | None = None
    choices: tuple[str, ...] = ()
    entries: int | None = None
    item: str | None = None
    required: bool = True
    default: Decimal | int | bool | None = None
    description: str | None = None
    inner: tuple[str, ...] | None = None
    pattern: str | None = None
    cell: KindSpec | None = None


@dataclass(frozen=True, slots=True)
class Form:
    """One form of a payload whose fields go together: these fields and no others (``type``
    aside), chosen by ``when`` (a choice field and its value) if given."""

    fields: tuple[str, ...]
    when: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class KindSpec:
    """A kind's payload: ``kind`` (the ``type``), ``title`` (its schema's name in the
    document), ``description`` (what the document says of it), its fields in order, and its
    forms (empty: one form, every field)."""

    kind: str
    title: str
    description: str
    fields: tuple[Field, ...]
    forms: tuple[Form, ...] = ()

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


def _amount(name: str, domain: Domain, **more: Any) -> Field:
    return Field(name, "amount", domain=domain, **more)


def _integer(name: str, low: int, high: int, **more: Any) -> Field:
    return Field(name, "integer", bounds=(low, high), **more)


def _doc(text: str) -> str:
    """``text`` as a docstring reads: blank ends dropped, the lines' common indentation removed."""
    lines = text.strip("\n").split("\n")
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines).strip()


# ---------------------------------------------------------------------------- the words
#: The noises of ``report_noisy_max``.
NOISES: Final[tuple[str, ...]] = ("gumbel", "exponential")
#: The sampling schemes of ``subsampled``.
SCHEMES: Final[tuple[str, ...]] = ("poisson", "without_replacement")
#: The distributions of the number of runs of ``repeat_and_select``.
RUN_DISTRIBUTIONS: Final[tuple[str, ...]] = ("poisson", "truncated_negative_binomial")
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

_SENSITIVITY: Final = _amount("sensitivity", NOISE, required=False, default=ONE)

_DISCRETE_LAPLACE = """
    Discrete Laplace (two-sided geometric) noise P[x] ∝ exp(−|x|/t) on an integer-valued
    query: scale t > 0, sensitivity Δ (default 1); ε = Δ/t."""
_DISCRETE_GAUSSIAN = """
    Discrete Gaussian noise on an integer-valued query: σ > 0, ℓ₂ sensitivity Δ (default 1);
    ρ = Δ²/(2σ²)-zCDP (Canonne–Kamath–Steinke 2020). Not accepted in mode ``gdp``."""
_REPORT_NOISY_MAX = """
    Report noisy max with ``gumbel`` noise (the exponential mechanism) or ``exponential``
    noise (permute-and-flip, charged as pure ε-DP), scale b > 0, score sensitivity Δ (default
    1): ε = Δ/b if ``monotonic`` (default false), else 2Δ/b."""
_TREE_AGGREGATION = """
    DP-FTRL's single-epoch tree aggregation (Kairouz et al. 2021): one tree of noisy partial
    sums per entry of ``step_counts`` (steps per tree), noise std ``noise_multiplier`` times the
    sensitivity of one record's contribution to one leaf, each record in one leaf of all the
    trees. Charged as ``gaussian`` with σ = noise_multiplier and sensitivity √d,
    d = ⌈log₂(max step_counts + 1)⌉ (rounded up), in every mode."""
_ODP = """
    An ODP partition: named cells with ε_k and one δ (reserved at the worst cell in
    ``basic`` mode, settled to the released cell)."""
_SUBSAMPLED = """
    An inner mechanism on a random subsample: ``poisson`` (``rate``) needs relation
    ``add_remove``; ``without_replacement`` (``m`` of ``n``) needs ``replace_one``. The inner
    mechanism is not an ODP partition."""
_COMPOSED = """
    Non-adaptive composition inside one invocation: ``mechanisms`` (a list), or one
    ``mechanism`` repeated ``count`` times.

    Work limit: the subsampled-Gaussian items (``dp_sgd``, ``subsampled`` Gaussians, at any
    depth) are charged through one RDP series per distinct (noise multiplier, sample rate);
    a declaration whose series would evaluate more than 3,000,000 terms on the dataset's grid
    (about half a second of CPU) is refused with 422 ``InvalidDeclaration``, nothing charged
    (merge segments that share parameters, or split the run). In ``basic`` mode up to four of
    them get their own PLD; above that they are charged by their RDP bounds. ODP partitions
    are not composed (declare them as separate invocations)."""
_REPEAT_AND_SELECT = """
    Private selection (hyperparameter tuning): ``mechanism`` run K times, only the best
    output released; K ~ ``poisson`` with mean ``mean``, or the ``truncated_negative_binomial``
    of ``shape`` η ≥ 0 (0: logarithmic, 1: geometric) with mean ``mean`` (Papernot–Steinke
    2022). Accounted in modes ``rdp`` and ``basic`` (an ε-DP mechanism under a truncated
    negative binomial: (2 + η)ε; otherwise the Rényi curve converted), refused by ``zcdp`` and
    ``gdp``; the inner mechanism declares no δ and is not an ODP partition."""
_DP_SGD = """
    DP-SGD: ``steps`` Poisson-subsampled Gaussian steps (rate q, noise multiplier σ).

    In ``basic`` mode the run is charged by PLD accounting on a grid bounded to about 0.6 s of
    CPU (coarser, still an upper bound, where the default grid would need more); where even
    that does not fit, by its RDP bound. A run whose ε is far beyond the remaining budget is
    refused on a cheap lower bound, named in the 409 ("the charge is at least …")."""
_MIXTURE_OF_GAUSSIANS = """
    A mixture of Gaussians (amplified banded matrix mechanisms; Choquette-Choo–Ganesh–
    Steinke–Thakurta 2023): N(0, σ²) against Σ_i p_i N(c_i, σ²) — ``standard_deviation`` σ > 0,
    ``sensitivities`` c_i ≥ 0 (norms), ``sampling_probs`` p_i in (0, 1] summing to exactly 1, as
    many, at most 256. Datasets with relation ``add_remove``. Accounted in ``basic`` (the exact
    (ε, δ) of both directions at the conversion δ) and ``rdp`` (a Rényi bound for both
    directions); refused by ``zcdp`` and ``gdp``."""
_SAMPLED_WITH_REPLACEMENT = """
    ``mechanism`` on ``m`` records drawn uniformly with replacement out of ``n``
    (Balle–Barthe–Gaboardi 2018 Thm 10): datasets with relation ``replace_one``; the inner
    mechanism is ``gaussian`` or an ε-DP kind (sensitivity or ε for one substitution in the
    sample). Accounted in ``basic`` and ``rdp`` (its Rényi bound sums m + 1 terms per order,
    within the work limit of a charge); refused by ``zcdp`` and ``gdp``."""
_TRUNCATED_SUBSAMPLED_GAUSSIAN = """
    Poisson sampling of rate ``sampling_probability`` from ``dataset_size`` records, the
    batch truncated to ``truncated_batch_size`` records by a random subset, then the Gaussian
    mechanism of ``noise_multiplier`` (noise std / clipping norm). Datasets with relation
    ``add_remove``. Accounted in ``basic`` (PLD, on a grid bounded as DP-SGD's) and ``rdp``;
    refused by ``zcdp`` and ``gdp``."""

# ---------------------------------------------------------------------------- the table
#: One cell of an ODP partition (what a ``cells`` field holds, its ``cell``): its name and its ε,
#: said as a kind's payload is (``kind`` names it in an error, ``title`` is its schema's name in
#: the document). The kind's parser reads the name itself (it names the cells, no two alike).
CELL: Final = KindSpec(
    "cell",
    "OdpCell",
    "One cell of an output-dependent partition.",
    (Field("name", "text", pattern=CELL_NAME_PATTERN), _amount("epsilon", PRIVACY)),
)

_KINDS: Final[tuple[KindSpec, ...]] = (
    KindSpec("pure_dp", "PureDP", "ε-DP.", (_amount("epsilon", PRIVACY),)),
    KindSpec(
        "approx_dp",
        "ApproxDP",
        "(ε, δ)-DP.",
        (_amount("epsilon", PRIVACY), _amount("delta", PROBABILITY)),
    ),
    KindSpec(
        "zcdp",
        "ZCDP",
        "(ξ, ρ)-zCDP, δ-approximate when δ > 0.",
        (
            _amount("rho", PRIVACY),
            _amount("xi", PRIVACY, required=False, default=ZERO),
            _amount("delta", PROBABILITY, required=False, default=ZERO),
        ),
    ),
    KindSpec(
        "rdp",
        "RDP",
        "An RDP curve known at finitely many orders (orders > 1, strictly increasing).",
        (
            _amount("orders", ORDER, entries=MAX_CURVE_POINTS, item="order"),
            _amount("values", PRIVACY, entries=MAX_CURVE_POINTS, item="value"),
        ),
    ),
    KindSpec("gdp", "GDP", "μ-Gaussian DP.", (_amount("mu", PRIVACY),)),
    KindSpec(
        "mcdp",
        "MCDP",
        "(μ, τ)-mean-concentrated DP.",
        (_amount("mu", PRIVACY), _amount("tau", PRIVACY)),
    ),
    KindSpec(
        "gaussian",
        "Gaussian",
        "Gaussian mechanism: noise std σ, ℓ₂ sensitivity Δ (default 1).",
        (_amount("sigma", NOISE), _SENSITIVITY),
    ),
    KindSpec(
        "laplace",
        "Laplace",
        "Laplace mechanism: scale b, ℓ₁ sensitivity Δ (default 1).",
        (_amount("scale", NOISE), _SENSITIVITY),
    ),
    KindSpec(
        "randomized_response",
        "RandomizedResponse",
        "Binary randomized response with parameter ε.",
        (_amount("epsilon", PRIVACY),),
    ),
    KindSpec(
        "exponential",
        "Exponential",
        "Exponential mechanism with parameter ε.",
        (_amount("epsilon", PRIVACY),),
    ),
    KindSpec(
        "discrete_laplace",
        "DiscreteLaplace",
        _doc(_DISCRETE_LAPLACE),
        (_amount("scale", POSITIVE_NOISE), _SENSITIVITY),
    ),
    KindSpec(
        "discrete_gaussian",
        "DiscreteGaussian",
        _doc(_DISCRETE_GAUSSIAN),
        (_amount("sigma", POSITIVE_NOISE), _SENSITIVITY),
    ),
    KindSpec(
        "report_noisy_max",
        "ReportNoisyMax",
        _doc(_REPORT_NOISY_MAX),
        (
            Field("noise", "choice", choices=NOISES),
            _amount("scale", POSITIVE_NOISE),
            _SENSITIVITY,
            Field("monotonic", "boolean", required=False, default=False),
        ),
    ),
    KindSpec(
        "tree_aggregation",
        "TreeAggregation",
        _doc(_TREE_AGGREGATION),
        (
            _amount("noise_multiplier", POSITIVE_NOISE),
            _integer("step_counts", 1, MAX_STEPS, entries=MAX_TREES),
        ),
    ),
    KindSpec(
        "odp",
        "ODP",
        _doc(_ODP),
        (
            Field("cells", "cells", entries=MAX_CELLS, cell=CELL),
            _amount("delta", PROBABILITY, required=False, default=ZERO),
        ),
    ),
    KindSpec(
        "svt",
        "SVT",
        "Sparse vector technique with at most ``c`` ⊤ answers (cells ``tops=0..c``).",
        (
            _amount("epsilon1", PRIVACY),
            _amount("epsilon2", PRIVACY),
            _integer("c", 1, MAX_CELLS - 1),
        ),
    ),
    KindSpec(
        "ptr",
        "PTR",
        "Propose-test-release (cells ``value`` and ``bottom``).",
        (
            _amount("epsilon", PRIVACY),
            _amount("delta", PROBABILITY),
            _integer("tests", 1, 2, required=False, default=1),
        ),
    ),
    KindSpec(
        "iterative",
        "Iterative",
        "Iterative mechanism with early stopping (cells ``stop=k``).",
        (
            _amount("step_epsilon", PRIVACY),
            _amount("step_delta", PROBABILITY),
            _integer("stopping_points", 1, MAX_STEPS, entries=MAX_CELLS, item="stopping_point"),
        ),
    ),
    KindSpec(
        "tested_release",
        "TestedRelease",
        "Output perturbation with a DP quality test (cells ``released`` and ``bottom``).",
        (
            _amount("epsilon_release", PRIVACY),
            _amount("epsilon_bottom", PRIVACY),
            _amount("delta", PROBABILITY, required=False, default=ZERO),
        ),
    ),
    KindSpec(
        "subsampled",
        "Subsampled",
        _doc(_SUBSAMPLED),
        (
            Field("scheme", "choice", choices=SCHEMES),
            _amount("rate", RATE, required=False),
            _integer("m", 0, MAX_POPULATION, required=False),
            _integer("n", 1, MAX_POPULATION, required=False),
            Field("mechanism", "mechanism"),
        ),
        (
            Form(("scheme", "rate", "mechanism"), when=("scheme", "poisson")),
            Form(("scheme", "m", "n", "mechanism"), when=("scheme", "without_replacement")),
        ),
    ),
    KindSpec(
        "composed",
        "Composed",
        _doc(_COMPOSED),
        (
            Field("mechanisms", "mechanism", entries=MAX_COMPOSED_ITEMS, required=False),
            Field("mechanism", "mechanism", required=False),
            _integer("count", 1, MAX_COUNT, required=False),
        ),
        (Form(("mechanisms",)), Form(("mechanism", "count"))),
    ),
    KindSpec(
        "repeat_and_select",
        "RepeatAndSelect",
        _doc(_REPEAT_AND_SELECT),
        (
            Field("distribution", "choice", choices=RUN_DISTRIBUTIONS),
            _amount("mean", RUNS_MEAN),
            _amount("shape", PRIVACY, required=False),
            Field("mechanism", "mechanism"),
        ),
        (
            Form(("distribution", "mean", "mechanism"), when=("distribution", "poisson")),
            Form(
                ("distribution", "mean", "shape", "mechanism"),
                when=("distribution", "truncated_negative_binomial"),
            ),
        ),
    ),
    KindSpec(
        "dp_sgd",
        "DPSGD",
        _doc(_DP_SGD),
        (
            _amount("noise_multiplier", POSITIVE_NOISE),
            _amount("sample_rate", POSITIVE_RATE),
            _integer("steps", 1, MAX_STEPS),
            _amount("delta", POSITIVE_PROBABILITY, required=False),
        ),
    ),
    KindSpec(
        "mixture_of_gaussians",
        "MixtureOfGaussians",
        _doc(_MIXTURE_OF_GAUSSIANS),
        (
            _amount("standard_deviation", POSITIVE_NOISE),
            _amount("sensitivities", NOISE, entries=MAX_MIXTURE_COMPONENTS),
            _amount("sampling_probs", POSITIVE_RATE, entries=MAX_MIXTURE_COMPONENTS),
        ),
    ),
    KindSpec(
        "sampled_with_replacement",
        "SampledWithReplacement",
        _doc(_SAMPLED_WITH_REPLACEMENT),
        (
            _integer("m", 1, MAX_SAMPLE_SIZE),
            _integer("n", 1, MAX_POPULATION),
            Field("mechanism", "mechanism", inner=WITH_REPLACEMENT_INNER),
        ),
    ),
    KindSpec(
        "truncated_subsampled_gaussian",
        "TruncatedSubsampledGaussian",
        _doc(_TRUNCATED_SUBSAMPLED_GAUSSIAN),
        (
            _integer("dataset_size", 1, MAX_POPULATION),
            _amount("sampling_probability", POSITIVE_RATE),
            _integer("truncated_batch_size", 1, MAX_POPULATION),
            _amount("noise_multiplier", POSITIVE_NOISE),
        ),
    ),
)

#: Every kind's payload by its ``type``, in the order the document lists them.
TABLE: Final[dict[str, KindSpec]] = {spec.kind: spec for spec in _KINDS}


def spec(kind: str) -> KindSpec:
    """The table's entry of ``kind``."""
    return TABLE[kind]


# ---------------------------------------------------------------------------- reading a payload
def amount_in(
    params: Mapping[str, Any], name: str, domain: Domain, default: Any = None, *, low: bool = True
) -> Decimal:
    """``params[name]`` read as an amount in ``domain`` (``default`` when omitted, if given);
    ``low=False`` leaves a lower bound above 0 to the caller, who says it in its own words."""
    value = amount(
        params,
        name,
        default=default,
        upper=domain.high,
        positive=domain.low_open and domain.low == ZERO,
        below_one=domain.high_open and domain.high == ONE,
    )
    if (
        low
        and domain.low > ZERO
        and (value < domain.low or (domain.low_open and value == domain.low))
    ):
        sign = ">" if domain.low_open else "≥"
        raise DeclarationError(
            f"{name} must be {sign} {fmt(domain.low)}, got {fmt(value)}", field=name
        )
    return value


def _one(params: Mapping[str, Any], name: str, f: Field) -> Any:
    """The value of ``params[name]`` read as one value of ``f`` (present: checked before)."""
    if f.shape == "amount":
        assert f.domain is not None
        return amount_in(params, name, f.domain)
    if f.shape == "integer":
        assert f.bounds is not None
        return integer(params, name, lower=f.bounds[0], upper=f.bounds[1])
    if f.shape == "boolean":
        if not isinstance(params[name], bool):
            raise DeclarationError(f"{name} must be true or false", field=name)
        return params[name]
    if f.shape == "choice":
        if params[name] not in f.choices:
            words = " or ".join(f"'{c}'" for c in f.choices)
            raise DeclarationError(f"{name} must be {words}", field=name)
        return params[name]
    raise ValueError(f"{f.name}: a {f.shape} is read by its kind")  # pragma: no cover


def read(params: Mapping[str, Any], f: Field) -> Any:
    """The value of field ``f`` in ``params``, checked against the table (a list of values as a
    tuple); ``f.default`` when an optional field is omitted. Raises :class:`DeclarationError`
    naming the field."""
    if f.name not in params:
        if not f.required:
            return f.default
        if f.entries is None:
            raise DeclarationError(f"missing field '{f.name}'", field=f.name)
    if f.entries is not None:
        item = f.item or f.name
        return tuple(_one({item: v}, item, f) for v in entries(params, f.name, f.entries))
    return _one(params, f.name, f)


def read_kind(params: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """Every field of ``kind`` read from ``params`` (no unknown field allowed), by name, in the
    table's order: the payload of a kind whose fields are the dataclass's."""
    entry = TABLE[kind]
    only(params, [f.name for f in entry.fields], kind)
    return {f.name: read(params, f) for f in entry.fields}


def form_of(params: Mapping[str, Any], kind: str) -> Form:
    """The form ``params`` takes, chosen by its ``when`` field (whose words it must be), its
    fields checked with :func:`only`."""
    entry = TABLE[kind]
    forms = [form for form in entry.forms if form.when is not None]
    assert forms, kind
    name = forms[0].when[0] if forms[0].when else ""
    for form in forms:
        if form.when == (name, params.get(name)):
            only(params, form.fields, kind)
            return form
    words = " or ".join(f"'{c}'" for c in entry.field(name).choices)
    raise DeclarationError(f"{name} must be {words}", field=name)
