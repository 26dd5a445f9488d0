"""The budget aggregate: load a dataset's filter, append to its ledger, keep the head current."""

from __future__ import annotations

from typing import Any, Unpack

from app.accounting import (
    ACCOUNTING_VERSION,
    AccountingConfig,
    FilterState,
    config_from_json,
    state_from_json,
)
from app.db.models import Dataset, Grant, LedgerCheckpoint, LedgerEntry, Organisation
from app.db.uow import UnitOfWork
from app.ledger import EntryContent, EntryKind, Signer, next_entry
from app.services.errors import ConcurrentUpdate, NotFound
from app.services.principals import Principal, Role


def may_see(uow: UnitOfWork, principal: Principal, ds: Dataset) -> bool:
    """Admin: all; curators and auditors: their organisation's datasets; analysts: only the
    datasets they are granted (an ungranted dataset is indistinguishable from a missing one)."""
    if not principal.can_see(ds.organisation):
        return False
    if principal.role is Role.ANALYST:
        return uow.grants.get(ds.id, principal.id) is not None
    return True


def visible_dataset(
    uow: UnitOfWork, principal: Principal, dataset_id: str, *, lock: bool
) -> Dataset:
    """The dataset if the principal may see it, else :class:`NotFound` (no cross-organisation
    existence leak). ``lock=True`` holds the aggregate for the rest of the transaction."""
    ds = uow.datasets.get(dataset_id)
    if ds is None or not may_see(uow, principal, ds):
        raise NotFound(f"dataset '{dataset_id}' not found")
    if lock:
        locked = uow.datasets.get_for_update(dataset_id)
        assert locked is not None
        return locked
    return ds


def lock_levels(
    uow: UnitOfWork, principal: Principal, dataset_id: str, *, admitting: bool = False
) -> tuple[Organisation | None, Dataset, Grant | None]:
    """Lock every budget level of an invocation on ``dataset_id`` in the one fixed order
    organisation → dataset → the caller's grant (quota), so that writers spending at several
    levels never wait on each other in a cycle (no deadlocks). The dataset's organisation never
    changes, so reading it before taking the locks is safe.

    ``admitting``: an admission under an organisation without a cap does not write the
    organisation row, so it shares the row instead of holding it alone; otherwise every
    admission on any dataset of the organisation would queue behind every other (the service
    benchmark measured 76 req/s on 1,000 datasets of one organisation against 118 with one
    organisation each). Settle and cancel may write the cap's state and always hold it alone.
    """
    ds = uow.datasets.get(dataset_id)
    if ds is None or not may_see(uow, principal, ds):
        raise NotFound(f"dataset '{dataset_id}' not found")
    seen = uow.organisations.get(ds.organisation)
    if admitting and seen is not None and seen.cap_json is None:
        org = uow.organisations.get_for_share(ds.organisation)
        if org is not None and org.cap_json is not None:
            # a cap was set between the two reads: a shared lock must not be upgraded (two
            # sharers upgrading deadlock), so the caller retries and locks the row alone
            raise ConcurrentUpdate("the organisation's cap changed concurrently; retry")
    else:
        org = uow.organisations.get_for_update(ds.organisation)
    locked = uow.datasets.get_for_update(dataset_id)
    assert locked is not None
    grant = None
    if principal.role is Role.ANALYST:
        grant = uow.grants.get_for_update(dataset_id, principal.id)
        if grant is None:  # revoked meanwhile
            raise NotFound(f"dataset '{dataset_id}' not found")
    return org, locked, grant


def load_filter(ds: Dataset) -> tuple[AccountingConfig, FilterState]:
    """The dataset's configuration and current state (O(1): no ledger fold)."""
    config = config_from_json(ds.config_json)
    return config, state_from_json(config, ds.state_json)


def append_entry(
    uow: UnitOfWork,
    ds: Dataset,
    *,
    kind: EntryKind,
    actor: str,
    at: str,
    state: dict[str, Any],
    **content: Unpack[EntryContent],
) -> LedgerEntry:
    """Append the next entry of ``ds``'s chain and move the dataset's head and state with it;
    sign the new head when the unit of work's signer asks for it (same transaction).

    The caller holds the aggregate (``visible_dataset(lock=True)`` or a new dataset), so
    ``last_seq + 1`` is the next gapless sequence number.
    """
    made = next_entry(
        dataset_id=ds.id,
        head_seq=ds.last_seq,
        head_hash=ds.head_hash,
        kind=kind,
        actor=actor,
        at=at,
        accounting_version=ACCOUNTING_VERSION,
        state=state,
        **content,
    )
    entry = LedgerEntry.from_export(made.to_export())
    uow.ledger.append(entry)
    ds.last_seq = entry.seq
    ds.head_hash = entry.hash
    ds.state_json = state
    config = content.get("config")
    if config is not None:
        ds.config_json = config
    ds.updated_at = at
    signer = uow.signer
    if signer is not None and signer.due(entry.seq):
        record_checkpoint(uow, signer, ds.id, entry.seq, entry.hash, entry.at)
    return entry


def record_checkpoint(
    uow: UnitOfWork, signer: Signer, dataset_id: str, seq: int, head_hash: str, at: str
) -> LedgerCheckpoint:
    """Sign ``(dataset, seq, head hash)`` and store the checkpoint in the caller's transaction."""
    row = LedgerCheckpoint(
        dataset_id=dataset_id,
        seq=seq,
        head_hash=head_hash,
        signed_at=at,
        key_id=signer.key_id,
        signature=signer.sign(dataset_id, seq, head_hash, at),
    )
    uow.checkpoints.add(row)
    return row
