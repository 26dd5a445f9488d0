"""Published reference vectors not pinned elsewhere.

Rows and where they are tested: #1, #14 (test_subsampling), #2 (test_conversions), #3
(test_conversions, test_filters), #4 (test_conversions), #8 (test_conversions), #10
(test_conversions, test_pld), #12/#15 PLD (test_pld), #16 (test_subsampling), #17–#20
(test_conversions), #26 (test_exact); #6, #7, #9, #12 (RDP), #24, #25 here.

Not applicable: #5 (tree aggregation is not a declared kind), #11 (no PLD for subsampled
Laplace; such a declaration is charged by (ε, δ) amplification instead), #13 (noise
calibration is a client concern), #21–#23 (advanced composition is not a filter we offer;
the zCDP route is preferred).
"""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal

import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_acc

from odometer_core.accounting import pld
from odometer_core.accounting.conversions import rdp_to_epsilon
from odometer_core.accounting.declarations import parse_declaration
from odometer_core.accounting.filters import RDPConfig, admit, initial_state, make_config
from odometer_core.accounting.modes import rdp as rdp_mode
from odometer_core.accounting.modes.basic import BasicConfig
from odometer_core.accounting.subsampling import poisson_gaussian_rdp


def test_row_6_and_7_basic_composition_of_eps_delta_events() -> None:
    # the rule of basic configurations stored before accounting 1.5.0 (no ``composed`` field);
    # a new configuration charges the joint PLD at the same δ (test_joint_pld)
    new = make_config(10, "0.5", "add_remove", None)
    assert isinstance(new, BasicConfig)
    cfg = replace(new, composed="one_by_one")
    pure = parse_declaration(
        {
            "type": "composed",
            "mechanisms": [{"type": "pure_dp", "epsilon": 1}, {"type": "pure_dp", "epsilon": 2}],
        }
    )
    d = admit(cfg, initial_state(cfg), pure)
    assert d.charge.to_json() == {"epsilon": "3", "delta": "0"}  # PLD: δ(3) = 0, ε(δ=0) = 3
    approx = parse_declaration(
        {
            "type": "composed",
            "mechanisms": [
                {"type": "approx_dp", "epsilon": 1, "delta": "0.1"},
                {"type": "approx_dp", "epsilon": 2, "delta": "0.2"},
            ],
        }
    )
    d = admit(cfg, initial_state(cfg), approx, conversion_delta=Decimal(0))
    # basic composition (3, 0.3): sound and at least the PLD value δ(3) = 0.28
    assert d.charge.to_json() == {"epsilon": "3", "delta": "0.3"}
    assert Decimal(d.charge.to_json()["delta"]) >= Decimal("0.28")
    # from 1.5.0: the joint PLD's ε at δ = 0.3, dp_accounting's 2.9559029 rounded up
    d = admit(new, initial_state(new), approx, conversion_delta=Decimal(0))
    assert d.charge.to_json() == {"epsilon": "2.955903596695437674", "delta": "0.3"}
    d = admit(new, initial_state(new), pure)
    assert d.charge.to_json() == {"epsilon": "3", "delta": "0"}  # δ = 0: no joint PLD


def test_row_9_poisson_gaussian_three_steps() -> None:
    # PoissonSampled(0.2, Gaussian 0.5) × 3: δ(ε=1) = 0.15594 ± 1e-3 → ε(δ=0.15594) ≈ 1
    eps = pld.pld_epsilon_dp_sgd(0.5, 0.2, 3, 0.15594)
    assert 1.0 - 0.02 < eps < 1.0 + 0.02
    assert pld.pld_epsilon_dp_sgd(0.5, 0.2, 3, 0.15594 + 2e-3) < 1.0


def test_row_12_dp_sgd_rdp_on_default_orders() -> None:
    orders = np.asarray(rdp_acc.DEFAULT_RDP_ORDERS, dtype=np.float64)
    curve = poisson_gaussian_rdp(0.04, 1.5, orders) * 2250
    eps, order = rdp_to_epsilon(orders, curve, 1e-5)
    assert eps == pytest.approx(7.329335, rel=2e-6)
    assert eps >= 7.329335 * (1 - 1e-6)
    assert order == pytest.approx(3.9)


@pytest.mark.parametrize(
    ("order", "capacity"),
    [
        (3, 1.34960),
        (4, 2.67967),
        (5, 3.32292),
        (6, 3.69861),
        (8, 4.11483),
        (16, 4.63536),
        (32, 4.84644),
        (64, 4.93557),
    ],
)
def test_row_24_single_order_rdp_capacity(order: int, capacity: float) -> None:
    """PrivateKube block (ε=5, δ=1e-4) → RDP capacity at one order with the CKS conversion
    ("improved-conversion capacity"): B(α) with one order and weight 1, as filters made before
    accounting 1.4.0 have it; a new filter holds 0.9 of that δ (its ladder the rest), which
    lowers B(α) by exactly log(1/0.9)/(α − 1)."""
    whole = rdp_mode.make(
        Decimal(5),
        Decimal("1e-4"),
        "add_remove",
        Decimal("1e-4"),
        (float(order),),
        (1.0,),
        anchored=False,
    )
    assert whole.thresholds[0] == pytest.approx(capacity, abs=6e-6)
    assert whole.thresholds[0] <= capacity + 5e-6
    cfg = make_config(5, "1e-4", "add_remove", {"mode": "rdp", "orders": [order]})
    assert isinstance(cfg, RDPConfig)
    shared = capacity + math.log(0.9) / (order - 1)
    assert cfg.thresholds[0] == pytest.approx(shared, abs=6e-6)
    assert cfg.thresholds[0] <= shared + 5e-6


def test_row_25_filter_refuses_without_exhausting() -> None:
    """OpenDP's filter (budget 2.0) refuses 1.5 after 1.0 and then closes for good. Our
    filter refuses 1.5 too but still admits 0.5: the refusal depends only on declared
    parameters, so continuing is sound (Feldman–Zrnic 2021), and the arithmetic is exact where
    OpenDP reports 2.5000000000000004."""
    cfg = make_config(2, 0, "add_remove", None)
    st = admit(cfg, initial_state(cfg), parse_declaration({"type": "pure_dp", "epsilon": 1})).state
    refused = admit(cfg, st, parse_declaration({"type": "pure_dp", "epsilon": "1.5"}))
    assert refused.outcome == "rejected"
    assert (
        refused.requested.to_json()["epsilon"] == "1.5"
        and refused.remaining.to_json()["epsilon"] == "1"
    )
    last = admit(cfg, st, parse_declaration({"type": "pure_dp", "epsilon": "0.5"}))
    assert last.outcome == "accepted" and last.remaining.to_json()["epsilon"] == "0.5"
