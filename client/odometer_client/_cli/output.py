"""How the command line writes for people: tables, key-value lines, JSON, and amounts.

Amounts are printed as the server's text for them: where a document carries an amount ``X``,
its ``shown.X`` is that amount's text unit by unit, rounded by the core's one rule for display
on the side that never flatters (spent, reserved and charges up, budgets, quotas, what is left
and refunds down; 6 significant digits, a certified reading 8); the command line rounds
nothing itself (it depends on httpx alone and never imports the core). An amount the server
sends no text for (an older server's, or one the client sums up itself) is printed exact.
``--exact`` prints every amount as the server wrote it, and ``--json`` prints the server's
documents.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, TextIO

from odometer_client.exports import fmt

#: The units of an amount in the order they are shown, with their symbols.
UNITS = (("epsilon", "ε"), ("rho", "ρ"), ("mu_squared", "μ²"), ("delta", "δ"))
#: The symbol of each unit of a summary's ``left`` (``rdp``: the order that has most left).
SYMBOLS = {**dict(UNITS), "rdp": "RDP"}


def text_of(document: Any, field: str) -> Mapping[str, str] | None:
    """The server's text of ``document``'s amount ``field`` (``document["shown"][field]``: its
    units' text, rounded for display by the server), from the document as the server sent it
    (not its ``Decimal`` copy); ``None`` when the server sent none."""
    shown = document.get("shown") if isinstance(document, Mapping) else None
    found = shown.get(field) if isinstance(shown, Mapping) else None
    if not isinstance(found, Mapping):
        return None
    return {str(k): v for k, v in found.items() if isinstance(v, str)}


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
    """A fraction as the server wrote it (``"0.7927"``, the core's, already rounded to 4
    places) as a percentage, its decimal point moved and every digit kept (``79.27 %``)."""
    share = decimal(fraction)
    if share is None:
        return "-"
    return f"{fmt(share.scaleb(2))} %"


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
    """Where a command writes (stdout while it runs) and how it shows amounts: as the
    server's text for them, or as the server wrote them when ``exact`` (or without text)."""

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
    def figure(self, value: Any, *, shown: str | None = None) -> str:
        """One amount: the server's text for it (``shown``), or exact with ``--exact`` or
        without text; ``-`` for none; anything that is not an amount as it is."""
        if value is None:
            return "-"
        if shown is not None and not self.exact:
            return shown
        number = decimal(value)
        return str(value) if number is None else fmt(number)

    def amounts(
        self,
        obj: Mapping[str, Any] | None,
        *,
        shown: Mapping[str, str] | None = None,
        symbols: bool = False,
        curve: str = "curve",
    ) -> str:
        """The scalar amounts of ``obj`` in :data:`UNITS` order, each as the server's text of
        it (``shown``: unit → text, from :func:`text_of`): ``epsilon=1, delta=0``, or
        ``ε=1 δ=0`` with ``symbols``; an RDP curve (``rdp``) is ``curve``; none is ``-``."""
        if not obj:
            return "-"
        if "rdp" in obj:
            return curve
        texts = shown or {}
        parts = [
            f"{symbol if symbols else unit}={self.figure(obj[unit], shown=texts.get(unit))}"
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
            # rounded down for display by the server already: printed as it is
            amount = self.figure(item.get("amount"))
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
