"""The budget aggregate: load a dataset's filter, append to its ledger, keep the head current."""

from __future__ import annotations

from typing import Any

from app.accounting import (
    ACCOUNTING_VERSION,
    AccountingConfig,
    FilterState,
    config_from_json,
    state_from_json,
)
from app.db.models import Dataset, LedgerEntry
from app.db.uow import UnitOfWork
from app.ledger_chain import entry_hash
from app.services.errors import NotFound
from app.services.principals import Principal


def visible_dataset(
    uow: UnitOfWork, principal: Principal, dataset_id: str, *, lock: bool
) -> Dataset:
    """The dataset if the principal may see it, else :class:`NotFound` (no cross-organisation
    existence leak). ``lock=True`` holds the aggregate for the rest of the transaction."""
    ds = uow.datasets.get_for_update(dataset_id) if lock else uow.datasets.get(dataset_id)
    if ds is None or not principal.can_see(ds.organisation):
        raise NotFound(f"dataset '{dataset_id}' not found")
    return ds


def load_filter(ds: Dataset) -> tuple[AccountingConfig, FilterState]:
    """The dataset's configuration and current state (O(1): no ledger fold)."""
    config = config_from_json(ds.config_json)
    return config, state_from_json(config, ds.state_json)


def append_entry(
    uow: UnitOfWork,
    ds: Dataset,
    *,
    kind: str,
    actor: str,
    at: str,
    state: dict[str, Any],
    invocation_id: str | None = None,
    declaration: dict[str, Any] | None = None,
    request: dict[str, Any] | None = None,
    charge: dict[str, Any] | None = None,
    requested: dict[str, Any] | None = None,
    refund: dict[str, Any] | None = None,
    reservation: dict[str, Any] | None = None,
    reason: str | None = None,
    config: dict[str, Any] | None = None,
) -> LedgerEntry:
    """Append the next entry of ``ds``'s chain and move the dataset's head and state with it.

    The caller holds the aggregate (``visible_dataset(lock=True)`` or a new dataset), so
    ``last_seq + 1`` is the next gapless sequence number.
    """
    payload: dict[str, Any] = {
        "dataset_id": ds.id,
        "seq": ds.last_seq + 1,
        "kind": kind,
        "invocation_id": invocation_id,
        "actor": actor,
        "at": at,
        "accounting_version": ACCOUNTING_VERSION,
        "declaration": declaration,
        "request": request,
        "charge": charge,
        "requested": requested,
        "refund": refund,
        "reservation": reservation,
        "reason": reason,
        "config": config,
        "state": state,
        "prev_hash": ds.head_hash,
    }
    digest = entry_hash(payload)
    entry = LedgerEntry.from_payload(payload, digest)
    uow.ledger.append(entry)
    ds.last_seq = entry.seq
    ds.head_hash = digest
    ds.state_json = state
    if config is not None:
        ds.config_json = config
    ds.updated_at = at
    return entry
