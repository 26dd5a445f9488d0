"""Ledger exports written by the client, in the formats the offline verifier reads.

- ``json``: ``{"dataset_id", "entries": [...]}``;
- ``jsonl``: one compact entry per line;
- ``csv``: a header row (the entry's fields in the server's order), then one row per entry;
  objects as compact JSON text, null as an empty cell.

Entries are written exactly as the server sent them (every amount a decimal string, fields in
the hashed order), so ``odometer verify`` recomputes the same hashes. The writer streams: an
export of any length needs memory for one page. ``tests/client/test_exports.py`` holds the
output byte for byte against the ledger format of the accounting core.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from decimal import Context, Decimal
from typing import IO, Any, Literal

ExportFormat = Literal["json", "jsonl", "csv"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("json", "jsonl", "csv")


def compact(value: Any) -> str:
    """Compact JSON text (no spaces, UTF-8 kept as is)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return compact(value)
    return str(value)


class ExportWriter:
    """Writes one export entry by entry (the clients feed it page by page)."""

    def __init__(self, dataset_id: str, out: IO[str], format: ExportFormat) -> None:
        if format not in EXPORT_FORMATS:
            raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}")
        self.format = format
        self.count = 0
        self._out = out
        self._csv = csv.writer(out, lineterminator="\n")
        self._columns: list[str] = []
        if format == "json":
            out.write(f'{{"dataset_id":{compact(dataset_id)},"entries":[')

    def write(self, entry: Mapping[str, Any]) -> None:
        if self.format == "jsonl":
            self._out.write(compact(entry) + "\n")
        elif self.format == "json":
            self._out.write(("," if self.count else "") + "\n" + compact(entry))
        else:
            if not self._columns:
                self._columns = list(entry)
                self._csv.writerow(self._columns)
            self._csv.writerow([_cell(entry.get(c)) for c in self._columns])
        self.count += 1

    def close(self) -> int:
        """Finish the document; how many entries were written."""
        if self.format == "json":
            self._out.write("\n]}\n")
        return self.count


def write_export(
    dataset_id: str, entries: Iterable[Mapping[str, Any]], out: IO[str], format: ExportFormat
) -> int:
    """Stream ``entries`` to ``out``; returns how many were written."""
    writer = ExportWriter(dataset_id, out, format)
    for entry in entries:
        writer.write(entry)
    return writer.close()


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
