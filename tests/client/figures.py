"""Amounts as the command line shows them to people: 8 significant digits, a reading or a spend
rounded up and what is left rounded down (written here independently of the command line)."""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal


def _eight(value: str | Decimal, rounding: str) -> str:
    d = Decimal(value)
    if d == 0:
        return "0"
    rounded = d.quantize(Decimal(1).scaleb(d.adjusted() - 7), rounding=rounding)
    return format(rounded.normalize(), "f")


def up8(value: str | Decimal) -> str:
    """``value`` rounded up to 8 significant digits, in plain notation."""
    return _eight(value, ROUND_CEILING)


def down8(value: str | Decimal) -> str:
    """``value`` rounded down to 8 significant digits, in plain notation."""
    return _eight(value, ROUND_FLOOR)
