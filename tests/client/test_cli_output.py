"""The command line's amounts for people: at most 8 significant digits, rounded up for a
reading or a spend and down for what is left, in plain notation; in full under ``--exact``."""

from __future__ import annotations

import io
from decimal import Decimal

import pytest

from odometer_client._cli.output import Output, significant
from tests.client.figures import down8, up8


def _out(exact: bool = False) -> Output:
    return Output(io.StringIO(), exact=exact)


@pytest.mark.parametrize(
    "value",
    [
        "0.44707842418651294603",
        "1.0625003641272687816",
        "0.0454609347457067753001584031820751576484",
        "123456789.5",
        "0.000000123456789",
        "0.4",
        "0.000001",
        "1000000",
        "0",
    ],
)
def test_eight_significant_digits_up_for_spend_down_for_what_is_left(value: str) -> None:
    out = _out()
    assert out.figure(value) == up8(value)
    assert out.figure(value, left=True) == down8(value)
    assert out.figure(Decimal(value)) == up8(value)
    assert len(Decimal(out.figure(value)).normalize().as_tuple().digits) <= 8
    assert Decimal(out.figure(value)) >= Decimal(value) >= Decimal(out.figure(value, left=True))
    exact = _out(exact=True)
    assert Decimal(exact.figure(value)) == Decimal(value)  # --exact: as the server wrote it


def test_what_is_not_an_amount_is_shown_as_it_is() -> None:
    out = _out()
    shown = [out.figure(v) for v in (None, "ladder", True, "-inf")]
    assert shown == ["-", "ladder", "True", "-Infinity"]  # an infinity as the server writes it
    assert significant(Decimal("Infinity")) == Decimal("Infinity")


def test_amounts_in_both_styles_and_curves() -> None:
    out = _out()
    spent = {"delta": "0", "rho": "0.00055555555555555556", "certified": False}
    assert out.amounts(spent) == "rho=0.00055555556, delta=0"
    assert out.amounts(spent, symbols=True) == "ρ=0.00055555556 δ=0"
    assert out.amounts({"epsilon": "0.99999999999"}, left=True) == "epsilon=0.99999999"
    curve = {"orders": ["2.0"], "rdp": ["0.1"], "delta": "0"}
    assert out.amounts(curve) == "curve"
    assert (
        out.amounts(curve, curve="RDP curve (--exact prints it)") == "RDP curve (--exact prints it)"
    )
    assert out.amounts(None) == "-" and out.amounts({}) == "-"


def test_what_is_left_in_the_modes_units() -> None:
    out = _out()
    rdp = [
        {
            "unit": "rdp",
            "amount": "0.30029001",
            "budget": "0.4",
            "fraction": "0.7501",
            "order": "20.0",
        }
    ]
    assert out.left(rdp) == "RDP 0.30029001 at α=20 (75.01 %)"
    basic = [
        {"unit": "epsilon", "amount": "0.55", "budget": "1", "fraction": "0.55"},
        {"unit": "delta", "amount": "0", "budget": "0", "fraction": "0"},  # no δ budget: left out
    ]
    assert out.left(basic) == "ε 0.55 (55 %)"
    split = [
        {"unit": "rho", "amount": "0.5", "budget": "1", "fraction": "0.5", "sub_budget": "a"},
        {"unit": "epsilon", "amount": "1", "budget": "1", "fraction": "1", "sub_budget": "b"},
        {"unit": "delta", "amount": "1e-6", "budget": "1e-6", "fraction": "1", "sub_budget": "b"},
    ]
    assert out.left(split) == "a: ρ 0.5 (50 %); b: ε 1 (100 %), δ 0.000001 (100 %)"
    assert out.left([]) == "-"
