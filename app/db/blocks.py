"""The statements of a partitioned dataset's blocks: read the runs a request touches, write back
the runs it changed.

A partitioned dataset's open blocks are rows of ``block_runs``: maximal runs ``[lo, hi)`` of
block indices that share one filter state (:class:`app.db.models.BlockRun`). A request reads the
runs its selection touches, span by span (each selected range and the blocks just outside it,
whose states decide whether the new runs merge with them: ``window_of`` in
:mod:`odometer_core.partition`), in one statement under the dataset's row lock, which
serialises every writer of the dataset's blocks; never the runs between two selected ranges,
so a k-range selection reads O(k) runs by O(k log runs) index searches however fragmented the
dataset is. It decides on those runs in memory and writes back what changed as one replacement
(:class:`BlockWindow`, written by :func:`app.db.writes.write` with the transaction's other
rows), never one row per block.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

from sqlalchemy import Connection

from app.db.driver import loader, param, queued, run
from odometer_core.accounting.json_types import StateJSON


@dataclass(frozen=True, slots=True)
class BlockWindow:
    """A window of ``dataset_id``'s runs rewritten: the runs starting at ``gone`` deleted,
    ``runs`` (``[lo, hi, state_json]`` each) inserted, or updated where a run starts at the
    same block. Runs the decisions left as they were are in neither."""

    dataset_id: str
    gone: tuple[int, ...]
    runs: tuple[tuple[int, int, StateJSON], ...]


@lru_cache(maxsize=8)
def _spans_sql(dialect: str) -> str:
    """Per span ``[a, b)``: the run that holds ``a`` (the last starting at or before it; it may
    end before it) and the runs starting in ``(a, b)``, each by an index search of the primary
    key; every span in one statement, each run once."""
    p = partial(param, dialect)
    if dialect == "postgresql":
        touched = (
            f"SELECT s.lo FROM unnest(CAST({p('a')} AS bigint[]), CAST({p('b')} AS bigint[]))"
            " AS w(a, b) CROSS JOIN LATERAL ("
            f"(SELECT x.lo FROM block_runs x WHERE x.dataset_id = {p('dataset')}"
            " AND x.lo <= w.a ORDER BY x.lo DESC LIMIT 1) UNION ALL"
            f" (SELECT x.lo FROM block_runs x WHERE x.dataset_id = {p('dataset')}"
            " AND x.lo > w.a AND x.lo < w.b)) AS s"
        )
    else:
        a, b = "json_extract(w.value, '$[0]')", "json_extract(w.value, '$[1]')"
        touched = (
            f"SELECT (SELECT x.lo FROM block_runs x WHERE x.dataset_id = {p('dataset')}"
            f" AND x.lo <= {a} ORDER BY x.lo DESC LIMIT 1) FROM json_each({p('spans')}) AS w"
            " UNION ALL"
            f" SELECT x.lo FROM json_each({p('spans')}) AS w CROSS JOIN block_runs x"
            f" ON x.dataset_id = {p('dataset')} AND x.lo > {a} AND x.lo < {b}"
        )
    return (
        "SELECT lo, hi, state_json FROM block_runs"
        f" WHERE dataset_id = {p('dataset')} AND lo IN ({touched}) ORDER BY lo"
    )


Rows = list[tuple[int, int, StateJSON]]
#: Spans of block indices ``[a, b)``, sorted and disjoint (``window_of``'s).
Spans = tuple[tuple[int, int], ...]


def read_window(conn: Connection, dataset_id: str, spans: Spans) -> Rows:
    """The runs of ``dataset_id`` that overlap the ``spans`` (and, per span, the run that holds
    its first block, which may end before it), in order: one statement, two index searches per
    span, never the runs between two spans."""
    return queue_window(conn, dataset_id, spans).rows()


@dataclass(frozen=True, slots=True)
class Window:
    """The runs of some spans asked for (:func:`queue_window`), their rows read on demand."""

    spans: Spans
    read: Callable[[], list[Any]]
    load: Callable[[Any], Any]

    def covers(self, spans: Spans) -> bool:
        """Whether every block of ``spans`` lies in a span read here."""
        starts = [a for a, _ in self.spans]
        for lo, hi in spans:
            at = bisect.bisect_right(starts, lo) - 1
            if at < 0 or self.spans[at][1] < hi:
                return False
        return True

    def rows(self) -> Rows:
        return [(int(a), int(b), self.load(state)) for a, b, state in self.read()]


def _nothing() -> list[Any]:
    return []


def queue_window(conn: Connection, dataset_id: str, spans: Spans) -> Window:
    """:func:`read_window`'s statement sent now, its rows read later: sent right after the
    lock statement, it goes out in the lock's round trip and runs under the lock
    (:func:`app.writepath.locking.lock_levels`). No span: nothing is sent."""
    if not spans:
        return Window(spans, _nothing, loader(conn))
    dialect = conn.dialect.name
    params: dict[str, Any] = {"dataset": dataset_id}
    if dialect == "postgresql":
        params |= {"a": [a for a, _ in spans], "b": [b for _, b in spans]}
    else:
        params["spans"] = json.dumps([[a, b] for a, b in spans])
    return Window(spans, queued(conn, _spans_sql(dialect), params), loader(conn))


@lru_cache(maxsize=8)
def _page_sql(dialect: str) -> str:
    p = partial(param, dialect)
    # from the run that holds ``lo`` on, in the primary key's order: an index range scan that
    # stops at the page's end, however many runs the dataset holds
    return (
        "SELECT lo, hi, state_json FROM block_runs"
        f" WHERE dataset_id = {p('dataset')} AND hi > {p('lo')} AND lo < {p('hi')}"
        f" AND lo >= COALESCE((SELECT x.lo FROM block_runs x WHERE x.dataset_id = {p('dataset')}"
        f" AND x.lo <= {p('lo')} ORDER BY x.lo DESC LIMIT 1), {p('lo')})"
        f" ORDER BY lo LIMIT {p('limit')}"
    )


def read_page(
    conn: Connection, dataset_id: str, lo: int, hi: int, limit: int
) -> list[tuple[int, int, StateJSON]]:
    """At most ``limit`` runs of ``dataset_id`` overlapping ``[lo, hi)``, in order (a page of
    the per-block status)."""
    params = {"dataset": dataset_id, "lo": lo, "hi": hi, "limit": limit}
    rows = run(conn, _page_sql(conn.dialect.name), params)
    load = loader(conn)
    return [(int(a), int(b), load(state)) for a, b, state in rows]


#: The expression ``ix_block_runs_states`` indexes the runs by (revision 0010), per dialect.
_STATE_KEY = {
    "postgresql": "md5(CAST({t}state_json AS text))",
    "sqlite": "CAST({t}state_json AS TEXT)",
}


@lru_cache(maxsize=8)
def _states_sql(dialect: str) -> str:
    """The distinct states of a dataset's runs by a walk of ``ix_block_runs_states``: the
    smallest key, then the smallest above it, … (a recursive query, one index seek per distinct
    state, never a scan of the runs), then one run's state for each key."""
    d = param(dialect, "dataset")
    key, key_b = _STATE_KEY[dialect].format(t=""), _STATE_KEY[dialect].format(t="b.")
    return (
        "WITH RECURSIVE k(v) AS ("
        f"SELECT (SELECT min({key}) FROM block_runs WHERE dataset_id = {d}) "
        "UNION ALL "
        f"SELECT (SELECT min({key_b}) FROM block_runs b WHERE b.dataset_id = {d} "
        f"AND {key_b} > k.v) FROM k WHERE k.v IS NOT NULL) "
        f"SELECT (SELECT CAST(b.state_json AS TEXT) FROM block_runs b WHERE b.dataset_id = {d} "
        f"AND {key_b} = k.v LIMIT 1) FROM k WHERE k.v IS NOT NULL"
    )


def read_states(conn: Connection, dataset_id: str) -> list[StateJSON]:
    """The distinct states of ``dataset_id``'s open runs (one statement; each state sent once,
    however many runs hold it), by one index seek per distinct state (:func:`_states_sql`): a
    status costs the dataset's distinct histories, not its runs."""
    rows = run(conn, _states_sql(conn.dialect.name), {"dataset": dataset_id})
    return [json.loads(state) if isinstance(state, str) else state for (state,) in rows]
