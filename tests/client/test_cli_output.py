"""The command line's amounts for people: the server's text for each (``shown``: rounded by
the core's one rule for display on the server, the side that never flatters), exact where the
server sends none (an older server) and in full under ``--exact``; the command line rounds
nothing itself (issue 48: one rounding for display)."""

from __future__ import annotations

import io
from decimal import Decimal

from odometer_client._cli import output
from odometer_client._cli.output import Output, text_of


def _out(exact: bool = False) -> Output:
    return Output(io.StringIO(), exact=exact)


def test_an_amount_is_the_server_s_text_or_exact() -> None:
    out, exact = _out(), _out(exact=True)
    value = "0.44707842418651294603"
    # the server's text as it comes, whichever way it was rounded
    assert out.figure(value, shown="0.447079") == "0.447079"
    assert out.figure(value, shown="0.447078") == "0.447078"
    assert out.figure(Decimal(value), shown="4.47078e-1") == "4.47078e-1"
    # no text (an older server's answer): exact, never rounded here
    assert out.figure(value) == value
    assert out.figure(Decimal("1E+2")) == "100"
    # --exact: as the server wrote it, whatever its text
    assert exact.figure(value, shown="0.447079") == value
    assert not hasattr(output, "significant") and not hasattr(output, "DIGITS")


def test_what_is_not_an_amount_is_shown_as_it_is() -> None:
    out = _out()
    shown = [out.figure(v) for v in (None, "ladder", True, "-inf")]
    assert shown == ["-", "ladder", "True", "-Infinity"]  # an infinity as the server writes it


def test_amounts_in_both_styles_and_curves() -> None:
    out = _out()
    spent = {"delta": "0", "rho": "0.00055555555555555556", "certified": False}
    texts = {"rho": "0.000555556", "delta": "0"}
    assert out.amounts(spent, shown=texts) == "rho=0.000555556, delta=0"
    assert out.amounts(spent, shown=texts, symbols=True) == "ρ=0.000555556 δ=0"
    assert out.amounts(spent) == "rho=0.00055555555555555556, delta=0"  # no text: exact
    assert _out(exact=True).amounts(spent, shown=texts) == "rho=0.00055555555555555556, delta=0"
    curve = {"orders": ["2.0"], "rdp": ["0.1"], "delta": "0"}
    assert out.amounts(curve) == "curve"
    assert (
        out.amounts(curve, curve="RDP curve (--exact prints it)") == "RDP curve (--exact prints it)"
    )
    assert out.amounts(None) == "-" and out.amounts({}) == "-"


def test_the_server_s_text_of_a_field() -> None:
    document = {"charge": {"epsilon": "0.1234567891"}, "shown": {"charge": {"epsilon": "0.123457"}}}
    assert text_of(document, "charge") == {"epsilon": "0.123457"}
    assert text_of(document, "refund") is None
    assert text_of({"charge": {}}, "charge") is None  # an older server: no shown
    assert text_of(None, "charge") is None


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
