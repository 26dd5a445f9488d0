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
``RenyiDivergence``                    ``rdp`` curve: map(d_in)(α) at the caller's ``orders``
                                       (a dataset's orders: ``dataset.status["orders"]``)
=====================================  =========================================================

Anything else raises ``ValueError`` before a request could be sent. OpenDP's maps return binary
floats already rounded towards less privacy; each is read into a decimal rounded *up* (17
significant digits), so the declaration is never below OpenDP's own value.

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

from odometer_client.declarations import UP, Mechanism, Number, approx_dp, pure_dp, zcdp

#: The output measures this adapter reads, by OpenDP's type name.
SUPPORTED = (
    "MaxDivergence",
    "ZeroConcentratedDivergence",
    "Approximate<MaxDivergence>",
    "Approximate<ZeroConcentratedDivergence>",
    "SmoothedMaxDivergence",
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

    ``delta`` is needed for ``SmoothedMaxDivergence`` (the δ at which to read ε), ``orders``
    for ``RenyiDivergence`` (the α at which to read the curve); neither is used otherwise.
    """
    name = measure_name(measurement)
    if name not in SUPPORTED:
        raise ValueError(
            f"cannot declare an OpenDP measurement with output measure {name}: "
            f"supported are {', '.join(SUPPORTED)}"
        )
    if name == "SmoothedMaxDivergence":
        return _smoothed(measurement, d_in, delta)
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


def _smoothed(measurement: Any, d_in: Any, delta: Number | None) -> Mechanism:
    if delta is None:
        raise ValueError("a SmoothedMaxDivergence measurement needs the delta to declare at")
    d = Decimal(str(delta))
    if not 0 < d < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    profile = _map(measurement, d_in)
    try:
        # OpenDP's profile at a float δ at most the declared one: ε(δ) only grows as δ shrinks
        epsilon = profile.epsilon(
            float(d) if Decimal(float(d)) <= d else math.nextafter(float(d), 0)
        )
    except Exception as exc:
        raise ValueError(f"OpenDP's privacy profile has no ε at δ = {d}: {exc}") from exc
    return approx_dp(_up(epsilon, "ε"), d)


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
