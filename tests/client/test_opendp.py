"""The OpenDP adapter against the real library: every supported output measure is charged
OpenDP's own ``map(d_in)``, rounded up and never below; anything else is refused before a
request could be sent."""

from __future__ import annotations

import math
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import opendp.prelude as dp
import pytest

from odometer_client import OdometerClient
from odometer_client.adapters.opendp import SUPPORTED, declaration, measure_name
from odometer_core.accounting import parse_declaration

dp.enable_features("contrib", "honest-but-curious")

REAL = dp.atom_domain(T=float, nan=False)
ABS = dp.absolute_distance(T=float)


def laplace(scale: float) -> Any:
    return dp.m.make_laplace(REAL, ABS, scale=scale)


def gaussian(scale: float) -> Any:
    return dp.m.make_gaussian(REAL, ABS, scale=scale)


def threshold_histogram() -> Any:
    """A stable histogram with Gaussian noise: (ρ, δ)-approximate zCDP."""
    domain = dp.map_domain(dp.atom_domain(T=str), REAL)
    return dp.m.make_gaussian_threshold(domain, dp.l02inf_distance(ABS), scale=2.0, threshold=10.0)


def renyi_gaussian(sigma: float) -> Any:
    """A measurement stated in Rényi DP: the Gaussian curve α·Δ²/(2σ²) (Mironov 2017, Prop 7)."""
    return dp.m.make_user_measurement(
        REAL,
        ABS,
        dp.renyi_divergence(),
        function=lambda x: x,
        privacy_map=lambda d_in: lambda alpha: alpha * d_in**2 / (2 * sigma**2),
    )


def _close_above(declared: Decimal, opendp_value: float) -> None:
    """Rounded up to 17 digits: never below OpenDP's value, at most one unit in the 17th."""
    assert declared >= Decimal(opendp_value)
    assert declared - Decimal(opendp_value) <= Decimal(opendp_value) * Decimal("1e-16")


def test_pure_dp_laplace_is_charged_its_epsilon(client: OdometerClient) -> None:
    meas = laplace(3.0)  # ε = Δ/b = 1/3 as a float
    d_out = meas.map(1.0)
    decl = declaration(meas, 1.0)
    assert decl.type == "pure_dp"
    _close_above(decl.epsilon, d_out)
    ds = client.create_dataset("odp-pure", "1", "1e-6")
    charged = client.register(ds, decl).charge["epsilon"]
    assert charged == decl.epsilon
    _close_above(charged, d_out)


def test_zcdp_gaussian_is_charged_its_rho(client: OdometerClient) -> None:
    meas = gaussian(3.0)  # ρ = Δ²/(2σ²) = 1/18
    decl = declaration(meas, 1.0)
    assert (measure_name(meas), decl.type) == ("ZeroConcentratedDivergence", "zcdp")
    _close_above(decl.rho, meas.map(1.0))
    ds = client.create_dataset("odp-zcdp", "10", "1e-6", accounting={"mode": "zcdp"})
    assert client.register(ds, decl).charge["rho"] == decl.rho


def test_approximate_max_divergence_keeps_its_delta(client: OdometerClient) -> None:
    # OpenDP's FixedSmoothedMaxDivergence is Approximate<MaxDivergence>
    assert str(dp.fixed_smoothed_max_divergence().type) == "Approximate<MaxDivergence>"
    meas: Any = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(gaussian(4.0)), 1e-7)
    eps, delta = meas.map(1.0)
    decl = declaration(meas, 1.0)
    assert (measure_name(meas), decl.type) == ("Approximate<MaxDivergence>", "approx_dp")
    _close_above(decl.epsilon, eps)
    assert decl.delta >= Decimal(delta) and float(decl.delta) == pytest.approx(1e-7)
    ds = client.create_dataset("odp-approx", "2", "1e-6")
    charge = client.register(ds, decl).charge
    assert (charge["epsilon"], charge["delta"]) == (decl.epsilon, decl.delta)


def test_approximate_zcdp_keeps_its_delta(client: OdometerClient) -> None:
    meas = threshold_histogram()
    rho, delta = meas.map((1, 1.0, 1.0))
    decl = declaration(meas, (1, 1.0, 1.0))
    assert (measure_name(meas), decl.type) == ("Approximate<ZeroConcentratedDivergence>", "zcdp")
    _close_above(decl.rho, rho)
    _close_above(decl.delta, delta)
    # half of δ for approximate-zCDP charges, half for the final conversion
    zcdp = {"mode": "zcdp", "final_conversion_delta": "5e-4"}
    ds = client.create_dataset("odp-approx-zcdp", "10", "1e-3", accounting=zcdp)
    charge = client.register(ds, decl).charge
    assert charge["rho"] == decl.rho and charge["delta"] == decl.delta


def test_approximate_smoothed_max_divergence_is_read_at_the_total_delta(
    client: OdometerClient,
) -> None:
    """(profile, δ₀) = map(d_in): declared at the total δ the caller names, ε = the profile's at
    δ − δ₀ — what OpenDP's own make_fix_delta gives at that δ."""
    meas: Any = dp.c.make_zCDP_to_approxDP(threshold_histogram())
    d_in = (1, 1.0, 1.0)
    assert measure_name(meas) == "Approximate<SmoothedMaxDivergence>"
    decl = declaration(meas, d_in, delta="1e-5")
    fixed_delta: Any = dp.c.make_fix_delta(meas, 1e-5)
    eps, delta = fixed_delta.map(d_in)
    # OpenDP's δ is the float 1e-5, a hair above the decimal declared (whose profile δ is
    # smaller: ε at least OpenDP's)
    assert (decl.type, decl.delta, float(decl.delta)) == ("approx_dp", Decimal("1e-5"), delta)
    _close_above(decl.epsilon, eps)
    fixed = meas.map(d_in)[1]
    with pytest.raises(ValueError, match="needs the delta"):
        declaration(meas, d_in)
    with pytest.raises(ValueError, match="leaves nothing"):
        declaration(meas, d_in, delta=fixed)
    ds = client.create_dataset("odp-approx-smoothed", "5", "1e-4")
    charge = client.register(ds, decl).charge
    assert (charge["epsilon"], charge["delta"]) == (decl.epsilon, decl.delta)


def test_smoothed_max_divergence_is_read_at_the_named_delta(client: OdometerClient) -> None:
    meas: Any = dp.c.make_zCDP_to_approxDP(gaussian(4.0))
    decl = declaration(meas, 1.0, delta="1e-6")
    eps = meas.map(1.0).epsilon(1e-6)
    assert (decl.type, decl.delta) == ("approx_dp", Decimal("1e-6"))
    _close_above(decl.epsilon, eps)
    with pytest.raises(ValueError, match="needs the delta"):
        declaration(meas, 1.0)
    ds = client.create_dataset("odp-smoothed", "3", "1e-5")
    assert client.register(ds, decl).charge["epsilon"] == decl.epsilon


def test_renyi_curve_is_read_at_the_datasets_orders(client: OdometerClient) -> None:
    ds = client.create_dataset("odp-rdp", "3", "1e-6", accounting={"mode": "rdp"})
    orders = client.get_dataset(ds).status["orders"]
    meas = renyi_gaussian(5.0)
    decl = declaration(meas, 1.0, orders=orders)
    assert decl.type == "rdp" and decl.orders == [Decimal(str(a)) for a in orders]
    for alpha, value in zip(decl.orders, decl.values, strict=True):
        assert value >= Decimal(float(alpha) / 50) or math.isclose(value, float(alpha) / 50)
        _close_above(value, meas.map(1.0)(float(alpha)))
    assert client.register(ds, decl).status == "accepted"
    with pytest.raises(ValueError, match="needs the orders"):
        declaration(meas, 1.0)


@pytest.fixture
def no_network() -> Iterator[list[httpx.Request]]:
    sent: list[httpx.Request] = []
    yield sent
    assert sent == []


def test_unsupported_measurements_are_refused_before_any_request(
    no_network: list[httpx.Request],
) -> None:
    def record(request: httpx.Request) -> httpx.Response:
        no_network.append(request)
        return httpx.Response(500)

    transport = httpx.MockTransport(record)
    custom = dp.m.make_user_measurement(
        REAL, ABS, dp.user_divergence("MyDivergence"), function=lambda x: x, privacy_map=lambda d: d
    )
    with OdometerClient("http://odometer.invalid", "k", transport=transport) as client:
        for bad, message in (
            (custom, "output measure"),
            (dp.t.make_split_lines(), "not an OpenDP measurement"),
            ("laplace", "not an OpenDP measurement"),
        ):
            with pytest.raises(ValueError, match=message):
                client.register("ds_x", declaration(bad, 1.0))
        with pytest.raises(ValueError, match="could not map"):
            client.register("ds_x", declaration(laplace(1.0), -1.0))


def _measurements() -> dict[str, tuple[Any, Any, dict[str, Any]]]:
    """One measurement of every supported output measure: (measurement, d_in, options)."""
    smoothed = dp.c.make_zCDP_to_approxDP(gaussian(4.0))
    return {
        "MaxDivergence": (laplace(3.0), 1.0, {}),
        "ZeroConcentratedDivergence": (gaussian(3.0), 1.0, {}),
        "Approximate<MaxDivergence>": (dp.c.make_fix_delta(smoothed, 1e-7), 1.0, {}),
        "Approximate<ZeroConcentratedDivergence>": (threshold_histogram(), (1, 1.0, 1.0), {}),
        "SmoothedMaxDivergence": (smoothed, 1.0, {"delta": "1e-6"}),
        "Approximate<SmoothedMaxDivergence>": (
            dp.c.make_zCDP_to_approxDP(threshold_histogram()),
            (1, 1.0, 1.0),
            {"delta": "1e-4"},
        ),
        "RenyiDivergence": (renyi_gaussian(5.0), 1.0, {"orders": [2, 4, 8]}),
    }


def test_every_supported_measure_carries_opendps_own_numbers() -> None:
    """Each supported output measure, with OpenDP as the oracle: the declaration carries the
    number(s) of the measurement's own privacy map at d_in (or its profile, or make_fix_delta),
    rounded up, and the accounting core accepts it."""
    samples = _measurements()
    assert set(samples) == set(SUPPORTED)
    for name, (meas, d_in, options) in samples.items():
        assert measure_name(meas) == name
        decl = declaration(meas, d_in, **options)
        parse_declaration(decl.to_json())
        d_out = meas.map(d_in)
        if name == "MaxDivergence":
            _close_above(decl.epsilon, d_out)
        elif name == "ZeroConcentratedDivergence":
            _close_above(decl.rho, d_out)
        elif name == "Approximate<MaxDivergence>":
            _close_above(decl.epsilon, d_out[0])
            _close_above(decl.delta, d_out[1])
        elif name == "Approximate<ZeroConcentratedDivergence>":
            _close_above(decl.rho, d_out[0])
            _close_above(decl.delta, d_out[1])
        elif name == "SmoothedMaxDivergence":
            _close_above(decl.epsilon, d_out.epsilon(1e-6))
        elif name == "Approximate<SmoothedMaxDivergence>":
            fixed: Any = dp.c.make_fix_delta(meas, 1e-4)
            _close_above(decl.epsilon, fixed.map(d_in)[0])
        else:
            for alpha, value in zip(decl.orders, decl.values, strict=True):
                _close_above(value, d_out(float(alpha)))


def test_an_unsupported_measure_is_refused_naming_what_to_send() -> None:
    custom = dp.m.make_user_measurement(
        REAL, ABS, dp.user_divergence("MyDivergence"), function=lambda x: x, privacy_map=lambda d: d
    )
    with pytest.raises(ValueError) as refused:
        declaration(custom, 1.0)
    message = str(refused.value)
    assert "ExtrinsicDivergence (MyDivergence)" in message
    for alternative in ("make_fix_delta", "pure_dp", "approx_dp", "zcdp", "rdp"):
        assert alternative in message
