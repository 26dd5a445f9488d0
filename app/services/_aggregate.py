"""The budget aggregate: load a dataset's filter, append to its ledger, keep the head current."""

from __future__ import annotations

from typing import Any, Unpack

from app.db.admission import DatasetRow, Writes
from app.db.models import Dataset, LedgerCheckpoint, LedgerEntry
from app.db.uow import UnitOfWork
from app.services.errors import NotFound
from app.services.principals import Principal, Role
from odometer_core.accounting import (
    ACCOUNTING_VERSION,
    AccountingConfig,
    FilterState,
    config_from_json,
    state_from_json,
)
from odometer_core.ledger import Entry, EntryContent, EntryKind, Signer, next_entry


def visibility(principal: Principal) -> tuple[str | None, str | None]:
    """What ``principal`` may see of the datasets, as :mod:`app.db.visibility` takes it:
    ``(scope, analyst)``, the one organisation it is confined to (``None`` for the admin: all)
    and, for an analyst, its own id (only the datasets it is granted; ``None`` otherwise)."""
    scope = None if principal.is_admin else principal.organisation
    return scope, principal.id if principal.role is Role.ANALYST else None


def visible_dataset(
    uow: UnitOfWork, principal: Principal, dataset_id: str, *, lock: bool
) -> Dataset:
    """The dataset if the principal may see it, else :class:`NotFound` (no cross-organisation
    existence leak). ``lock=True`` holds the aggregate for the rest of the transaction."""
    scope, analyst = visibility(principal)
    ds = uow.datasets.visible(dataset_id, scope=scope, analyst=analyst, lock=lock)
    if ds is None:
        raise NotFound(f"dataset '{dataset_id}' not found")
    return ds


def load_filter(ds: Dataset | DatasetRow) -> tuple[AccountingConfig, FilterState]:
    """The dataset's configuration and current state (O(1): no ledger fold)."""
    config = config_from_json(ds.config_json)
    return config, state_from_json(config, ds.state_json)


def _next_entry(
    ds: Dataset | DatasetRow,
    *,
    kind: EntryKind,
    actor: str,
    at: str,
    state: dict[str, Any],
    **content: Unpack[EntryContent],
) -> Entry:
    """The entry that follows ``ds``'s head."""
    return next_entry(
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
    made = _next_entry(ds, kind=kind, actor=actor, at=at, state=state, **content)
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


def stage_entry(
    uow: UnitOfWork,
    writes: Writes,
    ds: DatasetRow,
    *,
    kind: EntryKind,
    actor: str,
    at: str,
    state: dict[str, Any],
    **content: Unpack[EntryContent],
) -> int:
    """:func:`append_entry` for the Core write path: the next entry of ``ds``'s chain joins
    ``writes`` and the locked row's head and state move with it (written together by
    :func:`app.db.admission.write`). Returns the entry's ``seq``."""
    made = _next_entry(ds, kind=kind, actor=actor, at=at, state=state, **content)
    writes.ledger.append(made.to_export())
    ds.last_seq, ds.head_hash, ds.state_json, ds.updated_at = made.seq, made.hash, state, at
    signer = uow.signer
    if signer is not None and signer.due(made.seq):
        writes.checkpoints.append(
            {
                "dataset_id": ds.id,
                "seq": made.seq,
                "head_hash": made.hash,
                "signed_at": at,
                "key_id": signer.key_id,
                "signature": signer.sign(ds.id, made.seq, made.hash, at),
            }
        )
    return made.seq


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
