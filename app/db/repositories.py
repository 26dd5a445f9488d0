"""Repositories: queries over one session. They never commit (the unit of work does)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from sqlalchemy import Select, Table, or_, select
from sqlalchemy.orm import Session

from app.db.models import (
    ApiKey,
    Dataset,
    Grant,
    Invocation,
    LedgerCheckpoint,
    LedgerEntry,
    Organisation,
    Principal,
)
from app.db.visibility import visibility_params, visible

_DATASETS = cast(Table, Dataset.__table__)
_GRANTS = cast(Table, Grant.__table__)


class DatasetRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, dataset: Dataset) -> None:
        self.session.add(dataset)

    def get(self, dataset_id: str) -> Dataset | None:
        return self.session.get(Dataset, dataset_id)

    def get_for_update(self, dataset_id: str) -> Dataset | None:
        """Load the budget aggregate and hold it until the transaction ends.

        Why: check-and-charge must see the state no other writer can change before commit.
        On PostgreSQL this is ``SELECT … FOR UPDATE`` (a row lock, enough under
        READ COMMITTED). SQLite drops ``FOR UPDATE``; there the write transaction already began
        with ``BEGIN IMMEDIATE`` (see :mod:`app.db.engine`), which holds the database's write
        lock. ``populate_existing`` makes sure we use the row as locked, not a cached copy.
        """
        stmt = (
            select(Dataset)
            .where(Dataset.id == dataset_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return self.session.scalars(stmt).one_or_none()

    def visible(
        self, dataset_id: str, *, scope: str | None, analyst: str | None, lock: bool = False
    ) -> Dataset | None:
        """The dataset if a caller confined to ``scope`` (``None``: all organisations) and, for
        an ``analyst``, to its granted datasets may see it (:func:`app.db.visibility.visible`),
        else ``None``, as for a missing one. ``lock``: hold it until the transaction ends, as
        :meth:`get_for_update` does (only the dataset's row: ``FOR UPDATE OF datasets``)."""
        stmt = _visible(select(Dataset).where(Dataset.id == dataset_id), scope, analyst)
        if lock:
            stmt = stmt.with_for_update(of=Dataset).execution_options(populate_existing=True)
        return self.session.scalars(stmt, visibility_params(scope, analyst)).one_or_none()

    def list(
        self, *, scope: str | None, analyst: str | None, limit: int, offset: int
    ) -> Sequence[Dataset]:
        """The datasets a caller confined so may see (as :meth:`visible`), oldest first."""
        stmt = select(Dataset).order_by(Dataset.created_at, Dataset.id).limit(limit).offset(offset)
        stmt = _visible(stmt, scope, analyst)
        return self.session.scalars(stmt, visibility_params(scope, analyst)).all()

    def named(self, organisation_id: str, name: str) -> Sequence[str]:
        """The ids of the organisation's datasets called ``name``, oldest first."""
        stmt = (
            select(Dataset.id)
            .where(Dataset.organisation == organisation_id, Dataset.name == name)
            .order_by(Dataset.created_at, Dataset.id)
        )
        return self.session.scalars(stmt).all()

    def of_organisation(self, organisation_id: str) -> Sequence[Dataset]:
        """Every dataset of one organisation, oldest first (the caller checked it may see it)."""
        stmt = (
            select(Dataset)
            .where(Dataset.organisation == organisation_id)
            .order_by(Dataset.created_at, Dataset.id)
        )
        return self.session.scalars(stmt).all()


def _visible(query: Select[Dataset], scope: str | None, analyst: str | None) -> Select[Dataset]:
    """``query`` narrowed to what the caller may see (the rule's parameters bound at execution)."""
    return visible(query, _DATASETS, _GRANTS, scoped=scope is not None, analyst=analyst is not None)


@dataclass(frozen=True, slots=True)
class LedgerFilter:
    """Optional filters of a ledger page (all conjunctive)."""

    since: str | None = None
    until: str | None = None
    actor: str | None = None
    kinds: tuple[str, ...] = ()
    #: only the first entry and those with an organisation part (what the cap's replay reads)
    cap_parts: bool = False


class LedgerRepository:
    """A dataset's ledger, read (entries are written by :func:`app.db.writes.write` only)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def page(
        self,
        dataset_id: str,
        *,
        after_seq: int,
        limit: int,
        up_to_seq: int,
        where: LedgerFilter | None = None,
    ) -> Sequence[LedgerEntry]:
        """Entries with ``after_seq < seq ≤ up_to_seq`` matching ``where``, in ``seq`` order."""
        stmt = (
            select(LedgerEntry)
            .where(
                LedgerEntry.dataset_id == dataset_id,
                LedgerEntry.seq > after_seq,
                LedgerEntry.seq <= up_to_seq,
            )
            .order_by(LedgerEntry.seq)
            .limit(limit)
        )
        where = where or LedgerFilter()
        if where.since is not None:
            stmt = stmt.where(LedgerEntry.at >= where.since)
        if where.until is not None:
            stmt = stmt.where(LedgerEntry.at < where.until)
        if where.actor is not None:
            stmt = stmt.where(LedgerEntry.actor == where.actor)
        if where.kinds:
            stmt = stmt.where(LedgerEntry.kind.in_(where.kinds))
        if where.cap_parts:
            stmt = stmt.where(or_(LedgerEntry.seq == 1, LedgerEntry.org.is_not(None)))
        return self.session.scalars(stmt).all()

    def hashes(self, dataset_id: str, up_to_seq: int) -> list[str]:
        """The ``hash`` of every entry ``1..up_to_seq``, in ``seq`` order: the leaves of the
        ledger's Merkle tree of that size (one query, on the ``(dataset_id, seq)`` index)."""
        stmt = (
            select(LedgerEntry.hash)
            .where(LedgerEntry.dataset_id == dataset_id, LedgerEntry.seq <= up_to_seq)
            .order_by(LedgerEntry.seq)
        )
        return list(self.session.scalars(stmt).all())

    def last_of(self, dataset_id: str, kinds: Sequence[str]) -> LedgerEntry | None:
        """The dataset's most recent entry of one of ``kinds`` (a status summary counts the
        last admitted registration's declaration: :func:`app.services.datasets.get_dataset`).
        Read backwards on the ``(dataset_id, seq)`` index from the head."""
        stmt = (
            select(LedgerEntry)
            .where(LedgerEntry.dataset_id == dataset_id, LedgerEntry.kind.in_(kinds))
            .order_by(LedgerEntry.seq.desc())
            .limit(1)
        )
        return self.session.scalars(stmt).first()

    def for_invocation(self, dataset_id: str, invocation_id: str) -> Sequence[LedgerEntry]:
        stmt = (
            select(LedgerEntry)
            .where(LedgerEntry.dataset_id == dataset_id, LedgerEntry.invocation_id == invocation_id)
            .order_by(LedgerEntry.seq)
        )
        return self.session.scalars(stmt).all()


class InvocationRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, invocation: Invocation) -> None:
        self.session.add(invocation)

    def get(self, dataset_id: str, invocation_id: str) -> Invocation | None:
        inv = self.session.get(Invocation, invocation_id)
        return inv if inv is not None and inv.dataset_id == dataset_id else None


class ApiKeyRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, key_id: str) -> ApiKey | None:
        return self.session.get(ApiKey, key_id)

    def by_hash(self, key_hash: str) -> ApiKey | None:
        stmt = select(ApiKey).where(ApiKey.key_hash == key_hash)
        return self.session.scalars(stmt).one_or_none()

    def add(self, key: ApiKey) -> None:
        self.session.add(key)


class OrganisationRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, organisation: Organisation) -> None:
        self.session.add(organisation)

    def get(self, organisation_id: str) -> Organisation | None:
        return self.session.get(Organisation, organisation_id)

    def get_for_update(self, organisation_id: str) -> Organisation | None:
        """Hold the organisation-level aggregate (its cap filter) until the transaction ends.

        Why: setting a cap must not race with admissions spending under it; admissions take
        the row in the same statement as the dataset (the write path's lock statement,
        :func:`app.writepath.admission.read_levels`).
        Lock order everywhere: organisation → dataset → grant (a fixed order, so no two writers
        wait on each other in a cycle).
        """
        stmt = (
            select(Organisation)
            .where(Organisation.id == organisation_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return self.session.scalars(stmt).one_or_none()

    def by_name(self, name: str) -> Organisation | None:
        return self.session.scalars(
            select(Organisation).where(Organisation.name == name)
        ).one_or_none()

    def list(self, only: str | None) -> Sequence[Organisation]:
        stmt = select(Organisation).order_by(Organisation.created_at, Organisation.id)
        if only is not None:
            stmt = stmt.where(Organisation.id == only)
        return self.session.scalars(stmt).all()


class PrincipalRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, principal: Principal) -> None:
        self.session.add(principal)

    def get(self, principal_id: str) -> Principal | None:
        return self.session.get(Principal, principal_id)

    def with_role(self, role: str) -> Sequence[Principal]:
        stmt = select(Principal).where(Principal.role == role)
        return self.session.scalars(stmt.order_by(Principal.created_at, Principal.id)).all()

    def list(self, organisation: str | None) -> Sequence[Principal]:
        stmt = select(Principal).order_by(Principal.created_at, Principal.id)
        if organisation is not None:
            stmt = stmt.where(Principal.organisation_id == organisation)
        return self.session.scalars(stmt).all()


class GrantRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, grant: Grant) -> None:
        self.session.add(grant)

    def delete(self, grant: Grant) -> None:
        self.session.delete(grant)

    def _select(self, dataset_id: str, principal_id: str) -> Select[Grant]:
        return select(Grant).where(
            Grant.dataset_id == dataset_id, Grant.principal_id == principal_id
        )

    def get(self, dataset_id: str, principal_id: str) -> Grant | None:
        return self.session.scalars(self._select(dataset_id, principal_id)).one_or_none()

    def get_for_update(self, dataset_id: str, principal_id: str) -> Grant | None:
        """Hold the analyst's quota aggregate; taken last (after organisation and dataset)."""
        stmt = (
            self._select(dataset_id, principal_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        return self.session.scalars(stmt).one_or_none()

    def for_dataset(self, dataset_id: str) -> Sequence[Grant]:
        stmt = select(Grant).where(Grant.dataset_id == dataset_id).order_by(Grant.id)
        return self.session.scalars(stmt).all()

    def for_principal(self, principal_id: str) -> Sequence[Grant]:
        stmt = select(Grant).where(Grant.principal_id == principal_id).order_by(Grant.id)
        return self.session.scalars(stmt).all()


class CheckpointRepository:
    """Signed checkpoints of ledger heads (append-only; written with the ledger's entries,
    :func:`app.db.writes.write`)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, dataset_id: str, seq: int, key_id: str) -> LedgerCheckpoint | None:
        stmt = select(LedgerCheckpoint).where(
            LedgerCheckpoint.dataset_id == dataset_id,
            LedgerCheckpoint.seq == seq,
            LedgerCheckpoint.key_id == key_id,
        )
        return self.session.scalars(stmt).one_or_none()

    def page(self, dataset_id: str, *, after_seq: int, limit: int) -> Sequence[LedgerCheckpoint]:
        """Checkpoints of one dataset with ``seq > after_seq``, oldest first."""
        stmt = (
            select(LedgerCheckpoint)
            .where(LedgerCheckpoint.dataset_id == dataset_id, LedgerCheckpoint.seq > after_seq)
            .order_by(LedgerCheckpoint.seq, LedgerCheckpoint.id)
            .limit(limit)
        )
        return self.session.scalars(stmt).all()
