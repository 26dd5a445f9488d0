"""Prefill a dataset's ledger with N valid, hash-chained entries, straight into the database.

Going through the API would take hours for 10^6 entries; the rows here are the ones the
service itself would have written (:mod:`benchmarks.ledger_gen` builds each entry with the
service's accounting calls and hash), and the ``datasets`` row is left exactly as
``append_entry`` leaves it after the last one (``last_seq``, ``head_hash``, ``state_json``,
``config_json``, ``merkle_json``: the Merkle frontier of revision 0012), so the running service
continues the chain as if it had written them.
"""

from __future__ import annotations

import json
import pickle
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.ledger_gen import DATASET_NAME, generate
from odometer_core.ledger.chain import PAYLOAD_FIELDS
from odometer_core.ledger.merkle import Frontier, entry_leaf_hash

_JSON_FIELDS = frozenset(
    {"declaration", "request", "charge", "requested", "refund", "reservation", "config",
     "state", "org", "quota"}
)  # fmt: skip
COLUMNS = (*PAYLOAD_FIELDS, "hash")


def _row(entry: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(
        (None if entry[c] is None else json.dumps(entry[c])) if c in _JSON_FIELDS else entry[c]
        for c in COLUMNS
    )


class _Tracker:
    """Follows the generated entries and remembers what the dataset row must hold."""

    def __init__(self) -> None:
        self.first: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None
        self.config: dict[str, Any] | None = None
        self.frontier = Frontier()

    def rows(self, entries: Iterator[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
        for e in entries:
            if self.first is None:
                self.first = e
            if e["config"] is not None:
                self.config = e["config"]
            self.last = e
            self.frontier.append(entry_leaf_hash(e["hash"]))
            yield _row(e)

    def dataset_values(self) -> dict[str, Any]:
        assert self.first is not None and self.last is not None and self.config is not None
        return {
            "config_json": json.dumps(self.config),
            "state_json": json.dumps(self.last["state"]),
            "last_seq": self.last["seq"],
            "head_hash": self.last["hash"],
            "updated_at": self.last["at"],
            "merkle_json": json.dumps(self.frontier.to_json()),
        }


def _wait_for_writer(cache: Path, limit_s: float = 1800) -> None:
    """Another run (or a pre-generation) still writing this cache: wait for it rather than
    write the same file twice (a partial file untouched for a minute is a dead writer's)."""
    partial = cache.with_suffix(".partial")
    deadline = time.monotonic() + limit_s
    while not cache.exists() and time.monotonic() < deadline:
        try:
            if time.time() - partial.stat().st_mtime > 60:
                return
        except FileNotFoundError:
            return
        time.sleep(2)


def _entries(dataset_id: str, n: int, cache: Path | None) -> Iterator[dict[str, Any]]:
    """The n entries of ``dataset_id``; with ``cache``, generated once and then read back
    (generation costs ~0.1 ms per entry, so the second backend reuses the first's)."""
    if cache is not None:
        _wait_for_writer(cache)
    if cache is not None and cache.exists():
        with cache.open("rb") as f:
            while True:
                try:
                    batch: list[dict[str, Any]] = pickle.load(f)
                except EOFError:
                    return
                yield from batch
    entries = generate(n, seed=n, dataset_id=dataset_id, start=datetime(2026, 1, 1, tzinfo=UTC))
    if cache is None:
        yield from entries
        return
    partial = cache.with_suffix(".partial")
    with partial.open("wb") as f:
        batch = []
        for e in entries:
            batch.append(e)
            if len(batch) >= 10_000:
                pickle.dump(batch, f, protocol=pickle.HIGHEST_PROTOCOL)
                yield from batch
                batch = []
        pickle.dump(batch, f, protocol=pickle.HIGHEST_PROTOCOL)
        yield from batch
    partial.rename(cache)


_PLACEHOLDER = json.dumps({})
_INSERT_DATASET = (
    "INSERT INTO datasets (id, name, organisation, relation, mode, config_json, state_json, "
    "last_seq, head_hash, created_by, created_at, updated_at) "
    "VALUES ({p}, {p}, 'default', 'add_remove', 'basic', {p}, {p}, 0, {p}, 'admin', {p}, {p})"
)
_UPDATE_DATASET = (
    "UPDATE datasets SET config_json = {p}, state_json = {p}, last_seq = {p}, head_hash = {p}, "
    "updated_at = {p}, merkle_json = {p} WHERE id = {p}"
)


def _dataset_params(dataset_id: str) -> tuple[Any, ...]:
    at = "2026-01-01T00:00:00.000000Z"
    return (dataset_id, DATASET_NAME, _PLACEHOLDER, _PLACEHOLDER, "0" * 64, at, at)


def _update_params(tracker: _Tracker, dataset_id: str) -> tuple[Any, ...]:
    v = tracker.dataset_values()
    return (v["config_json"], v["state_json"], v["last_seq"], v["head_hash"], v["updated_at"],
            v["merkle_json"], dataset_id)  # fmt: skip


def prefill_postgres(url: str, dataset_id: str, n: int, cache: Path | None = None) -> None:
    """One transaction: the dataset row, ``COPY`` of n entries, the row's final head."""
    import psycopg

    tracker = _Tracker()
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.execute(_INSERT_DATASET.format(p="%s"), _dataset_params(dataset_id))
        with cur.copy(f"COPY ledger_entries ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for row in tracker.rows(_entries(dataset_id, n, cache)):
                copy.write_row(row)
        cur.execute(_UPDATE_DATASET.format(p="%s"), _update_params(tracker, dataset_id))
        conn.commit()


def prefill_sqlite(path: str, dataset_id: str, n: int, cache: Path | None = None) -> None:
    """The same on SQLite, in batches of ``executemany`` inside one transaction."""
    tracker = _Tracker()
    conn = sqlite3.connect(path, isolation_level=None, timeout=60)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_INSERT_DATASET.format(p="?"), _dataset_params(dataset_id))
        insert = (
            f"INSERT INTO ledger_entries ({', '.join(COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(COLUMNS))})"
        )
        batch: list[tuple[Any, ...]] = []
        for row in tracker.rows(_entries(dataset_id, n, cache)):
            batch.append(row)
            if len(batch) >= 10_000:
                conn.executemany(insert, batch)
                batch.clear()
        if batch:
            conn.executemany(insert, batch)
        conn.execute(_UPDATE_DATASET.format(p="?"), _update_params(tracker, dataset_id))
        conn.execute("COMMIT")
    finally:
        conn.close()
