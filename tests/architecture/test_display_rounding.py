"""One rounding for display. The server rounds with the core's rule
(:func:`odometer_core.accounting.exact.rounded`: its summaries, the report's charts
through :func:`app.reports_svg.shown`, and the figures it sends the dashboard as text through
:func:`app.schemas.shown.text`, so that the page rounds none itself); the command line, which
never imports the core (the client depends on httpx alone), keeps a copy of the rule for the
amounts the server sends exact (:func:`odometer_client._cli.output.significant`).
Held here to the same results."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from app import reports_svg
from app.schemas import shown as api_shown
from odometer_client._cli import output
from odometer_client.exports import fmt as client_fmt
from odometer_core.accounting import summary
from odometer_core.accounting.exact import fmt as core_fmt

EDGES = [
    "0", "-0", "Infinity", "-Infinity", "1", "0.1", "1e-7", "9.99999999e-8", "123456789",
    "1.000000001", "0.300290015", "0.21510012438242689937", "99999999.5", "-1.234567891",
    "5E-324", "1e300", "1E+2", "2.50000", "0.000001",
]  # fmt: skip


def _values(count: int = 20000) -> list[Decimal]:
    rng = random.Random(20261129)
    values = [Decimal(v) for v in EDGES]
    for _ in range(count):
        digits = rng.randint(1, 25)
        value = Decimal(rng.randint(1, 10**digits)).scaleb(rng.randint(-40, 40))
        values.append(-value if rng.random() < 0.1 else value)
    return values


def test_the_command_line_rounds_as_the_core_does() -> None:
    assert output.DIGITS == summary.DIGITS
    for value in _values():
        for up in (True, False):
            core = core_fmt(summary.rounded(value, up=up))
            assert client_fmt(output.significant(value, down=not up)) == core, (value, up)


@pytest.mark.parametrize(
    "value,up,text",
    [
        ("0.21510012438242689937", True, "0.215101"),
        ("0.21510012438242689937", False, "0.2151"),
        ("123456789012345678", False, "1.23456e+17"),
        ("99999999999999.99", True, "100000000000000"),
        ("0.0000000123456789", True, "1.23457e-8"),
        ("0", True, "0"),
        ("Infinity", False, "Infinity"),
    ],
)
def test_what_the_charts_print(value: str, up: bool, text: str) -> None:
    """The charts' six digits and notation, through the core's function."""
    assert reports_svg.shown(value, up=up) == text


def test_the_dashboard_s_text_is_the_charts_rounding() -> None:
    """What the API sends the dashboard to print (``status.shown``) is rounded as the charts
    print, by the core's function: six digits, the same notation."""
    for value in _values(2000):
        for up in (True, False):
            assert api_shown.text(value, up=up) == reports_svg.shown(value, up=up), (value, up)
    assert api_shown.percent("0.4848") == "48.48 %"
    assert api_shown.percent("0.12345678") == "12.3456 %"  # rounded down
