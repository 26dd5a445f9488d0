"""Declaration helpers and the dp_accounting adapter: every DpEvent class of the installed
dp_accounting is converted or refused with what to declare instead, and dp_accounting's own
accountants and privacy losses are the oracle of every converted charge."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

import dp_accounting
import numpy as np
import pytest
from dp_accounting import dp_event as ev
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld import privacy_loss_mechanism as plm
from scipy import stats

from odometer_client import Mechanism, OdometerClient
from odometer_client import declarations as d
from odometer_client.adapters import dp_accounting as dp_adapter
from odometer_client.adapters.dp_accounting import (
    approx_dp_declaration,
    from_dp_event,
    rdp_declaration,
)
from odometer_core.accounting import admit, initial_state, make_config, parse_declaration


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
        ev.SampledWithReplacementDpEvent(
            100, 10, ev.PoissonSampledDpEvent(0.1, ev.GaussianDpEvent(1.0))
        ),
        ev.SampledWithReplacementDpEvent(100, 10, ev.ZCDpEvent(0.1)),
        ev.MixtureOfGaussiansDpEvent(0.0, [1.0], [1.0]),
        ev.MixtureOfGaussiansDpEvent(1.0, [1.0, 2.0], [1.0]),
        ev.TruncatedSubsampledGaussianDpEvent(100, 0.1, 10, 0.0),
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


# ---------------------------------------------------------------------------- every DpEvent class
# One instance of every DpEvent class of the installed dp_accounting. The table test fails for
# a class missing here, so a new event type of a new dp_accounting fails until it is handled.
SAMPLES: dict[type, Any] = {
    ev.NoOpDpEvent: ev.NoOpDpEvent(),
    ev.NonPrivateDpEvent: ev.NonPrivateDpEvent(),
    ev.UnsupportedDpEvent: ev.UnsupportedDpEvent(),
    ev.GaussianDpEvent: ev.GaussianDpEvent(1.5),
    ev.LaplaceDpEvent: ev.LaplaceDpEvent(2.0),
    ev.DiscreteLaplaceDpEvent: ev.DiscreteLaplaceDpEvent(0.3, 2),
    ev.ZCDpEvent: ev.ZCDpEvent(0.1, 0.05),
    ev.RandomizedResponseDpEvent: ev.RandomizedResponseDpEvent(0.3, 5),
    ev.PoissonSampledDpEvent: ev.PoissonSampledDpEvent(0.01, ev.GaussianDpEvent(1.2)),
    ev.SampledWithoutReplacementDpEvent: ev.SampledWithoutReplacementDpEvent(
        1000, 10, ev.GaussianDpEvent(3.0)
    ),
    ev.SampledWithReplacementDpEvent: ev.SampledWithReplacementDpEvent(
        1000, 10, ev.GaussianDpEvent(3.0)
    ),
    ev.SelfComposedDpEvent: ev.SelfComposedDpEvent(ev.LaplaceDpEvent(2.0), 3),
    ev.ComposedDpEvent: ev.ComposedDpEvent([ev.GaussianDpEvent(3.0), ev.LaplaceDpEvent(4.0)]),
    ev.SingleEpochTreeAggregationDpEvent: ev.SingleEpochTreeAggregationDpEvent(2.0, [100, 60]),
    ev.RepeatAndSelectDpEvent: ev.RepeatAndSelectDpEvent(ev.GaussianDpEvent(4.0), 5.0, 1.0),
    ev.MixtureOfGaussiansDpEvent: ev.MixtureOfGaussiansDpEvent(2.0, [1.0, 0.5], [0.3, 0.7]),
    ev.TruncatedSubsampledGaussianDpEvent: ev.TruncatedSubsampledGaussianDpEvent(
        10000, 0.01, 150, 1.0
    ),
}

#: The neighbouring relation each sample is analysed under (add/remove unless said).
SAMPLE_RELATION: dict[type, str] = {
    ev.RandomizedResponseDpEvent: "replace_one",
    ev.SampledWithoutReplacementDpEvent: "replace_one",
    ev.SampledWithReplacementDpEvent: "replace_one",
}

NEIGHBOURS = {
    "add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
    "replace_one": dp_accounting.NeighboringRelation.REPLACE_ONE,
}
ORDERS = [1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 32.0, 64.0]


def _dp_event_classes() -> set[type]:
    """Every DpEvent subclass the installed dp_accounting defines (not the base)."""
    found: set[type] = set()
    todo = [ev.DpEvent]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("dp_accounting.") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def _rdp_supports(event: Any, relation: str) -> bool:
    return bool(dp_accounting.rdp.RdpAccountant(None, NEIGHBOURS[relation]).supports(event))


def _pld_supports(event: Any, relation: str) -> bool:
    return bool(dp_accounting.pld.PLDAccountant(NEIGHBOURS[relation]).supports(event))


def test_every_dp_event_class_is_converted_or_refused_with_an_alternative() -> None:
    """By introspection of the installed dp_accounting: each DpEvent class is either in the
    adapter's allow-list (and converts into a declaration the core accepts) or refused with a
    ValueError naming the class and what to declare instead."""
    classes = _dp_event_classes()
    assert len(classes) >= 17  # dp_accounting 0.6
    assert classes == set(SAMPLES), "new DpEvent class: handle it in the adapter, sample it here"
    assert classes == dp_adapter.CONVERTED | set(dp_adapter.REFUSED)
    assert not dp_adapter.CONVERTED & set(dp_adapter.REFUSED)
    for cls, event in SAMPLES.items():
        assert type(event) is cls
        if cls in dp_adapter.CONVERTED:
            _json(from_dp_event(event))
            continue
        with pytest.raises(ValueError) as refused:
            from_dp_event(event)
        message = str(refused.value)
        assert cls.__qualname__ in message
        # what to send instead: a helper, or a declaration kind the server accepts
        assert re.search(r"(?i)declare", message), message
        assert re.search(r"rdp_declaration|approx_dp|gaussian\(|zcdp|GaussianDpEvent", message)
        # nested, the refusal is the same
        with pytest.raises(ValueError, match=re.escape(cls.__qualname__)):
            from_dp_event(ev.ComposedDpEvent([ev.GaussianDpEvent(1.0), event]))


def test_refusals_say_what_dp_accountings_accountants_support() -> None:
    """What each refusal says of RdpAccountant and PLDAccountant is what their ``supports()``
    answers, and the helper it names is offered exactly when that accountant supports it."""
    for cls, reason in dp_adapter.REFUSED.items():
        event = SAMPLES[cls]
        if cls is ev.NonPrivateDpEvent:  # "supported" by both, at ε = ∞
            assert dp_accounting.rdp.RdpAccountant().compose(event).get_epsilon(1e-6) == math.inf
            continue
        relation = SAMPLE_RELATION.get(cls, "add_remove")
        rdp = _rdp_supports(event, relation)
        pld = _pld_supports(event, relation)
        assert ("rdp_declaration" in reason) == rdp, cls
        assert ("approx_dp_declaration" in reason) == pld, cls
        if "neither" in reason:
            assert not rdp and not pld
            assert not any(_rdp_supports(event, r) or _pld_supports(event, r) for r in NEIGHBOURS)
    tree = SAMPLES[ev.SingleEpochTreeAggregationDpEvent]
    assert not any(_rdp_supports(tree, r) or _pld_supports(tree, r) for r in NEIGHBOURS)
    special = dp_accounting.NeighboringRelation.REPLACE_SPECIAL
    assert dp_accounting.rdp.RdpAccountant(None, special).supports(tree)


# ---------------------------------------------------------------------------- dp_accounting: oracle
def _charged(event: Any, relation: str, accounting: dict[str, Any]) -> Any:
    """What the accounting core charges the declaration ``from_dp_event`` makes of ``event``
    on a dataset with a large budget (in-process: the service's own charge functions)."""
    return _admitted(from_dp_event(event), relation, accounting)


def _admitted(decl: Mechanism, relation: str, accounting: dict[str, Any]) -> Any:
    config = make_config(1000, "0.00001", relation, accounting)
    decision = admit(config, initial_state(config), parse_declaration(decl.to_json()))
    assert decision.admitted, decision.reason
    return decision.requested


RDP_ORACLE_EVENTS = [
    (ev.GaussianDpEvent(1.5), "add_remove"),
    (ev.GaussianDpEvent(0.7), "replace_one"),
    (ev.LaplaceDpEvent(2.0), "add_remove"),
    (ev.ZCDpEvent(0.1, 0.05), "add_remove"),
    (ev.RandomizedResponseDpEvent(0.3, 2), "replace_one"),
    (ev.RandomizedResponseDpEvent(0.3, 5), "replace_one"),
    (ev.PoissonSampledDpEvent(0.01, ev.GaussianDpEvent(1.2)), "add_remove"),
    (
        ev.SelfComposedDpEvent(ev.PoissonSampledDpEvent(0.01, ev.GaussianDpEvent(1.2)), 500),
        "add_remove",
    ),
    (ev.SampledWithoutReplacementDpEvent(1000, 10, ev.GaussianDpEvent(3.0)), "replace_one"),
    (ev.SampledWithoutReplacementDpEvent(1000, 100, ev.GaussianDpEvent(0.8)), "replace_one"),
    (ev.SelfComposedDpEvent(ev.LaplaceDpEvent(2.0), 3), "add_remove"),
    (
        ev.ComposedDpEvent([ev.GaussianDpEvent(3.0), ev.NoOpDpEvent(), ev.ZCDpEvent(0.01)]),
        "add_remove",
    ),
]


@pytest.mark.parametrize(("event", "relation"), RDP_ORACLE_EVENTS)
def test_rdp_charge_is_never_below_dp_accountings_rdp_accountant(event: Any, relation: str) -> None:
    """On an rdp dataset, the converted declaration is charged at least what dp_accounting's
    RdpAccountant computes for the event at every order (sampling without replacement on the
    WBK19 bound both implement; the default tighter bound is a second theorem)."""
    accounting = {"mode": "rdp", "orders": ORDERS, "wor_bound": "wbk19"}
    charged = np.array(_charged(event, relation, accounting).rdp)
    accountant = dp_accounting.rdp.RdpAccountant(ORDERS, NEIGHBOURS[relation]).compose(event)
    expected = accountant.rdp
    assert np.all(charged >= expected), (charged, expected)
    pure_rr_curve = type(event) is ev.RandomizedResponseDpEvent and event.num_buckets > 2
    if not pure_rr_curve:  # the same curve, up to the core's rounding up
        assert np.allclose(charged, expected, rtol=1e-6, atol=0)


def _zero(delta: float) -> bool:
    return delta <= 1e-12


@pytest.mark.parametrize(
    ("event", "relation", "loss"),
    [
        (ev.LaplaceDpEvent(2.0), "add_remove", plm.LaplacePrivacyLoss(2.0)),
        (ev.LaplaceDpEvent(0.3), "add_remove", plm.LaplacePrivacyLoss(0.3)),
        (ev.DiscreteLaplaceDpEvent(0.3, 2), "add_remove", plm.DiscreteLaplacePrivacyLoss(0.3, 2)),
        (ev.DiscreteLaplaceDpEvent(1.7, 1), "add_remove", plm.DiscreteLaplacePrivacyLoss(1.7, 1)),
        (ev.DiscreteLaplaceDpEvent(1e-3, 5), "add_remove", plm.DiscreteLaplacePrivacyLoss(1e-3, 5)),
    ],
)
def test_pure_events_are_charged_dp_accountings_epsilon(
    event: Any, relation: str, loss: Any
) -> None:
    """Pure events on a basic dataset: charged (ε, 0) with ε dp_accounting's own — its exact
    privacy loss has δ(ε) = 0 at the charged ε (sound) and δ > 0 just below it (tight)."""
    charge = _charged(event, relation, {"mode": "basic"})
    assert charge.delta == 0
    epsilon = float(charge.epsilon)
    assert _zero(loss.get_delta_for_epsilon(epsilon))
    assert loss.get_delta_for_epsilon(epsilon * (1 - 1e-6)) > 1e-12


def test_discrete_laplace_follows_dp_accountings_parameterisation() -> None:
    """dp_accounting's DiscreteLaplaceDpEvent(a, Δ) has P[x] ∝ e^{−a|x|}: scale t = 1/a (rounded
    down), ε = aΔ — never below a·Δ as exact decimals, and equal to 17 digits."""
    for a, sensitivity in ((0.3, 2), (1.7, 1), (0.1, 1), (2.0, 3)):
        decl = from_dp_event(ev.DiscreteLaplaceDpEvent(a, sensitivity))
        assert _json(decl) == {
            "type": "discrete_laplace",
            "scale": str(decl.scale),
            "sensitivity": str(sensitivity),
        }
        assert decl.scale <= 1 / Decimal(a)
        epsilon = _charged(
            ev.DiscreteLaplaceDpEvent(a, sensitivity), "add_remove", {"mode": "basic"}
        ).epsilon
        assert epsilon >= Decimal(a) * sensitivity
        assert epsilon - Decimal(a) * sensitivity <= epsilon * Decimal("1e-15")
    for bad in (
        ev.DiscreteLaplaceDpEvent(0.0, 1),
        ev.DiscreteLaplaceDpEvent(-1.0, 1),
        ev.DiscreteLaplaceDpEvent(1.0, 1.5),
    ):
        with pytest.raises(ValueError):
            from_dp_event(bad)


def test_randomized_response_is_charged_dp_accountings_epsilon() -> None:
    """k-ary randomized response under replace-one: dp_accounting's optimistic PLD (a lower
    bound of the true δ) has δ = 0 at the charged ε; its pessimistic PLD needs no more."""
    for p, k in ((0.3, 2), (0.3, 5), (0.9, 3), (0.05, 10)):
        event = ev.RandomizedResponseDpEvent(p, k)
        charge = _charged(event, "replace_one", {"mode": "basic"})
        assert charge.delta == 0
        epsilon = float(charge.epsilon)
        optimistic = pld_lib.from_randomized_response(p, k, pessimistic_estimate=False)
        assert _zero(optimistic.get_delta_for_epsilon(epsilon))
        pessimistic = pld_lib.from_randomized_response(p, k).get_epsilon_for_delta(0)
        assert epsilon <= pessimistic <= epsilon + 1e-4  # the PLD's discretisation


def test_gaussian_events_are_charged_at_least_dp_accountings_delta() -> None:
    """Basic mode converts a Gaussian at the conversion δ: dp_accounting's exact Gaussian privacy
    loss (Balle–Wang) needs at most that δ at the charged ε; DP-SGD's charge is at least
    PLDAccountant's ε at the charged δ."""
    for sigma in (0.7, 1.5, 5.0):
        charge = _charged(ev.GaussianDpEvent(sigma), "add_remove", {"mode": "basic"})
        exact = plm.GaussianPrivacyLoss(sigma).get_delta_for_epsilon(float(charge.epsilon))
        assert exact <= float(charge.delta) * (1 + 1e-9)
        assert exact >= float(charge.delta) * (1 - 1e-6)  # and not loose
    sgd = ev.SelfComposedDpEvent(ev.PoissonSampledDpEvent(0.01, ev.GaussianDpEvent(1.2)), 500)
    charge = _charged(sgd, "add_remove", {"mode": "basic"})
    pld = dp_accounting.pld.PLDAccountant().compose(sgd).get_epsilon(float(charge.delta))
    assert float(charge.epsilon) >= pld
    assert float(charge.epsilon) == pytest.approx(pld, rel=1e-2)


def test_mixture_events_convert_to_their_kinds() -> None:
    """MixtureOfGaussiansDpEvent, TruncatedSubsampledGaussianDpEvent and
    SampledWithReplacementDpEvent convert to the kinds of the same name; a basic dataset's
    charge (at the conversion δ 1e-6) is never below dp_accounting's optimistic PLD — a lower
    bound on the true δ(ε) — of the mixture, of dp_accounting's own reduction of truncated
    Poisson sampling (its PLDAccountant's figure, pessimistic, less its discretisation), and
    of one pair of replace-one neighbours of sampling with replacement (the record of value 1
    drawn K ~ Bin(m, 1/n) times against 0: a mixture of Gaussians), which dp_accounting does
    not account otherwise; and the mixture is charged no more than PLDAccountant's
    pessimistic figure (the charge is the exact profile)."""
    delta = 1e-6
    basic = {"mode": "basic", "conversion_delta": "1e-6"}
    optimistic = {
        "pessimistic_estimate": False,
        "use_connect_dots": False,
        "value_discretization_interval": 1e-2,
    }
    mixture = SAMPLES[ev.MixtureOfGaussiansDpEvent]  # σ 2, shifts 1 and 0.5, 0.3 and 0.7
    assert _json(from_dp_event(mixture)) == {
        "type": "mixture_of_gaussians",
        "standard_deviation": "2",
        "sensitivities": ["1", "0.5"],
        "sampling_probs": ["0.3", "0.7"],
    }
    charge = _charged(mixture, "add_remove", basic)
    assert float(charge.delta) == delta
    lower = pld_lib.from_mixture_gaussian_mechanism(2.0, [1.0, 0.5], [0.3, 0.7], **optimistic)
    assert lower.get_epsilon_for_delta(delta) <= float(charge.epsilon)
    upper = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-2)
    assert float(charge.epsilon) <= upper.compose(mixture).get_epsilon(delta)

    truncated = SAMPLES[ev.TruncatedSubsampledGaussianDpEvent]  # 10⁴ records, q 0.01, B 150, σ 1
    assert _json(from_dp_event(truncated))["type"] == "truncated_subsampled_gaussian"
    charge = _charged(truncated, "add_remove", basic)
    theirs = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-3)
    figure = theirs.compose(truncated).get_epsilon(delta)
    assert float(charge.epsilon) >= figure * (1 - 1e-3)
    assert float(charge.epsilon) == pytest.approx(figure, rel=1e-2)  # truncation is rare here

    sampled = SAMPLES[ev.SampledWithReplacementDpEvent]  # m = 10 of n = 1000, σ 3
    assert _json(from_dp_event(sampled)) == {
        "type": "sampled_with_replacement",
        "m": 10,
        "n": 1000,
        "mechanism": {"type": "gaussian", "sigma": "3", "sensitivity": "1"},
    }
    charge = _charged(sampled, "replace_one", basic)
    k = np.arange(11)
    copies = [float(p) for p in stats.binom.pmf(k, 10, 1 / 1000)]
    pair = pld_lib.from_mixture_gaussian_mechanism(3.0, k.tolist(), copies, **optimistic)
    assert pair.get_epsilon_for_delta(delta) <= float(charge.epsilon)
    unamplified = _admitted(d.gaussian(3, 10), "replace_one", basic)  # the old alternative
    assert charge.epsilon < unamplified.epsilon / 5


def test_mixture_probabilities_are_declared_never_less_private() -> None:
    """Float probabilities whose shortest decimals do not sum to 1 are normalised, rounded down
    on a grid of 10⁻²⁸, and the rest given to the largest shift: the declared mixture moves
    mass only towards larger shifts, its probabilities sum to exactly 1, and none is dropped
    above the grid."""
    probs = [0.81, 0.18, 0.010000000000000009]  # shortest decimals: 1.000000000000000009
    decl = from_dp_event(ev.MixtureOfGaussiansDpEvent(1.0, [0.0, 1.0, 2.0], probs))
    declared = [Fraction(p) for p in decl.sampling_probs]
    assert sum(declared) == 1
    exact = [Fraction(p) / sum(map(Fraction, probs)) for p in probs]  # the floats' own values
    assert declared[0] <= exact[0] and declared[1] <= exact[1] and declared[2] >= exact[2]
    assert exact[0] - declared[0] < Fraction(1, 10**28)
    assert [float(c) for c in decl.sensitivities] == [0.0, 1.0, 2.0]
    # shortest decimals that sum to 1 are kept as they are; a probability 0 is dropped
    plain = from_dp_event(ev.MixtureOfGaussiansDpEvent(1.0, [0.0, 2.0, 1.0], [0.5, 0.0, 0.5]))
    assert _json(plain)["sampling_probs"] == ["0.5", "0.5"]
    assert _json(plain)["sensitivities"] == ["0", "1"]


# ---------------------------------------------------------------------------- dp_accounting's own
RDP_DECLARATION_EVENTS = [
    (ev.RepeatAndSelectDpEvent(ev.GaussianDpEvent(4.0), 5.0, 1.0), "add_remove"),
    (ev.RepeatAndSelectDpEvent(ev.LaplaceDpEvent(8.0), 3.0, math.inf), "add_remove"),
    (ev.RepeatAndSelectDpEvent(ev.GaussianDpEvent(3.0), 10.0, 0.5), "add_remove"),
    (ev.GaussianDpEvent(1.5), "add_remove"),
    (
        ev.SelfComposedDpEvent(ev.PoissonSampledDpEvent(0.01, ev.GaussianDpEvent(1.2)), 500),
        "add_remove",
    ),
    (ev.SampledWithoutReplacementDpEvent(1000, 10, ev.GaussianDpEvent(3.0)), "replace_one"),
    (ev.RandomizedResponseDpEvent(0.3, 4), "replace_one"),
]


def _non_decreasing(curve: list[float]) -> list[float]:
    """At each order the smallest value at that order or a higher one (RDP is non-decreasing in
    the order: each value bounds every lower order too)."""
    return [min(curve[i:]) for i in range(len(curve))]


@pytest.mark.parametrize(("event", "relation"), RDP_DECLARATION_EVENTS)
def test_rdp_declaration_is_rdp_accountants_curve(event: Any, relation: str) -> None:
    """``rdp_declaration`` carries RdpAccountant's value at each order — where its curve
    decreases (repeat-and-select), the smallest at that order or above — rounded up to 17
    digits (never below it), and an rdp dataset with the same orders charges at least that."""
    decl = rdp_declaration(event, ORDERS, relation=relation)
    assert decl.type == "rdp"
    assert decl.orders == [Decimal(str(a)) for a in ORDERS]
    curve = dp_accounting.rdp.RdpAccountant(ORDERS, NEIGHBOURS[relation]).compose(event).rdp
    expected = _non_decreasing(curve.tolist())
    if type(event) is not ev.RepeatAndSelectDpEvent:
        assert expected == curve.tolist()
    for value, oracle in zip(decl.values, expected, strict=True):
        assert value >= Decimal(oracle)
        assert float(value) == pytest.approx(oracle, rel=1e-15)
    charged = _admitted(decl, relation, {"mode": "rdp", "orders": ORDERS}).rdp
    assert all(c >= o for c, o in zip(charged, expected, strict=True))


def test_rdp_declaration_at_a_datasets_orders() -> None:
    """Decimal text orders (a dataset's status) are read at a float order at least the declared
    one; orders from which the value passes the server's bound are left out (charged ∞)."""
    event = ev.RepeatAndSelectDpEvent(ev.GaussianDpEvent(4.0), 5.0, 1.0)
    decl = rdp_declaration(event, ["1.1", "2", "10.3"])
    assert decl.orders == [Decimal("1.1"), Decimal(2), Decimal("10.3")]
    big = rdp_declaration(ev.ZCDpEvent(1.0), [2, 100, 2e6, 3e6])
    assert (big.orders, big.values) == ([Decimal(2), Decimal(100)], [Decimal(2), Decimal(100)])
    # the server charges an order past the last declared one ∞
    charged = _admitted(big, "add_remove", {"mode": "rdp", "orders": [2.0, 50.0, 200.0]}).rdp
    assert charged[0] >= 2 and charged[1] >= 100 and charged[2] == math.inf
    for orders, message in (([], "give the orders"), ([1, 2], "> 1"), ([3, 2], "increasing")):
        with pytest.raises(ValueError, match=message):
            rdp_declaration(event, orders)


@pytest.mark.parametrize(
    ("event", "relation", "message"),
    [
        (ev.MixtureOfGaussiansDpEvent(2.0, [1.0], [1.0]), "add_remove", "approx_dp_declaration"),
        (ev.SingleEpochTreeAggregationDpEvent(2.0, 100), "add_remove", "REPLACE_SPECIAL only"),
        (ev.SingleEpochTreeAggregationDpEvent(2.0, 100), "replace_one", "REPLACE_SPECIAL only"),
        (ev.RandomizedResponseDpEvent(0.3, 2), "add_remove", "REPLACE_ONE, REPLACE_SPECIAL only"),
        (ev.PoissonSampledDpEvent(0.1, ev.LaplaceDpEvent(1.0)), "add_remove", "from_dp_event"),
        (
            ev.ComposedDpEvent([ev.UnsupportedDpEvent()]),
            "add_remove",
            "odometer_client.declarations",
        ),
        (ev.NonPrivateDpEvent(), "add_remove", "no finite RDP value"),
        (ev.GaussianDpEvent(1.0), "replace_special", "relation must be"),
        ("GaussianDpEvent", "add_remove", "not a dp_accounting DpEvent"),
    ],
)
def test_rdp_declaration_refuses_what_rdp_accountant_does_not_support(
    event: Any, relation: str, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        rdp_declaration(event, ORDERS, relation=relation)


def test_approx_dp_declaration_is_pld_accountants_epsilon() -> None:
    """``approx_dp_declaration``: (ε, δ) with ε PLDAccountant's at δ, rounded up; a basic
    dataset charges exactly that. The alternatives the refusals name are upper bounds by
    dp_accounting's own numbers."""
    delta = Decimal("1e-6")
    mixture = SAMPLES[ev.MixtureOfGaussiansDpEvent]
    truncated = SAMPLES[ev.TruncatedSubsampledGaussianDpEvent]
    laplace = ev.PoissonSampledDpEvent(0.1, ev.LaplaceDpEvent(1.0))
    interval = 1e-3  # coarser than the default 1e-4: the mixture's PLD takes seconds at 1e-4
    declared = {}
    for event in (mixture, truncated, laplace):
        decl = approx_dp_declaration(event, delta, value_discretization_interval=interval)
        oracle = dp_accounting.pld.PLDAccountant(value_discretization_interval=interval)
        epsilon = oracle.compose(event).get_epsilon(1e-6)
        assert decl.delta == delta and decl.epsilon >= Decimal(epsilon)
        assert float(decl.epsilon) == pytest.approx(epsilon, rel=1e-15)
        charge = _admitted(decl, "add_remove", {"mode": "basic"})
        assert (charge.epsilon, charge.delta) == (decl.epsilon, delta)
        declared[type(event)] = decl.epsilon
    # mixture: no more than gaussian(σ, max |c_i|) by dp_accounting's PLD of both
    widest = dp_accounting.pld.PLDAccountant(value_discretization_interval=interval)
    widest.compose(ev.GaussianDpEvent(2.0 / 1.0))
    assert declared[ev.MixtureOfGaussiansDpEvent] <= Decimal(widest.get_epsilon(1e-6))
    # truncated Poisson sampling: below the unamplified gaussian(σ, 2) the refusal offers
    unamplified = {"mode": "basic", "conversion_delta": "1e-6"}
    bound = _admitted(d.gaussian(1.0, 2), "add_remove", unamplified)
    assert declared[ev.TruncatedSubsampledGaussianDpEvent] <= bound.epsilon
    with pytest.raises(ValueError, match="rdp_declaration"):
        approx_dp_declaration(SAMPLES[ev.RepeatAndSelectDpEvent], delta)
    with pytest.raises(ValueError, match="not private"):
        approx_dp_declaration(ev.NonPrivateDpEvent(), delta)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        approx_dp_declaration(mixture, 0)


TREE_EVENTS = [
    ev.SingleEpochTreeAggregationDpEvent(2.0, [100, 60]),  # d = 7
    ev.SingleEpochTreeAggregationDpEvent(0.7, 1),
    ev.SingleEpochTreeAggregationDpEvent(1.1, [0, 15, 16]),  # a tree of no step: dropped
    ev.SingleEpochTreeAggregationDpEvent(5.0, [10**6]),
]


@pytest.mark.parametrize("event", TREE_EVENTS)
def test_tree_aggregation_is_charged_rdp_accountants_curve(event: Any) -> None:
    """SingleEpochTreeAggregationDpEvent converts to ``tree_aggregation``: on an rdp dataset
    it is charged the curve RdpAccountant computes for the event (under REPLACE_SPECIAL, a
    record's contribution replaced by zero), αd/(2σ²), d = ⌈log₂(max steps + 1)⌉ — never
    below it; in zcdp at ρ = d/(2σ²) (RdpAccountant's value at order 1, its slope)."""
    decl = from_dp_event(event)
    counts = [event.step_counts] if isinstance(event.step_counts, int) else event.step_counts
    assert _json(decl) == {
        "type": "tree_aggregation",
        "noise_multiplier": str(decl.noise_multiplier),
        "step_counts": [t for t in counts if t > 0],
    }
    assert decl.noise_multiplier <= Decimal(event.noise_multiplier)
    special = dp_accounting.NeighboringRelation.REPLACE_SPECIAL
    expected = dp_accounting.rdp.RdpAccountant(ORDERS, special).compose(event).rdp
    charged = _admitted(decl, "add_remove", {"mode": "rdp", "orders": ORDERS})
    assert np.all(np.array(charged.rdp) >= expected)
    assert np.allclose(charged.rdp, expected, rtol=1e-12)
    rho = _admitted(decl, "add_remove", {"mode": "zcdp"}).rho
    slope = dp_accounting.rdp.RdpAccountant([1.0], special).compose(event).rdp[0]
    assert float(rho) == pytest.approx(slope, rel=1e-14)
    levels = max(counts).bit_length()  # ρ ≥ d/(2σ²) for the event's exact σ
    assert Fraction(rho) >= Fraction(levels) / (2 * Fraction(event.noise_multiplier) ** 2)
    for bad in (
        ev.SingleEpochTreeAggregationDpEvent(0.0, 5),
        ev.SingleEpochTreeAggregationDpEvent(1.0, []),
        ev.SingleEpochTreeAggregationDpEvent(1.0, [-1]),
    ):
        with pytest.raises(ValueError):
            from_dp_event(bad)
    nothing = from_dp_event(ev.SingleEpochTreeAggregationDpEvent(1.0, [0]))
    assert _json(nothing) == {"type": "pure_dp", "epsilon": "0"}  # no step: nothing released


SELECTION_EVENTS = [
    ev.RepeatAndSelectDpEvent(ev.GaussianDpEvent(4.0), 5.0, 1.0),
    ev.RepeatAndSelectDpEvent(ev.LaplaceDpEvent(8.0), 3.0, math.inf),
    ev.RepeatAndSelectDpEvent(ev.GaussianDpEvent(3.0), 10.0, 0.5),
    ev.RepeatAndSelectDpEvent(ev.GaussianDpEvent(1.0), 100.0, 0.0),
    ev.RepeatAndSelectDpEvent(ev.GaussianDpEvent(2.0), 1.0, math.inf),
    ev.RepeatAndSelectDpEvent(
        ev.SelfComposedDpEvent(ev.PoissonSampledDpEvent(0.01, ev.GaussianDpEvent(1.2)), 500),
        20.0,
        2.0,
    ),
    ev.RepeatAndSelectDpEvent(ev.ZCDpEvent(0.05), 7.5, 0.1),
]


@pytest.mark.parametrize("event", SELECTION_EVENTS)
def test_repeat_and_select_is_charged_within_rdp_accountants_curve(event: Any) -> None:
    """RepeatAndSelectDpEvent converts to ``repeat_and_select`` (mean and shape rounded up, the
    inner event converted); on an rdp dataset its charge is at most 1 % above RdpAccountant's
    curve at every order (both implement Papernot–Steinke 2022 Thms 2 and 6; the server also
    optimises over more orders, so it is often below), and its (ε, δ) conversion too."""
    decl = from_dp_event(event)
    body = _json(decl)
    assert body["type"] == "repeat_and_select"
    assert body["mechanism"] == _json(from_dp_event(event.event))
    assert Decimal(body["mean"]) >= Decimal(event.mean) and Decimal(body["mean"]) > 1
    if math.isinf(event.shape):
        assert body["distribution"] == "poisson" and "shape" not in body
    else:
        assert body["distribution"] == "truncated_negative_binomial"
        assert (
            Decimal(event.shape)
            <= Decimal(body["shape"])
            <= Decimal(event.shape) * (1 + Decimal("1e-16"))
        )
    accountant = dp_accounting.rdp.RdpAccountant(ORDERS).compose(event)
    charged = np.array(_admitted(decl, "add_remove", {"mode": "rdp", "orders": ORDERS}).rdp)
    assert np.all(charged <= np.asarray(accountant.rdp) * 1.01), (charged, accountant.rdp)
    epsilon, _ = dp_accounting.rdp.compute_epsilon(ORDERS, charged, 1e-6)
    assert epsilon <= accountant.get_epsilon(1e-6) * 1.01


def test_repeat_and_select_edge_cases_convert_soundly() -> None:
    """A truncated negative binomial of mean 1 is K = 1: the inner mechanism itself; a Poisson
    mean of 1 is declared just above 1 (the charge only grows with the mean); a no-op stays a
    no-op; the inner event's refusal is the refusal."""
    gauss = ev.GaussianDpEvent(2.0)
    assert from_dp_event(ev.RepeatAndSelectDpEvent(gauss, 1.0, 1.0)) == from_dp_event(gauss)
    poisson = from_dp_event(ev.RepeatAndSelectDpEvent(gauss, 1.0, math.inf))
    assert poisson.mean == Decimal("1.0000000000000001")
    noop = from_dp_event(ev.RepeatAndSelectDpEvent(ev.NoOpDpEvent(), 5.0, 1.0))
    assert _json(noop) == {"type": "pure_dp", "epsilon": "0"}
    for bad in (
        ev.RepeatAndSelectDpEvent(gauss, 0.5, 1.0),
        ev.RepeatAndSelectDpEvent(gauss, 5.0, -1.0),
        ev.RepeatAndSelectDpEvent(gauss, math.nan, 1.0),
    ):
        with pytest.raises(ValueError):
            from_dp_event(bad)
    with pytest.raises(ValueError, match="NonPrivateDpEvent"):
        from_dp_event(ev.RepeatAndSelectDpEvent(ev.NonPrivateDpEvent(), 5.0, 1.0))
    # an (ε, δ) inner event converts, but no mode charges a selection over it
    approx = from_dp_event(
        ev.RepeatAndSelectDpEvent(ev.PoissonSampledDpEvent(0.1, ev.LaplaceDpEvent(1.0)), 5, 1.0)
    )
    config = make_config(1000, "0.00001", "add_remove", {"mode": "basic"})
    with pytest.raises(ValueError, match="implemented for the Gaussian mechanism"):
        admit(config, initial_state(config), parse_declaration(approx.to_json()))


def test_service_accepts_what_the_dp_accounting_helpers_declare(client: OdometerClient) -> None:
    """Over HTTP: a discrete Laplace event is charged ε = aΔ; repeat-and-select is registered on
    an rdp dataset at the dataset's own orders, charged at least RdpAccountant's curve as
    ``rdp_declaration``, at most 1 % above it as ``repeat_and_select``."""
    basic = client.create_dataset("decl-dlap", "10", "0.000001")
    charge = client.preview(basic, from_dp_event(ev.DiscreteLaplaceDpEvent(0.5, 3))).charge
    assert charge["epsilon"] == Decimal("1.5")
    ds = client.create_dataset("decl-repeat", "5", "0.00001", accounting={"mode": "rdp"})
    orders = client.get_dataset(ds).status["orders"]
    event = SAMPLES[ev.RepeatAndSelectDpEvent]
    decl = rdp_declaration(event, orders)
    assert client.register(ds, decl).status == "accepted"
    alphas = [float(a) for a in decl.orders]
    curve = dp_accounting.rdp.RdpAccountant(alphas).compose(event).rdp.tolist()
    assert all(v >= Decimal(o) for v, o in zip(decl.values, _non_decreasing(curve), strict=True))
    # … and as the kind of its own: charged at most what dp_accounting's own curve is
    own = client.register(ds, from_dp_event(event))
    assert own.status == "accepted"
    assert all(float(c) <= o * 1.01 for c, o in zip(own.charge["rdp"], curve, strict=True))
    # dp_accounting states tree aggregation for zero-out neighbours (REPLACE_SPECIAL), which an
    # add_remove dataset asks the analyst to assert
    tree_event = ev.SingleEpochTreeAggregationDpEvent(40.0, [99])
    tree = client.register(ds, from_dp_event(tree_event), neighbours="zero_out")
    assert tree.status == "accepted"
