"""One rounding for display. The server rounds with the core's rule
(:func:`odometer_core.accounting.exact.rounded`: its summaries, and the report's charts
through :func:`app.reports_svg.shown`); the command line, which never imports the core (the
client depends on httpx alone), keeps a copy of the rule for the amounts the server sends exact
(:func:`odometer_client._cli.output.significant`). Held here to the same results."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from app import reports_svg
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
