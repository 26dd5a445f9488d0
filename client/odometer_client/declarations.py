"""Declarations from what analysts already have.

Every helper returns a :class:`Mechanism`: the declaration's fields as Python values (exact
``Decimal`` amounts, nested mechanisms), ready for ``client.register`` / ``client.reserve``.
The server judges the declaration (a 422 naming the field and the rule, ``InvalidRequest``);
the helpers refuse what they cannot read as an exact amount (``ValueError``).

Numbers may be ``Decimal``, ``int``, decimal text or ``float`` (read through ``repr``, as the
server does). The adapters (:mod:`odometer_client.adapters`) read the binary floats of other
libraries with *directed* rounding (:data:`UP`, :data:`DOWN`) so that a declaration is never
less private than what the library states.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from fractions import Fraction

from odometer_client import _declared as _kinds
from odometer_client._declared import (
    approx_dp,
    discrete_gaussian,
    discrete_laplace,
    exponential,
    gaussian,
    gdp,
    iterative,
    laplace,
    mcdp,
    ptr,
    pure_dp,
    randomized_response,
    rdp,
    svt,
    tested_release,
    truncated_subsampled_gaussian,
    zcdp,
)
from odometer_client._mechanism import Mechanism, Number
from odometer_client._mechanism import exact as _d

__all__ = [
    "DOWN",
    "UP",
    "Mechanism",
    "Number",
    "approx_dp",
    "composed",
    "discrete_gaussian",
    "discrete_laplace",
    "dp_sgd",
    "exponential",
    "gaussian",
    "gdp",
    "iterative",
    "laplace",
    "mcdp",
    "mixture_of_gaussians",
    "odp",
    "ptr",
    "pure_dp",
    "randomized_response",
    "rdp",
    "repeat_and_select",
    "report_noisy_max",
    "sampled_with_replacement",
    "subsampled",
    "svt",
    "tested_release",
    "tree_aggregation",
    "truncated_subsampled_gaussian",
    "zcdp",
]


def report_noisy_max(
    noise: str, scale: Number, sensitivity: Number | None = None, *, monotonic: bool = False
) -> Mechanism:
    """The index of the largest score plus ``"gumbel"`` noise (the exponential mechanism) or
    ``"exponential"`` noise (permute-and-flip) of scale b, each score of sensitivity Δ (default
    1): ε = Δ/b when the scores are ``monotonic``, else 2Δ/b. Another noise is a
    ``ValueError`` here (the kind's guarantee is proven for these two only)."""
    return _kinds.report_noisy_max(noise, scale, sensitivity, monotonic)


def tree_aggregation(noise_multiplier: Number, step_counts: int | list[int]) -> Mechanism:
    """DP-FTRL's single-epoch tree aggregation (dp_accounting's
    ``SingleEpochTreeAggregationDpEvent``): one tree per entry of ``step_counts`` (steps between
    restarts), node noise std = ``noise_multiplier`` × the sensitivity of one record's
    contribution to one leaf, each record in one leaf of all the trees. Charged as a Gaussian
    of sensitivity √⌈log₂(max steps + 1)⌉."""
    counts = [step_counts] if isinstance(step_counts, int) else list(step_counts)
    return _kinds.tree_aggregation(noise_multiplier, counts)


def repeat_and_select(mechanism: Mechanism, mean: Number, shape: Number | str) -> Mechanism:
    """Private selection (hyperparameter tuning): ``mechanism`` run K times, only the best
    output released, E[K] = ``mean`` > 1 (dp_accounting's ``RepeatAndSelectDpEvent``). ``shape``
    is η ≥ 0 of the truncated negative binomial (0: logarithmic, 1: geometric), or
    ``"poisson"`` (or ``math.inf``, dp_accounting's convention) for a Poisson number of runs.
    A mean of 1 or less is a ``ValueError`` here (no selection: declare the mechanism itself)."""
    if _d(mean) <= 1:
        raise ValueError(f"repeat_and_select: the mean number of runs must be > 1, got {mean!r}")
    if shape == "poisson" or (isinstance(shape, float) and math.isinf(shape) and shape > 0):
        return _kinds.repeat_and_select("poisson", mean, mechanism)
    try:
        eta = _d(shape)
    except (ArithmeticError, ValueError):  # not decimal text, or not a number
        raise ValueError(f"shape must be a number ≥ 0 or 'poisson', got {shape!r}") from None
    return _kinds.repeat_and_select("truncated_negative_binomial", mean, mechanism, shape=eta)


def odp(cells: Mapping[str, Number], delta: Number | None = None) -> Mechanism:
    """An output-dependent partition: cell name → ε of outputs in that cell, and one δ."""
    return _kinds.odp([{"name": name, "epsilon": eps} for name, eps in cells.items()], delta)


def subsampled(
    mechanism: Mechanism,
    *,
    rate: Number | None = None,
    m_of: tuple[int, int] | None = None,
) -> Mechanism:
    """``mechanism`` on a Poisson subsample of rate q (``rate=q``; add/remove datasets) or on
    m records drawn without replacement out of n (``m_of=(m, n)``; replace-one datasets)."""
    if (rate is None) == (m_of is None):
        raise ValueError("give exactly one of rate (Poisson) or m_of=(m, n) (without replacement)")
    if rate is not None:
        return _kinds.subsampled("poisson", mechanism, rate=rate)
    assert m_of is not None
    return _kinds.subsampled("without_replacement", mechanism, m=m_of[0], n=m_of[1])


def composed(*mechanisms: Mechanism, count: int | None = None) -> Mechanism:
    """Non-adaptive composition inside one invocation: several mechanisms, or one mechanism
    repeated ``count`` times."""
    if count is not None:
        if len(mechanisms) != 1:
            raise ValueError("count repeats exactly one mechanism")
        return _kinds.composed(mechanism=mechanisms[0], count=count)
    if not mechanisms:
        raise ValueError("compose at least one mechanism")
    return _kinds.composed(mechanisms=mechanisms)


def dp_sgd(
    noise_multiplier: Number,
    sample_rate: Number | None = None,
    steps: int | None = None,
    epochs: Number | None = None,
    dataset_size: int | None = None,
    batch_size: int | None = None,
    delta: Number | None = None,
) -> Mechanism:
    """DP-SGD as Opacus users state it.

    - ``noise_multiplier`` σ: noise std divided by the clipping norm (Opacus
      ``noise_multiplier``);
    - ``sample_rate`` q: the Poisson sampling rate; if omitted, ``batch_size / dataset_size``
      (Opacus ``sample_rate = 1 / len(data_loader)`` for an expected batch size);
    - ``steps``: the number of noisy steps; if omitted, ``epochs × ⌈1/q⌉`` (with dataset and
      batch size: ``epochs × ⌈dataset_size / batch_size⌉``), rounded **up** to a whole step —
      never fewer steps than Opacus' ``int(epochs / sample_rate)``;
    - ``delta``: the δ at which ``basic`` mode converts the run (ignored by RDP-based modes).
    """
    if sample_rate is None:
        if dataset_size is None or batch_size is None:
            raise ValueError("give sample_rate, or both dataset_size and batch_size")
        if not 0 < batch_size <= dataset_size:
            raise ValueError("need 0 < batch_size ≤ dataset_size")
        q = UP.divide(Decimal(batch_size), Decimal(dataset_size))  # rounded up
    else:
        q = _d(sample_rate)
    if steps is None:
        if epochs is None:
            raise ValueError("give steps, or epochs (steps = epochs × ⌈1/sample_rate⌉)")
        if dataset_size is not None and batch_size is not None:
            per_epoch = -(-dataset_size // batch_size)
        else:
            if q <= 0:
                raise ValueError("sample_rate must be > 0")
            per_epoch = math.ceil(Decimal(1) / q)
        steps = math.ceil(_d(epochs) * per_epoch)
    elif epochs is not None:
        raise ValueError("give steps or epochs, not both")
    return _kinds.dp_sgd(noise_multiplier, q, steps, delta)


def mixture_of_gaussians(
    standard_deviation: Number, sensitivities: list[Number], sampling_probs: list[Number]
) -> Mechanism:
    """A mixture of Gaussians (dp_accounting's ``MixtureOfGaussiansDpEvent``; amplified banded
    matrix mechanisms): N(0, σ²) against Σ_i p_i N(c_i, σ²), σ = ``standard_deviation`` > 0,
    c_i ≥ 0 the ``sensitivities`` (norms), p_i the ``sampling_probs``, summing to exactly 1 as
    decimals (add_remove datasets)."""
    probs = [_d(p) for p in sampling_probs]
    if sum(Fraction(p) for p in probs) != 1:
        raise ValueError(f"sampling_probs must sum to exactly 1, got {sum(probs)}")
    return _kinds.mixture_of_gaussians(standard_deviation, sensitivities, probs)


def sampled_with_replacement(mechanism: Mechanism, *, m: int, n: int) -> Mechanism:
    """``mechanism`` on m records drawn uniformly with replacement out of n (dp_accounting's
    ``SampledWithReplacementDpEvent(n, m, event)``; replace_one datasets): a ``gaussian`` or an
    ε-DP mechanism, its sensitivity or ε for one substitution in the sample."""
    return _kinds.sampled_with_replacement(m, n, mechanism)


# ---------------------------------------------------------------------------- rounding
#: 17 significant digits rounded up / down: binary floats read towards less privacy.
UP = Context(prec=17, rounding=ROUND_CEILING)
DOWN = Context(prec=17, rounding=ROUND_FLOOR)
