"""Declarations from what analysts already have.

Every helper returns a :class:`Mechanism`: the declaration's fields as Python values (exact
``Decimal`` amounts, nested mechanisms), checked on construction against the server's contract
(the committed OpenAPI document, :mod:`odometer_client.contract`), ready for
``client.register`` / ``client.reserve``.

Numbers may be ``Decimal``, ``int``, decimal text or ``float`` (read through ``repr``, as the
server does). :func:`from_dp_event` is the exception: a ``dp_accounting`` event holds binary
floats, converted with *directed* rounding so the declaration is never less private than the
event (noise scales round down, rates and privacy parameters round up; 17 digits).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from typing import Any

from odometer_client import contract

Number = Decimal | int | float | str


class Mechanism:
    """A declaration the server accepts: ``type`` and its fields, read as attributes
    (``d.dp_sgd(1.1, 0.01, epochs=3).steps == 300``); :meth:`to_json` is what is sent."""

    __slots__ = ("_fields",)

    def __init__(self, **fields: Any) -> None:
        object.__setattr__(self, "_fields", {k: v for k, v in fields.items() if v is not None})
        problems = contract.check(contract.MECHANISM, self.to_json())
        if problems:
            raise ValueError(f"not a valid {fields.get('type')} declaration: {'; '.join(problems)}")

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


def _d(value: Number) -> Decimal:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {value!r}")
        return Decimal(repr(value))
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
        q = _UP.divide(Decimal(batch_size), Decimal(dataset_size))  # rounded up
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


# ---------------------------------------------------------------------------- dp_accounting
_UP = Context(prec=17, rounding=ROUND_CEILING)
_DOWN = Context(prec=17, rounding=ROUND_FLOOR)


def _float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number, got {type(value).__name__}")
    f = float(value)
    if not math.isfinite(f):
        raise ValueError(f"{what} must be finite, got {f!r}")
    return f


def _up(value: Any, what: str) -> Decimal:
    """At least ``value`` (exact binary value rounded up to 17 digits)."""
    return _UP.create_decimal_from_float(_float(value, what)).normalize(_UP)


def _down(value: Any, what: str) -> Decimal:
    """At most ``value`` (exact binary value rounded down to 17 digits)."""
    return _DOWN.create_decimal_from_float(_float(value, what)).normalize(_DOWN)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return value


def _events() -> Any:
    try:
        from dp_accounting import dp_event
    except ImportError as exc:  # pragma: no cover - dp-accounting is a dependency
        raise ValueError("from_dp_event needs the dp-accounting package") from exc
    return dp_event


def from_dp_event(event: object) -> Mechanism:
    """Convert a ``dp_accounting`` ``DpEvent`` into a declaration, through an explicit
    allow-list of event classes (exact class match; nothing is looked up by name):

    ======================================  =============================================
    ``GaussianDpEvent(σ)``                  ``gaussian`` σ, sensitivity 1
    ``LaplaceDpEvent(b)``                   ``laplace`` scale b, sensitivity 1
    ``PoissonSampledDpEvent(q, e)``         ``subsampled`` poisson, rate q
    ``SampledWithoutReplacementDpEvent``    ``subsampled`` without_replacement, m of n
    ``SelfComposedDpEvent(e, k)``           ``composed`` e × k (``dp_sgd`` when e is a
                                            Poisson-subsampled Gaussian: the tight curve)
    ``ComposedDpEvent([...])``              ``composed`` list (no-ops dropped)
    ``ZCDpEvent(ρ, ξ)``                     ``zcdp`` ρ, ξ
    ``RandomizedResponseDpEvent(p, k)``     ε = ln(1 + k(1−p)/p): ``randomized_response``
                                            for k = 2, ``pure_dp`` otherwise (ε rounded up)
    ``NoOpDpEvent``                         ``pure_dp`` ε = 0 (dropped inside compositions)
    ======================================  =============================================

    Anything else — ``NonPrivateDpEvent``, ``UnsupportedDpEvent``, events of other libraries,
    subclasses — raises ``ValueError``.
    """
    out = _convert(event, _events(), depth=0)
    return out if out is not None else pure_dp(0)


def _convert(event: Any, ev: Any, depth: int) -> Mechanism | None:
    if depth > 8:
        raise ValueError("dp_event nests too deeply")
    kind = type(event)
    if kind is ev.NoOpDpEvent:
        return None
    if kind is ev.GaussianDpEvent:
        sigma = _down(event.noise_multiplier, "noise_multiplier")
        if sigma <= 0:
            raise ValueError("a GaussianDpEvent with noise_multiplier 0 is not private")
        return gaussian(sigma, 1)
    if kind is ev.LaplaceDpEvent:
        scale = _down(event.noise_multiplier, "noise_multiplier")
        if scale <= 0:
            raise ValueError("a LaplaceDpEvent with noise_multiplier 0 is not private")
        return laplace(scale, 1)
    if kind is ev.ZCDpEvent:
        rho = _up(event.rho, "rho")
        xi = _up(event.xi, "xi")
        return zcdp(rho, xi=xi if xi != 0 else None)
    if kind is ev.RandomizedResponseDpEvent:
        return _randomized_response(event)
    if kind is ev.PoissonSampledDpEvent:
        inner = _convert(event.event, ev, depth + 1)
        if inner is None:
            return None
        return subsampled(inner, rate=_up(event.sampling_probability, "rate"))
    if kind is ev.SampledWithoutReplacementDpEvent:
        inner = _convert(event.event, ev, depth + 1)
        if inner is None:
            return None
        n = _int(event.source_dataset_size, "source_dataset_size")
        size = _int(event.sample_size, "sample_size")
        return subsampled(inner, m_of=(size, n))
    if kind is ev.SelfComposedDpEvent:
        count = _int(event.count, "count")
        inner_event = event.event
        if count == 0:
            return None
        sgd = _dp_sgd_pattern(inner_event, ev, count)
        if sgd is not None:
            return sgd
        inner = _convert(inner_event, ev, depth + 1)
        if inner is None:
            return None
        return inner if count == 1 else composed(inner, count=count)
    if kind is ev.ComposedDpEvent:
        raw: Sequence[object] = event.events
        items = [c for c in (_convert(e, ev, depth + 1) for e in raw) if c is not None]
        if not items:
            return None
        return items[0] if len(items) == 1 else composed(*items)
    raise ValueError(
        f"cannot convert {kind.__module__}.{kind.__qualname__}: not in the allow-list "
        "(Gaussian, Laplace, PoissonSampled, SampledWithoutReplacement, SelfComposed, "
        "Composed, ZCDp, RandomizedResponse, NoOp)"
    )


def _dp_sgd_pattern(inner: Any, ev: Any, count: int) -> Mechanism | None:
    """``SelfComposed(PoissonSampled(Gaussian(σ), q), T)`` is DP-SGD: declare it as such."""
    if type(inner) is not ev.PoissonSampledDpEvent:
        return None
    gauss = inner.event
    if type(gauss) is not ev.GaussianDpEvent:
        return None
    sigma = _down(gauss.noise_multiplier, "noise_multiplier")
    q = _up(inner.sampling_probability, "sampling_probability")
    if sigma <= 0 or q <= 0:
        return None
    return dp_sgd(sigma, q, steps=count)


def _randomized_response(event: Any) -> Mechanism:
    p = _float(event.noise_parameter, "noise_parameter")
    k = _int(event.num_buckets, "num_buckets")
    if k < 2 or not 0 <= p <= 1:
        raise ValueError("RandomizedResponseDpEvent needs num_buckets ≥ 2 and 0 ≤ p ≤ 1")
    if p == 0:
        raise ValueError("RandomizedResponseDpEvent with noise_parameter 0 is not private")
    # P(true bucket) / P(other bucket) = (1 - p + p/k) / (p/k) = 1 + k(1-p)/p
    epsilon = _UP.create_decimal_from_float(math.log1p(k * (1 - p) / p) * (1 + 1e-12))
    epsilon = epsilon.normalize(_UP)
    if k == 2:
        return Mechanism(type="randomized_response", epsilon=epsilon)
    return pure_dp(epsilon)
