"""Wire formats of a ledger page (JSON document or CSV), produced chunk by chunk."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from app.ledger_chain import PAYLOAD_FIELDS
from app.services.ledger import LedgerPage

CSV_COLUMNS = (*PAYLOAD_FIELDS, "hash")


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


#: Chunk size of the streamed formats. Starlette pulls each chunk of a synchronous iterator
#: through the thread pool, so one chunk per entry cost a thread hop per entry (export of
#: 10^6 entries: minutes); chunks of this size keep the hops rare and the memory bounded.
CHUNK_CHARS = 64 * 1024


def json_chunks(page: LedgerPage) -> Iterator[str]:
    """``{"dataset_id", "head_seq", "entries": [...], "next_after_seq"}``, streamed."""
    parts = [f'{{"dataset_id":{_compact(page.dataset_id)},"head_seq":{page.head_seq},"entries":[']
    size, separator = 0, ""
    for entry in page:
        text = separator + _compact(entry)
        parts.append(text)
        size += len(text)
        separator = ","
        if size > CHUNK_CHARS:
            yield "".join(parts)
            parts, size = [], 0
    parts.append(f'],"next_after_seq":{_compact(page.next_after_seq)}}}')
    yield "".join(parts)


def csv_cell(value: Any) -> str:
    """Objects as compact JSON text, ``None`` as an empty cell, the rest as text."""
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return _compact(value)
    return str(value)


def csv_chunks(page: LedgerPage) -> Iterator[str]:
    """One header row, then one row per entry (columns: the hashed fields, then ``hash``)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for entry in page:
        writer.writerow([csv_cell(entry[c]) for c in CSV_COLUMNS])
        if buffer.tell() > CHUNK_CHARS:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()
