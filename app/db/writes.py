"""The write statement: everything one write transaction changes, written at once.

A transaction stages its rows in a :class:`Writes` (ledger entries, invocation rows,
idempotency records, signed checkpoints, the invocations it finished) and moves the levels' rows
it locked (:mod:`app.db.rows`); :func:`write` writes all of it. On PostgreSQL that is one
statement, every insert and update but the last a data-modifying common table expression of
the last, queued in a pipelined transaction to go out with its ``COMMIT``
(:class:`app.db.driver.PipelinedTransaction`); SQLite has no data-modifying CTEs, but it is in
the process: there each insert or update is its own statement, and round trips cost nothing.

Every ledger entry and signed checkpoint is inserted here: the ORM's units of work (datasets,
budget changes, grants, checkpoints signed on demand) write theirs through :func:`write` too,
on their session's connection (:func:`app.services._aggregate.append_entry`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, Final, TypeAlias, TypedDict, cast

from sqlalchemy import Connection, Table

from app.db.blocks import BlockWindow
from app.db.driver import dump, json_columns, json_param, param, run_writes
from app.db.models import (
    Dataset,
    Grant,
    IdempotencyRecord,
    Invocation,
    LedgerCheckpoint,
    LedgerEntry,
    Organisation,
)
from app.db.rows import DatasetRow, GrantRow, InvocationRow, OrgRow
from odometer_core.accounting.json_types import CheckpointRecord, ExportedEntry, InvocationRecord

_DATASETS = cast(Table, Dataset.__table__)
_ORGS = cast(Table, Organisation.__table__)
_GRANTS = cast(Table, Grant.__table__)
_LEDGER = cast(Table, LedgerEntry.__table__)
_INVOCATIONS = cast(Table, Invocation.__table__)
_IDEMPOTENCY = cast(Table, IdempotencyRecord.__table__)
_CHECKPOINTS = cast(Table, LedgerCheckpoint.__table__)


#: An ``invocations`` row as a registration stages it, by column name
#: (:class:`app.db.models.Invocation`): as the core records it
#: (:func:`odometer_core.ledger.admission.admit`).
InvocationInsert: TypeAlias = InvocationRecord


class IdempotencyInsert(TypedDict):
    """An ``idempotency_keys`` row: the response stored under a caller's key
    (:class:`app.db.models.IdempotencyRecord`)."""

    principal_id: str
    key: str
    fingerprint: str
    dataset_id: str
    outcome: str
    response_body: str
    created_at: str


#: A ``ledger_checkpoints`` row: a signed statement of a chain head
#: (:class:`app.db.models.LedgerCheckpoint`), as the core signs it
#: (:meth:`odometer_core.ledger.checkpoints.Signer.checkpoint`).
CheckpointInsert: TypeAlias = CheckpointRecord


@dataclass(slots=True)
class Writes:
    """Everything one write transaction changes, written by :func:`write` at once."""

    #: ledger entries as the core exports them (``Entry.to_export``), by column name
    ledger: list[ExportedEntry] = field(default_factory=list)
    invocations: list[InvocationInsert] = field(default_factory=list)
    idempotency: list[IdempotencyInsert] = field(default_factory=list)
    checkpoints: list[CheckpointInsert] = field(default_factory=list)
    finished: list[InvocationRow] = field(default_factory=list)
    #: partitioned datasets' runs rewritten (:mod:`app.db.blocks`), written first
    blocks: list[BlockWindow] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.ledger or self.idempotency)


_LEDGER_COLUMNS: Final = tuple(c.name for c in _LEDGER.columns if c.name != "id")
_INVOCATION_COLUMNS: Final = tuple(c.name for c in _INVOCATIONS.columns)
_IDEMPOTENCY_COLUMNS: Final = tuple(c.name for c in _IDEMPOTENCY.columns if c.name != "id")
_CHECKPOINT_COLUMNS: Final = tuple(c.name for c in _CHECKPOINTS.columns if c.name != "id")
_INSERTS: Final = {
    "l": (_LEDGER.name, _LEDGER_COLUMNS),
    "i": (_INVOCATIONS.name, _INVOCATION_COLUMNS),
    "k": (_IDEMPOTENCY.name, _IDEMPOTENCY_COLUMNS),
    "c": (_CHECKPOINTS.name, _CHECKPOINT_COLUMNS),
}
_FINISHED_COLUMNS: Final = ("status", "cell", "charge", "refund", "updated_at")
_DATASET_COLUMNS: Final = ("state_json", "last_seq", "head_hash", "merkle_json", "updated_at")
#: The updates by statement prefix: table, columns set, key column
_UPDATES: Final = {
    "f": (_INVOCATIONS.name, _FINISHED_COLUMNS, "id"),
    "o": (_ORGS.name, ("cap_state_json", "cap_seq", "cap_config_seq", "cap_usage_json"), "id"),
    "g": (_GRANTS.name, ("quota_state_json",), "id"),
    "d": (_DATASETS.name, _DATASET_COLUMNS, "id"),
}
#: JSON columns by statement prefix
_JSON: Final = {
    "l": json_columns(_LEDGER),
    "i": json_columns(_INVOCATIONS),
    "f": json_columns(_INVOCATIONS),
    "d": json_columns(_DATASETS),
    "o": json_columns(_ORGS),
    "g": json_columns(_GRANTS),
    "k": frozenset[str](),
    "c": frozenset[str](),
}


def _block_parts(dialect: str, prefix: str, r: int) -> str:
    """A part of a window of a partitioned dataset's runs rewritten (:class:`BlockWindow`):
    ``x``, the runs that start at ``gone`` deleted; ``b``, the new runs inserted or, where a run
    starts at the same block, updated. The two touch different rows, so on PostgreSQL they are
    parts of the one write statement; the blocks travel as one JSON array parameter."""
    p = partial(param, dialect)
    d, values = p(f"{prefix}{r}_dataset"), p(f"{prefix}{r}_values")
    if dialect == "postgresql":
        elements = f"jsonb_array_elements(CAST({values} AS jsonb)) AS r"
        if prefix == "x":
            return (
                f"DELETE FROM block_runs WHERE dataset_id = {d}"
                f" AND lo IN (SELECT (r #>> '{{}}')::bigint FROM {elements})"
            )
        rows = f"SELECT {d}, (r->>0)::bigint, (r->>1)::bigint, (r->2)::json FROM {elements}"
    else:
        if prefix == "x":
            return (
                f"DELETE FROM block_runs WHERE dataset_id = {d}"
                f" AND lo IN (SELECT value FROM json_each({values}))"
            )
        rows = (
            f"SELECT {d}, json_extract(value, '$[0]'), json_extract(value, '$[1]'),"
            f" json_extract(value, '$[2]') FROM json_each({values}) WHERE true"
        )
    return (
        f"INSERT INTO block_runs (dataset_id, lo, hi, state_json) {rows}"
        " ON CONFLICT (dataset_id, lo) DO UPDATE SET hi = excluded.hi,"
        " state_json = excluded.state_json"
    )


def _value(dialect: str, prefix: str, column: str, name: str) -> str:
    if column in _JSON[prefix]:
        return json_param(dialect, name)
    return param(dialect, name)


#: A part of a write's shape: its prefix, its number of rows, and (a single row on SQLite) the
#: columns whose value is ``None``, written ``NULL`` in the statement (:func:`write`).
Shape = tuple[tuple[str, int, tuple[str, ...]], ...]


@lru_cache(maxsize=1024)
def _write_sql(dialect: str, shape: Shape) -> tuple[str, ...]:
    """The statements of a write of ``shape`` (prefix, rows, NULL columns): the inserts, the
    invocations finished, the organisation's and grants' new states, the dataset's new head.
    PostgreSQL: one statement, every part but the last a data-modifying CTE of the last (each
    runs, exactly once, whether or not the last refers to it)."""
    parts: list[str] = []
    for prefix, n, nulls in shape:
        if prefix in ("x", "b"):
            parts.extend(_block_parts(dialect, prefix, r) for r in range(n))
            continue
        if prefix in _INSERTS:
            table, columns = _INSERTS[prefix]
            names = ", ".join(f'"{c}"' for c in columns)
            rows = ", ".join(
                "("
                + ", ".join(
                    "NULL" if c in nulls else _value(dialect, prefix, c, f"{prefix}{r}_{c}")
                    for c in columns
                )
                + ")"
                for r in range(n)
            )
            parts.append(f"INSERT INTO {table} ({names}) VALUES {rows}")
            continue
        table, columns, key = _UPDATES[prefix]
        for r in range(n):
            sets = ", ".join(
                f'"{c}" = '
                + ("NULL" if c in nulls else _value(dialect, prefix, c, f"{prefix}{r}_{c}"))
                for c in columns
            )
            parts.append(
                f"UPDATE {table} SET {sets} WHERE {key} = {param(dialect, f'{prefix}{r}_key')}"
            )
    if dialect != "postgresql" or len(parts) == 1:
        return tuple(parts)
    *ctes, last = parts
    return ("WITH " + ", ".join(f"w{i} AS ({sql})" for i, sql in enumerate(ctes)) + f" {last}",)


def write(
    conn: Connection,
    writes: Writes,
    datasets: Sequence[DatasetRow] = (),
    org: OrgRow | None = None,
    grants: Sequence[GrantRow] = (),
) -> None:
    """Write ``writes`` and the levels' new states (of one dataset or several; none when the
    caller's levels are ORM objects that its session flushes): one statement on PostgreSQL,
    its block windows included."""
    params: dict[str, Any] = {}
    shape: list[tuple[str, int, tuple[str, ...]]] = []
    dialect = conn.dialect.name
    # SQLite: a row's None values are written NULL in the statement's text rather than bound.
    # The sqlite3 module adapts every bound None through its adapter protocol, which looks up
    # ``__adapt__`` on its protocol type and fails with an AttributeError raised and cleared:
    # a few thousand instructions per None, 11 a registration. One row per part only, so the
    # statement texts stay few (a part's NULL columns follow the entry's kind).
    literal_nulls = dialect == "sqlite"
    gone = [(w.dataset_id, list(w.gone)) for w in writes.blocks if w.gone]
    runs = [(w.dataset_id, [list(run) for run in w.runs]) for w in writes.blocks if w.runs]
    for prefix, windows in (("x", gone), ("b", runs)):
        for r, (dataset_id, values) in enumerate(windows):
            params[f"{prefix}{r}_dataset"] = dataset_id
            params[f"{prefix}{r}_values"] = dump(values)
        if windows:
            shape.append((prefix, len(windows), ()))

    # A JSON value written in two rows (an entry's declaration, request, charge and state are
    # its invocation's and its dataset's too, the same objects) is encoded once.
    dumped: dict[int, tuple[object, str | None]] = {}

    def text(value: object) -> str | None:
        known = dumped.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        out = dump(value)
        dumped[id(value)] = (value, out)  # the value kept: its id is not reused meanwhile
        return out

    def rows(prefix: str, items: Sequence[Mapping[str, object]]) -> None:
        if not items:
            return
        as_json = _JSON[prefix]
        if literal_nulls and len(items) == 1:
            nulls: list[str] = []
            for column, value in items[0].items():
                if value is None:
                    nulls.append(column)
                else:
                    params[f"{prefix}0_{column}"] = text(value) if column in as_json else value
            shape.append((prefix, 1, tuple(nulls)))
            return
        for r, item in enumerate(items):
            for column, value in item.items():
                params[f"{prefix}{r}_{column}"] = text(value) if column in as_json else value
        shape.append((prefix, len(items), ()))

    rows("l", writes.ledger)
    rows("i", writes.invocations)
    rows("k", writes.idempotency)
    rows("c", writes.checkpoints)
    rows(
        "f",
        [
            {
                "key": inv.id,
                "status": inv.status,
                "cell": inv.cell,
                "charge": inv.charge,
                "refund": inv.refund,
                "updated_at": inv.updated_at,
            }
            for inv in writes.finished
        ],
    )
    if org is not None and org.dirty:
        rows(
            "o",
            [
                {
                    "key": org.id,
                    "cap_state_json": org.cap_state_json,
                    "cap_seq": org.cap_seq,
                    "cap_config_seq": org.cap_config_seq,
                    "cap_usage_json": org.cap_usage_json,
                }
            ],
        )
    rows("g", [{"key": g.id, "quota_state_json": g.quota_state_json} for g in grants if g.dirty])
    rows(
        "d",
        [
            {
                "key": d.id,
                "state_json": d.state_json,
                "last_seq": d.last_seq,
                "head_hash": d.head_hash,
                "merkle_json": d.merkle_json,
                "updated_at": d.updated_at,
            }
            for d in datasets
            if d.updated_at is not None
        ],
    )
    if not shape:
        return
    run_writes(conn, _write_sql(dialect, tuple(shape)), params)
