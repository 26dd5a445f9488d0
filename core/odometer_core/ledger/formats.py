"""The ledger's export formats — JSON, JSON lines and CSV — written once and read once.

Used by the API's export route (streamed in chunks), the CLI (``odometer export``, ``verify``,
``replay``), the Python client and the benchmarks. Every format carries each entry exactly as
hashed (:data:`CSV_COLUMNS`: the payload fields, then ``hash``):

- ``json``: ``{"dataset_id", "entries": [...]}`` (the server's page document adds
  ``head_seq`` and ``next_after_seq``), or a bare list of entries;
- ``jsonl``: one compact entry per line;
- ``csv``: one header row, then one row per entry; objects as compact JSON text, null as an
  empty cell.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any, Literal

from odometer_core.ledger.chain import PAYLOAD_FIELDS, loads_strict

ExportFormat = Literal["json", "jsonl", "csv"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("json", "jsonl", "csv")
CSV_COLUMNS: tuple[str, ...] = (*PAYLOAD_FIELDS, "hash")


def compact(value: Any) -> str:
    """Compact JSON text (no spaces, UTF-8 kept as is)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def csv_cell(value: Any) -> str:
    """Objects as compact JSON text, ``None`` as an empty cell, the rest as text."""
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return compact(value)
    return str(value)


# ---------------------------------------------------------------------------- writing
#: Chunk size of the streamed formats. Starlette pulls each chunk of a synchronous iterator
#: through the thread pool, so one chunk per entry cost a thread hop per entry (export of
#: 10^6 entries: minutes); chunks of this size keep the hops rare and the memory bounded.
CHUNK_CHARS = 64 * 1024


def export_chunks(
    dataset_id: str, entries: Iterable[Mapping[str, Any]], format: ExportFormat
) -> Iterator[str]:
    """An export file, streamed in chunks of about :data:`CHUNK_CHARS`: the one writer of the
    three formats (:func:`write_export`, the server's ``GET …/ledger?export=true`` that the
    client's ``export()`` saves as received, and the CSV pages of ``GET …/ledger``)."""
    if format not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}")
    return _chunks(dataset_id, entries, format)


def _chunks(
    dataset_id: str, entries: Iterable[Mapping[str, Any]], format: ExportFormat
) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if format == "json":
        buffer.write(f'{{"dataset_id":{compact(dataset_id)},"entries":[')
    elif format == "csv":
        writer.writerow(CSV_COLUMNS)
    separator = "\n"
    for entry in entries:
        if format == "jsonl":
            buffer.write(compact(entry) + "\n")
        elif format == "json":
            buffer.write(separator + compact(entry))
            separator = ",\n"
        else:
            writer.writerow([csv_cell(entry.get(c)) for c in CSV_COLUMNS])
        if buffer.tell() > CHUNK_CHARS:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    if format == "json":
        buffer.write("\n]}\n")
    if buffer.tell():
        yield buffer.getvalue()


class _Counted:
    def __init__(self, entries: Iterable[Mapping[str, Any]]) -> None:
        self._entries = entries
        self.count = 0

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        for entry in self._entries:
            self.count += 1
            yield entry


def write_export(
    dataset_id: str, entries: Iterable[Mapping[str, Any]], out: IO[str], format: ExportFormat
) -> int:
    """Stream ``entries`` to ``out`` (:func:`export_chunks`); returns how many were written."""
    counted = _Counted(entries)
    for chunk in export_chunks(dataset_id, counted, format):
        out.write(chunk)
    return counted.count


def json_page_chunks(
    dataset_id: str,
    head_seq: int,
    entries: Iterable[Mapping[str, Any]],
    next_after_seq: Callable[[], int | None],
) -> Iterator[str]:
    """``{"dataset_id", "head_seq", "entries": [...], "next_after_seq"}``, streamed (the
    server's page document; ``next_after_seq`` is asked for once the entries are consumed)."""
    parts = [f'{{"dataset_id":{compact(dataset_id)},"head_seq":{head_seq},"entries":[']
    size, separator = 0, ""
    for entry in entries:
        text = separator + compact(entry)
        parts.append(text)
        size += len(text)
        separator = ","
        if size > CHUNK_CHARS:
            yield "".join(parts)
            parts, size = [], 0
    parts.append(f'],"next_after_seq":{compact(next_after_seq())}}}')
    yield "".join(parts)


def csv_chunks(entries: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """One header row, then one row per entry (columns: the hashed fields, then ``hash``): a
    CSV page is a CSV export of its entries."""
    return export_chunks("", entries, "csv")


# ---------------------------------------------------------------------------- reading
def jsonl_entries(text: str) -> list[dict[str, Any]] | None:
    """The entries of a JSON-lines export, or ``None`` if ``text`` is not one."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not all(line.lstrip().startswith("{") for line in lines):
        return None
    try:
        rows = [json.loads(line) for line in lines]
    except json.JSONDecodeError:
        return None  # a JSON document spread over lines, not JSON lines
    if all(isinstance(r, dict) and "seq" in r and "hash" in r for r in rows):
        return rows
    return None


#: Export columns holding JSON objects (empty cell = null).
_OBJECT_COLUMNS = frozenset(
    {
        "declaration",
        "request",
        "charge",
        "requested",
        "refund",
        "reservation",
        "config",
        "state",
        "org",
        "quota",
    }
)
_NULLABLE_TEXT_COLUMNS = frozenset({"invocation_id", "reason"})


class NotAnExport(ValueError):
    """Text that is not a ledger export at all (empty, another JSON document, not JSON nor an
    export's CSV): what is wrong with it, in a few words."""


def load_export(text: str) -> list[dict[str, Any]]:
    """Entries from a JSON export (``{"entries": [...]}`` or a list), a JSON-lines export
    (``odometer export --format jsonl``) or a CSV export; :class:`NotAnExport` for anything
    else (whether the entries themselves are right is the replay's to say)."""
    if not text.strip():
        raise NotAnExport("it is empty")
    rows = jsonl_entries(text)
    if rows is not None:
        return rows
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise NotAnExport(f"not JSON: {exc.msg} at line {exc.lineno}") from None
        except RecursionError:
            raise NotAnExport("JSON nested too deeply") from None
        if isinstance(doc, dict) and "entries" not in doc:
            raise NotAnExport("a JSON object without 'entries'")
        entries = doc["entries"] if isinstance(doc, dict) else doc
        if not isinstance(entries, list):
            raise NotAnExport("a JSON export holds a list of entries")
        if not all(isinstance(entry, dict) for entry in entries):
            raise NotAnExport("its entries are not JSON objects")
        return entries
    return entries_from_csv(text)


def entries_from_csv(text: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames != list(CSV_COLUMNS):
        raise NotAnExport("neither JSON nor CSV with an export's columns")
    entries: list[dict[str, Any]] = []
    for row in reader:
        entry: dict[str, Any] = {}
        for column, cell in row.items():
            if column == "seq":
                entry[column] = int(cell)
            elif column in _OBJECT_COLUMNS:
                entry[column] = json.loads(cell) if cell else None
            elif column in _NULLABLE_TEXT_COLUMNS:
                entry[column] = cell or None
            else:
                entry[column] = cell
        entries.append(entry)
    return entries


class UnreadableLine(ValueError):
    """A line of a JSON-lines export that is not one ledger entry (or holds a binary float)."""

    def __init__(self, number: int, reason: str) -> None:
        super().__init__(f"line {number}: not a ledger entry: {reason}")
        self.number = number


def iter_jsonl_export(lines: Iterable[str], *, strict: bool = False) -> Iterator[dict[str, Any]]:
    """The entries of a JSON-lines export, parsed one line at a time (bounded memory).

    ``strict=True`` parses with :func:`loads_strict` (binary floats refused while parsing, so
    the chain walk needs no float check) and raises :class:`UnreadableLine` with the line's
    number for anything that is not one JSON object.
    """
    parse = loads_strict if strict else json.loads
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = parse(line)
        except ValueError as exc:
            if not strict:
                raise
            raise UnreadableLine(number, str(exc)) from None
        if not isinstance(row, dict):
            if strict:
                raise UnreadableLine(number, "a JSON-lines export holds one object per line")
            raise ValueError(f"line {number}: a JSON-lines export holds one entry per line")
        yield row


def looks_like_jsonl(first_line: str) -> bool:
    """True if the first line of an export is a whole entry (JSON lines), not the start of a
    JSON document or a CSV header."""
    try:
        row = json.loads(first_line)
    except json.JSONDecodeError:
        return False
    return isinstance(row, dict) and "seq" in row and "hash" in row
