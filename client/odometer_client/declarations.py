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
import re
from collections.abc import Mapping
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from fractions import Fraction
from typing import Any

Number = Decimal | int | float | str


class Mechanism:
    """A declaration for the server to judge: ``type`` and its fields, read as attributes
    (``d.dp_sgd(1.1, 0.01, epochs=3).steps == 300``); :meth:`to_json` is what is sent."""

    __slots__ = ("_fields",)

    def __init__(self, **fields: Any) -> None:
        object.__setattr__(self, "_fields", {k: v for k, v in fields.items() if v is not None})

    def __getattr__(self, name: str) -> Any:
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a declaration is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mechanism) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._fields.items())
        return f"Mechanism({inner})"

    @property
    def type(self) -> str:
        return str(self._fields["type"])

    def to_json(self) -> dict[str, Any]:
        """The declaration as the server reads it (amounts as decimal strings)."""
        return {k: _json(v) for k, v in self._fields.items()}


def _json(value: Any) -> Any:
    if isinstance(value, Mechanism):
        return value.to_json()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return value


#: Decimal text as the server reads it (docs/http-api.md, *Numbers*), a sign allowed so that
#: a negative amount is refused by its domain, naming it; ``Decimal`` alone also reads
#: ``"1_0"`` as 10, ``" 1"``, other scripts' digits and ``"NaN"``.
_DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _d(value: Number) -> Decimal:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {value!r}")
        return Decimal(repr(value))
    if isinstance(value, str) and _DECIMAL_TEXT.fullmatch(value) is None:
        raise ValueError(
            f"not decimal text (ASCII digits with an optional fraction and exponent, such as "
            f"1, 0.5 or 1e-6): {value!r}"
        )
    return value if isinstance(value, Decimal) else Decimal(str(value))


def pure_dp(epsilon: Number) -> Mechanism:
    return Mechanism(type="pure_dp", epsilon=_d(epsilon))


def approx_dp(epsilon: Number, delta: Number) -> Mechanism:
    return Mechanism(type="approx_dp", epsilon=_d(epsilon), delta=_d(delta))


def zcdp(rho: Number, *, xi: Number | None = None, delta: Number | None = None) -> Mechanism:
    return Mechanism(
        type="zcdp",
        rho=_d(rho),
        xi=None if xi is None else _d(xi),
        delta=None if delta is None else _d(delta),
    )


def gaussian(sigma: Number, sensitivity: Number | None = None) -> Mechanism:
    """Gaussian noise of standard deviation σ on a query of ℓ₂ sensitivity Δ (default 1)."""
    return Mechanism(
        type="gaussian",
        sigma=_d(sigma),
        sensitivity=None if sensitivity is None else _d(sensitivity),
    )


def laplace(scale: Number, sensitivity: Number | None = None) -> Mechanism:
    """Laplace noise of scale b on a query of ℓ₁ sensitivity Δ (default 1): ε = Δ/b."""
    return Mechanism(
        type="laplace",
        scale=_d(scale),
        sensitivity=None if sensitivity is None else _d(sensitivity),
    )


def discrete_laplace(scale: Number, sensitivity: Number | None = None) -> Mechanism:
    """Discrete Laplace (two-sided geometric) noise P[x] ∝ exp(−|x|/t) of scale t on an
    integer-valued query of sensitivity Δ (default 1): ε = Δ/t."""
    return Mechanism(
        type="discrete_laplace",
        scale=_d(scale),
        sensitivity=None if sensitivity is None else _d(sensitivity),
    )


def discrete_gaussian(sigma: Number, sensitivity: Number | None = None) -> Mechanism:
    """Discrete Gaussian noise of parameter σ on an integer-valued query of ℓ₂ sensitivity Δ
    (default 1): Δ²/(2σ²)-zCDP (not accepted by ``gdp`` datasets)."""
    return Mechanism(
        type="discrete_gaussian",
        sigma=_d(sigma),
        sensitivity=None if sensitivity is None else _d(sensitivity),
    )


def report_noisy_max(
    noise: str, scale: Number, sensitivity: Number | None = None, *, monotonic: bool = False
) -> Mechanism:
    """The index of the largest score plus ``"gumbel"`` noise (the exponential mechanism) or
    ``"exponential"`` noise (permute-and-flip) of scale b, each score of sensitivity Δ (default
    1): ε = Δ/b when the scores are ``monotonic``, else 2Δ/b. Another noise is a
    ``ValueError`` here (the kind's guarantee is proven for these two only)."""
    if noise not in ("gumbel", "exponential"):
        raise ValueError(f"report_noisy_max: noise is 'gumbel' or 'exponential', got {noise!r}")
    return Mechanism(
        type="report_noisy_max",
        noise=noise,
        scale=_d(scale),
        sensitivity=None if sensitivity is None else _d(sensitivity),
        monotonic=monotonic,
    )


def tree_aggregation(noise_multiplier: Number, step_counts: int | list[int]) -> Mechanism:
    """DP-FTRL's single-epoch tree aggregation (dp_accounting's
    ``SingleEpochTreeAggregationDpEvent``): one tree per entry of ``step_counts`` (steps between
    restarts), node noise std = ``noise_multiplier`` × the sensitivity of one record's
    contribution to one leaf, each record in one leaf of all the trees. Charged as a Gaussian
    of sensitivity √⌈log₂(max steps + 1)⌉."""
    counts = [step_counts] if isinstance(step_counts, int) else list(step_counts)
    return Mechanism(
        type="tree_aggregation", noise_multiplier=_d(noise_multiplier), step_counts=counts
    )


def repeat_and_select(mechanism: Mechanism, mean: Number, shape: Number | str) -> Mechanism:
    """Private selection (hyperparameter tuning): ``mechanism`` run K times, only the best
    output released, E[K] = ``mean`` > 1 (dp_accounting's ``RepeatAndSelectDpEvent``). ``shape``
    is η ≥ 0 of the truncated negative binomial (0: logarithmic, 1: geometric), or
    ``"poisson"`` (or ``math.inf``, dp_accounting's convention) for a Poisson number of runs.
    A mean of 1 or less is a ``ValueError`` here (no selection: declare the mechanism itself)."""
    if _d(mean) <= 1:
        raise ValueError(f"repeat_and_select: the mean number of runs must be > 1, got {mean!r}")
    if shape == "poisson" or (isinstance(shape, float) and math.isinf(shape) and shape > 0):
        return Mechanism(
            type="repeat_and_select", distribution="poisson", mean=_d(mean), mechanism=mechanism
        )
    try:
        eta = _d(shape)
    except (ArithmeticError, ValueError):  # not decimal text, or not a number
        raise ValueError(f"shape must be a number ≥ 0 or 'poisson', got {shape!r}") from None
    return Mechanism(
        type="repeat_and_select",
        distribution="truncated_negative_binomial",
        mean=_d(mean),
        shape=eta,
        mechanism=mechanism,
    )


def odp(cells: Mapping[str, Number], delta: Number | None = None) -> Mechanism:
    """An output-dependent partition: cell name → ε of outputs in that cell, and one δ."""
    return Mechanism(
        type="odp",
        cells=[{"name": name, "epsilon": _d(eps)} for name, eps in cells.items()],
        delta=None if delta is None else _d(delta),
    )


def svt(epsilon1: Number, epsilon2: Number, c: int) -> Mechanism:
    """Sparse vector with at most ``c`` ⊤ answers; settle to cell ``f"tops={k}"`` where k
    is the number of ⊤ answers released (cell ε = ε₁ + (k/c)·ε₂)."""
    return Mechanism(type="svt", epsilon1=_d(epsilon1), epsilon2=_d(epsilon2), c=c)


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
        return Mechanism(type="subsampled", scheme="poisson", rate=_d(rate), mechanism=mechanism)
    assert m_of is not None
    return Mechanism(
        type="subsampled",
        scheme="without_replacement",
        m=m_of[0],
        n=m_of[1],
        mechanism=mechanism,
    )


def composed(*mechanisms: Mechanism, count: int | None = None) -> Mechanism:
    """Non-adaptive composition inside one invocation: several mechanisms, or one mechanism
    repeated ``count`` times."""
    if count is not None:
        if len(mechanisms) != 1:
            raise ValueError("count repeats exactly one mechanism")
        return Mechanism(type="composed", mechanism=mechanisms[0], count=count)
    if not mechanisms:
        raise ValueError("compose at least one mechanism")
    return Mechanism(type="composed", mechanisms=list(mechanisms))


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
    return Mechanism(
        type="dp_sgd",
        noise_multiplier=_d(noise_multiplier),
        sample_rate=q,
        steps=steps,
        delta=None if delta is None else _d(delta),
    )


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
    return Mechanism(
        type="mixture_of_gaussians",
        standard_deviation=_d(standard_deviation),
        sensitivities=[_d(c) for c in sensitivities],
        sampling_probs=probs,
    )


def sampled_with_replacement(mechanism: Mechanism, *, m: int, n: int) -> Mechanism:
    """``mechanism`` on m records drawn uniformly with replacement out of n (dp_accounting's
    ``SampledWithReplacementDpEvent(n, m, event)``; replace_one datasets): a ``gaussian`` or an
    ε-DP mechanism, its sensitivity or ε for one substitution in the sample."""
    return Mechanism(type="sampled_with_replacement", m=m, n=n, mechanism=mechanism)


def truncated_subsampled_gaussian(
    dataset_size: int,
    sampling_probability: Number,
    truncated_batch_size: int,
    noise_multiplier: Number,
) -> Mechanism:
    """Poisson sampling of rate q from ``dataset_size`` records, batches truncated to
    ``truncated_batch_size`` records, then Gaussian noise of ``noise_multiplier`` × the
    clipping norm (dp_accounting's ``TruncatedSubsampledGaussianDpEvent``, the same argument
    order; add_remove datasets)."""
    return Mechanism(
        type="truncated_subsampled_gaussian",
        dataset_size=dataset_size,
        sampling_probability=_d(sampling_probability),
        truncated_batch_size=truncated_batch_size,
        noise_multiplier=_d(noise_multiplier),
    )


# ---------------------------------------------------------------------------- rounding
#: 17 significant digits rounded up / down: binary floats read towards less privacy.
UP = Context(prec=17, rounding=ROUND_CEILING)
DOWN = Context(prec=17, rounding=ROUND_FLOOR)
