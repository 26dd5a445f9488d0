"""The lock statements of register, settle and cancel, in SQL written once per shape.

One statement locks every budget level of an invocation and reads what the decision needs
(:func:`read_levels`; several datasets at once: :func:`read_many_levels`); one more writes
everything the decision changed (:func:`app.db.writes.write`); then the transaction commits. On
PostgreSQL the transaction is pipelined (:class:`app.db.driver.PipelinedTransaction`), so a
request takes two round trips: ``BEGIN`` and the lock, then the write and ``COMMIT``. This
module also reads a caller's stored responses (:func:`stored_responses`), sent right behind
the lock statement (:class:`app.writepath.stored.StoredResponses`).

The ORM is not used here: its identity-map bookkeeping and unit-of-work flushes were CPU spent
on every admission while the budget row was locked (``benchmarks/RESULTS.md``, *The write
path's levers*).

**Locking.** The one statement takes the locks in the fixed order organisation → dataset →
grant (PostgreSQL locks the rows of a ``SELECT … FOR …`` in the order its locking clauses name
them), so writers spending at several levels never wait on each other in a cycle. The
organisation row is shared (``FOR SHARE``) by admissions under an organisation without a cap,
which never write it; it is held alone otherwise. Whether a cap is in force is known only once
the row is read: the caller guesses (:class:`app.writepath.caches.OrganisationModes`) and, when
the guess was ``share`` but a cap is in force, rolls back and locks again alone (a shared lock
must not be upgraded: two sharers upgrading deadlock).

**Visibility before locking.** The statement holds the caller's visibility
(:func:`app.db.visibility.visible`: its organisation; an analyst's grant is joined), so a caller
never locks a dataset it may not see: rows that do not match are never locked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, Final, Literal, cast

from sqlalchemy import BindParameter, Connection, Table, and_, bindparam, select

from app.db.blocks import Window
from app.db.driver import loader, param, run, statement_text
from app.db.models import Dataset, Grant, Invocation, Organisation
from app.db.rows import DatasetRow, GrantRow, InvocationRow, OrgRow
from app.db.visibility import visibility_params, visible

OrgLock = Literal["share", "update"]


@dataclass(frozen=True, slots=True)
class Locked:
    """The levels of one invocation, as locked (``invocation``: when one was asked for and it
    belongs to the dataset)."""

    org: OrgRow
    dataset: DatasetRow
    grant: GrantRow | None
    invocation: InvocationRow | None = None
    #: the runs of a partitioned dataset's spans, asked for with the lock (:class:`Window`)
    window: Window | None = None


@dataclass(frozen=True, slots=True)
class StoredResponse:
    fingerprint: str
    outcome: str
    response_body: str


# ---------------------------------------------------------------------------- statements
_D = cast(Table, Dataset.__table__).alias("d")
_O = cast(Table, Organisation.__table__).alias("o")
_G = cast(Table, Grant.__table__).alias("g")
_I = cast(Table, Invocation.__table__).alias("i")
#: what the lock statement reads of each level, in the order :func:`_locked` takes it
_READ: Final = {
    "d": [
        _D.c[n]
        for n in (
            "id",
            "relation",
            "config_json",
            "state_json",
            "last_seq",
            "head_hash",
            "partition_json",
            "merkle_json",
        )
    ],
    "o": [
        _O.c[n]
        for n in (
            "id",
            "cap_json",
            "cap_state_json",
            "cap_config_json",
            "cap_seq",
            "cap_config_seq",
            "cap_usage_json",
            "cap_closed_json",
        )
    ],
    "g": [
        _G.c[n]
        for n in ("id", "principal_id", "quota_config_json", "quota_state_json", "granted_seq")
    ],
    "i": [
        _I.c[n]
        for n in ("id", "status", "actor", "reservation", "levels", "declaration", "request")
    ],
}


@lru_cache(maxsize=64)
def _lock_sql(
    dialect: str,
    org_lock: OrgLock | None,
    analyst: bool,
    scoped: bool,
    invocation: bool,
    datasets: int = 0,
) -> str:
    """``SELECT`` the organisation, the dataset as the caller may see it (:func:`visible`: for
    an analyst, its grant is joined, no grant, no row) and optionally one invocation of the
    dataset; lock them when ``org_lock`` is given. ``datasets`` > 0: that many datasets
    (parameters ``dataset0``, …), in the order of their ids, which is the order their rows are
    locked in (the locking clause applies to the sorted rows)."""
    columns = [*_READ["d"], *_READ["o"]]
    if analyst:
        columns += _READ["g"]
    if invocation:
        columns += _READ["i"]
    query = select(*columns).select_from(_O.join(_D, _D.c.organisation == _O.c.id))
    query = visible(query, _D, _G, scoped=scoped, analyst=analyst)
    if invocation:
        query = query.outerjoin(
            _I, and_(_I.c.id == bindparam("invocation"), _I.c.dataset_id == _D.c.id)
        )
    if datasets:
        ids: list[BindParameter[Any]] = [bindparam(f"dataset{i}") for i in range(datasets)]
        query = query.where(_D.c.id.in_(ids)).order_by(_D.c.id)
    else:
        query = query.where(_D.c.id == bindparam("dataset"))
    locks = ""
    if org_lock is not None and dialect == "postgresql":
        # written out: SQLAlchemy renders one locking clause a statement, this needs two
        org_clause = "FOR SHARE OF o" if org_lock == "share" else "FOR UPDATE OF o"
        # the locking clauses' order is the lock order: organisation → dataset → grant
        locks = f" {org_clause} FOR UPDATE OF d" + (", g" if analyst else "")
    return statement_text(query, dialect) + locks


def read_levels(
    conn: Connection,
    dataset_id: str,
    *,
    scope: str | None,
    analyst: str | None,
    org_lock: OrgLock | None,
    invocation_id: str | None = None,
    then: Callable[[], object] | None = None,
) -> Locked | None:
    """The levels of an invocation on ``dataset_id`` as seen by a caller confined to
    ``scope`` (an organisation; ``None``: all) and, for an analyst, holding a grant; locked
    when ``org_lock`` is given. ``None`` when the caller may not see the dataset (or it does
    not exist): nothing was locked then. ``then``: as for :func:`app.db.driver.run`."""
    sql = _lock_sql(
        conn.dialect.name,
        org_lock,
        analyst is not None,
        scope is not None,
        invocation_id is not None,
    )
    params: dict[str, Any] = {"dataset": dataset_id, **visibility_params(scope, analyst)}
    if invocation_id is not None:
        params["invocation"] = invocation_id
    rows = run(conn, sql, params, then=then)
    if not rows:
        return None
    return _locked(rows[0], loader(conn), analyst is not None, invocation_id is not None)


def read_many_levels(
    conn: Connection,
    dataset_ids: Sequence[str],
    *,
    scope: str | None,
    analyst: str | None,
    then: Callable[[], object] | None = None,
) -> dict[str, Locked]:
    """The levels of several datasets, as :func:`read_levels` reads one, locked in one
    statement in the order of the datasets' ids, every organisation row shared (the caller
    checks that none has a cap: a capped organisation's row is to be held alone). The datasets
    the caller may not see are missing from the answer: nothing of theirs was locked.
    ``then``: as for :func:`app.db.driver.run`."""
    sql = _lock_sql(
        conn.dialect.name, "share", analyst is not None, scope is not None, False, len(dataset_ids)
    )
    params: dict[str, Any] = {f"dataset{i}": d for i, d in enumerate(dataset_ids)}
    params.update(visibility_params(scope, analyst))
    load = loader(conn)
    rows = run(conn, sql, params, then=then)
    found = (_locked(row, load, analyst is not None, False) for row in rows)
    return {locked.dataset.id: locked for locked in found}


def _locked(
    row: Sequence[Any], load: Callable[[Any], Any], grant: bool, invocation: bool
) -> Locked:
    """A row of :func:`_lock_sql`'s statement as the levels it locked."""
    dataset = DatasetRow(
        row[0], row[1], load(row[2]), load(row[3]), row[4], row[5], load(row[6]), load(row[7])
    )
    org = OrgRow(
        row[8], load(row[9]), load(row[10]), load(row[11]), row[12], row[13], load(row[14])
    )
    org.cap_closed_json = load(row[15])
    rest = row[16:]
    grant_row = None
    if grant:
        grant_row = GrantRow(rest[0], rest[1], load(rest[2]), load(rest[3]), rest[4])
        rest = rest[5:]
    inv = None
    if invocation and rest[0] is not None:
        inv = InvocationRow(
            rest[0], rest[1], rest[2], load(rest[3]), load(rest[4]), load(rest[5]), load(rest[6])
        )
    return Locked(org, dataset, grant_row, inv)


@lru_cache(maxsize=4)
def _grant_sql(dialect: str) -> str:
    lock = " FOR UPDATE" if dialect == "postgresql" else ""
    p = partial(param, dialect)
    return (
        "SELECT id, principal_id, quota_config_json, quota_state_json, granted_seq FROM grants"
        f" WHERE dataset_id = {p('dataset')} AND principal_id = {p('principal')}{lock}"
    )


def lock_grant(conn: Connection, dataset_id: str, principal_id: str) -> GrantRow | None:
    """Another analyst's grant (settled by the admin), locked after the dataset (the fixed
    order's last lock)."""
    sql = _grant_sql(conn.dialect.name)
    rows = run(conn, sql, {"dataset": dataset_id, "principal": principal_id})
    row = rows[0] if rows else None
    if row is None:
        return None
    load = loader(conn)
    return GrantRow(row[0], row[1], load(row[2]), load(row[3]), row[4])


# ---------------------------------------------------------------------------- idempotency
@lru_cache(maxsize=128)
def _stored_sql(dialect: str, n: int) -> str:
    keys = ", ".join(param(dialect, f"k{i}") for i in range(n))
    return (
        'SELECT "key", fingerprint, outcome, response_body FROM idempotency_keys'
        f' WHERE principal_id = {param(dialect, "principal")} AND "key" IN ({keys})'
    )


def stored_responses(
    conn: Connection, principal_id: str, keys: Iterable[str]
) -> dict[str, StoredResponse]:
    """The stored responses of ``principal_id`` under ``keys`` (one query)."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    params = {"principal": principal_id} | {f"k{i}": k for i, k in enumerate(wanted)}
    rows = run(conn, _stored_sql(conn.dialect.name, len(wanted)), params)
    return {
        key: StoredResponse(fingerprint, outcome, body) for key, fingerprint, outcome, body in rows
    }
