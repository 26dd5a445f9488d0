"""Ledger exports, client side: the formats the client asks for, and amounts as text.

The client writes no export format itself: ``export()`` asks the server for the whole export
file in the format wanted (``GET …/ledger?export=true&format=…``, written by the one writer of
the formats, ``odometer_core.ledger.formats``) and saves the bytes it receives, streamed:

- ``json``: ``{"dataset_id", "entries": [...]}``;
- ``jsonl``: one compact entry per line;
- ``csv``: a header row (the entry's hashed fields, then ``hash``), then one row per entry.

Each ends with the export's closing head (the dataset's head when it was written, signed by the
operator's checkpoint key when the server has one: ``docs/ledger.md``, *The export's signed
end*). Every format is read by ``odometer verify``, which checks that a signed head pins the
end. ``tests/client/test_exports.py`` holds the saved
file byte for byte against the core's ``write_export``.
"""

from __future__ import annotations

from decimal import Context, Decimal
from pathlib import PurePath
from typing import Literal

ExportFormat = Literal["json", "jsonl", "csv"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("json", "jsonl", "csv")

#: The format a file's name asks for; any other name gets JSON lines, which ``odometer
#: verify`` streams (bounded memory, the chain walk beside the replay).
FORMAT_OF_SUFFIX: dict[str, ExportFormat] = {".json": "json", ".csv": "csv", ".jsonl": "jsonl"}


def format_of(path: str | PurePath) -> ExportFormat:
    """The export format ``path``'s name asks for (``.json``, ``.csv``, ``.jsonl``), else JSON
    lines: the one rule of ``export()`` and ``odometer export``."""
    return FORMAT_OF_SUFFIX.get(PurePath(path).suffix.lower(), "jsonl")


def fmt(d: Decimal) -> str:
    """An amount as the server writes it: plain notation for moderate exponents, else
    scientific; equal values give equal text."""
    if d.is_infinite():
        return "Infinity" if d > 0 else "-Infinity"
    if d.is_zero():
        return "0"
    n = d.normalize(Context(prec=len(d.as_tuple().digits)))  # exact: no digit is dropped
    if -20 <= n.adjusted() <= 20:
        return format(n, "f")
    return format(n, "E").replace("E+", "E")
