"""One rounding for display (issue 48). The server rounds with the core's rule
(:func:`odometer_core.accounting.exact.rounded`): its summaries, the report's charts through
:func:`app.reports_svg.shown`, and the text it sends beside every amount pages print through
:func:`app.schemas.shown.text`. The dashboard and the command line print that text and round
nothing themselves (the command line, which never imports the core, used to keep a copy of the
rule: it is gone; ``tests/client/test_cli_display_text.py`` shows it printing the server's
text where its copy printed another figure)."""

from __future__ import annotations

import random
import re
from decimal import Decimal

import pytest

from app import reports_svg
from app.schemas import shown as api_shown
from odometer_client._cli import output
from tests.support import ROOT

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


#: What a rounding is written with, in Python (Decimal's rounding modes, quantize) and in the
#: page's JavaScript (a rounding function, a digit carried, toFixed / toPrecision).
PY_ROUNDING = re.compile(r"ROUND_[A-Z_]+|\.quantize\(|def significant|\bround\(")
JS_ROUNDING = re.compile(r"function shown\b|kept \+= 1n|toFixed|toPrecision|function minus\b")


def test_the_command_line_and_the_page_round_nothing() -> None:
    """The copy of the core's rule the command line kept, and the page's own rounding and
    subtraction, are gone: neither has a rounding to drift from the core's."""
    cli = sorted((ROOT / "client" / "odometer_client" / "_cli").glob("*.py"))
    page = sorted((ROOT / "app" / "dashboard").glob("*.js"))
    assert cli and page
    found = [
        (path.name, hit)
        for paths, pattern in ((cli, PY_ROUNDING), (page, JS_ROUNDING))
        for path in paths
        for hit in pattern.findall(path.read_text(encoding="utf-8"))
    ]
    assert found == []
    assert not hasattr(output, "significant") and not hasattr(output, "DIGITS")


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
