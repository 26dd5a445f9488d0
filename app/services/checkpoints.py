"""Signed checkpoints of ledger heads: recording, listing and signing on demand.

The keys, the signed statement and the offline audit are :mod:`odometer_core.ledger.checkpoints`;
the
signer is the application's (``create_app`` builds it from ``ODOMETER_CHECKPOINT_KEY`` and
``ODOMETER_CHECKPOINT_EVERY`` and hands it to the database the units of work are opened on), and
a ledger append signs through it in its own transaction (:func:`app.services._aggregate.
stage_entry`). Unset key = checkpoints disabled, never a throw-away key an auditor could not pin.
"""

from __future__ import annotations

from typing import TypedDict

from sqlalchemy.exc import IntegrityError

from app.db.models import LedgerCheckpoint
from app.db.uow import UnitOfWork
from app.db.writes import Writes
from app.services._aggregate import checkpoint_row, visible_dataset, write_now
from app.services._common import utc_now
from app.services.errors import ConcurrentUpdate, ServiceError
from app.services.principals import Principal
from app.settings import Settings
from odometer_core.ledger.checkpoints import ALGORITHM, Signer, public_pem, signer_from_file


class CheckpointsDisabled(ServiceError):
    """Signing asked for, but no checkpoint key is configured on this server (409: the
    request is valid, this server's configuration cannot apply it)."""

    code = "CheckpointsDisabled"


def signer_from_settings(settings: Settings) -> Signer | None:
    """The configured signer, or ``None`` when checkpoints are disabled (key unset)."""
    path = (settings.checkpoint_key or "").strip()
    if not path:
        return None
    return signer_from_file(path, settings.checkpoint_every)


class CheckpointView(TypedDict):
    """A signed checkpoint as the routes show it (``CheckpointOut``)."""

    dataset_id: str
    seq: int
    head_hash: str
    signed_at: str
    key_id: str
    algorithm: str
    signature: str


class CheckpointPage(TypedDict):
    dataset_id: str
    checkpoints: list[CheckpointView]


class KeyInfo(TypedDict):
    """The verification key of checkpoints (``CheckpointKeyOut``); nulls when none is set."""

    enabled: bool
    algorithm: str
    key_id: str | None
    public_key: str | None
    every: int | None


def to_json(row: LedgerCheckpoint) -> CheckpointView:
    return {
        "dataset_id": row.dataset_id,
        "seq": row.seq,
        "head_hash": row.head_hash,
        "signed_at": row.signed_at,
        "key_id": row.key_id,
        "algorithm": ALGORITHM,
        "signature": row.signature,
    }


def public_key_info(signer: Signer | None) -> KeyInfo:
    """The verification key (PEM and fingerprint), for ``GET /v1/checkpoint-key``; with
    ``enabled`` false and nulls when this server signs no checkpoints."""
    if signer is None:
        return {
            "enabled": False,
            "algorithm": ALGORITHM,
            "key_id": None,
            "public_key": None,
            "every": None,
        }
    return {
        "enabled": True,
        "algorithm": ALGORITHM,
        "key_id": signer.key_id,
        "public_key": public_pem(signer.public_key),
        "every": signer.every,
    }


def list_checkpoints(
    uow: UnitOfWork, principal: Principal, dataset_id: str, *, after_seq: int, limit: int
) -> CheckpointPage:
    """A dataset's checkpoints, oldest first (same visibility as its ledger)."""
    with uow.read_only():
        visible_dataset(uow, principal, dataset_id, lock=False)
        rows = uow.checkpoints.page(dataset_id, after_seq=after_seq, limit=limit)
        return {"dataset_id": dataset_id, "checkpoints": [to_json(r) for r in rows]}


def checkpoint_head(
    uow: UnitOfWork, principal: Principal, dataset_id: str
) -> tuple[CheckpointView, bool]:
    """Sign the dataset's current head now; ``(checkpoint, created)``. Signing a head that
    already has a checkpoint under this key returns that one (``created`` false)."""
    signer = uow.signer
    with uow:
        ds = visible_dataset(uow, principal, dataset_id, lock=False)
        if signer is None:  # after the visibility check: no existence leak
            raise CheckpointsDisabled(
                "checkpoint signing is not configured on this server (ODOMETER_CHECKPOINT_KEY)"
            )
        existing = uow.checkpoints.get(ds.id, ds.last_seq, signer.key_id)
        if existing is not None:
            return to_json(existing), False
        row = checkpoint_row(signer, ds.id, ds.last_seq, ds.head_hash, utc_now())
        body = to_json(LedgerCheckpoint(**row))
        try:
            write_now(uow, Writes(checkpoints=[row]))
            uow.commit()
        except IntegrityError:
            raise ConcurrentUpdate("the same head was signed concurrently; retry") from None
    return body, True
