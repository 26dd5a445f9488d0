"""OpenDP measurements as declarations.

An OpenDP measurement knows its privacy guarantee: its output measure and its privacy map
``d_out = measurement.map(d_in)`` for inputs at distance ``d_in``. :func:`declaration` turns
that guarantee into the declaration the odometer charges, by the output measure:

=====================================  =========================================================
``MaxDivergence``                      ``pure_dp`` ε = map(d_in)
``ZeroConcentratedDivergence``         ``zcdp`` ρ = map(d_in)
``Approximate(MaxDivergence)``         ``approx_dp`` (ε, δ) = map(d_in)
``Approximate(ZeroConcentrated…)``     ``zcdp`` ρ with δ: (ρ, δ) = map(d_in)
``SmoothedMaxDivergence``              ``approx_dp`` (ε(δ), δ) at the ``delta`` the caller names
                                       (the privacy profile's ε at that δ)
``Approximate(SmoothedMaxDivergence)`` ``approx_dp`` (ε(δ − δ₀), δ) at the total ``delta`` the
                                       caller names, where (profile, δ₀) = map(d_in) (what
                                       OpenDP's ``make_fix_delta`` computes)
``RenyiDivergence``                    ``rdp`` curve: map(d_in)(α) at the caller's ``orders``
                                       (a dataset's orders: ``dataset.status["orders"]``)
=====================================  =========================================================

``FixedSmoothedMaxDivergence`` is ``Approximate(MaxDivergence)`` in OpenDP (0.16:
``dp.fixed_smoothed_max_divergence()`` returns it). Anything else (``dp.user_divergence(...)``,
measures of later OpenDP versions) raises ``ValueError`` before a request could be sent, naming
what to send instead. OpenDP's maps return binary floats already rounded towards less privacy;
each is read into a decimal rounded *up* (17 significant digits), so the declaration is never
below OpenDP's own value.

The declaration covers the measurement's guarantee at ``d_in``: the analyst chooses ``d_in``
to match the dataset's neighbouring relation (e.g. ``d_in = 1`` record for add/remove
neighbours with a symmetric distance, or the query's sensitivity on an absolute distance).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import opendp.prelude as dp

from odometer_client.declarations import DOWN, UP, Mechanism, Number, approx_dp, pure_dp, zcdp

#: The output measures this adapter reads, by OpenDP's type name.
SUPPORTED = (
    "MaxDivergence",
    "ZeroConcentratedDivergence",
    "Approximate<MaxDivergence>",
    "Approximate<ZeroConcentratedDivergence>",
    "SmoothedMaxDivergence",
    "Approximate<SmoothedMaxDivergence>",
    "RenyiDivergence",
)


def _up(value: Any, what: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"OpenDP's {what} is not a number: {value!r}")
    f = float(value)
    if not math.isfinite(f) or f < 0:
        raise ValueError(f"OpenDP's {what} is {f!r}: no finite guarantee to declare")
    return UP.create_decimal_from_float(f).normalize(UP)


def measure_name(measurement: Any) -> str:
    """The output measure's type name as OpenDP writes it, e.g. ``Approximate<MaxDivergence>``."""
    if not isinstance(measurement, dp.Measurement):
        raise ValueError(f"not an OpenDP measurement: {type(measurement).__name__}")
    return str(measurement.output_measure.type)


def _map(measurement: Any, d_in: Any) -> Any:
    try:
        return measurement.map(d_in)
    except Exception as exc:  # OpenDP raises OpenDPException for a d_in it cannot map
        raise ValueError(f"OpenDP could not map d_in = {d_in!r}: {exc}") from exc


def declaration(
    measurement: Any,
    d_in: Any,
    *,
    delta: Number | None = None,
    orders: Sequence[Number] | None = None,
) -> Mechanism:
    """The declaration of ``measurement`` on inputs at distance ``d_in`` (see the module).

    ``delta`` is needed for ``SmoothedMaxDivergence`` (the δ at which to read ε) and
    ``Approximate<SmoothedMaxDivergence>`` (the total δ declared, as in OpenDP's
    ``make_fix_delta``), ``orders`` for ``RenyiDivergence`` (the α at which to read the curve);
    neither is used otherwise.
    """
    name = measure_name(measurement)
    if name not in SUPPORTED:
        described = str(measurement.output_measure)
        if described != name:  # e.g. a user divergence: ExtrinsicDivergence, named by its user
            name = f"{name} ({described})"
        raise ValueError(
            f"cannot declare an OpenDP measurement with output measure {name}: supported are "
            f"{', '.join(SUPPORTED)}. Convert it to one of them with OpenDP's combinators "
            "(e.g. dp.c.make_zCDP_to_approxDP, dp.c.make_fix_delta), or declare the guarantee "
            "you proved for it with odometer_client.declarations (pure_dp, approx_dp, zcdp, "
            "rdp)"
        )
    if name == "SmoothedMaxDivergence":
        return _smoothed(measurement, d_in, delta)
    if name == "Approximate<SmoothedMaxDivergence>":
        return _approximate_smoothed(measurement, d_in, delta)
    if name == "RenyiDivergence":
        return _renyi(measurement, d_in, orders)
    d_out = _map(measurement, d_in)
    if name == "MaxDivergence":
        return pure_dp(_up(d_out, "ε"))
    if name == "ZeroConcentratedDivergence":
        return zcdp(_up(d_out, "ρ"))
    if not (isinstance(d_out, tuple) and len(d_out) == 2):
        raise ValueError(f"OpenDP's {name} map gave {d_out!r}, not a pair")
    if name == "Approximate<MaxDivergence>":
        return approx_dp(_up(d_out[0], "ε"), _up(d_out[1], "δ"))
    rho, d = _up(d_out[0], "ρ"), _up(d_out[1], "δ")
    return zcdp(rho, delta=d if d > 0 else None)


def _delta(name: str, delta: Number | None) -> Decimal:
    if delta is None:
        raise ValueError(f"a {name} measurement needs the delta to declare at")
    d = Decimal(str(delta))
    if not 0 < d < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    return d


def _epsilon_at(profile: Any, d: Decimal) -> Decimal:
    """The profile's ε at a float δ at most ``d``: ε(δ) only grows as δ shrinks."""
    f = float(d)
    if Decimal(f) > d:
        f = math.nextafter(f, 0)
    try:
        epsilon = profile.epsilon(f)
    except Exception as exc:
        raise ValueError(f"OpenDP's privacy profile has no ε at δ = {d}: {exc}") from exc
    return _up(epsilon, "ε")


def _smoothed(measurement: Any, d_in: Any, delta: Number | None) -> Mechanism:
    d = _delta("SmoothedMaxDivergence", delta)
    profile = _map(measurement, d_in)
    return approx_dp(_epsilon_at(profile, d), d)


def _approximate_smoothed(measurement: Any, d_in: Any, delta: Number | None) -> Mechanism:
    """(profile, δ₀) = map(d_in) is (ε(δ′), δ′ + δ₀)-DP for every δ′: at the total δ the
    caller names, ε is the profile's at δ′ = δ − δ₀ (δ₀ read rounded up, so δ′ is at most the
    true remainder)."""
    d = _delta("Approximate<SmoothedMaxDivergence>", delta)
    d_out = _map(measurement, d_in)
    if not (isinstance(d_out, tuple) and len(d_out) == 2):
        raise ValueError(f"OpenDP's Approximate<SmoothedMaxDivergence> map gave {d_out!r}")
    profile, fixed = d_out[0], _up(d_out[1], "δ")
    if fixed >= d:
        raise ValueError(
            f"delta = {d} leaves nothing for the privacy profile: the measurement already "
            f"spends δ = {fixed}; name a larger delta"
        )
    return approx_dp(_epsilon_at(profile, DOWN.subtract(d, fixed)), d)


def _renyi(measurement: Any, d_in: Any, orders: Sequence[Number] | None) -> Mechanism:
    if not orders:
        raise ValueError(
            "a RenyiDivergence measurement needs the orders to declare at "
            '(the dataset\'s: dataset.status["orders"])'
        )
    curve = _map(measurement, d_in)
    alphas = [Decimal(str(a)) for a in orders]
    values = []
    for alpha in alphas:
        # the curve at a float α at least the declared one: Rényi divergence is non-decreasing
        # in its order (van Erven and Harremoës 2014, Thm 3)
        a = float(alpha)
        if Decimal(a) < alpha:
            a = math.nextafter(a, math.inf)
        try:
            values.append(_up(curve(a), f"ε(α = {alpha})"))
        except ValueError:
            raise
        except Exception as exc:
            raise ValueError(f"OpenDP's Rényi curve has no value at α = {alpha}: {exc}") from exc
    return Mechanism(type="rdp", orders=alphas, values=values)
