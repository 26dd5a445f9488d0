"""``composed`` in ``basic`` mode from accounting 1.5.0 on: the joint PLD of the list.

The motivating case is a PipelineDP pipeline — two Gaussian aggregations and a partition
selection — whose PLD accountant calibrated its noise to exactly (ε, δ) = (1, 10⁻⁶). PipelineDP
is not a dependency here, so :func:`_pipeline_dp_noise_std` repeats what its
``PLDBudgetAccountant.compute_budgets`` does with dp_accounting's PLDs (``_find_minimum_noise_std``:
double the noise until the composition is within ε, then bisect to a threshold of 10⁻⁴ on the
standard deviation; every mechanism of weight 1 and sensitivity 1; the partition selection, a
``GENERIC`` mechanism, as the (ε₀, δ₀) pair with ε₀ = √2/std, δ₀ = ε₀·δ/ε; discretisation 10⁻⁴).
The result, std = 7.184814453125, is the reference vector :data:`PIPELINE_STD`. Declared as
one ``composed`` list with the rest of δ as its conversion δ, accounting 1.4.0 charges it
ε = 1.0652 (RDP composition; basic composition gives 1.384), which a (1, 10⁻⁶) dataset refused;
1.5.0 charges the joint PLD's ε = 0.9999943 at the same δ = 10⁻⁶ and admits it. (Before the
change the same registration over HTTP was refused: 409, ``requested`` ε 1.0651604904235247862;
``tests/ledger/test_composed_joint_pld.py``.)

The other vectors are checked against dp_accounting composing the items one by one: never below
its optimistic estimate, within 10⁻³ of its pessimistic one, never above the 1.4.0 charge, and
at the 1.4.0 charge's δ.
"""

from __future__ import annotations

import dataclasses
import math
import time
from decimal import Decimal
from typing import Any

import pytest
from dp_accounting.pld import common
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from odometer_core.accounting import (
    admit,
    config_from_json,
    config_to_json,
    initial_state,
    make_config,
    memo,
    parse_declaration,
    pld,
)
from odometer_core.accounting.declarations import Composed
from odometer_core.accounting.modes import basic, basic_joint
from odometer_core.accounting.modes.basic import BasicConfig
from odometer_core.accounting.modes.basic_effort import effort_for

INTERVAL = 1e-4  # PipelineDP's pld_discretization and dp_accounting's default

#: PipelineDP's noise for two Gaussians and a partition selection at (1, 10⁻⁶).
PIPELINE_STD = 7.184814453125
PIPELINE_EPS0 = math.sqrt(2) / PIPELINE_STD  # the partition selection's (ε₀, δ₀)
PIPELINE_DELTA0 = PIPELINE_EPS0 * 1e-6


def _pipeline_dp_pld(std: float, total_epsilon: float, total_delta: float) -> Any:
    """PipelineDP's ``PLDBudgetAccountant._compose_distributions`` for (GAUSSIAN, GAUSSIAN,
    GENERIC), each of weight and sensitivity 1."""
    gaussian = pld_lib.from_gaussian_mechanism(std, value_discretization_interval=INTERVAL)
    eps0 = math.sqrt(2) / std
    generic = pld_lib.from_privacy_parameters(
        common.DifferentialPrivacyParameters(eps0, eps0 / total_epsilon * total_delta),
        value_discretization_interval=INTERVAL,
    )
    return gaussian.compose(gaussian).compose(generic)


def _pipeline_dp_noise_std(total_epsilon: float, total_delta: float) -> float:
    """PipelineDP's ``PLDBudgetAccountant._find_minimum_noise_std``."""
    high, eps = 1.0, total_epsilon + 1
    while eps > total_epsilon:
        high *= 2
        eps = _pipeline_dp_pld(high, total_epsilon, total_delta).get_epsilon_for_delta(total_delta)
    low = 0.0
    while low + 1e-4 < high:
        mid = (high - low) / 2 + low
        pld_ = _pipeline_dp_pld(mid, total_epsilon, total_delta)
        if pld_.get_epsilon_for_delta(total_delta) <= total_epsilon:
            high = mid
        else:
            low = mid
    return high


def _pipeline() -> dict[str, Any]:
    gaussian = {"type": "gaussian", "sigma": repr(PIPELINE_STD), "sensitivity": "1"}
    generic = {"type": "approx_dp", "epsilon": repr(PIPELINE_EPS0), "delta": repr(PIPELINE_DELTA0)}
    return {"type": "composed", "mechanisms": [gaussian, gaussian, generic]}


#: The conversion δ of the pipeline's Gaussians: what PipelineDP's δ leaves after δ₀.
PIPELINE_CONVERSION = Decimal("0.000001") - Decimal(repr(PIPELINE_DELTA0))


def _before_1_5(config: Any) -> BasicConfig:
    """``config`` as stored before accounting 1.5.0 (no ``composed`` field)."""
    stored = {k: v for k, v in config_to_json(config).items() if k != "composed"}
    old = config_from_json(stored)
    assert isinstance(old, BasicConfig) and old.composed == basic_joint.ONE_BY_ONE
    return old


def test_the_pipeline_calibration_is_reproduced() -> None:
    """The reference vector: PipelineDP's search, run with dp_accounting, finds this noise, and
    its composition is within (1, 10⁻⁶)."""
    assert _pipeline_dp_noise_std(1.0, 1e-6) == PIPELINE_STD
    eps = _pipeline_dp_pld(PIPELINE_STD, 1.0, 1e-6).get_epsilon_for_delta(1e-6)
    assert 0.99999 < eps <= 1.0


def test_the_pipeline_is_admitted_at_its_calibrated_budget() -> None:
    decl = parse_declaration(_pipeline())
    cfg = make_config("1", "0.000001", "add_remove", {"mode": "basic"})
    assert config_to_json(cfg)["composed"] == "joint_pld"
    start = time.process_time()
    d = admit(cfg, initial_state(cfg), decl, conversion_delta=PIPELINE_CONVERSION)
    seconds = time.process_time() - start
    assert d.outcome == "accepted"
    charge = d.charge.to_json()
    assert Decimal(charge["delta"]) == Decimal("0.000001")
    eps = Decimal(charge["epsilon"])
    assert Decimal("0.9999942") <= eps <= Decimal("0.9999944"), eps
    # the pipeline's own accountant (the Gaussians discretised one by one) says a little more
    reference = _pipeline_dp_pld(PIPELINE_STD, 1.0, 1e-6).get_epsilon_for_delta(1e-6)
    assert eps <= Decimal(repr(reference)) + Decimal("1e-7")
    assert seconds < 1.0, f"{seconds:.2f} s of CPU"

    # accounting 1.4.0's rule on the same budget: RDP composition, ε ≈ 1.0652 — refused
    old = _before_1_5(cfg)
    refused = admit(old, initial_state(old), decl, conversion_delta=PIPELINE_CONVERSION)
    assert refused.outcome == "rejected"
    assert Decimal(refused.requested.to_json()["epsilon"]) == Decimal("1.0651604904235247862")
    assert Decimal(refused.requested.to_json()["delta"]) == Decimal("0.000001")
    # basic composition of the items (the conversion δ split over the two Gaussians): 1.384
    assert isinstance(decl, Composed)
    one_by_one = basic._basic_composition(decl, PIPELINE_CONVERSION / 2, effort_for(decl))
    assert Decimal("1.3837") < one_by_one.epsilon < Decimal("1.3838")


def test_at_the_default_conversion_delta_the_pipeline_is_charged_at_that_delta() -> None:
    """δ never drops below what 1.4.0 charges: at the dataset's default conversion δ (10⁻⁷) the
    list is charged at δ₀ + 10⁻⁷, where its joint ε exceeds 1 — still less than 1.4.0's."""
    decl = parse_declaration(_pipeline())
    cfg = make_config("1", "0.000001", "add_remove", {"mode": "basic"})
    d = admit(cfg, initial_state(cfg), decl)
    old = _before_1_5(cfg)
    before = admit(old, initial_state(old), decl)
    assert d.outcome == before.outcome == "rejected"
    new, was = d.requested.to_json(), before.requested.to_json()
    assert new["delta"] == was["delta"] == "0.00000029683369300622508"
    assert Decimal("1.088") < Decimal(new["epsilon"]) < Decimal("1.089")
    assert Decimal(new["epsilon"]) < Decimal(was["epsilon"])


# ---------------------------------------------------------------------------- other vectors
def _pair(eps: float, delta: float, optimistic: bool) -> Any:
    if not optimistic:
        return pld_lib.from_privacy_parameters(
            common.DifferentialPrivacyParameters(eps, delta), value_discretization_interval=INTERVAL
        )
    rounded = {
        math.floor(eps / INTERVAL): (1 - delta) / (1 + math.exp(-eps)),
        math.floor(-eps / INTERVAL): (1 - delta) / (1 + math.exp(eps)),
    }
    return pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
        rounded, delta, INTERVAL, pessimistic_estimate=False
    )


def _item_pld(item: dict[str, Any], optimistic: bool) -> Any:
    """dp_accounting's PLD of one item (pessimistic, or optimistic: a lower bound)."""
    flags: dict[str, Any] = {"value_discretization_interval": INTERVAL}
    if optimistic:
        flags.update(pessimistic_estimate=False, use_connect_dots=False)
    kind = item["type"]
    if kind == "gaussian":
        sigma = float(item["sigma"]) / float(item.get("sensitivity", 1))
        return pld_lib.from_gaussian_mechanism(sigma, **flags)
    if kind == "gdp":
        return pld_lib.from_gaussian_mechanism(1 / float(item["mu"]), **flags)
    if kind == "laplace":
        return pld_lib.from_laplace_mechanism(
            float(item["scale"]) / float(item.get("sensitivity", 1)), **flags
        )
    if kind == "approx_dp":
        return _pair(float(item["epsilon"]), float(item["delta"]), optimistic)
    assert kind in ("pure_dp", "randomized_response")
    return _pair(float(item["epsilon"]), 0.0, optimistic)


def _dp_accounting(items: list[dict[str, Any]], delta: float, optimistic: bool) -> float:
    total = None
    for item in items:
        one = _item_pld(item, optimistic)
        total = one if total is None else total.compose(one)
    assert total is not None
    return float(total.get_epsilon_for_delta(delta))


G2 = {"type": "gaussian", "sigma": "2"}
VECTORS: list[tuple[str, list[dict[str, Any]], str, tuple[str, str]]] = [
    # (name, items, conversion δ, (ε as 1.5.0 charges it, within 2e-6))
    ("pipeline", _pipeline()["mechanisms"], str(PIPELINE_CONVERSION), ("0.9999943", "1.0651605")),
    (
        "gaussians, laplaces and pure",
        [G2, {"type": "gaussian", "sigma": "3", "sensitivity": "2"}]
        + [{"type": "laplace", "scale": "4"}] * 3
        + [{"type": "pure_dp", "epsilon": "0.1"}] * 5,
        "0.000001",
        ("4.5558008", "4.8525465"),
    ),
    (
        "approximate pairs (row 7)",
        [
            {"type": "approx_dp", "epsilon": "1", "delta": "0.1"},
            {"type": "approx_dp", "epsilon": "2", "delta": "0.2"},
        ],
        "0",
        ("2.9559036", "3"),
    ),
    (
        "gdp, gaussian and randomized response",
        [{"type": "gdp", "mu": "0.5"}, G2, {"type": "randomized_response", "epsilon": "0.5"}]
        + [{"type": "approx_dp", "epsilon": "0.2", "delta": "0.000001"}] * 4,
        "0.00001",
        ("3.7886595", "4.0527937"),
    ),
]


@pytest.mark.parametrize("name,items,conversion,expected", VECTORS, ids=[v[0] for v in VECTORS])
def test_reference_vectors_against_dp_accounting(
    name: str, items: list[dict[str, Any]], conversion: str, expected: tuple[str, str]
) -> None:
    decl = parse_declaration({"type": "composed", "mechanisms": items})
    cfg = make_config("100", "0.5", "add_remove", {"mode": "basic"})
    conv = Decimal(conversion)
    new = admit(cfg, initial_state(cfg), decl, conversion_delta=conv).charge.to_json()
    old_cfg = _before_1_5(cfg)
    old = admit(old_cfg, initial_state(old_cfg), decl, conversion_delta=conv).charge.to_json()
    eps, was = Decimal(new["epsilon"]), Decimal(old["epsilon"])
    assert new["delta"] == old["delta"]  # the same δ as 1.4.0 charges
    delta = float(new["delta"])
    assert abs(eps - Decimal(expected[0])) <= Decimal("2e-6"), eps
    assert abs(was - Decimal(expected[1])) <= Decimal("2e-6"), was
    assert eps <= was
    assert eps >= Decimal(repr(_dp_accounting(items, delta, optimistic=True)))
    assert abs(float(eps) - _dp_accounting(items, delta, optimistic=False)) <= 1e-3


def test_a_list_with_an_item_without_a_pld_keeps_the_1_4_charge() -> None:
    """A zCDP item (or a subsampled one, DP-SGD, a curve) has no PLD here: the whole list keeps
    the 1.4.0 charge, as does a single release (nothing to compose)."""
    cfg = make_config("100", "0.5", "add_remove", {"mode": "basic"})
    old = _before_1_5(cfg)
    for items in (
        [G2, {"type": "zcdp", "rho": "0.1"}],
        [G2, {"type": "subsampled", "scheme": "poisson", "rate": "0.01", "mechanism": G2}],
        [G2],
    ):
        decl = parse_declaration({"type": "composed", "mechanisms": items})
        assert basic_joint.joint_epsilon(decl, Decimal("0.00001")) is None
        new = admit(cfg, initial_state(cfg), decl).charge
        assert new == admit(old, initial_state(old), decl).charge
    two = parse_declaration({"type": "composed", "mechanisms": [G2, G2]})
    assert basic_joint.joint_epsilon(two, Decimal("0.00001")) is not None


def test_the_joint_pld_is_bounded_work() -> None:
    """A list whose composed grid would be too long (a pure ε of 5 self-composed 10⁴ times:
    10⁹ points at 10⁻⁴) gets no joint PLD — refused before anything is built."""
    heavy = pld.JointComponents(None, (), ((5.0, 0.0, 10_000),))
    assert pld.joint_work(heavy) > pld.JOINT_WORK_LIMIT_US
    with pytest.raises(pld.PldUnavailable):
        pld.joint_epsilon(heavy, 1e-6)
    decl = parse_declaration(
        {"type": "composed", "mechanism": {"type": "pure_dp", "epsilon": "5"}, "count": 10_000}
    )
    cfg = make_config("1000000", "0.5", "add_remove", {"mode": "basic"})
    start = time.process_time()
    d = admit(cfg, initial_state(cfg), decl, conversion_delta=Decimal("0.001"))
    assert time.process_time() - start < 0.5
    assert d.charge.to_json()["epsilon"] == "50000"  # basic composition, δ = 0


def test_the_joint_charge_is_computed_once_per_declaration() -> None:
    """Memoised as the 1.4.0 charge: within one charge table the joint PLD of a declaration is
    computed once, whichever level asks (the dataset, a quota, a cap of the same conversion
    δ)."""
    decl = parse_declaration(_pipeline())
    cfg = make_config("1", "0.000001", "add_remove", {"mode": "basic"})
    quota = dataclasses.replace(cfg, epsilon=Decimal("0.5"))
    calls: list[Decimal] = []
    real = basic_joint.joint_epsilon

    def spy(decl_: Any, delta: Decimal) -> Decimal | None:
        calls.append(delta)
        return real(decl_, delta)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(basic_joint, "joint_epsilon", spy)
        with memo.charges() as table:
            for config in (cfg, quota, cfg):
                admit(config, initial_state(config), decl, conversion_delta=PIPELINE_CONVERSION)
    assert calls == [Decimal("0.000001")]
    names = [str(key[0]) for key in table if isinstance(key, tuple)]
    assert sum(name.endswith("joint_charge") for name in names) == 1
