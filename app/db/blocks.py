"""The statements of a partitioned dataset's blocks: read the runs a request touches, write back
the runs it changed.

A partitioned dataset's open blocks are rows of ``block_runs``: maximal runs ``[lo, hi)`` of
block indices that share one filter state (:class:`app.db.models.BlockRun`). A request reads the
*window* of runs its selection touches, plus the runs just outside it (their states decide
whether the new runs merge with them), under the dataset's row lock, which serialises every
writer of the dataset's blocks; it decides on that window in memory and writes the window back
as one replacement (:class:`BlockWindow`, written by :func:`app.db.writes.write` with the
transaction's other rows). Runs are read and written as many as the window holds, never one
row per block.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

from sqlalchemy import Connection

from app.db.driver import loader, param, queued, run


@dataclass(frozen=True, slots=True)
class BlockWindow:
    """A window of ``dataset_id``'s runs rewritten: the runs starting at ``gone`` deleted,
    ``runs`` (``[lo, hi, state_json]`` each) inserted, or updated where a run starts at the
    same block. Runs the decisions left as they were are in neither."""

    dataset_id: str
    gone: tuple[int, ...]
    runs: tuple[tuple[int, int, dict[str, Any]], ...]


@lru_cache(maxsize=8)
def _window_sql(dialect: str) -> str:
    p = partial(param, dialect)
    return (
        "SELECT lo, hi, state_json FROM block_runs"
        f" WHERE dataset_id = {p('dataset')} AND lo < {p('hi')} AND lo >= COALESCE("
        f"(SELECT MAX(lo) FROM block_runs WHERE dataset_id = {p('dataset')}"
        f" AND lo <= {p('lo')}), {p('lo')}) ORDER BY lo"
    )


Rows = list[tuple[int, int, dict[str, Any]]]


def read_window(conn: Connection, dataset_id: str, lo: int, hi: int) -> Rows:
    """The runs of ``dataset_id`` that overlap ``[lo, hi)`` (and the run that holds ``lo``,
    which may end before it), in order: two index range scans of the primary key."""
    return queue_window(conn, dataset_id, lo, hi).rows()


@dataclass(frozen=True, slots=True)
class Window:
    """A window of runs asked for (:func:`queue_window`), its rows read on demand."""

    lo: int
    hi: int
    read: Callable[[], list[Any]]
    load: Callable[[Any], Any]

    def covers(self, lo: int, hi: int) -> bool:
        return self.lo <= lo and hi <= self.hi

    def rows(self) -> Rows:
        return [(int(a), int(b), self.load(state)) for a, b, state in self.read()]


def queue_window(conn: Connection, dataset_id: str, lo: int, hi: int) -> Window:
    """:func:`read_window`'s statement sent now, its rows read later: sent right after the
    lock statement, it goes out in the lock's round trip and runs under the lock
    (:func:`app.db.locking.lock_levels`)."""
    params = {"dataset": dataset_id, "lo": lo, "hi": hi}
    return Window(lo, hi, queued(conn, _window_sql(conn.dialect.name), params), loader(conn))


@lru_cache(maxsize=8)
def _page_sql(dialect: str) -> str:
    p = partial(param, dialect)
    return (
        "SELECT lo, hi, state_json FROM block_runs"
        f" WHERE dataset_id = {p('dataset')} AND hi > {p('lo')} AND lo < {p('hi')}"
        f" ORDER BY lo LIMIT {p('limit')}"
    )


def read_page(
    conn: Connection, dataset_id: str, lo: int, hi: int, limit: int
) -> list[tuple[int, int, dict[str, Any]]]:
    """At most ``limit`` runs of ``dataset_id`` overlapping ``[lo, hi)``, in order (a page of
    the per-block status)."""
    params = {"dataset": dataset_id, "lo": lo, "hi": hi, "limit": limit}
    rows = run(conn, _page_sql(conn.dialect.name), params)
    load = loader(conn)
    return [(int(a), int(b), load(state)) for a, b, state in rows]
