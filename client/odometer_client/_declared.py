# Generated from the server's OpenAPI document (openapi/openapi.json) by client/generate.py:
# do not edit; a kind's fields are said once, in the accounting core's field table.
"""One declaration helper per kind of the server's document: the kind's fields as parameters
(required ones first, in the document's order; optional ones default to absent), amounts read
as exact decimals (:func:`~odometer_client._mechanism.exact`). The public helpers are
:mod:`odometer_client.declarations`, which adds friendlier ones for some kinds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from odometer_client._mechanism import Mechanism, Number, exact, exact_all, one_of


def _cell(cell: Mapping[str, Any]) -> dict[str, Any]:
    """One ODP cell {name, epsilon}, as the server reads it."""
    return {"name": cell["name"], "epsilon": exact(cell["epsilon"])}


def approx_dp(epsilon: Number, delta: Number) -> Mechanism:
    """(ε, δ)-DP.

    - ``epsilon``: 0 ≤ value ≤ 10⁶
    - ``delta``: 0 ≤ δ < 1
    """
    return Mechanism(type="approx_dp", epsilon=exact(epsilon), delta=exact(delta))


def composed(
    mechanisms: Sequence[Mechanism] | None = None,
    mechanism: Mechanism | None = None,
    count: int | None = None,
) -> Mechanism:
    """Non-adaptive composition inside one invocation: ``mechanisms`` (a list), or one
    ``mechanism`` repeated ``count`` times.

    Work limit: the subsampled-Gaussian items (``dp_sgd``, ``subsampled`` Gaussians, at any
    depth) are charged through one RDP series per distinct (noise multiplier, sample rate);
    a declaration whose series would evaluate more than 3,000,000 terms on the dataset's grid
    (about half a second of CPU) is refused with 422 ``InvalidDeclaration``, nothing charged
    (merge segments that share parameters, or split the run). In ``basic`` mode up to four of
    them get their own PLD; above that they are charged by their RDP bounds. ODP partitions
    are not composed (declare them as separate invocations).

    - ``mechanisms``: 1 to 256 mechanisms (optional)
    - ``mechanism``: a mechanism (optional)
    - ``count``: an integer in [1, 10000000] (optional)
    """
    return Mechanism(
        type="composed",
        mechanisms=None if mechanisms is None else list(mechanisms),
        mechanism=mechanism,
        count=count,
    )


def discrete_gaussian(sigma: Number, sensitivity: Number | None = None) -> Mechanism:
    """Discrete Gaussian noise on an integer-valued query: σ > 0, ℓ₂ sensitivity Δ (default 1);
    ρ = Δ²/(2σ²)-zCDP (Canonne–Kamath–Steinke 2020). Not accepted in mode ``gdp``.

    - ``sigma``: 0 < value ≤ 10¹²
    - ``sensitivity``: 0 ≤ value ≤ 10¹² (optional)
    """
    return Mechanism(
        type="discrete_gaussian",
        sigma=exact(sigma),
        sensitivity=None if sensitivity is None else exact(sensitivity),
    )


def discrete_laplace(scale: Number, sensitivity: Number | None = None) -> Mechanism:
    """Discrete Laplace (two-sided geometric) noise P[x] ∝ exp(−|x|/t) on an integer-valued
    query: scale t > 0, sensitivity Δ (default 1); ε = Δ/t.

    - ``scale``: 0 < value ≤ 10¹²
    - ``sensitivity``: 0 ≤ value ≤ 10¹² (optional)
    """
    return Mechanism(
        type="discrete_laplace",
        scale=exact(scale),
        sensitivity=None if sensitivity is None else exact(sensitivity),
    )


def dp_sgd(
    noise_multiplier: Number, sample_rate: Number, steps: int, delta: Number | None = None
) -> Mechanism:
    """DP-SGD: ``steps`` Poisson-subsampled Gaussian steps (rate q, noise multiplier σ).

    In ``basic`` mode the run is charged by PLD accounting on a grid bounded to about 0.6 s of
    CPU (coarser, still an upper bound, where the default grid would need more); where even
    that does not fit, by its RDP bound. A run whose ε is far beyond the remaining budget is
    refused on a cheap lower bound, named in the 409 ("the charge is at least …").

    - ``noise_multiplier``: 0 < value ≤ 10¹²
    - ``sample_rate``: 0 < value ≤ 1
    - ``steps``: an integer in [1, 10000000]
    - ``delta``: 0 < δ < 1 (optional)
    """
    return Mechanism(
        type="dp_sgd",
        noise_multiplier=exact(noise_multiplier),
        sample_rate=exact(sample_rate),
        steps=steps,
        delta=None if delta is None else exact(delta),
    )


def exponential(epsilon: Number) -> Mechanism:
    """Exponential mechanism with parameter ε.

    - ``epsilon``: 0 ≤ value ≤ 10⁶
    """
    return Mechanism(type="exponential", epsilon=exact(epsilon))


def gaussian(sigma: Number, sensitivity: Number | None = None) -> Mechanism:
    """Gaussian mechanism: noise std σ, ℓ₂ sensitivity Δ (default 1).

    - ``sigma``: 0 ≤ value ≤ 10¹²
    - ``sensitivity``: 0 ≤ value ≤ 10¹² (optional)
    """
    return Mechanism(
        type="gaussian",
        sigma=exact(sigma),
        sensitivity=None if sensitivity is None else exact(sensitivity),
    )


def gdp(mu: Number) -> Mechanism:
    """μ-Gaussian DP.

    - ``mu``: 0 ≤ value ≤ 10⁶
    """
    return Mechanism(type="gdp", mu=exact(mu))


def iterative(
    step_epsilon: Number, step_delta: Number, stopping_points: Sequence[int]
) -> Mechanism:
    """Iterative mechanism with early stopping (cells ``stop=k``).

    - ``step_epsilon``: 0 ≤ value ≤ 10⁶
    - ``step_delta``: 0 ≤ δ < 1
    - ``stopping_points``: 1 to 1024 values, each an integer in [1, 10000000]
    """
    return Mechanism(
        type="iterative",
        step_epsilon=exact(step_epsilon),
        step_delta=exact(step_delta),
        stopping_points=list(stopping_points),
    )


def laplace(scale: Number, sensitivity: Number | None = None) -> Mechanism:
    """Laplace mechanism: scale b, ℓ₁ sensitivity Δ (default 1).

    - ``scale``: 0 ≤ value ≤ 10¹²
    - ``sensitivity``: 0 ≤ value ≤ 10¹² (optional)
    """
    return Mechanism(
        type="laplace",
        scale=exact(scale),
        sensitivity=None if sensitivity is None else exact(sensitivity),
    )


def mcdp(mu: Number, tau: Number) -> Mechanism:
    """(μ, τ)-mean-concentrated DP.

    - ``mu``: 0 ≤ value ≤ 10⁶
    - ``tau``: 0 ≤ value ≤ 10⁶
    """
    return Mechanism(type="mcdp", mu=exact(mu), tau=exact(tau))


def mixture_of_gaussians(
    standard_deviation: Number, sensitivities: Sequence[Number], sampling_probs: Sequence[Number]
) -> Mechanism:
    """A mixture of Gaussians (amplified banded matrix mechanisms; Choquette-Choo–Ganesh–
    Steinke–Thakurta 2023): N(0, σ²) against Σ_i p_i N(c_i, σ²) — ``standard_deviation`` σ > 0,
    ``sensitivities`` c_i ≥ 0 (norms), ``sampling_probs`` p_i in (0, 1] summing to exactly 1, as
    many, at most 256. Datasets with relation ``add_remove``. Accounted in ``basic`` (the exact
    (ε, δ) of both directions at the conversion δ) and ``rdp`` (a Rényi bound for both
    directions); refused by ``zcdp`` and ``gdp``.

    - ``standard_deviation``: 0 < value ≤ 10¹²
    - ``sensitivities``: 1 to 256 values, each 0 ≤ value ≤ 10¹²
    - ``sampling_probs``: 1 to 256 values, each 0 < value ≤ 1
    """
    return Mechanism(
        type="mixture_of_gaussians",
        standard_deviation=exact(standard_deviation),
        sensitivities=exact_all(sensitivities),
        sampling_probs=exact_all(sampling_probs),
    )


def odp(cells: Sequence[Mapping[str, Any]], delta: Number | None = None) -> Mechanism:
    """An ODP partition: named cells with ε_k and one δ (reserved at the worst cell in
    ``basic`` mode, settled to the released cell).

    - ``cells``: 1 to 1024 cells {name, epsilon}
    - ``delta``: 0 ≤ δ < 1 (optional)
    """
    return Mechanism(
        type="odp", cells=[_cell(c) for c in cells], delta=None if delta is None else exact(delta)
    )


def ptr(epsilon: Number, delta: Number, tests: int | None = None) -> Mechanism:
    """Propose-test-release (cells ``value`` and ``bottom``).

    - ``epsilon``: 0 ≤ value ≤ 10⁶
    - ``delta``: 0 ≤ δ < 1
    - ``tests``: an integer in [1, 2] (optional)
    """
    return Mechanism(type="ptr", epsilon=exact(epsilon), delta=exact(delta), tests=tests)


def pure_dp(epsilon: Number) -> Mechanism:
    """ε-DP.

    - ``epsilon``: 0 ≤ value ≤ 10⁶
    """
    return Mechanism(type="pure_dp", epsilon=exact(epsilon))


def randomized_response(epsilon: Number) -> Mechanism:
    """Binary randomized response with parameter ε.

    - ``epsilon``: 0 ≤ value ≤ 10⁶
    """
    return Mechanism(type="randomized_response", epsilon=exact(epsilon))


def rdp(orders: Sequence[Number], values: Sequence[Number]) -> Mechanism:
    """An RDP curve known at finitely many orders (orders > 1, strictly increasing).

    - ``orders``: 1 to 256 values, each 1 < α ≤ 10⁶
    - ``values``: 1 to 256 values, each 0 ≤ value ≤ 10⁶
    """
    return Mechanism(type="rdp", orders=exact_all(orders), values=exact_all(values))


def repeat_and_select(
    distribution: str, mean: Number, mechanism: Mechanism, shape: Number | None = None
) -> Mechanism:
    """Private selection (hyperparameter tuning): ``mechanism`` run K times, only the best
    output released; K ~ ``poisson`` with mean ``mean``, or the ``truncated_negative_binomial``
    of ``shape`` η ≥ 0 (0: logarithmic, 1: geometric) with mean ``mean`` (Papernot–Steinke
    2022). Accounted in modes ``rdp`` and ``basic`` (an ε-DP mechanism under a truncated
    negative binomial: (2 + η)ε; otherwise the Rényi curve converted), refused by ``zcdp`` and
    ``gdp``; the inner mechanism declares no δ and is not an ODP partition.

    - ``distribution``: 'poisson' or 'truncated_negative_binomial'
    - ``mean``: 1 < E[K] ≤ 10⁶
    - ``mechanism``: a mechanism
    - ``shape``: 0 ≤ value ≤ 10⁶ (optional)
    """
    return Mechanism(
        type="repeat_and_select",
        distribution=one_of(
            "repeat_and_select",
            "distribution",
            distribution,
            ("poisson", "truncated_negative_binomial"),
        ),
        mean=exact(mean),
        mechanism=mechanism,
        shape=None if shape is None else exact(shape),
    )


def report_noisy_max(
    noise: str, scale: Number, sensitivity: Number | None = None, monotonic: bool | None = None
) -> Mechanism:
    """Report noisy max with ``gumbel`` noise (the exponential mechanism) or ``exponential``
    noise (permute-and-flip, charged as pure ε-DP), scale b > 0, score sensitivity Δ (default
    1): ε = Δ/b if ``monotonic`` (default false), else 2Δ/b.

    - ``noise``: 'gumbel' or 'exponential'
    - ``scale``: 0 < value ≤ 10¹²
    - ``sensitivity``: 0 ≤ value ≤ 10¹² (optional)
    - ``monotonic``: true or false (optional)
    """
    return Mechanism(
        type="report_noisy_max",
        noise=one_of("report_noisy_max", "noise", noise, ("gumbel", "exponential")),
        scale=exact(scale),
        sensitivity=None if sensitivity is None else exact(sensitivity),
        monotonic=monotonic,
    )


def sampled_with_replacement(m: int, n: int, mechanism: Mechanism) -> Mechanism:
    """``mechanism`` on ``m`` records drawn uniformly with replacement out of ``n``
    (Balle–Barthe–Gaboardi 2018 Thm 10): datasets with relation ``replace_one``; the inner
    mechanism is ``gaussian`` or an ε-DP kind (sensitivity or ε for one substitution in the
    sample). Accounted in ``basic`` and ``rdp`` (its Rényi bound sums m + 1 terms per order,
    within the work limit of a charge); refused by ``zcdp`` and ``gdp``.

    - ``m``: an integer in [1, 1000000]
    - ``n``: an integer in [1, 1000000000000]
    - ``mechanism``: a mechanism
    """
    return Mechanism(type="sampled_with_replacement", m=m, n=n, mechanism=mechanism)


def subsampled(
    scheme: str,
    mechanism: Mechanism,
    rate: Number | None = None,
    m: int | None = None,
    n: int | None = None,
) -> Mechanism:
    """An inner mechanism on a random subsample: ``poisson`` (``rate``) needs relation
    ``add_remove``; ``without_replacement`` (``m`` of ``n``) needs ``replace_one``. The inner
    mechanism is not an ODP partition.

    - ``scheme``: 'poisson' or 'without_replacement'
    - ``mechanism``: a mechanism
    - ``rate``: 0 ≤ value ≤ 1 (optional)
    - ``m``: an integer in [0, 1000000000000] (optional)
    - ``n``: an integer in [1, 1000000000000] (optional)
    """
    return Mechanism(
        type="subsampled",
        scheme=one_of("subsampled", "scheme", scheme, ("poisson", "without_replacement")),
        mechanism=mechanism,
        rate=None if rate is None else exact(rate),
        m=m,
        n=n,
    )


def svt(epsilon1: Number, epsilon2: Number, c: int) -> Mechanism:
    """Sparse vector technique with at most ``c`` ⊤ answers (cells ``tops=0..c``).

    - ``epsilon1``: 0 ≤ value ≤ 10⁶
    - ``epsilon2``: 0 ≤ value ≤ 10⁶
    - ``c``: an integer in [1, 1023]
    """
    return Mechanism(type="svt", epsilon1=exact(epsilon1), epsilon2=exact(epsilon2), c=c)


def tested_release(
    epsilon_release: Number, epsilon_bottom: Number, delta: Number | None = None
) -> Mechanism:
    """Output perturbation with a DP quality test (cells ``released`` and ``bottom``).

    - ``epsilon_release``: 0 ≤ value ≤ 10⁶
    - ``epsilon_bottom``: 0 ≤ value ≤ 10⁶
    - ``delta``: 0 ≤ δ < 1 (optional)
    """
    return Mechanism(
        type="tested_release",
        epsilon_release=exact(epsilon_release),
        epsilon_bottom=exact(epsilon_bottom),
        delta=None if delta is None else exact(delta),
    )


def tree_aggregation(noise_multiplier: Number, step_counts: Sequence[int]) -> Mechanism:
    """DP-FTRL's single-epoch tree aggregation (Kairouz et al. 2021): one tree of noisy partial
    sums per entry of ``step_counts`` (steps per tree), noise std ``noise_multiplier`` times the
    sensitivity of one record's contribution to one leaf, each record in one leaf of all the
    trees. Charged as ``gaussian`` with σ = noise_multiplier and sensitivity √d,
    d = ⌈log₂(max step_counts + 1)⌉ (rounded up), in every mode.

    - ``noise_multiplier``: 0 < value ≤ 10¹²
    - ``step_counts``: 1 to 1024 values, each an integer in [1, 10000000]
    """
    return Mechanism(
        type="tree_aggregation",
        noise_multiplier=exact(noise_multiplier),
        step_counts=list(step_counts),
    )


def truncated_subsampled_gaussian(
    dataset_size: int,
    sampling_probability: Number,
    truncated_batch_size: int,
    noise_multiplier: Number,
) -> Mechanism:
    """Poisson sampling of rate ``sampling_probability`` from ``dataset_size`` records, the
    batch truncated to ``truncated_batch_size`` records by a random subset, then the Gaussian
    mechanism of ``noise_multiplier`` (noise std / clipping norm). Datasets with relation
    ``add_remove``. Accounted in ``basic`` (PLD, on a grid bounded as DP-SGD's) and ``rdp``;
    refused by ``zcdp`` and ``gdp``.

    - ``dataset_size``: an integer in [1, 1000000000000]
    - ``sampling_probability``: 0 < value ≤ 1
    - ``truncated_batch_size``: an integer in [1, 1000000000000]
    - ``noise_multiplier``: 0 < value ≤ 10¹²
    """
    return Mechanism(
        type="truncated_subsampled_gaussian",
        dataset_size=dataset_size,
        sampling_probability=exact(sampling_probability),
        truncated_batch_size=truncated_batch_size,
        noise_multiplier=exact(noise_multiplier),
    )


def zcdp(rho: Number, xi: Number | None = None, delta: Number | None = None) -> Mechanism:
    """(ξ, ρ)-zCDP, δ-approximate when δ > 0.

    - ``rho``: 0 ≤ value ≤ 10⁶
    - ``xi``: 0 ≤ value ≤ 10⁶ (optional)
    - ``delta``: 0 ≤ δ < 1 (optional)
    """
    return Mechanism(
        type="zcdp",
        rho=exact(rho),
        xi=None if xi is None else exact(xi),
        delta=None if delta is None else exact(delta),
    )
