"""The ledger package: one builder chains entries, every export format reads back what it wrote."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import cast

import pytest

from odometer_core.accounting import ACCOUNTING_VERSION
from odometer_core.accounting.json_types import LevelPart
from odometer_core.ledger import GENESIS_HASH, ChainWalker, Entry, EntryKind, entry_hash, next_entry
from odometer_core.ledger.formats import (
    CHUNK_CHARS,
    CSV_COLUMNS,
    EXPORT_FORMATS,
    compact,
    csv_chunks,
    export_chunks,
    load_export,
    write_export,
)

ROOT = Path(__file__).resolve().parents[2]


def _chain(n: int) -> list[Entry]:
    entries: list[Entry] = []
    head: tuple[int, str | None] = (0, None)
    for i in range(n):
        kind = EntryKind.DATASET_CREATED if i == 0 else EntryKind.INVOCATION_ACCEPTED
        entry = next_entry(
            dataset_id="ds_1",
            head_seq=head[0],
            head_hash=head[1],
            kind=kind,
            actor="admin",
            at=f"2026-11-24T00:00:{i:02d}.000000Z",
            accounting_version=ACCOUNTING_VERSION,
            state={"spent_epsilon": f"0.{i}", "note": 'ünïcode, "quotes", commas'},
            invocation_id=None if i == 0 else f"inv_{i}",
            declaration=None if i == 0 else {"type": "pure_dp", "epsilon": "0.1"},
            charge=None if i == 0 else {"epsilon": "0.1", "delta": "0"},
            org=cast(LevelPart, {"id": "org_1"}) if i == 3 else None,  # a part cut short
        )
        entries.append(entry)
        head = (entry.seq, entry.hash)
    return entries


def test_the_builder_chains_and_hashes_as_the_verifier_does() -> None:
    entries = _chain(5)
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
    assert entries[0].prev_hash == GENESIS_HASH
    assert [e.prev_hash for e in entries[1:]] == [e.hash for e in entries[:-1]]
    for e in entries:
        assert e.hash == entry_hash(e.to_export())
    walker = ChainWalker()
    assert [p for e in entries for p in walker.check(e.to_export())] == []
    # org/quota are hashed only when set: an entry without them hashes as if they were absent
    exported = entries[1].to_export()
    del exported["org"], exported["quota"]
    assert entry_hash(exported) == entries[1].hash


def test_a_changed_field_changes_the_hash() -> None:
    entry = _chain(2)[1].to_export()
    entry["charge"] = {"epsilon": "0.01", "delta": "0"}
    assert entry_hash(entry) != entry["hash"]


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
def test_every_export_format_reads_back_the_same_entries(fmt: str) -> None:
    entries = [e.to_export() for e in _chain(6)]
    out = io.StringIO()
    assert write_export("ds_1", entries, out, fmt) == 6  # type: ignore[arg-type]
    assert load_export(out.getvalue()) == entries


def test_the_formats_have_one_writer_whose_chunks_make_the_file() -> None:
    """``export_chunks`` (the server's export and CSV pages, saved as is by the client) and
    ``write_export`` give the same bytes, in the framing the verifier and users rely on."""
    entries = [e.to_export() for e in _chain(3)]
    lines = [compact(e) for e in entries]
    expected = {
        "json": '{"dataset_id":"ds_1","entries":[\n' + ",\n".join(lines) + "\n]}\n",
        "jsonl": "".join(line + "\n" for line in lines),
    }
    for fmt in EXPORT_FORMATS:
        out = io.StringIO()
        assert write_export("ds_1", entries, out, fmt) == 3
        assert "".join(export_chunks("ds_1", entries, fmt)) == out.getvalue()
        if fmt in expected:
            assert out.getvalue() == expected[fmt]
        else:
            assert out.getvalue().split("\n", 1)[0] == ",".join(CSV_COLUMNS)
            assert "".join(csv_chunks(entries)) == out.getvalue()
    assert write_export("ds_1", [], io.StringIO(), "jsonl") == 0
    with pytest.raises(ValueError, match="format must be one of"):
        export_chunks("ds_1", entries, "xml")  # type: ignore[arg-type]
    # a long export comes in several chunks of bounded size, joined to the same file
    many = entries * (3 * CHUNK_CHARS // len(lines[0]))
    chunks = list(export_chunks("ds_1", many, "json"))
    assert len(chunks) > 2 and max(map(len, chunks)) < 2 * CHUNK_CHARS
    out = io.StringIO()
    write_export("ds_1", many, out, "json")
    assert "".join(chunks) == out.getvalue()


def test_entry_kinds_are_exactly_what_the_code_writes() -> None:
    """Every member is a kind some code path writes, and the service writes no other kind."""
    assert [str(k) for k in EntryKind] == [
        "dataset_created",
        "budget_changed",
        "invocation_accepted",
        "invocation_reserved",
        "invocation_rejected",
        "invocation_settled",
        "invocation_cancelled",
        "grant_changed",
        "blocks_opened",
        "blocks_retired",
        "loss_acknowledged",
    ]
    for status in ("accepted", "reserved", "rejected", "settled", "cancelled"):
        assert EntryKind.for_invocation(status) == f"invocation_{status}"
    with pytest.raises(ValueError):
        EntryKind.for_invocation("refunded")
    # no bare kind strings left in the server, the client or the benchmarks
    pattern = re.compile(
        r"[\"'](?:dataset_created|budget_changed|grant_changed|blocks_(?:opened|retired)|"
        r"loss_acknowledged|"
        r"invocation_"
        r"(?:accepted|reserved|rejected|settled|cancelled))[\"']"
    )
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("app", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        if path.name != "entry.py" and pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == ["app/schemas/ledger.py"]  # the OpenAPI literal, checked against the enum
