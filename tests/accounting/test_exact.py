"""Exact scalar arithmetic with directed rounding."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odometer_core.accounting.exact import (
    INFINITY,
    ZERO,
    AmountError,
    add_up,
    budget_from_float,
    cost_from_float,
    fmt,
    parse_amount,
    sub_down,
    to_float_down,
    to_float_up,
)


def test_ten_tenths_fill_one_exactly() -> None:
    total = ZERO
    for _ in range(10):
        total = add_up(total, parse_amount("0.1"))
    assert total == Decimal(1)
    # the same through JSON numbers (floats read through their shortest repr)
    total = ZERO
    for _ in range(10):
        total = add_up(total, parse_amount(0.1))
    assert total == Decimal(1)
    # while plain floats do not (reference vector #26)
    assert sum([0.1] * 10) == 0.9999999999999999
    assert sum([1 / 11] * 11) == 1.0000000000000002


def test_eleven_elevenths_do_not_overflow_the_budget() -> None:
    third = parse_amount("0.3333333333333333333333333333")
    total = add_up(third, third, third)
    assert total == Decimal("0.9999999999999999999999999999")
    assert total <= Decimal(1)


@pytest.mark.parametrize(
    "bad",
    [
        float("nan"),
        float("inf"),
        -float("inf"),
        "NaN",
        "Infinity",
        "-inf",
        "abc",
        True,
        None,
        [],
        {},
        "1e309",
        "1e-400",
        "1E1000000",  # would overflow the decimal context if normalised before the range check
        "-1e-1000000",
        "1." + "1" * 40,
    ],
)
def test_parse_amount_rejects(bad: object) -> None:
    with pytest.raises(AmountError):
        parse_amount(bad)


def test_parse_amount_accepts_and_normalises() -> None:
    assert parse_amount("0.10") == Decimal("0.1")
    assert fmt(parse_amount("0.10")) == "0.1"
    assert fmt(parse_amount(100)) == "100"
    assert fmt(parse_amount("1e-300")) == "1E-300"
    assert parse_amount(-0.0) == ZERO
    assert fmt(parse_amount("-0")) == "0"


@given(st.floats(min_value=1e-300, max_value=1e300, allow_nan=False))
def test_cost_rounds_up_and_budget_rounds_down(x: float) -> None:
    up, down = cost_from_float(x), budget_from_float(x)
    assert down <= Decimal(x) <= up
    assert len(up.as_tuple().digits) <= 20
    assert to_float_up(up) >= x
    assert to_float_down(down) <= x


def test_infinity_is_a_cost_never_nan() -> None:
    assert cost_from_float(math.inf) == INFINITY
    assert add_up(Decimal(1), INFINITY) == INFINITY
    assert add_up(Decimal(1), INFINITY) > Decimal(10) ** 6
    with pytest.raises(AmountError):
        cost_from_float(math.nan)
    with pytest.raises(AmountError):
        cost_from_float(-1e-9)
    assert budget_from_float(math.nan) == ZERO


def test_remaining_rounds_down() -> None:
    assert sub_down(Decimal(1), Decimal("0.3")) == Decimal("0.7")
    tiny = Decimal("1e-59")
    assert sub_down(Decimal(1), tiny) < Decimal(1)
