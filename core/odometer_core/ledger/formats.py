"""The ledger's export formats — JSON, JSON lines and CSV — written once and read once.

Used by the API's export route (streamed in chunks), the CLI (``odometer export``, ``verify``,
``replay``), the Python client and the benchmarks. Every format carries each entry exactly as
hashed (:data:`CSV_COLUMNS`: the payload fields, then ``hash``):

- ``json``: ``{"dataset_id", "entries": [...]}`` (the server's page document adds
  ``head_seq`` and ``next_after_seq``), or a bare list of entries;
- ``jsonl``: one compact entry per line;
- ``csv``: one header row, then one row per entry; objects as compact JSON text, null as an
  empty cell.

An export file ends with its **closing head** (:data:`HEAD_KEY`): the dataset's head when the
export was written, ``{"dataset_id", "seq", "head_hash", "signed_at", "key_id", "algorithm",
"signature"}``, signed by the operator's checkpoint key (the statement of
:mod:`odometer_core.ledger.checkpoints`) or with ``signature`` null when the service signs no
heads. It is the last line of JSON lines (``{"head": {...}}``), the ``head`` member of the JSON
document, and in CSV a last row whose first cell is ``#head`` and second the head as compact
JSON. Readers set it apart from the entries (``odometer verify`` checks it pins the end;
everything else drops it); exports written before it existed have none.
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
#: The member (JSON lines, JSON) holding an export's closing head, and its CSV row's first cell.
HEAD_KEY = "head"
CSV_HEAD_MARK = "#head"


def is_head(row: Mapping[str, Any]) -> bool:
    """Whether a JSON-lines row is an export's closing head (``{"head": {...}}``), not an entry."""
    return len(row) == 1 and isinstance(row.get(HEAD_KEY), dict)


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
    dataset_id: str,
    entries: Iterable[Mapping[str, Any]],
    format: ExportFormat,
    head: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
) -> Iterator[str]:
    """An export file, streamed in chunks of about :data:`CHUNK_CHARS`: the one writer of the
    three formats (:func:`write_export`, the server's ``GET …/ledger?export=true`` that the
    client's ``export()`` saves as received, and the CSV pages of ``GET …/ledger``); ``head``
    (or a function giving it, asked once the entries are written) closes the file."""
    if format not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}")
    return _chunks(dataset_id, entries, format, head)


def _chunks(
    dataset_id: str,
    entries: Iterable[Mapping[str, Any]],
    format: ExportFormat,
    head: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None,
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
    closing = head() if callable(head) else head
    if closing is None:
        if format == "json":
            buffer.write("\n]}\n")
    elif format == "jsonl":
        buffer.write(compact({HEAD_KEY: dict(closing)}) + "\n")
    elif format == "json":
        buffer.write(f"\n],{compact(HEAD_KEY)}:{compact(dict(closing))}}}\n")
    else:
        writer.writerow([CSV_HEAD_MARK, compact(dict(closing))])
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
    dataset_id: str,
    entries: Iterable[Mapping[str, Any]],
    out: IO[str],
    format: ExportFormat,
    head: Mapping[str, Any] | None = None,
) -> int:
    """Stream ``entries`` to ``out`` (:func:`export_chunks`), closed by ``head`` if given;
    returns how many entries were written."""
    counted = _Counted(entries)
    for chunk in export_chunks(dataset_id, counted, format, head):
        out.write(chunk)
    return counted.count


def json_page_chunks(
    dataset_id: str,
    head_seq: int,
    entries: Iterable[Mapping[str, Any]],
    next_after_seq: Callable[[], int | None],
    trailing: Callable[[], Mapping[str, Any]] | None = None,
) -> Iterator[str]:
    """``{"dataset_id", "head_seq", "entries": [...], "next_after_seq", …}``, streamed (the
    server's page document). ``next_after_seq`` and ``trailing`` are asked for once the entries
    are consumed; ``trailing``'s members close the document, in their order (the server's
    ``shown``, which it collects while the entries stream)."""
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
    parts.append(f'],"next_after_seq":{compact(next_after_seq())}')
    for key, value in (trailing() if trailing is not None else {}).items():
        parts.append(f",{compact(key)}:{compact(value)}")
    parts.append("}")
    yield "".join(parts)


def csv_chunks(entries: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """One header row, then one row per entry (columns: the hashed fields, then ``hash``): a
    CSV page is a CSV export of its entries."""
    return export_chunks("", entries, "csv")


# ---------------------------------------------------------------------------- reading
def jsonl_entries(text: str) -> list[dict[str, Any]] | None:
    """The entries of a JSON-lines export, or ``None`` if ``text`` is not one (its closing
    head dropped: :func:`load_export_and_head` keeps it)."""
    found = _jsonl_entries_and_head(text)
    return None if found is None else found[0]


def _jsonl_entries_and_head(
    text: str,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None] | None:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not all(line.lstrip().startswith("{") for line in lines):
        return None
    try:
        rows = [json.loads(line) for line in lines]
    except json.JSONDecodeError:
        return None  # a JSON document spread over lines, not JSON lines
    head = rows.pop()[HEAD_KEY] if isinstance(rows[-1], dict) and is_head(rows[-1]) else None
    if rows and all(isinstance(r, dict) and "seq" in r and "hash" in r for r in rows):
        return rows, head
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
    else (whether the entries themselves are right is the replay's to say). The closing head
    is dropped (:func:`load_export_and_head` keeps it)."""
    return load_export_and_head(text)[0]


def load_export_and_head(text: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """:func:`load_export`'s entries and the export's closing head (``None`` if it has none;
    whatever it holds is ``odometer verify``'s to judge)."""
    if not text.strip():
        raise NotAnExport("it is empty")
    found = _jsonl_entries_and_head(text)
    if found is not None:
        return found
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
        head = doc.get(HEAD_KEY) if isinstance(doc, dict) else None
        return entries, head if isinstance(head, dict) else None
    return _csv_entries_and_head(text)


def entries_from_csv(text: str) -> list[dict[str, Any]]:
    return _csv_entries_and_head(text)[0]


def _csv_entries_and_head(text: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames != list(CSV_COLUMNS):
        raise NotAnExport("neither JSON nor CSV with an export's columns")
    entries: list[dict[str, Any]] = []
    head: dict[str, Any] | None = None
    for row in reader:
        if row.get(CSV_COLUMNS[0]) == CSV_HEAD_MARK:
            parsed = json.loads(row.get(CSV_COLUMNS[1]) or "null")
            head = parsed if isinstance(parsed, dict) else None
            continue
        if head is not None:
            raise NotAnExport("a row after the export's closing head")
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
    return entries, head


class UnreadableLine(ValueError):
    """A line of a JSON-lines export that is not one ledger entry (or holds a binary float)."""

    def __init__(self, number: int, reason: str) -> None:
        super().__init__(f"line {number}: not a ledger entry: {reason}")
        self.number = number


def iter_jsonl_export(
    lines: Iterable[str], *, strict: bool = False, heads: list[dict[str, Any]] | None = None
) -> Iterator[dict[str, Any]]:
    """The entries of a JSON-lines export, parsed one line at a time (bounded memory).

    ``strict=True`` parses with :func:`loads_strict` (binary floats refused while parsing, so
    the chain walk needs no float check) and raises :class:`UnreadableLine` with the line's
    number for anything that is not one JSON object, or for a line after the closing head.
    The closing head is not yielded: it is appended to ``heads`` when given.
    """
    parse = loads_strict if strict else json.loads
    closed = False
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
        if closed and strict:
            raise UnreadableLine(number, "a line after the export's closing head")
        if is_head(row):
            closed = True
            if heads is not None:
                heads.append(row[HEAD_KEY])
            continue
        yield row


def looks_like_jsonl(first_line: str) -> bool:
    """True if the first line of an export is a whole entry (JSON lines), not the start of a
    JSON document or a CSV header."""
    try:
        row = json.loads(first_line)
    except json.JSONDecodeError:
        return False
    return isinstance(row, dict) and "seq" in row and "hash" in row
