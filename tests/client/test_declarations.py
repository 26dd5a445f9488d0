"""Declaration helpers and the dp_accounting allow-list."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import dp_accounting
import pytest
from dp_accounting import dp_event as ev

from odometer_client import Mechanism, OdometerClient
from odometer_client import declarations as d
from odometer_client.adapters.dp_accounting import from_dp_event
from odometer_core.accounting import parse_declaration


def _json(model: object) -> dict[str, Any]:
    assert isinstance(model, Mechanism)
    out: dict[str, Any] = model.to_json()
    parse_declaration(out)  # the accounting core accepts every helper's output
    return out


def test_dp_sgd_as_opacus_users_state_it() -> None:
    assert _json(d.dp_sgd("1.1", "0.01", steps=500)) == {
        "type": "dp_sgd",
        "noise_multiplier": "1.1",
        "sample_rate": "0.01",
        "steps": 500,
    }
    assert d.dp_sgd(1.1, 0.01, epochs=3).steps == 300  # epochs × ⌈1/q⌉
    assert d.dp_sgd(1.1, "0.003", epochs=2).steps == 2 * 334  # ⌈1/0.003⌉ = 334
    by_size = d.dp_sgd(1.0, epochs=2, dataset_size=1000, batch_size=300, delta="1e-5")
    assert by_size.steps == 2 * 4 and by_size.delta == Decimal("0.00001")
    assert by_size.sample_rate == Decimal("0.3")
    assert d.dp_sgd(1.0, epochs=1, dataset_size=60000, batch_size=256).sample_rate >= Decimal(
        256
    ) / Decimal(60000)
    with pytest.raises(ValueError):
        d.dp_sgd(1.0, 0.01)
    with pytest.raises(ValueError):
        d.dp_sgd(1.0, 0.01, steps=10, epochs=1)


def test_basic_helpers() -> None:
    assert _json(d.gaussian(2)) == {"type": "gaussian", "sigma": "2"}
    assert _json(d.laplace("0.5", sensitivity=2)) == {
        "type": "laplace",
        "scale": "0.5",
        "sensitivity": "2",
    }
    assert _json(d.odp({"a": "0.1", "b": Decimal("0.2")}, delta="1e-7"))["cells"] == [
        {"name": "a", "epsilon": "0.1"},
        {"name": "b", "epsilon": "0.2"},
    ]
    assert _json(d.svt("0.1", "0.3", 3)) == {
        "type": "svt",
        "epsilon1": "0.1",
        "epsilon2": "0.3",
        "c": 3,
    }
    assert _json(d.subsampled(d.gaussian(1), rate="0.1"))["scheme"] == "poisson"
    assert _json(d.subsampled(d.laplace(1), m_of=(10, 100)))["m"] == 10
    assert _json(d.composed(d.gaussian(1), count=5))["count"] == 5
    assert len(_json(d.composed(d.gaussian(1), d.laplace(2)))["mechanisms"]) == 2


def test_from_dp_event_mappings() -> None:
    assert _json(from_dp_event(ev.GaussianDpEvent(2.0))) == {
        "type": "gaussian",
        "sigma": "2",
        "sensitivity": "1",
    }
    assert _json(from_dp_event(ev.LaplaceDpEvent(0.5)))["scale"] == "0.5"
    sub = _json(from_dp_event(ev.PoissonSampledDpEvent(0.5, ev.LaplaceDpEvent(1.0))))
    assert sub["scheme"] == "poisson" and sub["rate"] == "0.5"
    wor = _json(from_dp_event(ev.SampledWithoutReplacementDpEvent(100, 10, ev.LaplaceDpEvent(1.0))))
    assert (wor["scheme"], wor["m"], wor["n"]) == ("without_replacement", 10, 100)
    self_composed = _json(from_dp_event(ev.SelfComposedDpEvent(ev.LaplaceDpEvent(1.0), 7)))
    assert (self_composed["type"], self_composed["count"]) == ("composed", 7)
    composed = _json(
        from_dp_event(
            ev.ComposedDpEvent([ev.GaussianDpEvent(1.0), ev.NoOpDpEvent(), ev.LaplaceDpEvent(2.0)])
        )
    )
    assert [x["type"] for x in composed["mechanisms"]] == ["gaussian", "laplace"]
    assert _json(from_dp_event(ev.NoOpDpEvent())) == {"type": "pure_dp", "epsilon": "0"}
    assert _json(from_dp_event(ev.ZCDpEvent(0.5, 0))) == {"type": "zcdp", "rho": "0.5"}
    sgd = _json(
        from_dp_event(
            ev.SelfComposedDpEvent(ev.PoissonSampledDpEvent(0.01, ev.GaussianDpEvent(1.1)), 1000)
        )
    )
    assert sgd["type"] == "dp_sgd" and sgd["steps"] == 1000
    rr = from_dp_event(ev.RandomizedResponseDpEvent(0.5, 2))
    assert rr.type == "randomized_response" and rr.epsilon >= Decimal(math.log(3))
    assert float(rr.epsilon) == pytest.approx(math.log(3), rel=1e-9)
    rr4 = from_dp_event(ev.RandomizedResponseDpEvent(0.5, 4))
    assert rr4.type == "pure_dp" and float(rr4.epsilon) == pytest.approx(math.log(5))


def test_from_dp_event_rounds_towards_less_privacy() -> None:
    """Binary floats: σ rounds down, rates round up (never a cheaper declaration)."""
    sgd = from_dp_event(
        ev.SelfComposedDpEvent(ev.PoissonSampledDpEvent(0.01, ev.GaussianDpEvent(1.1)), 10)
    )
    assert sgd.type == "dp_sgd"
    assert sgd.sample_rate >= Decimal.from_float(
        0.01
    ) and sgd.noise_multiplier <= Decimal.from_float(1.1)
    assert abs(sgd.sample_rate - Decimal("0.01")) < Decimal("1e-17")


@pytest.mark.parametrize(
    "event",
    [
        ev.NonPrivateDpEvent(),
        ev.UnsupportedDpEvent(),
        ev.GaussianDpEvent(0.0),
        ev.RandomizedResponseDpEvent(0.0, 2),
        ev.SampledWithReplacementDpEvent(100, 10, ev.GaussianDpEvent(1.0)),
        ev.PoissonSampledDpEvent(0.1, ev.NonPrivateDpEvent()),
        ev.ComposedDpEvent([ev.GaussianDpEvent(1.0), ev.UnsupportedDpEvent()]),
        {"type": "GaussianDpEvent", "noise_multiplier": 1.0},
        "dp_accounting.dp_event.GaussianDpEvent",
    ],
)
def test_from_dp_event_refuses_everything_else(event: object) -> None:
    with pytest.raises(ValueError):
        from_dp_event(event)


def test_from_dp_event_refuses_subclasses() -> None:
    class Sneaky(ev.GaussianDpEvent):  # type: ignore[misc]
        pass

    with pytest.raises(ValueError, match="allow-list"):
        from_dp_event(Sneaky(1.0))


def test_server_charge_matches_dp_accounting_rdp(client: OdometerClient) -> None:
    """A converted DP-SGD event in rdp mode: the service's ε equals RdpAccountant's."""
    event = ev.SelfComposedDpEvent(ev.PoissonSampledDpEvent(0.004, ev.GaussianDpEvent(1.0)), 2000)
    ds = client.create_dataset("decl-rdp", "3", "0.00001", accounting={"mode": "rdp"})
    client.register(ds, from_dp_event(event))
    status = client.get_dataset(ds)
    accountant = dp_accounting.rdp.RdpAccountant([float(o) for o in status.status["orders"]])
    accountant.compose(event)
    expected = accountant.get_epsilon(1e-5)
    assert float(status.spent["epsilon"]) == pytest.approx(expected, rel=1e-6)
    # the generic composed/subsampled form of the same event is charged the same
    generic = ev.SelfComposedDpEvent(
        ev.PoissonSampledDpEvent(0.004, ev.ComposedDpEvent([ev.GaussianDpEvent(1.0)])), 2000
    )
    ds2 = client.create_dataset("decl-rdp-generic", "3", "0.00001", accounting={"mode": "rdp"})
    client.register(ds2, from_dp_event(generic))
    assert float(client.get_dataset(ds2).spent["epsilon"]) == pytest.approx(expected, rel=1e-3)


def test_server_charge_matches_dp_accounting_pure_and_zcdp(client: OdometerClient) -> None:
    basic = client.create_dataset("decl-basic", "10", "0.000001")
    laplace = client.preview(basic, from_dp_event(ev.LaplaceDpEvent(0.5)))
    assert laplace.charge["epsilon"] == Decimal(2)  # ε = Δ/b exactly
    composed = client.preview(
        basic, from_dp_event(ev.SelfComposedDpEvent(ev.LaplaceDpEvent(2.0), 6))
    )
    assert composed.charge["epsilon"] == Decimal(3)
    zc = client.create_dataset("decl-zcdp", "2", "0.000001", accounting={"mode": "zcdp"})
    gauss = client.preview(zc, from_dp_event(ev.GaussianDpEvent(5.0)))
    assert float(gauss.charge["rho"]) == pytest.approx(1 / (2 * 25.0))
