"""The statements of a partitioned dataset's blocks: read the runs a request touches, write back
the runs it changed.

A partitioned dataset's open blocks are rows of ``block_runs``: maximal runs ``[lo, hi)`` of
block indices that share one filter state (:class:`app.db.models.BlockRun`). A request reads the
*window* of runs its selection touches, plus the runs just outside it (their states decide
whether the new runs merge with them), under the dataset's row lock, which serialises every
writer of the dataset's blocks; it decides on that window in memory and writes the window back
as one replacement (:class:`BlockWindow`: delete the runs starting inside it, insert the new
ones). Runs are read and written as many as the window holds, never one row per block.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, Final

from sqlalchemy import Connection

from app.db.driver import dump, loader, param, run

#: Beyond every block index (the window of "every open block").
UNBOUNDED: Final = 2**62


@dataclass(frozen=True, slots=True)
class BlockWindow:
    """Replace the runs of ``dataset_id`` that start in ``[lo, hi)`` by ``runs`` (``[lo, hi,
    state_json]`` each, all within ``[lo, hi)``)."""

    dataset_id: str
    lo: int
    hi: int
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


def read_window(
    conn: Connection, dataset_id: str, lo: int, hi: int
) -> list[tuple[int, int, dict[str, Any]]]:
    """The runs of ``dataset_id`` that overlap ``[lo, hi)`` (and the run that holds ``lo``,
    which may end before it), in order: two index range scans of the primary key."""
    rows = run(conn, _window_sql(conn.dialect.name), {"dataset": dataset_id, "lo": lo, "hi": hi})
    load = loader(conn)
    return [(int(a), int(b), load(state)) for a, b, state in rows]


@lru_cache(maxsize=8)
def _replace_sql(dialect: str) -> tuple[str, str]:
    p = partial(param, dialect)
    delete = (
        f"DELETE FROM block_runs WHERE dataset_id = {p('dataset')}"
        f" AND lo >= {p('lo')} AND lo < {p('hi')}"
    )
    if dialect == "postgresql":
        rows = (
            f"SELECT {p('dataset')}, (r->>0)::bigint, (r->>1)::bigint, (r->2)::json"
            f" FROM jsonb_array_elements(CAST({p('runs')} AS jsonb)) AS r"
        )
    else:
        rows = (
            f"SELECT {p('dataset')}, json_extract(value, '$[0]'), json_extract(value, '$[1]'),"
            f" json_extract(value, '$[2]') FROM json_each({p('runs')})"
        )
    insert = f"INSERT INTO block_runs (dataset_id, lo, hi, state_json) {rows}"
    return delete, insert


def replace_window(conn: Connection, window: BlockWindow) -> None:
    """Write ``window``: two statements, whatever the number of runs (the new runs travel as
    one JSON array)."""
    delete, insert = _replace_sql(conn.dialect.name)
    params = {"dataset": window.dataset_id, "lo": window.lo, "hi": window.hi}
    run(conn, delete, params, rows=False)
    if window.runs:
        runs = dump([[lo, hi, state] for lo, hi, state in window.runs])
        run(conn, insert, {"dataset": window.dataset_id, "runs": runs}, rows=False)


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
