"""How the command line writes for people: tables, key-value lines, JSON, and amounts.

Amounts are shown with at most :data:`DIGITS` significant digits, rounded on the side that
never flatters the budget: a reading, a spend or a budget up, what is left (and a refund) down
(the server's summaries round the same way, ``odometer_core.accounting.summary``). ``--exact``
prints them as the server wrote them, and ``--json`` prints the server's documents.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation
from typing import Any, TextIO

from odometer_client.exports import fmt

#: Significant digits of an amount shown to people (the server's summaries use as many).
DIGITS = 8

#: The units of an amount in the order they are shown, with their symbols.
UNITS = (("epsilon", "ε"), ("rho", "ρ"), ("mu_squared", "μ²"), ("delta", "δ"))
#: The symbol of each unit of a summary's ``left`` (``rdp``: the order that has most left).
SYMBOLS = {**dict(UNITS), "rdp": "RDP"}


def significant(value: Decimal, *, down: bool = False) -> Decimal:
    """``value`` rounded to :data:`DIGITS` significant digits, up (or ``down``).

    The command line's own rounding, for the amounts the server sends exact (budgets, spends,
    charges, a report's rows); what it sends rounded for display is printed as it is (a
    summary's ``text``; the figures of its ``left``, which this rounding leaves unchanged).
    Why a copy of the core's rule (``odometer_core.accounting.exact.rounded``) rather than
    the rule itself: the client depends on httpx alone and never imports the core (an auditor
    installs the core beside the client, never the other way round);
    ``tests/architecture/test_display_rounding.py`` holds the two to the same results."""
    if not value.is_finite() or value.is_zero():
        return value
    exponent = value.adjusted() - DIGITS + 1
    if exponent <= int(value.as_tuple().exponent):
        return value  # no more digits than that already
    rounding = ROUND_FLOOR if down else ROUND_CEILING
    return value.quantize(Decimal(1).scaleb(exponent), rounding=rounding)


def decimal(value: Any) -> Decimal | None:
    """An amount (``Decimal``, decimal text, an integer) as a ``Decimal``; ``None`` otherwise."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    try:
        return Decimal(value)
    except InvalidOperation:
        return None


def percent(fraction: Any) -> str:
    """A fraction (``"0.7927"``) as a percentage rounded down (``79.27 %``)."""
    share = decimal(fraction)
    if share is None:
        return "-"
    return f"{fmt((share * 100).quantize(Decimal('0.01'), rounding=ROUND_FLOOR))} %"


def text(value: Any) -> str:
    """A value that is not an amount (a name, a count, a time): as it is; ``-`` for none."""
    return "-" if value is None else str(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return fmt(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def one_line(value: Any) -> str:
    """Compact JSON on one line (the server's errors under ``--json``)."""
    return json.dumps(value, ensure_ascii=False, default=_json_default)


class Output:
    """Where a command writes (stdout while it runs) and how it shows amounts: rounded to
    :data:`DIGITS` significant digits, or as the server wrote them when ``exact``."""

    def __init__(self, stream: TextIO, *, exact: bool = False) -> None:
        self.stream = stream
        self.exact = exact

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")

    def warnings(self, document: Mapping[str, Any]) -> None:
        """The answer's ``warnings`` (what the caller may not have meant, e.g. a dataset name
        another dataset of the organisation has), one ``warning:`` line each on stderr."""
        for warning in document.get("warnings") or ():
            sys.stderr.write(f"warning: {warning}\n")

    def json(self, value: Any) -> None:
        """A document as indented JSON (``--json``), amounts as text."""
        self.line(json.dumps(value, indent=2, ensure_ascii=False, default=_json_default))

    def table(self, rows: Sequence[Sequence[str]]) -> None:
        """A header row, a rule, then the rows, in aligned columns."""
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for n, row in enumerate(rows):
            self.line("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
            if n == 0:
                self.line("  ".join("-" * w for w in widths))

    def pairs(self, rows: Sequence[tuple[str, str]], *, colon: bool = False) -> None:
        """``key  value`` lines, the values aligned (``key:  value`` with ``colon``)."""
        keys = [k + ":" if colon else k for k, _ in rows]
        width = max(len(k) for k in keys)
        for key, (_, value) in zip(keys, rows, strict=True):
            self.line(f"{key.ljust(width)}  {value}")

    # ------------------------------------------------------------------------ amounts
    def figure(self, value: Any, *, left: bool = False) -> str:
        """One amount: :data:`DIGITS` significant digits, rounded up (``left``: down), or
        exact with ``--exact``; ``-`` for none; anything that is not an amount as it is."""
        if value is None:
            return "-"
        number = decimal(value)
        if number is None:
            return str(value)
        return fmt(number if self.exact else significant(number, down=left))

    def amounts(
        self,
        obj: Mapping[str, Any] | None,
        *,
        left: bool = False,
        symbols: bool = False,
        curve: str = "curve",
    ) -> str:
        """The scalar amounts of ``obj`` in :data:`UNITS` order: ``epsilon=1, delta=0``, or
        ``ε=1 δ=0`` with ``symbols``; an RDP curve (``rdp``) is ``curve``; none is ``-``."""
        if not obj:
            return "-"
        if "rdp" in obj:
            return curve
        parts = [
            f"{symbol if symbols else unit}={self.figure(obj[unit], left=left)}"
            for unit, symbol in UNITS
            if unit in obj
        ]
        return (" " if symbols else ", ").join(parts) or "-"

    def left(self, items: Iterable[Mapping[str, Any]]) -> str:
        """A summary's ``left`` in the mode's units: ``ρ 0.019 (79.27 %)``, ``RDP 0.3 at α=20
        (75 %)``, ``ε 0.5 (50 %), δ 0.000001 (100 %)`` (a unit without budget left out); a split
        dataset's per sub-budget (``training: RDP …; queries: ε …``)."""
        groups: list[tuple[str | None, list[str]]] = []
        for item in items:
            if decimal(item.get("budget")) == 0:  # no budget of this unit (δ = 0): nothing to say
                continue
            order = decimal(item.get("order"))
            where = "" if order is None else f" at α={fmt(order)}"
            # rounded down for display by the server already: the rounding leaves it as it is
            amount = self.figure(item.get("amount"), left=True)
            symbol = SYMBOLS.get(str(item.get("unit")), str(item.get("unit")))
            text = f"{symbol} {amount}{where} ({percent(item.get('fraction'))})"
            sub = item.get("sub_budget")
            if groups and groups[-1][0] == sub:
                groups[-1][1].append(text)
            else:
                groups.append((sub, [text]))
        return (
            "; ".join((f"{sub}: " if sub else "") + ", ".join(texts) for sub, texts in groups)
            or "-"
        )
